"""Traces the early masked-LM residue: our job's per-step quantities against the official curves'.

    python -m tools.research.residue_trace --work_dir=/tmp/residue --seeds=1
    python -m tools.research.residue_trace --work_dir=/tmp/residue --seeds=1,2,3,4,5 \\
        --output=docs/learning_study/residue/trace.json

From the official_trajectory fixture's step-0 weights, hparams and records
(`../shared/fixtures/official_trajectory/`), each seed trains our job,
unchanged, for --steps steps of the fixture's 400-step schedule and records
per step what the fixture's official curves hold, by their definitions:
mlm_loss, disc_loss, lr (the rate the step's update used), grad_norm (the
global norm of all gradients before the clip to 1.0, as the official
`tf.clip_by_global_norm` of `tf.gradients` sees them: dense, the shared
embedding table's rows summed), fake_frac (replaced tokens / real tokens of
the batch) and masked_frac (masked positions / real tokens).  It also keeps
each variable's gradient norm, for the per-group norms (generator,
discriminator, shared embeddings).  A seed's results go to
<work_dir>/seed<S>.json, and a seed with that file is not trained again.

--output writes every per-step curve of both sides and the window table:
per quantity and window (steps 1-100, 101-200, 101-150, 151-200) the means
of our seeds and of the fixture's official seeds, their ranges and the exact
permutation p (learning_analysis.permutation_p); and per official run the
steps where its lr, at the 6 decimals the fixture stores, is ours, only our
previous step's, or neither.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import shutil
import subprocess
from typing import Dict, List, Mapping, Optional, Sequence

from absl import flags
import numpy as np
import tensorflow as tf

from electra_tf import cli
from electra_tf import curves
from electra_tf import fileio
from electra_tf import optimization
from electra_tf.errors import DataError
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.job import PretrainingJob
from tools.research import learning_analysis
from tools.research import official_trajectory

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
LOGGED = ("mlm_loss", "disc_loss", "lr")  # from the job's own per-step log
TRACED = ("grad_norm", "fake_frac", "masked_frac")  # recorded by TracedJob
QUANTITIES = LOGGED + TRACED
WINDOWS = (range(1, 101), range(101, 201), range(101, 151), range(151, 201))
OFFICIAL_DECIMALS = 6  # the fixture's curves are rounded to 6 decimals
# Variable groups by name: the embeddings both networks share, then each network's own.
GROUPS = (("shared_embeddings", "electra/embeddings/"), ("generator", "generator"),
          ("discriminator", ""))

FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module)."""
  official_trajectory.define_fixture_flags()
  flags.DEFINE_string("work_dir", None, "Where each seed's model_dir and results go.")
  flags.DEFINE_list("seeds", ["1"], "Our seeds (any integers).")
  flags.DEFINE_integer("steps", 200, "Steps trained of the fixture's schedule.")
  flags.DEFINE_string("output", None, "Write the curves and the window table here (JSON).")
  flags.mark_flag_as_required("work_dir")


def variable_group(name: str) -> str:
  """The group (GROUPS) of a trainable variable's name."""
  return next(group for group, key in GROUPS if key in name)


def batch_fractions(batch: Mapping[str, tf.Tensor], disc_labels: tf.Tensor) -> tf.Tensor:
  """[fake_frac, masked_frac] of a batch (float32 [2]): the discriminator's
  replaced tokens ([B, S] labels) and the masked positions (masked_lm_weights
  [B, N]), each over the batch's real tokens (input_mask)."""
  real = tf.reduce_sum(tf.cast(batch["input_mask"], tf.float32))
  return tf.stack([tf.reduce_sum(tf.cast(disc_labels, tf.float32)),
                   tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32))]) / real


