"""Pre-training TFRecords from text (official build_pretraining_dataset.py).

`build_tfrecords`, the library behind `data_prep/build_tfrecords.py`: a
corpus dir (a line a sentence, a blank line or a file's end ends a document)
or the OpenWebText release -> `output_dir/pretrain_data.tfrecord-I-of-N`,
tf.train.Example records of int64 [max_seq_length] input_ids ([CLS] A [SEP]
(B [SEP]), zero-padded), input_mask, segment_ids; the official script's
output with `num_processes` jobs, reproducible with `seed`, resumable after
a kill (`BUILD_RECORD`).  docs/pretraining.md.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
import json
import multiprocessing
import os
import random
import re
import signal
import sys
import threading
import time
from typing import Callable, Deque, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from electra_tf import fileio
from electra_tf import stop_points
from electra_tf import vocabulary
from electra_tf.errors import DataError, TrainingError
from electra_tf.pretrain import corpus as corpus_lib

OUTPUT_PREFIX = "pretrain_data.tfrecord"
_OUTPUT_NAME = re.compile(re.escape(OUTPUT_PREFIX) + r"-\d+-of-\d+")
BUILD_RECORD = ".pretrain_data.build.json"  # settings and progress, in output_dir
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
SINGLE_SEGMENT_PROB = 0.1  # forced one-segment examples, like single-text tasks
SHORT_TARGET_PROB = 0.05  # the next example aims at a random shorter length
MIN_SHORT_TARGET = 5
TOKENIZERS = ("fast", "reference")
CHECKPOINT_MB = 64.0  # default input between two progress notes
_PROGRESS_EVERY_S = 20.0
_RECORD_VERSION = 1

PackedExample = Tuple[List[int], List[int], List[int]]  # input_ids, input_mask, segment_ids


def usable_cores() -> int:
  """The CPU cores this process may run on (its affinity mask)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # no sched_getaffinity on this platform
    return os.cpu_count() or 1


# --------------------------------------------------------------- examples
def pack_example(first_segment: Sequence[int], second_segment: Sequence[int],
                 cls_id: int, sep_id: int, max_length: int) -> PackedExample:
  """[CLS] A [SEP] (B [SEP]) with its mask and segment ids, zero-padded."""
  input_ids = [cls_id, *first_segment, sep_id]
  segment_ids = [0] * len(input_ids)
  if second_segment:
    input_ids += [*second_segment, sep_id]
    segment_ids += [1] * (len(second_segment) + 1)
  padding = [0] * (max_length - len(input_ids))
  return (input_ids + padding, [1] * len(input_ids) + padding,
          segment_ids + padding)


def _varint(value: int) -> bytes:
  """Protocol-buffer base-128 varint of a non-negative int."""
  out = bytearray()
  while value > 0x7F:
    out.append(value & 0x7F | 0x80)
    value >>= 7
  out.append(value)
  return bytes(out)


class EncodedLine:
  """A line's token ids as their protocol-buffer varints (what a record
  holds); len() is the number of tokens."""

  __slots__ = ("varints", "length")

  def __init__(self, varints: bytes, length: int):
    self.varints = varints
    self.length = length

  def __len__(self) -> int:
    return self.length

  def head(self, num_tokens: int) -> bytes:
    """The varints of the first `num_tokens` tokens."""
    if num_tokens >= self.length:
      return self.varints
    for end, byte in enumerate(self.varints):
      if num_tokens <= 0:
        return self.varints[:end]
      num_tokens -= byte < 0x80  # the last byte of a varint ends a token
    return self.varints


