"""`python SCRIPT`, `python -m MODULE` and `python -c CODE` for the tests
without Python's and TensorFlow's start: a process that imported TensorFlow
once forks each command's process from itself.

`Zygote(work_dir)` starts the zygote (this file run as a script) and writes
`work_dir/bin/python`, the shim: a stdlib-only script that hands its argv,
working directory, environment and stdin/stdout/stderr to the zygote over a
Unix socket, relays the signals it gets (SIGTERM, SIGINT, SIGHUP, SIGQUIT,
SIGUSR1, SIGUSR2, SIGCONT) to the forked process, and exits as it exits (the same
status, or the same signal).  A shim killed with SIGKILL takes its process
with it: the zygote kills a process whose shim has gone, and reaps it before
it serves the next command.  A process that stops (SIGSTOP, a stop point of
electra_tf.stop_points) stops its shim too, and SIGCONT to the shim continues
it, so a test sees the stop at the pid it started.  Another interpreter
option, a PYTHON* variable other than those below, a TF_CPP_MIN_LOG_LEVEL
other than 3 (TensorFlow reads it once, at its import), or a file descriptor
beyond the standard three (pass_fds, multiprocessing's forkserver: only those
three travel to the zygote) makes the shim exec the real interpreter.

The forked process is the command's own: pid, exit status, signals, streams,
working directory, environment and argv, `sys.path` as the interpreter sets
it (tests/test_zygote.py compares them).  What it has that a fresh
interpreter would not:
- `tensorflow` and `tf_keras` imported with TF_USE_LEGACY_KERAS=1 and
  TF_CPP_MIN_LOG_LEVEL=3, as every command's process imports them on a
  machine without a GPU (electra_tf/commands/__init__.py and
  electra_tf/__init__.py set both), so what TensorFlow reads at import time
  is the zygote's.  The runtime (devices, thread pools, XLA flags,
  TF_CONFIG) starts in the forked process, from its own environment.
- the zygote's str hash seed (`random` is reseeded in each fork).
- PYTHONPATH, PYTHONUNBUFFERED and PYTHONDONTWRITEBYTECODE applied after
  the start, as the interpreter applies them at its start.
- its parent is the zygote; a resource limit or signal disposition the
  caller sets in `preexec_fn` or leaves to it (an ignored SIGINT) stays
  with the shim: the process starts with the interpreter's own handlers.
- its sys.executable is the shim: what a command starts with it (a
  research tool's runs, the soak's jobs, bench_memory's measurements) is
  forked too, under the same rules.
- a SIGKILL to the shim reaches the process a moment later (the zygote
  sees the shim's socket close), not at once: a process frozen at a stop
  point does nothing in between, one killed while running may.
So a test whose check is the process's start itself (what a command
imports, what TensorFlow reads at import time, a fresh `tf.keras`, kill -9
while it runs, preexec_fn) starts the interpreter itself (`sys.executable`
of the test's process).
"""

from __future__ import annotations

import array
import json
import os
import pathlib
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Dict, List, Tuple

# The PYTHON* variables a forked process applies itself (the shim execs the
# real interpreter for any other).
APPLIED_VARIABLES = ("PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")
# TensorFlow's C++ log level at the zygote's import (read once, then fixed):
# the commands' own on a machine without a GPU (electra_tf/__init__.py).
LOG_LEVEL = "3"
RELAYED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
                   signal.SIGUSR1, signal.SIGUSR2, signal.SIGCONT)

SHIM = '''#!{python} -S
# The tests' `python` (tests/zygote.py): argv, cwd, environment and the
# standard streams go to the zygote at {socket}; its forked process's exit is
# this one's.
import array, json, os, signal, socket, struct, sys
REAL = {python!r}
def real():
  os.execv(REAL, [REAL] + sys.argv[1:])
def passed_fds():
  # Open descriptors beyond 0-2 (the listing's own is closed once listed).
  for name in os.listdir("/proc/self/fd"):
    try:
      if int(name) > 2 and os.readlink("/proc/self/fd/" + name):
        return True
    except OSError:
      pass
  return False
args = sys.argv[1:]
if (not args or args[0] not in ("-m", "-c") and args[0].startswith("-")
    or args[0] in ("-m", "-c") and len(args) < 2
    or any(k.startswith("PYTHON") and k not in {applied!r} for k in os.environ)
    or os.environ.get("TF_CPP_MIN_LOG_LEVEL", {log_level!r}) != {log_level!r}
    or passed_fds()):
  real()
try:
  for fd in (0, 1, 2):
    os.fstat(fd)
  conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  conn.connect({socket!r})
except OSError:
  real()
# A signal that comes before the process's pid is sent on when it comes.
pid, pending = None, []
def relay(number, frame):
  if pid is None:
    pending.append(number)
  else:
    os.kill(pid, number)
for number in {signals!r}:
  signal.signal(number, relay)
request = json.dumps({{"argv": args, "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()
conn.sendmsg([struct.pack("!I", len(request)) + request],
             [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
reader = conn.makefile("r")
pid = int(reader.readline())
for number in pending:
  os.kill(pid, number)
how, value = reader.readline().split()
while how == "stopped":  # as its process is; a SIGCONT continues both (relay)
  os.kill(os.getpid(), signal.SIGSTOP)
  how, value = reader.readline().split()
if how == "signal":
  if int(value) in {signals!r}:
    signal.signal(int(value), signal.SIG_DFL)
  os.kill(os.getpid(), int(value))
sys.exit(int(value))
'''


