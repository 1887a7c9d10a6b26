"""Trained from the official step-0 weights, we learn as the official code does.

`../shared/fixtures/official_trajectory/` holds the official code's step-0
weights of a small ELECTRA, its hparams, its TFRecords and its per-step
curves for three seeds.  Here our job trains from those weights on those
records for 250 of the 400 scheduled steps and its window means (steps 1-100,
101-200, 151-250) are compared with the official seeds'.  Our seed differs
from theirs in every random stream, so the bounds are the official spread
plus what our own seeds spread (tools/research/official_trajectory.py runs the
full comparison).  The generator learning too slowly from step ~150 on (token
types by a gather, whose gradient rows the clip measured instead of their
dense norm; fixed) is outside them.  Why these windows, with the figures:
docs/results/suite_speedup_ledger.md, third round.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import curves
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.job import PretrainingJob
from tools.research import official_trajectory

STEPS = 250
WINDOWS = [range(1, 101), range(101, 201), range(151, 251)]
# Largest |our mean - official mean| allowed per window: the official seeds'
# half-range is 0.007-0.035 (mlm) and 0.002-0.005 (disc); ours spread about
# as much again.
MLM_TOLERANCE = 0.15
DISC_TOLERANCE = 0.02
# Over steps 151-250, the window that tells the defect above from our seeds:
# our five seeds are -0.000 to +0.089 nats above the official mean
# (learning_study/official_trajectory.json), the defect's seed 1 +0.131
# (learning_study/official_trajectory_defect.json).
DISCRIMINATING_WINDOW = "151-250"
MLM_TOLERANCE_151_250 = 0.11


def _window_means(per_step, windows):
  return {f"{w.start}-{w.stop - 1}": float(np.mean([per_step[s] for s in w])) for w in windows}


@pytest.mark.slow
def test_window_means_match_the_official_curves(official_trajectory_fixture, bert_vocab,
                                                 tmp_path):
  fixture = official_trajectory_fixture
  hparams = json.loads((fixture / "hparams.json").read_text())
  config = PretrainingConfig.create(
      {**hparams, "seed": 1, "log_every": 1, "save_checkpoints_steps": STEPS,
       "iterations_per_loop": STEPS // 2},
      pretrain_tfrecords=str(fixture / "data" / "pretrain_data.tfrecord*"),
      vocab_file=str(bert_vocab), model_dir=str(tmp_path / "model"))
  job = PretrainingJob(config, tf.distribute.get_strategy())
  assert job.train(init_checkpoint=str(fixture / "model.ckpt"), until_step=STEPS) == STEPS
  ours = curves.read_scalars(str(tmp_path / "model" / "train"))

  runs = json.loads((fixture / "official_curves.json").read_text())["runs"]
  for loss, tolerance in (("mlm_loss", MLM_TOLERANCE), ("disc_loss", DISC_TOLERANCE)):
    official = [_window_means({s["step"]: s[loss] for s in run["steps"]}, WINDOWS)
                for run in runs.values()]
    mine = _window_means(ours[loss], WINDOWS)
    for window, value in mine.items():
      official_mean = np.mean([run[window] for run in official])
      assert abs(value - official_mean) <= tolerance, (loss, window, value, official_mean)
    if loss == "mlm_loss":
      value = mine[DISCRIMINATING_WINDOW]
      official_mean = np.mean([run[DISCRIMINATING_WINDOW] for run in official])
      assert value - official_mean <= MLM_TOLERANCE_151_250, (value, official_mean)


def test_compare_takes_more_official_runs_and_tests_each_window(official_trajectory_fixture,
                                                                 tmp_path):
  # The fixture's three runs, one more from a driver of the official code
  # (its curve only), and two of "ours" made from the fixture's own curves
  # shifted by +0.5 nats: every window's permutation p is then the smallest
  # 2 runs against 4 can give, 2/15.
  fixture = json.loads((official_trajectory_fixture / "official_curves.json").read_text())
  extra = tmp_path / "seed4.json"
  extra.write_text(json.dumps({"seed": 4, "steps": fixture["runs"]["seed1"]["steps"]}))
  official = official_trajectory.official_summary(official_trajectory_fixture, [str(extra)])
  assert list(official) == ["seed1", "seed2", "seed3", "official_run_seed4"]
  assert "eval" not in official["official_run_seed4"]
  ours = {}
  for name in ("seed2", "seed3"):
    shifted = {loss: {s: v + 0.5 for s, v in official[name]["steps"][loss].items()}
               for loss in official_trajectory.LOSSES}
    windows = [range(a, a + 100) for a in (1, 101, 201, 301)]
    ours[name] = {"steps": shifted, "eval": official[name]["eval"],
                  "windows": {loss: curves.window_means(shifted[loss], windows)
                              for loss in official_trajectory.LOSSES}}
  table = official_trajectory.compare(official, ours)
  window = table["windows"]["mlm_loss"]["101-200"]
  assert len(window["official"]) == 4 and len(window["ours"]) == 2
  assert window["gap"] == pytest.approx(
      np.mean(window["ours"]) - np.mean(window["official"]))
  assert window["p_permutation"] == pytest.approx(2 / 15)
  assert len(table["eval"]["disc_auc_real_tokens"]["official"]) == 3
  assert len(table["curves"]["official"]["official_run_seed4"]["mlm_loss"]) == 400
  official_trajectory.plot(official, ours, str(tmp_path / "curves.png"))
  assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
  bad = tmp_path / "bad.json"
  bad.write_text("{}")
  with pytest.raises(official_trajectory.DataError, match="bad.json is not an official run"):
    official_trajectory.official_summary(official_trajectory_fixture, [str(bad)])
