r"""Peak memory of the pre-training step, and the largest micro-batch that fits.

    python -m electra_tf.bench.memory [--model_sizes=small,base,large] \
        [--seq_lengths=128,512] [--batch_sizes=1,8,32] [--recompute=both] \
        [--mixed_precision=bfloat16|float16] [--memory_budget_gb=G] \
        [--max_batch=1024] [--project_gb=16,40,80] [--output=FILE.json]

Each configuration (model size, sequence length, micro-batch, recompute_layers
off/on) runs in a fresh process, so that one configuration's peak never hides
another's: it builds the pre-training job (generator, discriminator,
optimizer; `--hparams` applies), runs ONE full train step (forward,
backward, update; the first step, so tracing is included) on a synthetic
batch (`electra_tf.bench.step.synthetic_batch`) and reports

  peak_gb   the process's peak resident set size (CPU), or the GPU
            allocator's peak (GPU);
  built_gb  the same just before the step (runtime, weights, Adam slots);
  step_gb   peak_gb - built_gb: what the step adds (activations, gradients).

From the two largest measured batches of a (size, seq, recompute) the
command fits peak_gb = fixed_gb + per_sequence_gb * batch and projects, for
each budget of `--project_gb`, the largest micro-batch and the
gradient_accumulation_steps that give the official batch of that size (128
small, 256 base, 2048 large): a projection, exact only for the device the
figures were measured on.  `--memory_budget_gb` also finds by measurement
(doubling, then bisection, one process per probe) the largest micro-batch
whose peak fits the budget.  The last line printed is one JSON object:

  {"device", "measurements": [...], "fits": [...] (with --memory_budget_gb),
   "projection": [...]}

A configuration whose process fails (e.g. out of memory) is reported with
`"error"` instead of figures.  docs/big_batches.md holds measured tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from absl import flags

from electra_tf import cli
from electra_tf import fileio
from electra_tf.bench import record
from electra_tf.config import MODEL_SIZES, parse_hparams
from electra_tf.errors import ConfigError

FLAGS = flags.FLAGS
GB = 2.0 ** 30


def _define_flags() -> None:
  flags.DEFINE_list("model_sizes", list(MODEL_SIZES), "Model sizes to measure.")
  flags.DEFINE_list("seq_lengths", ["128", "512"], "Sequence lengths.")
  flags.DEFINE_list("batch_sizes", ["1", "8", "32"], "Micro-batch sizes.")
  flags.DEFINE_enum("recompute", "both", ["off", "on", "both"],
                    "recompute_layers off, on, or both.")
  flags.DEFINE_enum("mixed_precision", None, ["bfloat16", "float16"],
                    "Mixed precision of the step (default float32).")
  flags.DEFINE_string("hparams", None, "Pre-training hparams (JSON) under the grid's.")
  flags.DEFINE_float("memory_budget_gb", None,
                     "Also find by bisection the largest micro-batch within this peak.")
  flags.DEFINE_integer("max_batch", 1024, "Largest micro-batch the bisection tries.")
  flags.DEFINE_list("project_gb", ["16", "40", "80"],
                    "Memory budgets (GB) of the micro-batch / accumulation projection.")
  flags.DEFINE_string("output", None,
                      "Also write the JSON object to this file, in a record with the command "
                      "line, date, machine and git commit (electra_tf/bench/record.py).")
  flags.DEFINE_string("measure", None,
                      "Internal: SIZE,SEQ,BATCH,RECOMPUTE (0/1) measured in this "
                      "process; prints one JSON line.")


def _current_rss_gb() -> float:
  with open("/proc/self/statm", encoding="utf-8") as f:
    pages = int(f.read().split()[1])
  return pages * os.sysconf("SC_PAGE_SIZE") / GB


def pretraining_config(model_size: str, seq_length: int, batch_size: int,
                       recompute: bool, mixed_precision: Optional[str],
                       hparams: Optional[str]):
  """The PretrainingConfig of one configuration (the grid's values win)."""
  from electra_tf.pretrain.config import PretrainingConfig  # pylint: disable=g-import-not-at-top
  values = parse_hparams(hparams)
  values.update(model_size=model_size, max_seq_length=seq_length,
                train_batch_size=batch_size, recompute_layers=recompute,
                mixed_precision=mixed_precision)
  return PretrainingConfig.create(values)


def measure(model_size: str, seq_length: int, batch_size: int, recompute: bool,
            mixed_precision: Optional[str], hparams: Optional[str]) -> Dict[str, Any]:
  """One train step of one configuration in this process: its memory figures."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from electra_tf.bench import device as device_lib  # pylint: disable=g-import-not-at-top
  from electra_tf.bench import step as step_bench  # pylint: disable=g-import-not-at-top
  config = pretraining_config(model_size, seq_length, batch_size, recompute,
                              mixed_precision, hparams)
  batch = step_bench.synthetic_batch(batch_size, seq_length, config.max_predictions_per_seq,
                                     config.vocab_size)
  run_steps = step_bench.electra_step_runner(config, batch)
  on_gpu = bool(tf.config.list_physical_devices("GPU"))
  built = (tf.config.experimental.get_memory_info("GPU:0")["current"] / GB
           if on_gpu else _current_rss_gb())
  start = time.perf_counter()
  run_steps(1)
  seconds = time.perf_counter() - start
  device, peak_mb = device_lib.device_and_peak_memory_mb()
  peak = peak_mb * 2**20 / GB
  return {"model_size": model_size, "seq_length": seq_length, "batch_size": batch_size,
          "recompute_layers": recompute, "mixed_precision": mixed_precision,
          "peak_gb": round(peak, 3), "built_gb": round(built, 3),
          "step_gb": round(peak - built, 3), "step_seconds": round(seconds, 1),
          "device": device}


def measure_in_subprocess(model_size: str, seq_length: int, batch_size: int,
                          recompute: bool) -> Dict[str, Any]:
  """`measure` in a fresh process; {"error": ...} when that process fails."""
  command = [sys.executable, "-m", "electra_tf.bench.memory",
             f"--measure={model_size},{seq_length},{batch_size},{int(recompute)}"]
  if FLAGS.mixed_precision:
    command.append(f"--mixed_precision={FLAGS.mixed_precision}")
  if FLAGS.hparams:
    command.append(f"--hparams={FLAGS.hparams}")
  result = subprocess.run(command, capture_output=True, text=True, check=False)
  lines = result.stdout.strip().splitlines()
  if result.returncode == 0 and lines:
    return json.loads(lines[-1])
  error = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
  return {"model_size": model_size, "seq_length": seq_length, "batch_size": batch_size,
          "recompute_layers": recompute, "error": error}


def _fits(figures: Dict[str, Any], budget_gb: float) -> bool:
  return "error" not in figures and figures["peak_gb"] <= budget_gb


def largest_fitting_batch(model_size: str, seq_length: int, recompute: bool,
                          budget_gb: float, max_batch: int) -> Dict[str, Any]:
  """The largest micro-batch whose measured peak is within `budget_gb`
  (doubling from 1, then bisection); 0 when batch 1 does not fit."""
  probes: Dict[int, Dict[str, Any]] = {}

  def fits(batch: int) -> bool:
    probes[batch] = measure_in_subprocess(model_size, seq_length, batch, recompute)
    return _fits(probes[batch], budget_gb)

  good, bad = 0, None
  batch = 1
  while batch <= max_batch:
    if not fits(batch):
      bad = batch
      break
    good, batch = batch, batch * 2
  if bad is None and good < max_batch:
    bad = max_batch + 1
  while bad is not None and bad - good > 1:
    middle = (good + bad) // 2
    if fits(middle):
      good = middle
    else:
      bad = middle
  return {"model_size": model_size, "seq_length": seq_length,
          "recompute_layers": recompute, "budget_gb": budget_gb,
          "largest_batch": good, "probes": sorted(probes)}


def official_batch(model_size: str) -> int:
  """The official pre-training batch of a size (128, 256 and 2048)."""
  from electra_tf.pretrain.config import PretrainingConfig  # pylint: disable=g-import-not-at-top
  return PretrainingConfig.create({"model_size": model_size}).train_batch_size


def accumulation_for(batch: int, largest_micro_batch: int) -> Optional[int]:
  """The fewest accumulation steps N (a divisor of `batch`) whose micro-batch
  batch / N is at most `largest_micro_batch`; None when none is."""
  for steps in range(1, batch + 1):
    if batch % steps == 0 and batch // steps <= largest_micro_batch:
      return steps
  return None


def project(measurements: Sequence[Dict[str, Any]], budgets_gb: Sequence[float]
            ) -> List[Dict[str, Any]]:
  """Per (size, seq, recompute) with two measured batches: the linear fit of
  peak_gb on the batch (its two largest batches) and, per budget, the largest
  micro-batch and the accumulation steps of the official batch."""
  groups: Dict[tuple, List[Dict[str, Any]]] = {}
  for m in measurements:
    if "error" not in m:
      groups.setdefault((m["model_size"], m["seq_length"], m["recompute_layers"]),
                        []).append(m)
  rows = []
  for (size, seq, recompute), group in sorted(groups.items()):
    group = sorted(group, key=lambda m: m["batch_size"])
    if len(group) < 2:
      continue
    low, high = group[-2], group[-1]
    per_sequence = (high["peak_gb"] - low["peak_gb"]) / (high["batch_size"] - low["batch_size"])
    if per_sequence <= 0:
      continue
    fixed = high["peak_gb"] - per_sequence * high["batch_size"]
    target = official_batch(size)
    row = {"model_size": size, "seq_length": seq, "recompute_layers": recompute,
           "fixed_gb": round(fixed, 3), "per_sequence_gb": round(per_sequence, 4),
           "fit_batches": [low["batch_size"], high["batch_size"]],
           "official_batch": target, "budgets": []}
    for budget in budgets_gb:
      largest = max(0, int((budget - fixed) / per_sequence))
      steps = accumulation_for(target, largest)
      row["budgets"].append({"budget_gb": budget, "largest_micro_batch": largest,
                             "gradient_accumulation_steps": steps,
                             "micro_batch": target // steps if steps else None})
    rows.append(row)
  return rows


def _positive_ints(name: str) -> List[int]:
  try:
    values = [int(v) for v in FLAGS[name].value]
  except ValueError:
    raise ConfigError(f"--{name}: {FLAGS[name].value} must be integers") from None
  if not values or min(values) <= 0:
    raise ConfigError(f"--{name}: {FLAGS[name].value} must be > 0")
  return values


def main() -> int:
  started = record.utc_now()
  if FLAGS.measure:
    size, seq, batch, recompute = FLAGS.measure.split(",")
    print(json.dumps(measure(size, int(seq), int(batch), recompute == "1",
                             FLAGS.mixed_precision, FLAGS.hparams)), flush=True)
    return 0
  unknown = sorted(set(FLAGS.model_sizes) - set(MODEL_SIZES))
  if unknown:
    raise ConfigError(f"--model_sizes: {unknown} not among {', '.join(MODEL_SIZES)}")
  seq_lengths, batch_sizes = _positive_ints("seq_lengths"), _positive_ints("batch_sizes")
  try:
    budgets = [float(v) for v in FLAGS.project_gb]
  except ValueError:
    raise ConfigError(f"--project_gb: {FLAGS.project_gb} must be numbers") from None
  if FLAGS.memory_budget_gb is not None and FLAGS.memory_budget_gb <= 0:
    raise ConfigError(f"--memory_budget_gb: {FLAGS.memory_budget_gb} must be > 0")
  if FLAGS.max_batch <= 0:
    raise ConfigError(f"--max_batch: {FLAGS.max_batch} must be > 0")
  if FLAGS.output:
    fileio.check_writable(os.path.dirname(os.path.abspath(FLAGS.output)), "--output")
  # Bad hparams fail here, once, not in every subprocess.
  pretraining_config(FLAGS.model_sizes[0], seq_lengths[0], batch_sizes[0], False,
                     FLAGS.mixed_precision, FLAGS.hparams)
  recomputes = {"off": [False], "on": [True], "both": [False, True]}[FLAGS.recompute]
  measurements, fits = [], []
  for size in FLAGS.model_sizes:
    for seq in seq_lengths:
      for recompute in recomputes:
        for batch in batch_sizes:
          figures = measure_in_subprocess(size, seq, batch, recompute)
          print(json.dumps(figures), file=sys.stderr, flush=True)
          measurements.append(figures)
        if FLAGS.memory_budget_gb is not None:
          fits.append(largest_fitting_batch(size, seq, recompute, FLAGS.memory_budget_gb,
                                            FLAGS.max_batch))
  device = next((m["device"] for m in measurements if "device" in m), None)
  result = {"device": device, "measurements": measurements,
            "projection": project(measurements, budgets)}
  if FLAGS.memory_budget_gb is not None:
    result["fits"] = fits
  print(json.dumps(result), flush=True)
  if FLAGS.output:
    record.write_record(FLAGS.output, result, started)
  return 0


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "electra_tf.bench.memory")
