"""The SavedModel of an ELECTRA encoder: its signatures and the atomic save.

`export_saved_model` writes the discriminator of a pre-trainer (or an
encoder): `serving_default` (int32 input_ids, input_mask, segment_ids
[batch, seq]) and, with a tokenizer, `text` (tf.string `text` [batch]);
outputs: docs/serving.md.  finetune/task_saved_model.py reuses these pieces.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Union

import tensorflow as tf

from electra_tf import checkpoints
from electra_tf import stop_points
from electra_tf import text_graph
from electra_tf import tokenization
from electra_tf.config import ModelConfig
from electra_tf.modeling.encoder import TransformerEncoder
from electra_tf.modeling.pretrainer import ElectraPretrainer

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


def input_signature() -> List[tf.TensorSpec]:
  """The serving inputs: int32 [batch, seq] input_ids, input_mask, segment_ids."""
  return [tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES]


def check_serving_inputs(input_ids: tf.Tensor, input_mask: tf.Tensor,
                         segment_ids: tf.Tensor, config: ModelConfig
                         ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """The three serving inputs, gated by checks (the model would read an
  out-of-range id on a GPU as zeros): shapes agree, seq fits the position
  table, ids in [0, vocab_size), segment ids in [0, type_vocab_size); else
  the call fails with an InvalidArgumentError naming the input."""
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


def serving_module(model: Union[ElectraPretrainer, TransformerEncoder],
                   text_encoder: Optional[text_graph.TextEncoder] = None,
                   max_seq_length: Optional[int] = None) -> tf.Module:
  """A tf.Module with the `serve` function, the `serve_text` function when
  there is a text_encoder (texts cut to max_seq_length pieces, default
  max_position_embeddings), and what they read."""
  if isinstance(model, ElectraPretrainer):
    encoder, head = model.discriminator, model.discriminator_predictions
  else:
    encoder, head = model, None

  def outputs(input_ids, input_mask, segment_ids) -> Dict[str, tf.Tensor]:
    encoded = encoder(input_ids, input_mask, segment_ids, training=False)
    sequence_output = tf.cast(encoded["sequence_output"], tf.float32)
    result = {"sequence_output": sequence_output,
              "pooled_output": sequence_output[:, 0]}
    if head is not None:
      logits = head(encoded["sequence_output"])
      result.update(discriminator_logits=logits,
                    discriminator_probs=tf.sigmoid(logits))
    return result

  @tf.function(input_signature=input_signature(), autograph=False)
  def serve(input_ids, input_mask, segment_ids):
    return outputs(*check_serving_inputs(input_ids, input_mask, segment_ids,
                                         encoder.config))

  serve_text = None
  if text_encoder is not None:
    max_length = max_seq_length or encoder.config.max_position_embeddings

    @tf.function(input_signature=[text_graph.text_spec("text")],
               autograph=False)
    def serve_text(text):
      inputs = text_encoder.pack(text_graph.check_utf8(text, "text"), None,
                               max_length)
      result = outputs(inputs["input_ids"], inputs["input_mask"],
                       inputs["segment_ids"])
      result.update(tokens=inputs["tokens"], input_mask=inputs["input_mask"])
      return result

  return variables_module(serve, list(encoder.variables) + (
      list(head.variables) if head is not None else []), serve_text, text_encoder)


def variables_module(serve: tf.types.experimental.GenericFunction,
                     variables: List[tf.Variable],
                     serve_text: Optional[tf.types.experimental.GenericFunction] = None,
                     text_encoder: Optional[text_graph.TextEncoder] = None
                     ) -> tf.Module:
  """A tf.Module holding `serve` (and `serve_text` with the text_encoder it
  reads) and only the variables they read.

  Only the variables are tracked (not the Keras layers), so the SavedModel
  holds plain functions and variables that load anywhere.
  """
  module = tf.Module()
  module.model_variables = variables
  module.serve = serve
  if serve_text is not None:
    module.serve_text = serve_text
    module.text_encoder = text_encoder
  return module


def save_serving_module(module: tf.Module, export_dir: str,
                        overwrite: bool = False) -> str:
  """Saves `module.serve` as `serving_default` (and `module.serve_text`, if
  any, as `text`) through a temporary directory.

  The SavedModel holds the signatures and what they read (the variables, the
  text encoder's table and vocab asset), not the tf.functions as attributes:
  tf.saved_model.save would trace each of those again (its tracing context
  differs from the caller's) and store a second copy of every graph.
  An existing non-empty `export_dir` is an error unless `overwrite`; it is
  replaced only by a complete export.
  """
  signatures = {"serving_default": module.serve.get_concrete_function()}
  if hasattr(module, "serve_text"):
    signatures[text_graph.TEXT_SIGNATURE] = module.serve_text.get_concrete_function()
  saved = tf.Module()
  saved.model_variables = module.model_variables
  if hasattr(module, "text_encoder"):
    saved.text_encoder = module.text_encoder
  with checkpoints.atomic_output_dir(export_dir, "--export_dir",
                                     overwrite=overwrite) as tmp_dir:
    tf.saved_model.save(saved, tmp_dir, signatures=signatures)
    stop_points.reached("export_written")
  return export_dir


def export_saved_model(model: Union[ElectraPretrainer, TransformerEncoder],
                       export_dir: str, overwrite: bool = False,
                       tokenizer: Optional[tokenization.FullTokenizer] = None,
                       max_seq_length: Optional[int] = None) -> str:
  """Writes the SavedModel of `model` (an ElectraPretrainer: its discriminator
  and head; or a TransformerEncoder) to `export_dir`, with the `text`
  signature when given its `tokenizer` (texts cut to max_seq_length pieces,
  default max_position_embeddings); returns the dir.  A non-empty export_dir
  is an error unless `overwrite`; it is replaced only by a complete export."""
  with text_graph.text_encoder(tokenizer) as text_encoder:
    module = serving_module(model, text_encoder, max_seq_length)
    return save_serving_module(module, export_dir, overwrite)
