"""A measurement's record: where, when and from which code a figure came.

The benchmark commands' `--json_output=FILE` (`--output` of
`electra_tf.bench_memory`) writes {"command": the command line, "date" /
"started": UTC ISO times of the end / start, "machine": {"cpu", "cores",
"cpu_flags" (avx2, avx512f, avx512_bf16, amx_bf16), "gpus", "memory_gb",
"load_average" (1, 5, 15 minutes, at the end), "cpus" (the machine's) and
"cores" (this process may use)}, "commit" (with "+changes" when tracked
files differ), "result": what the command printed}.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import subprocess
import sys
from typing import Any, Dict, Mapping, Optional, Sequence

from electra_tf import fileio

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def utc_now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def machine(cpuinfo: str = "/proc/cpuinfo", meminfo: str = "/proc/meminfo") -> Dict[str, Any]:
  """The CPU model, its cores (this process's), speed-relevant flags, GPUs
  (nvidia-smi's names, when there is one), memory and load."""
  from electra_tf.measure.device import available_cores  # pylint: disable=g-import-not-at-top
  cpu, flags_present, memory_gb = None, [], None
  try:
    with open(cpuinfo, encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and cpu is None:
          cpu = value.strip()
        elif key == "flags" and not flags_present:
          present = set(value.split())
          flags_present = [name for name in SPEED_FLAGS if name in present]
  except OSError:
    pass
  try:
    with open(meminfo, encoding="utf-8") as f:
      for line in f:
        if line.startswith("MemTotal:"):
          memory_gb = round(int(line.split()[1]) / 2**20, 1)
          break
  except OSError:
    pass
  gpus = []
  try:
    listed = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                            capture_output=True, text=True, check=False, timeout=30)
    if listed.returncode == 0:
      gpus = [line.strip() for line in listed.stdout.splitlines() if line.strip()]
  except (OSError, subprocess.SubprocessError):
    pass
  load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
  return {"cpu": cpu, "cpus": os.cpu_count(), "cores": available_cores(),
          "cpu_flags": flags_present, "gpus": gpus,
          "memory_gb": memory_gb, "load_average": load}


def commit(repo: pathlib.Path = REPO) -> Optional[str]:
  """The checkout's commit, "+changes" appended when tracked files differ;
  None outside a git checkout."""
  try:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=False, timeout=30)
    if head.returncode != 0:
      return None
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=repo, capture_output=True, text=True, check=False, timeout=30)
  except (OSError, subprocess.SubprocessError):
    return None
  return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def command_line(argv: Optional[Sequence[str]] = None) -> str:
  """`python -m MODULE ARGS` (or `python SCRIPT ARGS`) as it was run."""
  argv = list(sys.argv if argv is None else argv)
  main = sys.modules.get("__main__")
  spec = getattr(main, "__spec__", None)
  program = f"-m {spec.name}" if spec is not None and spec.name else (argv[0] if argv else "")
  return " ".join(["python", program, *argv[1:]]).strip()


def make_record(result: Mapping[str, Any], started: str,
                argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  return {"command": command_line(argv), "started": started, "date": utc_now(),
          "machine": machine(), "commit": commit(), "result": dict(result)}


def write_record(path: str, result: Mapping[str, Any], started: str,
                 argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
  """Writes the record of `result` to `path` atomically; returns it."""
  import json  # pylint: disable=g-import-not-at-top
  record = make_record(result, started, argv)
  fileio.atomic_write_text(path, json.dumps(record, indent=2) + "\n")
  return record
