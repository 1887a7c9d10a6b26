"""Latency and throughput of an export's `text` signature against its ids
(`serving_default`) signature on the same inputs."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from electra_tf.errors import DataError
from electra_tf.measure.device import device_and_peak_memory_mb


def serving_inputs(vocab_file: str, batch_size: int, seq_length: int,
                   seed: int = 0) -> Tuple[List[str], Dict[str, np.ndarray]]:
  """`batch_size` texts of seq_length - 2 random whole-word vocab entries
  (lower-case ASCII letters: one piece each) and their featurization,
  int32 [batch_size, seq_length] input_ids ([CLS] words [SEP]), input_mask
  (ones), segment_ids (zeros)."""
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  vocab = tokenization.load_vocab(vocab_file)
  words = [token for token in vocab
           if token.isascii() and token.isalpha() and token.islower()]
  if not words:
    raise DataError(f"{vocab_file}: no whole-word entry to build texts from")
  rows = np.random.default_rng(seed).integers(0, len(words),
                                              size=[batch_size, seq_length - 2])
  texts = [" ".join(words[i] for i in row) for row in rows]
  input_ids = np.array([[vocab["[CLS]"]] + [vocab[words[i]] for i in row] +
                        [vocab["[SEP]"]] for row in rows], np.int32)
  return texts, {"input_ids": input_ids, "input_mask": np.ones_like(input_ids),
                 "segment_ids": np.zeros_like(input_ids)}


def time_calls(functions: Dict[str, Callable[[], Any]], calls: int,
               warmup_calls: int) -> Dict[str, List[float]]:
  """Seconds of `calls` calls of each function (which must block until
  done), the functions alternating (in turn first), after `warmup_calls`
  untimed calls of each."""
  names = list(functions)
  for _ in range(warmup_calls):
    for name in names:
      functions[name]()
  seconds: Dict[str, List[float]] = {name: [] for name in names}
  for call in range(calls):
    for name in names[call % len(names):] + names[:call % len(names)]:
      start = time.perf_counter()
      functions[name]()
      seconds[name].append(time.perf_counter() - start)
  return seconds


def run_serving_benchmark(export_dir: str, batch_size: int, seq_length: int,
                          steps: int, latency_calls: int,
                          warmup_calls: int) -> Dict[str, object]:
  """The JSON figures of --export_dir (docs/performance.md, "The benchmark's JSON")."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  from electra_tf import saved_model  # pylint: disable=g-import-not-at-top
  from electra_tf import text_graph  # pylint: disable=g-import-not-at-top
  loaded = tf.saved_model.load(export_dir)
  ids_signature = loaded.signatures["serving_default"]
  if text_graph.TEXT_SIGNATURE not in loaded.signatures:
    raise DataError(f"--export_dir: {export_dir} has no `text` signature")
  text_signature = loaded.signatures[text_graph.TEXT_SIGNATURE]
  text_names = sorted(text_signature.structured_input_signature[1])
  ids_names = sorted(ids_signature.structured_input_signature[1])
  if ids_names != sorted(saved_model.INPUT_NAMES) or text_names not in (
      ["text"], ["text_a"], ["text_a", "text_b"]):
    raise DataError(f"--export_dir: the benchmark times pre-training and "
                    f"classification exports; this text signature takes "
                    f"{', '.join(text_names)}")
  texts, ids = serving_inputs(
      os.path.join(export_dir, "assets", text_graph.VOCAB_ASSET), batch_size, seq_length)

  def runners(rows: int) -> Dict[str, Callable[[], Any]]:
    text_inputs = {text_names[0]: tf.constant(texts[:rows])}
    if "text_b" in text_names:  # "" packs [CLS] text_a [SEP], as the ids
      text_inputs["text_b"] = tf.constant([""] * rows)
    ids_inputs = {k: tf.constant(v[:rows]) for k, v in ids.items()}

    def call(signature, inputs):
      return lambda: [t.numpy() for t in signature(**inputs).values()]

    return {"text": call(text_signature, text_inputs),
            "ids": call(ids_signature, ids_inputs)}

  latency = time_calls(runners(1), latency_calls, warmup_calls)
  throughput = time_calls(runners(batch_size), steps, warmup_calls)
  result: Dict[str, object] = {}
  for name in ("text", "ids"):
    result[f"{name}_latency_ms_p50"] = 1000.0 * float(np.percentile(latency[name], 50))
    result[f"{name}_latency_ms_p99"] = 1000.0 * float(np.percentile(latency[name], 99))
    result[f"{name}_seq_per_sec"] = batch_size * steps / float(np.sum(throughput[name]))
  result["text_extra_cost"] = result["ids_seq_per_sec"] / result["text_seq_per_sec"] - 1.0
  result.update(device=device_and_peak_memory_mb()[0], batch_size=batch_size,
                seq_length=seq_length)
  return result
