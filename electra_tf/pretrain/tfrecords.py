"""Pre-training TFRecords from text (official build_pretraining_dataset.py).

`build_tfrecords` is the library behind `data_prep/build_tfrecords.py`.
Input: every non-hidden file under the corpus dir (recursively, in sorted
order); `*.gz` files are decompressed, the others read as UTF-8 text. A line
is a sentence; a blank line ends a document (with --blanks_separate_docs), and
so does the end of a file. A line that is not valid UTF-8 (a binary file, a
file in another encoding) stops the build with an error naming the file, line
and byte offset, unless --skip_invalid_utf8 asks to skip and count such lines;
empty files are counted.

OpenWebText (official build_openwebtext_pretraining_dataset.py; `openwebtext`):
the corpus dir is the release's `openwebtext/` folder, whose every file (in
sorted order, as above) is an xz-compressed tar archive of text files, one
document each. Each archive is decompressed as a stream (nothing is extracted
to disk) and its texts read in a shuffled order, each as a corpus file is:
its end ends a document, and blank lines are skipped rather than ending one
(official: blanks_separate_docs=False, the default with `openwebtext`). A
damaged archive stops the build with an error naming it.

Output: `output_dir/pretrain_data.tfrecord-I-of-N`, tf.train.Example records
with int64 features of length S = max_seq_length:
  input_ids   [CLS] A [SEP] (B [SEP]), then zeros
  input_mask  1 on those tokens, then zeros
  segment_ids 0 on [CLS] A [SEP], 1 on B [SEP], then zeros
Examples are built as the official ExampleBuilder builds them (see
`ExampleBuilder`). With N processes, process j reads the files i with
i % N == j (in an order shuffled by its own seed) and writes the output files
i with i % N == j, cycling through them example by example, as official.
With `seed`, a build is reproducible; the texts of an archive are shuffled
by a second generator of the process, so that reading ahead of the example
builder leaves the builder's random draws as they are.

Files are written under hidden temporary names and renamed only when the whole
build has succeeded, so an interrupted or failed build leaves no file under a
final name (nor an output_dir it created). Earlier
`pretrain_data.tfrecord-*-of-*` files in output_dir are then removed (the
official script deletes the whole output dir).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import multiprocessing
import os
import random
import re
import signal
import sys
import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

from electra_tf import stop_points
from electra_tf import tokenization
from electra_tf.pretrain import corpus as corpus_lib
from electra_tf.pretrain import data as pretrain_data
from electra_tf.tokenization import DataError

OUTPUT_PREFIX = "pretrain_data.tfrecord"
_OUTPUT_NAME = re.compile(re.escape(OUTPUT_PREFIX) + r"-\d+-of-\d+")
SINGLE_SEGMENT_PROB = 0.1  # forced one-segment examples, like single-text tasks
SHORT_TARGET_PROB = 0.05  # the next example aims at a random shorter length
MIN_SHORT_TARGET = 5
TOKENIZERS = ("fast", "reference")
_PROGRESS_EVERY_S = 20.0

PackedExample = Tuple[List[int], List[int], List[int]]  # input_ids, input_mask, segment_ids


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


class ExampleEncoder:
  """Serializes examples as tf.train.Example bytes.

  The bytes equal `tf.train.Example.SerializeToString(deterministic=True)`
  (features in sorted name order) at a fraction of its cost: Example.features
  (field 1) -> Features.feature map entries (field 1: key 1, value 2) ->
  Feature.int64_list (field 3) -> Int64List.value (field 1, packed varints).
  """

  def __init__(self, vocab_size: int):
    # Varints of token ids and of field lengths, looked up instead of computed.
    self._varints = [_varint(i) for i in range(max(vocab_size, 1 << 16))]
    self._keys = [self._field(b"\x0a", name.encode())
                  for name in pretrain_data.FEATURE_NAMES]

  def _field(self, tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field."""
    size = len(payload)
    return tag + (self._varints[size] if size < len(self._varints)
                  else _varint(size)) + payload

  def encode(self, example: PackedExample) -> bytes:
    input_ids, input_mask, segment_ids = example
    entries = []
    # input_mask and segment_ids hold 0/1: each value is its own varint byte.
    for key, packed in zip(self._keys, (
        b"".join(map(self._varints.__getitem__, input_ids)),
        bytes(input_mask), bytes(segment_ids))):
      feature = self._field(b"\x1a", self._field(b"\x0a", packed))
      entries.append(self._field(b"\x0a", key + self._field(b"\x12", feature)))
    return self._field(b"\x0a", b"".join(entries))


