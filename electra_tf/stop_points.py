"""Named moments at which a job can be made to freeze itself, for kill tests.

A test that kills a job "while it saves a checkpoint" must not depend on how
fast the machine is: polling for a temporary file misses a save that is over
in a millisecond, and catches a slow one.  Instead the job is started with

    ELECTRA_TF_STOP_AT=<point>[:<n>]

and sends itself SIGSTOP the n-th time (default: the first) it reaches
`<point>`; the test waits until the process is stopped (`wait_until_stopped`)
and kills it there, exactly in the act.  The points:

  checkpoint_written  a training checkpoint's files are complete and the
                      `checkpoint` state file does not name them yet
  tfrecords_writing   the TFRecord builder has written a chunk's examples
                      into its hidden `.partial` files, none is renamed yet
  tfrecords_checkpoint the TFRecord builder has noted its progress (the
                      records flushed, the build record replaced)
  tfrecords_finishing the TFRecord builder has joined and renamed one
                      output file, the others not yet
  eval_batch          the pre-training eval has run its first batch, no
                      result is written yet
  export_written      a SavedModel is complete in its temporary directory,
                      not yet renamed to the export directory
  step_logged         a training loop has logged a step (every log_every)

Without the variable (every real run) `reached` only reads a dict.
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
