"""Pre-training evaluation metrics of the official run_pretraining.py `metric_fn`.

`PretrainingMetrics` streams them over eval batches from host values (NumPy
sums and counts; per-threshold counts for the AUC): the model's
mlm_per_example_loss, mlm_preds, sampled_ids [B, N], disc_per_example_loss
[B], disc_probs, disc_preds, disc_labels [B, S] and the batch's
masked_lm_ids, masked_lm_weights [B, N], input_mask [B, S].  Weighted means
as tf.compat.v1.metrics: the masked-LM ones by masked_lm_weights,
disc_accuracy by input_mask, disc_precision / disc_recall by disc_preds /
disc_labels * input_mask; disc_auc with 200 thresholds, trapezoidal.
Additions disc_auc_real_tokens and disc_always_real_accuracy:
docs/faithfulness.md ("disc_auc and padding").
"""

from typing import Any, Dict, Mapping

import numpy as np

from electra_tf.config import DISC_WEIGHT

AUC_NUM_THRESHOLDS = 200
_AUC_THRESHOLD_SLACK = 1e-7  # tf.compat.v1.metrics.auc's end-point offset
_AUC_EPSILON = 1e-6  # tf.compat.v1.metrics.auc's guard against 0 / 0

MLM_METRICS = ("masked_lm_accuracy", "masked_lm_loss")
SAMPLING_METRICS = ("sampled_masked_lm_accuracy",)
DISC_METRICS = ("disc_loss", "disc_auc", "disc_accuracy", "disc_precision",
                "disc_recall", "disc_auc_real_tokens", "disc_always_real_accuracy")
_AUC_METRICS = ("disc_auc", "disc_auc_real_tokens")


def auc_thresholds(num_thresholds: int = AUC_NUM_THRESHOLDS) -> np.ndarray:
  """tf.compat.v1.metrics.auc thresholds [num_thresholds] float32, ascending.

  -1e-7, then (i + 1) / (num_thresholds - 1) for i < num_thresholds - 2, then
  1 + 1e-7; a prediction counts as positive at a threshold it exceeds.
  """
  inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
  return np.array([-_AUC_THRESHOLD_SLACK] + inner + [1.0 + _AUC_THRESHOLD_SLACK],
                  dtype=np.float32)


def confusion_counts(labels: np.ndarray, predictions: np.ndarray,
                     thresholds: np.ndarray) -> Dict[str, np.ndarray]:
  """tp, fn, tn, fp [T] int64 at each threshold for any-shaped inputs:
  labels positive where nonzero, predictions where above the threshold."""
  positive = np.asarray(labels).reshape(-1) != 0
  scores = np.asarray(predictions, dtype=np.float32).reshape(-1)
  # Number of thresholds strictly below each score: the score is positive at
  # thresholds [0, above) and negative from `above` on.
  above = np.searchsorted(thresholds, scores, side="left")

  def count_positive_at_each_threshold(above_subset):
    # Elements with above > j, for each threshold j: a reversed cumulative
    # histogram of `above`.
    histogram = np.bincount(above_subset, minlength=len(thresholds) + 1)
    return np.cumsum(histogram[::-1])[::-1][1:].astype(np.int64)

  tp = count_positive_at_each_threshold(above[positive])
  fp = count_positive_at_each_threshold(above[~positive])
  return {"tp": tp, "fn": np.int64(positive.sum()) - tp,
          "tn": np.int64((~positive).sum()) - fp, "fp": fp}


def roc_auc_from_counts(tp: np.ndarray, fn: np.ndarray, tn: np.ndarray,
                        fp: np.ndarray) -> float:
  """Trapezoidal ROC AUC from per-threshold counts, as tf.compat.v1.metrics.auc."""
  tp, fn, tn, fp = (np.asarray(x, dtype=np.float64) for x in (tp, fn, tn, fp))
  recall = (tp + _AUC_EPSILON) / (tp + fn + _AUC_EPSILON)
  fp_rate = fp / (fp + tn + _AUC_EPSILON)
  return float(np.sum((fp_rate[:-1] - fp_rate[1:]) * (recall[:-1] + recall[1:]) / 2))


