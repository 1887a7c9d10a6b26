"""Masked training batches per second of the pre-training input pipeline."""

from __future__ import annotations

import time
from typing import Any, Dict

from electra_tf.measure.device import available_cores


def run_input_benchmark(file_patterns: str, batch_size: int, seq_length: int,
                        max_predictions_per_seq: int, mask_prob: float,
                        special, batches: int, warmup_batches: int) -> Dict[str, Any]:
  """Masked training batches per second from TFRecords (pretrain/data.py:
  read, checksum, decode, mask, batch, prefetch), after `warmup_batches`."""
  from electra_tf.pretrain import data as pretrain_data  # pylint: disable=g-import-not-at-top
  dataset = pretrain_data.get_dataset(
      file_patterns, batch_size=batch_size, max_seq_length=seq_length,
      max_predictions_per_seq=max_predictions_per_seq, mask_prob=mask_prob,
      special=special, is_training=True, seed=0)
  iterator = iter(dataset)
  for _ in range(warmup_batches):
    next(iterator)
  start = time.perf_counter()
  for _ in range(batches):
    next(iterator)
  seconds = time.perf_counter() - start
  cores = available_cores()
  seq_per_sec = batches * batch_size / seconds
  return {"mode": "input_only", "seq_per_sec": seq_per_sec,
          "seq_per_sec_per_core": seq_per_sec / cores, "cores": cores,
          "batch_size": batch_size, "seq_length": seq_length, "batches": batches,
          "seconds": seconds}
