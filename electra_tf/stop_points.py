"""Named moments at which a job freezes itself, for kill tests.

A job started with ELECTRA_TF_STOP_AT=<point>[:<n>] sends itself SIGSTOP the
n-th time (default 1) it reaches `<point>` (`reached(point)`, POINTS); the
test waits for the stop (`wait_until_stopped`) and kills it there.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Dict

from electra_tf.errors import ConfigError

ENV_VAR = "ELECTRA_TF_STOP_AT"
POINTS = ("checkpoint_written", "tfrecords_writing", "tfrecords_checkpoint",
          "tfrecords_finishing", "eval_batch", "export_written", "step_logged")

_counts: Dict[str, int] = {}


def _target() -> tuple:
  spec = os.environ.get(ENV_VAR, "")
  if not spec:
    return ("", 0)
  name, _, count = spec.partition(":")
  if name not in POINTS:
    raise ConfigError(f"{ENV_VAR}: unknown stop point {name!r}; known: {', '.join(POINTS)}")
  return (name, int(count or 1))


def reached(point: str) -> None:
  """Marks that the process is at `point`; stops it there when asked to."""
  name, count = _target()
  if name != point:
    return
  _counts[point] = _counts.get(point, 0) + 1
  if _counts[point] == count:
    os.kill(os.getpid(), signal.SIGSTOP)


def environment(point: str, count: int = 1) -> Dict[str, str]:
  """The environment entry that stops a child at the count-th `point`."""
  if point not in POINTS:
    raise ValueError(f"unknown stop point {point!r}; known: {', '.join(POINTS)}")
  return {ENV_VAR: f"{point}:{count}"}


def is_stopped(pid: int) -> bool:
  """Whether process `pid` is stopped by a signal (Linux /proc state T)."""
  try:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
      state = f.read().rsplit(")", 1)[1].split()[0]
  except (FileNotFoundError, ProcessLookupError, IndexError):
    return False
  return state in ("T", "t")


def wait_until_stopped(process, timeout_s: float = 1800.0) -> bool:
  """Waits until `process` (a subprocess.Popen) stops itself or exits.

  True when it is stopped; False when it exited first (it never reached the
  point as often as asked).  The timeout only guards against a hung child.
  """
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline:
    if process.poll() is not None:
      return False
    if is_stopped(process.pid):
      return True
    time.sleep(0.01)
  raise TimeoutError(f"process {process.pid} neither stopped nor exited in {timeout_s} s")
