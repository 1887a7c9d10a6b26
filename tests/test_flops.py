"""FLOPs counts against the totals of the official flops_computation.py."""

import pytest

from electra_tf import flops
from electra_tf.pretrain.config import PretrainingConfig

T = flops.TransformerSize

# name: (official total, masked LM, discriminator, batch, steps, hparams of
# the same model as a PretrainingConfig); the official script's settings.
OFFICIAL = {
    "electra_small": (1.2937e18, T(64, 12, 128, embedding_size=128),
                      T(256, 12, 128, embedding_size=128), 128, 1e6, {}),
    "electra_base": (6.4245e19, T(256, 12, embedding_size=768), T(768, 12), 256, 766000,
                     {"model_size": "base"}),
    "bert_small": (1.4187e18, T(256, 12, 128, embedding_size=128), None, 128, 1.45e6,
                   {"electra_objective": False, "num_train_steps": 1450000}),
    "bert_base": (6.4283e19, T(768, 12), None, 256, 1e6,
                  {"electra_objective": False, "model_size": "base",
                   "num_train_steps": 1000000}),
}


@pytest.mark.parametrize("name", sorted(OFFICIAL))
def test_official_totals(name):
  total, masked_lm, discriminator, batch, steps, hparams = OFFICIAL[name]
  per_seq = flops.train_flops_per_sequence(masked_lm, discriminator)
  assert per_seq * batch * steps == pytest.approx(total, rel=1e-3)
  config = PretrainingConfig.create(hparams)
  assert (config.train_batch_size, config.num_train_steps) == (batch, steps)
  assert flops.flops_per_seq(config) == pytest.approx(per_seq, rel=1e-12)


def test_inference_matches_paper_table():
  # ELECTRA paper Table 1 (sequence length 128): Small 3.7e9, Base 2.9e10.
  small = flops.inference_flops_per_sequence(T(256, 12, 128, embedding_size=128))
  base = flops.inference_flops_per_sequence(T(768, 12, 128))
  assert float(f"{small:.1e}") == 3.7e9
  assert float(f"{base:.1e}") == 2.9e10


def test_block_flops_hand_count():
  # h=2, s=3, i=8, 1 head, per token: qkv 24+6, scores 12, softmax/dropout/
  # scale 30, weighted values 12, attention output 8+2+8+2, its layer norm 5
  # (official per-token quirk), intermediate 32+64+8, output 32+2+8+2, final
  # layer norm 10: 267 per token.
  assert flops.block_flops(T(2, 1, 3, intermediate_size=8, num_heads=1)) == 267 * 3


def test_training_counts_forward_and_backward_and_output_fraction():
  t = T(128, 2, 64, vocab_size=1000, embedding_size=64)
  forward = 2 * flops.block_flops(t) + flops.input_embedding_flops(t)
  assert flops.encoder_train_flops(t, False) == pytest.approx(
      2 * (forward + flops.binary_head_flops(t)))
  # The MLM head is linear in the fraction of positions it is applied to.
  at = lambda frac: flops.train_flops_per_sequence(t, output_frac=frac)
  assert at(0.0) == pytest.approx(2 * forward)
  assert at(0.3) - at(0.0) == pytest.approx(2 * (at(0.15) - at(0.0)))


def test_config_variants():
  untied = PretrainingConfig.create({"untied_generator_embeddings": True})
  generator, discriminator = flops.model_sizes(untied)
  assert generator.e == generator.hidden_size == 64 and discriminator.e == 128
  tied = PretrainingConfig.create({"untied_generator": False})
  generator, discriminator = flops.model_sizes(tied)
  assert generator == discriminator
  uniform = PretrainingConfig.create({"uniform_generator": True})
  assert flops.model_sizes(uniform)[0] is None
  assert flops.flops_per_seq(uniform) == pytest.approx(
      flops.encoder_train_flops(flops.model_sizes(uniform)[1], False))
  debug = PretrainingConfig.create({"debug": True})
  _, discriminator = flops.model_sizes(debug)
  assert (discriminator.hidden_size, discriminator.num_layers, discriminator.heads) == (144, 3, 4)


@pytest.mark.parametrize("hparams", [
    {}, {"electra_objective": False}, {"uniform_generator": True},
    {"electric_objective": True}], ids=["electra", "masked_lm", "uniform", "electric"])
def test_lookups_are_the_only_vocab_cost_besides_the_output_layer(hparams):
  # Without the lookups, a bigger vocab costs only the generator's output layer
  # (logits, softmax, target pick: 2ev + 5v + 2v a position, forward and backward).
  def arithmetic(vocab_size):
    config = PretrainingConfig.create(dict(hparams, vocab_size=vocab_size))
    return flops.flops_per_seq(config) - flops.lookup_flops_per_seq(config), config

  (small, config), (big, _) = arithmetic(1000), arithmetic(2000)
  masked_lm, _ = flops.model_sizes(config)
  positions = (0.0 if config.uniform_generator else config.max_seq_length * (
      1.0 if config.two_tower_generator else flops.OFFICIAL_OUTPUT_FRAC))
  e = 0 if masked_lm is None else masked_lm.e
  assert big - small == pytest.approx(2 * positions * 1000 * (2 * e + 7))
