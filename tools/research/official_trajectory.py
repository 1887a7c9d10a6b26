"""Trains from the official trajectory fixture and compares with the official curves.

    python -m tools.research.official_trajectory --work_dir=/tmp/trajectory --seeds=1,2,3
    python -m tools.research.official_trajectory --work_dir=/tmp/trajectory --seeds=1 --json
    python -m tools.research.official_trajectory --work_dir=/tmp/trajectory --seeds=1,2,3,4,5 \\
        --official_runs=official/seed4.json,official/seed5.json --plot=curves.png --json

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
our values and `gap` = (our mean over seeds) - (official mean), and
`p_permutation`, the exact permutation p of our window means against the
official ones (learning_analysis.permutation_p: no normality assumed).

--official_runs adds more official runs to the fixture's: JSON files of
{"seed", "steps": [{"step", "mlm_loss", "disc_loss"}, ...]}, as a driver of
the official code writes them (they carry no eval; the eval compares the
fixture's runs). --plot draws every run's per-step mlm_loss and disc_loss
(a 10-step running mean), official and ours.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Dict, List

from absl import flags

from electra_tf import cli
from electra_tf import curves
from electra_tf.errors import DataError
from tools.research import learning_analysis

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
WINDOW = 100
LOSSES = ("mlm_loss", "disc_loss")
EVAL_KEYS = ("masked_lm_loss", "masked_lm_accuracy", "disc_loss", "disc_auc_real_tokens",
             "disc_precision", "disc_recall", "disc_accuracy")

FLAGS = flags.FLAGS


def define_fixture_flags() -> None:
  """--fixture_dir and --vocab_file: the official_trajectory fixture and its vocab."""
  flags.DEFINE_string("fixture_dir", str(SHARED / "fixtures" / "official_trajectory"),
                      "The official_trajectory fixture.")
  flags.DEFINE_string("vocab_file", str(SHARED / "data" / "vocab" / "bert_uncased_vocab.txt"),
                      "The BERT uncased vocab the fixture's TFRecords use.")


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module beside other tools)."""
  define_fixture_flags()
  flags.DEFINE_string("work_dir", None, "Where the runs go (one model_dir per seed).")
  flags.DEFINE_list("seeds", ["1", "2", "3"], "Our seeds (any integers).")
  flags.DEFINE_boolean("json", False, "Print only the JSON summary.")
  flags.DEFINE_list("official_runs", [], "More official runs' per-step JSON files.")
  flags.DEFINE_string("plot", None, "Draw both sides' per-step curves to this PNG.")
  flags.mark_flag_as_required("work_dir")


def run_seed(fixture: pathlib.Path, vocab_file: str, model_dir: pathlib.Path,
             seed: int) -> Dict:
  """Trains and evaluates one seed (resumes a finished or killed run)."""
  hparams = json.loads((fixture / "hparams.json").read_text())
  steps = hparams["num_train_steps"]
  hparams.update(seed=seed, log_every=1, save_checkpoints_steps=steps,
                 iterations_per_loop=steps)
  command = [sys.executable, str(REPO / "run_pretraining.py"),
             f"--pretrain_tfrecords={fixture / 'data' / 'pretrain_data.tfrecord'}*",
             f"--vocab_file={vocab_file}", f"--init_checkpoint={fixture / 'model.ckpt'}",
             f"--model_dir={model_dir}", "--hparams=" + json.dumps(hparams),
             "--do_train", "--do_eval"]
  process = subprocess.run(command, text=True, capture_output=True)
  if process.returncode:
    raise RuntimeError(f"seed {seed}: run_pretraining.py failed: "
                       f"{process.stderr.strip().splitlines()[-1:]}")
  train = curves.read_scalars(str(model_dir / "train"))
  windows = [range(start, start + WINDOW) for start in range(1, steps + 1, WINDOW)]
  results = json.loads((model_dir / "results" / "unsup_results.json").read_text())
  return {"windows": {loss: curves.window_means(train[loss], windows) for loss in LOSSES},
          "eval": {key: results[key] for key in EVAL_KEYS},
          "steps": {loss: train[loss] for loss in LOSSES}}