def _weighted_sums(values: np.ndarray, weights: np.ndarray):
  values = np.asarray(values, dtype=np.float64).reshape(-1)
  weights = np.asarray(weights, dtype=np.float64).reshape(-1)
  return float(np.sum(values * weights)), float(np.sum(weights))


class PretrainingMetrics:
  """Streaming official pre-training eval metrics (see the module docstring)."""

  def __init__(self, electra_objective: bool = True, disc_weight: float = DISC_WEIGHT):
    """electra_objective: the model has a discriminator (official name)."""
    self.has_discriminator = electra_objective
    self.has_disc_metrics = self.has_discriminator and disc_weight > 0
    self.names = (MLM_METRICS + (SAMPLING_METRICS if self.has_discriminator else ())
                  + (DISC_METRICS if self.has_disc_metrics else ()))
    self._thresholds = auc_thresholds()
    self.reset()

  @classmethod
  def for_objective(cls, objective: Any) -> "PretrainingMetrics":
    """The metrics of an `objectives.Objective`'s outputs."""
    return cls(objective.has_discriminator, objective.disc_weight)

  def reset(self) -> None:
    # name -> [sum of weight * value, sum of weight]
    self._sums = {name: [0.0, 0.0] for name in ("loss",) + self.names
                  if name not in _AUC_METRICS}
    self._auc_counts = {name: {key: np.zeros(AUC_NUM_THRESHOLDS, np.int64)
                               for key in ("tp", "fn", "tn", "fp")}
                        for name in _AUC_METRICS}

  def _add(self, name: str, values, weights) -> None:
    total, weight = _weighted_sums(values, weights)
    self._sums[name][0] += total
    self._sums[name][1] += weight

  def add_batch_loss(self, loss: float) -> None:
    """Adds one eval batch's total loss (over all its replicas) to `loss`."""
    self._add("loss", [loss], [1.0])

  def update(self, outputs: Mapping[str, Any], batch: Mapping[str, Any]) -> None:
    """Adds one batch (NumPy arrays or eager tensors, shapes as documented)."""
    out = _Fetcher(outputs, "outputs")
    inp = _Fetcher(batch, "batch")
    masked_lm_ids = inp.get("masked_lm_ids")
    masked_lm_weights = inp.get("masked_lm_weights", masked_lm_ids.shape)
    self._add("masked_lm_accuracy",
              out.get("mlm_preds", masked_lm_ids.shape) == masked_lm_ids,
              masked_lm_weights)
    self._add("masked_lm_loss",
              out.get("mlm_per_example_loss", masked_lm_ids.shape),
              masked_lm_weights)
    if not self.has_discriminator:
      return
    self._add("sampled_masked_lm_accuracy",
              out.get("sampled_ids", masked_lm_ids.shape) == masked_lm_ids,
              masked_lm_weights)
    if not self.has_disc_metrics:
      return
    input_mask = inp.get("input_mask")
    labels = out.get("disc_labels", input_mask.shape)
    preds = out.get("disc_preds", input_mask.shape)
    probs = out.get("disc_probs", input_mask.shape).astype(np.float32)
    if probs.size and not (probs.min() >= 0.0 and probs.max() <= 1.0):
      raise ValueError("PretrainingMetrics.update: outputs['disc_probs'] must lie "
                       f"in [0, 1], got range [{probs.min()}, {probs.max()}]")
    per_example_loss = out.get("disc_per_example_loss", input_mask.shape[:1])
    self._add("disc_loss", per_example_loss, np.ones_like(per_example_loss))
    # Official quirk: labels and probabilities are multiplied by the input
    # mask instead of being weighted by it, so padding positions enter the ROC
    # as negatives with probability 0.
    real = input_mask != 0
    for name, counts in (
        ("disc_auc", confusion_counts(labels * input_mask,
                                      probs * input_mask.astype(np.float32),
                                      self._thresholds)),
        ("disc_auc_real_tokens", confusion_counts(labels[real], probs[real],
                                                  self._thresholds))):
      for key, value in counts.items():
        self._auc_counts[name][key] += value
    correct = preds == labels
    self._add("disc_accuracy", correct, input_mask)
    self._add("disc_precision", correct, preds * input_mask)
    self._add("disc_recall", correct, labels * input_mask)
    self._add("disc_always_real_accuracy", labels == 0, input_mask)

  def result(self) -> Dict[str, float]:
    """Metric name -> value over every batch since the last reset."""
    results = {name: total / weight if weight else 0.0
               for name, (total, weight) in self._sums.items()}
    if self.has_disc_metrics:
      for name in _AUC_METRICS:
        results[name] = roc_auc_from_counts(**self._auc_counts[name])
    loss = {"loss": results["loss"]} if self._sums["loss"][1] else {}
    return {**loss, **{name: results[name] for name in self.names}}


