"""ELECTRA pre-training model: generator, discriminator, sampling and losses.

The official `run_pretraining.PretrainingModel` as a tf_keras Model, given
its networks (`pretrain.model.build_model`) and an objective
(`modeling/objectives.py`).  Shapes: B batch, S max_seq_length, N
max_predictions_per_seq, V vocab, H hidden, E embedding size.  Logits,
softmaxes and losses are float32 whatever the layers' dtype policy.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, NamedTuple, Optional, Tuple

import tensorflow as tf
import tf_keras as keras

from electra_tf.modeling import encoder as encoder_lib
from electra_tf.modeling.sampling import sample_from_softmax  # noqa: F401  (re-exported)
from electra_tf.tokenization import SpecialIds, candidates_mask

# ----------------------------------------------------------- pure functions


def gather_positions(sequence: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
  """[B, S, ...] values at [B, N] positions -> [B, N, ...]."""
  return tf.gather(sequence, positions, batch_dims=1)


def scatter_update(sequence: tf.Tensor, updates: tf.Tensor, positions: tf.Tensor
                   ) -> Tuple[tf.Tensor, tf.Tensor]:
  """Writes int32 `updates` [B, N] into `sequence` [B, S] at `positions` [B, N].

  Returns (updated sequence [B, S], int32 mask [B, S] of the updated slots).
  As official `scatter_update`: updates aimed at position 0 are ignored, and
  a repeated position gets the floor of the mean of its updates."""
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


def unmask(input_ids: tf.Tensor, masked_lm_positions: tf.Tensor,
           masked_lm_ids: tf.Tensor) -> tf.Tensor:
  """The original ids [B, S] of a masked batch (official `unmask`): the
  masked_lm_ids [B, N] written back at masked_lm_positions [B, N]."""
  return scatter_update(input_ids, masked_lm_ids, masked_lm_positions)[0]


def corrupt_inputs(input_ids: tf.Tensor, masked_lm_positions: tf.Tensor,
                   masked_lm_ids: tf.Tensor, sampled_ids: tf.Tensor,
                   electric: bool = False) -> Tuple[tf.Tensor, tf.Tensor]:
  """The discriminator's input and labels (official `_get_fake_data`).

  input_ids [B, S] (masked), masked_lm_positions/ids [B, N], sampled_ids
  [B, N] -> (corrupted ids [B, S], labels [B, S] int32): label 1 where the
  written sample differs from the original token; with `electric` at every
  written position."""
  original_ids = unmask(input_ids, masked_lm_positions, masked_lm_ids)
  corrupted_ids, updated = scatter_update(original_ids, sampled_ids,
                                          masked_lm_positions)
  if electric:
    return corrupted_ids, updated
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
  # The official -sum(one_hot * log_softmax) as one fused op: the same value
  # (to float rounding) without two [B, N, V] temporaries and their gradients.
  per_slot = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(masked_lm_ids, tf.int32), logits=logits)
  weights = tf.cast(masked_lm_weights, tf.float32)
  if weight_sum is None:
    weight_sum = tf.reduce_sum(weights)
  loss = tf.reduce_sum(weights * per_slot) / (weight_sum + 1e-6)
  preds = tf.argmax(logits, axis=-1, output_type=tf.int32)
  return loss, per_slot, preds


def electric_logits(disc_logits: tf.Tensor, cloze_logits: tf.Tensor,
                    input_ids: tf.Tensor, mask_prob: float) -> tf.Tensor:
  """Electric's noise-contrastive logits [B, S] (official electric_objective):
  disc_logits [B, S] + log q(input_ids) + log(mask_prob / (1 - mask_prob)),
  q = softmax(cloze_logits [B, S, V]) without gradient (official stop_gradient)."""
  log_q = tf.gather(tf.nn.log_softmax(cloze_logits), input_ids[..., tf.newaxis],
                    batch_dims=2)[..., 0]
  return (disc_logits + tf.stop_gradient(log_q)
          + tf.math.log(tf.constant(mask_prob / (1 - mask_prob), tf.float32)))


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


@keras.utils.register_keras_serializable(package="electra_tf")
class MaskedLMHead(keras.layers.Layer):
  """The `generator_predictions` head: MLM logits at the masked positions.

  sequence_output [B, S, Hg], positions [B, N] -> float32 logits [B, N, V]
  (Dense(E, act), LayerNorm, tied word embeddings [V, E] + output_bias);
  without positions, logits [B, S, V] at every position (Electric's cloze)."""

  def __init__(self, embeddings: encoder_lib.EmbeddingLayer, hidden_act: str,
               initializer_range: float, name: str = "generator_predictions",
               **kwargs: Any):
    super().__init__(name=name, **kwargs)
    self.embeddings = embeddings
    self.hidden_act = hidden_act
    self.initializer_range = initializer_range
    self.dense = keras.layers.Dense(
        embeddings.embedding_size, activation=encoder_lib.get_activation(hidden_act),
        kernel_initializer=encoder_lib.truncated_normal(initializer_range),
        name="dense")
    self.layer_norm = encoder_lib.LayerNorm()

  def build(self, input_shape: Any) -> None:
    # float32 even under a mixed-precision policy: it is added to float32 logits.
    self.output_bias = self.add_weight(
        "output_bias", shape=[self.embeddings.vocab_size], initializer="zeros",
        experimental_autocast=False)
    super().build(input_shape)

  def get_config(self) -> Dict[str, Any]:
    return {**super().get_config(), "embeddings": self.embeddings.get_config(),
            "hidden_act": self.hidden_act, "initializer_range": self.initializer_range}

  @classmethod
  def from_config(cls, config: Dict[str, Any]) -> "MaskedLMHead":
    """The rebuilt head owns its embedding layer, built here (its variables
    named as a standalone layer's), not shared with an encoder."""
    config = dict(config)
    embeddings = encoder_lib.EmbeddingLayer.from_config(config.pop("embeddings"))
    ids = tf.zeros([1, 1], tf.int32)
    embeddings(ids, ids)
    return cls(embeddings, **config)

  def call(self, sequence_output: tf.Tensor,
           positions: Optional[tf.Tensor] = None) -> tf.Tensor:
    if positions is not None:
      sequence_output = gather_positions(sequence_output, positions)
    hidden = self.layer_norm(self.dense(sequence_output))  # [B, N, E]
    table = tf.cast(self.embeddings.word_embeddings, hidden.dtype)
    # One [B*N, E] x [E, V] product: a batched matmul against the shared
    # table would make its gradient a [B, E, V] tensor summed over B.
    rows = tf.reshape(hidden, [-1, tf.shape(hidden)[-1]])
    logits = tf.matmul(rows, table, transpose_b=True)
    logits = tf.reshape(
        logits, tf.concat([tf.shape(hidden)[:-1], [self.embeddings.vocab_size]], 0))
    return tf.cast(logits, tf.float32) + self.output_bias


@keras.utils.register_keras_serializable(package="electra_tf")
class DiscriminatorHead(keras.layers.Layer):
  """The `discriminator_predictions` head: [B, S, H] -> float32 logits [B, S]
  (Dense(H, act), then `dense_1` Dense(1), Glorot-uniform as official)."""

  def __init__(self, hidden_size: int, hidden_act: str, initializer_range: float,
               name: str = "discriminator_predictions", **kwargs: Any):
    super().__init__(name=name, **kwargs)
    self.hidden_size = hidden_size
    self.hidden_act = hidden_act
    self.initializer_range = initializer_range
    self.dense = keras.layers.Dense(
        hidden_size, activation=encoder_lib.get_activation(hidden_act),
        kernel_initializer=encoder_lib.truncated_normal(initializer_range),
        name="dense")
    self.dense_1 = keras.layers.Dense(1, name="dense_1")

  def get_config(self) -> Dict[str, Any]:
    return {**super().get_config(), "hidden_size": self.hidden_size,
            "hidden_act": self.hidden_act, "initializer_range": self.initializer_range}

  def call(self, sequence_output: tf.Tensor) -> tf.Tensor:
    logits = self.dense_1(self.dense(sequence_output))
    return tf.squeeze(tf.cast(logits, tf.float32), -1)


# --------------------------------------------------------------- the model


BATCH_KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
              "masked_lm_ids", "masked_lm_weights")


