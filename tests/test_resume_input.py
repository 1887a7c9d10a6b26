"""Scale: the input position restores without reading, start-up does not read
the corpus, and a corrupt record met while training stops the job naming the
file and byte offset, with the last good checkpoint kept.

Records here carry their own id (word 1 of record i is 1000 + i), so the
examples a batch holds can be named.
"""

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import tokenization
from electra_tf import train_loop
from electra_tf.errors import DataError
from electra_tf.pretrain import data as pretrain_data
from tests import test_training
from tools import file_order_repeats

S, N, BATCH = 32, 5, 8


@pytest.fixture(scope="module")
def special(bert_vocab):
  return tokenization.special_ids(tokenization.load_vocab(bert_vocab), str(bert_vocab))


def write_corpus(directory, special, num_files=3, per_file=40, seed=0):
  """Files of records whose word 1 is 1000 + the record's index; their paths."""
  rng = np.random.default_rng(seed)
  directory.mkdir(parents=True, exist_ok=True)
  paths = []
  for f in range(num_files):
    path = directory / f"pretrain_data.tfrecord-{f}-of-{num_files}"
    with tf.io.TFRecordWriter(str(path)) as writer:
      for r in range(per_file):
        length = int(rng.integers(8, S + 1))
        ids = ([special.cls_id, 1000 + f * per_file + r]
               + rng.integers(2000, 30000, length - 3).tolist() + [special.sep_id])
        features = {"input_ids": ids + [0] * (S - length),
                    "input_mask": [1] * length + [0] * (S - length),
                    "segment_ids": [0] * S}
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            name: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
            for name, values in features.items()})).SerializeToString())
    paths.append(path)
  return paths


def pipeline(directory, special, skip_examples=0):
  return pretrain_data.get_dataset(
      str(directory / "pretrain_data.tfrecord*"), batch_size=BATCH, max_seq_length=S,
      max_predictions_per_seq=N, mask_prob=0.15, special=special, is_training=True,
      seed=7, skip_examples=skip_examples)


def example_ids(batch):
  """The ids of a batch's examples (word 1, [MASK]ed or not)."""
  return file_order_repeats.unmasked_ids(batch)[:, 1] - 1000


def assert_same_batches(got, want):
  assert len(got) == len(want)
  for a, b in zip(got, want):
    np.testing.assert_array_equal(example_ids(a), example_ids(b))
    for key in b:  # the masks too
      np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def save_position(iterator, prefix):
  return tf.train.Checkpoint(**{train_loop.INPUT_KEY: pretrain_data.InputPosition(
      iterator)}).write(str(prefix))


def restore_position(dataset, path):
  iterator = iter(dataset)
  tf.train.Checkpoint(**{train_loop.INPUT_KEY: pretrain_data.InputPosition(
      iterator)}).read(path).assert_consumed()
  return iterator


def test_a_restored_position_continues_with_the_examples_and_masks_of_the_run(
    tmp_path, special):
  write_corpus(tmp_path / "data", special)  # 120 examples: 30 batches are 2 epochs
  uninterrupted = list(pipeline(tmp_path / "data", special).take(30).as_numpy_iterator())
  ids = np.concatenate([example_ids(b) for b in uninterrupted])
  assert len(set(ids)) > 100 and set(ids) <= set(range(120))  # about two epochs

  # Position saved after 11 batches, restored into a fresh pipeline.
  iterator = iter(pipeline(tmp_path / "data", special))
  for _ in range(11):
    next(iterator)
  path = save_position(iterator, tmp_path / "after_11")
  resumed = restore_position(pipeline(tmp_path / "data", special), path)
  assert_same_batches([{k: v.numpy() for k, v in next(resumed).items()}
                       for _ in range(19)], uninterrupted[11:])

  # The fallback (a checkpoint without position) reads up to it: same batches.
  skipped = iter(pipeline(tmp_path / "data", special, skip_examples=11 * BATCH))
  assert_same_batches([{k: v.numpy() for k, v in next(skipped).items()}
                       for _ in range(5)], uninterrupted[11:16])
  # ... and the position a skipping run saves restores into a pipeline that
  # does not skip (the next resume of a run resumed by the fallback).
  path = save_position(skipped, tmp_path / "after_16")
  resumed = restore_position(pipeline(tmp_path / "data", special), path)
  assert_same_batches([{k: v.numpy() for k, v in next(resumed).items()}
                       for _ in range(14)], uninterrupted[16:])


