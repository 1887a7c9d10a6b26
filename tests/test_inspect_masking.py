"""inspect_masking: statistics on hand-made arrays, the official print format,
and the CLI's JSON line on real records."""

import io
import json
import os
import subprocess

import numpy as np
import pytest

from electra_tf.pretrain import tfrecords as build_tfrecords
from electra_tf.pretrain import masking_report as inspect_masking
from electra_tf import errors
from electra_tf import tokenization
from tests.conftest import command_python


@pytest.fixture(scope="module")
def special(bert_vocab):
  return tokenization.special_ids(tokenization.load_vocab(bert_vocab), str(bert_vocab))


def test_statistics_of_known_arrays(special):
  mask_id = special.mask_id
  examples = {
      # ex 0: [CLS] 7 [MASK] 9 [SEP] | [SEP]-segment, slots: pos 2 (masked), pos 3 (kept)
      # ex 1: [CLS] 5 6 [SEP] 8 [SEP], slots: pos 1 (random 4), pos 4 unused
      "input_ids": np.array([[101, 7, mask_id, 9, 102, 0],
                             [101, 4, 6, 102, 8, 102]]),
      "input_mask": np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]]),
      "segment_ids": np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1]]),
      "masked_lm_positions": np.array([[2, 3], [1, 0]]),
      "masked_lm_ids": np.array([[8, 9], [5, 0]]),
      "masked_lm_weights": np.array([[1.0, 1.0], [1.0, 0.0]], np.float32),
  }
  stats = inspect_masking.masking_statistics(examples, special)
  assert stats == pytest.approx({
      "selected_fraction": 3 / 11, "mask_fraction": 1 / 3, "keep_fraction": 1 / 3,
      "random_fraction": 1 / 3, "special_selected": 0,
      "single_segment_fraction": 0.5, "mean_length": 5.5, "num_examples": 2})
  examples["masked_lm_ids"][1, 0] = 102  # a selected [SEP] is counted
  assert inspect_masking.masking_statistics(examples, special)["special_selected"] == 1


def test_format_like_official_print_tokens():
  inv_vocab = {0: "[PAD]", 1: "[CLS]", 2: "[SEP]", 3: "[MASK]", 4: "cat", 5: "sat"}
  text = inspect_masking.format_example(
      [1, 3, 5, 4, 2, 0, 4], positions=[1, 3, 0], original_ids=[4, 4, 0],
      weights=[1, 1, 0], inv_vocab=inv_vocab, color=False)
  assert text == "[CLS] [MASK] (cat) sat cat (cat) [SEP]"  # stops at [PAD]
  colored = inspect_masking.format_example([1, 3, 2], [1], [4], [1], inv_vocab, True)
  assert colored == "[CLS] \033[91m[MASK] (cat)\033[0m [SEP]"


@pytest.fixture(scope="module")
def records(corpus_dir, bert_vocab, tmp_path_factory):
  out = tmp_path_factory.mktemp("records")
  build_tfrecords.build_tfrecords(corpus_dir / "wikitext-2", bert_vocab, out,
                                  num_out_files=2, max_seq_length=64, seed=0)
  return str(out / "pretrain_data.tfrecord*")


@pytest.mark.slow
def test_statistics_match_the_official_rule(records, bert_vocab):
  out = io.StringIO()
  stats = inspect_masking.inspect(records, str(bert_vocab), num_examples=2000,
                                  mask_prob=0.15, seed=0, num_print=2, as_json=True,
                                  out=out)
  lines = out.getvalue().splitlines()
  assert len(lines) == 3 and lines[0].startswith("example 0: [CLS] ")
  assert json.loads(lines[-1]) == stats
  assert stats["num_examples"] == 2000
  assert stats["special_selected"] == 0 and stats["random_fraction"] == 0
  # 85% [MASK] per draw; a position drawn twice is kept only if both keep it,
  # which lifts the [MASK] share a little above 0.85.
  assert 0.85 < stats["mask_fraction"] < 0.88
  assert stats["mask_fraction"] + stats["keep_fraction"] == pytest.approx(1)
  # round(len * 0.15) per example, at least 1: close to 15% of the tokens
  assert 0.14 < stats["selected_fraction"] < 0.16
  assert stats["single_segment_fraction"] > 0.5 and 20 < stats["mean_length"] <= 64


@pytest.mark.slow
def test_cli_prints_examples_then_json(records, bert_vocab):
  done = subprocess.run(
      [command_python(), "data_prep/inspect_masking.py", f"--pretrain_tfrecords={records}",
       f"--vocab_file={bert_vocab}", "--num_examples=500", "--num_print=1", "--json"],
      cwd=os.path.dirname(os.path.dirname(__file__)), capture_output=True, text=True,
      timeout=120)
  assert done.returncode == 0, done.stderr
  lines = done.stdout.strip().splitlines()
  assert len(lines) == 2 and "[MASK] (" in lines[0]  # the original beside [MASK]
  stats = json.loads(lines[-1])
  assert stats["num_examples"] == 500 and stats["random_fraction"] == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"file_patterns": "/nonexistent/*.tfrecord"},
     "pattern /nonexistent/*.tfrecord matches no file"),
    ({"num_examples": 0}, "--num_examples: 0 must be >= 1"),
    ({"mask_prob": 1.5}, "--mask_prob: 1.5 is outside (0, 1)"),
])
def test_errors(records, bert_vocab, kwargs, message):
  args = dict(file_patterns=records, vocab_file=str(bert_vocab), num_examples=10,
              mask_prob=0.15, seed=0, num_print=0, as_json=True)
  args.update(kwargs)
  with pytest.raises(errors.DataError) as e:
    inspect_masking.inspect(**args)
  assert message in str(e.value)
