"""The one `main` contract of every command, and the stop points kill tests use."""

import errno
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import pytest

from electra_tf import cli
from electra_tf import errors
from electra_tf import stop_points
from tests.conftest import run_script

REPO = pathlib.Path(__file__).resolve().parent.parent

COMMAND = textwrap.dedent("""
    from absl import flags
    from electra_tf import cli
    from electra_tf.errors import ConfigError
    flags.DEFINE_integer("n", 1, "A number.")
    def main():
      if flags.FLAGS.n < 0:
        raise ConfigError(f"--n: {flags.FLAGS.n} must be >= 0")
      if flags.FLAGS.n == 4:
        raise ValueError("a bug, not the user's")
      print("n is", flags.FLAGS.n)
      return 3 if flags.FLAGS.n == 3 else None
    cli.run(main, "prog")
""")


def _command(*argv, env=None):
  return subprocess.run([sys.executable, "-c", COMMAND, *argv], cwd=REPO, text=True,
                        capture_output=True, timeout=120, env=env)


def test_main_contract_exit_status_and_one_line_errors():
  ok = _command("--n=2")
  assert ok.returncode == 0 and ok.stdout == "n is 2\n" and ok.stderr == ""
  assert _command("--n=3").returncode == 3  # main's return value is the status
  for argv, message in [(("--n=-1",), "--n: -1 must be >= 0"),
                        (("--n=x",), "flag --n=x: invalid literal for int() with base 10: 'x'"),
                        (("--m=1",), "Unknown command line flag 'm'"),
                        (("--n=1", "extra"),
                         "unexpected argument(s): extra (every option is a --flag)")]:
    failed = _command(*argv)
    assert failed.returncode == 2, failed.stderr
    assert failed.stderr.strip().splitlines() == [f"prog: error: {message}"]
  traced = _command("--n=-1", env=dict(os.environ, ELECTRA_TF_TRACEBACK="1"))
  assert "Traceback" in traced.stderr and traced.returncode == 1
  bug = _command("--n=4")  # a plain ValueError is a bug: its traceback, exit status 1
  assert bug.returncode == 1 and "Traceback" in bug.stderr
  assert bug.stderr.strip().splitlines()[-1] == "ValueError: a bug, not the user's"
  for help_flag in ("--help", "-?", "--helpshort", "--helpfull", "--helpxml"):
    shown = _command(help_flag)  # the help on stdout, exit status 0 (absl's is 1)
    assert shown.returncode == 0 and "A number." in shown.stdout, (help_flag, shown.stderr)


@pytest.mark.parametrize("error", [
    errors.ConfigError("--n: -1 must be >= 0"), errors.DataError("vocab.txt:3: bad line"),
    errors.CheckpointError("ckpt: not found"), errors.TrainingError("loss is NaN"),
    FileNotFoundError(errno.ENOENT, "No such file or directory", "in.txt"),
    IsADirectoryError(errno.EISDIR, "Is a directory", "out"),
    OSError(errno.ENOSPC, "No space left on device"),
    OSError(errno.EROFS, "Read-only file system")])
def test_user_errors_are_one_line_and_exit_status_2(error, capsys, monkeypatch):
  monkeypatch.delenv("ELECTRA_TF_TRACEBACK", raising=False)
  with pytest.raises(SystemExit) as exited:
    with cli.one_line_errors("prog"):
      raise error
  assert exited.value.code == 2
  assert capsys.readouterr().err.splitlines() == [f"prog: error: {errors.error_message(error)}"]


@pytest.mark.parametrize("error", [
    ValueError("a bug"), TypeError("a bug"), KeyError("a bug"), AssertionError("a bug"),
    OSError(errno.EIO, "Input/output error")])
def test_other_errors_are_not_swallowed(error, capsys, monkeypatch):
  monkeypatch.delenv("ELECTRA_TF_TRACEBACK", raising=False)
  with pytest.raises(type(error)) as raised:
    with cli.one_line_errors("prog"):
      raise error
  assert raised.value is error and capsys.readouterr().err == ""


