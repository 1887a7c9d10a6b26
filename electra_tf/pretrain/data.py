"""Pre-training input pipeline: TFRecords -> dynamically masked batches.

Records (written by data_prep/build_tfrecords.py or the official
build_pretraining_dataset.py) hold int64 `input_ids`, `input_mask`,
`segment_ids` of length S = max_seq_length. `get_dataset` reads them
(comma-separated glob patterns, as official `pretrain_tfrecords`), shuffles,
interleaves files, shards per input pipeline, batches and masks each batch
with `mask_batch`, the official `pretrain_helpers.mask` as a pure function.

Batches (B examples, N = max_predictions_per_seq):
  input_ids            int32   [B, S]  with [MASK] at the masked positions
  input_mask           int32   [B, S]  unchanged
  segment_ids          int32   [B, S]  unchanged
  masked_lm_positions  int32   [B, N]  0 in unused slots
  masked_lm_ids        int32   [B, N]  original ids, 0 in unused slots
  masked_lm_weights    float32 [B, N]  1.0 in used slots
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from google.protobuf.message import DecodeError
import tensorflow as tf

from electra_tf.cli import error_message
from electra_tf.tokenization import DataError, SpecialIds

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
REPLACE_WITH_MASK_PROB = 0.85  # official: the other 15% keep their token
_TRAIN_FILE_CYCLE = 4  # official num_cpu_threads: files read in parallel
_TRAIN_SHUFFLE_BUFFER = 100  # official record shuffle buffer (train and eval)
# How TensorFlow's record reader reports a bad record, with its byte offset.
_BAD_RECORD = re.compile(r"(truncated|corrupted) record at (\d+)")


# ---------------------------------------------------------------- records
def feature_spec(max_seq_length: int) -> Dict[str, tf.io.FixedLenFeature]:
  return {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
          for name in FEATURE_NAMES}


def decode_record(serialized: tf.Tensor, max_seq_length: int) -> Dict[str, tf.Tensor]:
  """One serialized tf.train.Example -> int32 features [S] (official _decode_record)."""
  example = tf.io.parse_single_example(serialized, feature_spec(max_seq_length))
  return {name: tf.cast(value, tf.int32) for name, value in example.items()}


def find_tfrecords(file_patterns: str) -> List[str]:
  """Files matching comma-separated glob patterns; each pattern must match."""
  patterns = [p.strip() for p in file_patterns.split(",") if p.strip()]
  if not patterns:
    raise DataError("pretrain_tfrecords: no file pattern given")
  files: List[str] = []
  for pattern in patterns:
    matches = sorted(tf.io.gfile.glob(pattern))
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
    try:
      features = tf.train.Example.FromString(first.numpy()).features.feature
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
  raise DataError(f"pretrain_tfrecords: the {len(files)} matching file(s) hold no "
                  f"record (first: {files[0]})")


def count_records(path: str) -> int:
  """Reads every record of a TFRecord file (checksums included), in C++.

  A truncated or corrupt file is a DataError naming it, raised here rather
  than hours into training when the input pipeline reaches the bad record.
  """
  # Batched: a per-record reduce costs ~50 us of tf.data overhead per record
  # (20 s for 200k records); in batches of 4096 the read runs at disk speed
  # (0.6 s), so checking a multi-million-record corpus takes seconds.
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


def check_tfrecords(file_patterns: str, max_seq_length: int) -> List[str]:
  """The matching files, after checking that every record reads and that
  records have length S."""
  files = find_tfrecords(file_patterns)
  length = record_length(files)
  if length != max_seq_length:
    raise DataError(f"pretrain_tfrecords {file_patterns}: records have length "
                    f"{length} but max_seq_length is {max_seq_length}; rebuild "
                    f"them with --max_seq_length={max_seq_length} or set it to {length}")
  for path in files:
    count_records(path)
  return files


# ---------------------------------------------------------------- masking
def candidates_mask(input_ids: tf.Tensor, input_mask: tf.Tensor,
                    special: SpecialIds) -> tf.Tensor:
  """bool [B, S]: real tokens other than [CLS], [SEP], [MASK], [PAD]."""
  candidates = tf.cast(input_mask, tf.bool)
  for token_id in (special.cls_id, special.sep_id, special.mask_id, special.pad_id):
    candidates &= tf.not_equal(input_ids, token_id)
  return candidates


def mask_batch(batch: Dict[str, tf.Tensor], *, max_predictions_per_seq: int,
               mask_prob: float, special: SpecialIds,
               seed: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
  """Official dynamic masking (pretrain_helpers.mask) of a batch.

  Per example, n = max(1, min(N, round(sum(input_mask) * mask_prob))) slots
  (float32 product, round half to even, as official tf.round) each draw a
  position uniformly among the candidates, with replacement. Slots past n
  have weight 0, position 0 and id 0. Each used slot draws "replace with
  [MASK]" with probability 0.85; a position is [MASK]ed when any of its slots
  drew it, so a position drawn twice keeps its token with probability
  0.15 ** 2, and both slots keep weight 1 (official scatter_update, which also
  never writes position 0). No token is replaced by a random one.
  An example without candidates (never built by the builder; official would
  divide by zero) gets no used slot.

  `seed`: int32/int64 [2] for stateless, reproducible draws; None draws one
  from the global generator.
  """
  input_ids = tf.cast(batch["input_ids"], tf.int32)
  input_mask = tf.cast(batch["input_mask"], tf.int32)
  seq_length = tf.shape(input_ids)[1]
  num_slots = max_predictions_per_seq
  if seed is None:
    seed = tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
  position_seed, replace_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))

  candidates = candidates_mask(input_ids, input_mask, special)
  has_candidate = tf.reduce_any(candidates, axis=-1)
  num_tokens = tf.cast(tf.reduce_sum(input_mask, -1), tf.float32)
  num_to_predict = tf.maximum(1, tf.minimum(
      num_slots, tf.cast(tf.round(num_tokens * mask_prob), tf.int32)))
  used = tf.sequence_mask(num_to_predict, num_slots) & has_candidate[:, tf.newaxis]
  used_int = tf.cast(used, tf.int32)

  # Uniform over candidates; rows without any sample from all (then unused).
  logits = tf.where(candidates | ~has_candidate[:, tf.newaxis], 0.0, float("-inf"))
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
def get_dataset(file_patterns: str, *, batch_size: int, max_seq_length: int,
                max_predictions_per_seq: int, mask_prob: float, special: SpecialIds,
                is_training: bool, seed: int,
                input_context: Optional[tf.distribute.InputContext] = None,
                skip_examples: int = 0, single_pass: bool = False) -> tf.data.Dataset:
  """Masked batches of `batch_size` examples (per replica under tf.distribute).

  Training and evaluation read as the official get_input_fn does: files
  repeated and shuffled, read `min(4, #files)` at a time, records shuffled
  in a buffer of 100, batches of exactly `batch_size`.  The official pipeline
  reads files in a "sloppy" order; here the order follows `seed` (and
  evaluation has its own order and masks), so a seeded run is reproducible.
  `single_pass` instead reads every record once, in sorted file order, the
  last batch possibly smaller (inspection, tests).  Masks are drawn per
  example from (seed, pipeline, train or eval, example index).  Several input
  pipelines (`input_context`) read disjoint files, or disjoint records when
  there are fewer files than pipelines.  `skip_examples` drops the first
  examples of this pipeline's stream undecoded (a resumed run continues where
  it stopped: same records, same masks).
  """
  if single_pass and is_training:
    raise ValueError("get_dataset: single_pass is for reading, not for training")
  files = check_tfrecords(file_patterns, max_seq_length)
  num_pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  shard_files = num_pipelines > 1 and len(files) >= num_pipelines
  shard_records = num_pipelines > 1 and not shard_files
  order_seed = seed if is_training else seed + 1  # evaluation reads in its own order

  dataset = tf.data.Dataset.from_tensor_slices(files)
  if shard_files:
    dataset = dataset.shard(num_pipelines, pipeline_id)
    files = files[pipeline_id::num_pipelines]
  if single_pass:
    dataset = dataset.flat_map(tf.data.TFRecordDataset)
  else:
    dataset = dataset.repeat().shuffle(len(files), seed=order_seed)
    dataset = dataset.interleave(
        tf.data.TFRecordDataset, cycle_length=min(_TRAIN_FILE_CYCLE, len(files)),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if shard_records:
    dataset = dataset.shard(num_pipelines, pipeline_id)
  if not single_pass:
    dataset = dataset.shuffle(_TRAIN_SHUFFLE_BUFFER, seed=order_seed)
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
  return dataset.prefetch(tf.data.AUTOTUNE)
