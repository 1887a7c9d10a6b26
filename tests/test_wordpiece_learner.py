"""wordpiece_learner.learn returns what tensorflow-text's learner returns.

The reference is tensorflow-text itself
(`wordpiece_tokenizer_learner_lib.learn`, and `bert_vocab_from_dataset` for
build_vocab as a whole), run here on the same word counts of real text: a
book and a Python docs page, cased and lower-cased, at vocab sizes where its
binary search ends in different ways (within the slack, above the target and
capped, out of pieces), and with its own floor of 10.
"""

import collections
import re

import pytest
from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as tf_text_learner
import tensorflow as tf

from electra_tf import tokenization
from electra_tf.pretrain import vocab_builder
from electra_tf.pretrain import wordpiece_learner

RESERVED = list(vocab_builder.RESERVED_TOKENS)


def word_counts(lines, do_lower_case):
  """Words and punctuation marks (both learners take the same counts)."""
  return collections.Counter(word for line in lines for word in re.findall(
      r"\w+|[^\w\s]", line.lower() if do_lower_case else line))


@pytest.fixture(scope="module")
def book_lines(corpus_dir):
  text = (corpus_dir / "gutenberg" / "jnglb10.txt").read_bytes().decode("utf-8")
  return [line for line in text.split("\n")[:2000] if line.strip()]


@pytest.fixture(scope="module")
def docs_lines():
  """Python's own documentation of `collections` (with every checkout)."""
  docs = [collections.__doc__] + [getattr(collections, name).__doc__
                                  for name in dir(collections)]
  return [line for doc in docs if isinstance(doc, str) for line in doc.split("\n")
          if line.strip()]


@pytest.mark.parametrize("do_lower_case,vocab_size,lower_thresh", [
    (True, 300, 1), (True, 2500, 1), (True, 60000, 1), (False, 1000, 1), (False, 1000, 10)])
def test_equals_tensorflow_texts_learner_on_a_book(book_lines, do_lower_case, vocab_size,
                                                   lower_thresh):
  counts = word_counts(book_lines, do_lower_case)
  expected = tf_text_learner.learn(counts.items(), vocab_size, RESERVED,
                                   lower_thresh=lower_thresh)
  assert wordpiece_learner.learn(counts.items(), vocab_size, RESERVED,
                                 lower_thresh=lower_thresh) == expected
  assert len(expected) > 200  # a real vocab, not the reserved tokens alone


def test_equals_tensorflow_texts_learner_on_python_docs(docs_lines):
  counts = word_counts(docs_lines, do_lower_case=False)
  for vocab_size in (200, 800):
    assert wordpiece_learner.learn(counts.items(), vocab_size, RESERVED, lower_thresh=1) == \
        tf_text_learner.learn(counts.items(), vocab_size, RESERVED, lower_thresh=1)


def test_input_limits_are_tensorflow_texts(book_lines):
  """Too-long words, rare characters and the cap on input words are dropped
  as tensorflow-text drops them."""
  counts = word_counts(book_lines, do_lower_case=False)
  counts.update({"x" * 30: 50, "ωmega": 40, RESERVED[2]: 99})
  limits = {"max_token_length": 20, "max_unique_chars": 40, "max_input_tokens": 1500}
  assert wordpiece_learner.learn(counts.items(), 800, RESERVED, lower_thresh=1, **limits) == \
      tf_text_learner.learn(counts.items(), 800, RESERVED, lower_thresh=1, **limits)


@pytest.mark.slow
def test_build_vocab_equals_bert_vocab_from_dataset(book_lines):
  """build_vocab as a whole, against tensorflow-text's dataset learner on the
  words the project's tokenizer splits (as build_vocab did before it had a
  learner of its own)."""
  lines = book_lines[:1500]
  basic = tokenization.FastBasicTokenizer(True, True)
  dataset = tf.data.Dataset.from_tensor_slices(lines).batch(256).map(
      lambda batch: tf.strings.reduce_join(basic.split_words(batch), axis=-1, separator=" "))
  expected = bert_vocab_from_dataset.bert_vocab_from_dataset(
      dataset, vocab_size=700, reserved_tokens=RESERVED,
      bert_tokenizer_params={"lower_case": False}, learn_params={"lower_thresh": 1})
  assert vocab_builder.build_vocab(lines, vocab_size=700) == expected[:700]
