"""The README's commands exist as written, and the package installs with its
console scripts.

Every `python ...` command in the README's bash blocks names a script or module
of this checkout, and each --flag it passes is one that command defines
(checked against the command's own --helpfull). The README's install leaves the
package and its console scripts beside the running interpreter, and every
command's --help lists its own flags.
"""

import ast
import functools
import json
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import command_python

REPO = pathlib.Path(__file__).resolve().parent.parent


def command_modules() -> list:
  """Every command: the modules of electra_tf/commands/."""
  return sorted(f"electra_tf.commands.{path.stem}"
                for path in (REPO / "electra_tf" / "commands").glob("*.py")
                if path.stem != "__init__")


def console_scripts() -> dict:
  """pyproject.toml's [project.scripts]: script -> its command module."""
  text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
  section = text.split("[project.scripts]\n", 1)[1].split("\n[", 1)[0]
  return {name: target.split(":")[0]
          for name, target in re.findall(r'^([\w-]+) = "([\w.:]+)"', section, flags=re.M)}


def typed_commands() -> list:
  """(argv after `python`, command module) of each script or module that
  runs a command (run_*.py, data_prep/, python -m electra_tf.export, ...)."""
  paths = [*REPO.glob("run_*.py"), *(REPO / "data_prep").glob("*.py"),
           *(REPO / "electra_tf").rglob("*.py")]
  typed = []
  for path in sorted(paths):
    found = re.search(r"from electra_tf\.commands import (\w+)",
                      path.read_text(encoding="utf-8"))
    if found and path.parent.name != "commands":
      relative = path.relative_to(REPO)
      argv = (["-m", ".".join(relative.with_suffix("").parts)]
              if relative.parts[0] == "electra_tf" else [str(path)])
      typed.append((argv, f"electra_tf.commands.{found.group(1)}"))
  return typed


def readme_commands(text: str):
  """The README's python commands: (argv without the interpreter, the line)."""
  commands = []
  for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
    block = re.sub(r"\\\n\s*", " ", block)
    for line in block.splitlines():
      line = line.split("  #")[0].strip()
      for part in line.split("&&"):
        argv = shlex.split(part.strip())
        while argv and re.match(r"[A-Z_]+=", argv[0]):  # VAR=value python ...
          argv.pop(0)
        if argv and argv[0] in ("python", "python3") and argv[1:3] != ["-m", "pytest"]:
          commands.append((argv[1:], part.strip()))
  return commands


def test_readme_is_a_newcomers_page():
  text = (REPO / "README.md").read_text(encoding="utf-8")
  assert len(text.splitlines()) <= 300
  quickstart = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
  assert re.findall(r"```bash\n(.*?)\n```", quickstart, flags=re.S) == [
      "pip install -r requirements.txt && python run_pretraining.py",
      "pip install -r requirements.txt && python -m pytest -q tests"]
  assert "python3 -m pytest -q tests" in (REPO / ".ci" / "run").read_text()
  for link in re.findall(r"\]\((docs/[^)#]+)", text):
    assert (REPO / link).is_file(), link


def test_readme_names_every_package_the_install_brings():
  """The Requirements paragraph names pyproject.toml's dependencies and its
  `test` extra, each by its distribution name."""
  text = (REPO / "README.md").read_text(encoding="utf-8")
  requirements = text.split("Requirements:", 1)[1].split("\n\n", 1)[0]
  project = (REPO / "pyproject.toml").read_text(encoding="utf-8")
  dependencies = project.split("dependencies = [", 1)[1].split("]", 1)[0]
  extra = project.split("\ntest = [", 1)[1].split("]", 1)[0]
  names = re.findall(r'"([A-Za-z][\w-]*)', dependencies + extra)
  assert len(names) >= 14
  for name in names:
    assert f"`{name}" in requirements, name


def test_readme_commands_are_parsed():
  commands = readme_commands((REPO / "README.md").read_text(encoding="utf-8"))
  scripts = {argv[0] if argv[0] != "-m" else argv[1] for argv, _ in commands}
  assert {"run_pretraining.py", "run_finetuning.py", "data_prep/build_vocab.py",
          "data_prep/build_tfrecords.py", "electra_tf.export", "electra_tf.convert"} <= scripts


