"""The tests' `python` shim (tests/zygote.py) against the interpreter itself:
the same script or module, run both ways, sees the same argv, sys.path,
working directory, environment and stdin, and ends with the same status,
output and traceback; signals reach the forked process, and a killed shim
takes its process with it."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import zygote

PROBE = """\
import json, os, sys
print(json.dumps({
    "argv": sys.argv, "path": sys.path, "cwd": os.getcwd(), "name": __name__,
    "file": __file__, "probe_variable": os.environ.get("PROBE_VARIABLE"),
    "stdin": sys.stdin.read(), "unbuffered": sys.stdout.write_through,
    "bytecode": sys.dont_write_bytecode, "stdout_encoding": sys.stdout.encoding,
    "tensorflow_at_start": "tensorflow" in sys.modules}))
print("to stderr", file=sys.stderr)
if len(sys.argv) > 1 and sys.argv[1] == "fail":
  raise ValueError("the probe's own error")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


def _both(argv, tmp_path, **kwargs):
  """(the interpreter's result, the shim's) of `python ARGV`."""
  return [subprocess.run([python, *argv], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120, **kwargs)
          for python in (sys.executable, str(zygote().shim))]


def _probe_package(tmp_path):
  package = tmp_path / "probe_package"
  package.mkdir(exist_ok=True)
  (package / "__init__.py").write_text("")
  (package / "probe.py").write_text(PROBE)
  return package


@pytest.mark.slow
@pytest.mark.parametrize("form", ["script", "module"])
def test_a_script_or_module_sees_what_the_interpreter_gives_it(form, tmp_path):
  package = _probe_package(tmp_path)
  target = ([str(package / "probe.py")] if form == "script"
            else ["-m", "probe_package.probe"])
  env = dict(os.environ, PROBE_VARIABLE="seen", PYTHONPATH=str(tmp_path / "elsewhere"),
             PYTHONUNBUFFERED="1")
  for status in ("0", "3"):
    real, shim = _both([*target, status, "x y"], tmp_path, env=env, input="from stdin\n")
    assert (shim.returncode, shim.stderr) == (real.returncode, real.stderr), (real, shim)
    assert real.returncode == int(status)
    seen, seen_forked = json.loads(real.stdout), json.loads(shim.stdout)
    assert seen.pop("tensorflow_at_start") != seen_forked.pop("tensorflow_at_start")
    assert seen_forked == seen
    assert seen["stdin"] == "from stdin\n" and seen["probe_variable"] == "seen"
    assert seen["path"][1] == str(tmp_path / "elsewhere") and seen["unbuffered"]


@pytest.mark.slow
@pytest.mark.parametrize("form", ["script", "module"])
def test_an_uncaught_error_prints_the_interpreters_traceback(form, tmp_path):
  package = _probe_package(tmp_path)
  target = [str(package / "probe.py")] if form == "script" else ["-m", "probe_package.probe"]
  real, shim = _both([*target, "fail"], tmp_path)
  assert real.returncode == shim.returncode == 1
  assert real.stderr == shim.stderr, (real.stderr, shim.stderr)
  assert real.stderr.splitlines()[-1] == "ValueError: the probe's own error"
  assert "zygote" not in shim.stderr


@pytest.mark.slow
def test_tensorflow_is_imported_before_the_command_starts(tmp_path):
  # Whether TensorFlow was in sys.modules at the probe's start: the zygote's
  # whole point, against the interpreter's fresh start.
  package = _probe_package(tmp_path)
  real, shim = _both([str(package / "probe.py")], tmp_path)
  assert json.loads(real.stdout)["tensorflow_at_start"] is False
  assert json.loads(shim.stdout)["tensorflow_at_start"] is True
  code = "import sys; print('tensorflow' in sys.modules, sys.argv, sys.path[0], __name__)"
  real, shim = _both(["-c", code, "an argument"], tmp_path)
  assert real.stdout == "False ['-c', 'an argument']  __main__\n"
  assert shim.stdout == real.stdout.replace("False", "True")


