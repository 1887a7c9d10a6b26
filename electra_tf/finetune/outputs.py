"""Result files of fine-tuning, all written atomically.

In `config.results_dir`: <task>_<split>_metrics.json, _predictions.tsv,
tables, the official <tasks>_results.txt / .pkl and span-QA
<tasks>_qa/<task>_{preds,null_odds,eval}.json; with write_test_outputs the
official test files.  The layout: docs/finetuning.md.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import statistics
from typing import Dict, List, Mapping, Sequence

from electra_tf.errors import DataError
from electra_tf.fileio import atomic_write_bytes, atomic_write_text
from electra_tf.finetune.config import FinetuningConfig
from electra_tf.finetune.task import EvalResult

# One trial's results: task name -> metric name -> value.
TrialResults = Mapping[str, Mapping[str, float]]


def metrics_path(results_dir: str, task_name: str, split: str = "dev") -> str:
  return os.path.join(results_dir, f"{task_name}_{split}_metrics.json")


def predictions_path(results_dir: str, task_name: str, split: str) -> str:
  return os.path.join(results_dir, f"{task_name}_{split}_predictions.tsv")


def merge_metrics(results: Mapping[str, EvalResult],
                  prefixes: Mapping[str, str]) -> Dict[str, float]:
  """Metrics of several splits in one dict, each under its split's prefix."""
  merged = {}
  for split, result in results.items():
    merged.update({prefixes[split] + k: v for k, v in result.metrics.items()})
  return merged


def write_metrics_json(path: str, metrics: Mapping[str, float],
                       trial: int) -> None:
  values = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in metrics.items()}
  values["trial"] = trial
  _makedirs_for(path)
  atomic_write_text(path, json.dumps(values, indent=2) + "\n")


def write_predictions_tsv(path: str, result: EvalResult) -> None:
  lines = [f"{result.key_name}\tprediction"]
  for key, prediction in result.predictions:
    lines.append(f"{key}\t{' '.join(prediction.splitlines()).replace(chr(9), ' ')}")
  _makedirs_for(path)
  atomic_write_text(path, "\n".join(lines) + "\n")


def table_path(results_dir: str, task_name: str, split: str, table: str) -> str:
  return os.path.join(results_dir, f"{task_name}_{split}_{table}.tsv")


def write_tables(results_dir: str, task_name: str, split: str,
                 result: EvalResult) -> None:
  """Each of result.tables as `table_path(...)`."""
  for table, text in result.tables.items():
    path = table_path(results_dir, task_name, split, table)
    _makedirs_for(path)
    atomic_write_text(path, text)


def write_qa_files(config: FinetuningConfig, task_name: str,
                   result: EvalResult, results_dir: str) -> None:
  """The official span-QA files of `result` under `results_dir`:
  qa_preds_file, and for SQuAD 2.0 qa_na_file and, on a scored split,
  qa_eval_file (the v2.0 script's output); nothing for other tasks."""
  if result.qa_preds is None:
    return
  _write_json(config.qa_preds_file(task_name, results_dir), result.qa_preds)
  if result.qa_null_odds is not None:
    _write_json(config.qa_na_file(task_name, results_dir),
                {k: float(v) for k, v in result.qa_null_odds.items()})
    if result.metrics:
      _write_json(config.qa_eval_file(task_name, results_dir), result.metrics)


def write_official_test_outputs(config: FinetuningConfig, task_name: str,
                                split: str, trial: int, result: EvalResult,
                                results_dirs: Sequence[str]) -> None:
  """What the official run_finetuning writes for a test split, where it does:
  GLUE a pickle of {example id: logits}; SQuAD 2.0 the test answers and
  null odds in qa_preds_file / qa_na_file and the thresholded answers as
  JSON in the `.pkl`-named file (official quirks); other tasks nothing."""
  path = config.test_predictions(task_name, split, trial)
  if result.example_outputs is not None:
    _makedirs_for(path)
    atomic_write_bytes(path, pickle.dumps(result.example_outputs,
                                          pickle.HIGHEST_PROTOCOL))
  elif result.qa_null_odds is not None:
    for directory in results_dirs:
      write_qa_files(config, task_name, result, directory)
    _write_json(path, dict(result.predictions))


def _write_json(path: str, value) -> None:
  """Official utils.write_json: `json.dump` with default separators."""
  _makedirs_for(path)
  atomic_write_text(path, json.dumps(value))


def results_text(results: Sequence[TrialResults]) -> str:
  """The official results txt: one line per trial and task."""
  lines = []
  for trial_results in results:
    for task_name, task_results in trial_results.items():
      lines.append(task_name + ": " + " - ".join(
          f"{k}: {v:.2f}" for k, v in task_results.items()))
  return "".join(line + "\n" for line in lines)


def write_results(config: FinetuningConfig,
                  results: Sequence[TrialResults]) -> None:
  """Writes config.results_txt and config.results_pkl (official format)."""
  _makedirs_for(config.results_txt)
  atomic_write_text(config.results_txt, results_text(results))
  _makedirs_for(config.results_pkl)
  atomic_write_bytes(config.results_pkl, pickle.dumps(
      [{t: dict(m) for t, m in r.items()} for r in results]))


def load_results(config: FinetuningConfig) -> List[Dict[str, Dict[str, float]]]:
  """The trials recorded in config.results_pkl so far ([] when absent)."""
  if not os.path.isfile(config.results_pkl):
    return []
  with open(config.results_pkl, "rb") as f:
    results = pickle.load(f)
  if not isinstance(results, list) or not all(isinstance(r, dict)
                                              for r in results):
    raise DataError(f"{config.results_pkl}: not a fine-tuning results file "
                    "(expected a list of per-trial dicts)")
  return results


def results_table(results: Sequence[TrialResults]) -> str:
  """Mean and median of every task metric over the trials, as a text table."""
  values: Dict[tuple, List[float]] = {}
  for trial_results in results:
    for task_name, task_results in trial_results.items():
      for metric, value in task_results.items():
        values.setdefault((task_name, metric), []).append(float(value))
  rows = [("task", "metric", "mean", "median", "trials")]
  for (task_name, metric), trial_values in values.items():
    rows.append((task_name, metric, f"{statistics.fmean(trial_values):.2f}",
                 f"{statistics.median(trial_values):.2f}",
                 str(len(trial_values))))
  widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
  return "\n".join("  ".join(cell.ljust(width) for cell, width in
                             zip(row, widths)).rstrip() for row in rows)


def _makedirs_for(path: str) -> None:
  directory = os.path.dirname(path)
  if directory:
    os.makedirs(directory, exist_ok=True)