def _receive(conn: socket.socket) -> Tuple[dict, List[int]]:
  """A request (length-prefixed JSON) and the three file descriptors sent
  with it."""
  fds = array.array("i")
  data, ancillary, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
  for level, kind, payload in ancillary:
    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
      fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
  (length,) = struct.unpack("!I", data[:4])
  data = data[4:]
  while len(data) < length:
    more = conn.recv(length - len(data))
    if not more:
      raise EOFError("the shim closed the connection mid-request")
    data += more
  return json.loads(data), list(fds)


def _run_as_main(request: dict, base_path: List[str]) -> None:
  """In the forked process: become `python ARGV` run in the request's cwd
  and environment, then exit as the interpreter would."""
  import io  # pylint: disable=g-import-not-at-top
  import runpy  # pylint: disable=g-import-not-at-top
  os.chdir(request["cwd"])
  os.environ.clear()
  os.environ.update(request["env"])
  for number in RELAYED_SIGNALS + (signal.SIGCHLD,):
    signal.signal(number, signal.SIG_DFL)
  signal.signal(signal.SIGINT, signal.default_int_handler)
  unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
  sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))

  def stream(fd: int, mode: str, errors: str, line_buffering: bool):
    raw = io.FileIO(fd, mode, closefd=False)
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding="utf-8", errors=errors,
                            line_buffering=line_buffering,
                            write_through=unbuffered and mode == "w")
  sys.stdin = sys.__stdin__ = stream(0, "r", "strict", False)
  sys.stdout = sys.__stdout__ = stream(1, "w", "strict", os.isatty(1))
  sys.stderr = sys.__stderr__ = stream(2, "w", "backslashreplace", True)

  argv = request["argv"]
  pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
  if argv[0] == "-m":
    sys.argv = ["-m"] + argv[2:]  # runpy puts the module's path first
    sys.path[:] = [os.getcwd()] + pythonpath + base_path
    # runpy runs the module in __main__'s namespace: a fresh one, not the zygote's.
    sys.modules["__main__"] = type(sys)("__main__")
    runpy._run_module_as_main(argv[1], alter_argv=True)  # pylint: disable=protected-access
  elif argv[0] == "-c":
    sys.argv = ["-c"] + argv[2:]
    sys.path[:] = [""] + pythonpath + base_path
    main = sys.modules["__main__"] = type(sys)("__main__")
    exec(compile(argv[1], "<string>", "exec"), main.__dict__)  # pylint: disable=exec-used
  else:
    sys.argv = list(argv)
    sys.path[:] = [os.path.dirname(os.path.realpath(argv[0]))] + pythonpath + base_path
    runpy.run_path(argv[0], run_name="__main__")


def _child(request: dict, fds: List[int], base_path: List[str]) -> None:
  """The forked process: never returns (exits with the command's status)."""
  for target, fd in zip((0, 1, 2), fds):
    os.dup2(fd, target)
    os.close(fd)
  status = 0
  try:
    _run_as_main(request, base_path)
  except SystemExit as e:
    if e.code is None:
      status = 0
    elif isinstance(e.code, int):
      status = e.code
    else:
      print(e.code, file=sys.stderr)
      status = 1
  except BaseException as e:  # pylint: disable=broad-except
    # The traceback as the interpreter prints it: from the script's frames
    # (for -m, from runpy's, as the interpreter runs a module).
    hidden = {__file__} if request["argv"][0] == "-m" else {__file__, "<frozen runpy>"}
    trace = e.__traceback__
    while trace and trace.tb_frame.f_code.co_filename in hidden:
      trace = trace.tb_next
    sys.excepthook(type(e), e.with_traceback(trace), trace)
    status = 1
  # The interpreter's exit: non-daemon threads joined, atexit run, streams
  # flushed; then out without unwinding into the zygote's loop.
  import atexit  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top
  threading._shutdown()  # pylint: disable=protected-access
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for output in (sys.stdout, sys.stderr):
    try:
      output.flush()
    except (OSError, ValueError):
      pass
  os._exit(status & 0xFF)


def _send(conn: socket.socket, line: str) -> bool:
  try:
    conn.sendall(line.encode())
    return True
  except OSError:  # the shim is gone
    return False


def _alive(conn: socket.socket) -> bool:
  """False once the shim at the other end of `conn` is gone (it sends nothing
  after its request)."""
  try:
    return bool(conn.recv(1))
  except OSError:
    return False