def encoded_lines(flat_ids, row_splits) -> Tuple[bytes, list, list]:
  """(varints of all the ids, byte splits, token splits) of tokenized lines
  (`tokenize_to_arrays`): line i is EncodedLine(varints[b[i]:b[i+1]],
  t[i+1] - t[i]). Vectorised: a few NumPy passes over the ids."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  ids = np.asarray(flat_ids, np.uint64)
  shifts = np.arange(0, 35, 7, dtype=np.uint64)  # up to 5 bytes: ids < 2**35
  groups = (ids[:, None] >> shifts) & np.uint64(0x7F)
  sizes = 1 + (ids[:, None] >> shifts[1:] != 0).sum(axis=1)
  keep = np.arange(len(shifts)) < sizes[:, None]
  more = np.arange(len(shifts)) < (sizes - 1)[:, None]  # a byte that has a successor
  varints = (groups | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8)[keep]
  byte_ends = np.concatenate([[0], np.cumsum(sizes)])
  row_splits = np.asarray(row_splits, np.int64)
  return varints.tobytes(), byte_ends[row_splits].tolist(), row_splits.tolist()


def lines_of(varints: bytes, byte_splits: list, token_splits: list) -> List[EncodedLine]:
  return [EncodedLine(varints[a:b], n1 - n0) for a, b, n0, n1 in zip(
      byte_splits, byte_splits[1:], token_splits, token_splits[1:])]


class ExampleEncoder:
  """Serializes examples as tf.train.Example bytes, equal to
  `SerializeToString(deterministic=True)` at a fraction of its cost."""

  def __init__(self, vocab_size: int, cls_id: int = 0, sep_id: int = 0,
               max_length: int = 0):
    # Varints of token ids and of field lengths, looked up instead of computed.
    self._varints = [_varint(i) for i in range(max(vocab_size, 1 << 16))]
    self._keys = [self._field(b"\x0a", name.encode())
                  for name in FEATURE_NAMES]
    self._cls, self._sep = _varint(cls_id), _varint(sep_id)
    self._max_length = max_length

  def _field(self, tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field."""
    size = len(payload)
    return tag + (self._varints[size] if size < len(self._varints)
                  else _varint(size)) + payload

  def _frame(self, ids: bytes, mask: bytes, segments: bytes) -> bytes:
    """The Example of the three features' packed varints."""
    entries = []
    for key, packed in zip(self._keys, (ids, mask, segments)):
      feature = self._field(b"\x1a", self._field(b"\x0a", packed))
      entries.append(self._field(b"\x0a", key + self._field(b"\x12", feature)))
    return self._field(b"\x0a", b"".join(entries))

  def encode(self, example: PackedExample) -> bytes:
    input_ids, input_mask, segment_ids = example
    # input_mask and segment_ids hold 0/1: each value is its own varint byte.
    return self._frame(b"".join(map(self._varints.__getitem__, input_ids)),
                       bytes(input_mask), bytes(segment_ids))

  def encode_lines(self, first: Sequence[EncodedLine], first_length: int,
                   second: Sequence[EncodedLine], second_length: int
                   ) -> Tuple[bytes, int, bool]:
    """(the record, its tokens, whether it is one segment) of the example
    whose A is the first `first_length` tokens of the lines `first` and B
    those of `second` (ExampleBuilder's `pack`): the bytes of
    encode(pack_example(A, B, ...)), without a list of ids."""
    ids = [self._cls, _head(first, first_length), self._sep]
    length = first_length + 2
    if second_length:
      ids += [_head(second, second_length), self._sep]
      length += second_length + 1
    padding = b"\x00" * (self._max_length - length)
    return (self._frame(b"".join(ids) + padding, b"\x01" * length + padding,
                        b"\x00" * (first_length + 2) + b"\x01" * (length - first_length - 2)
                        + padding), length, not second_length)


def _head(lines: Sequence[EncodedLine], num_tokens: int) -> bytes:
  """The varints of the first `num_tokens` tokens of the lines."""
  parts = []
  for line in lines:
    if num_tokens <= 0:
      break
    parts.append(line.head(num_tokens))
    num_tokens -= len(line)
  return b"".join(parts)


class ExampleBuilder:
  """Turns a stream of tokenized lines into examples (official ExampleBuilder),
  its random draws in the official order, from `rng` (docs/pretraining.md).

  A line is anything with len() (a list of ids, or an EncodedLine), and
  `pack(A lines, A length, B lines, B length)` makes the example (default: a
  PackedExample of id lists)."""

  def __init__(self, max_length: int, cls_id: int, sep_id: int,
               rng: random.Random, pack: Optional[Callable] = None):
    self._max_length = max_length
    self._cls_id = cls_id
    self._sep_id = sep_id
    self._rng = rng
    self._pack = pack or self._pack_lists
    self._lines: list = []
    self._length = 0
    self._target_length = max_length

  def add_line(self, token_ids):
    """Adds a line's tokens; returns an example once the target is reached."""
    self._lines.append(token_ids)
    self._length += len(token_ids)
    if self._length >= self._target_length:
      return self._create_example()
    return None

  def end_document(self):
    """Flushes the lines of a finished document into an example, if any."""
    if self._length:
      return self._create_example()
    return None

  def state(self) -> Dict[str, object]:
    """What the builder holds between examples, for `restore`."""
    return {"lines": list(self._lines), "target_length": self._target_length}

  def restore(self, state: Dict[str, object]) -> None:
    self._lines = list(state["lines"])
    self._length = sum(map(len, self._lines))
    self._target_length = int(state["target_length"])

  def _pack_lists(self, first: Sequence[List[int]], first_length: int,
                  second: Sequence[List[int]], second_length: int) -> PackedExample:
    return pack_example([i for line in first for i in line][:first_length],
                        [i for line in second for i in line][:second_length],
                        self._cls_id, self._sep_id, self._max_length)

  def _create_example(self):
    rng = self._rng
    if rng.random() < SINGLE_SEGMENT_PROB:
      first_target = sys.maxsize  # everything goes to segment A
    else:
      first_target = (self._target_length - 3) // 2  # room for [CLS] [SEP] [SEP]
    first, second = [], []
    first_length = second_length = 0
    for line in self._lines:
      if (not first_length or first_length + len(line) < first_target or
          (not second_length and first_length < first_target and rng.random() < 0.5)):
        first.append(line)
        first_length += len(line)
      else:
        second.append(line)
        second_length += len(line)
    first_length = min(first_length, self._max_length - 2)
    second_length = min(second_length, max(0, self._max_length - first_length - 3))
    self._lines = []
    self._length = 0
    if rng.random() < SHORT_TARGET_PROB:
      self._target_length = rng.randint(MIN_SHORT_TARGET, self._max_length)
    else:
      self._target_length = self._max_length
    return self._pack(first, first_length, second, second_length)