class ExampleBuilder:
  """Turns a stream of tokenized lines into examples (official ExampleBuilder).

  Lines accumulate until their tokens reach the target length (S, or with
  probability 0.05 after each example a random length in [5, S] for the next
  one) or the document ends. The lines are then split into segment A, filled
  up to (target - 3) // 2 tokens (a line that would overflow it goes to A
  with probability 1/2 while B is empty), and segment B; as official, a
  later short line still joins A after B has begun. With probability 0.1
  every line goes to A. A is cut to S - 2 tokens, B to S - 3 - len(A);
  tokens past the cut are dropped. The random draws happen in the official
  order, from `rng`.
  """

  def __init__(self, max_length: int, cls_id: int, sep_id: int,
               rng: random.Random):
    self._max_length = max_length
    self._cls_id = cls_id
    self._sep_id = sep_id
    self._rng = rng
    self._lines: List[List[int]] = []
    self._length = 0
    self._target_length = max_length

  def add_line(self, token_ids: List[int]) -> Optional[PackedExample]:
    """Adds a line's tokens; returns an example once the target is reached."""
    self._lines.append(token_ids)
    self._length += len(token_ids)
    if self._length >= self._target_length:
      return self._create_example()
    return None

  def end_document(self) -> Optional[PackedExample]:
    """Flushes the lines of a finished document into an example, if any."""
    if self._length:
      return self._create_example()
    return None

  def _create_example(self) -> PackedExample:
    rng = self._rng
    if rng.random() < SINGLE_SEGMENT_PROB:
      first_target = sys.maxsize  # everything goes to segment A
    else:
      first_target = (self._target_length - 3) // 2  # room for [CLS] [SEP] [SEP]
    first, second = [], []
    for line in self._lines:
      if (not first or len(first) + len(line) < first_target or
          (not second and len(first) < first_target and rng.random() < 0.5)):
        first += line
      else:
        second += line
    first = first[:self._max_length - 2]
    second = second[:max(0, self._max_length - len(first) - 3)]
    self._lines = []
    self._length = 0
    if rng.random() < SHORT_TARGET_PROB:
      self._target_length = rng.randint(MIN_SHORT_TARGET, self._max_length)
    else:
      self._target_length = self._max_length
    return pack_example(first, second, self._cls_id, self._sep_id, self._max_length)


def _tokenize_chunk(tokenizer, chunk: corpus_lib.CorpusChunk) -> corpus_lib.CorpusChunk:
  chunk.token_ids = tokenizer.tokenize_to_ids([line for line in chunk.lines if line])
  return chunk


def _tokenized_chunks(chunks: Iterator[corpus_lib.CorpusChunk], tokenizer
                      ) -> Iterator[corpus_lib.CorpusChunk]:
  """The chunks, tokenized; while the caller uses one chunk, the next is read
  and tokenized in a thread (tensorflow ops release the GIL)."""
  with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
    pending = None
    for chunk in chunks:
      future = pool.submit(_tokenize_chunk, tokenizer, chunk)
      if pending is not None:
        yield pending.result()
      pending = future
    if pending is not None:
      yield pending.result()


# ------------------------------------------------------------------ jobs
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


def output_file_name(index: int, num_out_files: int) -> str:
  return f"{OUTPUT_PREFIX}-{index}-of-{num_out_files}"


def _temp_path(options: BuildOptions, index: int) -> str:
  name = output_file_name(index, options.num_out_files)
  return os.path.join(options.output_dir, f".{name}.partial")


# files: texts read (corpus files, or the documents of the archives)
_COUNTERS = ("files", "empty_files", "archives", "invalid_utf8_lines", "documents",
             "examples", "single_segment_examples", "tokens", "example_tokens")


def _job_rng(seed: Optional[int], *stream: object) -> random.Random:
  """A generator seeded by `seed` and the names of its stream; unseeded
  (as official) without `seed`."""
  if seed is None:
    return random.Random()
  return random.Random("/".join(map(str, (seed, *stream))))


def _read_files(files: Sequence[str], job_id: int, options: BuildOptions
                ) -> Iterator[corpus_lib.CorpusChunk]:
  """The chunks of a job's files: of their lines, or of their archives' texts."""
  read = corpus_lib.read_corpus_lines
  if options.openwebtext:
    read = functools.partial(corpus_lib.read_archive_lines,
                             rng=_job_rng(options.seed, job_id, "documents"))
  for path in files:
    yield from read(path, skip_invalid_utf8=options.skip_invalid_utf8)


