"""Metrics of the official GLUE scorers, as pure functions.

Inputs are 1-D sequences of equal length N: Matthews correlation (the
scikit-learn definition the official CoLA scorer calls), precision/recall/F1
of one positive label, Pearson and Spearman correlation (scipy.stats, as
official).  They return fractions (accuracy: finetune/metrics.py).
"""

from __future__ import annotations

import warnings
from typing import Sequence, Tuple

import numpy as np
import scipy.stats

from electra_tf.finetune.metrics import precision_recall_f1


def matthews_corrcoef(labels: Sequence, predictions: Sequence) -> float:
  """Multi-class MCC from the confusion matrix; 0 when it is undefined."""
  classes, encoded = np.unique(np.concatenate(
      [np.asarray(labels), np.asarray(predictions)]), return_inverse=True)
  n = len(labels)
  confusion = np.zeros((len(classes), len(classes)), np.float64)
  np.add.at(confusion, (encoded[:n], encoded[n:]), 1.0)
  true_counts, predicted_counts = confusion.sum(1), confusion.sum(0)
  correct, total = np.trace(confusion), confusion.sum()
  covariance = correct * total - np.dot(true_counts, predicted_counts)
  variance_true = total ** 2 - np.dot(true_counts, true_counts)
  variance_predicted = total ** 2 - np.dot(predicted_counts, predicted_counts)
  if variance_true * variance_predicted == 0:
    return 0.0
  return float(covariance / np.sqrt(variance_true * variance_predicted))


def binary_precision_recall_f1(labels: Sequence, predictions: Sequence,
                               positive_label=1) -> Tuple[float, float, float]:
  """Precision, recall and F1 of `positive_label` (GLUE's MRPC/QQP F1)."""
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  predicted = predictions == positive_label
  gold = labels == positive_label
  return precision_recall_f1(int(np.sum(predicted & gold)),
                             int(np.sum(predicted)), int(np.sum(gold)))


def pearson(labels: Sequence[float], predictions: Sequence[float]) -> float:
  """Pearson r; NaN when either side is constant."""
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return float(scipy.stats.pearsonr(labels, predictions)[0])


def spearman(labels: Sequence[float], predictions: Sequence[float]) -> float:
  """Spearman rho (Pearson r of average ranks); NaN when constant."""
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return float(scipy.stats.spearmanr(labels, predictions)[0])
