"""The throughput benchmark: synthetic batches and the one-line JSON report."""

import json
import os
import subprocess

import numpy as np
import pytest

from electra_tf import flops
from electra_tf.measure import signature_speed
from electra_tf.measure import step as step_bench
from electra_tf.pretrain.config import PretrainingConfig
from tests.conftest import command_python

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_HPARAMS = {"vocab_size": 500, "embedding_size": 16,
                "model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 2}}


def run_benchmark_cli(*args):
  return subprocess.run([command_python(), "-m", "electra_tf.benchmark", *args],
                        cwd=REPO, capture_output=True, text=True, timeout=300)


def test_synthetic_batch_is_a_masked_batch():
  batch = step_bench.synthetic_batch(6, 40, 7, 300, seed=3)
  positions = batch["masked_lm_positions"]
  assert positions.shape == (6, 7) and positions.dtype == np.int32
  assert positions.min() >= 1 and positions.max() < 40
  assert all(len(set(row)) == 7 for row in positions)
  masked = np.take_along_axis(batch["input_ids"], positions, axis=1)
  np.testing.assert_array_equal(masked, 103)  # [MASK] in BERT's uncased vocab
  assert batch["masked_lm_ids"].max() < 300
  np.testing.assert_array_equal(batch["input_mask"], 1)
  np.testing.assert_array_equal(batch["masked_lm_weights"], 1.0)
  again = step_bench.synthetic_batch(6, 40, 7, 300, seed=3)
  for key, value in batch.items():
    np.testing.assert_array_equal(value, again[key])


@pytest.mark.slow
def test_benchmark_prints_the_json_report_with_the_model_garden_baseline(tmp_path):
  output = tmp_path / "results" / "step.json"
  result = run_benchmark_cli("--batch_size=4", "--seq_length=32", "--steps=2",
                             "--warmup_steps=1", f"--hparams={json.dumps(TINY_HPARAMS)}",
                             "--baseline=model_garden", "--pairs=3", "--json",
                             f"--json_output={output}")
  assert result.returncode == 0, result.stderr[-2000:]
  report = json.loads(result.stdout.strip().splitlines()[-1])
  # --json_output: the same object, with where, when and from which code.
  written = json.loads(output.read_text())
  assert written["result"] == report
  assert written["command"].startswith("python -m electra_tf.benchmark --batch_size=4 ")
  assert written["machine"]["cores"] >= 1 and written["started"] <= written["date"]
  config = PretrainingConfig.create(dict(TINY_HPARAMS, train_batch_size=4,
                                         max_seq_length=32))
  assert report["flops_per_seq"] == flops.flops_per_seq(config)
  assert report["seq_per_sec"] > 0 and report["baseline_seq_per_sec"] > 0
  np.testing.assert_allclose(report["step_ms"] * report["seq_per_sec"], 4000.0, rtol=1e-9)
  np.testing.assert_allclose(report["achieved_tflops"],
                             report["flops_per_seq"] * report["seq_per_sec"] / 1e12,
                             rtol=1e-9)
  # Three alternating pairs: the speedup is the median of their ratios.
  assert report["pairs"] == 3 and len(report["pair_speedups"]) == 3
  assert report["speedup"] == sorted(report["pair_speedups"])[1]
  assert report["peak_memory_mb"] > 0
  assert report["device"].startswith(("CPU", "1 x", "2 x", "4 x", "8 x"))
  assert (report["precision"], report["baseline_precision"]) == ("float32", "float32")


@pytest.mark.slow
def test_benchmark_names_both_precisions_in_bfloat16():
  """Ours under --mixed_precision=bfloat16, Model Garden's encoders in
  bfloat16 by --baseline_precision (its sampling stays float32)."""
  result = run_benchmark_cli("--batch_size=4", "--seq_length=32", "--steps=1",
                             "--warmup_steps=1", f"--hparams={json.dumps(TINY_HPARAMS)}",
                             "--baseline=model_garden", "--pairs=1",
                             "--mixed_precision=bfloat16", "--baseline_precision=bfloat16")
  assert result.returncode == 0, result.stderr[-2000:]
  lines = result.stdout.strip().splitlines()
  report = json.loads(lines[-1])
  assert (report["precision"], report["baseline_precision"]) == ("bfloat16", "bfloat16")
  assert report["baseline_seq_per_sec"] > 0
  assert lines[-2].startswith("Model Garden (bfloat16): ")


@pytest.mark.slow
def test_profile_dir_writes_a_trace_and_ranks_the_op_types(tmp_path):
  result = run_benchmark_cli("--batch_size=4", "--seq_length=32", "--steps=2",
                             "--warmup_steps=1", f"--hparams={json.dumps(TINY_HPARAMS)}",
                             f"--profile_dir={tmp_path}", "--json")
  assert result.returncode == 0, result.stderr[-2000:]
  report = json.loads(result.stdout.strip().splitlines()[-1])
  traces = list(tmp_path.glob("plugins/profile/*/*.xplane.pb"))
  assert len(traces) == 1
  top = report["profile_top_ops"]
  times = [ms for _, ms in top]
  assert times == sorted(times, reverse=True) and times[-1] > 0
  op_types = [op_type for op_type, _ in top]
  # The dense layers' matmuls: MatMul, or _MklMatMul where TensorFlow turns
  # oneDNN on by itself (CPUs with AVX-512).
  assert {"MatMul", "_MklMatMul"} & set(op_types) and len(set(op_types)) == len(op_types)
  # The ranking is the trace's own op-type totals, per step.
  seconds = step_bench.op_seconds_by_type(str(tmp_path))
  np.testing.assert_allclose(times[0], 1000.0 * max(seconds.values()) / 2, rtol=1e-9)


def test_op_seconds_by_type_needs_a_trace(tmp_path):
  with pytest.raises(ValueError, match="no tf.profiler trace"):
    step_bench.op_seconds_by_type(str(tmp_path))


@pytest.mark.slow
def test_bad_flag_is_a_one_line_error():
  result = run_benchmark_cli("--batch_size=0", "--json")
  assert result.returncode != 0
  assert result.stderr.strip() == "electra_tf.benchmark: error: --batch_size: 0 must be > 0"
  assert result.stdout == ""


SERVING_WORDS = ("alpha", "beta", "gamma", "delta", "omega", "kappa")


def _serving_vocab(path):
  from electra_tf import tokenization
  path.write_text("".join(t + "\n" for t in tokenization.SPECIAL_TOKENS +
                          ("##s", "7", "Upper") + SERVING_WORDS), encoding="utf-8")
  return path


def test_serving_inputs_are_one_piece_words_and_their_ids(tmp_path):
  from electra_tf import tokenization
  vocab = _serving_vocab(tmp_path / "vocab.txt")
  texts, ids = signature_speed.serving_inputs(str(vocab), 3, 9, seed=1)
  tokenizer = tokenization.FullTokenizer(str(vocab))
  assert len(texts) == 3 and all(len(t.split()) == 7 for t in texts)
  assert all(set(t.split()) <= set(SERVING_WORDS) for t in texts)
  expected = [tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize(t) + ["[SEP]"])
              for t in texts]
  np.testing.assert_array_equal(ids["input_ids"], expected)
  assert ids["input_ids"].shape == (3, 9) and ids["input_ids"].dtype == np.int32
  np.testing.assert_array_equal(ids["input_mask"], 1)
  np.testing.assert_array_equal(ids["segment_ids"], 0)