class TracedJob(PretrainingJob):
  """PretrainingJob with its training unchanged, recording per step (row
  step - 1) `traced` [steps, 3] (TRACED) and `variable_norms` [steps,
  variables] (each trainable variable's dense gradient norm, in the order of
  `variable_names`).  One replica, no gradient accumulation."""

  def __init__(self, config: PretrainingConfig, steps: int):
    super().__init__(config, tf.distribute.get_strategy())
    if config.gradient_accumulation_steps != 1:
      raise ValueError("TracedJob records whole batches: gradient_accumulation_steps 1")
    self.variable_names = [v.name for v in self.model.trainable_variables]
    self.traced = tf.Variable(tf.zeros([steps, len(TRACED)]), trainable=False)
    self.variable_norms = tf.Variable(tf.zeros([steps, len(self.variable_names)]),
                                      trainable=False)

  def _replica_outputs(self, batch, first_counter, training: bool, part=None):
    outputs = super()._replica_outputs(batch, first_counter, training, part)
    if training:
      row = self.optimizer.iterations
      self.traced[row, 1:].assign(batch_fractions(batch, outputs["disc_labels"]))
    return outputs

  def _recording_clip(self, clip):
    """`clip` (optimization.clip_by_global_norm), recording the norms of the
    gradients it is given, densified as it densifies them."""

    def recording_clip(gradients, clip_norm=optimization.CLIP_NORM):
      dense = optimization.dense_gradients(gradients)
      shapes = [None if g is None else g.shape.as_list() for g in dense]
      if shapes != [v.shape.as_list() for v in self.model.trainable_variables]:
        raise ValueError(f"the clip got gradients of shapes {shapes}, not one per variable")
      row = self.optimizer.iterations
      self.traced[row, 0].assign(tf.linalg.global_norm(dense))
      self.variable_norms[row].assign(tf.stack([tf.norm(g) for g in dense]))
      return clip(dense, clip_norm)

    return recording_clip

  def train_traced(self, init_checkpoint: str, steps: int) -> Dict:
    """Trains `steps` steps from `init_checkpoint`; returns {"steps": {quantity:
    [value per step]}, "group_norms": {group: [...]}, "variable_norms": {name: [...]}}."""
    clip = optimization.clip_by_global_norm
    optimization.clip_by_global_norm = self._recording_clip(clip)
    try:
      reached = self.train(init_checkpoint=init_checkpoint, until_step=steps)
    finally:
      optimization.clip_by_global_norm = clip
    if reached != steps:
      raise RuntimeError(f"trained to step {reached}, not {steps}")
    logged = curves.read_scalars(os.path.join(self.config.model_dir, "train"))
    traced = self.traced.numpy().astype(np.float64)
    norms = self.variable_norms.numpy().astype(np.float64)
    per_step = {name: [logged[name][step] for step in range(1, steps + 1)] for name in LOGGED}
    per_step.update({name: traced[:, i].tolist() for i, name in enumerate(TRACED)})
    groups = [variable_group(name) for name in self.variable_names]
    group_norms = {group: np.sqrt(sum(norms[:, i] ** 2 for i, g in enumerate(groups)
                                      if g == group)).tolist() for group, _ in GROUPS}
    return {"steps": per_step, "group_norms": group_norms,
            "variable_norms": dict(zip(self.variable_names, norms.T.tolist()))}


def fixture_config(fixture: pathlib.Path, vocab_file: str, model_dir: str, seed: int,
                   steps: int) -> PretrainingConfig:
  """The fixture's hparams (its 400-step schedule) with our seed, logging
  every step and saving once, at `steps`."""
  hparams = json.loads((fixture / "hparams.json").read_text())
  return PretrainingConfig.create(
      {**hparams, "seed": seed, "log_every": 1, "save_checkpoints_steps": steps,
       "iterations_per_loop": steps},
      pretrain_tfrecords=str(fixture / "data" / "pretrain_data.tfrecord*"),
      vocab_file=vocab_file, model_dir=model_dir)


def run_seed(fixture: pathlib.Path, vocab_file: str, work_dir: pathlib.Path, seed: int,
             steps: int) -> Dict:
  """One seed's results: <work_dir>/seed<S>.json when it exists, else trained
  (from scratch: a killed seed's model_dir is removed first) and written there."""
  results_file = work_dir / f"seed{seed}.json"
  if results_file.is_file():
    return json.loads(results_file.read_text())
  model_dir = work_dir / f"seed{seed}"
  shutil.rmtree(model_dir, ignore_errors=True)
  job = TracedJob(fixture_config(fixture, vocab_file, str(model_dir), seed, steps), steps)
  results = {"seed": seed, **job.train_traced(str(fixture / "model.ckpt"), steps)}
  fileio.atomic_write_text(str(results_file), json.dumps(results) + "\n")
  return results


def official_curves(fixture: pathlib.Path, steps: int) -> Dict[str, Dict[str, List[float]]]:
  """The fixture's official runs: {run: {quantity: [value per step 1..steps]}}."""
  runs = json.loads((fixture / "official_curves.json").read_text())["runs"]
  return {name: {q: [s[q] for s in run["steps"][:steps]] for q in QUANTITIES}
          for name, run in runs.items()}