# ------------------------------------------------------------- tokenizing
@dataclasses.dataclass(frozen=True)
class BuildOptions:
  vocab_file: str
  output_dir: str
  max_seq_length: int
  num_out_files: int
  num_processes: int
  blanks_separate_docs: bool
  do_lower_case: bool
  strip_accents: bool
  seed: Optional[int]
  tokenizer: str
  skip_invalid_utf8: bool
  openwebtext: bool
  num_workers: int = 1
  checkpoint_bytes: int = int(CHECKPOINT_MB * 2**20)


def _make_tokenizer(options: BuildOptions):
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  tokenizer_class = (tokenization.FastTokenizer if options.tokenizer == "fast"
                     else tokenization.FullTokenizer)
  return tokenizer_class(options.vocab_file, options.do_lower_case, options.strip_accents)


_worker_tokenizer = None  # in a worker process: its tokenizer


def _watch_main_process(pid: int) -> None:
  """Ends this worker once the main process is gone (killed with -9, say)."""
  while fileio.process_alive(pid):
    time.sleep(1.0)
  os._exit(1)  # pylint: disable=protected-access


def _start_worker(options: BuildOptions, main_pid: int) -> None:
  global _worker_tokenizer
  signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process cleans up
  threading.Thread(target=_watch_main_process, args=(main_pid,), daemon=True).start()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(1)  # one core a worker
  tf.config.threading.set_inter_op_parallelism_threads(1)
  _worker_tokenizer = _make_tokenizer(options)


def _token_arrays(tokenizer, lines: Sequence[str]):
  """(flat ids, row splits) of the lines, from either tokenizer."""
  if hasattr(tokenizer, "tokenize_to_arrays"):
    return tokenizer.tokenize_to_arrays(lines)
  import numpy as np  # pylint: disable=g-import-not-at-top
  ids = tokenizer.tokenize_to_ids(lines)
  splits = np.zeros([len(ids) + 1], np.int64)
  np.cumsum([len(line) for line in ids], out=splits[1:])
  return np.array([i for line in ids for i in line], np.int64), splits


def _tokenize_in_worker(lines: Sequence[str]):
  """In a worker: the lines' varints and splits (`encoded_lines`)."""
  return encoded_lines(*_token_arrays(_worker_tokenizer, lines))


def _text_lines(chunk: corpus_lib.CorpusChunk) -> List[str]:
  return [line for line in chunk.lines if line]





def _tokenized_in_thread(chunks: Iterator, options: BuildOptions) -> Iterator:
  """(job, chunk) pairs with the chunks tokenized in this process; while the
  caller uses one chunk, the next is read and tokenized in a thread
  (TensorFlow ops release the GIL)."""
  tokenizer = _make_tokenizer(options)

  def tokenize(item):
    if item[1] is not None:  # None: a job without files
      item[1].token_ids = lines_of(*encoded_lines(*_token_arrays(
          tokenizer, _text_lines(item[1]))))
    return item

  with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
    pending = None
    for item in chunks:
      future = pool.submit(tokenize, item)
      if pending is not None:
        yield pending.result()
      pending = future
    if pending is not None:
      yield pending.result()


def _worker_ready() -> None:
  """A first task: returns once the worker has started (its tokenizer built)."""


def _start_each_worker(pool: concurrent.futures.ProcessPoolExecutor, num_workers: int) -> None:
  """Submits a first task a worker (the pool starts one process a task), until
  the pool is shut down: a build that fails first (a bad corpus line) shuts it
  down before this thread is done, and its error stays the one line printed."""
  for _ in range(num_workers):
    try:
      pool.submit(_worker_ready)
    except RuntimeError:  # "cannot schedule new futures after shutdown"
      return


def _start_workers(options: BuildOptions) -> concurrent.futures.ProcessPoolExecutor:
  """`num_workers` tokenizing processes, starting in the background."""
  context = multiprocessing.get_context("forkserver")
  # Workers fork from a server that imported TensorFlow (not yet running):
  # one import, not one a worker.
  context.set_forkserver_preload(["electra_tf.tokenization"])
  pool = concurrent.futures.ProcessPoolExecutor(
      options.num_workers, mp_context=context, initializer=_start_worker,
      initargs=(options, os.getpid()))

  # A first submit waits for the fork server's imports: in a thread, so that
  # this process imports TensorFlow meanwhile.
  threading.Thread(target=_start_each_worker, args=(pool, options.num_workers),
                   daemon=True).start()
  return pool


