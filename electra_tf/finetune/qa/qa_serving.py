"""Span-QA exports: the evaluation's answer from a question and a context.

For squadv1, squad and the MRQA tasks the `text` signature takes `question`
and `context` (tf.string [batch]) and does in the graph what qa_tasks.py's
featurizing and evaluation do, returning answer [batch] string,
answer_start / answer_end [batch] int32 (character offsets, -1 without a
span), score [batch] float32 and, for SQuAD 2.0, null_score and no_answer.
Steps and outputs in full: docs/serving.md ("Span-QA exports").
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Mapping, Optional

import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf import saved_model
from electra_tf import text_graph
from electra_tf.config import ModelConfig

ROWS_PER_RUN = 64  # windows per model call: bounds memory on long contexts
_CONTEXT_WHITESPACE = "[ \\t\\r\\n\\x{202F}]+"  # qa_tasks._is_whitespace
_NULL_SCORE_START = 1000000.0  # qa_tasks.QATask._best_answer's initial null score


def _at(values: tf.RaggedTensor, positions: tf.Tensor, default) -> tf.Tensor:
  """values[i, positions[i]] for each row i of values [B, (n)]; `default`
  where the position is outside the row."""
  positions = tf.cast(positions, tf.int64)
  inside = (positions >= 0) & (positions < values.row_lengths())
  flat = tf.concat([values.flat_values, [default]], 0)
  return tf.gather(flat, tf.where(inside, values.row_starts() + positions,
                                  tf.size(values.flat_values, out_type=tf.int64)))


def _spans(values: tf.RaggedTensor, first: tf.Tensor, last: tf.Tensor,
           rows: Optional[tf.Tensor] = None) -> tf.RaggedTensor:
  """values[rows[i], first[i]:last[i] + 1] for each i (int64 [N]; rows
  default range(B); empty when last < first), as ragged [N, (k)]."""
  row_starts = values.row_starts()
  if rows is not None:
    row_starts = tf.gather(row_starts, rows)
  lengths = tf.maximum(last - first + 1, 0)
  positions = tf.ragged.range(lengths) + tf.expand_dims(row_starts + first, 1)
  return positions.with_flat_values(tf.gather(values.flat_values, positions.flat_values))


def _row_gather(values: tf.Tensor, rows: tf.Tensor) -> tf.Tensor:
  """values[rows] along the first axis, zeros for rows == len(values)."""
  padding = [[0, 1]] + [[0, 0]] * (values.shape.rank - 1)
  return tf.gather(tf.pad(values, padding), rows)


def _length(text: tf.Tensor, unit: str = "BYTE") -> tf.Tensor:
  """int64 lengths of strings, in bytes or characters."""
  return tf.cast(tf.strings.length(text, unit=unit), tf.int64)


def _find(text: tf.Tensor, pattern: tf.Tensor) -> tf.Tensor:
  """Byte offset of the first `pattern` in `text` (str.find), -1 if none;
  both string [B]."""
  def find_one(pair):
    text_i, pattern_i = pair
    parts = tf.strings.split(text_i, sep=pattern_i, maxsplit=1)
    # An empty pattern (answered below) splits at whitespace, "" into no
    # parts: the padding keeps parts[0] defined for tf.where's both branches.
    first = tf.concat([parts, [""]], 0)[0]
    offset = tf.where(tf.size(parts) == 2, _length(first), -1)
    return tf.where(tf.equal(pattern_i, ""), tf.constant(0, tf.int64), offset)
  return tf.map_fn(find_one, (text, pattern), fn_output_signature=tf.int64)


def final_text(pred_text: tf.Tensor, orig_text: tf.Tensor, tok_text: tf.Tensor):
  """qa_tasks.final_text on string [B] rows: the character range [first, last]
  (int64 [B]) of orig_text that answers pred_text.

  tok_text is orig_text's basic-tokenized words joined by spaces.  pred_text
  is found in tok_text and both ends mapped through the space-free
  characters onto orig_text; when that fails the whole orig_text.
  """
  def codepoints(text):
    return tf.strings.unicode_decode(text, "UTF-8")

  tok_chars, orig_chars = codepoints(tok_text), codepoints(orig_text)
  tok_solid, orig_solid = tf.not_equal(tok_chars, 32), tf.not_equal(orig_chars, 32)
  byte_start = _find(tok_text, pred_text)
  start = _length(tf.strings.substr(tok_text, tf.zeros_like(byte_start),
                                    tf.maximum(byte_start, 0)), "UTF8_CHAR")
  end = start + _length(pred_text, "UTF8_CHAR") - 1
  tok_to_solid = text_graph.exclusive_row_cumsum(tf.cast(tok_solid, tf.int64))
  orig_solid_positions = tf.ragged.boolean_mask(
      tf.ragged.range(orig_chars.row_lengths()), orig_solid)

  def to_orig(position):
    solid_index = tf.where(_at(tok_solid, position, False),
                           _at(tok_to_solid, position, tf.constant(-1, tf.int64)), -1)
    return _at(orig_solid_positions, solid_index, tf.constant(-1, tf.int64))

  first, last = to_orig(start), to_orig(end)
  mapped = ((byte_start >= 0) & (first >= 0) & (last >= 0) &
            tf.equal(tf.reduce_sum(tf.cast(tok_solid, tf.int64), axis=1),
                     tf.reduce_sum(tf.cast(orig_solid, tf.int64), axis=1)))
  return (tf.where(mapped, first, 0),
          tf.where(mapped, last, orig_chars.row_lengths() - 1))


def _in_runs(model_fn, inputs: Mapping[str, tf.Tensor],
             dtypes: Mapping[str, tf.DType]) -> Dict[str, tf.Tensor]:
  """model_fn over rows [R, ...] of `inputs`, ROWS_PER_RUN rows per call
  (the last run zero-padded; one run of a zero row when R = 0, so that the
  outputs' shapes are known); outputs of `dtypes`, [R, ...]."""
  rows = tf.shape(inputs["input_ids"])[0]
  run_rows = tf.maximum(tf.minimum(rows, ROWS_PER_RUN), 1)
  n_runs = tf.maximum((rows + run_rows - 1) // run_rows, 1)

  def split(values):
    padded = tf.pad(values, [[0, n_runs * run_rows - rows]] +
                    [[0, 0]] * (values.shape.rank - 1))
    return tf.reshape(padded, tf.concat([[n_runs, run_rows], tf.shape(values)[1:]], 0))

  outputs = tf.map_fn(model_fn, {k: split(v) for k, v in inputs.items()},
                      fn_output_signature={k: tf.TensorSpec(None, dtype)
                                           for k, dtype in dtypes.items()},
                      parallel_iterations=1)
  return {k: tf.reshape(v, tf.concat([[n_runs * run_rows], tf.shape(v)[2:]], 0))[:rows]
          for k, v in outputs.items()}


def head_output_dtypes(task) -> Dict[str, tf.DType]:
  """The QA head's inference outputs (qa_tasks.QAHead) and their dtypes."""
  names = ["start_logits", "end_logits", "answerable_logit"]
  if task.config.joint_prediction:
    names += ["start_top_log_probs", "start_top_index", "end_top_log_probs",
              "end_top_index"]
  return {name: tf.int32 if name.endswith("_index") else tf.float32
          for name in names}


@dataclasses.dataclass
class _Document:
  """The contexts of a batch as qa_tasks.py reads them."""
  words: tf.RaggedTensor  # string [B, (words)]: split at _CONTEXT_WHITESPACE
  word_begins: tf.RaggedTensor  # int64 [B, (words)]: character offsets
  pieces: tf.RaggedTensor  # string [B, (n)]: each word tokenized as a text
  piece_words: tf.RaggedTensor  # int64 [B, (n)]: the word of each piece


def _document(context: tf.Tensor, text_encoder: text_graph.TextEncoder) -> _Document:
  words, word_begins, _ = tf_text.regex_split_with_offsets(context, _CONTEXT_WHITESPACE)
  word_pieces = text_encoder.word_pieces(words)  # [B, (words), (pieces)]
  pieces = word_pieces.merge_dims(1, 2)
  piece_words = pieces.with_flat_values(
      word_pieces.values.value_rowids() - tf.gather(words.row_starts(), pieces.value_rowids()))
  return _Document(words, text_graph.char_offsets(context, word_begins), pieces, piece_words)


@dataclasses.dataclass
class _Windows:
  """The document windows of a batch (QATask.window_layout), one model row
  each: per example [B], then per row [R] (int64)."""
  n_pieces: tf.Tensor  # [B] document pieces
  query_length: tf.Tensor  # [B] query pieces kept
  max_tokens: tf.Tensor  # [B] window size: max_seq_length - query - 3
  stride: tf.Tensor  # [B] the step between window starts
  count: tf.Tensor  # [B] windows
  example: tf.Tensor  # [R] the example of the row
  index: tf.Tensor  # [R] the window's index among its example's
  start: tf.Tensor  # [R] its first document piece
  length: tf.Tensor  # [R] its pieces
  doc_first: tf.Tensor  # [R] row position of its first piece (query + 2)

  @property
  def doc_last(self) -> tf.Tensor:
    return self.doc_first + self.length - 1

  def per_row(self, values: tf.Tensor) -> tf.Tensor:
    return tf.gather(values, self.example)


def _windows(task, n_pieces: tf.Tensor, n_query: tf.Tensor) -> _Windows:
  query_length, max_tokens, stride, count = task.window_layout(n_pieces, n_query, tf)
  example = tf.repeat(tf.range(tf.size(n_pieces, out_type=tf.int64)), count)
  index = tf.ragged.range(count).flat_values
  start = index * tf.gather(stride, example)
  length = tf.minimum(tf.gather(n_pieces, example) - start, tf.gather(max_tokens, example))
  return _Windows(n_pieces, query_length, max_tokens, stride, count, example, index, start,
                  length, tf.gather(query_length, example) + 2)


def _max_context(windows: _Windows, piece: tf.Tensor) -> tf.Tensor:
  """qa_tasks.is_max_context of document pieces [R, K] (int64, piece i of row r
  in row r's example): whether row r's window is the first of the example's
  windows holding the piece with the best score, min(left context, right
  context) + 0.01 * window length.  bool [R, K]."""
  all_windows = tf.range(tf.reduce_max(tf.concat([windows.count, tf.zeros([1], tf.int64)], 0)))
  start = all_windows * tf.expand_dims(windows.per_row(windows.stride), 1)  # [R, W]
  length = tf.minimum(tf.expand_dims(windows.per_row(windows.n_pieces), 1) - start,
                      tf.expand_dims(windows.per_row(windows.max_tokens), 1))
  start, length = start[:, None, :], length[:, None, :]  # [R, 1, W]
  end = start + length - 1
  piece = piece[:, :, None]
  exists = all_windows < tf.expand_dims(windows.per_row(windows.count), 1)
  holds = exists[:, None, :] & (piece >= start) & (piece <= end)
  score = (tf.cast(tf.minimum(piece - start, end - piece), tf.float64)
           + 0.01 * tf.cast(length, tf.float64))  # qa_tasks.is_max_context, in float64
  score = tf.where(holds, score, -float("inf"))
  first_best = tf.reduce_min(tf.where(
      tf.equal(score, tf.reduce_max(score, axis=2, keepdims=True)),
      all_windows, tf.size(all_windows, out_type=tf.int64)), axis=2)
  return tf.equal(first_best, tf.expand_dims(windows.index, 1))


@dataclasses.dataclass
class _BestSpans:
  """The n-best search's winner of each example [B]."""
  found: tf.Tensor  # bool: some candidate qualified
  first_piece: tf.Tensor  # int64: its document pieces (0, -1 when not found)
  last_piece: tf.Tensor
  start_score: tf.Tensor  # float64: its start and end scores (0 when not found)
  end_score: tf.Tensor


def _best_spans(windows: _Windows, outputs: Mapping[str, tf.Tensor], config,
                n_examples: tf.Tensor) -> _BestSpans:
  """qa_tasks.QATask._best_answer's candidates and their best, from the head's
  outputs of the window rows."""
  if config.joint_prediction:
    start_score, start_index = outputs["start_top_log_probs"], outputs["start_top_index"]
    end_score, end_index = outputs["end_top_log_probs"], outputs["end_top_index"]
  else:  # qa_tasks.best_indexes: the n_best_size best, ties in position order
    k = tf.minimum(config.n_best_size, tf.shape(outputs["start_logits"])[1])
    start_score, start_index = tf.math.top_k(outputs["start_logits"], k)
    top_end_score, top_end_index = tf.math.top_k(outputs["end_logits"], k)
    end_score = tf.tile(top_end_score[:, None, :], [1, k, 1])
    end_index = tf.tile(top_end_index[:, None, :], [1, k, 1])
  start_index, end_index = tf.cast(start_index, tf.int64), tf.cast(end_index, tf.int64)
  starts = start_index[:, :, None]  # [R, K, 1]; end_index [R, K, K']
  first, last = windows.doc_first[:, None, None], windows.doc_last[:, None, None]
  piece_offset = windows.start - windows.doc_first  # row position -> document piece
  valid = ((starts >= first) & (starts <= last) & (end_index >= first) &
           (end_index <= last) & (end_index >= starts) &
           (end_index - starts + 1 <= config.max_answer_length) &
           _max_context(windows, piece_offset[:, None] + start_index)[:, :, None])
  score = tf.where(valid, tf.cast(start_score, tf.float64)[:, :, None] +
                   tf.cast(end_score, tf.float64), -float("inf"))
  n_rows = tf.size(windows.example, out_type=tf.int64)
  n_ends = tf.shape(end_index, out_type=tf.int64)[2]
  # Candidates in (start, end) order; the size is explicit, as -1 cannot be
  # inferred when there are no rows (no context has a piece).
  n_candidates = tf.shape(end_index, out_type=tf.int64)[1] * n_ends
  score = tf.reshape(score, tf.stack([n_rows, n_candidates]))
  # The best score, the first candidate of the first row on a tie (Python's
  # stable sort of the candidates, rows in order).
  row_best = tf.reduce_max(score, axis=1)
  row_first = tf.reduce_min(tf.where(tf.equal(score, row_best[:, None]),
                                     tf.range(n_candidates), n_candidates), axis=1)
  row_found = row_best > -float("inf")
  found = tf.math.unsorted_segment_max(tf.cast(row_found, tf.int32), windows.example,
                                       n_examples) > 0
  example_best = tf.math.unsorted_segment_max(row_best, windows.example, n_examples)
  best_row = tf.math.unsorted_segment_min(
      tf.where(row_found & tf.equal(row_best, windows.per_row(example_best)),
               tf.range(n_rows), n_rows), windows.example, n_examples)
  best_row = tf.where(found, best_row, n_rows)  # n_rows: a zero row
  best = _row_gather(row_first, best_row)
  best_start, best_end = best // n_ends, best % n_ends

  def of_best(values, *indices):
    values = _row_gather(values, best_row)
    for index in indices:
      values = tf.gather(values, index, batch_dims=1)
    return values

  offset = _row_gather(piece_offset, best_row)
  return _BestSpans(
      found, tf.where(found, offset + of_best(start_index, best_start), 0),
      tf.where(found, offset + of_best(end_index, best_start, best_end), -1),
      tf.where(found, tf.cast(of_best(start_score, best_start), tf.float64), 0.0),
      tf.where(found, tf.cast(of_best(end_score, best_start, best_end), tf.float64), 0.0))


def _span_answer(document: _Document, spans: _BestSpans,
                 text_encoder: text_graph.TextEncoder):
  """The text of each best span on the original words (qa_tasks.final_text) and
  its character offsets [start, end) in the context (int64 [B])."""
  pred_text = tf.strings.reduce_join(
      _spans(document.pieces, spans.first_piece, spans.last_piece), axis=1, separator=" ")
  pred_text = tf.strings.regex_replace(pred_text, " ##", "")
  pred_text = tf.strings.regex_replace(pred_text, "##", "")
  pred_text = tf.strings.strip(tf.strings.regex_replace(pred_text, " +", " "))
  zero = tf.constant(0, tf.int64)
  first_word = _at(document.piece_words, spans.first_piece, zero)
  last_word = tf.where(spans.found, _at(document.piece_words, spans.last_piece, zero), -1)
  span_words = _spans(document.words, first_word, last_word)
  orig_text = tf.strings.reduce_join(span_words, axis=1, separator=" ")
  tok_text = tf.strings.reduce_join(text_encoder.words(orig_text), axis=1, separator=" ")
  first_char, last_char = final_text(pred_text, orig_text, tok_text)
  text = tf.strings.substr(orig_text, first_char, last_char - first_char + 1,
                           unit="UTF8_CHAR")
  # A character of orig_text -> the context: through the span word holding it.
  word_lengths = span_words.with_flat_values(_length(span_words.flat_values, "UTF8_CHAR"))
  orig_word_begins = text_graph.exclusive_row_cumsum(word_lengths + 1)
  context_word_begins = _spans(document.word_begins, first_word, last_word)

  def to_context(position):
    # One padding row and column: searchsorted fails on a batch of no rows.
    begins = tf.pad(orig_word_begins.to_tensor(tf.int64.max), [[0, 1], [0, 1]],
                    constant_values=tf.int64.max)
    word = tf.searchsorted(begins, tf.concat([position, [0]], 0)[:, None],
                           side="right", out_type=tf.int64)[:-1, 0] - 1
    return (_at(context_word_begins, word, zero) + position
            - _at(orig_word_begins, word, zero))

  return text, to_context(first_char), to_context(last_char) + 1


def qa_functions(model_config: ModelConfig, task,
                 text_encoder: Optional[text_graph.TextEncoder],
                 task_outputs: Callable[[Mapping[str, tf.Tensor]], Dict[str, tf.Tensor]]):
  """serve (ids, per window) and serve_text (module docstring) of `task`.

  model_config: the encoder's ModelConfig; task_outputs: the head's
  inference outputs (head_output_dtypes) of input_ids, input_mask,
  segment_ids [rows, seq].
  """
  config = task.config
  joint = config.joint_prediction

  def head_outputs(inputs):
    return task_outputs({k: inputs[k] for k in saved_model.INPUT_NAMES})

  @tf.function(input_signature=saved_model.input_signature(),
                   autograph=False)
  def serve(input_ids, input_mask, segment_ids):
    inputs = saved_model.check_serving_inputs(input_ids, input_mask, segment_ids,
                                                 model_config)
    if joint:
      check = tf.debugging.assert_greater_equal(
          tf.shape(input_ids)[1], config.beam_size,
          message=f"input_ids: sequence length is less than beam_size {config.beam_size}")
      with tf.control_dependencies([check]):
        inputs = tuple(tf.identity(t) for t in inputs)
    return head_outputs(dict(zip(saved_model.INPUT_NAMES, inputs)))

  if text_encoder is None:
    return serve, None

  def answer(question: tf.Tensor, context: tf.Tensor) -> Dict[str, tf.Tensor]:
    document = _document(context, text_encoder)
    query = text_encoder.pieces(question)
    windows = _windows(task, document.pieces.row_lengths(), query.row_lengths())
    query = text_graph.ragged_prefix(query, windows.query_length)
    n_rows = tf.size(windows.example, out_type=tf.int64)

    def constant_rows(token):
      return tf.RaggedTensor.from_row_lengths(tf.fill([n_rows], token),
                                              tf.ones([n_rows], tf.int64))

    window_pieces = _spans(document.pieces, windows.start,
                           windows.start + windows.length - 1, rows=windows.example)
    tokens = tf.concat([constant_rows(text_graph.CLS_TOKEN), windows.per_row(query),
                        constant_rows(text_graph.SEP_TOKEN), window_pieces,
                        constant_rows(text_graph.SEP_TOKEN)], axis=1)
    segment_ids = tf.cast(tf.ragged.range(tokens.row_lengths()) >=
                          tf.expand_dims(windows.doc_first, 1), tf.int32)
    inputs = text_encoder.model_inputs(tokens, segment_ids,
                                       min_length=config.beam_size if joint else 1)
    outputs = _in_runs(head_outputs, {k: inputs[k] for k in saved_model.INPUT_NAMES},
                           head_output_dtypes(task))
    n_examples = tf.size(question, out_type=tf.int64)
    spans = _best_spans(windows, outputs, config, n_examples)
    text, answer_start, answer_end = _span_answer(document, spans, text_encoder)
    answer_text = tf.where(spans.found, text, "empty")  # official placeholder
    result = {"answer_start": tf.cast(tf.where(spans.found, answer_start, -1), tf.int32),
              "answer_end": tf.cast(tf.where(spans.found, answer_end, -1), tf.int32),
              "score": tf.cast(spans.start_score + spans.end_score, tf.float32)}
    if task.v2:
      if config.answerable_classifier:
        row_null = tf.cast(outputs["answerable_logit"], tf.float64)
      else:  # the [CLS] scores, summed in float32 as qa_tasks.py sums them
        row_null = tf.cast(outputs["start_logits"][:, 0] + outputs["end_logits"][:, 0],
                           tf.float64)
      null_score = tf.minimum(tf.constant(_NULL_SCORE_START, tf.float64),
                              tf.math.unsorted_segment_min(
                                  row_null, windows.example, n_examples))
      if not config.answerable_classifier:
        null_score = null_score - spans.start_score - spans.end_score
      no_answer = null_score > config.qa_na_threshold
      answer_text = tf.where(no_answer, "", answer_text)
      result.update(null_score=tf.cast(null_score, tf.float32), no_answer=no_answer)
    result["answer"] = answer_text
    return result

  @tf.function(input_signature=[text_graph.text_spec("question"),
                                text_graph.text_spec("context")],
             autograph=False)
  def serve_text(question, context):
    question = text_graph.check_utf8(question, "question")
    context = text_graph.check_utf8(
        text_graph.check_same_batch(context, "context", question, "question"),
        "context")
    return answer(question, context)

  return serve, serve_text
