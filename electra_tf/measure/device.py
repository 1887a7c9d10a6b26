"""The device a benchmark ran on, and the peak memory so far."""

from __future__ import annotations

import os
import resource
from typing import Tuple


def available_cores() -> int:
  """The cores this process may run on (`taskset` narrows them)."""
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def device_and_peak_memory_mb() -> Tuple[str, float]:
  """The device in words and the peak memory so far (GPU allocator or RSS)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  gpus = tf.config.list_physical_devices("GPU")
  if gpus:
    name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
    peak = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
    return f"{len(gpus)} x {name}", peak
  cpu = "CPU"
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    if models:
      cpu = models[0]
  except OSError:
    pass
  # ru_maxrss is in KiB on Linux.
  return f"CPU: {cpu} ({available_cores()} cores)", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