class _Fetcher:
  """Reads named arrays of one mapping, with one-line errors naming the key."""

  def __init__(self, values: Mapping[str, Any], source: str):
    self._values = values
    self._source = source

  def get(self, key: str, shape=None) -> np.ndarray:
    if key not in self._values:
      raise ValueError(f"PretrainingMetrics.update: {self._source} lacks "
                       f"{key!r} (has {sorted(self._values)})")
    value = np.asarray(self._values[key])
    if shape is not None and value.shape != tuple(shape):
      raise ValueError(f"PretrainingMetrics.update: {self._source}[{key!r}] has "
                       f"shape {value.shape}, expected {tuple(shape)}")
    return value


class RepresentationStats:
  """How spread out an encoder's token vectors are (an electra-tf diagnostic).

  Streams hidden states [B, S, H] with input_mask [B, S]; `result()` gives,
  over the real tokens, effective_rank (Roy & Vetterli, 2007) and
  mean_cosine of two distinct tokens.  docs/learning.md, "Does it learn?"."""

  def __init__(self, hidden_size: int):
    self.hidden_size = hidden_size
    self.count = 0
    self._sum = np.zeros(hidden_size)
    self._outer = np.zeros((hidden_size, hidden_size))
    self._unit_sum = np.zeros(hidden_size)

  def update(self, hidden: Any, input_mask: Any) -> None:
    hidden = np.asarray(hidden, dtype=np.float64)
    input_mask = np.asarray(input_mask)
    if hidden.ndim != 3 or hidden.shape[:2] != input_mask.shape or (
        hidden.shape[2] != self.hidden_size):
      raise ValueError(f"RepresentationStats.update: hidden {hidden.shape} and "
                       f"input_mask {input_mask.shape} are not [B, S, "
                       f"{self.hidden_size}] and [B, S]")
    vectors = hidden[input_mask != 0]  # [T, H]
    self.count += len(vectors)
    self._sum += vectors.sum(0)
    self._outer += vectors.T @ vectors
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    self._unit_sum += (vectors / np.maximum(norms, 1e-12)).sum(0)

  def result(self) -> Dict[str, float]:
    if self.count < 2:
      raise ValueError(f"RepresentationStats.result: {self.count} real tokens seen, "
                       "at least 2 needed")
    mean = self._sum / self.count
    covariance = self._outer / self.count - np.outer(mean, mean)
    eigenvalues = np.clip(np.linalg.eigvalsh(covariance), 0.0, None)
    p = eigenvalues[eigenvalues > 0] / eigenvalues.sum()
    # sum over pairs i != j of cos(i, j) = |sum of unit vectors|^2 - n
    pairs = self.count * (self.count - 1)
    return {"effective_rank": float(np.exp(-np.sum(p * np.log(p)))),
            "mean_cosine": float((self._unit_sum @ self._unit_sum - self.count) / pairs)}