def test_a_process_freezes_at_its_stop_point_and_only_there():
  script = ("from electra_tf import stop_points\n"
            "for _ in range(3):\n  stop_points.reached('eval_batch')\n"
            "  print('after', flush=True)\n")
  env = dict(os.environ, **stop_points.environment("eval_batch", 2))
  process = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, text=True)
  try:
    assert stop_points.wait_until_stopped(process)
    assert stop_points.is_stopped(process.pid)
    process.send_signal(signal.SIGCONT)
    assert process.communicate(timeout=120)[0] == "after\n" * 3
  finally:
    process.kill()
  # Not asked to stop (or at another point): runs through.
  other = subprocess.Popen([sys.executable, "-c", script], cwd=REPO,
                           env=dict(os.environ, **stop_points.environment("export_written")),
                           stdout=subprocess.PIPE, text=True)
  assert not stop_points.wait_until_stopped(other)
  assert other.communicate(timeout=120)[0] == "after\n" * 3


def test_official_hyphenated_flag_names_and_space_separated_values():
  """google-research/electra's command lines: `--data-dir DIR --model-name NAME`."""
  ok = _command("--n", "2")
  assert ok.returncode == 0 and ok.stdout == "n is 2\n"
  from absl import flags  # pylint: disable=g-import-not-at-top
  from electra_tf import cli  # pylint: disable=g-import-not-at-top
  values = flags.FlagValues()
  flags.DEFINE_string("data_dir", None, "", flag_values=values)
  flags.DEFINE_boolean("do_lower_case", True, "", flag_values=values)
  argv = ["prog", "--data-dir", "a-b", "--model-name=x", "--no-do-lower-case",
          "--hparams={\"a-b\": 1}", "-h"]
  assert cli.underscored_flag_names(argv, values) == [
      "prog", "--data_dir", "a-b", "--model-name=x", "--nodo_lower_case",
      "--hparams={\"a-b\": 1}", "-h"]  # unknown names are left for absl to refuse


def test_the_official_readme_command_lines_run_unchanged(tmp_path, monkeypatch):
  """The pre-training and fine-tuning lines of the official README, as written
  (they reach the job's own checks: here, a data_dir with no vocab), run in
  this process through the scripts' entry point."""
  monkeypatch.chdir(tmp_path)
  for script, argv, message in [
      ("run_pretraining.py", ["--data-dir", str(tmp_path), "--model-name",
                              "electra_small_owt"],
       f"vocab file {tmp_path}/vocab.txt: does not exist"),
      ("run_finetuning.py", ["--data-dir", str(tmp_path), "--model-name", "electra_base",
                             "--hparams", '{"model_size": "base", "task_names": ["mnli"]}'],
       f"vocab file {tmp_path}/vocab.txt: does not exist")]:
    result = run_script([script, *argv])
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last == f"{script}: error: {message}", last


@pytest.mark.slow
@pytest.mark.parametrize("module, legacy_keras", [
    ("electra_tf.commands.pretrain", "1"), ("tools", "1"), ("electra_tf.pretrain.config", None)])
def test_commands_load_tensorflow_without_keras_3(module, legacy_keras):
  """A command's process (and a tool's) sets TF_USE_LEGACY_KERAS before
  TensorFlow loads, its models being tf_keras, so `import tensorflow` skips
  Keras 3; importing the library leaves a user's process as it was, where
  TensorFlow loads Keras 3."""
  env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
  code = (f"import os, sys; import {module}; import tensorflow; "
          "print(os.environ.get('TF_USE_LEGACY_KERAS'), 'keras._tf_keras' in sys.modules)")
  run = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, text=True,
                       capture_output=True, timeout=600)
  assert run.returncode == 0, run.stderr[-2000:]
  assert run.stdout.split() == [str(legacy_keras), str(legacy_keras is None)]
