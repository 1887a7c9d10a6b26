"""The SavedModel of a fine-tuned task (`--export_dir=DIR` -> DIR/<task>).

What every task's export shares; each task builds its signature functions
(`Task.serving_functions`, in its family's *_serving.py): `serving_default`
on int32 ids [batch, seq], `text` on tf.string tensors featurized in the
graph as the fine-tuning featurizer does.  Outputs: docs/serving.md.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Tuple

import tensorflow as tf

from electra_tf import saved_model
from electra_tf import text_graph
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
  return {name: inputs[name] for name in saved_model.INPUT_NAMES}


def serving_module(model: FinetuningModel, task: Task,
                   text_encoder: Optional[text_graph.TextEncoder] = None
                   ) -> tf.Module:
  """The tf.Module of `task`: `serve` (ids), `serve_text` when there is a
  text_encoder, and the variables they read."""
  serve, serve_text = task.serving_functions(model, text_encoder)
  return saved_model.variables_module(
      serve, list(model.encoder.variables) + list(model.heads[task.name].variables),
      serve_text, text_encoder)


def export_task_model(model: FinetuningModel, task: Task, export_dir: str,
                      overwrite: bool = False, text: bool = True) -> str:
  """Writes the SavedModel of `task` (module docstring), with the text
  signature (featurizing with the task's tokenizer) when `text`; returns its dir."""
  with text_graph.text_encoder(task.tokenizer if text else None) as text_encoder:
    return saved_model.save_serving_module(
        serving_module(model, task, text_encoder), export_dir, overwrite)
