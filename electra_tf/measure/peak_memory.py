"""Peak memory of the pre-training step, measured in this process, and the
largest micro-batch a memory budget fits, projected from measurements (the
command, `python -m electra_tf.bench_memory`: electra_tf/commands/bench_memory.py)."""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Sequence

from electra_tf.config import parse_hparams

GB = 2.0 ** 30


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
  from electra_tf.measure import device as device_lib  # pylint: disable=g-import-not-at-top
  from electra_tf.measure import step as step_bench  # pylint: disable=g-import-not-at-top
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
