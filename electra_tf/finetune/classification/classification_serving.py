"""The classification and regression tasks' SavedModel signatures
(classification_tasks.py; outputs: docs/serving.md).

`serving_default` takes the ids and returns the head's logits and
probabilities (regression: predictions, on the task's scale); `text` takes
text_a (and text_b for a pair task), packed by `TextEncoder.pack` with the
featurizer's truncation (text_graph.packed_lengths), and returns these and
the label (regression: score).
"""

from __future__ import annotations

from typing import Dict, Optional

import tensorflow as tf

from electra_tf import saved_model
from electra_tf import text_graph
from electra_tf.finetune import task_saved_model
from electra_tf.finetune.model import FinetuningModel


def classifier_functions(model: FinetuningModel, task,
                         text_encoder: Optional[text_graph.TextEncoder]
                         ) -> task_saved_model.SignatureFunctions:
  """serve and serve_text of a classification or regression task
  (`task.regression`; `task.single_text`: the text signature takes text_a
  alone)."""
  config = model.encoder.config
  regression = task.regression

  def head_outputs(inputs) -> Dict[str, tf.Tensor]:
    """Regression: predictions (0-5); else logits, probabilities and the
    predicted label ids."""
    outputs = task_saved_model.task_outputs(model, task, task_saved_model.model_inputs(inputs))
    if regression:
      return {"predictions": task.denormalize(outputs["predictions"])}
    return {"logits": outputs["logits"],
            "probabilities": tf.nn.softmax(outputs["logits"], axis=-1),
            "label_ids": outputs["predictions"]}

  @tf.function(input_signature=saved_model.input_signature(), autograph=False)
  def serve(input_ids, input_mask, segment_ids):
    outputs = head_outputs(dict(zip(saved_model.INPUT_NAMES, saved_model.check_serving_inputs(
        input_ids, input_mask, segment_ids, config))))
    outputs.pop("label_ids", None)
    return outputs

  if text_encoder is None:
    return serve, None
  labels = None if regression else tf.constant(task.label_list)

  def from_text(text_a, text_b) -> Dict[str, tf.Tensor]:
    text_a = text_graph.check_utf8(text_a, "text_a")
    if text_b is not None:
      text_b = text_graph.check_utf8(
          text_graph.check_same_batch(text_b, "text_b", text_a, "text_a"), "text_b")
    outputs = head_outputs(text_encoder.pack(text_a, text_b,
                                             task.config.max_seq_length))
    if regression:
      return {"score": outputs["predictions"]}
    return {"logits": outputs["logits"], "probabilities": outputs["probabilities"],
            "label": tf.gather(labels, outputs["label_ids"])}

  if task.single_text:
    @tf.function(input_signature=[text_graph.text_spec("text_a")],
               autograph=False)
    def serve_text(text_a):
      return from_text(text_a, None)
  else:
    @tf.function(input_signature=[text_graph.text_spec("text_a"),
                                  text_graph.text_spec("text_b")],
               autograph=False)
    def serve_text(text_a, text_b):
      return from_text(text_a, text_b)
  return serve, serve_text