def test_start_up_check_reads_a_bounded_part_and_reading_names_a_corrupt_record(
    tmp_path, special, monkeypatch):
  paths = write_corpus(tmp_path / "data", special, num_files=2, per_file=60)
  content = bytearray(paths[1].read_bytes())
  record = len(content) // 60  # bytes per record, about
  content[record * 45 + 30] ^= 0xFF  # inside record 45 or so of file 1
  paths[1].write_bytes(bytes(content))
  pattern = str(tmp_path / "data" / "pretrain_data.tfrecord*")
  # A small corpus is still read through up front.
  with pytest.raises(DataError, match=rf"TFRecord file {paths[1]}: corrupted record at "
                                      r"byte offset \d+$"):
    pretrain_data.check_tfrecords(pattern, S)
  # A large one (here: thresholds lowered) only has its first records and a
  # sample checked ...
  monkeypatch.setattr(pretrain_data, "_FULL_CHECK_BYTES", 0)
  monkeypatch.setattr(pretrain_data, "_SAMPLE_RECORDS", 16)
  assert pretrain_data.check_tfrecords(pattern, S) == [str(p) for p in paths]
  # ... and reading stops at the bad record, naming the file and offset.
  with pytest.raises(tf.errors.OpError) as raised:
    list(pipeline(tmp_path / "data", special).take(40).as_numpy_iterator())
  error = pretrain_data.bad_record_error(raised.value, "; context")
  assert error is not None
  assert str(error).startswith(f"TFRecord file {paths[1]}: corrupted record at byte offset ")
  assert str(error).endswith("; context") and "\n" not in str(error)
  offset = int(str(error).split("byte offset ")[1].split(";")[0])
  assert record * 44 < offset <= record * 46
  # A truncated file too, in single-pass reading.
  paths[1].write_bytes(paths[0].read_bytes()[:record * 50 + 7])
  with pytest.raises(tf.errors.OpError) as raised:
    list(pretrain_data.get_dataset(
        pattern, batch_size=BATCH, max_seq_length=S, max_predictions_per_seq=N,
        mask_prob=0.15, special=special, is_training=False, seed=0,
        single_pass=True).as_numpy_iterator())
  assert str(pretrain_data.bad_record_error(raised.value)).startswith(
      f"TFRecord file {paths[1]}: truncated record at byte offset ")
  assert pretrain_data.bad_record_error(ValueError("other")) is None


def _config(data_dir, model_dir, **hparams):
  from electra_tf.pretrain.config import PretrainingConfig
  return PretrainingConfig.create(
      {**test_training.TINY_HPARAMS,
       "num_train_steps": 6, "save_checkpoints_steps": 3, "log_every": 3,
       "model_dir": str(model_dir), **hparams}, data_dir=str(data_dir))


def _train(config, until_step=None):
  from electra_tf.pretrain import job as job_lib
  job = job_lib.PretrainingJob(config, tf.distribute.OneDeviceStrategy("/cpu:0"))
  job.train(until_step=until_step)
  return job


def _values(prefix):
  reader = tf.train.load_checkpoint(str(prefix))
  return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
          if key.endswith("VARIABLE_VALUE") and not key.startswith("save_counter")}


