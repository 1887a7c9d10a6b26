"""The tagging tasks' SavedModel signatures (tagging_tasks.py).

`serving_default`: int32 input_ids, input_mask, segment_ids [batch, seq] and
labeled_positions [batch, words] -> logits [batch, words, labels] float32,
predictions [batch, words] int32.  `text`: tf.string `text` [batch],
featurized by the rules the task declares -> words, tags and logits (with
`entity_outputs`, entities).  docs/serving.md.
"""

from __future__ import annotations

from typing import Dict, Optional

import tensorflow as tf

from electra_tf import saved_model
from electra_tf import text_graph
from electra_tf.finetune import task_saved_model
from electra_tf.finetune.tagging import spans


def _ragged_shift(values: tf.Tensor, fill, forward: bool) -> tf.Tensor:
  """values [n] moved one place (forward: values[i-1] at i) with `fill` in
  the place left empty."""
  fill = tf.reshape(tf.cast(fill, values.dtype), [1])
  if forward:
    return tf.concat([fill, values], 0)[:-1]
  return tf.concat([values, fill], 0)[1:]


def decode_in_graph(task, label_ids: tf.RaggedTensor) -> Dict[str, tf.Tensor]:
  """The tags of predicted labels [B, (words)]: a token-level task's labels
  (`tags` alone), or the spans `task.span_rule` reads in them.

  Returns (n words in all, m spans):
    tags        [B, (words)] string, the words' tags (span tasks: in
                task.file_scheme)
    word_span   [n] int64, the span index of each word, -1 outside spans
    span_first, span_last [m] int64, flat word indices (into label_ids'
                values) of each span's first and last word
    span_type   [m] string
  """
  labels = task.label_list
  if task.span_rule is None:
    return {"tags": label_ids.with_flat_values(
        tf.gather(tf.constant(labels), label_ids.flat_values))}
  closes, opens = spans.boundary_tables(labels, task.span_rule)
  sentinel = len(labels)  # "O" before the first and after the last word
  ids = label_ids.flat_values
  positions = tf.range(tf.size(ids, out_type=tf.int64))
  rows = label_ids.value_rowids()
  first_in_row = tf.equal(positions, tf.gather(label_ids.row_starts(), rows))
  last_in_row = tf.equal(positions + 1, tf.gather(label_ids.row_limits(), rows))
  prev = tf.where(first_in_row, sentinel, _ragged_shift(ids, sentinel, True))
  following = tf.where(last_in_row, sentinel, _ragged_shift(ids, sentinel, False))
  opens_here = tf.gather_nd(tf.constant(opens), tf.stack([prev, ids], -1))
  outside = tf.gather(tf.constant([tag == spans.OUTSIDE for tag in labels]), ids)
  # A non-O word always belongs to the span opened last (spans.BoundaryRule).
  last_of_span = ~outside & tf.gather_nd(tf.constant(closes),
                                         tf.stack([ids, following], -1))
  span_first = tf.boolean_mask(positions, opens_here)
  span_last = tf.boolean_mask(positions, last_of_span)
  span_type = tf.gather(tf.constant([spans.type_of(t) for t in labels]),
                        tf.gather(ids, span_last))  # the type of its last tag
  span_index = tf.cumsum(tf.cast(opens_here, tf.int64)) - 1
  word_span = tf.where(outside, tf.constant(-1, tf.int64), span_index)
  word_type = tf.gather(tf.concat([span_type, [""]], 0),
                        tf.where(outside, tf.size(span_type, out_type=tf.int64), span_index))
  follows_same_type = (opens_here & ~first_in_row & _ragged_shift(last_of_span, False, True)
                       & tf.equal(_ragged_shift(word_type, "", True), word_type))
  case = (4 * tf.cast(opens_here, tf.int32) + 2 * tf.cast(last_of_span, tf.int32)
          + tf.cast(follows_same_type, tf.int32))
  prefix = tf.gather(tf.constant(spans.prefix_table(task.file_scheme)), case)
  tags = tf.where(outside, spans.OUTSIDE, tf.strings.join([prefix, word_type], "-"))
  return {"tags": label_ids.with_flat_values(tags), "word_span": word_span,
          "span_first": span_first, "span_last": span_last, "span_type": span_type}


