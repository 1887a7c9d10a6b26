"""Learns a BERT-style WordPiece vocab from a corpus (tensorflow-text's algorithm).

`build_vocab`, behind `data_prep/build_vocab.py`: the corpus's lines split
into words as `tokenization.FastBasicTokenizer` splits them, counted as
tensorflow-text's `bert_vocab_from_dataset`, learned by
`wordpiece_learner.learn` to at most N tokens (within 5% below N).  Order:
[PAD] [UNK] [CLS] [SEP] [MASK], characters, their "##" forms, learned pieces.
"""

from __future__ import annotations

import sys
from typing import Iterable, Iterator, List, Sequence

import tensorflow as tf
from tensorflow_text.python.ops import bert_tokenizer
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib

from electra_tf import tokenization
from electra_tf.errors import DataError
from electra_tf.pretrain import corpus as corpus_lib
from electra_tf.pretrain import wordpiece_learner

RESERVED_TOKENS = tokenization.SPECIAL_TOKENS  # [PAD] first: id 0 is padding
_BATCH = 1024


def _batches(texts: Iterable[str]) -> Iterator[List[str]]:
  batch = []
  for text in texts:
    batch.append(text)
    if len(batch) == _BATCH:
      yield batch
      batch = []
  if batch:
    yield batch


def build_vocab(texts: Iterable[str], vocab_size: int, do_lower_case: bool = True,
                strip_accents: bool = True) -> List[str]:
  """At most `vocab_size` tokens, reserved tokens first (module docstring);
  the rarest learned pieces are dropped when the search ends above it."""
  if vocab_size <= len(RESERVED_TOKENS):
    raise DataError(f"--vocab_size: {vocab_size} leaves no room after the "
                    f"{len(RESERVED_TOKENS)} reserved tokens")
  basic = tokenization.FastBasicTokenizer(do_lower_case, strip_accents)
  texts = (text for text in texts if text.strip())
  dataset = tf.data.Dataset.from_generator(
      lambda: _batches(texts), output_signature=tf.TensorSpec([None], tf.string))
  # tensorflow-text's learner splits at whitespace and punctuation again (as
  # bert_vocab_from_dataset does); the words are already split, so it only
  # sees them joined by spaces.
  learner_split = bert_tokenizer.BasicTokenizer(lower_case=False)
  dataset = dataset.map(
      lambda lines: learner_split.tokenize(tf.strings.reduce_join(
          basic.split_words(lines), axis=-1, separator=" ")))
  try:
    word_counts = wordpiece_tokenizer_learner_lib.count_words(dataset)
  except StopIteration:  # no word at all
    raise DataError("corpus: no text to learn a vocab from") from None
  # The learner's default floor of 10 occurrences caps the vocab of a small
  # corpus far below vocab_size; its binary search starts from 1.
  vocab = wordpiece_learner.learn(word_counts.items(), vocab_size,
                                  list(RESERVED_TOKENS), lower_thresh=1)
  return _cap_size(vocab, vocab_size)


def _cap_size(vocab: List[str], vocab_size: int) -> List[str]:
  """Drops the rarest learned pieces (last) when the learner's search ended
  above vocab_size; reserved tokens and every character, alone and with
  "##", stay so that any word can still be split."""
  essential = {token for token in vocab if token in RESERVED_TOKENS or len(
      token[2:] if token.startswith(tokenization.WORDPIECE_PREFIX) else token) == 1}
  if len(essential) > vocab_size:
    raise DataError(f"--vocab_size: {vocab_size} is below the {len(essential)} reserved "
                    "tokens and characters of the corpus")
  room = vocab_size - len(essential)
  kept = set([token for token in vocab if token not in essential][:room])
  return [token for token in vocab if token in essential or token in kept]


def read_corpus_texts(corpus: str | Sequence[str], name: str,
                      skip_invalid_utf8: bool = False) -> Iterator[str]:
  """Every non-blank line of the corpus files (listed, and checked, now)."""
  paths = corpus_lib.list_corpus_files(corpus, name)

  def lines() -> Iterator[str]:
    for path in paths:
      for chunk in corpus_lib.read_corpus_lines(
          path, skip_invalid_utf8=skip_invalid_utf8):
        if chunk.invalid_line_numbers:
          print(f"build_vocab.py: corpus file {path}: skipped "
                f"{len(chunk.invalid_line_numbers)} line(s) that are not valid UTF-8",
                file=sys.stderr)
        yield from (line for line in chunk.lines if line)

  return lines()
