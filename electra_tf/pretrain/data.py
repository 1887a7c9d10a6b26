"""Pre-training input pipeline: TFRecords -> dynamically masked batches.

`get_dataset` reads records of int64 `input_ids`, `input_mask`,
`segment_ids` [S] (comma-separated globs, as official `pretrain_tfrecords`)
and masks each batch with `mask_batch` (official `pretrain_helpers.mask`).
Batches (B examples, N = max_predictions_per_seq):
  input_ids            int32   [B, S]  with [MASK] at the masked positions
  input_mask           int32   [B, S]  unchanged
  segment_ids          int32   [B, S]  unchanged
  masked_lm_positions  int32   [B, N]  0 in unused slots
  masked_lm_ids        int32   [B, N]  original ids, 0 in unused slots
  masked_lm_weights    float32 [B, N]  1.0 in used slots
"""

from __future__ import annotations

import concurrent.futures
import os
import re
from typing import Dict, List, Optional, Tuple

from google.protobuf.message import DecodeError
import tensorflow as tf

from electra_tf.errors import DataError, error_message
from electra_tf.pretrain.tfrecords import FEATURE_NAMES
from electra_tf.tokenization import SpecialIds, candidates_mask

REPLACE_WITH_MASK_PROB = 0.85  # official: the other 15% keep their token
_TRAIN_FILE_CYCLE = 4  # official num_cpu_threads: files read in parallel
_TRAIN_SHUFFLE_BUFFER = 100  # official record shuffle buffer (train and eval)
# How TensorFlow's record reader reports a bad record, with its byte offset.
_BAD_RECORD = re.compile(r"(truncated|corrupted) record at (\d+)")
# The start-up check (`checked_tfrecords`): every file's first record, the
# first records of a few files, and all of a small corpus.
_SAMPLE_FILES = 4
_SAMPLE_RECORDS = 256
_FULL_CHECK_FILES = 16
_FULL_CHECK_BYTES = 64 << 20
# Reading (`_read_file`): records per counted block; bytes around a record
# (length, its CRC, the data's CRC); the error of a file that ends early.
_READ_BLOCK = 256
_RECORD_FRAMING = 16
_BAD_FILE = re.compile(r"TFRecord file <(.*?)> ends early: bad record at byte offset <(\d+)>")


# ---------------------------------------------------------------- records
def feature_spec(max_seq_length: int) -> Dict[str, tf.io.FixedLenFeature]:
  return {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
          for name in FEATURE_NAMES}


def decode_record(serialized: tf.Tensor, max_seq_length: int) -> Dict[str, tf.Tensor]:
  """One serialized tf.train.Example -> int32 features [S] (official _decode_record)."""
  example = tf.io.parse_single_example(serialized, feature_spec(max_seq_length))
  return {name: tf.cast(value, tf.int32) for name, value in example.items()}


def find_tfrecords(file_patterns: str) -> List[str]:
  """Files matching comma-separated glob patterns; each pattern must match.

  Hidden files (the builder's `.pretrain_data.build.json` record and
  `.partial` files, which tf.io.gfile.glob's `*` matches) are never records.
  """
  patterns = [p.strip() for p in file_patterns.split(",") if p.strip()]
  if not patterns:
    raise DataError("pretrain_tfrecords: no file pattern given")
  files: List[str] = []
  for pattern in patterns:
    matches = sorted(path for path in tf.io.gfile.glob(pattern)
                     if not os.path.basename(path).startswith("."))
    if not matches:
      raise DataError(f"pretrain_tfrecords: pattern {pattern} matches no file")
    files += [f for f in matches if f not in files]
  return files


def record_length(files: List[str]) -> int:
  """Checks the first record (of the first non-empty file); returns its S."""
  for path in files:
    try:
      first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    except tf.errors.OpError as e:
      raise DataError(f"TFRecord file {path}: unreadable ({error_message(e)})") from None
    if first is None:
      continue
    return _example_length(path, first.numpy())
  raise DataError(f"pretrain_tfrecords: the {len(files)} matching file(s) hold no "
                  f"record (first: {files[0]})")