def test_time_calls_alternates_and_times_every_call():
  order = []
  seconds = signature_speed.time_calls({"a": lambda: order.append("a"),
                                    "b": lambda: order.append("b")}, calls=3, warmup_calls=1)
  assert order == ["a", "b", "a", "b", "b", "a", "a", "b"]
  assert [len(v) for v in seconds.values()] == [3, 3]
  assert all(s >= 0 for v in seconds.values() for s in v)


@pytest.mark.slow
def test_serving_benchmark_times_text_and_ids_signatures(tmp_path):
  from electra_tf import saved_model, tokenization
  from electra_tf.pretrain.model import build_model
  vocab = _serving_vocab(tmp_path / "vocab.txt")
  config = PretrainingConfig.create({
      "vocab_size": len(tokenization.load_vocab(str(vocab))), "embedding_size": 8,
      "max_seq_length": 16, "model_hparam_overrides": {
          "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}})
  model = build_model(config)
  saved_model.export_saved_model(model, str(tmp_path / "text"),
                                tokenizer=tokenization.FullTokenizer(str(vocab)),
                                max_seq_length=16)
  result = run_benchmark_cli(f"--export_dir={tmp_path / 'text'}", "--batch_size=4",
                             "--seq_length=16", "--steps=3", "--latency_calls=5",
                             "--warmup_steps=1", "--json")
  assert result.returncode == 0, result.stderr[-2000:]
  report = json.loads(result.stdout.strip().splitlines()[-1])
  for name in ("text", "ids"):
    assert 0 < report[f"{name}_latency_ms_p50"] <= report[f"{name}_latency_ms_p99"]
    assert report[f"{name}_seq_per_sec"] > 0
  np.testing.assert_allclose(report["text_extra_cost"],
                             report["ids_seq_per_sec"] / report["text_seq_per_sec"] - 1,
                             rtol=1e-9)
  assert (report["batch_size"], report["seq_length"]) == (4, 16)
  assert report["device"].startswith(("CPU", "1 x"))
  saved_model.export_saved_model(model, str(tmp_path / "ids_only"))
  result = run_benchmark_cli(f"--export_dir={tmp_path / 'ids_only'}", "--json")
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1] == (
      f"electra_tf.benchmark: error: --export_dir: {tmp_path / 'ids_only'} has no "
      "`text` signature")
