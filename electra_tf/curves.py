"""Training curves: the scalars a job logged, read back and drawn.

`read_scalars` reads the TensorBoard scalars under `<run dir>/train` and
`<run dir>/eval` (a step logged twice keeps its last value); `plot_curves`
draws `<run dir>/results/curves.png`: a panel per training scalar, the
evaluations as points.
"""

from __future__ import annotations

import glob
import os
from typing import Dict, Mapping, Optional, Sequence

from electra_tf import fileio

Scalars = Dict[str, Dict[int, float]]  # tag -> step -> value

# Drawn together, in this order, when present.
_PANELS = (
    ("training loss", ("loss",)),
    ("generator (masked LM) loss", ("mlm_loss",)),
    ("discriminator loss", ("disc_loss",)),
    ("learning rate", ("lr",)),
)
_EVAL_PANELS = (
    ("eval: generator", ("masked_lm_accuracy", "sampled_masked_lm_accuracy")),
    ("eval: discriminator", ("disc_auc_real_tokens", "disc_accuracy",
                             "disc_always_real_accuracy", "disc_precision", "disc_recall")),
    ("eval: losses", ("masked_lm_loss", "disc_loss")),
)


def read_scalars(log_dir: str) -> Scalars:
  """Every scalar of the TensorBoard event files directly in `log_dir`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.core.util import event_pb2  # pylint: disable=g-import-not-at-top
  scalars: Scalars = {}
  for path in sorted(glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))):
    try:
      for record in tf.data.TFRecordDataset(path):
        event = event_pb2.Event.FromString(record.numpy())
        for value in event.summary.value:
          scalars.setdefault(value.tag, {})[int(event.step)] = float(
              tf.make_ndarray(value.tensor))
    except tf.errors.DataLossError:  # the unflushed tail of a killed writer
      continue
  return scalars


def window_means(values: Mapping[int, float], windows: Sequence[range]
                 ) -> Dict[str, Optional[float]]:
  """Mean of the values at the steps of each window, by "first-last" name;
  None for a window without values."""
  means = {}
  for window in windows:
    inside = [values[step] for step in window if step in values]
    means[f"{window.start}-{window.stop - 1}"] = (
        sum(inside) / len(inside) if inside else None)
  return means


def curve_panels(train: Scalars, evaluation: Scalars) -> list:
  """The panels of curves.png: (title, [(tag, values)], evaluation?), the
  empty ones left out."""
  panels = [(name, [(tag, train[tag]) for tag in tags if train.get(tag)], False)
            for name, tags in _PANELS]
  shown = {tag for _, tags in _PANELS for tag in tags}
  panels += [(tag, [(tag, values)], False) for tag, values in sorted(train.items())
             if tag not in shown and values]
  panels += [(name, [(tag, evaluation[tag]) for tag in tags if evaluation.get(tag)], True)
             for name, tags in _EVAL_PANELS]
  # Other evaluation scalars: fine-tuning's "<task>/<metric>" in a panel per
  # task, the rest (e.g. the official disc_auc) together; losses apart from
  # rates, so that each panel has one scale.
  grouped: Dict[str, list] = {}
  shown = {tag for _, tags in _EVAL_PANELS for tag in tags}
  for tag, values in sorted(evaluation.items()):
    if tag not in shown and values:
      name = "eval: " + (tag.split("/")[0] if "/" in tag else "other")
      name += " (losses)" if "loss" in tag else ""
      grouped.setdefault(name, []).append((tag, values))
  panels += [(name, series, True) for name, series in grouped.items()]
  return [panel for panel in panels if panel[1]]


def plot_curves(path: str, train: Scalars, evaluation: Scalars,
                title: str = "") -> str:
  """Draws the training scalars and the evaluation metrics into a PNG."""
  # A bare Figure draws with Agg, without pyplot's backend machinery (its
  # import alone is 0.4 CPU-s of every job).
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top

  panels = curve_panels(train, evaluation)
  columns = 3
  rows = max(1, -(-len(panels) // columns))
  figure = Figure(figsize=(5 * columns, 3.4 * rows))
  axes = figure.subplots(rows, columns, squeeze=False)
  for axis, (name, series, points) in zip(axes.flat, panels):
    for tag, values in series:
      steps = sorted(values)
      axis.plot(steps, [values[s] for s in steps], "o-" if points else "-",
                label=tag, markersize=4, linewidth=1.2)
    axis.set_title(name, fontsize=10)
    axis.set_xlabel("step", fontsize=8)
    axis.grid(alpha=0.3)
    if len(series) > 1 or points:
      axis.legend(fontsize=7)
  for axis in list(axes.flat)[len(panels):]:
    axis.axis("off")
  if title:
    figure.suptitle(title, fontsize=11)
  figure.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  temporary = fileio.temporary_path(path)
  figure.savefig(temporary, dpi=90, format="png")
  os.replace(temporary, path)
  return path


def plot_run(run_dir: str, title: str = "") -> str:
  """`plot_curves` of a run directory's train/ and eval/ scalars into
  run_dir/results/curves.png; returns the path."""
  return plot_curves(os.path.join(run_dir, "results", "curves.png"),
                     read_scalars(os.path.join(run_dir, "train")),
                     read_scalars(os.path.join(run_dir, "eval")), title)
