"""The pre-training model a `PretrainingConfig` describes."""

from __future__ import annotations

from typing import Optional

from electra_tf.modeling.pretrainer import ElectraPretrainer, Objective
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.tokenization import SpecialIds


def objective(config: PretrainingConfig) -> Objective:
  return Objective(electra_objective=config.electra_objective,
                   electric_objective=config.electric_objective,
                   gen_weight=config.gen_weight, disc_weight=config.disc_weight,
                   temperature=config.temperature,
                   disallow_correct=config.disallow_correct,
                   mask_prob=config.mask_prob)


def build_model(config: PretrainingConfig,
                special_ids: Optional[SpecialIds] = None) -> ElectraPretrainer:
  """The generator and discriminator of `config`, with every variable built
  under its official name (construct it eagerly, outside name scopes).

  As official: a separate generator (scope `generator`, or Electric's towers
  `generator_ltr` / `generator_rtl` with two_tower_generator) when
  electra_objective or electric_objective and untied_generator, none for
  uniform_generator, else the discriminator itself generates (a tied
  generator, or the masked LM of a BERT run).  `special_ids` are needed only
  to compute a two-tower generator's cloze loss.
  """
  separate = (config.has_discriminator and config.untied_generator
              and not config.uniform_generator)
  return ElectraPretrainer(
      config.encoder_config(), config.effective_embedding_size,
      generator_config=config.generator_config() if separate else None,
      objective=objective(config), uniform_generator=config.uniform_generator,
      untied_generator_embeddings=config.untied_generator_embeddings,
      two_tower_generator=config.two_tower_generator, special_ids=special_ids)
