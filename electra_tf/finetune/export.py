"""Exports a fine-tuned classifier or regressor as a TensorFlow SavedModel.

`run_finetuning.py --export_dir=DIR` writes DIR/<task> for each task.  The
`serving_default` signature takes int32 `input_ids`, `input_mask`,
`segment_ids` of shape [batch, seq] (featurized as for fine-tuning: [CLS] A
[SEP] B [SEP], any seq up to max_position_embeddings) and returns float32

  classification (cola, sst, mrpc, qqp, mnli, qnli, rte):
    logits         [batch, num_labels]  in the task's label order
    probabilities  [batch, num_labels]  softmax of the logits
  regression (sts):
    predictions    [batch]              the score on the task's scale (0-5)

computed by the task head in inference mode (no dropout).  The SavedModel
holds plain functions and variables and loads with `tf.saved_model.load`
alone, without this project; it is written to a temporary directory and
renamed (electra_tf.export).  SQuAD and chunking heads need per-feature
inputs beyond these three and are not exported.
"""

from __future__ import annotations

import tensorflow as tf

from electra_tf import export as export_lib
from electra_tf.config import ConfigError
from electra_tf.finetune.classification import ClassificationTask, RegressionTask
from electra_tf.finetune.model import FinetuningModel
from electra_tf.finetune.task import Task


def check_exportable(task: Task) -> None:
  """Raises ConfigError for a task whose head has no classifier signature."""
  if not isinstance(task, (ClassificationTask, RegressionTask)):
    raise ConfigError(f"--export_dir: task {task.name} cannot be exported (only "
                      "classification and regression tasks can)")


def serving_module(model: FinetuningModel, task: Task) -> tf.Module:
  """The tf.Module whose `serve` maps the three inputs to the task outputs."""
  check_exportable(task)
  label_specs = {key: spec for key, spec in task.feature_specs().items()
                 if key not in export_lib.INPUT_NAMES}

  @tf.function(input_signature=export_lib.input_signature())
  def serve(input_ids, input_mask, segment_ids):
    input_ids, input_mask, segment_ids = export_lib.check_serving_inputs(
        input_ids, input_mask, segment_ids, model.encoder.config)
    batch_size = tf.shape(input_ids)[:1]
    features = {"input_ids": input_ids, "input_mask": input_mask,
                "segment_ids": segment_ids}
    # The head also computes a loss against these zero labels; it is dropped.
    for key, (shape, dtype) in label_specs.items():
      features[key] = tf.zeros(
          tf.concat([batch_size, tf.constant(shape, tf.int32)], 0), dtype)
    outputs = model.task_outputs(features, task.name)
    if isinstance(task, RegressionTask):
      return {"predictions": task.denormalize(outputs["predictions"])}
    return {"logits": outputs["logits"],
            "probabilities": tf.nn.softmax(outputs["logits"], axis=-1)}

  return export_lib.variables_module(
      serve, list(model.encoder.variables) +
      list(model.heads[task.name].variables))


def export_task_model(model: FinetuningModel, task: Task, export_dir: str,
                      overwrite: bool = False) -> str:
  """Writes the SavedModel of `task` (module docstring); returns its dir."""
  return export_lib.save_serving_module(serving_module(model, task), export_dir,
                                        overwrite)