@pytest.mark.slow
def test_a_checkpoint_without_input_position_resumes_by_reading(
    tmp_path, special, bert_vocab, capsys):
  data = tmp_path / "data"
  write_corpus(data / "pretrain_tfrecords", special)
  shutil.copyfile(bert_vocab, data / "vocab.txt")
  straight = tmp_path / "straight"
  _train(_config(data, straight))
  assert "Restored" not in capsys.readouterr().out
  # An older version's checkpoint: model and optimizer only, at step 3.
  old = tmp_path / "old"
  old.mkdir()
  job = _train(_config(data, tmp_path / "first_half"), until_step=3)
  from electra_tf import checkpoints
  checkpoints.save_checkpoint(checkpoints.training_checkpoint_manager(
      tf.train.Checkpoint(model=job.model, optimizer=job.optimizer), str(old), 5,
      job.optimizer.iterations), 3)
  _train(_config(data, old))
  log = capsys.readouterr().out
  assert "Skipping the 24 examples of 3 steps" in log and "holds no input position" in log
  want, got = _values(straight / "ckpt-6"), _values(old / "ckpt-6")
  assert sorted(want) == sorted(got) and len(want) > 40
  for key in want:
    np.testing.assert_array_equal(got[key], want[key], err_msg=key)
  # The checkpoint it wrote holds the position, for the next resume.
  from electra_tf.pretrain import job as job_lib
  assert job_lib.input_position_saved(str(old / "ckpt-6"))
  assert not job_lib.input_position_saved(str(old / "ckpt-3"))


@pytest.mark.slow
def test_a_resume_with_another_batch_reads_to_its_step(tmp_path, special, bert_vocab, capsys):
  """A position saved with a per-replica batch of 8 does not fit one of 4
  (it would fail at the first batch): the job says so and reads to the step
  instead, the examples of 3 steps of 4, as a checkpoint without a position
  would.  (The config refuses a changed train_batch_size on resume,
  tests/test_model_dir_contract.py; another replica count changes the
  per-replica batch alone: the config of batch 4 is made before the run.)"""
  data = tmp_path / "data"
  write_corpus(data / "pretrain_tfrecords", special)
  shutil.copyfile(bert_vocab, data / "vocab.txt")
  changed_batch = _config(data, tmp_path / "changed", train_batch_size=4)
  job = _train(_config(data, tmp_path / "changed"), until_step=3)
  from electra_tf import checkpoints
  from electra_tf.pretrain import job as job_lib
  assert job_lib.input_position_saved(str(tmp_path / "changed" / "ckpt-3"))
  old = tmp_path / "old"  # the same step-3 weights, no position
  checkpoints.save_checkpoint(checkpoints.training_checkpoint_manager(
      tf.train.Checkpoint(model=job.model, optimizer=job.optimizer), str(old), 5,
      job.optimizer.iterations), 3)
  capsys.readouterr()
  _train(changed_batch)
  log = capsys.readouterr().out
  assert "Restored the input position" not in log
  assert ("Skipping the 12 examples of 3 steps (the input position in "
          f"{tmp_path / 'changed' / 'ckpt-3'} does not fit this run's input") in log
  _train(_config(data, old, train_batch_size=4))
  want, got = _values(old / "ckpt-6"), _values(tmp_path / "changed" / "ckpt-6")
  assert sorted(want) == sorted(got) and len(want) > 40
  for key in want:
    np.testing.assert_array_equal(got[key], want[key], err_msg=key)