def official_summary(fixture: pathlib.Path, more: List[str] = ()) -> Dict:
  """Per official run: its window means, per-step losses and (the fixture's
  runs) its eval; `more`: --official_runs files, named after their seed."""
  runs = json.loads((fixture / "official_curves.json").read_text())["runs"]
  for path in more:
    try:
      run = json.loads(pathlib.Path(path).read_text())
      runs[f"official_run_seed{run['seed']}"] = {"steps": run["steps"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise DataError(f"--official_runs: {path} is not an official run's curve ({e})") from None
  steps = len(next(iter(runs.values()))["steps"])
  windows = [range(start, start + WINDOW) for start in range(1, steps + 1, WINDOW)]
  per_seed = {}
  for name, run in runs.items():
    per_step = {loss: {s["step"]: s[loss] for s in run["steps"]} for loss in LOSSES}
    per_seed[name] = {
        "windows": {loss: curves.window_means(per_step[loss], windows) for loss in LOSSES},
        "steps": per_step}
    if "eval" in run:
      per_seed[name]["eval"] = {key: run["eval"][key] for key in EVAL_KEYS}
  return per_seed


def _mean(values: List[float]) -> float:
  return sum(values) / len(values)


def compare(official: Dict, ours: Dict) -> Dict:
  """Per window and loss: official mean/min/max and values, ours, gap and the
  permutation p; per eval key (official runs with an eval): both sides and
  the gap; curves: every run's per-step losses, from step 1."""
  table: Dict = {"windows": {}, "eval": {}}
  for loss in LOSSES:
    for window in next(iter(official.values()))["windows"][loss]:
      theirs = [run["windows"][loss][window] for run in official.values()]
      mine = [run["windows"][loss][window] for run in ours.values()]
      table["windows"].setdefault(loss, {})[window] = {
          "official_mean": _mean(theirs), "official_min": min(theirs),
          "official_max": max(theirs), "official": theirs, "ours": mine,
          "gap": _mean(mine) - _mean(theirs),
          "p_permutation": learning_analysis.permutation_p(mine, theirs)}
  table["curves"] = {side: {name: {loss: [run["steps"][loss][step]
                                           for step in sorted(run["steps"][loss])]
                                    for loss in LOSSES} for name, run in runs.items()}
                     for side, runs in (("official", official), ("ours", ours))}
  for key in EVAL_KEYS:
    theirs = [run["eval"][key] for run in official.values() if "eval" in run]
    mine = [run["eval"][key] for run in ours.values()]
    table["eval"][key] = {"official": theirs, "ours": mine,
                          "gap": _mean(mine) - _mean(theirs)}
  return table


def plot(official: Dict, ours: Dict, path: str) -> None:
  """Both sides' per-step losses, each run a line (10-step running mean)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  figure, axes = pyplot.subplots(1, len(LOSSES), figsize=(12, 4.5))
  for axis, loss in zip(axes, LOSSES):
    for runs, colour, side in ((official, "tab:blue", "official"), (ours, "tab:orange", "ours")):
      for index, run in enumerate(runs.values()):
        steps = sorted(run["steps"][loss])
        values = [run["steps"][loss][s] for s in steps]
        smooth = [sum(values[max(0, i - 9):i + 1]) / len(values[max(0, i - 9):i + 1])
                  for i in range(len(values))]
        axis.plot(steps, smooth, color=colour, linewidth=0.9, alpha=0.8,
                  label=f"{side} ({len(runs)} seeds)" if index == 0 else None)
    axis.set_xlabel("step")
    axis.set_title(f"{loss} (10-step running mean)", fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend()
  axes[0].set_ylim(7.0, 10.5)
  figure.suptitle("From the official step-0 weights: the official code against ours")
  figure.tight_layout()
  figure.savefig(path, dpi=90)
  pyplot.close(figure)


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
  official = official_summary(fixture, FLAGS.official_runs)
  table = compare(official, ours)
  if FLAGS.plot:
    plot(official, ours, FLAGS.plot)
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
