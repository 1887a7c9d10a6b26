"""The fine-tuning model (official `run_finetuning.FinetuningModel`): one shared
encoder (scope `electra`) and a head `task_specific/<task>` per task.

A batch holds rows of any task: input_ids, input_mask, segment_ids [B, S]
int32, task_id [B] int32 (len(task_names) marks a padding row) and each
task's label features (zeros on other tasks' rows).  Every head sees every
row; `multitask_loss` keeps each row's loss under its own task, summed over
the batch, as official.  The encoder and heads are built at construction
(official names): construct eagerly, outside any name scope.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Sequence

import numpy as np
import tensorflow as tf
import tf_keras as keras

from electra_tf.finetune.config import FinetuningConfig
from electra_tf.finetune.task import Task, TaskHead
from electra_tf.modeling.encoder import build_discriminator_encoder


def multitask_loss(task_losses: Mapping[str, tf.Tensor],
                   task_names: Sequence[str], task_id: tf.Tensor) -> tf.Tensor:
  """Official training loss: sum over rows of the loss of the row's task.

  task_losses: task name -> per-row loss [B]; task_id [B] int32.  Rows whose
  task_id is len(task_names) (batch padding) contribute nothing.  Returns a
  float32 scalar.
  """
  stacked = tf.stack([tf.cast(task_losses[name], tf.float32)
                      for name in task_names], axis=-1)  # [B, T]
  return tf.reduce_sum(stacked * tf.one_hot(task_id, len(task_names)))


def zero_features(task: Task, batch_size: int) -> Dict[str, np.ndarray]:
  """Zero-valued arrays of every feature of `task`, `batch_size` rows."""
  return {key: np.zeros((batch_size,) + shape, dtype)
          for key, (shape, dtype) in task.feature_specs().items()}


class FinetuningModel(keras.Model):
  """Encoder + task heads; `call(features)` -> {task name: head outputs}."""

  def __init__(self, config: FinetuningConfig, tasks: Sequence[Task],
               **kwargs: Any):
    super().__init__(name="finetuning_model", **kwargs)
    self.task_names = [task.name for task in tasks]
    self.encoder = build_discriminator_encoder(config.encoder_config(),
                                               config.effective_embedding_size)
    self.heads = {task.name: self._built_head(task, config) for task in tasks}

  def _built_head(self, task: Task, config: FinetuningConfig) -> TaskHead:
    """A task's head, built now by one call on zeros (official names)."""
    head = task.build_head()
    hidden_size = self.encoder.config.hidden_size
    sequence = tf.zeros([1, config.max_seq_length, hidden_size],
                        self.encoder.compute_dtype)
    head({"sequence_output": sequence, "pooled_output": sequence[:, 0]},
         zero_features(task, 1), training=False)
    return head

  def encode(self, features: Mapping[str, tf.Tensor], training: bool = False
             ) -> Dict[str, tf.Tensor]:
    """The encoder outputs the heads read: sequence_output, pooled_output."""
    outputs = self.encoder(features["input_ids"], features["input_mask"],
                           features["segment_ids"], training=training)
    return {"sequence_output": outputs["sequence_output"],
            "pooled_output": outputs["pooled_output"]}

  def call(self, features: Mapping[str, tf.Tensor], training: bool = False
           ) -> Dict[str, Dict[str, tf.Tensor]]:
    encoder_outputs = self.encode(features, training)
    return {name: head(encoder_outputs, features, training=training)
            for name, head in self.heads.items()}

  def task_outputs(self, features: Mapping[str, tf.Tensor], task_name: str
                   ) -> Dict[str, tf.Tensor]:
    """Inference outputs of one task's head (rows of that task only)."""
    return self.heads[task_name](self.encode(features), features,
                                 training=False)

  def training_loss(self, outputs: Mapping[str, Mapping[str, tf.Tensor]],
           task_id: tf.Tensor) -> tf.Tensor:
    """`multitask_loss` of `call`'s outputs."""
    return multitask_loss({name: outputs[name]["loss"]
                           for name in self.task_names},
                          self.task_names, task_id)
