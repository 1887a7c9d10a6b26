"""Reading a text corpus: its files, and their lines as UTF-8 text.

Shared by the vocab builder and the TFRecord builder: every non-hidden file
under a directory (recursively, sorted) or the files listed, `*.gz`
decompressed, lines as TensorFlow's GFile reads them (`gfile_lines`),
invalid UTF-8 a DataError naming file, line and byte offset (or skipped and
counted); OpenWebText's archives through `read_archive_lines`.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import lzma
import os
import random
import tarfile
from typing import BinaryIO, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from electra_tf.errors import DataError

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


def gfile_lines(stream: Iterable[bytes]) -> Iterator[Tuple[bytes, bytes]]:
  """The lines of a binary stream as TensorFlow's GFile (the official
  builder's reader) reads them, each with the bytes it took: a line ends at
  b"\\n" only, every b"\\r" is deleted, and a last line of only b"\\r" is none."""
  for raw_line in stream:
    line = raw_line.replace(b"\r", b"")
    if line:
      yield line, raw_line


def _offset_in_raw_line(raw_line: bytes, index: int) -> int:
  """The position in `raw_line` of byte `index` of the line without b"\\r"."""
  kept = [i for i, byte in enumerate(raw_line) if byte != 0x0D]
  return kept[index] if index < len(kept) else len(raw_line)


@dataclasses.dataclass(frozen=True)
class TextPosition:
  """Where reading a text stopped: after `line_no` lines, `offset` bytes into
  its (decompressed) text."""
  line_no: int = 0
  offset: int = 0


@dataclasses.dataclass
class CorpusChunk:
  path: str  # the file on disk
  lines: List[str]  # decoded, stripped; "" for blank lines
  invalid_line_numbers: List[int]  # 1-based numbers of skipped non-UTF-8 lines
  member: Optional[str] = None  # the text's name inside an archive at `path`
  bytes_read: int = 0  # position in the file on disk
  end_of_text: bool = False  # last chunk of a text (a file, or an archive member)
  end_of_file: bool = False  # last chunk of the file on disk
  token_ids: Optional[List[List[int]]] = None  # of the non-blank lines
  position: TextPosition = TextPosition()  # in the text, after this chunk

  @property
  def text_name(self) -> str:
    """The text in messages: the file, or the archive and the member."""
    return self.path if self.member is None else f"{self.path}, document {self.member}"


def _text_chunks(stream: Iterable[bytes], raw: BinaryIO, path: str,
                 member: Optional[str], last_text: bool, chunk_lines: int,
                 skip_invalid_utf8: bool, start: TextPosition = TextPosition()
                 ) -> Iterator[CorpusChunk]:
  """The chunks of one text's lines, read from `stream` (`raw`: the file on
  disk, for the position); its last chunk ends the file if `last_text`.
  `start`: where the stream stands in the text."""
  line_no = start.line_no
  offset = start.offset  # of the current line in the (decompressed) text
  chunk = CorpusChunk(path, [], [], member)
  try:
    for line, raw_line in gfile_lines(stream):
      line_no += 1
      try:
        chunk.lines.append(line.decode("utf-8").strip())
      except UnicodeDecodeError as e:
        if not skip_invalid_utf8:
          raise DataError(
              f"corpus file {chunk.text_name}: line {line_no} is not valid UTF-8 "
              f"({e.reason} at byte offset {offset + _offset_in_raw_line(raw_line, e.start)}); "
              "convert or remove the file, or pass --skip_invalid_utf8 to skip such lines"
          ) from None
        chunk.invalid_line_numbers.append(line_no)
      offset += len(raw_line)
      if len(chunk.lines) >= chunk_lines:
        chunk.bytes_read = raw.tell()
        chunk.position = TextPosition(line_no, offset)
        yield chunk
        chunk = CorpusChunk(path, [], [], member)
  except (OSError, EOFError) as e:
    raise DataError(f"corpus file {chunk.text_name}: unreadable after line {line_no} "
                    f"({e})") from None
  chunk.bytes_read = raw.tell()
  chunk.position = TextPosition(line_no, offset)
  chunk.end_of_text = True
  chunk.end_of_file = last_text
  yield chunk


def read_corpus_lines(path: str, chunk_lines: int = CHUNK_LINES,
                      skip_invalid_utf8: bool = False,
                      start: TextPosition = TextPosition()) -> Iterator[CorpusChunk]:
  """The lines of a text or .gz file (of its decompressed text), by GFile's
  rule (`gfile_lines`), from `start` (a chunk's `position`) on.

  A line that is not valid UTF-8 is a DataError naming the file, the line and
  the byte offset (in the decompressed text of a .gz file), unless
  `skip_invalid_utf8`: then its number goes to `invalid_line_numbers`.
  """
  with open(path, "rb") as raw:
    stream = gzip.GzipFile(fileobj=raw) if path.endswith(".gz") else raw
    try:
      stream.seek(start.offset)  # a .gz file is decompressed up to there
    except (OSError, EOFError) as e:
      raise DataError(f"corpus file {path}: unreadable before byte offset "
                      f"{start.offset} ({e})") from None
    yield from _text_chunks(stream, raw, path, None, True, chunk_lines,
                            skip_invalid_utf8, start)


def read_archive_lines(path: str, rng: random.Random, chunk_lines: int = CHUNK_LINES,
                       skip_invalid_utf8: bool = False) -> Iterator[CorpusChunk]:
  """The lines of the texts of an xz-compressed tar archive (OpenWebText's),
  text after text in an order shuffled by `rng`, as `read_corpus_lines`
  reads a file.  A damaged archive, or one of .xz archives, is a DataError;
  one without texts yields one empty chunk."""
  with open(path, "rb") as raw:
    try:
      with lzma.LZMAFile(raw) as stream, tarfile.open(fileobj=stream, mode="r|") as archive:
        texts = []
        for member in archive:
          if member.name.endswith(".xz"):
            raise DataError(
                f"corpus archive {path}: holds the archive {member.name}, not texts "
                "(unpack the OpenWebText download first: tar xf openwebtext.tar.xz, "
                "then pass its openwebtext/ folder)")
          if member.isfile():
            texts.append((member.name, archive.extractfile(member).read()))
        while stream.read(1 << 20):  # on to the xz end, whose checks find a cut file
          pass
    except (lzma.LZMAError, tarfile.TarError, EOFError, OSError) as e:
      raise DataError(f"corpus archive {path}: damaged or not an xz-compressed tar "
                      f"archive ({e})") from None
    texts.sort()
    rng.shuffle(texts)
    for i, (member, text) in enumerate(texts):
      yield from _text_chunks(io.BytesIO(text), raw, path, member, i == len(texts) - 1,
                              chunk_lines, skip_invalid_utf8)
    if not texts:
      yield CorpusChunk(path, [], [], bytes_read=raw.tell(), end_of_file=True)