@tf.autograph.experimental.do_not_convert  # see make_step_loop: graph code
def count_records(path: str) -> int:
  """Reads every record of a TFRecord file (checksums included), in C++.

  A truncated or corrupt file is a DataError naming it and the byte offset.
  """
  # Batched: a per-record reduce costs ~50 us of tf.data overhead per record
  # (20 s for 200k records); in batches of 4096 the read runs at disk speed.
  def add_batch(count, records):
    return count + tf.size(records, out_type=tf.int64)

  try:
    return int(tf.data.TFRecordDataset(path, buffer_size=8 << 20).batch(4096).reduce(
        tf.constant(0, tf.int64), add_batch))
  except tf.errors.OpError as e:
    bad = _BAD_RECORD.search(e.message)
    raise DataError(f"TFRecord file {path}: " + (
        f"{bad.group(1)} record at byte offset {bad.group(2)}" if bad else
        f"unreadable ({error_message(e)})")) from None


def _file_stats(files: List[str]) -> List[Tuple[int, int]]:
  """(size in bytes, modification time in ns) a file (stat'ed by threads:
  remote file systems answer slowly)."""
  with concurrent.futures.ThreadPoolExecutor(16) as pool:
    return [(stat.length, stat.mtime_nsec) for stat in pool.map(tf.io.gfile.stat, files)]


@tf.autograph.experimental.do_not_convert  # see make_step_loop: graph code
def _first_records(files: List[str]) -> List[Optional[bytes]]:
  """The first record of each file (None for an empty one), read in parallel.

  A file whose first record does not read is a DataError naming it.
  """
  def first(path):
    return tf.data.TFRecordDataset(path).take(1).map(lambda record: (path, record))

  found: Dict[str, bytes] = {}
  try:
    for path, record in tf.data.Dataset.from_tensor_slices(files).interleave(
        first, cycle_length=16, num_parallel_calls=16, deterministic=False):
      found[path.numpy().decode("utf-8")] = record.numpy()
  except tf.errors.OpError:
    for path in files:  # which one (rare: a bad file among many)
      try:
        next(iter(tf.data.TFRecordDataset(path).take(1)), None)
      except tf.errors.OpError as e:
        raise DataError(f"TFRecord file {path}: unreadable ({error_message(e)})") from None
    raise
  return [found.get(path) for path in files]


def _example_length(path: str, record: bytes) -> int:
  """S of a serialized Example with the three int64 features, else DataError."""
  try:
    features = tf.train.Example.FromString(record).features.feature
  except DecodeError:
    raise DataError(f"TFRecord file {path}: first record is not a tf.train.Example") from None
  missing = [n for n in FEATURE_NAMES if not features[n].int64_list.value]
  if missing:
    raise DataError(f"TFRecord file {path}: missing int64 feature(s) "
                    f"{', '.join(missing)} (needs {', '.join(FEATURE_NAMES)})")
  lengths = {n: len(features[n].int64_list.value) for n in FEATURE_NAMES}
  if len(set(lengths.values())) != 1:
    raise DataError(f"TFRecord file {path}: features of unequal lengths {lengths}")
  return lengths["input_ids"]


@tf.autograph.experimental.do_not_convert  # see make_step_loop: graph code
def _check_sample(files: List[str], max_seq_length: int) -> Dict[str, int]:
  """The first _SAMPLE_RECORDS records of up to _SAMPLE_FILES files (the
  first, the last and evenly spaced ones) read and decode: {file: the largest
  token id of its sample}."""
  count = min(_SAMPLE_FILES, len(files))
  picked = sorted({round(i * (len(files) - 1) / max(count - 1, 1)) for i in range(count)})
  largest_ids = {}
  for path in (files[i] for i in picked):
    try:
      largest = int(tf.data.TFRecordDataset(path).take(_SAMPLE_RECORDS).batch(
          _SAMPLE_RECORDS).map(lambda records: tf.reduce_max(tf.io.parse_example(
              records, feature_spec(max_seq_length))["input_ids"])
          ).reduce(tf.constant(0, tf.int64), tf.maximum))
    except tf.errors.OpError as e:
      bad = _BAD_RECORD.search(e.message)
      raise DataError(f"TFRecord file {path}: " + (
          f"{bad.group(1)} record at byte offset {bad.group(2)}" if bad else
          f"a record of the first {_SAMPLE_RECORDS} does not decode as "
          f"{', '.join(FEATURE_NAMES)} of length {max_seq_length} "
          f"({error_message(e)})")) from None
    largest_ids[path] = largest
  return largest_ids


# What the start-up check found in this process: (every file's path, size and
# modification time; max_seq_length) -> _check_sample's largest ids.  A job
# checks its records before it builds its pipelines, which check them again.
_CHECKED: Dict[Tuple[Tuple[Tuple[str, int, int], ...], int], Dict[str, int]] = {}