def window_table(official: Mapping[str, Mapping[str, Sequence[float]]],
                 ours: Mapping[str, Mapping[str, Sequence[float]]],
                 steps: int) -> Dict:
  """Per quantity and window within `steps`: both sides' per-run means, mean,
  min, max, ours minus official and the exact permutation p."""
  table: Dict = {}
  for quantity in QUANTITIES:
    for window in (w for w in WINDOWS if w.stop - 1 <= steps):
      name = f"{window.start}-{window.stop - 1}"
      sides = {side: [float(np.mean(run[quantity][window.start - 1:window.stop - 1]))
                      for run in runs.values()]
               for side, runs in (("official", official), ("ours", ours))}
      row = {}
      for side, values in sides.items():
        row.update({side: values, f"{side}_mean": float(np.mean(values)),
                    f"{side}_min": min(values), f"{side}_max": max(values)})
      row["gap"] = row["ours_mean"] - row["official_mean"]
      row["p_permutation"] = learning_analysis.permutation_p(sides["ours"], sides["official"])
      table.setdefault(quantity, {})[name] = row
  return table


def lr_check(official: Mapping[str, Mapping[str, Sequence[float]]],
             ours_lr: Sequence[float]) -> Dict[str, Dict]:
  """Per official run, its lr at each step against ours (`ours_lr`, steps
  1..n), rounded as the fixture stores it: the number of steps where it is
  ours ("same"; ties where our step and the one before round alike count
  here), the steps where it is only our previous step's (0 before step 1),
  and the steps where it is neither."""
  rounded = [round(value, OFFICIAL_DECIMALS) for value in [0.0, *ours_lr]]
  check = {}
  for name, run in official.items():
    same, previous_only, neither = 0, [], []
    for step, value in enumerate(run["lr"][:len(ours_lr)], start=1):
      if value == rounded[step]:
        same += 1
      elif value == rounded[step - 1]:
        previous_only.append(step)
      else:
        neither.append(step)
    check[name] = {"same": same, "previous_step_only": previous_only, "neither": neither}
  return check


def commit() -> Optional[str]:
  """The checkout's commit, or None outside a git checkout."""
  process = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, check=False)
  return process.stdout.strip() or None


def machine() -> str:
  model = next((line.split(":", 1)[1].strip() for line in
                pathlib.Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
  return f"{os.cpu_count()}-core {model}, {platform.platform()}"


def trace_summary(fixture: pathlib.Path, seeds: Mapping[int, Dict], steps: int) -> Dict:
  """Everything --output writes; `group_norm_windows`: per variable group and
  window, each of our seeds' mean gradient norm (the official runs logged none)."""
  official = official_curves(fixture, steps)
  ours = {f"seed{seed}": results["steps"] for seed, results in seeds.items()}
  return {
      "what": "our job from the official_trajectory fixture's step-0 weights against the "
              "fixture's official runs, per step: tools/research/residue_trace.py",
      "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
      "machine": machine(), "commit": commit(), "steps": steps,
      "windows": window_table(official, ours, steps),
      "lr_check": lr_check(official, next(iter(ours.values()))["lr"]),
      "lr_ours_identical": all(run["lr"] == next(iter(ours.values()))["lr"]
                               for run in ours.values()),
      "curves": {"official": official, "ours": ours},
      "group_norms": {f"seed{seed}": results["group_norms"] for seed, results in seeds.items()},
      "group_norm_windows": {
          group: {f"{w.start}-{w.stop - 1}": [
              float(np.mean(results["group_norms"][group][w.start - 1:w.stop - 1]))
              for results in seeds.values()] for w in WINDOWS if w.stop - 1 <= steps}
          for group, _ in GROUPS},
  }


def main() -> int:
  fixture = pathlib.Path(FLAGS.fixture_dir)
  if not (fixture / "official_curves.json").is_file():
    raise DataError(f"--fixture_dir: {fixture} holds no official_curves.json")
  work_dir = pathlib.Path(FLAGS.work_dir)
  work_dir.mkdir(parents=True, exist_ok=True)
  seeds = {int(seed): run_seed(fixture, FLAGS.vocab_file, work_dir, int(seed), FLAGS.steps)
           for seed in FLAGS.seeds}
  if FLAGS.output:
    summary = trace_summary(fixture, seeds, FLAGS.steps)
    fileio.atomic_write_text(FLAGS.output, json.dumps(summary, indent=1) + "\n")
    for quantity, windows in summary["windows"].items():
      for window, row in windows.items():
        print(f"{quantity:12} {window:8} official {row['official_mean']:.6g} "
              f"({row['official_min']:.6g}-{row['official_max']:.6g})  ours "
              f"{row['ours_mean']:.6g} ({row['ours_min']:.6g}-{row['ours_max']:.6g})  "
              f"p {row['p_permutation']:.3f}")
    for name, row in summary["lr_check"].items():
      print(f"lr, official {name}: ours at {row['same']} steps, our previous step's at "
            f"{len(row['previous_step_only'])}, neither at {len(row['neither'])}")
  return 0


if __name__ == "__main__":
  define_flags()
  cli.run(main, "residue_trace.py")