def tagger_functions(model, task, text_encoder: Optional[text_graph.TextEncoder]
                     ) -> task_saved_model.SignatureFunctions:
  """serve and serve_text of a tagging task (module docstring)."""
  config = model.encoder.config

  def head_outputs(inputs, labeled_positions, words_mask) -> Dict[str, tf.Tensor]:
    features = task_saved_model.model_inputs(inputs)
    features.update({f"{task.name}_labeled_positions": labeled_positions,
                     f"{task.name}_labels": tf.zeros_like(labeled_positions),
                     f"{task.name}_labels_mask": tf.cast(words_mask, tf.float32)})
    return task_saved_model.task_outputs(model, task, features)

  @tf.function(input_signature=saved_model.input_signature() + [
      tf.TensorSpec([None, None], tf.int32, name="labeled_positions")],
                   autograph=False)
  def serve(input_ids, input_mask, segment_ids, labeled_positions):
    inputs = dict(zip(saved_model.INPUT_NAMES, saved_model.check_serving_inputs(
        input_ids, input_mask, segment_ids, config)))
    checks = [
        tf.debugging.assert_equal(
            tf.shape(labeled_positions)[0], tf.shape(input_ids)[0],
            message="labeled_positions: batch size differs from that of input_ids"),
        tf.debugging.assert_non_negative(
            labeled_positions, message="labeled_positions: holds a negative position"),
        tf.debugging.assert_less(
            labeled_positions, tf.shape(input_ids)[1],
            message="labeled_positions: holds a position >= the sequence length")]
    with tf.control_dependencies(checks):
      labeled_positions = tf.identity(labeled_positions)
    outputs = head_outputs(inputs, labeled_positions, tf.ones_like(labeled_positions))
    return {"logits": outputs["logits"], "predictions": outputs["predictions"]}

  if text_encoder is None:
    return serve, None
  return serve, _text_function(task, text_encoder, head_outputs)


def _word_pieces(task, text_encoder, words: tf.RaggedTensor) -> tf.RaggedTensor:
  """The pieces of words [B, (w)] -> [B, (w), (p)] as the featurizer makes
  them: a word without pieces (only dropped characters) gets
  task.empty_word_piece, when the task has one."""
  pieces = text_encoder.word_pieces(words)
  if task.empty_word_piece is None:
    return pieces
  no_piece = tf.cast(tf.equal(pieces.row_lengths(axis=2), 0).flat_values, tf.int64)
  return tf.concat([pieces, words.with_flat_values(tf.RaggedTensor.from_row_lengths(
      tf.fill([tf.reduce_sum(no_piece)], task.empty_word_piece), no_piece))], axis=2)


def _packed(task, text_encoder, pieces: tf.RaggedTensor):
  """The featurizer's packing of the words' pieces [B, (w), (p)] in the
  graph: [CLS] (where task.word_fits keeps it) and the pieces of the kept
  words, a prefix (task.word_fits), then [SEP].  Returns the model inputs,
  the kept words' labelled positions [B, W] int32, their mask [B, W] bool
  and their count [B] int64."""
  n_rows = pieces.nrows()
  n_words = pieces.row_lengths()
  piece_counts = pieces.row_lengths(axis=2)
  word_begins = 1 + text_graph.exclusive_row_cumsum(piece_counts)
  kept = task.word_fits(word_begins, piece_counts, tf.expand_dims(n_words, 1))
  n_kept = tf.reduce_sum(tf.cast(kept, tf.int64), axis=1)
  cls_rows = tf.cast(tf.broadcast_to(task.word_fits(0, 1, n_words), [n_rows]), tf.int64)
  tokens = tf.concat([
      tf.RaggedTensor.from_row_lengths(
          tf.fill([tf.reduce_sum(cls_rows)], text_graph.CLS_TOKEN), cls_rows),
      text_graph.ragged_prefix(pieces, n_kept).merge_dims(1, 2),
      tf.RaggedTensor.from_row_lengths(
          tf.fill([n_rows], text_graph.SEP_TOKEN), tf.ones([n_rows], tf.int64))],
      axis=1)
  inputs = text_encoder.model_inputs(
      tokens, tf.ones_like(tokens, tf.int32) * task.segment_id, min_length=1)
  shape = tf.stack([n_rows, kept.bounding_shape(axis=1)])
  kept_mask = kept.to_tensor(False, shape=shape)
  labeled_positions = tf.cast(
      tf.where(kept_mask, word_begins.to_tensor(0, shape=shape), 0), tf.int32)
  return inputs, labeled_positions, kept_mask, n_kept