def checked_tfrecords(file_patterns: str, max_seq_length: int,
                      vocab_size: Optional[int] = None) -> Tuple[List[str], List[int]]:
  """(files, sizes) of the patterns after the start-up check: every file's
  first record and a sample of records (ids below vocab_size when given); a
  small corpus is read through.  DataError names the file.  Files unchanged
  (path, size, modification time) since a check in this process are not read
  again."""
  files = find_tfrecords(file_patterns)
  stats = _file_stats(files)
  sizes = [size for size, _ in stats]
  key = (tuple((path, size, mtime) for path, (size, mtime) in zip(files, stats)),
         max_seq_length)
  if key not in _CHECKED:
    _CHECKED[key] = _read_check(files, sizes, max_seq_length)
  for path, largest in _CHECKED[key].items():
    if vocab_size is not None and largest >= vocab_size:
      raise DataError(f"TFRecord file {path}: holds token id {largest}, beyond the "
                      f"{vocab_size} entries of the vocab: records built with another "
                      "vocab? Rebuild them with this one, or train with theirs")
  return files, sizes


def _read_check(files: List[str], sizes: List[int], max_seq_length: int) -> Dict[str, int]:
  """checked_tfrecords' reading: _check_sample's largest ids."""
  lengths = {}
  for path, record in zip(files, _first_records(files)):
    if record is not None:
      lengths[path] = _example_length(path, record)
  if not lengths:
    raise DataError(f"pretrain_tfrecords: the {len(files)} matching file(s) hold no "
                    f"record (first: {files[0]})")
  for path, length in lengths.items():
    if length != max_seq_length:
      raise DataError(f"TFRecord file {path}: records have length {length} but "
                      f"max_seq_length is {max_seq_length}; rebuild them with "
                      f"--max_seq_length={max_seq_length} or set it to {length}")
  largest_ids = _check_sample([p for p in files if p in lengths], max_seq_length)
  if len(files) <= _FULL_CHECK_FILES and sum(sizes) <= _FULL_CHECK_BYTES:
    for path in files:
      count_records(path)
  return largest_ids


def check_tfrecords(file_patterns: str, max_seq_length: int,
                    vocab_size: Optional[int] = None) -> List[str]:
  """The matching files, after the start-up check of `checked_tfrecords`."""
  return checked_tfrecords(file_patterns, max_seq_length, vocab_size)[0]


def _read_file(path: tf.Tensor, size: tf.Tensor) -> tf.data.Dataset:
  """The records of one file, checksums verified; a file shorter than `size`
  fails with an error `bad_record_error` names (with the file)."""
  blocks = tf.data.TFRecordDataset(path, buffer_size=1 << 20).ignore_errors().batch(
      _READ_BLOCK)
  blocks = blocks.map(lambda records: (records, False)).concatenate(
      tf.data.Dataset.from_tensors((tf.constant([], tf.string), True)))

  def count(offset, block):
    records, is_end = block
    framed = tf.cast(tf.strings.length(records), tf.int64) + _RECORD_FRAMING
    return offset + tf.reduce_sum(framed), (records, is_end, offset)

  def check(records, is_end, offset):
    read_through = tf.logical_or(tf.logical_not(is_end), tf.equal(offset, size))
    with tf.control_dependencies([tf.debugging.Assert(read_through, [
        tf.strings.join(["TFRecord file <", path, "> ends early: bad record at byte offset <",
                         tf.strings.as_string(offset), ">"])])]):
      return tf.identity(records), is_end

  return (blocks.scan(tf.constant(0, tf.int64), count).map(check)
          .filter(lambda records, is_end: tf.logical_not(is_end))
          .map(lambda records, is_end: records).unbatch())


def bad_record_error(error: BaseException, context: str = "") -> Optional[DataError]:
  """The DataError (one line, file and byte offset) of an error the input
  pipeline raised at a corrupt or truncated record; None for another error.

  `context` is appended (e.g. what happens to the checkpoints).
  """
  if not isinstance(error, tf.errors.OpError):
    return None
  found = _BAD_FILE.search(error.message)
  if found is None:
    return None
  path, offset = found.group(1), found.group(2)
  try:  # TensorFlow's own reason, from reading that one file again
    count_records(path)
    reason = DataError(f"TFRecord file {path}: read failed at byte offset {offset}")
  except DataError as e:
    reason = e
  return DataError(f"{reason}{context}")


