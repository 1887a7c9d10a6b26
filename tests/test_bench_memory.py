"""The memory tool: its projection arithmetic, and the command's JSON."""

import json
import subprocess
import sys

import pytest

from electra_tf.measure import peak_memory as memory
from tests.conftest import command_python, run_command


def test_accumulation_for_picks_the_fewest_steps_that_divide_the_batch():
  assert memory.accumulation_for(256, 300) == 1
  assert memory.accumulation_for(256, 100) == 4  # 64 <= 100, 128 is not
  assert memory.accumulation_for(2048, 48) == 64  # 32 per micro-batch
  assert memory.accumulation_for(2048, 0) is None


def test_projection_fits_the_two_largest_batches():
  measured = [{"model_size": "base", "seq_length": 512, "recompute_layers": False,
               "batch_size": b, "peak_gb": 3.0 + 0.5 * b} for b in (1, 8, 32)]
  measured.append({"model_size": "base", "seq_length": 512, "recompute_layers": True,
                   "batch_size": 1, "error": "out of memory"})
  (row,) = memory.project(measured, [16.0, 40.0])
  assert row["fixed_gb"] == pytest.approx(3.0) and row["per_sequence_gb"] == pytest.approx(0.5)
  assert row["fit_batches"] == [8, 32] and row["official_batch"] == 256
  assert [(b["largest_micro_batch"], b["gradient_accumulation_steps"], b["micro_batch"])
          for b in row["budgets"]] == [(26, 16, 16), (74, 4, 64)]


@pytest.mark.slow
def test_memory_command_prints_json(tmp_path, repo_root):
  output = tmp_path / "memory.json"
  hparams = json.dumps({"debug": True, "vocab_size": 100, "embedding_size": 16})
  result = subprocess.run(
      [command_python(), "-m", "electra_tf.bench_memory", "--model_sizes=small",
       "--seq_lengths=16", "--batch_sizes=1,4", "--recompute=on", f"--hparams={hparams}",
       f"--output={output}"], cwd=repo_root, capture_output=True, text=True, check=True)
  printed = json.loads(result.stdout.strip().splitlines()[-1])
  written = json.loads(output.read_text())
  assert written["result"] == printed
  assert written["command"].startswith("python -m electra_tf.bench_memory --model_sizes=small")
  assert written["machine"]["cores"] >= 1 and written["date"] >= written["started"]
  assert [(m["batch_size"], m["recompute_layers"]) for m in printed["measurements"]] == [
      (1, True), (4, True)]
  for m in printed["measurements"]:
    assert 0 < m["built_gb"] <= m["peak_gb"] and m["step_gb"] >= 0
  assert printed["device"].startswith(("CPU", "1 x"))


def test_memory_command_that_measured_nothing_fails_with_one_line(tmp_path, monkeypatch):
  # Every measurement process fails (it is not even Python); the bisection's
  # probes too. In this process: only the measurements are subprocesses.
  monkeypatch.setattr(sys, "executable", "/bin/false")
  output = tmp_path / "memory.json"
  run = run_command("electra_tf.commands.bench_memory",
                    ["--model_sizes=small", "--seq_lengths=16", "--batch_sizes=1,4",
                     "--recompute=off", "--memory_budget_gb=1", "--max_batch=2",
                     f"--output={output}"], "electra_tf.bench_memory")
  assert run.returncode == 2
  assert run.stderr.splitlines()[-1] == (
      "electra_tf.bench_memory: error: every measurement failed, nothing was measured "
      "(the first: exit status 1)")
  # Each failed measurement is reported as it happens; no result is printed or written.
  assert [json.loads(line)["error"] for line in run.stderr.splitlines()[:-1]] == [
      "exit status 1"] * 2
  assert run.stdout == "" and not output.exists()