def _run_job(job_id: int, corpus_files: Sequence[str], options: BuildOptions
             ) -> Dict[str, int]:
  """One process: tokenizes its files and writes its output files."""
  num_jobs = options.num_processes
  if num_jobs > 1:
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
  rng = _job_rng(options.seed, job_id)
  files = [f for i, f in enumerate(corpus_files) if i % num_jobs == job_id]
  rng.shuffle(files)  # official: random.shuffle(fnames), then building
  tokenizer_class = (tokenization.FastTokenizer if options.tokenizer == "fast"
                     else tokenization.FullTokenizer)
  tokenizer = tokenizer_class(options.vocab_file, options.do_lower_case,
                              options.strip_accents)
  special = tokenization.special_ids(tokenizer.vocab, options.vocab_file)
  builder = ExampleBuilder(options.max_seq_length, special.cls_id, special.sep_id, rng)
  encoder = ExampleEncoder(max(tokenizer.vocab.values()) + 1)
  stats = dict.fromkeys(_COUNTERS, 0)
  writers = [tf.io.TFRecordWriter(_temp_path(options, i))
             for i in range(options.num_out_files) if i % num_jobs == job_id]

  def write(example: Optional[PackedExample]) -> None:
    if example is None:
      return
    writers[stats["examples"] % len(writers)].write(encoder.encode(example))
    stats["examples"] += 1
    stats["example_tokens"] += sum(example[1])
    stats["single_segment_examples"] += not any(example[2])

  total_bytes = max(1, sum(os.path.getsize(f) for f in files))
  done_bytes = 0
  start = last_report = time.time()

  def report(files_done: int, file_bytes: int) -> None:
    nonlocal last_report
    last_report = time.time()
    elapsed = last_report - start
    fraction = (done_bytes + file_bytes) / total_bytes
    eta = f"{elapsed * (1 - fraction) / fraction:.0f}s" if fraction > 0 else "?"
    print(f"job {job_id}: {files_done}/{len(files)} files ({100 * fraction:.1f}%), "
          f"{stats['examples']} examples written, elapsed {elapsed:.0f}s, ETA {eta}",
          file=sys.stderr, flush=True)

  files_done = 0
  document_has_tokens = False
  file_has_text = False
  try:
    for chunk in _tokenized_chunks(_read_files(files, job_id, options), tokenizer):
      if chunk.invalid_line_numbers:
        stats["invalid_utf8_lines"] += len(chunk.invalid_line_numbers)
        print(f"job {job_id}: corpus file {chunk.text_name}: skipped "
              f"{len(chunk.invalid_line_numbers)} line(s) that are not valid "
              f"UTF-8 (first: line {chunk.invalid_line_numbers[0]})",
              file=sys.stderr, flush=True)
      token_ids = iter(chunk.token_ids)
      for line in chunk.lines:
        if line:
          ids = next(token_ids)
          stats["tokens"] += len(ids)
          file_has_text = True
          document_has_tokens |= bool(ids)
          write(builder.add_line(ids))
        elif options.blanks_separate_docs:
          stats["documents"] += document_has_tokens
          document_has_tokens = False
          write(builder.end_document())
      if chunk.end_of_text:
        stats["documents"] += document_has_tokens
        document_has_tokens = False
        write(builder.end_document())  # official: a file's end ends a document
        stats["files"] += 1
        if not file_has_text:
          stats["empty_files"] += 1
          print(f"job {job_id}: corpus file {chunk.text_name}: no text, skipped",
                file=sys.stderr, flush=True)
        file_has_text = False
      if chunk.end_of_file:
        stats["archives"] += options.openwebtext
        files_done += 1
        done_bytes += os.path.getsize(chunk.path)
        report(files_done, 0)
      elif time.time() - last_report > _PROGRESS_EVERY_S:
        report(files_done, chunk.bytes_read)
      stop_points.reached("tfrecords_writing")
  finally:
    for writer in writers:
      writer.close()
  return stats


def _ignore_sigint() -> None:
  signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent cleans up


def _run_jobs(corpus_files: Sequence[str], options: BuildOptions) -> List[Dict[str, int]]:
  if options.num_processes == 1:
    return [_run_job(0, corpus_files, options)]
  context = multiprocessing.get_context("spawn")  # TF is not fork-safe
  pool = context.Pool(options.num_processes, initializer=_ignore_sigint)
  try:
    pending = [pool.apply_async(_run_job, (job_id, corpus_files, options))
               for job_id in range(options.num_processes)]
    results = []
    for result in pending:
      while not result.ready():
        result.wait(0.5)  # short waits keep Ctrl-C responsive
      results.append(result.get())
    pool.close()
    return results
  finally:
    pool.terminate()
    pool.join()


# ------------------------------------------------------------------ build
def _check_options(options: BuildOptions) -> None:
  if options.max_seq_length < MIN_SHORT_TARGET:
    raise DataError(f"--max_seq_length: {options.max_seq_length} is below "
                    f"{MIN_SHORT_TARGET} (official random target lengths start at 5)")
  if options.num_processes < 1:
    raise DataError(f"--num_processes: {options.num_processes} must be >= 1")
  if options.num_out_files < options.num_processes:
    raise DataError(f"--num_out_files: {options.num_out_files} must be >= "
                    f"--num_processes {options.num_processes} (each process "
                    "writes its own files)")
  if options.tokenizer not in TOKENIZERS:
    raise DataError(f"--tokenizer: {options.tokenizer!r} is not one of {', '.join(TOKENIZERS)}")
  if os.path.exists(options.output_dir) and not os.path.isdir(options.output_dir):
    raise DataError(f"--output_dir {options.output_dir}: exists and is not a directory")


