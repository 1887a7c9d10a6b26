"""Pre-training pipeline: official dynamic masking (exact rules and binomial
statistics over thousands of real examples), reading, sharding, errors."""

import os

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from electra_tf import tokenization
from electra_tf.errors import DataError
from electra_tf.pretrain import data as pretrain_data
from electra_tf.pretrain import tfrecords as build_tfrecords
from tools import file_order_repeats

S, N, MASK_PROB = 128, 19, 0.15  # N = int((0.15 + 0.005) * 128), as official
Z = 4.5  # tolerance in standard deviations


@pytest.fixture(scope="module")
def special(bert_vocab):
  return tokenization.special_ids(tokenization.load_vocab(bert_vocab), str(bert_vocab))


@pytest.fixture(scope="module")
def records_dir(corpus_dir, bert_vocab, tmp_path_factory):
  out = tmp_path_factory.mktemp("records")
  build_tfrecords.build_tfrecords(corpus_dir, bert_vocab, out,
                                  num_out_files=3, max_seq_length=S, seed=0)
  return out


def pattern(directory):
  return str(directory / "pretrain_data.tfrecord*")


def raw_records(directory):
  """Unmasked features of every record, in sorted file order: int32 [R, S]."""
  files = sorted(tf.io.gfile.glob(pattern(directory)))
  dataset = tf.data.TFRecordDataset(files).map(
      lambda r: pretrain_data.decode_record(r, S))
  arrays = list(dataset.batch(100_000).as_numpy_iterator())[0]
  return arrays


def collect(dataset):
  batches = list(dataset.as_numpy_iterator())
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def dataset(directory, special, **kwargs):
  args = dict(batch_size=256, max_seq_length=S, max_predictions_per_seq=N,
              mask_prob=MASK_PROB, special=special, is_training=False, seed=0,
              single_pass=True)
  args.update(kwargs)
  return pretrain_data.get_dataset(pattern(directory), **args)


originals = file_order_repeats.unmasked_ids  # input_ids, the masked-out ids written back


@pytest.mark.slow
def test_masking_follows_the_official_rule(records_dir, special):
  raw = raw_records(records_dir)
  got = collect(dataset(records_dir, special))
  num_examples = len(raw["input_ids"])
  assert num_examples > 10_000 and len(got["input_ids"]) == num_examples
  np.testing.assert_array_equal(got["input_mask"], raw["input_mask"])
  np.testing.assert_array_equal(got["segment_ids"], raw["segment_ids"])
  np.testing.assert_array_equal(originals(got), raw["input_ids"])
  assert got["masked_lm_weights"].dtype == np.float32
  assert all(got[k].dtype == np.int32 for k in ("input_ids", "masked_lm_positions"))

  # How many: max(1, min(N, round(len * mask_prob))), float32, half to even.
  lengths = raw["input_mask"].sum(axis=1)
  expected = np.maximum(1, np.minimum(N, np.round(
      lengths.astype(np.float32) * np.float32(MASK_PROB)).astype(np.int64)))
  weights = got["masked_lm_weights"]
  np.testing.assert_array_equal(weights, np.arange(N) < expected[:, None])
  used = weights > 0
  positions = got["masked_lm_positions"]
  assert not positions[~used].any() and not got["masked_lm_ids"][~used].any()

  # Where: only candidates, i.e. real tokens other than [CLS], [SEP], [MASK].
  original = raw["input_ids"]
  candidates = (raw["input_mask"] > 0) & ~np.isin(
      original, [special.cls_id, special.sep_id, special.mask_id, special.pad_id])
  assert np.take_along_axis(candidates, positions, axis=1)[used].all()
  np.testing.assert_array_equal(
      got["masked_lm_ids"][used], np.take_along_axis(original, positions, axis=1)[used])

  # What: [MASK] or the original token, never another one; only at selected spots.
  changed = got["input_ids"] != original
  assert (got["input_ids"][changed] == special.mask_id).all()
  selected = np.zeros_like(changed)
  rows = np.nonzero(used)[0]
  selected[rows, positions[used]] = True
  assert not (changed & ~selected).any()

  # A position drawn m times is [MASK]ed unless all m draws keep it: 1 - 0.15**m.
  multiplicity = np.zeros(original.shape, np.int64)
  np.add.at(multiplicity, (rows, positions[used]), 1)
  m = multiplicity[selected]
  p_mask = 1 - 0.15 ** m
  masked = changed[selected].sum()
  assert abs(masked - p_mask.sum()) < Z * np.sqrt((p_mask * (1 - p_mask)).sum())
  assert (m > 1).sum() > 100  # duplicates occur: sampling is with replacement

  # Uniform with replacement: expected distinct positions c (1 - (1 - 1/c)**n).
  num_candidates = candidates.sum(axis=1)
  expected_distinct = (num_candidates * (1 - (1 - 1 / num_candidates) ** expected)).sum()
  duplicates = expected.sum() - expected_distinct
  assert abs(selected.sum() - expected_distinct) < Z * np.sqrt(duplicates) + 1
  # and uniform over the candidates: the mean candidate rank of a draw is (c - 1) / 2
  ranks = np.cumsum(candidates, axis=1) - 1
  drawn_rank = np.take_along_axis(ranks, positions, axis=1)[used]
  c = np.repeat(num_candidates, expected)
  several = c > 1  # the rank's standard deviation is sqrt((c**2 - 1) / 12)
  z = ((drawn_rank[several] - (c[several] - 1) / 2) / np.sqrt((c[several] ** 2 - 1) / 12)
       ).sum() / np.sqrt(several.sum())
  assert abs(z) < Z


