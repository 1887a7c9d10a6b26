"""Exports a fine-tuned task model as a SavedModel (`--export_dir=DIR` -> DIR/<task>).

Two signatures: `serving_default` takes int32 input_ids, input_mask,
segment_ids [batch, seq] (tagging also labeled_positions [batch, words]) and
returns the head's inference outputs; `text` takes tf.string tensors and
featurizes them in the graph as the fine-tuning featurizer does.  Each task
builds its own signature functions (`Task.serving_functions`); this module
holds the classifier's and what all tasks share.  Outputs per task kind:
docs/serving.md.  The SavedModel loads with `tf.saved_model.load` after
`import tensorflow_text`, without this project.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Tuple

import tensorflow as tf

from electra_tf import serving
from electra_tf import serving_text
from electra_tf.finetune.model import FinetuningModel
from electra_tf.finetune.task import Task

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


def model_inputs(inputs: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  return {name: inputs[name] for name in serving.INPUT_NAMES}


def classifier_functions(model: FinetuningModel, task: Task,
                         text_encoder: Optional[serving_text.TextEncoder]
                         ) -> SignatureFunctions:
  """serve and serve_text of a classification or regression task
  (`task.regression`; `task.single_text`: the text signature takes text_a
  alone)."""
  config = model.encoder.config
  regression = task.regression

  def head_outputs(inputs) -> Dict[str, tf.Tensor]:
    """Regression: predictions (0-5); else logits, probabilities and the
    predicted label ids."""
    outputs = task_outputs(model, task, model_inputs(inputs))
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

  if task.single_text:
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


def serving_module(model: FinetuningModel, task: Task,
                   text_encoder: Optional[serving_text.TextEncoder] = None
                   ) -> tf.Module:
  """The tf.Module of `task`: `serve` (ids), `serve_text` when there is a
  text_encoder, and the variables they read."""
  serve, serve_text = task.serving_functions(model, text_encoder)
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
