"""The graph featurizer of the text signatures against the Python one:
truncation, packing, ragged helpers, UTF-8 and batch checks."""

import itertools
import types

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import text_graph, tokenization
from electra_tf.finetune.classification import classification_tasks


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """The official featurizer's truncation, the reference: pops the last
  token of the longer list (of B on a tie) until both fit."""
  while len(tokens_a) + len(tokens_b) > max_length:
    (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def test_packed_lengths_equal_the_official_truncation():
  """In the graph (int64 [B]) and in Python (ints, numpy), for every pair of
  lengths to 12 and max_seq_length 3 to 14; a B of no pieces is no B."""
  cases = list(itertools.product(range(13), range(13), range(3, 15)))
  len_a, len_b, max_length = (np.array(c, np.int64) for c in zip(*cases))
  keep_a, keep_b = text_graph.packed_lengths(len_a, len_b, max_length)
  for (a, b, m), got_a, got_b in zip(cases, keep_a.numpy(), keep_b.numpy()):
    tokens_a, tokens_b = list(range(a)), list(range(b))
    if b:
      truncate_seq_pair(tokens_a, tokens_b, m - 3)
    else:
      tokens_a = tokens_a[:m - 2]
    assert (got_a, got_b) == (len(tokens_a), len(tokens_b)), (a, b, m)
    assert text_graph.packed_lengths(a, b, m, np) == (got_a, got_b)


def test_ragged_helpers():
  values = tf.ragged.constant([[1, 2, 3], [], [4, 5]], tf.int64)
  assert text_graph.exclusive_row_cumsum(values).to_list() == [[0, 1, 3], [], [0, 4]]
  assert text_graph.ragged_prefix(values, tf.constant([2, 0, 1], tf.int64)
                                  ).to_list() == [[1, 2], [], [4]]
  nested = tf.ragged.constant([[["a"], ["b", "c"]], [["d"]]])
  assert text_graph.ragged_prefix(nested, tf.constant([1, 1], tf.int64)).to_list() == [
      [[b"a"]], [[b"d"]]]


def test_utf8_and_batch_checks_name_the_input():
  check_utf8 = tf.function(lambda text: text_graph.check_utf8(text, "text_a"))
  good = tf.constant(["héllo", "", "a\x00b"])
  assert check_utf8(good).numpy().tolist() == ["héllo".encode(), b"", b"a\x00b"]
  bad = tf.constant([b"ok", b"\xff", b"a\xed\xa0\x80b", b"\xe2\x82"])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"text_a: is not valid UTF-8 at rows\] \[1 2 3\]"):
    check_utf8(bad)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="text_b: batch size differs from the batch size of text_a"):
    tf.function(text_graph.check_same_batch)(good[:2], "text_b", good, "text_a")


@pytest.mark.slow
def test_pack_equals_encode_texts(bert_vocab, tmp_path):
  """Tokens, ids, segments and truncation of a batch of very different
  lengths, padded to its longest row only."""
  tokenizer = tokenization.FullTokenizer(str(bert_vocab))
  max_length = 24
  task = types.SimpleNamespace(tokenizer=tokenizer,
                               config=types.SimpleNamespace(max_seq_length=max_length),
                               pad_ids=lambda v: v + [0] * (max_length - len(v)))
  texts_a = ["The café's ΟΔΟΣ, naïve İstanbul!", "", "word " * 40, "short",
             "中文字符 テスト", "x"]
  texts_b = ["A second text.", "only b", "", "long " * 30, "y " * 11, ""]
  with text_graph.text_encoder(tokenizer) as encoder:
    pack = tf.function(lambda a, b: encoder.pack(a, b, max_length))
    pairs = pack(tf.constant(texts_a), tf.constant(texts_b))
    singles = tf.function(lambda a: encoder.pack(a, None, max_length))(
        tf.constant(texts_a[3:4]))
  assert pairs["input_ids"].shape == (6, max_length)  # the longest rows fill it
  assert singles["input_ids"].shape == (1, 3)  # [CLS] short [SEP]: no padding
  for packed, batch_b in ((pairs, texts_b), (singles, [None])):
    for i, text_b in enumerate(batch_b):
      text_a = texts_a[i] if text_b is not None else texts_a[3]
      expected = classification_tasks.SingleOutputTask.encode_texts(task, text_a, text_b)
      n = int(np.sum(expected["input_mask"]))
      width = packed["input_ids"].shape[1]
      for key in ("input_ids", "input_mask", "segment_ids"):
        assert packed[key][i].numpy().tolist() == (expected[key] + [0] * width)[:width]
      tokens = [t.decode() for t in packed["tokens"][i].numpy()[:n]]
      assert tokens == tokenizer.convert_ids_to_tokens(expected["input_ids"][:n])
