"""The objective classes: the registry of the official hparams, the named
loss denominators and what each objective asks of the pretrainer."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.modeling import objectives
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.model import build_model
from tests.test_pretrainer import TINY, tiny_batch


@pytest.mark.parametrize("hparams, cls", [
    ({}, objectives.Electra),
    ({"electra_objective": False}, objectives.MaskedLM),
    ({"electric_objective": True}, objectives.Electric),
    ({"electric_objective": True, "electra_objective": False}, objectives.Electric),
    ({"two_tower_generator": True}, objectives.TwoTowerElectra),
])
def test_the_official_hparams_select_the_objective(hparams, cls):
  config = PretrainingConfig.create({**hparams, "gen_weight": 2.0, "disc_weight": 30.0})
  objective = objectives.objective_for(config)
  assert type(objective) is cls  # pylint: disable=unidiomatic-typecheck
  assert (objective.gen_weight, objective.disc_weight) == (2.0, 30.0)
  assert objective.has_discriminator == config.has_discriminator
  assert objective.two_tower == config.two_tower_generator


def test_named_denominators_and_their_positional_form():
  model = build_model(PretrainingConfig.create(TINY))
  batch = tiny_batch()
  sums = model.denominators(batch)
  assert sorted(sums) == ["input_mask", "masked_lm_weight"]
  assert float(sums["masked_lm_weight"]) == 5.0 and float(sums["input_mask"]) == 31.0
  np.testing.assert_array_equal(model.loss_weight_sums(batch), [5.0, 31.0])
  seed = tf.constant([1, 1])
  named = model(batch, training=False, sample_seed=seed,
                loss_denominators={"masked_lm_weight": 10.0, "input_mask": 62.0})
  positional = model(batch, training=False, sample_seed=seed,
                     loss_denominators=tf.constant([10.0, 62.0]))
  for key in ("mlm_loss", "disc_loss", "total_loss"):
    np.testing.assert_array_equal(named[key], positional[key])


def test_the_masked_lm_has_one_denominator_and_logs_its_loss():
  model = build_model(PretrainingConfig.create({**TINY, "electra_objective": False}))
  assert list(model.denominators(tiny_batch())) == ["masked_lm_weight"]
  assert model.objective.loss_names == ("mlm_loss",)
  assert model.objective.loss_summary() is None


def test_the_pretrainer_refuses_networks_its_objective_does_not_fit():
  model = build_model(PretrainingConfig.create(TINY))
  with pytest.raises(ValueError, match="electric objective needs generator_towers"):
    type(model)(model.discriminator, objectives.Electric(), generator=model.generator)