class InputPosition(tf.train.experimental.PythonState):
  """A tf.data iterator's position as one string in a checkpoint (entry
  `<name>/.ATTRIBUTES/py_state`), saved and restored eagerly."""

  def __init__(self, iterator: tf.data.Iterator):
    self.iterator = iterator

  def serialize(self) -> bytes:
    # pylint: disable=protected-access
    state = self.iterator._serialize_to_tensors()["_STATE"]
    return tf.io.serialize_tensor(state).numpy()

  def deserialize(self, string_value: bytes) -> None:
    # pylint: disable=protected-access
    self.iterator._restore_from_tensors(
        {"_STATE": tf.io.parse_tensor(string_value, tf.variant)})


# ---------------------------------------------------------------- masking
def mask_batch(batch: Dict[str, tf.Tensor], *, max_predictions_per_seq: int,
               mask_prob: float, special: SpecialIds,
               seed: Optional[tf.Tensor] = None,
               proposal_distribution: Optional[tf.Tensor] = None,
               disallow_from_mask: Optional[tf.Tensor] = None,
               already_masked: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
  """Official dynamic masking (pretrain_helpers.mask) of a batch.

  Per example n = max(1, min(N, round(sum(input_mask) * mask_prob))) slots
  draw positions uniformly with replacement; slots past n have weight 0,
  position and id 0.  A used slot draws [MASK] with probability 0.85; no
  random replacement.  An example without candidates gets no used slot.
  `seed`: int [2] for stateless draws (None: the global generator).
  The official mask()'s experimental options: `proposal_distribution` float
  [B, S] or scalar, `disallow_from_mask` bool [B, S], `already_masked` [B, N]."""
  input_ids = tf.cast(batch["input_ids"], tf.int32)
  input_mask = tf.cast(batch["input_mask"], tf.int32)
  seq_length = tf.shape(input_ids)[1]
  num_slots = max_predictions_per_seq
  if seed is None:
    seed = tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
  position_seed, replace_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))

  candidates = candidates_mask(input_ids, input_mask, special, disallow_from_mask)
  log_scores = 0.0
  if proposal_distribution is not None:
    scores = tf.broadcast_to(tf.cast(proposal_distribution, tf.float32),
                             tf.shape(input_ids))
    candidates &= scores > 0
    log_scores = tf.math.log(scores)
  has_candidate = tf.reduce_any(candidates, axis=-1)
  num_tokens = tf.cast(tf.reduce_sum(input_mask, -1), tf.float32)
  num_to_predict = tf.maximum(1, tf.minimum(
      num_slots, tf.cast(tf.round(num_tokens * mask_prob), tf.int32)))
  used = tf.sequence_mask(num_to_predict, num_slots) & has_candidate[:, tf.newaxis]
  if already_masked is not None:
    used &= ~tf.cast(already_masked, tf.bool)
  used_int = tf.cast(used, tf.int32)

  # Proportional to the scores (uniform by default) over the candidates; rows
  # without any sample uniformly from all (their slots are unused).
  logits = tf.where(candidates, log_scores,
                    tf.where(has_candidate[:, tf.newaxis], float("-inf"), 0.0))
  positions = tf.random.stateless_categorical(
      logits, num_slots, seed=position_seed, dtype=tf.int32) * used_int
  masked_lm_ids = tf.gather(input_ids, positions, batch_dims=1) * used_int

  replace = tf.random.stateless_uniform(tf.shape(positions), seed=replace_seed
                                        ) < REPLACE_WITH_MASK_PROB
  replace_positions = positions * tf.cast(replace, tf.int32)
  hits = tf.reduce_max(tf.one_hot(replace_positions, seq_length, dtype=tf.int32), axis=1)
  is_masked = tf.cast(hits, tf.bool) & (tf.range(seq_length) > 0)  # never position 0
  return {
      "input_ids": tf.where(is_masked, special.mask_id, input_ids),
      "input_mask": input_mask,
      "segment_ids": tf.cast(batch["segment_ids"], tf.int32),
      "masked_lm_positions": positions,
      "masked_lm_ids": masked_lm_ids,
      "masked_lm_weights": tf.cast(used, tf.float32),
  }


