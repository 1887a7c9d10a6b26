"""Shared pytest fixtures: the repository root and the ../shared data folder.

Tests that need ../shared skip with a clear reason when it is absent, except
under CI (CI=true), where its absence is a failure.
"""

import contextlib
import importlib
import io
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Optional, Sequence, Tuple
import unittest.mock

from absl import flags
import pytest

# The commands' process settings (TF_USE_LEGACY_KERAS, TF_CPP_MIN_LOG_LEVEL)
# for the tests' own process and the processes they start, as each command
# sets them.
import electra_tf.commands  # noqa: E402,F401  pylint: disable=unused-import
from electra_tf import cli  # noqa: E402

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_DIR = pathlib.Path(os.environ.get("ELECTRA_TF_SHARED", REPO_ROOT.parent / "shared"))
# The commands the tests start (data_prep/*.py, python -m tools.NAME) import
# electra_tf from this checkout, as `pip install -e .` lets them for a user.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


def _require(path: pathlib.Path) -> pathlib.Path:
  if not path.exists():
    message = f"{path} is absent (the ../shared folder beside the checkout holds it)"
    if os.environ.get("CI", "").lower() == "true":
      pytest.fail(message + "; CI=true requires it")
    pytest.skip(message)
  return path


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
  return REPO_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
  return _require(SHARED_DIR)


@pytest.fixture(scope="session")
def bert_vocab(shared_dir) -> pathlib.Path:
  return _require(shared_dir / "data" / "vocab" / "bert_uncased_vocab.txt")


@pytest.fixture(scope="session")
def corpus_dir(shared_dir) -> pathlib.Path:
  return _require(shared_dir / "data" / "corpus")


@pytest.fixture(scope="session")
def finetuning_data_dir(shared_dir) -> pathlib.Path:
  return _require(shared_dir / "data" / "finetuning_data")


@pytest.fixture(scope="session")
def official_debug_fixture(shared_dir) -> pathlib.Path:
  return _require(shared_dir / "fixtures" / "official_debug")


@pytest.fixture(scope="session")
def official_optimizer_fixture(shared_dir) -> pathlib.Path:
  return _require(shared_dir / "fixtures" / "official_optimizer")


@pytest.fixture(scope="session")
def official_trajectory_fixture(shared_dir) -> pathlib.Path:
  return _require(shared_dir / "fixtures" / "official_trajectory")


def make_pretraining_data_dir(root: pathlib.Path, corpus_dir: pathlib.Path,
                              bert_vocab: pathlib.Path, num_lines: int,
                              num_out_files: int) -> pathlib.Path:
  """An official-layout data_dir under `root`: vocab.txt and
  pretrain_tfrecords/ (max_seq_length 32) built from the first `num_lines`
  lines of WikiText-2 valid (in corpus/)."""
  from electra_tf.pretrain import tfrecords  # pylint: disable=g-import-not-at-top
  (root / "corpus").mkdir(parents=True)
  lines = (corpus_dir / "wikitext-2" / "wiki.valid.raw").read_text(
      encoding="utf-8").splitlines()[:num_lines]
  (root / "corpus" / "wiki.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
  tfrecords.build_tfrecords(str(root / "corpus"), str(bert_vocab),
                            str(root / "pretrain_tfrecords"), max_seq_length=32,
                            num_out_files=num_out_files, num_processes=1, seed=0,
                            log=lambda _: None)
  (root / "vocab.txt").write_bytes(bert_vocab.read_bytes())
  return root


def run_command(module_name: str, argv: Sequence[str], program: str,
                python: Optional[str] = None) -> subprocess.CompletedProcess:
  """The command of `module_name` (a module with define_flags() and main():
  electra_tf.commands.*, tools.*) run by its entry point, cli.run, as
  `program argv...` runs it, in this process: no Python or TensorFlow start.
  `python`, when given, is its sys.executable: command_python() forks what
  it starts with sys.executable, as from a forked command (tests/zygote.py).
  Its flags are defined for the run and removed afterwards.  Returns its exit
  status and what it printed to sys.stdout and sys.stderr, as subprocess.run
  would."""
  command = importlib.import_module(module_name)
  before = set(flags.FLAGS)
  command.define_flags()
  stdout, stderr = io.StringIO(), io.StringIO()
  try:
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), \
        unittest.mock.patch.object(sys, "argv", [program, *argv]), \
        unittest.mock.patch.object(sys, "executable", python or sys.executable):
      try:
        cli.run(command.main, program)
      except SystemExit as e:
        status = e.code or 0
  finally:
    flags.FLAGS.unparse_flags()
    for name in set(flags.FLAGS) - before:
      delattr(flags.FLAGS, name)
    if "tf_keras" in sys.modules:  # free the command's models and traced functions
      sys.modules["tf_keras"].backend.clear_session()
  return subprocess.CompletedProcess([program, *argv], status, stdout.getvalue(),
                                     stderr.getvalue())


# The scripts run_script runs in the test's process, and their command modules.
SCRIPT_COMMANDS = {"run_pretraining.py": "electra_tf.commands.pretrain",
                   "run_finetuning.py": "electra_tf.commands.finetune",
                   "data_prep/build_vocab.py": "electra_tf.commands.build_vocab"}


