"""Raw text in SavedModels: the project's tokenizer and featurizers as graph ops.

The `text` signature (TEXT_SIGNATURE) of every export takes tf.string
[batch] tensors, tokenizes exactly as `FullTokenizer` and packs `[CLS] A
[SEP] (B [SEP])` as the fine-tuning featurizer (`packed_lengths`), padded to
the batch's longest row.  The vocab is the asset `assets/vocab.txt`.
Invalid UTF-8 (`check_utf8`) or unequal batch sizes (`check_same_batch`)
fail the call with an InvalidArgumentError naming the input.
docs/serving.md, "Serving from text".
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Dict, Iterator, Optional

import tensorflow as tf

from electra_tf import tokenization

TEXT_SIGNATURE = "text"
VOCAB_ASSET = "vocab.txt"
CLS_TOKEN, SEP_TOKEN = "[CLS]", "[SEP]"


def text_spec(name: str) -> tf.TensorSpec:
  """A text input of the signature: tf.string [batch]."""
  return tf.TensorSpec([None], tf.string, name=name)


def check_utf8(text: tf.Tensor, name: str) -> tf.Tensor:
  """`text` (string [B]) once every row is valid UTF-8; else the call fails
  with "<name>: is not valid UTF-8 at rows" and the row indices."""
  valid = tf.equal(tf.strings.unicode_transcode(text, "UTF-8", "UTF-8",
                                                errors="ignore"), text)
  check = tf.debugging.Assert(tf.reduce_all(valid), [
      f"{name}: is not valid UTF-8 at rows", tf.where(~valid)[:, 0]])
  with tf.control_dependencies([check]):
    return tf.identity(text)


def check_same_batch(text: tf.Tensor, name: str, reference: tf.Tensor,
                     reference_name: str) -> tf.Tensor:
  """`text` once its batch size is that of `reference` (both string [B])."""
  check = tf.debugging.assert_equal(
      tf.size(text), tf.size(reference),
      message=f"{name}: batch size differs from the batch size of {reference_name}")
  with tf.control_dependencies([check]):
    return tf.identity(text)


def ragged_prefix(values: tf.RaggedTensor, lengths: tf.Tensor) -> tf.RaggedTensor:
  """The first lengths[i] items of each row i of values [B, (n), ...]
  (lengths int64 [B], each at most the row's length)."""
  positions = tf.ragged.range(lengths) + tf.expand_dims(values.row_starts(), 1)
  return positions.with_values(tf.gather(values.values, positions.values))


def exclusive_row_cumsum(values: tf.RaggedTensor) -> tf.RaggedTensor:
  """Per row i, position j of values [B, (n)]: the sum of values[i, :j]."""
  sums = tf.cumsum(values.flat_values, exclusive=True)
  totals = tf.concat([sums, [tf.reduce_sum(values.flat_values)]], 0)
  return values.with_flat_values(sums - tf.gather(
      tf.gather(totals, values.row_starts()), values.value_rowids()))


def char_offsets(text: tf.Tensor, byte_offsets: tf.RaggedTensor) -> tf.RaggedTensor:
  """Code point offsets of byte offsets [B, (k)] into the rows of text [B],
  each at a character's start or at the row's end (int64)."""
  _, char_starts = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
  row_base = tf.cumsum(tf.cast(tf.strings.length(text), tf.int64), exclusive=True)
  global_chars = char_starts + tf.expand_dims(row_base, 1)
  global_offsets = byte_offsets + tf.expand_dims(row_base, 1)
  index = tf.searchsorted(global_chars.flat_values, global_offsets.flat_values,
                          out_type=tf.int64)
  return byte_offsets.with_flat_values(index - tf.gather(
      char_starts.row_starts(), byte_offsets.value_rowids()))


def packed_lengths(len_a, len_b, max_seq_length: int, xp=tf):
  """The pieces of A and of B that `[CLS] A [SEP] (B [SEP])` keeps within
  max_seq_length (xp=numpy on ints, or xp=tf on int64 [B]).

  B of no pieces is no B (A gets max_seq_length - 2); a pair gets
  max_seq_length - 3, cut as the official truncate_seq_pair (the longer text
  loses its last piece, B on a tie)."""
  budget = max_seq_length - 2 - xp.minimum(len_b, 1)
  keep_a = xp.minimum(len_a, xp.maximum(budget - len_b, (budget + 1) // 2))
  keep_b = xp.minimum(len_b, xp.maximum(budget - len_a, budget // 2))
  return keep_a, keep_b


class TextEncoder(tf.Module):
  """The tokenizer of a FullTokenizer as graph ops, the vocab a SavedModel
  asset; build it with `text_encoder(tokenizer)`.  Traceable methods:
    pieces(lines)       string [B] -> word pieces, ragged string [B, (p)]
    word_pieces(words)  ragged words [B, (w)] -> [B, (w), (p)]
    words(lines)        string [B] -> basic-tokenized words [B, (w)]
    raw_words(lines)    string [B] -> the words before normalisation, with
                        their byte offsets
    ids(pieces)         ragged pieces -> ragged int32 vocab ids
    model_inputs(...)   padded int32 model inputs of ragged rows
    pack(a, b, max)     the classifier featurizer ([CLS] A [SEP] B [SEP])"""

  def __init__(self, tokenizer: tokenization.FullTokenizer, scratch_dir: str):
    super().__init__(name="text_encoder")
    vocab = tokenizer.vocab
    tokenization.special_ids(vocab, "the model's vocab")  # needs [CLS], [SEP], [UNK]
    path = os.path.join(scratch_dir, VOCAB_ASSET)
    with open(path, "w", encoding="utf-8") as f:
      f.writelines(token + "\n" for token in sorted(vocab, key=vocab.get))
    # TextFileInitializer tracks the file as an asset of the SavedModel.
    self._ids_table = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
        path, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
        tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER), default_value=-1)
    self._basic = tokenization.FastBasicTokenizer(tokenizer.do_lower_case,
                                                  tokenizer.strip_accents)
    self._wordpiece = tokenization.fast_wordpiece(vocab, tf.string)

  def words(self, lines: tf.Tensor) -> tf.RaggedTensor:
    return self._basic.split_words(lines)

  def raw_words(self, lines: tf.Tensor):
    """string [B] -> (words, byte starts, byte ends), ragged [B, (w)]: the
    words as the text holds them (FastBasicTokenizer.split_raw_words)."""
    return self._basic.split_raw_words(lines)

  def pieces(self, lines: tf.Tensor) -> tf.RaggedTensor:
    return tokenization.wordpieces(self._wordpiece,
                                   self.words(lines)).merge_dims(1, 2)

  def word_pieces(self, words: tf.RaggedTensor) -> tf.RaggedTensor:
    return words.with_flat_values(self.pieces(words.flat_values))

  def ids(self, pieces: tf.RaggedTensor) -> tf.RaggedTensor:
    return pieces.with_flat_values(
        tf.cast(self._ids_table.lookup(pieces.flat_values), tf.int32))

  def model_inputs(self, tokens: tf.RaggedTensor, segment_ids: tf.RaggedTensor,
                   min_length: int = 0) -> Dict[str, tf.Tensor]:
    """Rows of pieces and their segment ids (ragged [R, (t)]) as padded
    tensors [R, T], T = max(longest row, min_length):
      tokens       string ("" on padding)
      input_ids, input_mask, segment_ids  int32 (0 on padding, as the
                   Python featurizers pad)
    """
    length = tf.maximum(tf.cast(tokens.bounding_shape(axis=1), tf.int32), min_length)
    shape = tf.stack([tokens.nrows(out_type=tf.int32), length])

    def padded(values: tf.RaggedTensor, default) -> tf.Tensor:
      return values.to_tensor(default, shape=shape)

    return {"tokens": padded(tokens, ""),
            "input_ids": padded(self.ids(tokens), 0),
            "input_mask": padded(tf.ones_like(segment_ids), 0),
            "segment_ids": padded(segment_ids, 0)}

  def pack(self, text_a: tf.Tensor, text_b: Optional[tf.Tensor],
           max_seq_length: int, min_length: int = 2) -> Dict[str, tf.Tensor]:
    """The classifier featurizer (SingleOutputTask.encode_texts) in the graph.

    text_a, text_b: string [B] (text_b None, or a row's B without pieces:
    single texts).  Returns `model_inputs` of the packed rows, at least
    min_length (>= 2) wide."""
    pieces_a = self.pieces(text_a)
    len_a = pieces_a.row_lengths()
    if text_b is None:
      pieces_b = tf.RaggedTensor.from_row_lengths(
          tf.zeros([0], tf.string), tf.zeros_like(len_a))
    else:
      pieces_b = self.pieces(text_b)
    len_b = pieces_b.row_lengths()
    has_b = len_b > 0
    keep_a, keep_b = packed_lengths(len_a, len_b, max_seq_length)
    batch = tf.shape(len_a, out_type=tf.int64)[0]

    def constant_rows(token: str, rows_length: tf.Tensor) -> tf.RaggedTensor:
      return tf.RaggedTensor.from_row_lengths(
          tf.fill([tf.reduce_sum(rows_length)], token), rows_length)

    ones = tf.ones([batch], tf.int64)
    tokens = tf.concat([constant_rows(CLS_TOKEN, ones), ragged_prefix(pieces_a, keep_a),
                        constant_rows(SEP_TOKEN, ones), ragged_prefix(pieces_b, keep_b),
                        constant_rows(SEP_TOKEN, tf.cast(has_b, tf.int64))], axis=1)
    segment_ids = tf.cast(tf.ragged.range(tokens.row_lengths()) >=
                          tf.expand_dims(keep_a + 2, 1), tf.int32)
    # Width at least 2 ([CLS] [SEP]), also for a batch of no rows.
    return self.model_inputs(tokens, segment_ids, min_length=max(2, min_length))


@contextlib.contextmanager
def text_encoder(tokenizer: Optional[tokenization.FullTokenizer]
                 ) -> Iterator[Optional[TextEncoder]]:
  """A TextEncoder of `tokenizer` (None: None) whose vocab asset file exists
  until the context exits: save the SavedModel inside the context."""
  if tokenizer is None:
    yield None
    return
  with tempfile.TemporaryDirectory(prefix="electra_tf_vocab_") as scratch_dir:
    yield TextEncoder(tokenizer, scratch_dir)
