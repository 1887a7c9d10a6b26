"""What pre-training records say about themselves, read without TensorFlow.

The build record (`tfrecords.BUILD_RECORD`) and the records' example length,
compared with what a job is about to use before any work (`check_built_with`,
`example_length`).  Remote paths are left to `pretrain.data`'s check.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import struct
from typing import Dict, Iterator, List, Optional, Tuple

from electra_tf.errors import DataError
from electra_tf.pretrain.tfrecords import BUILD_RECORD

Build = Tuple[str, Dict[str, object]]  # (build record path, its settings)


def _patterns(file_patterns: str) -> List[str]:
  return [p.strip() for p in file_patterns.split(",") if p.strip()]


def local_files(file_patterns: str) -> List[str]:
  """The record files local patterns match (hidden files left out, sorted
  per pattern); remote patterns match nothing here."""
  files: List[str] = []
  for pattern in _patterns(file_patterns):
    if "://" not in pattern:
      files += [path for path in sorted(glob.glob(pattern))
                if os.path.isfile(path) and not os.path.basename(path).startswith(".")
                and path not in files]
  return files


def finished_builds(file_patterns: str) -> List[Build]:
  """The finished builds whose folders hold the matched records."""
  builds = []
  for folder in sorted({os.path.dirname(path) for path in local_files(file_patterns)}):
    path = os.path.join(folder, BUILD_RECORD)
    try:
      with open(path, encoding="utf-8") as f:
        record = json.load(f)
    except (OSError, ValueError):
      continue
    if isinstance(record, dict) and record.get("complete"):
      builds.append((path, record["settings"]))
  return builds


def sha256_of(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def check_built_with(file_patterns: str, hparam: str, vocab_file: str,
                     do_lower_case: bool) -> None:
  """DataError (one line) when a finished build of the records was made with
  another vocab (sha256) or another casing than the job's."""
  vocab_sha256 = None
  for path, settings in finished_builds(file_patterns):
    vocab_sha256 = vocab_sha256 or sha256_of(vocab_file)
    if settings.get("vocab_sha256") != vocab_sha256:
      raise DataError(
          f"{hparam} {file_patterns}: built with another vocab than {vocab_file} (the "
          f"sha256 in {path} is {str(settings.get('vocab_sha256'))[:12]}..., the vocab's "
          f"{vocab_sha256[:12]}...): every id would mean another word; rebuild the records "
          "with this vocab, or train with the vocab they were built with")
    if settings.get("do_lower_case") != do_lower_case:
      raise DataError(
          f"{hparam} {file_patterns}: built with do_lower_case="
          f"{str(settings.get('do_lower_case')).lower()} ({path}), but the model's is "
          f"{str(do_lower_case).lower()}; rebuild the records with "
          f"--{'' if do_lower_case else 'no'}do_lower_case")


def build_summary(file_patterns: str) -> Dict[str, object]:
  """What an evaluation names of the records it read: the patterns, the
  number of files, and each finished build record's sha256 (none: records
  built elsewhere or remote)."""
  return {"pattern": file_patterns, "files": len(local_files(file_patterns)),
          "build_records": {path: sha256_of(path)
                            for path, _ in finished_builds(file_patterns)}}


def example_length(file_patterns: str) -> Optional[int]:
  """S of the records: a finished build's max_seq_length, else the length of
  the first record's input_ids; None when nothing local can be read."""
  builds = finished_builds(file_patterns)
  if builds:
    return int(builds[0][1]["max_seq_length"])
  for path in local_files(file_patterns):
    try:
      record = _first_record(path)
    except (OSError, ValueError):
      return None
    if record is not None:
      return _input_ids_length(record)
  return None


def _first_record(path: str) -> Optional[bytes]:
  """The payload of a TFRecord file's first record (framing: uint64 length,
  its CRC, the data, the data's CRC; CRCs not checked here); None if empty."""
  with open(path, "rb") as f:
    header = f.read(12)
    if not header:
      return None
    if len(header) < 12:
      raise ValueError("truncated")
    length, = struct.unpack("<Q", header[:8])
    data = f.read(length)
    if len(data) < length:
      raise ValueError("truncated")
    return data


def _varint(buffer: bytes, position: int) -> Tuple[int, int]:
  value = shift = 0
  while True:
    if position >= len(buffer):
      raise ValueError("truncated varint")
    byte = buffer[position]
    position += 1
    value |= (byte & 0x7F) << shift
    shift += 7
    if not byte & 0x80:
      return value, position


def _fields(message: bytes) -> Iterator[Tuple[int, int, object]]:
  """(field number, wire type, value) of a protobuf message: bytes for a
  length-delimited field, an int for a varint, raw bytes for fixed ones."""
  position = 0
  while position < len(message):
    key, position = _varint(message, position)
    number, wire = key >> 3, key & 7
    if wire == 0:
      value, position = _varint(message, position)
    elif wire == 2:
      size, position = _varint(message, position)
      value, position = message[position:position + size], position + size
    elif wire in (1, 5):
      size = 8 if wire == 1 else 4
      value, position = message[position:position + size], position + size
    else:
      raise ValueError(f"wire type {wire}")
    yield number, wire, value


def _input_ids_length(example: bytes) -> Optional[int]:
  """len(input_ids) of a serialized tf.train.Example: Example.features (1)
  -> Features.feature entries (1: key 1, value 2) -> Feature.int64_list (3)
  -> Int64List.value (1, packed or not)."""
  for number, _, features in _fields(example):
    if number != 1:
      continue
    for entry_number, _, entry in _fields(features):
      parts = {n: v for n, _, v in _fields(entry)} if entry_number == 1 else {}
      if parts.get(1) != b"input_ids":
        continue
      for feature_number, _, int64_list in _fields(parts.get(2, b"")):
        if feature_number == 3:
          count = 0
          for value_number, wire, value in _fields(int64_list):
            if value_number == 1:
              count += sum(1 for byte in value if byte < 0x80) if wire == 2 else 1
          return count
  return None
