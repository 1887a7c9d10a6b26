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

Electric (Clark et al., EMNLP 2020; official `electric_objective`,
`two_tower_generator`): the generator is a two-tower cloze model that reads
the ORIGINAL ids (no [MASK]s):
  towers `generator_ltr` / `generator_rtl` (causal encoders of the generator's
    size) -> their outputs shifted one position right / left and
    concatenated [B, S, 2 Hg], so position t sees every token but its own
  `cloze_predictions` head (as generator_predictions) at every position
    -> cloze_logits [B, S, V]; mlm_logits are those at the masked positions
  cloze loss: cross-entropy of the original token at every position that
    masking could pick (not [CLS] / [SEP] / [MASK] / padding); it replaces the
    MLM loss in total_loss
With electric_objective the discriminator does noise-contrastive estimation
against the generator: its logits get log q(token | context) (the cloze
model's log-probability of the token it sees, without gradient) plus
log(mask_prob / (1 - mask_prob)), and every sampled position is labelled 1,
even where the sample equals the original token.  two_tower_generator with
the ELECTRA objective keeps ELECTRA's discriminator.

Logits, softmaxes and losses are float32 whatever the layers' dtype policy.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional, Tuple

import tensorflow as tf
import tf_keras as keras

from electra_tf.config import DISC_WEIGHT, MASK_PROB, ModelConfig
from electra_tf.modeling import encoder as encoder_lib
from electra_tf.modeling.sampling import sample_from_softmax
from electra_tf.tokenization import SpecialIds, candidates_mask

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
  [B, N] -> (corrupted ids [B, S], labels [B, S] int32).  The masked
  positions are first restored to their original ids, then the samples are
  written there; a label is 1 only where the token differs from the
  original, so a sample equal to the original token counts as real.  With
  `electric` (official electric_objective) every written position is 1: it
  holds a draw from the noise distribution, whatever token was drawn.
  """
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
  """Electric's noise-contrastive logits [B, S] (official
  `_get_discriminator_output` with electric_objective).

  disc_logits [B, S] (the head's scores of the discriminator's input),
  cloze_logits [B, S, V] (the generator's, from the original ids), input_ids
  [B, S] (the discriminator's input) -> disc_logits + log q(input_ids) +
  log(mask_prob / (1 - mask_prob)), q = softmax(cloze_logits) with no
  gradient through it (official stop_gradient).
  """
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


class MaskedLMHead(keras.layers.Layer):
  """The `generator_predictions` head: MLM logits at the masked positions.

  sequence_output [B, S, Hg], positions [B, N] -> float32 logits [B, N, V]:
  Dense(E, act) -> LayerNorm -> x @ word_embeddings^T + output_bias, with the
  word-embedding table [V, E] of `embeddings` (tied input/output embeddings).
  Without positions, logits [B, S, V] at every position (Electric's
  `cloze_predictions`, the same official get_token_logits).
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
    self.layer_norm = encoder_lib.LayerNorm()

  def build(self, input_shape: Any) -> None:
    # float32 even under a mixed-precision policy: it is added to float32 logits.
    self.output_bias = self.add_weight(
        "output_bias", shape=[self.embeddings.vocab_size], initializer="zeros",
        experimental_autocast=False)
    super().build(input_shape)

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
  electric_objective: bool = False  # Electric's noise-contrastive discriminator
  gen_weight: float = 1.0
  disc_weight: float = DISC_WEIGHT
  temperature: float = 1.0  # of the generator's softmax when sampling
  disallow_correct: bool = False  # never sample the original token
  mask_prob: float = MASK_PROB  # Electric's prior odds of a sampled token

  @property
  def has_discriminator(self) -> bool:
    """As official: either objective trains a discriminator."""
    return self.electra_objective or self.electric_objective


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
    two_tower_generator: the separate generator is Electric's two-tower cloze
      model (towers of generator_config's size; module docstring).
    special_ids: the vocab's special ids; the cloze loss (two-tower
      generator) leaves out [CLS], [SEP] and [MASK] positions, as official.
      Needed only to compute that loss.

  Sub-layers (None where the configuration has none), each under its official
  scope: discriminator (`electra`), generator (`generator`, the discriminator
  itself, or None), generator_predictions, discriminator_predictions, and for
  a two-tower generator generator_ltr, generator_rtl and cloze_predictions.
  All variables exist, under their official names, once constructed.

  `model(batch, training=..., sample_seed=None)` takes the masked batch dict
  (BATCH_KEYS) and returns a dict of tensors:
    total_loss, mlm_loss                                scalars float32
    mlm_logits [B, N, V] float32, mlm_per_example_loss [B, N] float32 (not
    weighted), mlm_preds [B, N] int32
  with a two-tower generator also cloze_loss (scalar float32; it is the
  generator's part of total_loss), and with electra_objective or
  electric_objective:
    disc_loss scalar float32, sampled_ids [B, N] int32, corrupted_ids [B, S]
    int32 (the discriminator's input), disc_logits [B, S] (Electric: with
    the noise terms added), disc_probs [B, S] float32, disc_preds [B, S]
    int32, disc_labels [B, S] int32, disc_per_example_loss [B] float32
  `sample_seed` (int [2], or int [B, 2] for one seed per example) makes the
  sampling noise stateless and reproducible (`sampling.hashed_uniform`).
  `loss_denominators` (float32, `loss_weight_sums` of e.g. the global batch of
  all replicas) replaces this batch's sums as the losses' denominators.
  """

  def __init__(self, discriminator_config: ModelConfig, embedding_size: int,
               generator_config: Optional[ModelConfig] = None,
               objective: Objective = Objective(), uniform_generator: bool = False,
               untied_generator_embeddings: bool = False,
               two_tower_generator: bool = False,
               special_ids: Optional[SpecialIds] = None,
               name: str = "electra_pretrainer", **kwargs: Any):
    super().__init__(name=name, **kwargs)
    self.objective = objective
    self.special_ids = special_ids
    disc_config = discriminator_config
    self.vocab_size = disc_config.vocab_size
    if two_tower_generator and (generator_config is None or uniform_generator):
      raise ValueError("ElectraPretrainer: two_tower_generator needs a "
                       "generator_config and no uniform_generator")
    # The discriminator is built first so that the shared embedding block
    # gets its official scope `electra/embeddings`.
    self.discriminator = encoder_lib.TransformerEncoder(
        disc_config, embedding_size=embedding_size, name="electra")

    def separate_generator(name: str, **causal: bool) -> encoder_lib.TransformerEncoder:
      # Official quirk: untied generator embeddings are as wide as the
      # generator's hidden size, whatever embedding_size says.
      shared = None if untied_generator_embeddings else self.discriminator.embeddings
      return encoder_lib.TransformerEncoder(generator_config, embeddings=shared,
                                            name=name, **causal)

    self.generator = self.generator_ltr = self.generator_rtl = None
    self.generator_predictions = self.cloze_predictions = None
    head_args = (disc_config.hidden_act, disc_config.initializer_range)
    if two_tower_generator:
      # Official TwoTowerClozeTransformer: scopes generator_ltr / generator_rtl.
      self.generator_ltr = separate_generator("generator_ltr", ltr=True)
      self.generator_rtl = separate_generator("generator_rtl", rtl=True)
      self.cloze_predictions = MaskedLMHead(
          self.generator_ltr.embeddings, *head_args, name="cloze_predictions")
      self.cloze_predictions(tf.zeros([1, 1, 2 * generator_config.hidden_size]))
    elif uniform_generator:
      pass
    elif generator_config is None:
      self.generator = self.discriminator
    else:
      self.generator = separate_generator("generator")
    if self.generator is not None:
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
    """Two-tower cloze logits [B, S, V] float32 of the original ids [B, S].

    Position t reads the ltr tower's output at t - 1 and the rtl tower's at
    t + 1 (official `roll`, wrapping around at the ends), so it never sees
    its own token.
    """
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

  def loss_weight_sums(self, batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """The losses' denominators on `batch`: float32 [2] (sum of
    masked_lm_weights, sum of input_mask), [3] with a two-tower generator
    (+ the sum of the cloze weights).  Summed over replicas, they make
    `loss_denominators`."""
    sums = [tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32)),
            tf.reduce_sum(tf.cast(batch["input_mask"], tf.float32))]
    if self.cloze_predictions is not None:
      original_ids = unmask(batch["input_ids"], batch["masked_lm_positions"],
                            batch["masked_lm_ids"])
      sums.append(tf.reduce_sum(self.cloze_weights(original_ids, batch["input_mask"])))
    return tf.stack(sums)

  def _generate(self, batch: Mapping[str, tf.Tensor], training: Optional[bool]
                ) -> Tuple[tf.Tensor, Optional[tf.Tensor], Optional[tf.Tensor]]:
    """(mlm_logits [B, N, V], and for a two-tower generator cloze_logits
    [B, S, V] and the original ids [B, S]; else None, None)."""
    positions = batch["masked_lm_positions"]
    if self.cloze_predictions is not None:
      original_ids = unmask(batch["input_ids"], positions, batch["masked_lm_ids"])
      cloze = self.cloze_logits(original_ids, batch["input_mask"],
                                batch["segment_ids"], training=training)
      return gather_positions(cloze, positions), cloze, original_ids
    if self.generator is None:
      # uniform_generator: all-zero logits, as official.
      return tf.zeros(tf.concat([tf.shape(positions), [self.vocab_size]], 0)), None, None
    outputs = self.generator(batch["input_ids"], batch["input_mask"],
                             batch["segment_ids"], training=training)
    return self.generator_predictions(outputs["sequence_output"], positions), None, None

  def mlm_logits(self, batch: Mapping[str, tf.Tensor],
                 training: Optional[bool] = None) -> tf.Tensor:
    """Generator logits [B, N, V] float32 at the masked positions."""
    return self._generate(batch, training)[0]

  def discriminator_logits(self, input_ids: tf.Tensor, input_mask: tf.Tensor,
                           segment_ids: tf.Tensor,
                           training: Optional[bool] = None) -> tf.Tensor:
    """Replaced-token logits [B, S] float32 for the given (corrupted) ids
    (the head's scores; Electric's noise terms are added in `call`)."""
    outputs = self.discriminator(input_ids, input_mask, segment_ids,
                                 training=training)
    return self.discriminator_predictions(outputs["sequence_output"])

  def call(self, batch: Mapping[str, tf.Tensor], training: Optional[bool] = None,
           sample_seed: Optional[tf.Tensor] = None,
           loss_denominators: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
    objective = self.objective
    weight_sum = token_sum = cloze_sum = None
    if loss_denominators is not None:
      sums = tf.unstack(tf.cast(loss_denominators, tf.float32))
      weight_sum, token_sum = sums[:2]
      cloze_sum = sums[2] if len(sums) > 2 else None
    logits, cloze_logits, original_ids = self._generate(batch, training)
    mlm_loss, mlm_per_example_loss, mlm_preds = masked_lm_loss(
        logits, batch["masked_lm_ids"], batch["masked_lm_weights"], weight_sum)
    outputs = {"mlm_logits": logits, "mlm_loss": mlm_loss,
               "mlm_per_example_loss": mlm_per_example_loss, "mlm_preds": mlm_preds,
               "total_loss": objective.gen_weight * mlm_loss}
    if cloze_logits is not None:
      # Official: the two-tower generator trains on the cloze loss alone.
      cloze_loss = masked_lm_loss(
          cloze_logits, original_ids,
          self.cloze_weights(original_ids, batch["input_mask"]), cloze_sum)[0]
      outputs.update(cloze_loss=cloze_loss,
                     total_loss=objective.gen_weight * cloze_loss)
    if not objective.has_discriminator:
      return outputs

    disallow = (tf.one_hot(batch["masked_lm_ids"], self.vocab_size)
                if objective.disallow_correct else None)
    sampled_ids = sample_from_softmax(
        tf.stop_gradient(logits) / objective.temperature, seed=sample_seed,
        disallow=disallow)
    corrupted_ids, labels = corrupt_inputs(
        batch["input_ids"], batch["masked_lm_positions"], batch["masked_lm_ids"],
        sampled_ids, electric=objective.electric_objective)
    disc_logits = self.discriminator_logits(
        corrupted_ids, batch["input_mask"], batch["segment_ids"], training=training)
    if objective.electric_objective:
      disc_logits = electric_logits(disc_logits, cloze_logits, corrupted_ids,
                                    objective.mask_prob)
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
