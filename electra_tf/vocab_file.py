"""Reading a WordPiece vocab file (no TensorFlow: configs read it too)."""

from __future__ import annotations

import os
from typing import Dict

from electra_tf.errors import DataError


def load_vocab(path: str) -> Dict[str, int]:
  """Token -> id, the id being the 0-based line number (official load_vocab)."""
  path = os.fspath(path)
  if not os.path.isfile(path):
    raise DataError(f"vocab file {path}: does not exist")
  with open(path, "rb") as f:
    raw_lines = f.read().split(b"\n")
  if raw_lines and not raw_lines[-1]:
    raw_lines.pop()  # the final newline ends the last token, it adds none
  vocab: Dict[str, int] = {}
  for line_no, raw in enumerate(raw_lines, start=1):
    try:
      token = raw.decode("utf-8").strip()
    except UnicodeDecodeError as e:
      raise DataError(f"vocab file {path}: line {line_no} is not valid UTF-8 "
                      f"({e.reason} at byte {e.start})") from None
    if not token:
      raise DataError(f"vocab file {path}: line {line_no} is empty")
    if token in vocab:
      raise DataError(f"vocab file {path}: token {token!r} on line {line_no} "
                      f"repeats line {vocab[token] + 1}")
    vocab[token] = line_no - 1
  if not vocab:
    raise DataError(f"vocab file {path}: is empty")
  return vocab
