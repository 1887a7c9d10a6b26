"""Scores more than one task family uses, as pure functions returning
fractions (the task scorers report them times 100, as official)."""

from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np


def accuracy(labels: Sequence, predictions: Sequence) -> float:
  """The fraction of equal items of two 1-D sequences of one length."""
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  return float(np.mean(labels == predictions))


def precision_recall_f1(n_correct: int, n_predicted: int, n_gold: int
                        ) -> Tuple[float, float, float]:
  """From counts; all three are 0 when nothing is correct (as official)."""
  if n_correct == 0:
    return 0.0, 0.0, 0.0
  precision, recall = n_correct / n_predicted, n_correct / n_gold
  return precision, recall, 2 * precision * recall / (precision + recall)