def test_duplicate_positions_and_examples_without_candidates(special):
  # Example 0: one candidate (id 2000) among 20 tokens -> n = 3 draws of it.
  # Example 1: only [CLS] [SEP] -> no candidate, no used slot.
  batch_size = 4000
  row0 = [special.cls_id] + [special.mask_id] * 18 + [2000] + [0] * 12
  row1 = [special.cls_id, special.sep_id] + [0] * 30
  input_ids = tf.constant([row0, row1] * (batch_size // 2), tf.int32)
  input_mask = tf.cast(input_ids != 0, tf.int32)
  batch = {"input_ids": input_ids, "input_mask": input_mask,
           "segment_ids": tf.zeros_like(input_ids)}
  out = {k: v.numpy() for k, v in pretrain_data.mask_batch(
      batch, max_predictions_per_seq=4, mask_prob=MASK_PROB, special=special,
      seed=tf.constant([1, 2])).items()}
  np.testing.assert_array_equal(out["masked_lm_weights"][0::2], [[1, 1, 1, 0]] * 2000)
  np.testing.assert_array_equal(out["masked_lm_positions"][0::2], [[19, 19, 19, 0]] * 2000)
  np.testing.assert_array_equal(out["masked_lm_ids"][0::2], [[2000, 2000, 2000, 0]] * 2000)
  masked = (out["input_ids"][0::2, 19] == special.mask_id).sum()
  p = 1 - 0.15 ** 3  # kept only when all three draws keep it
  assert abs(masked - 2000 * p) < Z * np.sqrt(2000 * p * (1 - p))
  assert not out["masked_lm_weights"][1::2].any()
  np.testing.assert_array_equal(out["input_ids"][1::2], input_ids.numpy()[1::2])


def test_seeded_masking_is_reproducible(records_dir, special):
  batch = next(iter(tf.data.TFRecordDataset(
      sorted(tf.io.gfile.glob(pattern(records_dir)))).map(
          lambda r: pretrain_data.decode_record(r, S)).batch(64)))

  def mask(seed):
    return pretrain_data.mask_batch(batch, max_predictions_per_seq=N, mask_prob=MASK_PROB,
                                    special=special, seed=seed)

  a, b, c = mask(tf.constant([7, 1])), mask(tf.constant([7, 1])), mask(tf.constant([7, 2]))
  assert all(np.array_equal(a[k], b[k]) for k in a)
  assert not np.array_equal(a["masked_lm_positions"], c["masked_lm_positions"])
  assert mask(None)["masked_lm_positions"].shape == (64, N)


def test_official_mask_options_against_numpy(special):
  """proposal_distribution, disallow_from_mask and already_masked of the
  official mask(): exact weights, and position frequencies against the NumPy
  distribution proposal * candidates / sum (chi-square)."""
  batch_size, seq = 4000, 12
  row = np.array([special.cls_id] + list(range(2000, 2010)) + [special.sep_id], np.int32)
  input_ids = np.tile(row, (batch_size, 1))
  batch = {"input_ids": input_ids, "input_mask": np.ones_like(input_ids),
           "segment_ids": np.zeros_like(input_ids)}
  proposal = np.linspace(0.0, 3.0, seq).astype(np.float32)  # position 1 scores 0.27
  proposal[5] = 0.0  # never drawn
  disallow = np.zeros(seq, bool)
  disallow[[2, 9]] = True
  already = np.zeros((batch_size, 3), np.float32)
  already[::2, 1] = 1.0
  out = {k: v.numpy() for k, v in pretrain_data.mask_batch(
      batch, max_predictions_per_seq=3, mask_prob=0.2, special=special,
      seed=tf.constant([3, 4]), proposal_distribution=np.tile(proposal, (batch_size, 1)),
      disallow_from_mask=np.tile(disallow, (batch_size, 1)), already_masked=already).items()}
  # n = round(12 * 0.2) = 2 slots, minus the already-masked ones.
  weights = np.tile([1.0, 1.0, 0.0], (batch_size, 1)) * (1 - already)
  np.testing.assert_array_equal(out["masked_lm_weights"], weights)
  used = weights > 0
  np.testing.assert_array_equal(out["masked_lm_positions"][~used], 0)
  np.testing.assert_array_equal(
      out["masked_lm_ids"], np.take_along_axis(input_ids, out["masked_lm_positions"], 1) * used)
  candidates = (input_ids[0] >= 2000) & ~disallow
  expected = proposal.astype(np.float64) * candidates
  expected /= expected.sum()
  counts = np.bincount(out["masked_lm_positions"][used], minlength=seq)
  assert counts[expected == 0].sum() == 0
  allowed = expected > 0
  assert scipy.stats.chisquare(counts[allowed], expected[allowed] * used.sum()).pvalue > 1e-3
  # A scalar proposal of 1 and no options draw exactly the default masks.
  default = pretrain_data.mask_batch(batch, max_predictions_per_seq=3, mask_prob=0.2,
                                     special=special, seed=tf.constant([3, 4]))
  uniform = pretrain_data.mask_batch(batch, max_predictions_per_seq=3, mask_prob=0.2,
                                     special=special, seed=tf.constant([3, 4]),
                                     proposal_distribution=1.0)
  for key in default:
    np.testing.assert_array_equal(default[key], uniform[key], err_msg=key)
  # An example whose candidates all score 0 gets no used slot.
  nothing = pretrain_data.mask_batch(
      batch, max_predictions_per_seq=3, mask_prob=0.2, special=special,
      seed=tf.constant([3, 4]), proposal_distribution=np.zeros((batch_size, seq), np.float32))
  assert not nothing["masked_lm_weights"].numpy().any()


@pytest.mark.slow
def test_training_pipeline(records_dir, special):
  def first_batches(seed):
    ds = dataset(records_dir, special, is_training=True, seed=seed, batch_size=500,
                 single_pass=False)
    return list(ds.take(25).as_numpy_iterator())  # more than one epoch: it repeats

  ds = dataset(records_dir, special, is_training=True, batch_size=500, single_pass=False)
  assert ds.element_spec["input_ids"].shape == (500, S)  # drop_remainder
  assert ds.element_spec["masked_lm_weights"] == tf.TensorSpec((500, N), tf.float32)
  a, b, c = first_batches(3), first_batches(3), first_batches(4)
  assert len(a) == 25
  assert all(np.array_equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, b))
  assert not np.array_equal(a[0]["input_ids"], c[0]["input_ids"])
  # shuffled: not the file order of the single-pass pipeline
  raw = raw_records(records_dir)
  assert not np.array_equal(a[0]["input_mask"], raw["input_mask"][:500])
  # Evaluation reads as official too (shuffled, repeated, whole batches),
  # in an order and with masks of its own.
  ev = list(dataset(records_dir, special, is_training=False, single_pass=False, seed=3,
                    batch_size=500).take(25).as_numpy_iterator())
  assert len(ev) == 25 and ev[0]["input_ids"].shape == (500, S)
  assert not np.array_equal(ev[0]["input_ids"], a[0]["input_ids"])


@pytest.mark.slow
@pytest.mark.parametrize("num_pipelines", [2, 4])  # 3 files: by file, by record
def test_input_pipelines_read_disjoint_parts(records_dir, special, num_pipelines):
  raw = raw_records(records_dir)
  parts = []
  for pipeline_id in range(num_pipelines):
    context = tf.distribute.InputContext(num_input_pipelines=num_pipelines,
                                         input_pipeline_id=pipeline_id)
    parts.append(originals(collect(dataset(records_dir, special, input_context=context))))
  assert sum(map(len, parts)) == len(raw["input_ids"])
  everything = sorted(map(bytes, np.concatenate(parts)))
  assert everything == sorted(map(bytes, raw["input_ids"]))


def write_records(path, features_list):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for features in features_list:
      writer.write(tf.train.Example(features=tf.train.Features(feature={
          name: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
          for name, values in features.items()})).SerializeToString())


def test_reads_records_serialized_as_the_official_script_does(special, tmp_path):
  rng = np.random.default_rng(0)
  features = []
  for n in rng.integers(3, S, size=50):
    ids = [special.cls_id] + rng.integers(1000, 30000, n - 2).tolist() + [special.sep_id]
    features.append({"input_ids": ids + [0] * (S - n), "input_mask": [1] * n + [0] * (S - n),
                     "segment_ids": [0] * S})
  write_records(tmp_path / "pretrain_data.tfrecord-0-of-1", features)  # map order as it comes
  got = collect(dataset(tmp_path, special))
  np.testing.assert_array_equal(originals(got), [f["input_ids"] for f in features])
  np.testing.assert_array_equal(got["input_mask"], [f["input_mask"] for f in features])


@pytest.mark.parametrize("num_files", [2, 5])  # fewer files than read at once, more
def test_no_file_is_read_twice_at_once(special, tmp_path, num_files):
  """Each pass over the files is a seeded permutation read to its end before
  the next pass opens a file, so no batch repeats a record (files of 1,000
  records: a record stays in the 100-record shuffle buffer for 1,000 draws
  with probability 4e-5).  (The official repeat().shuffle(files) can give one
  file two interleave slots, read in lockstep: at seed 0 it repeats 3.4% (2
  files) and 2.0% (5 files) of these batches' rows,
  docs/results/file_order_repeats_before.json.)"""
  per_file, length = 1000, file_order_repeats.LENGTH
  total = num_files * per_file
  file_order_repeats.write_numbered_files(tmp_path, special, num_files, per_file)
  paths = sorted(tf.io.gfile.glob(pattern(tmp_path)))
  sizes = [os.path.getsize(p) for p in paths]
  word_1 = {"input_ids": tf.io.FixedLenFeature([length], tf.int64)}
  orders = set()
  for seed in range(3):
    passes = pretrain_data._file_passes(  # pylint: disable=protected-access
        paths, sizes, seed).batch(total)
    ids = np.stack([tf.io.parse_example(records, word_1)["input_ids"][:, 1].numpy() - 1000
                    for records in passes.take(3)])  # [pass, record]
    assert all(sorted(p) == list(range(total)) for p in ids)  # each pass all records once
    orders |= {tuple(p) for p in ids}
  assert len(orders) > 1  # passes in orders of their own
  num_batches = 2 * total // file_order_repeats.BATCH
  assert file_order_repeats.repeats(tmp_path, special, 0, num_batches) == [0] * num_batches


def test_errors_name_the_pattern_or_file(records_dir, tmp_path):
  good = pattern(records_dir)
  write_records(tmp_path / "short.tfrecord", [{"input_ids": [1] * 8, "input_mask": [1] * 8,
                                              "segment_ids": [0] * 8}])
  write_records(tmp_path / "partial.tfrecord", [{"input_ids": [1] * S}])
  (tmp_path / "text.tfrecord").write_text("not a record file\n")
  with tf.io.TFRecordWriter(str(tmp_path / "garbage.tfrecord")) as writer:
    writer.write(b"\xff\xff not a proto")
  write_records(tmp_path / "empty.tfrecord", [])
  cases = [
      (f"{tmp_path}/none*", rf"pattern {tmp_path}/none\* matches no file"),
      (f"{good},{tmp_path}/none*", r"none\* matches no file"),
      (" , ", "no file pattern given"),
      (f"{tmp_path}/short.tfrecord", r"records have length 8 but max_seq_length is 128"),
      (f"{tmp_path}/partial.tfrecord",
       r"partial.tfrecord: missing int64 feature\(s\) input_mask, segment_ids"),
      (f"{tmp_path}/text.tfrecord", r"text.tfrecord: unreadable"),
      (f"{tmp_path}/garbage.tfrecord", r"garbage.tfrecord: first record is not a tf.train"),
      (f"{tmp_path}/empty.tfrecord", r"hold no record"),
  ]
  for file_patterns, message in cases:
    with pytest.raises(DataError, match=message) as e:
      pretrain_data.check_tfrecords(file_patterns, S)
    assert "\n" not in str(e.value)
  assert len(pretrain_data.check_tfrecords(f"{good}, {good}", S)) == 3  # no duplicates


def test_start_up_check_reads_unchanged_files_once_a_process(special, tmp_path, monkeypatch):
  rng = np.random.default_rng(1)
  features = [{"input_ids": [special.cls_id] + rng.integers(1000, 3000, S - 2).tolist()
               + [special.sep_id], "input_mask": [1] * S, "segment_ids": [0] * S}
              for _ in range(5)]
  path = tmp_path / "pretrain_data.tfrecord-0-of-1"
  write_records(path, features)
  reads = []
  count_records = pretrain_data.count_records
  monkeypatch.setattr(pretrain_data, "count_records",
                      lambda p: reads.append(p) or count_records(p))
  largest = max(max(f["input_ids"]) for f in features)
  assert pretrain_data.check_tfrecords(pattern(tmp_path), S, largest + 1) == [str(path)]
  assert pretrain_data.check_tfrecords(pattern(tmp_path), S) == [str(path)]
  collect(dataset(tmp_path, special))  # the pipeline's own check
  assert reads == [str(path)]
  # The vocab is still compared on a file checked before.
  with pytest.raises(DataError, match=rf"holds token id {largest}, beyond the {largest} "):
    pretrain_data.check_tfrecords(pattern(tmp_path), S, largest)
  # The same file rewritten (same size, a later modification time: the file
  # system's clock may not have ticked since the first write) is read again:
  # its corrupt last record is found.
  data = bytearray(path.read_bytes())
  data[-5] ^= 0xFF
  modified = path.stat().st_mtime_ns
  path.write_bytes(bytes(data))
  os.utime(path, ns=(modified + 10**9, modified + 10**9))
  with pytest.raises(DataError, match=r"pretrain_data.tfrecord-0-of-1: corrupted record"):
    pretrain_data.check_tfrecords(pattern(tmp_path), S)
