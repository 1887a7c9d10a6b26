"""tools/make_synthetic_corpus.py: official-format records, each naming its index."""

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import REPO_ROOT as REPO


def run_tool(*args):
  return subprocess.run([sys.executable, "-m", "tools.make_synthetic_corpus", *args],
                        cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_records_are_full_official_examples_numbered_in_order(tmp_path):
  out = tmp_path / "synth"
  done = run_tool(f"--output_dir={out}", "--num_records=7", "--num_files=2",
                  "--max_seq_length=16", "--processes=1", "--seed=3")
  assert done.returncode == 0, done.stderr
  report = json.loads(done.stdout.strip().splitlines()[-1])
  assert report["records"] == 7 and report["files"] == 2
  files = [out / "pretrain_data.tfrecord-0-of-2", out / "pretrain_data.tfrecord-1-of-2"]
  assert report["bytes"] == sum(path.stat().st_size for path in files)
  first_words = []
  for path in files:
    for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
      features = tf.train.Example.FromString(record).features.feature
      ids = np.array(features["input_ids"].int64_list.value)
      segments = np.array(features["segment_ids"].int64_list.value)
      assert list(features["input_mask"].int64_list.value) == [1] * 16
      # [CLS] A(6) [SEP] B(7) [SEP]; words in the two-byte varint range.
      assert ids[0] == 101 and ids[7] == 102 and ids[15] == 102
      words = np.delete(ids, [0, 7, 15])
      assert words.min() >= 1000 and words.max() <= 16383
      assert list(segments) == [0] * 8 + [1] * 8
      first_words.append(int(ids[1]))
  assert first_words == [1000 + i for i in range(7)]  # 4 in file 0, 3 in file 1


def test_a_non_empty_output_dir_is_refused_and_left_alone(tmp_path):
  (tmp_path / "keep.txt").write_text("mine")
  done = run_tool(f"--output_dir={tmp_path}", "--num_records=3")
  assert done.returncode != 0
  assert done.stderr.strip().splitlines()[-1] == (
      f"make_synthetic_corpus.py: error: --output_dir: {tmp_path} is not empty")
  assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
