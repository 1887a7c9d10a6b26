"""Small file helpers: writes that never leave a half-written file behind."""

from __future__ import annotations

import os


def atomic_write_text(path: str, text: str) -> None:
  """Writes `text` to `path` through a temporary file and a rename."""
  tmp = f"{path}.tmp-{os.getpid()}"
  try:
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)