@pytest.mark.slow
def test_a_corrupt_record_stops_training_and_keeps_the_last_good_checkpoint(
    tmp_path, special, bert_vocab, monkeypatch):
  from electra_tf.pretrain import job as job_lib
  data = tmp_path / "data"
  paths = write_corpus(data / "pretrain_tfrecords", special, num_files=2, per_file=200)
  shutil.copyfile(bert_vocab, data / "vocab.txt")
  content = bytearray(paths[0].read_bytes())
  # Record 150 or so, read (the two files in turn, the shuffle buffer and
  # batches ahead) around step 20.
  content[len(content) // 200 * 150 + 40] ^= 0xFF
  paths[0].write_bytes(bytes(content))
  monkeypatch.setattr(pretrain_data, "_FULL_CHECK_BYTES", 0)  # as a large corpus
  monkeypatch.setattr(pretrain_data, "_SAMPLE_RECORDS", 16)
  model_dir = tmp_path / "model"
  config = _config(data, model_dir, num_train_steps=60, save_checkpoints_steps=4,
                   log_every=1)
  with pytest.raises(DataError) as raised:
    job_lib.run(config, strategy_name="one_device")
  message = str(raised.value)
  latest = tf.train.latest_checkpoint(str(model_dir))
  assert latest is not None and "\n" not in message
  assert message.startswith(f"TFRecord file {paths[0]}: corrupted record at byte offset ")
  assert message.endswith(f"; stopped without saving: the last good checkpoint {latest} "
                          "stays the latest")
  step = int(latest.rsplit("-", 1)[1])
  assert 4 <= step < 60  # the bad record came before the end
  assert json.loads((model_dir / "electra_config.json").read_text())


@pytest.mark.slow
def test_input_only_benchmark_prints_one_json_line(tmp_path, special, bert_vocab):
  import subprocess
  from tests.conftest import command_python
  write_corpus(tmp_path / "data", special)
  command = [command_python(), "-m", "electra_tf.benchmark", "--input_only",
             f"--pretrain_tfrecords={tmp_path / 'data' / '*'}", f"--seq_length={S}",
             "--batch_size=4", "--steps=5", "--warmup_steps=1", "--json"]
  env = test_training._env()
  result = subprocess.run(command + [f"--vocab_file={bert_vocab}"], cwd=test_training.REPO,
                          env=env, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  lines = result.stdout.strip().splitlines()
  assert len(lines) == 1
  report = json.loads(lines[0])
  assert report["mode"] == "input_only" and report["seq_length"] == S
  assert report["batch_size"] == 4 and report["batches"] == 5 and report["cores"] >= 1
  assert report["seq_per_sec"] > 0
  np.testing.assert_allclose(report["seq_per_sec_per_core"] * report["cores"],
                             report["seq_per_sec"], rtol=1e-9)
  np.testing.assert_allclose(report["seq_per_sec"] * report["seconds"], 20, rtol=1e-9)
  missing = subprocess.run(command[:4] + command[5:], cwd=test_training.REPO, env=env,
                           capture_output=True, text=True, timeout=300)
  assert missing.returncode != 0
  assert "--input_only needs --pretrain_tfrecords" in missing.stderr


@pytest.mark.slow
def test_a_run_reads_the_vocab_file_once(tmp_path, special, bert_vocab, monkeypatch):
  """Train, evaluate (with the verdicts' tokens) and the text export: one read."""
  from electra_tf.pretrain import job as job_lib
  data = tmp_path / "data"
  write_corpus(data / "pretrain_tfrecords", special, num_files=1, per_file=16)
  shutil.copyfile(bert_vocab, data / "vocab.txt")
  reads = []
  load_vocab = tokenization.load_vocab
  monkeypatch.setattr(tokenization, "load_vocab",
                      lambda path: reads.append(str(path)) or load_vocab(path))
  config = _config(data, tmp_path / "model", num_train_steps=2, save_checkpoints_steps=2,
                   num_eval_steps=1, do_eval=True, eval_batch_size=BATCH)
  results = job_lib.run(config, strategy_name="one_device",
                        export_dir=str(tmp_path / "export"))
  assert results["global_step"] == 2 and 0.0 <= results["disc_accuracy"] <= 1.0
  assert (tmp_path / "export" / "assets" / "vocab.txt").read_bytes() == bert_vocab.read_bytes()
  assert reads == [str(data / "vocab.txt")]
