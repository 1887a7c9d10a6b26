"""Small file helpers: writes that never leave a half-written file behind."""

from __future__ import annotations

import os


def atomic_write_bytes(path: str, data: bytes) -> None:
  """Writes `data` to `path` through a temporary file and a rename."""
  tmp = f"{path}.tmp-{os.getpid()}"
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
