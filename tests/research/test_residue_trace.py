"""tools/research/residue_trace.py records the official curves' quantities by their definitions.

Two steps of our job from the official_trajectory fixture's step-0 weights:
each recorded quantity is checked against the same quantity computed apart
from the trace (the batches read again from the job's own pipeline; the
first step's gradients again from the step-0 weights), and lr against the
official schedule and the fixture's official lr.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import checkpoints
from electra_tf import optimization
from electra_tf.modeling import dropout
from tools.research import residue_trace

STEPS = 2


@pytest.mark.slow
def test_recorded_quantities_are_the_official_definitions(official_trajectory_fixture,
                                                          bert_vocab, tmp_path):
  fixture = official_trajectory_fixture
  results = residue_trace.run_seed(fixture, str(bert_vocab), tmp_path, 1, STEPS)
  steps = results["steps"]
  assert json.loads((tmp_path / "seed1.json").read_text()) == results
  assert all(len(values) == STEPS for values in steps.values())

  # lr: polynomial decay over the fixture's 400 steps times the warm-up
  # fraction, of step k (the official quirk: no step-0 rate), as the fixture's.
  official = residue_trace.official_curves(fixture, STEPS)
  for k in range(1, STEPS + 1):
    assert steps["lr"][k - 1] == pytest.approx(2e-4 * (1 - k / 400) * (k / 100), rel=1e-6)
    assert round(steps["lr"][k - 1], 6) == official["seed1"]["lr"][k - 1]

  # The same seed's batches, read again: masked slots / real tokens; a
  # replaced token lies at a masked position other than position 0, so
  # fake_frac is at most the distinct such positions / real tokens.
  config = residue_trace.fixture_config(fixture, str(bert_vocab), str(tmp_path / "again"),
                                        1, STEPS)
  job = residue_trace.TracedJob(config, STEPS)
  batches = list(job._pipeline(True, config.train_batch_size).take(STEPS))
  for k, batch in enumerate(batches):
    real = batch["input_mask"].numpy().sum()
    assert steps["masked_frac"][k] == pytest.approx(
        batch["masked_lm_weights"].numpy().sum() / real, rel=1e-6)
    distinct = sum(len(set(row[weights > 0]) - {0}) for row, weights in zip(
        batch["masked_lm_positions"].numpy(), batch["masked_lm_weights"].numpy()))
    # (<= up to float32 rounding: every such position can be replaced)
    assert 0.8 * distinct / real < steps["fake_frac"][k] <= distinct / real * (1 + 1e-6)

  # grad_norm: the first step's gradients from the step-0 weights (the
  # trainer's own gradient function, dropout seed and loss denominators),
  # densified, their global norm; the per-variable norms add up to it.
  checkpoints.restore_from_checkpoint(job.model, str(fixture / "model.ckpt"),
                                     allow_unused=False)
  seed = dropout.step_seed(config.seed, tf.constant(0, tf.int64), 0)
  _, _, grads = job.trainer.replica_gradients(job.loss, compile_xla=False)(
      batches[0], tf.constant(0, tf.int64), seed, job.model.denominators(batches[0]))
  dense = optimization.dense_gradients(grads)
  assert steps["grad_norm"][0] == pytest.approx(
      float(tf.linalg.global_norm(dense)), rel=1e-5)
  per_variable = np.array([results["variable_norms"][v.name]
                           for v in job.model.trainable_variables])
  assert per_variable[:, 0] == pytest.approx([float(tf.norm(g)) for g in dense],
                                             rel=1e-4, abs=1e-9)
  groups = results["group_norms"]
  assert set(groups) == {"shared_embeddings", "generator", "discriminator"}
  for k in range(STEPS):
    assert np.sqrt(sum(groups[g][k] ** 2 for g in groups)) == pytest.approx(
        steps["grad_norm"][k], rel=1e-5)


def test_window_table_and_lr_check(official_trajectory_fixture):
  # "Ours": the fixture's three official runs shifted by +0.5 in every
  # quantity; the table's gap is the shift, the permutation p the least 3
  # against 3 gives (2/20).
  official = residue_trace.official_curves(official_trajectory_fixture, 200)
  ours = {name: {q: [v + 0.5 for v in run[q]] for q in run} for name, run in official.items()}
  table = residue_trace.window_table(official, ours, 200)
  assert set(table) == set(residue_trace.QUANTITIES)
  assert list(table["grad_norm"]) == ["1-100", "101-200", "101-150", "151-200"]
  row = table["mlm_loss"]["101-150"]
  assert row["official"] == pytest.approx(
      [np.mean(official[name]["mlm_loss"][100:150]) for name in official])
  assert row["gap"] == pytest.approx(0.5)
  assert row["p_permutation"] == pytest.approx(0.1)

  # Our schedule against the fixture's lr: official seed 1 logged our rate
  # of the step up to step 131, then, wherever the two round apart, the
  # rate of the step before (140: 1.305e-4 -> 0.000131, ours 0.00013).
  ours_lr = [float(optimization.learning_rate_at(k, 2e-4, 400, 100)) for k in range(1, 201)]
  check = residue_trace.lr_check(official, ours_lr)
  seed1 = check["seed1"]
  assert seed1["neither"] == []
  assert seed1["previous_step_only"][:4] == [132, 133, 136, 137]
  assert 140 in seed1["previous_step_only"]
  assert seed1["same"] + len(seed1["previous_step_only"]) == 200
