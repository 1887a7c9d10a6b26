"""Trains from the official trajectory fixture and compares with the official curves.

    python -m tools.official_trajectory --work_dir=/tmp/trajectory --seeds=1,2,3
    python -m tools.official_trajectory --work_dir=/tmp/trajectory --seeds=1 --json

`../shared/fixtures/official_trajectory/` holds the official TF1 code's
step-0 weights of a small ELECTRA, its hparams, its TFRecords and its
per-step curves for three seeds (see the README there).  For each seed given
here, `run_pretraining.py` starts from those weights (--init_checkpoint, an
official TF1 checkpoint) on those TFRecords with those hparams, logging every
step, then evaluates.  The table compares, window by window (steps 1-100,
101-200, ...), the mean of the per-step mlm_loss and disc_loss with the
official seeds' means and ranges, and the eval metrics with theirs.

Our seeds differ from the official ones in every random stream (data order,
masks, sampling, dropout), so a faithful run is one whose windows lie within
the spread of the official seeds, allowing for its own seed spread: the
`--json` summary holds, per window and loss, the official mean, min and max,
our values and `gap` = (our mean over seeds) - (official mean).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Dict, List

from absl import flags

from electra_tf import cli
from electra_tf import curves
from electra_tf.errors import DataError

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
WINDOW = 100
LOSSES = ("mlm_loss", "disc_loss")
EVAL_KEYS = ("masked_lm_loss", "masked_lm_accuracy", "disc_loss", "disc_auc_real_tokens",
             "disc_precision", "disc_recall", "disc_accuracy")

FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module beside other tools)."""
  flags.DEFINE_string("fixture_dir", str(SHARED / "fixtures" / "official_trajectory"),
                      "The official_trajectory fixture.")
  flags.DEFINE_string("vocab_file", str(SHARED / "data" / "vocab" / "bert_uncased_vocab.txt"),
                      "The BERT uncased vocab the fixture's TFRecords use.")
  flags.DEFINE_string("work_dir", None, "Where the runs go (one model_dir per seed).")
  flags.DEFINE_list("seeds", ["1", "2", "3"], "Our seeds (any integers).")
  flags.DEFINE_boolean("json", False, "Print only the JSON summary.")
  flags.mark_flag_as_required("work_dir")


def run_seed(fixture: pathlib.Path, vocab_file: str, model_dir: pathlib.Path,
             seed: int) -> Dict:
  """Trains and evaluates one seed (resumes a finished or killed run)."""
  hparams = json.loads((fixture / "hparams.json").read_text())
  steps = hparams["num_train_steps"]
  hparams.update(seed=seed, log_every=1, save_checkpoints_steps=steps,
                 iterations_per_loop=steps)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  command = [sys.executable, str(REPO / "run_pretraining.py"),
             f"--pretrain_tfrecords={fixture / 'data' / 'pretrain_data.tfrecord'}*",
             f"--vocab_file={vocab_file}", f"--init_checkpoint={fixture / 'model.ckpt'}",
             f"--model_dir={model_dir}", "--hparams=" + json.dumps(hparams),
             "--do_train", "--do_eval"]
  process = subprocess.run(command, env=env, text=True, capture_output=True)
  if process.returncode:
    raise RuntimeError(f"seed {seed}: run_pretraining.py failed: "
                       f"{process.stderr.strip().splitlines()[-1:]}")
  train = curves.read_scalars(str(model_dir / "train"))
  windows = [range(start, start + WINDOW) for start in range(1, steps + 1, WINDOW)]
  results = json.loads((model_dir / "results" / "unsup_results.json").read_text())
  return {"windows": {loss: curves.window_means(train[loss], windows) for loss in LOSSES},
          "eval": {key: results[key] for key in EVAL_KEYS}}


def official_summary(fixture: pathlib.Path) -> Dict:
  runs = json.loads((fixture / "official_curves.json").read_text())["runs"]
  steps = len(next(iter(runs.values()))["steps"])
  windows = [range(start, start + WINDOW) for start in range(1, steps + 1, WINDOW)]
  per_seed = {}
  for name, run in runs.items():
    per_seed[name] = {
        "windows": {loss: curves.window_means({s["step"]: s[loss] for s in run["steps"]},
                                              windows) for loss in LOSSES},
        "eval": {key: run["eval"][key] for key in EVAL_KEYS}}
  return per_seed


def _mean(values: List[float]) -> float:
  return sum(values) / len(values)


def compare(official: Dict, ours: Dict) -> Dict:
  """Per window and loss (and eval key): official mean/min/max, ours, gap."""
  table: Dict = {"windows": {}, "eval": {}}
  for loss in LOSSES:
    for window in next(iter(official.values()))["windows"][loss]:
      theirs = [run["windows"][loss][window] for run in official.values()]
      mine = [run["windows"][loss][window] for run in ours.values()]
      table["windows"].setdefault(loss, {})[window] = {
          "official_mean": _mean(theirs), "official_min": min(theirs),
          "official_max": max(theirs), "ours": mine, "gap": _mean(mine) - _mean(theirs)}
  for key in EVAL_KEYS:
    theirs = [run["eval"][key] for run in official.values()]
    mine = [run["eval"][key] for run in ours.values()]
    table["eval"][key] = {"official": theirs, "ours": mine,
                          "gap": _mean(mine) - _mean(theirs)}
  return table


def main() -> int:
  fixture = pathlib.Path(FLAGS.fixture_dir)
  if not (fixture / "official_curves.json").is_file():
    raise DataError(f"--fixture_dir: {fixture} holds no official_curves.json")
  work_dir = pathlib.Path(FLAGS.work_dir)
  ours = {}
  for seed in FLAGS.seeds:
    if not FLAGS.json:
      print(f"training seed {seed} ...", flush=True)
    ours[f"seed{seed}"] = run_seed(fixture, FLAGS.vocab_file, work_dir / f"seed{seed}",
                                   int(seed))
  table = compare(official_summary(fixture), ours)
  if FLAGS.json:
    print(json.dumps(table, sort_keys=True))
    return 0
  print(f"{'loss':10} {'steps':8} {'official mean (min-max)':26} {'ours':24} gap")
  for loss, windows in table["windows"].items():
    for window, row in windows.items():
      print(f"{loss:10} {window:8} {row['official_mean']:.3f} ({row['official_min']:.3f}"
            f"-{row['official_max']:.3f})    "
            f"{' '.join(f'{v:.3f}' for v in row['ours']):24} {row['gap']:+.3f}")
  print(f"\n{'eval metric':22} {'official seeds':24} {'ours':24} gap")
  for key, row in table["eval"].items():
    print(f"{key:22} {' '.join(f'{v:.3f}' for v in row['official']):24} "
          f"{' '.join(f'{v:.3f}' for v in row['ours']):24} {row['gap']:+.3f}")
  return 0


if __name__ == "__main__":
  define_flags()
  cli.run(main, "official_trajectory.py")
