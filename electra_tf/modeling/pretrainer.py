"""ELECTRA pre-training model: generator, discriminator, sampling and losses.

The official `run_pretraining.PretrainingModel` as a tf_keras Model.  Shapes:
B batch, S max_seq_length, N max_predictions_per_seq, V vocab, H discriminator
hidden size, E embedding size.

  batch (masked by the data pipeline):
    input_ids [B, S] int32 (with [MASK]s), input_mask [B, S] int32,
    segment_ids [B, S] int32, masked_lm_positions [B, N] int32,
    masked_lm_ids [B, N] int32, masked_lm_weights [B, N] float32
  generator (scope `generator`, or the discriminator itself when tied)
    -> `generator_predictions` head at the masked positions: Dense(E, gelu),
       LayerNorm, logits against the word-embedding table + output_bias
       -> mlm_logits [B, N, V]
  sample of softmax(mlm_logits / temperature) (no gradient) -> sampled_ids
  corrupted input: the original ids with the samples scattered at the masked
    positions; discriminator label 1 only where the token changed
  discriminator (scope `electra`) -> `discriminator_predictions` head
    Dense(H, gelu), Dense(1) -> disc_logits [B, S]
  total_loss = gen_weight * MLM loss + disc_weight * discriminator loss

`electra_objective=False` trains a plain masked LM (BERT with dynamic masking,
no next-sentence prediction): the `electra` encoder with the MLM head only.
Logits, softmaxes and losses are float32 whatever the layers' dtype policy.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional, Tuple

import tensorflow as tf
import tf_keras as keras

from electra_tf.config import ModelConfig
from electra_tf.modeling import encoder as encoder_lib
from electra_tf.modeling.sampling import sample_from_softmax

# ----------------------------------------------------------- pure functions


def gather_positions(sequence: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
  """[B, S, ...] values at [B, N] positions -> [B, N, ...]."""
  return tf.gather(sequence, positions, batch_dims=1)


def scatter_update(sequence: tf.Tensor, updates: tf.Tensor, positions: tf.Tensor
                   ) -> Tuple[tf.Tensor, tf.Tensor]:
  """Writes int32 `updates` [B, N] into `sequence` [B, S] at `positions` [B, N].

  Returns (updated sequence [B, S], int32 mask [B, S] of the updated slots).
  As official `pretrain_helpers.scatter_update`: updates aimed at position 0
  are ignored (unused slots point there), and when a position occurs more
  than once its value is the floor of the mean of its updates.
  """
  seq_length = tf.shape(sequence)[1]
  one_hot = tf.one_hot(positions, seq_length, dtype=tf.int32)  # [B, N, S]
  totals = tf.reduce_sum(one_hot * updates[:, :, tf.newaxis], axis=1)
  counts = tf.reduce_sum(one_hot, axis=1)
  not_first = tf.concat([tf.zeros_like(counts[:, :1]), tf.ones_like(counts[:, 1:])],
                        axis=1)
  counts *= not_first
  mask = tf.minimum(counts, 1)
  values = tf.math.floordiv(totals, tf.maximum(counts, 1))
  return (1 - mask) * sequence + mask * values, mask


def corrupt_inputs(input_ids: tf.Tensor, masked_lm_positions: tf.Tensor,
                   masked_lm_ids: tf.Tensor, sampled_ids: tf.Tensor
                   ) -> Tuple[tf.Tensor, tf.Tensor]:
  """The discriminator's input and labels (official `_get_fake_data`).

  input_ids [B, S] (masked), masked_lm_positions/ids [B, N], sampled_ids
  [B, N] -> (corrupted ids [B, S], labels [B, S] int32).  The masked
  positions are first restored to their original ids, then the samples are
  written there; a label is 1 only where the token differs from the
  original, so a sample equal to the original token counts as real.
  """
  original_ids, _ = scatter_update(input_ids, masked_lm_ids, masked_lm_positions)
  corrupted_ids, updated = scatter_update(original_ids, sampled_ids,
                                          masked_lm_positions)
  labels = updated * tf.cast(tf.not_equal(corrupted_ids, original_ids), tf.int32)
  return corrupted_ids, labels


def masked_lm_loss(logits: tf.Tensor, masked_lm_ids: tf.Tensor,
                   masked_lm_weights: tf.Tensor,
                   weight_sum: Optional[tf.Tensor] = None
                   ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """MLM cross-entropy: logits [B, N, V] float32.

  Returns (loss: sum(w * ce) / (W + 1e-6), per-slot ce [B, N] (not
  weighted), argmax predictions [B, N] int32).  W is sum(w), or `weight_sum`
  when given (e.g. the global sum over all replicas).
  """
  log_probs = tf.nn.log_softmax(logits)
  per_slot = -tf.reduce_sum(
      log_probs * tf.one_hot(masked_lm_ids, tf.shape(logits)[-1]), axis=-1)
  weights = tf.cast(masked_lm_weights, tf.float32)
  if weight_sum is None:
    weight_sum = tf.reduce_sum(weights)
  loss = tf.reduce_sum(weights * per_slot) / (weight_sum + 1e-6)
  preds = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
  return loss, per_slot, preds


def discriminator_loss(logits: tf.Tensor, labels: tf.Tensor, input_mask: tf.Tensor,
                       token_sum: Optional[tf.Tensor] = None
                       ) -> Dict[str, tf.Tensor]:
  """Sigmoid cross-entropy of logits [B, S] against labels [B, S].

  Averaged over input_mask: `loss` over the whole batch (divided by
  sum(input_mask), or by `token_sum` when given), `per_example_loss` [B]
  per sequence; also `probs` [B, S] and `preds` [B, S] int32 (logit > 0).
  """
  weights = tf.cast(input_mask, tf.float32)
  losses = tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.float32), logits=logits) * weights
  if token_sum is None:
    token_sum = tf.reduce_sum(weights)
  return {
      "loss": tf.reduce_sum(losses) / (1e-6 + token_sum),
      "per_example_loss": (tf.reduce_sum(losses, axis=-1) /
                           (1e-6 + tf.reduce_sum(weights, axis=-1))),
      "probs": tf.sigmoid(logits),
      # Official round((sign(logits) + 1) / 2) rounds half to even: logit > 0.
      "preds": tf.cast(logits > 0, tf.int32),
  }


# -------------------------------------------------------------------- heads


class MaskedLMHead(keras.layers.Layer):
  """The `generator_predictions` head: MLM logits at the masked positions.

  sequence_output [B, S, Hg], positions [B, N] -> float32 logits [B, N, V]:
  Dense(E, act) -> LayerNorm -> x @ word_embeddings^T + output_bias, with the
  word-embedding table [V, E] of `embeddings` (tied input/output embeddings).
  """

  def __init__(self, embeddings: encoder_lib.EmbeddingLayer, hidden_act: str,
               initializer_range: float, name: str = "generator_predictions",
               **kwargs: Any):
    super().__init__(name=name, **kwargs)
    self.embeddings = embeddings
    self.dense = keras.layers.Dense(
        embeddings.embedding_size, activation=encoder_lib.get_activation(hidden_act),
        kernel_initializer=encoder_lib.truncated_normal(initializer_range),
        name="dense")
    self.layer_norm = encoder_lib.layer_norm()

  def build(self, input_shape: Any) -> None:
    # float32 even under a mixed-precision policy: it is added to float32 logits.
    self.output_bias = self.add_weight(
        "output_bias", shape=[self.embeddings.vocab_size], initializer="zeros",
        experimental_autocast=False)
    super().build(input_shape)

  def call(self, sequence_output: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
    hidden = self.layer_norm(self.dense(gather_positions(sequence_output, positions)))
    table = tf.cast(self.embeddings.word_embeddings, hidden.dtype)
    logits = tf.matmul(hidden, table, transpose_b=True)
    return tf.cast(logits, tf.float32) + self.output_bias


class DiscriminatorHead(keras.layers.Layer):
  """The `discriminator_predictions` head: [B, S, H] -> float32 logits [B, S].

  Dense(H, act) with truncated-normal kernel, then `dense_1` Dense(1) with the
  Glorot-uniform default of the official tf.layers.dense call.
  """

  def __init__(self, hidden_size: int, hidden_act: str, initializer_range: float,
               name: str = "discriminator_predictions", **kwargs: Any):
    super().__init__(name=name, **kwargs)
    self.dense = keras.layers.Dense(
        hidden_size, activation=encoder_lib.get_activation(hidden_act),
        kernel_initializer=encoder_lib.truncated_normal(initializer_range),
        name="dense")
    self.dense_1 = keras.layers.Dense(1, name="dense_1")

  def call(self, sequence_output: tf.Tensor) -> tf.Tensor:
    logits = self.dense_1(self.dense(sequence_output))
    return tf.squeeze(tf.cast(logits, tf.float32), -1)


# --------------------------------------------------------------- the model

BATCH_KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
              "masked_lm_ids", "masked_lm_weights")


@dataclasses.dataclass(frozen=True)
class Objective:
  """The pre-training objective's settings (official hparams of these names)."""
  electra_objective: bool = True  # False: a plain masked LM
  gen_weight: float = 1.0
  disc_weight: float = 50.0
  temperature: float = 1.0  # of the generator's softmax when sampling
  disallow_correct: bool = False  # never sample the original token


