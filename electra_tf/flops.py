"""Training and inference FLOPs counted as the official flops_computation.py.

Official rules (a [m, n] x [n] product 2*m*n, per-activation costs, one-hot
embedding lookups, training 2x forward, the MLM softmax over `output_frac`
of the positions), per sequence of `seq_length` tokens; a two-tower
generator follows the same rules (docs/electric.md).
"""

import dataclasses
from typing import Optional, Tuple

from electra_tf.config import BERT_VOCAB_SIZE
from electra_tf.pretrain.config import PretrainingConfig

DROPOUT_FLOPS = 4  # random number, >=, mask multiply, 1 / (1 - rate) multiply
LAYER_NORM_FLOPS = 5  # mean, variance (square and sum), bias, scale
ACTIVATION_FLOPS = 8  # tanh-approximated GELU
SOFTMAX_FLOPS = 5  # max-subtract, exp, sum, divide
OFFICIAL_OUTPUT_FRAC = 0.15625
ELECTRIC_NOISE_FLOPS = 2  # + log q, + log(mask_prob / (1 - mask_prob)) per token


@dataclasses.dataclass(frozen=True)
class TransformerSize:
  """Sizes of one encoder; the defaults follow the official TransformerHparams."""
  hidden_size: int
  num_layers: int
  seq_length: int = 512
  vocab_size: int = BERT_VOCAB_SIZE
  embedding_size: Optional[int] = None  # hidden_size when None
  intermediate_size: Optional[int] = None  # 4 * hidden_size when None
  num_heads: Optional[int] = None  # max(1, hidden_size // 64) when None

  @property
  def e(self) -> int:
    return self.hidden_size if self.embedding_size is None else self.embedding_size

  @property
  def i(self) -> int:
    return 4 * self.hidden_size if self.intermediate_size is None else self.intermediate_size

  @property
  def heads(self) -> int:
    return max(1, self.hidden_size // 64) if self.num_heads is None else self.num_heads


def block_flops(t: TransformerSize) -> float:
  """Forward FLOPs of one transformer layer over the sequence."""
  h, s, i, heads = t.hidden_size, t.seq_length, t.i, t.heads
  per_token = (
      3 * 2 * h * h + 3 * h  # query/key/value projections and biases
      + 2 * h * s  # attention scores
      + (SOFTMAX_FLOPS + DROPOUT_FLOPS + 1) * s * heads  # softmax, dropout, scale
      + 2 * h * s  # weighted average of the values
      + 2 * h * h + h + DROPOUT_FLOPS * h + h  # output projection, bias, dropout, residual
      # Official quirk: the attention-output layer norm is counted as 5 FLOPs
      # per token, not 5 per activation as the block's final layer norm.
      + LAYER_NORM_FLOPS
      + 2 * h * i + ACTIVATION_FLOPS * i + i  # intermediate dense, GELU, bias
      + 2 * h * i + h + DROPOUT_FLOPS * h + h  # output dense, bias, dropout, residual
      + LAYER_NORM_FLOPS * h)
  return float(per_token * s)


def lookup_flops(t: TransformerSize) -> float:
  """Forward FLOPs of the token, position and token-type lookups, counted as
  one-hot products (official rule; in hardware they are table reads)."""
  e, s, v = t.e, t.seq_length, t.vocab_size
  return float((2 * e * v + 2 * e * (s + 2)) * s)


def input_embedding_flops(t: TransformerSize) -> float:
  """Forward FLOPs of the input embeddings (and their projection if e != h)."""
  h, e, s = t.hidden_size, t.e, t.seq_length
  per_token = 2 * e + LAYER_NORM_FLOPS * e + DROPOUT_FLOPS * e  # sum, layer norm, dropout
  if e != h:
    per_token += 2 * h * e + h
  return lookup_flops(t) + float(per_token * s)


def mlm_head_flops(t: TransformerSize, output_frac: float = OFFICIAL_OUTPUT_FRAC,
                   input_size: Optional[int] = None) -> float:
  """Forward FLOPs of the masked-LM head on `output_frac` of the positions.

  `input_size`: width of the head's input (hidden_size when None; 2 x
  hidden_size for Electric's cloze head over the two towers).
  """
  h = t.hidden_size if input_size is None else input_size
  e, v = t.e, t.vocab_size
  per_token = (2 * h * e + e + ACTIVATION_FLOPS * e + LAYER_NORM_FLOPS * e  # dense
               + 2 * e * v  # logits against the embedding table
               + SOFTMAX_FLOPS * v + 2 * v)  # softmax and target-word pick
  return output_frac * per_token * t.seq_length


def binary_head_flops(t: TransformerSize) -> float:
  """Forward FLOPs of the per-token binary classifier (discriminator head)."""
  h = t.hidden_size
  return float((2 * h * h + h + ACTIVATION_FLOPS * h + 2 * h) * t.seq_length)


def encoder_train_flops(t: TransformerSize, mlm_head: bool,
                        output_frac: float = OFFICIAL_OUTPUT_FRAC) -> float:
  """Forward + backward FLOPs of one encoder with an MLM or a binary head."""
  head = mlm_head_flops(t, output_frac) if mlm_head else binary_head_flops(t)
  return 2 * (t.num_layers * block_flops(t) + input_embedding_flops(t) + head)


def train_flops_per_sequence(masked_lm: Optional[TransformerSize],
                             discriminator: Optional[TransformerSize] = None,
                             output_frac: float = OFFICIAL_OUTPUT_FRAC) -> float:
  """Training FLOPs of one sequence: a masked LM and/or a discriminator.

  ELECTRA: the generator and the discriminator (official
  get_electra_train_flops); BERT: the masked LM alone; ELECTRA with the
  uniform generator: the discriminator alone.
  """
  total = 0.0
  if masked_lm is not None:
    total += encoder_train_flops(masked_lm, True, output_frac)
  if discriminator is not None:
    total += encoder_train_flops(discriminator, False)
  return total


def two_tower_train_flops(t: TransformerSize) -> float:
  """Forward + backward FLOPs of Electric's two-tower cloze generator, whose
  towers both have size `t`; the cloze head covers every position."""
  towers = 2 * (t.num_layers * block_flops(t) + input_embedding_flops(t))
  return 2 * (towers + mlm_head_flops(t, 1.0, input_size=2 * t.hidden_size))


def inference_flops_per_sequence(t: TransformerSize) -> float:
  """Forward FLOPs of a classifier on one sequence (official get_infer_flops)."""
  return t.num_layers * block_flops(t) + input_embedding_flops(t) + binary_head_flops(t)


def model_sizes(config: PretrainingConfig
                ) -> Tuple[Optional[TransformerSize], Optional[TransformerSize]]:
  """(masked_lm, discriminator) sizes of a pre-training config: without a
  discriminator the masked LM alone; a tied generator is the discriminator
  network, the uniform one None; two towers: the size of each."""
  from electra_tf.modeling import objectives  # pylint: disable=g-import-not-at-top

  def size(model, embedding_size):
    return TransformerSize(
        hidden_size=model.hidden_size, num_layers=model.num_hidden_layers,
        seq_length=config.max_seq_length, vocab_size=model.vocab_size,
        embedding_size=embedding_size, intermediate_size=model.intermediate_size,
        num_heads=model.num_attention_heads)

  main = size(config.encoder_config(), config.effective_embedding_size)
  if not objectives.objective_class(config).has_discriminator:
    return main, None
  if config.uniform_generator:
    return None, main
  generator = (config.generator_config() if config.untied_generator
               else config.encoder_config())
  embedding = None if config.untied_generator_embeddings else config.effective_embedding_size
  return size(generator, embedding), main


def flops_per_seq(config: PretrainingConfig,
                  output_frac: float = OFFICIAL_OUTPUT_FRAC) -> float:
  """Training FLOPs of one sequence of a pre-training config (see model_sizes;
  `output_frac` applies to a masked LM, not to a cloze generator)."""
  from electra_tf.modeling import objectives  # pylint: disable=g-import-not-at-top
  objective = objectives.objective_class(config)
  masked_lm, discriminator = model_sizes(config)
  if not objective.two_tower:
    return train_flops_per_sequence(masked_lm, discriminator, output_frac)
  total = two_tower_train_flops(masked_lm) + encoder_train_flops(discriminator, False)
  if objective.noise_contrastive:
    total += 2 * ELECTRIC_NOISE_FLOPS * config.max_seq_length
  return total


def lookup_flops_per_seq(config: PretrainingConfig) -> float:
  """The part of flops_per_seq(config) that is embedding lookups (forward and
  backward, every encoder and tower): flops_per_seq minus it is the arithmetic
  of an implementation that reads its tables."""
  from electra_tf.modeling import objectives  # pylint: disable=g-import-not-at-top
  masked_lm, discriminator = model_sizes(config)
  towers = 2 if objectives.objective_class(config).two_tower else 1
  forward = (towers * lookup_flops(masked_lm) if masked_lm is not None else 0.0) + (
      lookup_flops(discriminator) if discriminator is not None else 0.0)
  return 2 * forward
