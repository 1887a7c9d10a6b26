r"""Peak memory of the pre-training step, and the largest micro-batch that fits.

    python -m electra_tf.bench_memory [--model_sizes=small,base,large] \
        [--seq_lengths=128,512] [--batch_sizes=1,8,32] [--recompute=both] \
        [--mixed_precision=bfloat16|float16] [--memory_budget_gb=G] \
        [--max_batch=1024] [--project_gb=16,40,80] [--output=FILE.json]

Each configuration runs ONE full train step in a fresh process; the last
line printed is one JSON object {"device", "measurements", "fits" (with
--memory_budget_gb), "projection"}.  A configuration whose process fails is
reported with "error"; when all fail, one error line (exit status 2).  What
is measured and projected: docs/big_batches.md.  The measurements:
electra_tf/measure/peak_memory.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict, List

from absl import flags

from electra_tf import cli
from electra_tf import fileio
from electra_tf.config import MODEL_SIZES
from electra_tf.errors import ConfigError, TrainingError
from electra_tf.measure import peak_memory
from electra_tf.measure import record

FLAGS = flags.FLAGS


def define_flags() -> None:
  flags.DEFINE_list("model_sizes", list(MODEL_SIZES), "Model sizes to measure.")
  flags.DEFINE_list("seq_lengths", ["128", "512"], "Sequence lengths.")
  flags.DEFINE_list("batch_sizes", ["1", "8", "32"], "Micro-batch sizes.")
  flags.DEFINE_enum("recompute", "both", ["off", "on", "both"],
                    "recompute_layers off, on, or both.")
  cli.define_shared_flag("mixed_precision")
  cli.define_shared_flag("hparams")
  flags.DEFINE_float("memory_budget_gb", None,
                     "Also find by bisection the largest micro-batch within this peak.")
  flags.DEFINE_integer("max_batch", 1024, "Largest micro-batch the bisection tries.")
  flags.DEFINE_list("project_gb", ["16", "40", "80"],
                    "Memory budgets (GB) of the micro-batch / accumulation projection.")
  flags.DEFINE_string("output", None,
                      "Also write the JSON object to this file, in a record with the command "
                      "line, date, machine and git commit (electra_tf/measure/record.py).")
  flags.DEFINE_string("measure", None,
                      "Internal: SIZE,SEQ,BATCH,RECOMPUTE (0/1) measured in this "
                      "process; prints one JSON line.")


def measure_in_subprocess(model_size: str, seq_length: int, batch_size: int,
                          recompute: bool) -> Dict[str, Any]:
  """`peak_memory.measure` in a fresh process (this command with --measure);
  {"error": ...} when that process fails."""
  command = [sys.executable, "-m", "electra_tf.bench_memory",
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
    print(json.dumps(peak_memory.measure(size, int(seq), int(batch), recompute == "1",
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
  peak_memory.pretraining_config(FLAGS.model_sizes[0], seq_lengths[0], batch_sizes[0], False,
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
  failed = [m["error"] for m in measurements if "error" in m]
  if measurements and len(failed) == len(measurements):
    raise TrainingError(f"every measurement failed, nothing was measured (the first: "
                        f"{failed[0]})")
  device = next((m["device"] for m in measurements if "device" in m), None)
  result = {"device": device, "measurements": measurements,
            "projection": peak_memory.project(measurements, budgets)}
  if FLAGS.memory_budget_gb is not None:
    result["fits"] = fits
  print(json.dumps(result), flush=True)
  if FLAGS.output:
    record.write_record(FLAGS.output, result, started)
  return 0


def run() -> None:
  """The command (console script and python -m electra_tf.bench_memory)."""
  define_flags()
  cli.run(main, "electra_tf.bench_memory")


if __name__ == "__main__":
  run()