def run_script(argv: Sequence[str]) -> subprocess.CompletedProcess:
  """`python SCRIPT ARGS...` (argv: a script of SCRIPT_COMMANDS, then its
  arguments) run in this process (run_command)."""
  script, *args = argv
  return run_command(SCRIPT_COMMANDS[script], args, pathlib.Path(script).name)


_ZYGOTES = []  # this process's zygote (tests/zygote.py), once started


def zygote():
  """This process's zygote, started on first use (it ends with the test run):
  its `shim` is `python` for a command whose process is not what the test
  checks (tests/zygote.py says what differs from a fresh interpreter)."""
  if not _ZYGOTES:
    from tests import zygote as zygote_lib  # pylint: disable=g-import-not-at-top
    _ZYGOTES.append(zygote_lib.Zygote(pathlib.Path(tempfile.mkdtemp(prefix="zygote-"))))
  return _ZYGOTES[0]


def command_python() -> str:
  """`python` for a command a test starts where the process's start is not
  what it checks: the zygote's shim."""
  return str(zygote().shim)


def pytest_sessionfinish(session, exitstatus):
  del session, exitstatus
  for started in _ZYGOTES:  # waited for: its processes' CPU time counts as ours
    started.stop()
    shutil.rmtree(started.shim.parent.parent, ignore_errors=True)


def sigterm_stop(stderr: str, program: str) -> Tuple[int, str]:
  """(step, checkpoint) of the last line a job stopped by SIGTERM prints
  (asserted to be that line): "<program>: stopped by SIGTERM at step <n>;
  <checkpoint> is saved: rerun the same command to resume"."""
  line = stderr.strip().splitlines()[-1] if stderr.strip() else ""
  stopped = re.fullmatch(rf"{re.escape(program)}: stopped by SIGTERM at step (\d+); (\S+) is "
                         r"saved: rerun the same command to resume", line)
  assert stopped, stderr[-2000:]
  return int(stopped[1]), stopped[2]


def error_line(result: subprocess.CompletedProcess) -> str:
  """The one line a refused command prints: exit status 2, that line alone
  on stderr (asserted)."""
  assert result.returncode == 2, (result.stdout[-2000:], result.stderr[-2000:])
  assert result.stderr.count("\n") == 1, result.stderr[-3000:]
  return result.stderr.rstrip("\n")


def pytest_terminal_summary(terminalreporter):
  """How many documented commands ran and quoted outputs were compared, and
  which blocks are marked as not runnable here, with the reasons
  (tests/test_docs_commands.py)."""
  ran, compared, marked, cpu_seconds = 0, 0, [], []
  for report in terminalreporter.stats.get("passed", []):
    for name, value in getattr(report, "user_properties", ()):
      if name == "documented_commands":
        ran += value["ran"]
        compared += value["compared"]
        marked += value["marked"]
        cpu_seconds += value["cpu_seconds"]
  if ran or marked:
    terminalreporter.write_line(f"documented commands: {ran} ran, {compared} outputs "
                                f"compared, {len(marked)} blocks marked as not runnable here:")
    for line in marked:
      terminalreporter.write_line(f"  {line}")
    pages = {}
    for taken, where in cpu_seconds:
      page = where.rsplit(":", 1)[0]
      pages[page] = pages.get(page, 0.0) + taken
    terminalreporter.write_line("  CPU-seconds of the blocks, by page: " + ", ".join(
        f"{page} {taken:.0f}" for page, taken in pages.items()))
    terminalreporter.write_line("  the costliest blocks: " + ", ".join(
        f"{where} {taken:.0f}" for taken, where in sorted(cpu_seconds, reverse=True)[:8]))


# Two workers (pytest.ini: --dist loadgroup): a test file stays on one worker
# (its module fixtures are built once), and each docs page is a unit of its
# own.  A worker takes the next unit when it runs dry, so a long unit taken
# last keeps one worker busy while the other idles: the longest units of the
# last full run (docs/results/suite_*.txt) start first, the rest follow in
# file order.
LONGEST_FIRST = [
    "tests/test_reliability.py", "tests/test_docs_commands.py::README.md",
    "tests/test_strategies.py", "tests/research/test_official_trajectory.py",
    "tests/research/test_learning_study.py", "tests/research/test_full_label_study.py",
    "tests/test_docs_commands.py::docs/pretraining.md",
    "tests/test_multi_worker.py", "tests/test_hf.py", "tests/test_training.py",
    "tests/test_task_saved_model.py", "tests/test_finetune_run.py", "tests/test_big_batches.py",
]


def scheduling_unit(item: pytest.Item) -> str:
  """The file, or for a documented-commands test the file and the first page
  of its clone (the pages that go on in the README's clone run after it, on
  its worker).  No "]" in it: pytest-xdist reads a node id's group only when
  its last "@" comes after its last "]"."""
  path = item.nodeid.split("::")[0]
  page = getattr(item, "callspec", None) and item.callspec.params.get("page")
  if path.endswith("test_docs_commands.py") and page:
    return f"{path}::{item.module.first_page(page)}"
  return path


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
  del config
  units = [scheduling_unit(item) for item in items]
  rank = {unit: LONGEST_FIRST.index(unit) if unit in LONGEST_FIRST else len(LONGEST_FIRST)
          for unit in units}
  order = sorted(range(len(items)), key=lambda i: (rank[units[i]], i))
  for i in order:
    items[i].add_marker(pytest.mark.xdist_group(units[i]))
  items[:] = [items[i] for i in order]