def _tokenized_by_workers(chunks: Iterator, options: BuildOptions,
                          pool: concurrent.futures.ProcessPoolExecutor) -> Iterator:
  """(job, chunk) pairs with the chunks tokenized by the worker processes,
  in order, at most two chunks a worker ahead of the caller."""
  pending: Deque = collections.deque()
  try:
    for item in chunks:
      pending.append((item, None if item[1] is None else  # a job without files
                      pool.submit(_tokenize_in_worker, _text_lines(item[1]))))
      while len(pending) > 2 * options.num_workers:
        item, future = pending.popleft()
        if future is not None:
          item[1].token_ids = lines_of(*future.result())
        yield item
    while pending:
      item, future = pending.popleft()
      if future is not None:
        item[1].token_ids = lines_of(*future.result())
      yield item
  except concurrent.futures.process.BrokenProcessPool as e:
    raise TrainingError(f"a tokenizing worker process died ({e}); rerun the same "
                        "command to go on from the last progress note") from None


# ------------------------------------------------------------------ record
def output_file_name(index: int, num_out_files: int) -> str:
  return f"{OUTPUT_PREFIX}-{index}-of-{num_out_files}"


def _segment_path(options: BuildOptions, index: int, segment: int) -> str:
  name = f".{output_file_name(index, options.num_out_files)}.partial"
  return os.path.join(options.output_dir, name + (f".{segment}" if segment else ""))


def _settings(options: BuildOptions, corpus_files: Sequence[str],
              corpus_root: Optional[str]) -> Dict[str, object]:
  """What decides the records: a rerun must match it to go on."""
  return {
      "corpus_files": [[os.path.relpath(f, corpus_root) if corpus_root else os.path.abspath(f),
                        os.path.getsize(f)] for f in corpus_files],
      "vocab_sha256": fileio.file_sha256(options.vocab_file),
      **{name: getattr(options, name) for name in (
          "max_seq_length", "num_out_files", "num_processes", "blanks_separate_docs",
          "do_lower_case", "strip_accents", "seed", "skip_invalid_utf8", "openwebtext")},
  }


def _settings_difference(there: Dict[str, object], here: Dict[str, object]) -> str:
  for name, value in here.items():
    if name == "corpus_files" and there.get(name) != value:
      old = {path: size for path, size in there.get(name) or []}
      new = {path: size for path, size in value}
      changed = sorted(set(old.items()) ^ set(new.items()))
      path = changed[0][0]
      return (f"corpus file {path}: " + (
          "not in the corpus there" if path not in old else "not in the corpus here"
          if path not in new else f"{old[path]} bytes there, {new[path]} here"))
    if there.get(name) != value:
      return f"{name}: {json.dumps(there.get(name))} there, {json.dumps(value)} here"
  return ""


def _rng_state(rng: random.Random) -> list:
  version, internal, gauss = rng.getstate()
  return [version, list(internal), gauss]


def _set_rng_state(rng: random.Random, state: list) -> random.Random:
  rng.setstate((state[0], tuple(state[1]), state[2]))
  return rng


def _job_rng(seed: Optional[int], *stream: object) -> random.Random:
  """A generator seeded by `seed` and the names of its stream; unseeded
  (as official) without `seed`."""
  if seed is None:
    return random.Random()
  return random.Random("/".join(map(str, (seed, *stream))))


# files: texts read (corpus files, or the documents of the archives)
_COUNTERS = ("files", "empty_files", "archives", "invalid_utf8_lines", "documents",
             "examples", "single_segment_examples", "tokens", "example_tokens")


def _new_record(settings: Dict[str, object], options: BuildOptions,
                num_corpus_files: int) -> Dict[str, object]:
  """The record of a build not begun: each job's files in its order and its
  generators' states (drawn now, so that an unseeded build resumes too)."""
  jobs = []
  for job_id in range(options.num_processes):
    rng = _job_rng(options.seed, job_id)
    files = [i for i in range(num_corpus_files) if i % options.num_processes == job_id]
    rng.shuffle(files)  # official: random.shuffle(fnames), then building
    jobs.append({
        "files": files, "next_file": 0, "position": None, "rng": _rng_state(rng),
        "documents_rng": (_rng_state(_job_rng(options.seed, job_id, "documents"))
                          if options.openwebtext else None),
        "builder": None, "document_has_tokens": False, "file_has_text": False,
        "stats": dict.fromkeys(_COUNTERS, 0), "done": False})
  return {"version": _RECORD_VERSION, "settings": settings, "jobs": jobs,
          "segments": {str(i): [] for i in range(options.num_out_files)},
          "complete": False, "summary": None}


def _save_record(options: BuildOptions, record: Dict[str, object]) -> None:
  fileio.atomic_write_text(os.path.join(options.output_dir, BUILD_RECORD),
                           json.dumps(record, separators=(",", ":")))