class Generated(NamedTuple):
  """The generator's output on a masked batch."""
  mlm_logits: tf.Tensor  # [B, N, V] float32 at the masked positions
  cloze_logits: Optional[tf.Tensor] = None  # [B, S, V] float32 (two towers)
  original_ids: Optional[tf.Tensor] = None  # [B, S] int32 (two towers)


class ElectraPretrainer(keras.Model):
  """The pre-training networks, their heads and an objective's losses.

  Args:
    discriminator: the encoder `electra` (the masked LM's, for an objective
      without a discriminator).
    objective: an `objectives.Objective`.
    generator: the one-tower generator encoder, the discriminator itself
      (tied generator, masked LM), or None (uniform or two-tower).
    generator_towers: (ltr, rtl) causal encoders of the two-tower generator.
    special_ids: the vocab's special ids, for the two-tower cloze loss.

  `model(batch, training, sample_seed=None, loss_denominators=None)`: the
  masked batch dict (BATCH_KEYS) -> float32 total_loss, mlm_loss (two
  towers: cloze_loss), mlm_logits [B, N, V], mlm_per_example_loss [B, N],
  mlm_preds [B, N] int32, and with a discriminator disc_loss, sampled_ids
  [B, N], corrupted_ids, disc_logits, disc_probs, disc_preds, disc_labels
  [B, S], disc_per_example_loss [B].  `sample_seed`: int [2] or [B, 2];
  `loss_denominators` replaces this batch's sums (e.g. the global batch's)."""

  def __init__(self, discriminator: encoder_lib.TransformerEncoder, objective: Any,
               generator: Optional[encoder_lib.TransformerEncoder] = None,
               generator_towers: Optional[Tuple[encoder_lib.TransformerEncoder,
                                                encoder_lib.TransformerEncoder]] = None,
               special_ids: Optional[SpecialIds] = None,
               name: str = "electra_pretrainer", **kwargs: Any):
    super().__init__(name=name, **kwargs)
    if objective.two_tower != (generator_towers is not None) or (
        generator_towers is not None and generator is not None):
      raise ValueError(f"ElectraPretrainer: the {objective.name} objective needs "
                       + ("generator_towers and no generator" if objective.two_tower
                          else "no generator_towers"))
    self.objective = objective
    self.special_ids = special_ids
    disc_config = discriminator.config
    self.vocab_size = disc_config.vocab_size
    # Attribute order (that of Keras' variable lists) and build order (that
    # of the initial values' draws) are those of the earlier self-built model.
    self.discriminator = discriminator
    self.generator = self.generator_ltr = self.generator_rtl = None
    self.generator_predictions = self.cloze_predictions = None
    head_args = (disc_config.hidden_act, disc_config.initializer_range)
    if generator_towers is not None:
      self.generator_ltr, self.generator_rtl = generator_towers
      self.cloze_predictions = MaskedLMHead(
          self.generator_ltr.embeddings, *head_args, name="cloze_predictions")
      self.cloze_predictions(tf.zeros([1, 1, 2 * self.generator_ltr.config.hidden_size]))
    if generator is not None:
      self.generator = generator
      self.generator_predictions = MaskedLMHead(self.generator.embeddings, *head_args)
      self.generator_predictions(
          tf.zeros([1, 1, self.generator.config.hidden_size]),
          tf.zeros([1, 1], tf.int32))
    self.discriminator_predictions = None
    if objective.has_discriminator:
      self.discriminator_predictions = DiscriminatorHead(
          disc_config.hidden_size, *head_args)
      self.discriminator_predictions(tf.zeros([1, 1, disc_config.hidden_size]))
    self.built = True

  def cloze_logits(self, input_ids: tf.Tensor, input_mask: tf.Tensor,
                   segment_ids: tf.Tensor, training: Optional[bool] = None
                   ) -> tf.Tensor:
    """Two-tower cloze logits [B, S, V] float32 of the original ids [B, S]:
    position t reads ltr's output at t - 1 and rtl's at t + 1 (official roll)."""
    ltr = self.generator_ltr(input_ids, input_mask, segment_ids, training=training)
    rtl = self.generator_rtl(input_ids, input_mask, segment_ids, training=training)
    reprs = tf.concat([tf.roll(ltr["sequence_output"], 1, axis=1),
                       tf.roll(rtl["sequence_output"], -1, axis=1)], axis=-1)
    return self.cloze_predictions(reprs)

  def cloze_weights(self, original_ids: tf.Tensor, input_mask: tf.Tensor) -> tf.Tensor:
    """float32 [B, S]: 1 where the cloze loss counts a position (official
    get_candidates_mask: real tokens other than [CLS], [SEP], [MASK])."""
    if self.special_ids is None:
      raise ValueError("ElectraPretrainer: the two-tower generator's cloze loss "
                       "needs special_ids (the vocab's [CLS], [SEP], [MASK] ids)")
    return tf.cast(candidates_mask(original_ids, input_mask, self.special_ids),
                   tf.float32)

  def denominators(self, batch: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The losses' named denominators on `batch` (the objective's): summed
    over replicas, they make `loss_denominators`."""
    return self.objective.denominators(self, batch)

  def loss_weight_sums(self, batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """`denominators` stacked in the objective's `denominator_names` order:
    float32 [2] for ELECTRA (masked_lm_weight, input_mask), [3] with a
    two-tower generator (+ cloze_weight)."""
    sums = self.denominators(batch)
    return tf.stack([sums[name] for name in self.objective.denominator_names])

  def generate(self, batch: Mapping[str, tf.Tensor], training: Optional[bool] = None
               ) -> Generated:
    """The generator's logits on `batch` (`Generated`)."""
    positions = batch["masked_lm_positions"]
    if self.cloze_predictions is not None:
      original_ids = unmask(batch["input_ids"], positions, batch["masked_lm_ids"])
      cloze = self.cloze_logits(original_ids, batch["input_mask"],
                                batch["segment_ids"], training=training)
      return Generated(gather_positions(cloze, positions), cloze, original_ids)
    if self.generator is None:
      # uniform_generator: all-zero logits, as official.
      return Generated(tf.zeros(tf.concat([tf.shape(positions), [self.vocab_size]], 0)))
    outputs = self.generator(batch["input_ids"], batch["input_mask"],
                             batch["segment_ids"], training=training)
    return Generated(self.generator_predictions(outputs["sequence_output"], positions))

  def mlm_logits(self, batch: Mapping[str, tf.Tensor],
                 training: Optional[bool] = None) -> tf.Tensor:
    """Generator logits [B, N, V] float32 at the masked positions."""
    return self.generate(batch, training).mlm_logits

  def discriminator_logits(self, input_ids: tf.Tensor, input_mask: tf.Tensor,
                           segment_ids: tf.Tensor,
                           training: Optional[bool] = None) -> tf.Tensor:
    """Replaced-token logits [B, S] float32 for the given (corrupted) ids
    (the head's scores; Electric's noise terms are the objective's)."""
    outputs = self.discriminator(input_ids, input_mask, segment_ids,
                                 training=training)
    return self.discriminator_predictions(outputs["sequence_output"])

  def call(self, batch: Mapping[str, tf.Tensor], training: Optional[bool] = None,
           sample_seed: Optional[tf.Tensor] = None,
           loss_denominators: Any = None) -> Dict[str, tf.Tensor]:
    return self.objective(self, batch, training=training, sample_seed=sample_seed,
                          denominators=self.objective.named(loss_denominators))