@pytest.mark.slow
def test_signals_reach_the_process_and_a_killed_shim_takes_it_along(tmp_path):
  waiting = tmp_path / "waiting.py"
  waiting.write_text(
      "import os, signal, sys, time\n"
      "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
      "print(os.getpid(), flush=True)\n"
      "time.sleep(60)\n")
  shim = str(zygote().shim)
  # SIGTERM, handled: the handler's exit status.
  process = subprocess.Popen([shim, str(waiting)], stdout=subprocess.PIPE, text=True)
  forked = int(process.stdout.readline())
  assert forked != process.pid
  process.send_signal(signal.SIGTERM)
  assert process.wait(timeout=60) == 7
  # A process that dies of a signal: its shim dies of the same one.
  (tmp_path / "probe_self_kill.py").write_text(
      "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
  process = subprocess.Popen(
      [shim, "-m", "probe_self_kill"], cwd=tmp_path, stdout=subprocess.PIPE)
  assert process.wait(timeout=60) == -signal.SIGKILL
  # SIGKILL to the shim: its process goes too.
  process = subprocess.Popen([shim, str(waiting)], stdout=subprocess.PIPE, text=True)
  forked = int(process.stdout.readline())
  process.kill()
  process.wait(timeout=60)
  deadline = time.monotonic() + 30
  while os.path.exists(f"/proc/{forked}") and time.monotonic() < deadline:
    time.sleep(0.05)
  assert not os.path.exists(f"/proc/{forked}")


@pytest.mark.slow
def test_the_forked_processes_cpu_time_is_counted(tmp_path):
  busy = tmp_path / "busy.py"
  busy.write_text("import time\nend = time.process_time() + 0.5\n"
                  "while time.process_time() < end:\n  pass\n")
  before = zygote().cpu_seconds()
  subprocess.run([str(zygote().shim), str(busy)], check=True, timeout=120)
  assert zygote().cpu_seconds() - before >= 0.5


@pytest.mark.slow
def test_a_stop_is_seen_at_the_shim_and_a_killed_stopped_process_is_reaped_first(tmp_path):
  from electra_tf import stop_points
  stopping = tmp_path / "stopping.py"
  stopping.write_text(
      "import os, signal, sys\n"
      "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
      "print(os.getpid(), flush=True)\n"
      "os.kill(os.getpid(), signal.SIGSTOP)\n"
      "signal.pause()\n")
  # Stopped, then SIGTERM (pending) and SIGCONT: the same exit both ways.
  for python in (sys.executable, str(zygote().shim)):
    process = subprocess.Popen([python, str(stopping)], stdout=subprocess.PIPE, text=True)
    forked = int(process.stdout.readline())
    assert stop_points.wait_until_stopped(process, timeout_s=60)
    assert stop_points.is_stopped(forked)
    process.send_signal(signal.SIGTERM)
    process.send_signal(signal.SIGCONT)
    assert process.wait(timeout=60) == 7, python
  # Killed while stopped: gone before the next command the zygote serves ends.
  process = subprocess.Popen([str(zygote().shim), str(stopping)], stdout=subprocess.PIPE,
                             text=True)
  forked = int(process.stdout.readline())
  assert stop_points.wait_until_stopped(process, timeout_s=60)
  process.kill()
  process.wait(timeout=60)
  subprocess.run([str(zygote().shim), "-c", "pass"], check=True, timeout=120)
  assert not os.path.exists(f"/proc/{forked}")


@pytest.mark.slow
def test_what_a_command_starts_with_sys_executable_is_forked_unless_it_passes_fds(tmp_path):
  nested = tmp_path / "nested.py"
  nested.write_text(
      "import os, subprocess, sys\n"
      "probe = [sys.executable, '-c', \"import sys; print('tensorflow' in sys.modules)\"]\n"
      "subprocess.run(probe, check=True)\n"
      "read, write = os.pipe()\n"
      "subprocess.run(probe, check=True, pass_fds=[write])\n")
  real, shim = _both([str(nested)], tmp_path)
  assert real.stdout == "False\nFalse\n", real
  assert shim.stdout == "True\nFalse\n", shim
