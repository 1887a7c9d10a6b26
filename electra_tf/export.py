"""Exports the discriminator as a TensorFlow SavedModel.

  python -m electra_tf.export --checkpoint=PATH --hparams=JSON --export_dir=DIR

PATH is a project checkpoint (prefix or directory, e.g. a pre-training
model_dir) or a Google/official TF1 checkpoint; --hparams describes the model
as for pre-training.  The SavedModel's `serving_default` signature takes int32
`input_ids`, `input_mask`, `segment_ids` of shape [batch, seq] (any batch, any
seq up to max_position_embeddings) and returns float32:
  sequence_output       [batch, seq, hidden]  last discriminator layer
  pooled_output         [batch, hidden]       the [CLS] vector
  discriminator_logits  [batch, seq]          replaced-token logits
  discriminator_probs   [batch, seq]          sigmoid of the logits
(the last two only when the model has a discriminator head, i.e. an
ElectraPretrainer with electra_objective).  It loads with
`tf.saved_model.load` alone, without this project.  The export is written to
a temporary directory and renamed, so a crash never leaves a half-written
export under DIR.
"""

from __future__ import annotations

from typing import List, Tuple, Union

from absl import flags
import tensorflow as tf

from electra_tf import checkpoints
from electra_tf import cli
from electra_tf import stop_points
from electra_tf.config import ModelConfig
from electra_tf.modeling.encoder import TransformerEncoder
from electra_tf.modeling.pretrainer import ElectraPretrainer
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.model import build_model

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


def input_signature() -> List[tf.TensorSpec]:
  """The serving inputs: int32 [batch, seq] input_ids, input_mask, segment_ids."""
  return [tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES]


def check_serving_inputs(input_ids: tf.Tensor, input_mask: tf.Tensor,
                         segment_ids: tf.Tensor, config: ModelConfig
                         ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """The three serving inputs, gated by checks that fail the call with an
  InvalidArgumentError naming the input and what is wrong.

  The shapes must agree and seq fit the position table; ids must lie in
  [0, vocab_size) and segment ids in [0, type_vocab_size).  On a GPU an
  out-of-range embedding lookup silently returns zeros, hence the checks;
  they run before the model (also before the CPU lookup's own error).
  """
  checks = [
      tf.debugging.assert_equal(
          tf.shape(input_mask), tf.shape(input_ids),
          message="input_mask: shape differs from the shape of input_ids"),
      tf.debugging.assert_equal(
          tf.shape(segment_ids), tf.shape(input_ids),
          message="segment_ids: shape differs from the shape of input_ids"),
      tf.debugging.assert_less_equal(
          tf.shape(input_ids)[1], config.max_position_embeddings,
          message="input_ids: sequence length exceeds max_position_embeddings "
                  f"{config.max_position_embeddings}"),
  ]
  for name, values, size, size_name in (
      ("input_ids", input_ids, config.vocab_size, "vocab_size"),
      ("segment_ids", segment_ids, config.type_vocab_size, "type_vocab_size")):
    checks.append(tf.debugging.assert_non_negative(
        values, message=f"{name}: holds a negative id"))
    checks.append(tf.debugging.assert_less(
        values, tf.constant(size, values.dtype),
        message=f"{name}: holds an id >= {size_name} {size}"))
  with tf.control_dependencies(checks):
    return tuple(tf.identity(t) for t in (input_ids, input_mask, segment_ids))


def serving_module(model: Union[ElectraPretrainer, TransformerEncoder]) -> tf.Module:
  """A tf.Module with the `serve` function and the variables it reads."""
  if isinstance(model, ElectraPretrainer):
    encoder, head = model.discriminator, model.discriminator_predictions
  else:
    encoder, head = model, None

  @tf.function(input_signature=input_signature())
  def serve(input_ids, input_mask, segment_ids):
    input_ids, input_mask, segment_ids = check_serving_inputs(
        input_ids, input_mask, segment_ids, encoder.config)
    outputs = encoder(input_ids, input_mask, segment_ids, training=False)
    sequence_output = tf.cast(outputs["sequence_output"], tf.float32)
    result = {"sequence_output": sequence_output,
              "pooled_output": sequence_output[:, 0]}
    if head is not None:
      logits = head(outputs["sequence_output"])
      result.update(discriminator_logits=logits,
                    discriminator_probs=tf.sigmoid(logits))
    return result

  return variables_module(serve, list(encoder.variables) + (
      list(head.variables) if head is not None else []))


def variables_module(serve: tf.types.experimental.GenericFunction,
                     variables: List[tf.Variable]) -> tf.Module:
  """A tf.Module holding `serve` and only the variables it reads.

  Only the variables are tracked (not the Keras layers), so the SavedModel
  holds plain functions and variables that load anywhere.
  """
  module = tf.Module()
  module.model_variables = variables
  module.serve = serve
  return module


def save_serving_module(module: tf.Module, export_dir: str,
                        overwrite: bool = False) -> str:
  """Saves `module.serve` as `serving_default` through a temporary directory.

  An existing non-empty `export_dir` is an error unless `overwrite`; it is
  replaced only by a complete export.
  """
  with checkpoints.atomic_output_dir(export_dir, "--export_dir",
                                     overwrite=overwrite) as tmp_dir:
    tf.saved_model.save(module, tmp_dir, signatures={
        "serving_default": module.serve.get_concrete_function()})
    stop_points.reached("export_written")
  return export_dir


def export_saved_model(model: Union[ElectraPretrainer, TransformerEncoder],
                       export_dir: str, overwrite: bool = False) -> str:
  """Writes the SavedModel described in the module docstring; returns its dir.

  `model` is an ElectraPretrainer (its discriminator and head are exported) or
  a discriminator TransformerEncoder.  An existing non-empty `export_dir` is
  an error unless `overwrite`; it is replaced only by a complete export.
  """
  return save_serving_module(serving_module(model), export_dir, overwrite)


FLAGS = flags.FLAGS


def _define_flags() -> None:
  """The command's flags (defined only when run, not when imported)."""
  flags.DEFINE_string("checkpoint", None,
                      "Project or official checkpoint (prefix or directory).")
  flags.DEFINE_string("hparams", None, "Pre-training hparams: JSON object or .json file.")
  flags.DEFINE_string("export_dir", None, "New directory for the SavedModel.")
  flags.mark_flags_as_required(["checkpoint", "export_dir"])


def main() -> int:
  prefix = checkpoints.resolve_checkpoint(FLAGS.checkpoint)
  pretrainer = build_model(PretrainingConfig.from_flags(FLAGS.hparams, {}))
  checkpoints.restore_from_checkpoint(pretrainer, prefix)
  print(f"wrote {export_saved_model(pretrainer, FLAGS.export_dir)}")
  return 0


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "electra_tf.export")