def serve(socket_path: str, owner_pid: int, shim: str) -> None:
  """Import TensorFlow, then fork a process for each request until the
  process `owner_pid` is gone or sends SIGTERM.  After each process ends,
  `socket_path`.cpu holds the CPU-seconds of all ended so far."""
  os.environ["TF_USE_LEGACY_KERAS"] = "1"
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = LOG_LEVEL
  import tensorflow  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  import tf_keras  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  base_path = sys.path[1:]  # the interpreter's own (Zygote starts it without PYTHONPATH)
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(socket_path + ".tmp")
  listener.listen(64)
  os.rename(socket_path + ".tmp", socket_path)  # ready: connections wait in the backlog
  shims: Dict[int, socket.socket] = {}  # forked pid -> its shim's connection
  cpu_seconds = 0.0
  stopping = []
  signal.signal(signal.SIGTERM, lambda number, frame: stopping.append(number))
  # A process's end or stop wakes the loop at once (it goes to its shim).
  wakeup, wakeup_write = os.pipe()
  os.set_blocking(wakeup_write, False)
  signal.set_wakeup_fd(wakeup_write)
  signal.signal(signal.SIGCHLD, lambda number, frame: None)

  def ended(pid: int, status: int, usage) -> None:
    nonlocal cpu_seconds
    cpu_seconds += usage.ru_utime + usage.ru_stime
    pathlib.Path(socket_path + ".cpu").write_text(f"{cpu_seconds:.3f}\n")
    conn = shims.pop(pid)
    how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
           else f"exit {os.WEXITSTATUS(status)}")
    _send(conn, f"{how}\n")
    conn.close()

  while os.getppid() == owner_pid and not stopping:
    readable, _, _ = select.select([listener, wakeup, *shims.values()], [], [], 1.0)
    if wakeup in readable:
      os.read(wakeup, 4096)
    # Shims that have gone first: their processes are dead and reaped before
    # a command started after the shim's end is served (a lock, a file).
    for pid, conn in list(shims.items()):
      if conn in readable and not _alive(conn):
        os.kill(pid, signal.SIGKILL)
        ended(*os.wait4(pid, 0))
    if listener in readable:
      conn, _ = listener.accept()
      try:
        request, fds = _receive(conn)
      except (OSError, EOFError, ValueError):  # a shim gone mid-request
        conn.close()
        continue
      pid = os.fork()
      if pid == 0:
        signal.set_wakeup_fd(-1)
        os.close(wakeup)
        os.close(wakeup_write)
        listener.close()
        conn.close()
        for other in shims.values():
          other.close()
        sys.executable = shim
        _child(request, fds, base_path)
      for fd in fds:
        os.close(fd)
      shims[pid] = conn
      if not _send(conn, f"{pid}\n"):
        os.kill(pid, signal.SIGKILL)
    while shims:
      pid, status, usage = os.wait4(-1, os.WNOHANG | os.WUNTRACED)
      if pid == 0:
        break
      if os.WIFSTOPPED(status):
        _send(shims[pid], f"stopped {os.WSTOPSIG(status)}\n")
      else:
        ended(pid, status, usage)
  for pid in shims:
    os.kill(pid, signal.SIGKILL)


class Zygote:
  """The zygote of this process: `shim` is its `python`; `stop()` ends it
  and waits for it, so the CPU time of the processes it forked counts as
  this process's children's, as a process this process started would."""

  def __init__(self, work_dir: pathlib.Path):
    self.socket_path = str(work_dir / "zygote.sock")
    for stale in (self.socket_path, self.socket_path + ".tmp", self.socket_path + ".cpu"):
      if os.path.lexists(stale):
        os.unlink(stale)
    self.shim = work_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    self._process = subprocess.Popen(
        [sys.executable, __file__, self.socket_path, str(os.getpid()), str(self.shim)],
        env=env,
        stdin=subprocess.DEVNULL, start_new_session=True)
    self.shim.parent.mkdir(parents=True, exist_ok=True)
    self.shim.write_text(SHIM.format(python=sys.executable, socket=self.socket_path,
                                     applied=APPLIED_VARIABLES, log_level=LOG_LEVEL,
                                     signals=tuple(int(s) for s in RELAYED_SIGNALS)))
    self.shim.chmod(0o755)
    deadline = time.monotonic() + 120
    while not os.path.exists(self.socket_path):
      if self._process.poll() is not None or time.monotonic() > deadline:
        raise RuntimeError(f"the zygote did not start: no {self.socket_path}")
      time.sleep(0.05)

  def cpu_seconds(self) -> float:
    """CPU-seconds of the forked processes that have ended."""
    try:
      return float(pathlib.Path(self.socket_path + ".cpu").read_text())
    except (OSError, ValueError):
      return 0.0

  def stop(self) -> None:
    self._process.terminate()
    self._process.wait()


if __name__ == "__main__":
  serve(sys.argv[1], int(sys.argv[2]), sys.argv[3])
