"""Small file helpers: writes that never leave a half-written file behind.

Every output of the project is written under a temporary name,
`<final>.tmp-<pid>` (a file, or a directory for SavedModels and converted
checkpoints), and renamed to its final name once complete.  A job killed
with SIGKILL leaves such temporaries behind but never a partial file under a
final name; `remove_stale_temporaries` clears the ones whose process is gone
when the next job starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import socket
import time
from typing import Iterator, List

from electra_tf.errors import ConfigError, TrainingError

# <final>.tmp-<pid>: a write in progress; <final>.old-<pid>: the previous
# version while an output directory is being replaced.
_TEMPORARY = re.compile(r"^.+\.(?:tmp|old)-(?P<pid>\d+)$")


def temporary_path(path: str) -> str:
  """The temporary name this process writes `path` under."""
  return f"{path}.tmp-{os.getpid()}"


def atomic_write_bytes(path: str, data: bytes) -> None:
  """Writes `data` to `path` through a temporary file and a rename."""
  tmp = temporary_path(path)
  try:
    with open(tmp, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def atomic_write_text(path: str, text: str) -> None:
  """Writes `text` (UTF-8) to `path` through a temporary file and a rename."""
  atomic_write_bytes(path, text.encode("utf-8"))


def file_sha256(path: str) -> str:
  """The hex SHA-256 of a file's bytes (what a record says it was made from)."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def process_alive(pid: int) -> bool:
  """Whether process `pid` exists on this machine (signal 0 probe)."""
  if pid == os.getpid():
    return True
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # exists, owned by another user
    return True
  return True


def is_stale_temporary(name: str) -> bool:
  """True for `<final>.tmp-<pid>` / `<final>.old-<pid>` of a process that is gone."""
  match = _TEMPORARY.match(name)
  return bool(match) and not process_alive(int(match.group("pid")))


def remove_path(path: str) -> None:
  """Removes a file or a directory tree."""
  if os.path.isdir(path) and not os.path.islink(path):
    shutil.rmtree(path)
  else:
    os.remove(path)


def remove_stale_temporaries(directory: str) -> List[str]:
  """Removes the stale temporaries directly inside `directory`; returns their paths."""
  if not os.path.isdir(directory):
    return []
  removed = []
  for name in sorted(os.listdir(directory)):
    if is_stale_temporary(name):
      path = os.path.join(directory, name)
      remove_path(path)
      removed.append(path)
  return removed


def check_writable(directory: str, what: str, create: bool = True) -> None:
  """Proves a file can be written in `directory`, which is created when
  `create`; else (the command's work may still fail) nothing is left behind:
  the probe goes to the nearest folder that exists, where `directory` can
  then be made.

  Raises ConfigError naming `what` (a flag or hparam) when it cannot, so an
  unwritable or read-only output location fails before any work is done.
  """
  existing = os.path.abspath(directory)
  while not create and not os.path.exists(existing):
    existing = os.path.dirname(existing)
  probe = temporary_path(os.path.join(existing, ".write-probe"))
  try:
    os.makedirs(existing, exist_ok=True)
    with open(probe, "wb") as f:
      f.write(b"probe")
    os.remove(probe)
  except OSError as e:
    raise ConfigError(f"{what} {directory}: not writable ({e.strerror or e})") from e


LOCK_FILE = ".lock"  # in a job's model_dir while the job runs


@contextlib.contextmanager
def exclusive_use(directory: str, what: str) -> Iterator[None]:
  """Holds `directory` for this process: a second job on it is refused.

  An advisory `fcntl.flock` on `directory/.lock`, which also records who holds
  it (pid, host, start time).  The operating system releases the lock when
  the process ends, however it ends (kill -9 included), so a killed job
  never leaves its directory locked.  Raises TrainingError naming `what` (a flag
  or hparam) and the holder when another process holds it.  On file systems
  without flock (some network or object stores) the lock is not enforced.
  """
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, LOCK_FILE)
  handle = open(path, "a+", encoding="utf-8")
  try:
    try:
      fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      handle.seek(0)
      holder = handle.read().strip() or "another process"
      raise TrainingError(f"{what} {directory}: in use by another job ({holder}); wait "
                          f"for it to end or use another {what}") from None
    except OSError:  # no flock here: run unlocked
      pass
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {socket.gethostname()} since "
                 f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
    handle.flush()
    yield
  finally:
    handle.close()  # releases the lock
