"""Metric functions against independent NumPy references and hand-checked cases."""

import numpy as np
import pytest

from electra_tf.finetune import metrics
from electra_tf.finetune.classification import classification_metrics
from electra_tf.finetune.qa import qa_metrics
from electra_tf.finetune.tagging import spans as spans_lib
from electra_tf.finetune.tagging import tagging_metrics


def _confusion_mcc(labels, predictions):
  """Binary MCC from TP/TN/FP/FN (textbook formula)."""
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  tp = np.sum((labels == 1) & (predictions == 1))
  tn = np.sum((labels == 0) & (predictions == 0))
  fp = np.sum((labels == 0) & (predictions == 1))
  fn = np.sum((labels == 1) & (predictions == 0))
  return (tp * tn - fp * fn) / np.sqrt(float((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))


def _average_ranks(x):
  x = np.asarray(x, float)
  order = np.argsort(x, kind="stable")
  ranks = np.empty(len(x))
  ranks[order] = np.arange(1, len(x) + 1)
  for value in np.unique(x):  # ties share their mean rank
    ranks[x == value] = ranks[x == value].mean()
  return ranks


def test_classification_metrics_on_fixed_predictions():
  rng = np.random.RandomState(0)
  labels = rng.randint(0, 2, 200)
  predictions = np.where(rng.rand(200) < 0.8, labels, 1 - labels)
  assert metrics.accuracy(labels, predictions) == pytest.approx(np.mean(labels == predictions))
  assert classification_metrics.matthews_corrcoef(labels, predictions) == pytest.approx(
      _confusion_mcc(labels, predictions), abs=1e-12)
  tp = np.sum((labels == 1) & (predictions == 1))
  p, r = tp / np.sum(predictions == 1), tp / np.sum(labels == 1)
  assert classification_metrics.binary_precision_recall_f1(labels, predictions) == pytest.approx(
      (p, r, 2 * p * r / (p + r)))
  # hand-checked: labels 1100, preds 1010 -> TP 1, FP 1, FN 1, TN 1
  assert classification_metrics.matthews_corrcoef([1, 1, 0, 0], [1, 0, 1, 0]) == 0.0
  assert classification_metrics.binary_precision_recall_f1([1, 1, 0, 0], [1, 0, 1, 0]) == (0.5, 0.5, 0.5)
  assert classification_metrics.matthews_corrcoef([1, 0, 1], [1, 0, 1]) == pytest.approx(1.0)
  # constant predictions: MCC undefined -> 0 (scikit-learn's convention)
  assert classification_metrics.matthews_corrcoef([1, 0, 1], [1, 1, 1]) == 0.0
  assert classification_metrics.binary_precision_recall_f1([0, 0], [0, 0]) == (0.0, 0.0, 0.0)


def test_multiclass_mcc_matches_covariance_definition():
  labels = np.array([0, 1, 2, 2, 1, 0, 2, 1, 1, 0])
  predictions = np.array([0, 2, 2, 2, 1, 0, 1, 1, 0, 0])
  onehot_l, onehot_p = np.eye(3)[labels], np.eye(3)[predictions]
  cov = lambda a, b: np.sum((a - a.mean(0)) * (b - b.mean(0)))
  expected = cov(onehot_l, onehot_p) / np.sqrt(cov(onehot_l, onehot_l) * cov(onehot_p, onehot_p))
  assert classification_metrics.matthews_corrcoef(labels, predictions) == pytest.approx(expected)


def test_correlations_match_numpy():
  rng = np.random.RandomState(1)
  labels = np.round(rng.rand(100) * 5, 1)  # ties, like STS scores
  predictions = labels + rng.randn(100)
  assert classification_metrics.pearson(labels, predictions) == pytest.approx(
      np.corrcoef(labels, predictions)[0, 1])
  assert classification_metrics.spearman(labels, predictions) == pytest.approx(
      np.corrcoef(_average_ranks(labels), _average_ranks(predictions))[0, 1])
  assert np.isnan(classification_metrics.pearson(labels, np.ones(100)))


def test_squad_normalization_exact_and_f1_by_hand():
  assert qa_metrics.normalize_answer("The  Denver Broncos!") == "denver broncos"
  assert qa_metrics.normalize_answer("an apple, a pear") == "apple pear"
  assert qa_metrics.squad_v1_exact("Denver Broncos", "the denver broncos.") == 1.0
  # prediction "denver broncos team" vs gold "broncos": P 1/3, R 1, F1 0.5
  assert qa_metrics.squad_v1_f1("Broncos", "Denver Broncos team") == pytest.approx(0.5)
  assert qa_metrics.squad_v1_f1("Santa Clara", "Levi's Stadium") == 0.0
  # empty sides: v1 scores 0, v2 scores 1 only when both are empty
  assert qa_metrics.squad_v1_f1("", "") == 0.0
  assert qa_metrics.squad_v2_f1("", "") == 1.0
  assert qa_metrics.squad_v2_f1("", "x") == 0.0
  assert qa_metrics.squad_v2_f1("the", "") == 1.0  # normalises to nothing


def test_evaluate_squad_v1_takes_max_over_answers():
  gold = {"q1": ["Denver Broncos", "Broncos"], "q2": ["1990"], "q3": ["Paris"]}
  predictions = {"q1": "the Broncos", "q2": "in 1990 and 1991"}  # q3 missing
  result = qa_metrics.evaluate_squad_v1(gold, predictions)
  # q1 exact (matches "Broncos"); q2 F1: P 1/4 ("in","1990","and","1991"), R 1 -> 0.4
  assert result["exact_match"] == pytest.approx(100.0 / 3)
  assert result["f1"] == pytest.approx(100.0 * (1 + 0.4) / 3)


def test_evaluate_squad_v2_threshold_and_best_threshold():
  gold = {"a": ["cat"], "b": [], "c": ["red dog"]}
  predictions = {"a": "cat", "b": "mouse", "c": "dog"}
  na_probs = {"a": -5.0, "b": 1.0, "c": -1.0}
  result = qa_metrics.evaluate_squad_v2(gold, predictions, na_probs, na_prob_thresh=0.0)
  # a: exact 1; b: na 1.0 > 0 -> predicted no answer, correct -> 1;
  # c: exact 0, F1 2/3 (P 1, R 1/2)
  assert result["exact"] == pytest.approx(200.0 / 3)
  assert result["f1"] == pytest.approx(100.0 * (2 + 2 / 3) / 3)
  assert (result["HasAns_total"], result["NoAns_total"], result["total"]) == (2, 1, 3)
  assert result["HasAns_exact"] == pytest.approx(50.0)
  assert result["NoAns_f1"] == pytest.approx(100.0)
  # best threshold over raw scores: start at 1 (one no-answer question);
  # sorted by na prob: a (+1) -> 2, c (+0 exact) -> 2, b (predicted, -1)
  assert result["best_exact"] == pytest.approx(200.0 / 3)
  assert result["best_exact_thresh"] == -5.0
  assert result["best_f1"] == pytest.approx(100.0 * (2 + 2 / 3) / 3)
  assert result["best_f1_thresh"] == -1.0
  assert list(result) == sorted(result)


def test_span_labels_and_tags_round_trip():
  tags = ["B-NP", "I-NP", "O", "B-VP", "B-NP", "I-NP", "I-NP", "O", "B-PP"]
  spans = spans_lib.chunk_spans(tags)
  assert spans == [(0, 1, "NP"), (3, 3, "VP"), (4, 6, "NP"), (8, 8, "PP")]
  bioes = spans_lib.encode(spans, len(tags), "BIOES")
  assert bioes == ["B-NP", "E-NP", "O", "S-VP", "B-NP", "I-NP", "E-NP", "O", "S-PP"]
  assert spans_lib.chunk_spans(bioes) == spans
  assert spans_lib.encode(spans, len(tags), "BIO") == tags
  # official handling of malformed sequences: I- after O opens a chunk,
  # a type change inside I- does not split it
  assert spans_lib.chunk_spans(["O", "I-NP", "I-VP"]) == [(1, 2, "VP")]
  assert spans_lib.chunk_spans([]) == []


def test_span_f1_counts_exact_chunks():
  gold = [["B-NP", "I-NP", "O", "B-VP"], ["B-PP", "B-NP"]]
  predicted = [["B-NP", "O", "O", "B-VP"], ["B-PP", "B-NP"]]
  # gold chunks 4, predicted 4, correct 3 (the first NP differs)
  assert tagging_metrics.span_precision_recall_f1(gold, predicted) == pytest.approx((0.75, 0.75, 0.75))
