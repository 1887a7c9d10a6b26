"""The pre-training model a `PretrainingConfig` describes: its objective,
its networks, and the `ElectraPretrainer` given both."""

from __future__ import annotations

from typing import Dict, Optional

from electra_tf.modeling import objectives
from electra_tf.modeling.encoder import TransformerEncoder
from electra_tf.modeling.pretrainer import ElectraPretrainer
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.tokenization import SpecialIds


def objective(config: PretrainingConfig) -> objectives.Objective:
  """The objective of config's hparams (`objectives.REGISTRY`)."""
  return objectives.objective_for(config)


def build_networks(config: PretrainingConfig, objective: objectives.Objective
                   ) -> Dict[str, Optional[TransformerEncoder]]:
  """The encoders of `config` for `objective`, as ElectraPretrainer's
  keyword arguments: discriminator `electra`, and `generator_towers`
  (two-tower), a separate `generator` (untied_generator) or the
  discriminator itself (none with uniform_generator).  Built eagerly, in
  the order that draws the official initial values."""
  discriminator = TransformerEncoder(config.encoder_config(),
                                     embedding_size=config.effective_embedding_size,
                                     name="electra")

  def separate(name: str, **causal: bool) -> TransformerEncoder:
    shared = None if config.untied_generator_embeddings else discriminator.embeddings
    return TransformerEncoder(config.generator_config(), embeddings=shared, name=name,
                              **causal)

  networks = {"discriminator": discriminator}
  if objective.two_tower:
    networks["generator_towers"] = (separate("generator_ltr", ltr=True),
                                    separate("generator_rtl", rtl=True))
  elif config.uniform_generator:
    networks["generator"] = None
  elif objective.has_discriminator and config.untied_generator:
    networks["generator"] = separate("generator")
  else:
    networks["generator"] = discriminator
  return networks


def build_model(config: PretrainingConfig,
                special_ids: Optional[SpecialIds] = None) -> ElectraPretrainer:
  """The pretrainer of `config`, with every variable built under its
  official name (construct it eagerly, outside name scopes).  `special_ids`
  are needed only by an objective whose `needs_special_ids` (the two-tower
  generator's cloze loss)."""
  objective_ = objective(config)
  return ElectraPretrainer(objective=objective_, special_ids=special_ids,
                           **build_networks(config, objective_))
