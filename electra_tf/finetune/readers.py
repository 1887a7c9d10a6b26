"""Readers for the raw fine-tuning files, with errors that name file and line.

- GLUE `.tsv`: tab-separated, unquoted fields (the official reader uses the
  csv module with quoting off); a leading UTF-8 byte-order mark is dropped.
- SQuAD `.json`: `{"data": [{"paragraphs": [{"context", "qas": [...]}]}]}`.
- MRQA `.jsonl` (gzipped or plain): a header line, then one JSON object per
  line, `{"context", "qas": [{"qid", "question", "answers": [texts],
  "detected_answers": [{"text", "char_spans": [[start, end], ...]}]}]}`.
- CoNLL `.txt`: one `WORD ... TAG` line per token, a blank line after each
  sentence, `-DOCSTART-` lines skipped.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re
import zlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

from electra_tf.errors import DataError

_TAG_PATTERN = re.compile(r"O|[BIES]-[^-\s]+")


@dataclasses.dataclass(frozen=True)
class TsvRow:
  """One line of a `.tsv` file: its 1-based line number and its fields."""
  line_number: int
  fields: List[str]


class MalformedRowError(DataError):
  """A `.tsv` row without the columns a task reads (the rows the official
  reader skips)."""


def _require_file(path: str) -> None:
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path}: fine-tuning data file not found")


def read_tsv(path: str, max_lines: Optional[int] = None) -> List[TsvRow]:
  """All lines of a tab-separated file (at most `max_lines`, header included).

  Trailing empty lines are ignored; an empty line elsewhere is a row with no
  fields (as the csv module reads it), which `column` reports.
  """
  _require_file(path)
  with open(path, encoding="utf-8-sig", newline="") as f:
    lines = f.read().split("\n")
  while lines and not lines[-1].strip("\r"):
    lines.pop()
  if max_lines is not None:
    lines = lines[:max_lines]
  rows = []
  for index, line in enumerate(lines):
    line = line.rstrip("\r")
    rows.append(TsvRow(index + 1, line.split("\t") if line else []))
  return rows


def column(path: str, row: TsvRow, index: int) -> str:
  """`row.fields[index]` (negative counts from the end), else a
  MalformedRowError naming file and line."""
  if not row.fields:
    raise MalformedRowError(f"{path}:{row.line_number}: empty line inside the data")
  needed = index + 1 if index >= 0 else -index
  if len(row.fields) < needed:
    raise MalformedRowError(
        f"{path}:{row.line_number}: expected at least {needed} tab-separated "
        f"columns, found {len(row.fields)}")
  return row.fields[index]


def read_json(path: str) -> Any:
  """A JSON file; a syntax error names the file, line and column."""
  _require_file(path)
  with open(path, encoding="utf-8-sig") as f:
    text = f.read()
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise DataError(f"{path}:{e.lineno}: invalid JSON ({e.msg} at column "
                    f"{e.colno})") from None


def squad_paragraphs(path: str, dataset: Any) -> List[Tuple[str, Dict[str, Any]]]:
  """Checks the SQuAD schema and returns (location, paragraph) pairs.

  `location` (e.g. `data[0].paragraphs[3]`) names the paragraph in errors.
  """
  if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
    raise DataError(f"{path}: not a SQuAD file (expected an object with a "
                    f"'data' list)")
  paragraphs = []
  for i, article in enumerate(dataset["data"]):
    where = f"data[{i}]"
    if not isinstance(article, dict) or not isinstance(
        article.get("paragraphs"), list):
      raise DataError(f"{path}: {where} has no 'paragraphs' list")
    for j, paragraph in enumerate(article["paragraphs"]):
      location = f"{where}.paragraphs[{j}]"
      if not isinstance(paragraph, dict):
        raise DataError(f"{path}: {location} is not an object")
      if not isinstance(paragraph.get("context"), str):
        raise DataError(f"{path}: {location} has no 'context' string")
      if not isinstance(paragraph.get("qas"), list):
        raise DataError(f"{path}: {location} has no 'qas' list")
      for k, qa in enumerate(paragraph["qas"]):
        _check_squad_question(path, f"{location}.qas[{k}]", qa)
      paragraphs.append((location, paragraph))
  return paragraphs


def _check_squad_question(path: str, location: str, qa: Any) -> None:
  if not isinstance(qa, dict):
    raise DataError(f"{path}: {location} is not an object")
  for key in ("id", "question"):
    if not isinstance(qa.get(key), str):
      raise DataError(f"{path}: {location} has no '{key}' string")
  answers = qa.get("answers", [])
  if not isinstance(answers, list):
    raise DataError(f"{path}: {location} ('{qa['id']}'): 'answers' is not a list")
  for n, answer in enumerate(answers):
    if (not isinstance(answer, dict) or not isinstance(answer.get("text"), str)
        or not isinstance(answer.get("answer_start"), int)):
      raise DataError(f"{path}: {location}.answers[{n}] ('{qa['id']}') needs "
                      "'text' (string) and 'answer_start' (integer)")


def read_jsonl(path: str, max_lines: Optional[int] = None
               ) -> List[Tuple[int, Any]]:
  """(line number, object) of each non-blank line of a JSON-lines file.

  Reads at most `max_lines` lines.  A gzip file (told by its first bytes, so
  any name works) is decompressed.  Invalid JSON or UTF-8 names the file and
  line.
  """
  _require_file(path)
  with open(path, "rb") as f:
    gzipped = f.read(2) == b"\x1f\x8b"
  records: List[Tuple[int, Any]] = []
  try:
    with (gzip.open if gzipped else open)(path, "rb") as f:
      for line_number, raw in enumerate(f, start=1):
        if max_lines is not None and line_number > max_lines:
          break
        try:
          line = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
        except UnicodeDecodeError as e:
          raise DataError(f"{path}:{line_number}: not valid UTF-8 (byte "
                          f"{e.start} of the line)") from None
        if not line.strip():
          continue
        try:
          records.append((line_number, json.loads(line)))
        except json.JSONDecodeError as e:
          raise DataError(f"{path}:{line_number}: invalid JSON ({e.msg} at "
                          f"column {e.colno})") from None
  except (EOFError, gzip.BadGzipFile, zlib.error) as e:
    raise DataError(f"{path}: damaged gzip file ({e})") from None
  return records


def mrqa_contexts(path: str, records: Sequence[Tuple[int, Any]]
                  ) -> List[Tuple[int, Dict[str, Any]]]:
  """Checks the MRQA schema; returns (line number, context) pairs.

  Lines holding a "header" key are dropped, as the official reader does.
  """
  contexts = []
  for line_number, record in records:
    where = f"{path}:{line_number}"
    if not isinstance(record, dict):
      raise DataError(f"{where}: not a JSON object")
    if "header" in record:
      continue
    if not isinstance(record.get("context"), str):
      raise DataError(f"{where}: no 'context' string")
    if not isinstance(record.get("qas"), list):
      raise DataError(f"{where}: no 'qas' list")
    for k, qa in enumerate(record["qas"]):
      _check_mrqa_question(f"{where}: qas[{k}]", qa)
    contexts.append((line_number, record))
  return contexts


def _is_char_span(span: Any) -> bool:
  return (isinstance(span, list) and len(span) == 2 and
          all(isinstance(i, int) for i in span))


def _check_mrqa_question(where: str, qa: Any) -> None:
  if not isinstance(qa, dict):
    raise DataError(f"{where} is not an object")
  for key in ("qid", "question"):
    if not isinstance(qa.get(key), str):
      raise DataError(f"{where} has no '{key}' string")
  answers = qa.get("answers")
  if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
    raise DataError(f"{where} ('{qa['qid']}'): 'answers' is not a list of "
                    "strings")
  detected = qa.get("detected_answers", [])
  if not isinstance(detected, list):
    raise DataError(f"{where} ('{qa['qid']}'): 'detected_answers' is not a list")
  for n, answer in enumerate(detected):
    spans = answer.get("char_spans") if isinstance(answer, dict) else None
    if (not isinstance(answer, dict) or not isinstance(answer.get("text"), str)
        or not isinstance(spans, list) or not spans
        or not all(_is_char_span(span) for span in spans)):
      raise DataError(f"{where}.detected_answers[{n}] ('{qa['qid']}') needs "
                      "'text' (string) and 'char_spans' (a non-empty list of "
                      "[start, end] integer pairs)")


@dataclasses.dataclass(frozen=True)
class ConllSentence:
  """One sentence of a CoNLL file: its words, their tags and the 1-based
  line number of each word."""
  words: Tuple[str, ...]
  tags: Tuple[str, ...]
  line_numbers: Tuple[int, ...]


def read_conll_sentences(path: str, max_sentences: Optional[int] = None,
                         tag_field: int = -1, span_tags: bool = True
                         ) -> List[ConllSentence]:
  """The sentences of a CoNLL file: `WORD ... TAG` lines (the tag in field
  `tag_field`, the last by default), a blank line between sentences,
  `-DOCSTART-` skipped; at most `max_sentences` (official debug: 101).  A
  malformed line (or, with span_tags, a tag not O or B-/I-/E-/S-TYPE) is a
  DataError naming file and line."""
  _require_file(path)
  sentences: List[ConllSentence] = []
  sentence: List[Tuple[str, str, int]] = []
  with open(path, encoding="utf-8-sig") as f:
    for line_number, line in enumerate(f, start=1):
      fields = line.split()
      if not fields:
        if sentence:
          sentences.append(ConllSentence(*map(tuple, zip(*sentence))))
          sentence = []
          if max_sentences is not None and len(sentences) >= max_sentences:
            return sentences
        continue
      if fields[0] == "-DOCSTART-":
        continue
      if len(fields) < 2 or not -len(fields) <= tag_field < len(fields):
        field = "the last field" if tag_field == -1 else f"field {tag_field + 1}"
        raise DataError(f"{path}:{line_number}: expected 'WORD ... TAG' with the tag "
                        f"in {field}, found {line.strip()!r}")
      tag = fields[tag_field]
      if span_tags and not _TAG_PATTERN.fullmatch(tag):
        raise DataError(f"{path}:{line_number}: tag {tag!r} is not 'O' "
                        "or B-/I-/E-/S- followed by a chunk type")
      sentence.append((fields[0], tag, line_number))
  if sentence:
    sentences.append(ConllSentence(*map(tuple, zip(*sentence))))
  return sentences