class ElectraPretrainer(keras.Model):
  """Generator + discriminator trained with replaced-token detection.

  Args:
    discriminator_config: the discriminator `electra` (with electra_objective
      false: the masked LM's encoder).
    embedding_size: width of the shared embedding tables.
    generator_config: a separate generator `generator` (official
      untied_generator); None: the discriminator is also the generator (a
      tied generator, or the masked LM).
    objective: the losses and the sampling (`Objective`).
    uniform_generator: no generator; replacements drawn uniformly.
    untied_generator_embeddings: the separate generator gets its own
      embedding tables (as wide as its hidden size, an official quirk)
      instead of sharing the discriminator's.

  Sub-layers (None where the configuration has none), named by scope:
    discriminator              TransformerEncoder `electra`
    generator                  TransformerEncoder `generator`, or the
                               discriminator itself, or None (uniform)
    generator_predictions      MaskedLMHead (None for uniform_generator)
    generator_predictions      MaskedLMHead (None for uniform_generator)
    discriminator_predictions  DiscriminatorHead (None without electra_objective)
  All variables exist, under their official names, once constructed.

  `model(batch, training=..., sample_seed=None)` takes the masked batch dict
  (BATCH_KEYS) and returns a dict of tensors:
    total_loss, mlm_loss                                scalars float32
    mlm_logits [B, N, V] float32, mlm_per_example_loss [B, N] float32 (not
    weighted), mlm_preds [B, N] int32
  and with electra_objective:
    disc_loss scalar float32, sampled_ids [B, N] int32, corrupted_ids [B, S]
    int32 (the discriminator's input), disc_logits [B, S],
    disc_probs [B, S] float32, disc_preds [B, S] int32, disc_labels [B, S]
    int32, disc_per_example_loss [B] float32
  `sample_seed` (int [2], or int [B, 2] for one seed per example) makes the
  sampling noise stateless and reproducible (`sampling.hashed_uniform`).  `loss_denominators` (float32 [2]:
  the sum of masked_lm_weights and the sum of input_mask, e.g. over the
  global batch of all replicas) replaces this batch's sums as the two losses'
  denominators.
  """

  def __init__(self, discriminator_config: ModelConfig, embedding_size: int,
               generator_config: Optional[ModelConfig] = None,
               objective: Objective = Objective(), uniform_generator: bool = False,
               untied_generator_embeddings: bool = False,
               name: str = "electra_pretrainer", **kwargs: Any):
    super().__init__(name=name, **kwargs)
    self.objective = objective
    disc_config = discriminator_config
    self.vocab_size = disc_config.vocab_size
    # The discriminator is built first so that the shared embedding block
    # gets its official scope `electra/embeddings`.
    self.discriminator = encoder_lib.TransformerEncoder(
        disc_config, embedding_size=embedding_size, name="electra")
    if uniform_generator:
      self.generator = None
    elif generator_config is None:
      self.generator = self.discriminator
    elif untied_generator_embeddings:
      # Official quirk: untied generator embeddings are as wide as the
      # generator's hidden size, whatever embedding_size says.
      self.generator = encoder_lib.TransformerEncoder(generator_config, name="generator")
    else:
      self.generator = encoder_lib.TransformerEncoder(
          generator_config, embeddings=self.discriminator.embeddings, name="generator")
    self.generator_predictions = None
    if self.generator is not None:
      self.generator_predictions = MaskedLMHead(
          self.generator.embeddings, disc_config.hidden_act,
          disc_config.initializer_range)
      self.generator_predictions(
          tf.zeros([1, 1, self.generator.config.hidden_size]),
          tf.zeros([1, 1], tf.int32))
    self.discriminator_predictions = None
    if objective.electra_objective:
      self.discriminator_predictions = DiscriminatorHead(
          disc_config.hidden_size, disc_config.hidden_act,
          disc_config.initializer_range)
      self.discriminator_predictions(tf.zeros([1, 1, disc_config.hidden_size]))
    self.built = True

  def mlm_logits(self, batch: Mapping[str, tf.Tensor],
                 training: Optional[bool] = None) -> tf.Tensor:
    """Generator logits [B, N, V] float32 at the masked positions."""
    positions = batch["masked_lm_positions"]
    if self.generator is None:
      # uniform_generator: all-zero logits, as official.
      return tf.zeros(tf.concat([tf.shape(positions), [self.vocab_size]], 0))
    outputs = self.generator(batch["input_ids"], batch["input_mask"],
                             batch["segment_ids"], training=training)
    return self.generator_predictions(outputs["sequence_output"], positions)

  def discriminator_logits(self, input_ids: tf.Tensor, input_mask: tf.Tensor,
                           segment_ids: tf.Tensor,
                           training: Optional[bool] = None) -> tf.Tensor:
    """Replaced-token logits [B, S] float32 for the given (corrupted) ids."""
    outputs = self.discriminator(input_ids, input_mask, segment_ids,
                                 training=training)
    return self.discriminator_predictions(outputs["sequence_output"])

  def call(self, batch: Mapping[str, tf.Tensor], training: Optional[bool] = None,
           sample_seed: Optional[tf.Tensor] = None,
           loss_denominators: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
    objective = self.objective
    weight_sum = token_sum = None
    if loss_denominators is not None:
      weight_sum, token_sum = tf.unstack(tf.cast(loss_denominators, tf.float32))
    logits = self.mlm_logits(batch, training=training)
    mlm_loss, mlm_per_example_loss, mlm_preds = masked_lm_loss(
        logits, batch["masked_lm_ids"], batch["masked_lm_weights"], weight_sum)
    outputs = {"mlm_logits": logits, "mlm_loss": mlm_loss,
               "mlm_per_example_loss": mlm_per_example_loss, "mlm_preds": mlm_preds,
               "total_loss": objective.gen_weight * mlm_loss}
    if not objective.electra_objective:
      return outputs

    disallow = (tf.one_hot(batch["masked_lm_ids"], self.vocab_size)
                if objective.disallow_correct else None)
    sampled_ids = sample_from_softmax(
        tf.stop_gradient(logits) / objective.temperature, seed=sample_seed,
        disallow=disallow)
    corrupted_ids, labels = corrupt_inputs(
        batch["input_ids"], batch["masked_lm_positions"], batch["masked_lm_ids"],
        sampled_ids)
    disc_logits = self.discriminator_logits(
        corrupted_ids, batch["input_mask"], batch["segment_ids"], training=training)
    disc = discriminator_loss(disc_logits, labels, batch["input_mask"], token_sum)
    outputs.update({
        "sampled_ids": sampled_ids, "corrupted_ids": corrupted_ids,
        "disc_logits": disc_logits,
        "disc_probs": disc["probs"], "disc_preds": disc["preds"],
        "disc_labels": labels, "disc_loss": disc["loss"],
        "disc_per_example_loss": disc["per_example_loss"],
        "total_loss": outputs["total_loss"] + objective.disc_weight * disc["loss"],
    })
    return outputs