@pytest.mark.slow
def test_every_readme_command_and_flag_exists():
  commands = readme_commands((REPO / "README.md").read_text(encoding="utf-8"))
  by_command = {}
  for argv, line in commands:
    command = tuple(argv[:2]) if argv[0] == "-m" else (argv[0],)
    if command[0] != "-m":
      assert (REPO / command[0]).is_file(), line
    flags = {arg[2:].split("=")[0] for arg in argv if arg.startswith("--")}
    by_command.setdefault(command, set()).update(flags)
  for command, flags in by_command.items():
    result = subprocess.run([command_python(), *command, "--helpfull"], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, (command, result.stderr[-1000:])
    for flag in flags:
      name = flag[2:] if flag.startswith("no") else flag
      assert re.search(rf"--(\[no\])?({re.escape(flag)}|{re.escape(name)}):",
                       result.stdout), (command, flag)


@pytest.mark.slow
def test_the_readme_install_leaves_the_package_and_its_console_scripts(tmp_path):
  """`pip install -r requirements.txt` installs this package (editable) into
  the running interpreter's environment, venv or not: its console scripts lie
  beside the interpreter, and each answers --help with its own flags."""
  from importlib import metadata  # pylint: disable=g-import-not-at-top
  try:
    dist = metadata.distribution("electra-tf")
  except metadata.PackageNotFoundError:
    pytest.fail("electra-tf is not installed here: run `pip install -r requirements.txt`")
  assert {entry.name for entry in dist.entry_points} == set(console_scripts())
  bin_dir = pathlib.Path(sys.executable).parent
  for script, module in console_scripts().items():
    result = subprocess.run([str(bin_dir / script), "--help"], cwd=tmp_path,
                            capture_output=True, text=True, check=False, timeout=300)
    own = command_flags(module)
    assert own and result.returncode == 0, (script, result.stderr[-1000:])
    listed = set(re.findall(r"^  --(?:\[no\])?(\w+):", result.stdout, flags=re.M))
    assert own <= listed, (script, own - listed)
    source = (REPO / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8")
    first_line = ast.get_docstring(ast.parse(source)).strip().splitlines()[0]
    assert result.stdout.startswith(first_line), (script, result.stdout[:200])


DEFINED_FLAGS = """
import importlib, json, sys
from absl import flags
found = {}
for module in sys.argv[1:]:
  command = importlib.import_module(module)
  before = set(flags.FLAGS)
  command.define_flags()
  found[module] = sorted(set(flags.FLAGS) - before)
  for name in found[module]:  # for the next command's flags of the same name
    delattr(flags.FLAGS, name)
print(json.dumps(found))
"""


@functools.lru_cache(maxsize=None)
def defined_flags() -> dict:
  """Command module -> the flags its define_flags() defines (its own and the
  shared ones it takes), read in one process without running a command."""
  result = subprocess.run([sys.executable, "-c", DEFINED_FLAGS, *command_modules()],
                          cwd=REPO, capture_output=True, text=True, check=True, timeout=600)
  return json.loads(result.stdout.splitlines()[-1])


def command_flags(module: str) -> set:
  return set(defined_flags()[module])


def test_every_command_has_its_console_script():
  assert sorted(console_scripts().values()) == command_modules()
  assert {module for _, module in typed_commands()} <= set(command_modules())


@pytest.mark.slow
def test_every_command_answers_help_with_its_own_flags_first(tmp_path):
  """As users type it: its scripts (run_*.py, data_prep/, python -m
  electra_tf.export, ...), or the command module when it has none."""
  typed = typed_commands()
  wrapped = {module for _, module in typed}
  for argv, module in typed + [(["-m", module], module) for module in command_modules()
                               if module not in wrapped]:
    result = subprocess.run([sys.executable, *argv, "--help"], cwd=tmp_path,
                            capture_output=True, text=True, check=False, timeout=300)
    listed = set(re.findall(r"^  --(?:\[no\])?(\w+):", result.stdout, flags=re.M))
    own = command_flags(module)
    assert result.returncode == 0, (argv, result.stderr[-2000:])
    assert own and own <= listed, (argv, result.stdout[-2000:])
    assert "absl.flags" not in result.stdout  # absl's own flags only with --helpfull