def summarize(job_stats: Sequence[Dict[str, int]], elapsed_s: float) -> Dict[str, float]:
  """Totals of the jobs' counters plus shares, means and throughput."""
  totals = {name: sum(s[name] for s in job_stats) for name in _COUNTERS}
  examples = max(1, totals["examples"])
  return {
      **totals,
      "single_segment_fraction": totals["single_segment_examples"] / examples,
      "mean_length": totals["example_tokens"] / examples,
      "elapsed_s": elapsed_s,
      "tokens_per_s": totals["tokens"] / max(elapsed_s, 1e-9),
  }


def build_tfrecords(corpus_files_or_dir: Union[str, Sequence[str]], vocab_file: str,
                    output_dir: str, *, max_seq_length: int = 128,
                    num_out_files: int = 1000, num_processes: int = 1,
                    blanks_separate_docs: Optional[bool] = None,
                    do_lower_case: bool = True,
                    strip_accents: bool = True, seed: Optional[int] = None,
                    tokenizer: str = "fast", skip_invalid_utf8: bool = False,
                    openwebtext: bool = False,
                    log: Callable[[str], None] = lambda s: print(s, flush=True),
                    ) -> Dict[str, float]:
  """Builds the TFRecords (module docstring) and returns the summary counters.

  `openwebtext`: the corpus dir holds OpenWebText's .xz archives;
  `blanks_separate_docs` (None) then defaults to False, else to True.
  """
  if blanks_separate_docs is None:
    blanks_separate_docs = not openwebtext
  options = BuildOptions(
      vocab_file=os.fspath(vocab_file), output_dir=os.fspath(output_dir),
      max_seq_length=max_seq_length, num_out_files=num_out_files,
      num_processes=num_processes, blanks_separate_docs=blanks_separate_docs,
      do_lower_case=do_lower_case, strip_accents=strip_accents, seed=seed,
      tokenizer=tokenizer, skip_invalid_utf8=skip_invalid_utf8, openwebtext=openwebtext)
  _check_options(options)
  corpus_files = corpus_lib.list_corpus_files(
      corpus_files_or_dir, "--openwebtext_dir" if openwebtext else "--corpus_dir")
  tokenization.special_ids(tokenization.load_vocab(options.vocab_file),
                           options.vocab_file)
  created_output_dir = not os.path.isdir(options.output_dir)
  os.makedirs(options.output_dir, exist_ok=True)
  temp_paths = [_temp_path(options, i) for i in range(num_out_files)]
  start = time.time()
  final_names = set()
  try:
    summary = summarize(_run_jobs(corpus_files, options), time.time() - start)
    if not summary["examples"]:
      raise DataError(f"corpus: no text in the {len(corpus_files)} corpus file(s) "
                      "(all empty or not UTF-8); nothing written")
    for i, temp in enumerate(temp_paths):
      final_names.add(output_file_name(i, num_out_files))
      os.replace(temp, os.path.join(options.output_dir, output_file_name(i, num_out_files)))
  finally:
    for temp in temp_paths:
      if os.path.exists(temp):
        os.remove(temp)
    if created_output_dir and not final_names:  # failed: leave no trace
      os.rmdir(options.output_dir)
  for name in os.listdir(options.output_dir):
    if _OUTPUT_NAME.fullmatch(name) and name not in final_names:
      os.remove(os.path.join(options.output_dir, name))
  log(format_summary(summary, options.output_dir, num_out_files))
  return summary


def format_summary(summary: Dict[str, float], output_dir: str, num_out_files: int) -> str:
  archives = f" in {summary['archives']} archives" if summary["archives"] else ""
  return "\n".join([
      f"Wrote {summary['examples']} examples to {num_out_files} files "
      f"{os.path.join(output_dir, OUTPUT_PREFIX)}-*-of-{num_out_files}",
      f"  corpus files: {summary['files']} ({summary['empty_files']} empty){archives}, "
      f"lines skipped as invalid UTF-8: {summary['invalid_utf8_lines']}",
      f"  documents: {summary['documents']}, tokens: {summary['tokens']}",
      f"  single-segment examples: {100 * summary['single_segment_fraction']:.1f}%, "
      f"mean length: {summary['mean_length']:.1f} tokens",
      f"  time: {summary['elapsed_s']:.1f}s, {summary['tokens_per_s']:.0f} tokens/s",
  ])
