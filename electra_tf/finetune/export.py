"""Exports a fine-tuned task model as a TensorFlow SavedModel.

`run_finetuning.py --export_dir=DIR` writes DIR/<task> for each task, with
two signatures.  `serving_default` takes int32 `input_ids`, `input_mask`,
`segment_ids` of shape [batch, seq] (featurized as for fine-tuning, any seq
up to max_position_embeddings) and returns the task head's outputs in
inference mode (no dropout):

  classification (cola, sst, mrpc, qqp, mnli, qnli, rte):
    logits         [batch, num_labels] float32  in the task's label order
    probabilities  [batch, num_labels] float32  softmax of the logits
  regression (sts):
    predictions    [batch] float32      the score on the task's scale (0-5)
  span QA (squadv1, squad, the MRQA tasks; one row per document window):
    start_logits, end_logits [batch, seq] float32, answerable_logit [batch];
    with joint_prediction also start_top_log_probs, start_top_index
    [batch, beam_size] and end_top_log_probs, end_top_index [batch,
    beam_size, beam_size] (seq must be at least beam_size)
  chunk (also takes `labeled_positions` int32 [batch, words], the position
  of each word's first piece):
    logits [batch, words, num_tags] float32, predictions [batch, words] int32

The `text` signature (electra_tf.serving_text) takes tf.string [batch]
tensors and featurizes them in the graph exactly as the fine-tuning
featurizer (the task's max_seq_length, padding to the longest row):

  classification: `text_a` (and `text_b` for the pair tasks: every one but
    cola and sst) -> logits, probabilities [batch, num_labels] float32 and
    `label` [batch] string, the task's label (e.g. "entailment").  A row whose
    text_b has no pieces (e.g. "") is featurized as a single text, as the
    featurizer does.
  regression: `text_a`, `text_b` -> `score` [batch] float32 (0-5).
  span QA: `question`, `context` -> the evaluation's answer (qa_export.py).
  chunk: `text`, words separated by whitespace -> `words` [batch, words]
    string, `tags` [batch, words] string (the IOB2 chunk tag of each word,
    as the predictions file; "" for padding and for the words cut when the
    sentence exceeds max_seq_length, as the featurizer cuts them), `logits`
    [batch, words, num_tags] float32 (BIOES tags; 0 where no tag).

The SavedModel holds plain functions, variables and the vocab asset and
loads with `tf.saved_model.load` after `import tensorflow_text`, without this
project; it is written to a temporary directory and renamed
(electra_tf.export).
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Tuple

import tensorflow as tf

from electra_tf import serving
from electra_tf import serving_text
from electra_tf.finetune import qa_export
from electra_tf.finetune.classification import ClassificationTask, RegressionTask
from electra_tf.finetune.model import FinetuningModel
from electra_tf.finetune.qa import QATask
from electra_tf.finetune.tagging import ChunkingTask
from electra_tf.finetune.task import Task

# Classification tasks of one text; the other GLUE tasks take text pairs.
SINGLE_TEXT_TASKS = ("cola", "sst")
SignatureFunctions = Tuple[tf.types.experimental.GenericFunction,
                           Optional[tf.types.experimental.GenericFunction]]


def task_outputs(model: FinetuningModel, task: Task,
                 features: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """The task head's inference outputs on `features` (input_ids, input_mask,
  segment_ids [B, S] and any task features); the task's other per-row
  features are zeros (the head's loss against them is dropped)."""
  features = dict(features)
  batch_size = tf.shape(features["input_ids"])[:1]
  for key, (shape, dtype) in task.feature_specs().items():
    if key not in features:
      features[key] = tf.zeros(
          tf.concat([batch_size, tf.constant(shape, tf.int32)], 0), dtype)
  outputs = model.task_outputs(features, task.name)
  outputs.pop("loss")
  return outputs


def _model_inputs(inputs: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  return {name: inputs[name] for name in serving.INPUT_NAMES}


def classifier_functions(model: FinetuningModel, task: Task,
                         text_encoder: Optional[serving_text.TextEncoder]
                         ) -> SignatureFunctions:
  """serve and serve_text of a classification or regression task."""
  config = model.encoder.config
  regression = isinstance(task, RegressionTask)

  def head_outputs(inputs) -> Dict[str, tf.Tensor]:
    """Regression: predictions (0-5); else logits, probabilities and the
    predicted label ids."""
    outputs = task_outputs(model, task, _model_inputs(inputs))
    if regression:
      return {"predictions": task.denormalize(outputs["predictions"])}
    return {"logits": outputs["logits"],
            "probabilities": tf.nn.softmax(outputs["logits"], axis=-1),
            "label_ids": outputs["predictions"]}

  @tf.function(input_signature=serving.input_signature())
  def serve(input_ids, input_mask, segment_ids):
    outputs = head_outputs(dict(zip(serving.INPUT_NAMES, serving.check_serving_inputs(
        input_ids, input_mask, segment_ids, config))))
    outputs.pop("label_ids", None)
    return outputs

  if text_encoder is None:
    return serve, None
  labels = None if regression else tf.constant(task.label_list)

  def from_text(text_a, text_b) -> Dict[str, tf.Tensor]:
    text_a = serving_text.check_utf8(text_a, "text_a")
    if text_b is not None:
      text_b = serving_text.check_utf8(
          serving_text.check_same_batch(text_b, "text_b", text_a, "text_a"), "text_b")
    outputs = head_outputs(text_encoder.pack(text_a, text_b,
                                             task.config.max_seq_length))
    if regression:
      return {"score": outputs["predictions"]}
    return {"logits": outputs["logits"], "probabilities": outputs["probabilities"],
            "label": tf.gather(labels, outputs["label_ids"])}

  if task.name in SINGLE_TEXT_TASKS:
    @tf.function(input_signature=[serving_text.text_spec("text_a")],
                 autograph=False)
    def serve_text(text_a):
      return from_text(text_a, None)
  else:
    @tf.function(input_signature=[serving_text.text_spec("text_a"),
                                  serving_text.text_spec("text_b")],
                 autograph=False)
    def serve_text(text_a, text_b):
      return from_text(text_a, text_b)
  return serve, serve_text


def _bio_tags(predictions: tf.RaggedTensor, label_list) -> tf.RaggedTensor:
  """The predictions file's IOB2 tags of predicted BIOES label ids.

  predictions: int32 [B, (words)].  As tagging.evaluate does through
  metrics.span_labels / tags_from_spans: a chunk starts at B-/S- or after O
  (or at the first word) and runs to the next start or O; it takes the type
  of its last tag; its first word becomes B-type, the others I-type.
  Returns string [B, (words)].
  """
  outside_of_label = tf.constant([tag == "O" for tag in label_list])
  begins_of_label = tf.constant([tag[:2] in ("B-", "S-") for tag in label_list])
  type_of_label = tf.constant([tag.split("-")[-1] for tag in label_list])
  ids = predictions.flat_values
  outside = tf.gather(outside_of_label, ids)
  positions = tf.range(tf.size(ids, out_type=tf.int64))
  first_in_row = tf.equal(positions, tf.gather(predictions.row_starts(),
                                               predictions.value_rowids()))
  previous_outside = first_in_row | tf.concat([[True], outside[:-1]], 0)
  starts = ~outside & (tf.gather(begins_of_label, ids) | previous_outside)
  span = tf.cumsum(tf.cast(starts, tf.int64)) - 1  # of each non-O word
  last_word = tf.math.unsorted_segment_max(
      positions, tf.where(outside, tf.constant(-1, tf.int64), span),  # -1: dropped
      tf.reduce_sum(tf.cast(starts, tf.int64)))
  n_spans = tf.size(last_word, out_type=tf.int64)
  # One entry more, read by the O words (and with no chunk at all).
  span_type = tf.concat([tf.gather(type_of_label, tf.gather(ids, last_word)), ["O"]], 0)
  tags = tf.where(outside, "O", tf.strings.join(
      [tf.where(starts, "B-", "I-"), tf.gather(span_type, tf.where(outside, n_spans, span))]))
  return predictions.with_flat_values(tags)


def tagger_functions(model: FinetuningModel, task: ChunkingTask,
                     text_encoder: Optional[serving_text.TextEncoder]
                     ) -> SignatureFunctions:
  """serve and serve_text of the chunking task."""
  config = model.encoder.config

  def head_outputs(inputs, labeled_positions, words_mask) -> Dict[str, tf.Tensor]:
    features = _model_inputs(inputs)
    features.update({f"{task.name}_labeled_positions": labeled_positions,
                     f"{task.name}_labels": tf.zeros_like(labeled_positions),
                     f"{task.name}_labels_mask": tf.cast(words_mask, tf.float32)})
    return task_outputs(model, task, features)

  @tf.function(input_signature=serving.input_signature() + [
      tf.TensorSpec([None, None], tf.int32, name="labeled_positions")],
               autograph=False)
  def serve(input_ids, input_mask, segment_ids, labeled_positions):
    inputs = dict(zip(serving.INPUT_NAMES, serving.check_serving_inputs(
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
  label_list = task.label_list
  max_length = task.config.max_seq_length

  @tf.function(input_signature=[serving_text.text_spec("text")],
               autograph=False)
  def serve_text(text):
    words = tf.strings.split(serving_text.check_utf8(text, "text"))
    n_words = words.row_lengths()
    piece_counts = text_encoder.word_pieces(words).row_lengths(axis=2)
    # The featurizer adds [CLS], the words, [SEP] while n_words + 3 + the
    # tokens so far fits max_seq_length, then ends with [SEP]: [CLS] and the
    # kept words (a prefix), then one [SEP].
    word_begins = 1 + serving_text.exclusive_row_cumsum(piece_counts)
    kept = tf.expand_dims(n_words, 1) + 3 + word_begins <= max_length
    n_kept = tf.reduce_sum(tf.cast(kept, tf.int64), axis=1)
    has_cls = n_words + 3 <= max_length
    pieces = serving_text.ragged_prefix(text_encoder.word_pieces(words), n_kept)
    tokens = tf.concat([
        tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(has_cls, tf.int64))], serving_text.CLS_TOKEN),
            tf.cast(has_cls, tf.int64)),
        pieces.merge_dims(1, 2),
        tf.RaggedTensor.from_row_lengths(
            tf.fill(tf.shape(n_words), serving_text.SEP_TOKEN), tf.ones_like(n_words))],
        axis=1)
    inputs = text_encoder.model_inputs(tokens, tf.ones_like(tokens, tf.int32), min_length=1)
    shape = tf.stack([words.nrows(), words.bounding_shape(axis=1)])
    kept_mask = kept.to_tensor(False, shape=shape)
    labeled_positions = tf.cast(
        tf.where(kept_mask, word_begins.to_tensor(0, shape=shape), 0), tf.int32)
    outputs = head_outputs(inputs, labeled_positions, kept_mask)
    predictions = serving_text.ragged_prefix(
        tf.RaggedTensor.from_tensor(outputs["predictions"]), n_kept)
    return {"words": words.to_tensor(""),
            "tags": _bio_tags(predictions, label_list).to_tensor("", shape=shape),
            "logits": tf.where(tf.expand_dims(kept_mask, -1), outputs["logits"], 0.0)}

  return serve, serve_text


def serving_module(model: FinetuningModel, task: Task,
                   text_encoder: Optional[serving_text.TextEncoder] = None
                   ) -> tf.Module:
  """The tf.Module of `task`: `serve` (ids), `serve_text` when there is a
  text_encoder, and the variables they read."""
  if isinstance(task, (ClassificationTask, RegressionTask)):
    serve, serve_text = classifier_functions(model, task, text_encoder)
  elif isinstance(task, QATask):
    serve, serve_text = qa_export.qa_functions(
        model.encoder.config, task, text_encoder,
        lambda features: task_outputs(model, task, features))
  elif isinstance(task, ChunkingTask):
    serve, serve_text = tagger_functions(model, task, text_encoder)
  else:
    raise TypeError(f"task {task.name}: {type(task).__name__} has no export")
  return serving.variables_module(
      serve, list(model.encoder.variables) + list(model.heads[task.name].variables),
      serve_text, text_encoder)


def export_task_model(model: FinetuningModel, task: Task, export_dir: str,
                      overwrite: bool = False, text: bool = True) -> str:
  """Writes the SavedModel of `task` (module docstring), with the text
  signature (featurizing with the task's tokenizer) when `text`; returns its dir."""
  with serving_text.text_encoder(task.tokenizer if text else None) as text_encoder:
    return serving.save_serving_module(
        serving_module(model, task, text_encoder), export_dir, overwrite)