def _text_function(task, text_encoder, head_outputs):
  """serve_text: words (split at whitespace, or for entity outputs as the
  tokenizer splits them, with their offsets), their tags and logits, and
  with task.entity_outputs the entities."""

  @tf.function(input_signature=[text_graph.text_spec("text")], autograph=False)
  def serve_text(text):
    text = text_graph.check_utf8(text, "text")
    if task.entity_outputs:
      words, byte_starts, byte_ends = text_encoder.raw_words(text)
    else:
      words = tf.strings.split(text)
    n_words = words.row_lengths()
    inputs, labeled_positions, kept_mask, n_kept = _packed(
        task, text_encoder, _word_pieces(task, text_encoder, words))
    outputs = head_outputs(inputs, labeled_positions, kept_mask)
    predictions = text_graph.ragged_prefix(
        tf.RaggedTensor.from_tensor(outputs["predictions"]), n_kept)
    decoded = decode_in_graph(task, predictions)
    tags = decoded["tags"]
    if task.tags_cut_words:
      tags = tf.concat([tags, tf.RaggedTensor.from_row_lengths(
          tf.fill([tf.reduce_sum(n_words - n_kept)], spans.OUTSIDE), n_words - n_kept)],
                       axis=1)
    shape = tf.stack([words.nrows(), words.bounding_shape(axis=1)])
    result = {"words": words.to_tensor(""), "tags": tags.to_tensor("", shape=shape),
              "logits": tf.where(tf.expand_dims(kept_mask, -1), outputs["logits"], 0.0)}
    if task.entity_outputs:
      result.update(_entities(text, words, byte_starts, byte_ends, n_kept, decoded,
                              outputs["logits"]))
    return result

  return serve_text


def _entities(text, words, byte_starts, byte_ends, n_kept, decoded, logits):
  """The predicted spans of the kept words as entities, [B, E] per row (E:
  the most of a row): entity_type, entity_text (the text's characters from
  the first word's start to the last word's end), entity_start and
  entity_end (code point offsets, -1 on padding) and entity_score (the mean
  over the span's words of the predicted label's probability)."""
  probabilities = tf.reduce_max(tf.nn.softmax(logits, axis=-1), axis=-1)
  # Entities: flat kept-word indices -> flat indices of all words.
  all_words = words.with_flat_values(tf.range(tf.size(words.flat_values, out_type=tf.int64)))
  kept_to_all = text_graph.ragged_prefix(all_words, n_kept).flat_values
  first = tf.gather(kept_to_all, decoded["span_first"])
  last = tf.gather(kept_to_all, decoded["span_last"])
  span_row = tf.gather(words.value_rowids(), first)
  char_starts = text_graph.char_offsets(text, byte_starts).flat_values
  char_ends = text_graph.char_offsets(text, byte_ends).flat_values
  byte_start = tf.gather(byte_starts.flat_values, first)
  entity_text = tf.strings.substr(tf.gather(text, span_row), byte_start,
                                  tf.gather(byte_ends.flat_values, last) - byte_start)
  word_probabilities = text_graph.ragged_prefix(
      tf.RaggedTensor.from_tensor(probabilities), n_kept).flat_values
  in_span = decoded["word_span"] >= 0
  n_spans = tf.size(decoded["span_type"], out_type=tf.int64)
  score = tf.math.unsorted_segment_mean(
      tf.boolean_mask(word_probabilities, in_span),
      tf.boolean_mask(decoded["word_span"], in_span), n_spans)
  n_rows = tf.size(text, out_type=tf.int64)

  def per_row(values, pad):
    return tf.RaggedTensor.from_value_rowids(values, span_row, nrows=n_rows).to_tensor(pad)

  return {"entity_type": per_row(decoded["span_type"], ""),
          "entity_text": per_row(entity_text, ""),
          "entity_start": per_row(tf.gather(char_starts, first), -1),
          "entity_end": per_row(tf.gather(char_ends, last), -1),
          "entity_score": per_row(score, 0.0)}
