"""The memory tool: its projection arithmetic, and the command's JSON."""

import json
import subprocess
import sys

import pytest

from electra_tf.bench import peak_memory as memory


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
      [sys.executable, "-m", "electra_tf.bench.memory", "--model_sizes=small",
       "--seq_lengths=16", "--batch_sizes=1,4", "--recompute=on", f"--hparams={hparams}",
       f"--output={output}"], cwd=repo_root, capture_output=True, text=True, check=True)
  printed = json.loads(result.stdout.strip().splitlines()[-1])
  written = json.loads(output.read_text())
  assert written["result"] == printed
  assert written["command"].startswith("python -m electra_tf.bench.memory --model_sizes=small")
  assert written["machine"]["cores"] >= 1 and written["date"] >= written["started"]
  assert [(m["batch_size"], m["recompute_layers"]) for m in printed["measurements"]] == [
      (1, True), (4, True)]
  for m in printed["measurements"]:
    assert 0 < m["built_gb"] <= m["peak_gb"] and m["step_gb"] >= 0
  assert printed["device"].startswith(("CPU", "1 x"))