# --------------------------------------------------------------- pipeline
def _file_passes(files: List[str], sizes: List[int], seed: int) -> tf.data.Dataset:
  """The records of endless passes over `files` (of `sizes` bytes), each pass a
  permutation seeded by (seed, pass) whose files are read 4 at a time.

  Official: repeat().shuffle(num files), which can hand one file to two of the
  interleave's slots at once, read in lockstep: with 2-8 files 1.7-4.6% of
  a batch's rows are repeats (docs/pretraining.md, "Reading order").  Here a
  pass ends before the next begins, so no file is read twice at once."""
  paths, sizes = tf.constant(files), tf.constant(sizes, tf.int64)  # [F], [F]

  def one_pass(index):
    order = tf.argsort(tf.random.stateless_uniform(
        [len(files)], seed=tf.stack([tf.constant(seed, tf.int64), index])))
    return tf.data.Dataset.from_tensor_slices(
        (tf.gather(paths, order), tf.gather(sizes, order))).interleave(
            _read_file, cycle_length=min(_TRAIN_FILE_CYCLE, len(files)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  return tf.data.Dataset.counter().flat_map(one_pass)


@tf.autograph.experimental.do_not_convert  # see make_step_loop: graph code
def get_dataset(file_patterns: str, *, batch_size: int, max_seq_length: int,
                max_predictions_per_seq: int, mask_prob: float, special: SpecialIds,
                is_training: bool, seed: int,
                input_context: Optional[tf.distribute.InputContext] = None,
                skip_examples: int = 0, single_pass: bool = False) -> tf.data.Dataset:
  """Masked batches of `batch_size` examples (per replica under tf.distribute).

  As official get_input_fn, the files read in seeded passes (`_file_passes`);
  `single_pass` reads every record once in sorted file order (last batch
  possibly smaller).  Masks are
  drawn per example from (seed, pipeline, train or eval, example index).
  `skip_examples` reads past the first examples undecoded.  A corrupt record
  fails with an error `bad_record_error` turns into a DataError."""
  if single_pass and is_training:
    raise ValueError("get_dataset: single_pass is for reading, not for training")
  files, sizes = checked_tfrecords(file_patterns, max_seq_length)
  num_pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  shard_files = num_pipelines > 1 and len(files) >= num_pipelines
  shard_records = num_pipelines > 1 and not shard_files
  order_seed = seed if is_training else seed + 1  # evaluation reads in its own order

  if shard_files:
    files, sizes = files[pipeline_id::num_pipelines], sizes[pipeline_id::num_pipelines]
  if single_pass:
    dataset = tf.data.Dataset.from_tensor_slices((files, tf.constant(sizes, tf.int64)))
    dataset = dataset.flat_map(_read_file)
  else:
    dataset = _file_passes(files, sizes, order_seed)
  if shard_records:
    dataset = dataset.shard(num_pipelines, pipeline_id)
  if not single_pass:
    dataset = dataset.shuffle(_TRAIN_SHUFFLE_BUFFER, seed=order_seed)
  # Always there, even skipping nothing (tf.data would otherwise remove it),
  # so that an iterator saved by a run that skipped restores into a pipeline
  # that does not (`pipeline_options`).
  dataset = dataset.skip(skip_examples)
  dataset = dataset.map(lambda record: decode_record(record, max_seq_length),
                        num_parallel_calls=tf.data.AUTOTUNE)

  # One stateless mask stream per (pipeline, train/eval), and one seed per
  # example within it: an example's mask does not depend on the batch size,
  # so a global batch split over replicas is masked as on one device.
  num_streams = 2 * num_pipelines
  stream = 2 * pipeline_id + int(is_training)

  def mask(index, example):
    example_seed = tf.stack([tf.constant(seed, tf.int64), index * num_streams + stream])
    masked = mask_batch({k: v[tf.newaxis] for k, v in example.items()},
                        max_predictions_per_seq=max_predictions_per_seq,
                        mask_prob=mask_prob, special=special, seed=example_seed)
    return {k: v[0] for k, v in masked.items()}

  dataset = dataset.enumerate(start=skip_examples).map(
      mask, num_parallel_calls=tf.data.AUTOTUNE)
  dataset = dataset.batch(batch_size, drop_remainder=not single_pass)
  return dataset.prefetch(tf.data.AUTOTUNE).with_options(pipeline_options())


def pipeline_options() -> tf.data.Options:
  """Options of every `get_dataset` pipeline: skip(0) is kept (its iterator
  state is part of a saved input position)."""
  options = tf.data.Options()
  options.experimental_optimization.noop_elimination = False
  return options
