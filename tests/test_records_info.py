"""What records say about themselves, read without TensorFlow."""

import json

import pytest

from electra_tf.errors import DataError
from electra_tf.pretrain import records_info
from electra_tf.pretrain import tfrecords


def _build(tmp_path, vocab_text="[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\n", **kwargs):
  corpus = tmp_path / "corpus"
  corpus.mkdir(exist_ok=True)
  (corpus / "a.txt").write_text("the cat the cat\nthe the cat\n\ncat the\n")
  vocab = tmp_path / "vocab.txt"
  vocab.write_text(vocab_text)
  out = tmp_path / "records"
  tfrecords.build_tfrecords(str(corpus), str(vocab), str(out), num_out_files=1,
                            log=lambda _: None, **kwargs)
  return out, vocab


def test_length_from_the_build_record_or_the_first_record(tmp_path, official_trajectory_fixture):
  out, _ = _build(tmp_path, max_seq_length=24)
  assert records_info.example_length(str(out / "*")) == 24
  (out / tfrecords.BUILD_RECORD).unlink()
  assert records_info.example_length(str(out / "*")) == 24  # parsed from the record
  # Records written by TensorFlow's own tf.train.Example (the official
  # writer's format): the fixture's, of length 128.
  data = official_trajectory_fixture / "data" / "pretrain_data.tfrecord*"
  assert records_info.example_length(str(data)) == 128
  assert records_info.example_length(str(tmp_path / "nothing" / "*")) is None
  assert records_info.example_length("gs://bucket/records*") is None


def test_records_meet_their_vocab_and_casing(tmp_path):
  out, vocab = _build(tmp_path, max_seq_length=16)
  records_info.check_built_with(str(out / "*"), "pretrain_tfrecords", str(vocab), True)
  other = tmp_path / "other.txt"
  other.write_text(vocab.read_text() + "dog\n")
  with pytest.raises(DataError, match=r"pretrain_tfrecords .*: built with another vocab than "
                     f"{other}"):
    records_info.check_built_with(str(out / "*"), "pretrain_tfrecords", str(other), True)
  with pytest.raises(DataError, match="built with do_lower_case=true .*rebuild the records "
                     "with --nodo_lower_case"):
    records_info.check_built_with(str(out / "*"), "eval_tfrecords", str(vocab), False)
  summary = records_info.build_summary(str(out / "*"))
  record = str(out / tfrecords.BUILD_RECORD)
  assert summary == {"pattern": str(out / "*"), "files": 1,
                     "build_records": {record: records_info.sha256_of(record)}}
  assert json.loads((out / tfrecords.BUILD_RECORD).read_text())["complete"]
