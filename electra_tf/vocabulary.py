"""Reading a WordPiece vocab file and its special tokens (official
load_vocab), without TensorFlow: `electra_tf.tokenization` re-exports these,
and processes that only read a vocab (the TFRecord builder's main process)
import this module alone."""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, Sequence

from electra_tf.errors import DataError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


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


@dataclasses.dataclass(frozen=True)
class SpecialIds:
  """Ids of the special tokens that data preparation and masking rely on."""
  pad_id: int
  unk_id: int
  cls_id: int
  sep_id: int
  mask_id: int


def vocab_difference(tokens: Sequence[str], reference: Sequence[str]) -> str:
  """How vocab `tokens` differs from `reference` (both in id order), as a
  phrase for an error ("6 entries against 30,522; line 2 holds 'a' against
  '[UNK]'"); "" when they are the same."""
  if list(tokens) == list(reference):
    return ""
  line = next((i for i, (a, b) in enumerate(zip(tokens, reference)) if a != b),
              min(len(tokens), len(reference)))
  sizes = (f"{len(tokens):,} entries against {len(reference):,}; "
           if len(tokens) != len(reference) else "")
  if line == min(len(tokens), len(reference)):
    return f"{sizes}the first {line:,} are the same"
  return f"{sizes}line {line + 1:,} holds {tokens[line]!r} against {reference[line]!r}"


def check_vocab_size(vocab: Dict[str, int], vocab_size: int, vocab_file: str) -> None:
  """The hparam vocab_size must be the vocab's number of entries."""
  if len(vocab) != vocab_size:
    raise DataError(f"hparam vocab_size: {vocab_size} differs from the {len(vocab)} "
                    f"entries of {vocab_file}")


def special_ids(vocab: Dict[str, int], path: str) -> SpecialIds:
  """The special-token ids of `vocab` (read from `path`, named in errors)."""
  missing = [token for token in SPECIAL_TOKENS if token not in vocab]
  if missing:
    raise DataError(f"vocab file {path}: missing special token(s) "
                    f"{', '.join(missing)} (needs all of {', '.join(SPECIAL_TOKENS)})")
  return SpecialIds(pad_id=vocab["[PAD]"], unk_id=vocab["[UNK]"],
                    cls_id=vocab["[CLS]"], sep_id=vocab["[SEP]"],
                    mask_id=vocab["[MASK]"])