def _load_record(output_dir: str) -> Optional[Dict[str, object]]:
  path = os.path.join(output_dir, BUILD_RECORD)
  if not os.path.exists(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      record = json.load(f)
    if record.get("version") != _RECORD_VERSION:
      raise ValueError(f"version {record.get('version')}, not {_RECORD_VERSION}")
  except ValueError as e:
    raise DataError(f"--output_dir {output_dir}: its build record {BUILD_RECORD} is "
                    f"unreadable ({e}); remove the folder's {BUILD_RECORD} and "
                    ".*.partial* files to build anew") from None
  return record


def _cut_back_segments(options: BuildOptions, record: Dict[str, object]) -> None:
  """Cuts every output piece back to its noted size (what a killed run wrote
  after its last note goes)."""
  for index, sizes in record["segments"].items():
    for segment, size in enumerate(sizes):
      path = _segment_path(options, int(index), segment)
      if not os.path.exists(path):
        if record["complete"] or os.path.exists(os.path.join(
            options.output_dir, output_file_name(int(index), options.num_out_files))):
          continue  # joined and renamed already
        raise DataError(f"--output_dir {options.output_dir}: {os.path.basename(path)} "
                        "is missing; remove the folder's build record "
                        f"{BUILD_RECORD} to build anew")
      if os.path.getsize(path) < size:
        raise DataError(f"--output_dir {options.output_dir}: {os.path.basename(path)} "
                        f"holds {os.path.getsize(path)} bytes, fewer than the "
                        f"{size} noted (written before a machine crash?); remove the "
                        f"folder's build record {BUILD_RECORD} to build anew")
      os.truncate(path, size)


# ------------------------------------------------------------------ jobs
def _job_chunks(record: Dict[str, object], corpus_files: Sequence[str],
                options: BuildOptions) -> Iterator[Tuple[int, corpus_lib.CorpusChunk]]:
  """(job id, chunk) of every job not done, from where its record stands.
  A chunk that ends an archive carries the state of the job's document
  generator after it (`documents_rng`)."""
  for job_id, job in enumerate(record["jobs"]):
    if job["done"]:
      continue
    documents_rng = (_set_rng_state(random.Random(), job["documents_rng"])
                     if options.openwebtext else None)
    position = corpus_lib.TextPosition(*job["position"] or (0, 0))
    for number in range(job["next_file"], len(job["files"])):
      path = corpus_files[job["files"][number]]
      if options.openwebtext:
        chunks = corpus_lib.read_archive_lines(
            path, documents_rng, skip_invalid_utf8=options.skip_invalid_utf8)
      else:
        chunks = corpus_lib.read_corpus_lines(
            path, skip_invalid_utf8=options.skip_invalid_utf8, start=position)
      position = corpus_lib.TextPosition()
      for chunk in chunks:
        chunk.file_number = number
        if chunk.end_of_file and documents_rng is not None:
          chunk.documents_rng = _rng_state(documents_rng)
        yield job_id, chunk
    if not job["files"]:  # a job without files still ends
      yield job_id, None


class _Progress:
  """Progress lines on stderr every _PROGRESS_EVERY_S: files, examples,
  tokens/s (of this run) and the ETA (from the bytes left)."""

  def __init__(self, record: Dict[str, object], corpus_files: Sequence[str]):
    self.sizes = [os.path.getsize(f) for f in corpus_files]
    self.total_bytes = max(1, sum(self.sizes))
    self.total_files = len(corpus_files)
    self.done_files = sum(job["next_file"] for job in record["jobs"])
    self.done_bytes = sum(self.sizes[f] for job in record["jobs"]
                          for f in job["files"][:job["next_file"]])
    self.start_bytes = self.done_bytes
    self.tokens = 0
    self.start = self.last = time.time()

  def file_done(self, size: int) -> None:
    self.done_files += 1
    self.done_bytes += size

  def maybe_report(self, examples: Callable[[], int], file_bytes: int) -> None:
    now = time.time()
    if now - self.last < _PROGRESS_EVERY_S:
      return
    self.last = now
    elapsed = now - self.start
    done = self.done_bytes + file_bytes
    rate = (done - self.start_bytes) / max(elapsed, 1e-9)
    eta = f"{(self.total_bytes - done) / rate:.0f}s" if rate > 0 else "?"
    print(f"build_tfrecords: {self.done_files}/{self.total_files} files "
          f"({100 * done / self.total_bytes:.1f}% of the bytes), {examples()} examples, "
          f"{self.tokens / max(elapsed, 1e-9):.0f} tokens/s, elapsed {elapsed:.0f}s, "
          f"ETA {eta}", file=sys.stderr, flush=True)


class _Job:
  """One official job's example builder and writers, from its record."""

  def __init__(self, job_id: int, record: Dict[str, object], options: BuildOptions,
               special, encoder: ExampleEncoder):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    self.job_id = job_id
    self.job = record["jobs"][job_id]
    self.record = record
    self.options = options
    self.rng = _set_rng_state(random.Random(), self.job["rng"])
    self.builder = ExampleBuilder(options.max_seq_length, special.cls_id, special.sep_id,
                                  self.rng, pack=encoder.encode_lines)
    if self.job["builder"]:
      state = self.job["builder"]
      self.builder.restore({**state, "lines": [
          EncodedLine(bytes.fromhex(varints), length) for length, varints in state["lines"]]})
    self.stats = dict(self.job["stats"])
    self.encoder = encoder
    self.outputs = [i for i in range(options.num_out_files)
                    if i % options.num_processes == job_id]
    self.segments = [len(record["segments"][str(i)]) for i in self.outputs]
    self.paths = [_segment_path(options, i, segment)
                  for i, segment in zip(self.outputs, self.segments)]
    self.writers = [tf.io.TFRecordWriter(path) for path in self.paths]
    self.document_has_tokens = self.job["document_has_tokens"]
    self.file_has_text = self.job["file_has_text"]
    self.bytes_since_note = 0
    self.last_bytes_read = 0

  def write(self, example: Optional[Tuple[bytes, int, bool]]) -> None:
    if example is None:
      return
    record, length, single_segment = example
    self.writers[self.stats["examples"] % len(self.writers)].write(record)
    self.stats["examples"] += 1
    self.stats["example_tokens"] += length
    self.stats["single_segment_examples"] += single_segment

  def add(self, chunk: corpus_lib.CorpusChunk) -> None:
    """Builds the examples of a tokenized chunk."""
    stats, options = self.stats, self.options
    if chunk.invalid_line_numbers:
      stats["invalid_utf8_lines"] += len(chunk.invalid_line_numbers)
      print(f"job {self.job_id}: corpus file {chunk.text_name}: skipped "
            f"{len(chunk.invalid_line_numbers)} line(s) that are not valid "
            f"UTF-8 (first: line {chunk.invalid_line_numbers[0]})",
            file=sys.stderr, flush=True)
    token_ids = iter(chunk.token_ids)
    for line in chunk.lines:
      if line:
        ids = next(token_ids)
        stats["tokens"] += len(ids)
        self.file_has_text = True
        self.document_has_tokens |= bool(ids)
        self.write(self.builder.add_line(ids))
      elif options.blanks_separate_docs:
        self.end_document()
    if chunk.end_of_text:
      self.end_document()  # official: a file's end ends a document
      stats["files"] += 1
      if not self.file_has_text:
        stats["empty_files"] += 1
        print(f"job {self.job_id}: corpus file {chunk.text_name}: no text, skipped",
              file=sys.stderr, flush=True)
      self.file_has_text = False
    self.bytes_since_note += chunk.bytes_read - self.last_bytes_read
    self.last_bytes_read = 0 if chunk.end_of_file else chunk.bytes_read
    if chunk.end_of_file:
      stats["archives"] += options.openwebtext
      self.job["next_file"] = chunk.file_number + 1
      self.job["position"] = None
    else:
      self.job["next_file"] = chunk.file_number
      self.job["position"] = [chunk.position.line_no, chunk.position.offset]
    if getattr(chunk, "documents_rng", None) is not None:
      self.job["documents_rng"] = chunk.documents_rng

  def end_document(self) -> None:
    self.stats["documents"] += self.document_has_tokens
    self.document_has_tokens = False
    self.write(self.builder.end_document())

  def note_due(self, chunk: corpus_lib.CorpusChunk) -> bool:
    return (self.bytes_since_note >= self.options.checkpoint_bytes and
            (chunk.end_of_file or not self.options.openwebtext))

  def note(self, done: bool = False) -> None:
    """Hands the records written so far to the operating system (which keeps
    them when the process is killed) and notes the job's progress. Not
    fsync'ed: a thousand output files would cost seconds a note; after a
    machine crash, a piece shorter than noted stops the rerun
    (`_cut_back_segments`)."""
    for writer, path, index, segment in zip(self.writers, self.paths, self.outputs,
                                            self.segments):
      writer.flush()
      self.record["segments"][str(index)][segment:] = [os.path.getsize(path)]
    builder = self.builder.state()
    builder["lines"] = [[len(line), line.varints.hex()] for line in builder["lines"]]
    self.job.update(
        rng=_rng_state(self.rng), builder=builder, stats=dict(self.stats),
        document_has_tokens=self.document_has_tokens, file_has_text=self.file_has_text,
        done=done)
    _save_record(self.options, self.record)
    self.bytes_since_note = 0
    stop_points.reached("tfrecords_checkpoint")

  def close(self) -> None:
    for writer in self.writers:
      writer.close()


def _run_jobs(record: Dict[str, object], corpus_files: Sequence[str],
              options: BuildOptions) -> int:
  """Runs the jobs not done, noting progress in the record; returns the
  tokens read by this run."""
  pool = _start_workers(options) if options.num_workers > 1 else None
  vocab = vocabulary.load_vocab(options.vocab_file)
  special = vocabulary.special_ids(vocab, options.vocab_file)
  encoder = ExampleEncoder(max(vocab.values()) + 1, special.cls_id, special.sep_id,
                           options.max_seq_length)
  progress = _Progress(record, corpus_files)
  chunks = _job_chunks(record, corpus_files, options)
  job = None
  try:
    # Imported while the workers start (the TFRecord writers need it).
    import tensorflow  # pylint: disable=g-import-not-at-top,unused-import,redefined-outer-name
    for job_id, chunk in (_tokenized_in_thread(chunks, options) if pool is None
                          else _tokenized_by_workers(chunks, options, pool)):
      if job is None or job.job_id != job_id:
        if job is not None:
          job.note(done=True)
          job.close()
        job = _Job(job_id, record, options, special, encoder)
      if chunk is None:
        continue
      tokens_before = job.stats["tokens"]
      job.add(chunk)
      progress.tokens += job.stats["tokens"] - tokens_before
      if chunk.end_of_file:
        progress.file_done(progress.sizes[job.job["files"][chunk.file_number]])
      progress.maybe_report(lambda: job.stats["examples"] + sum(
          other["stats"]["examples"] for other in record["jobs"] if other is not job.job),
                            0 if chunk.end_of_file else chunk.bytes_read)
      stop_points.reached("tfrecords_writing")
      if job.note_due(chunk):
        job.note()
    if job is not None:
      job.note(done=True)
  finally:
    if job is not None:
      job.close()
    if pool is not None:
      pool.shutdown(wait=True, cancel_futures=True)
  return progress.tokens


def _finish(record: Dict[str, object], options: BuildOptions) -> List[str]:
  """Joins each output file's pieces and renames it to its final name (a
  rerun after a kill here goes on where it stopped); returns the names."""
  names = []
  for index_text, sizes in record["segments"].items():
    index = int(index_text)
    name = output_file_name(index, options.num_out_files)
    names.append(name)
    first = _segment_path(options, index, 0)
    if not os.path.exists(first):  # joined and renamed by an earlier run
      for segment in range(1, len(sizes)):
        if os.path.exists(_segment_path(options, index, segment)):
          os.remove(_segment_path(options, index, segment))
      continue
    with open(first, "r+b") as out:
      out.truncate(sizes[0])
      out.seek(sizes[0])
      for segment, size in enumerate(sizes[1:], 1):
        with open(_segment_path(options, index, segment), "rb") as piece:
          remaining = size
          while remaining:
            block = piece.read(min(remaining, 1 << 24))
            out.write(block)
            remaining -= len(block)
    os.replace(first, os.path.join(options.output_dir, name))
    for segment in range(1, len(sizes)):
      os.remove(_segment_path(options, index, segment))
    stop_points.reached("tfrecords_finishing")
  return names


# ------------------------------------------------------------------ build
def _check_options(options: BuildOptions) -> None:
  if options.max_seq_length < MIN_SHORT_TARGET:
    raise DataError(f"--max_seq_length: {options.max_seq_length} is below "
                    f"{MIN_SHORT_TARGET} (official random target lengths start at 5)")
  if options.num_processes < 1:
    raise DataError(f"--num_processes: {options.num_processes} must be >= 1")
  if options.num_out_files < options.num_processes:
    raise DataError(f"--num_out_files: {options.num_out_files} must be >= "
                    f"--num_processes {options.num_processes} (each job "
                    "writes its own files)")
  if options.num_workers < 1:
    raise DataError(f"--num_workers: {options.num_workers} must be >= 1")
  if options.checkpoint_bytes <= 0:
    raise DataError("--checkpoint_every_mb: must be > 0")
  if options.tokenizer not in TOKENIZERS:
    raise DataError(f"--tokenizer: {options.tokenizer!r} is not one of {', '.join(TOKENIZERS)}")
  if os.path.exists(options.output_dir) and not os.path.isdir(options.output_dir):
    raise DataError(f"--output_dir {options.output_dir}: exists and is not a directory")


def summarize(job_stats: Sequence[Dict[str, int]], elapsed_s: float,
              tokens_this_run: Optional[int] = None) -> Dict[str, float]:
  """Totals of the jobs' counters plus shares, means and throughput (of the
  tokens this run read: all of them unless told)."""
  totals = {name: sum(s[name] for s in job_stats) for name in _COUNTERS}
  examples = max(1, totals["examples"])
  tokens = totals["tokens"] if tokens_this_run is None else tokens_this_run
  return {
      **totals,
      "single_segment_fraction": totals["single_segment_examples"] / examples,
      "mean_length": totals["example_tokens"] / examples,
      "elapsed_s": elapsed_s,
      "tokens_per_s": tokens / max(elapsed_s, 1e-9),
  }


def _remove_partials(options: BuildOptions) -> None:
  for name in os.listdir(options.output_dir):
    if name == BUILD_RECORD or (name.startswith(f".{OUTPUT_PREFIX}-") and
                                ".partial" in name):
      os.remove(os.path.join(options.output_dir, name))


def forget_finished_build(output_dir: str) -> None:
  """Drops the record of a finished build in output_dir, so that a build
  with other settings may replace its files (an unfinished one is kept)."""
  record = _load_record(output_dir) if os.path.isdir(output_dir) else None
  if record is not None and record["complete"]:
    os.remove(os.path.join(output_dir, BUILD_RECORD))


def build_tfrecords(corpus_files_or_dir: Union[str, Sequence[str]], vocab_file: str,
                    output_dir: str, *, max_seq_length: int = 128,
                    num_out_files: int = 1000, num_processes: int = 1,
                    blanks_separate_docs: Optional[bool] = None,
                    do_lower_case: bool = True,
                    strip_accents: bool = True, seed: Optional[int] = None,
                    tokenizer: str = "fast", skip_invalid_utf8: bool = False,
                    openwebtext: bool = False, num_workers: int = 1,
                    checkpoint_every_mb: float = CHECKPOINT_MB,
                    log: Callable[[str], None] = lambda s: print(s, flush=True),
                    ) -> Dict[str, float]:
  """Builds the TFRecords (module docstring), or goes on with an unfinished
  build of the same settings in output_dir; returns the summary counters.
  `blanks_separate_docs` None: False for `openwebtext`, else True;
  `num_workers`: tokenizing processes (1: a thread of this process)."""
  if blanks_separate_docs is None:
    blanks_separate_docs = not openwebtext
  options = BuildOptions(
      vocab_file=os.fspath(vocab_file), output_dir=os.fspath(output_dir),
      max_seq_length=max_seq_length, num_out_files=num_out_files,
      num_processes=num_processes, blanks_separate_docs=blanks_separate_docs,
      do_lower_case=do_lower_case, strip_accents=strip_accents, seed=seed,
      tokenizer=tokenizer, skip_invalid_utf8=skip_invalid_utf8, openwebtext=openwebtext,
      num_workers=num_workers, checkpoint_bytes=int(checkpoint_every_mb * 2**20))
  _check_options(options)
  corpus_files = corpus_lib.list_corpus_files(
      corpus_files_or_dir, "--openwebtext_dir" if openwebtext else "--corpus_dir")
  vocabulary.special_ids(vocabulary.load_vocab(options.vocab_file), options.vocab_file)
  corpus_root = (os.fspath(corpus_files_or_dir)
                 if isinstance(corpus_files_or_dir, (str, os.PathLike)) else None)
  settings = _settings(options, corpus_files, corpus_root)
  record = _load_record(options.output_dir) if os.path.isdir(options.output_dir) else None
  if record is not None:
    difference = _settings_difference(record["settings"], settings)
    if difference:
      state = "a finished" if record["complete"] else "an unfinished"
      raise DataError(f"--output_dir {options.output_dir}: holds {state} build with other "
                      f"settings ({difference}); use another --output_dir, or remove "
                      f"this one's {BUILD_RECORD} and pretrain_data.tfrecord* files")
    if record["complete"]:
      missing = [name for name in map(functools.partial(
          output_file_name, num_out_files=num_out_files), range(num_out_files))
                 if not os.path.exists(os.path.join(options.output_dir, name))]
      if missing:
        raise DataError(f"--output_dir {options.output_dir}: the finished build's "
                        f"{missing[0]} is missing; remove {BUILD_RECORD} there to build anew")
      log(format_summary(record["summary"], options.output_dir, num_out_files,
                         already_built=True))
      return record["summary"]
  created_output_dir = not os.path.isdir(options.output_dir)
  new_build = record is None
  fileio.check_writable(options.output_dir, "--output_dir")
  fileio.remove_stale_temporaries(options.output_dir)  # of a record being replaced
  start = time.time()
  finished = False
  try:
    if new_build:
      record = _new_record(settings, options, len(corpus_files))
      _remove_partials(options)  # left by a build killed before its first note
      _save_record(options, record)
    else:
      done = sum(job["next_file"] for job in record["jobs"])
      log(f"Resuming the unfinished build in {options.output_dir}: {done} of "
          f"{len(corpus_files)} corpus files done")
      _cut_back_segments(options, record)
    tokens = _run_jobs(record, corpus_files, options)
    summary = summarize([job["stats"] for job in record["jobs"]], time.time() - start,
                        tokens)
    if not summary["examples"]:
      raise DataError(f"corpus: no text in the {len(corpus_files)} corpus file(s) "
                      "(all empty or not UTF-8); nothing written")
    final_names = set(_finish(record, options))
    for name in os.listdir(options.output_dir):
      if _OUTPUT_NAME.fullmatch(name) and name not in final_names:
        os.remove(os.path.join(options.output_dir, name))
    record.update(complete=True, summary=summary)
    _save_record(options, record)
    finished = True
  except DataError:
    if new_build:  # bad input: leave no trace
      _remove_partials(options)
      if created_output_dir and not os.listdir(options.output_dir):
        os.rmdir(options.output_dir)
    raise
  finally:
    if not finished and new_build and created_output_dir and os.path.isdir(
        options.output_dir) and not os.listdir(options.output_dir):
      os.rmdir(options.output_dir)
  log(format_summary(summary, options.output_dir, num_out_files))
  return summary


def format_summary(summary: Dict[str, float], output_dir: str, num_out_files: int,
                   already_built: bool = False) -> str:
  archives = f" in {summary['archives']} archives" if summary["archives"] else ""
  return "\n".join([
      f"{'Already built' if already_built else 'Wrote'} {summary['examples']} examples to "
      f"{num_out_files} files {os.path.join(output_dir, OUTPUT_PREFIX)}-*-of-{num_out_files}",
      f"  corpus files: {summary['files']} ({summary['empty_files']} empty){archives}, "
      f"lines skipped as invalid UTF-8: {summary['invalid_utf8_lines']}",
      f"  documents: {summary['documents']}, tokens: {summary['tokens']}",
      f"  single-segment examples: {100 * summary['single_segment_fraction']:.1f}%, "
      f"mean length: {summary['mean_length']:.1f} tokens",
      f"  time: {summary['elapsed_s']:.1f}s, {summary['tokens_per_s']:.0f} tokens/s",
  ])
