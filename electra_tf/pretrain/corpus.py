"""Reading a text corpus: its files, and their lines as UTF-8 text.

Shared by the vocab learner (`pretrain.vocab`) and the TFRecord builder
(`pretrain.tfrecords`), so that both read a corpus exactly alike: every
non-hidden file under a directory (recursively, in sorted order) or the
files listed, `*.gz` decompressed, lines split at b"\\n" only (as the
official GFile reader), a line that is not valid UTF-8 an error naming the
file, line and byte offset unless asked to skip and count such lines.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
from typing import Iterator, List, Optional, Sequence, Union

from electra_tf.tokenization import DataError

CHUNK_LINES = 4096  # lines per chunk (the TFRecord builder tokenizes a chunk per call)


def list_corpus_files(corpus: Union[str, Sequence[str]],
                      name: str = "--corpus_dir") -> List[str]:
  """Files of a corpus dir (recursive, sorted, no hidden ones) or of a list."""
  if isinstance(corpus, (str, os.PathLike)):
    corpus = os.fspath(corpus)
    if not os.path.exists(corpus):
      raise DataError(f"{name} {corpus}: does not exist")
    if not os.path.isdir(corpus):
      raise DataError(f"{name} {corpus}: is not a directory")
    files = []
    for root, dirs, names in os.walk(corpus):
      dirs[:] = sorted(d for d in dirs if not d.startswith("."))
      files += [os.path.join(root, n) for n in names if not n.startswith(".")]
    if not files:
      raise DataError(f"{name} {corpus}: contains no files")
    return sorted(files)
  files = [os.fspath(f) for f in corpus]
  if not files:
    raise DataError(f"{name}: no corpus files given")
  for path in files:
    if not os.path.isfile(path):
      raise DataError(f"{name}: corpus file {path} does not exist")
  return files


@dataclasses.dataclass
class CorpusChunk:
  path: str
  lines: List[str]  # decoded, stripped; "" for blank lines
  invalid_line_numbers: List[int]  # 1-based numbers of skipped non-UTF-8 lines
  bytes_read: int = 0  # position in the file on disk
  end_of_file: bool = False
  token_ids: Optional[List[List[int]]] = None  # of the non-blank lines


def read_corpus_lines(path: str, chunk_lines: int = CHUNK_LINES,
                      skip_invalid_utf8: bool = False) -> Iterator[CorpusChunk]:
  """The lines of a text or .gz file, split at b"\\n" only (as official GFile).

  A line that is not valid UTF-8 is a DataError naming the file, the line and
  the byte offset (in the decompressed text of a .gz file), unless
  `skip_invalid_utf8`: then its number goes to `invalid_line_numbers`.
  """
  with open(path, "rb") as raw:
    stream = gzip.GzipFile(fileobj=raw) if path.endswith(".gz") else raw
    line_no = 0
    offset = 0  # of the current line in the (decompressed) text
    chunk = CorpusChunk(path, [], [])
    try:
      for raw_line in stream:
        line_no += 1
        try:
          chunk.lines.append(raw_line.decode("utf-8").strip())
        except UnicodeDecodeError as e:
          if not skip_invalid_utf8:
            raise DataError(
                f"corpus file {path}: line {line_no} is not valid UTF-8 ({e.reason} "
                f"at byte offset {offset + e.start}); convert or remove the file, "
                "or pass --skip_invalid_utf8 to skip such lines") from None
          chunk.invalid_line_numbers.append(line_no)
        offset += len(raw_line)
        if len(chunk.lines) >= chunk_lines:
          chunk.bytes_read = raw.tell()
          yield chunk
          chunk = CorpusChunk(path, [], [])
    except (OSError, EOFError) as e:
      raise DataError(f"corpus file {path}: unreadable after line {line_no} ({e})") from None
    chunk.bytes_read = raw.tell()
    chunk.end_of_file = True
    yield chunk
