"""Evaluation metrics of the official fine-tuning code, as pure functions.

Classification / regression (inputs: 1-D sequences of equal length N):
accuracy, Matthews correlation (the scikit-learn definition the official
CoLA scorer calls), precision/recall/F1 of one positive label, Pearson and
Spearman correlation (scipy.stats, as official).  These return fractions; the
task scorers report them times 100 as the official scorers do.

SQuAD and MRQA: the official v1.1, v2.0 and MRQA 2019 evaluation scripts'
answer normalisation (MRQA's is v1.1's), exact match and token F1, and their
whole-dataset evaluations (in percent, under the official key names).

Tagging: the chunk task's names for the rules of finetune/spans.py (official
tagging_utils: chunks of a tag sequence and back, chunk-level
precision/recall/F1).
"""

from __future__ import annotations

import collections
import re
import string
import warnings
from typing import Dict, Iterable, List, Mapping, Sequence, Tuple

import numpy as np
import scipy.stats

Span = Tuple[int, int, str]
_PUNCTUATION = frozenset(string.punctuation)


# ------------------------------------------------ classification / regression
def accuracy(labels: Sequence, predictions: Sequence) -> float:
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  return float(np.mean(labels == predictions))


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


def precision_recall_f1(n_correct: int, n_predicted: int, n_gold: int
                        ) -> Tuple[float, float, float]:
  """From counts; all three are 0 when nothing is correct (as official)."""
  if n_correct == 0:
    return 0.0, 0.0, 0.0
  precision, recall = n_correct / n_predicted, n_correct / n_gold
  return precision, recall, 2 * precision * recall / (precision + recall)


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


# ---------------------------------------------------------------- SQuAD
def normalize_answer(text: str) -> str:
  """Lower case, drop punctuation and articles, collapse whitespace."""
  text = text.lower()
  text = "".join(ch for ch in text if ch not in _PUNCTUATION)
  text = re.sub(r"\b(a|an|the)\b", " ", text)
  return " ".join(text.split())


def _common_token_f1(gold_tokens: List[str], predicted_tokens: List[str]) -> float:
  common = collections.Counter(gold_tokens) & collections.Counter(predicted_tokens)
  num_same = sum(common.values())
  if num_same == 0:
    return 0.0
  precision = num_same / len(predicted_tokens)
  recall = num_same / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def squad_v1_exact(gold: str, prediction: str) -> float:
  return float(normalize_answer(gold) == normalize_answer(prediction))


def squad_v1_f1(gold: str, prediction: str) -> float:
  """v1.1 token F1: 0 when either side normalises to nothing."""
  return _common_token_f1(normalize_answer(gold).split(),
                          normalize_answer(prediction).split())


def squad_v2_exact(gold: str, prediction: str) -> float:
  return float(normalize_answer(gold) == normalize_answer(prediction))


def squad_v2_f1(gold: str, prediction: str) -> float:
  """v2.0 token F1: an empty side scores 1 if both are empty, else 0."""
  gold_tokens = normalize_answer(gold).split() if gold else []
  predicted_tokens = normalize_answer(prediction).split() if prediction else []
  if not gold_tokens or not predicted_tokens:
    return float(gold_tokens == predicted_tokens)
  return _common_token_f1(gold_tokens, predicted_tokens)


def evaluate_squad_v1(gold_answers: Mapping[str, Sequence[str]],
                      predictions: Mapping[str, str]) -> Dict[str, float]:
  """Official v1.1 script: max over gold answers, missing predictions score 0."""
  return _evaluate_max_over_gold(gold_answers, predictions,
                                 skip_unanswered=False)


def evaluate_mrqa(gold_answers: Mapping[str, Sequence[str]],
                  predictions: Mapping[str, str]) -> Dict[str, float]:
  """Official MRQA 2019 script as the official fine-tuning runs it: the v1.1
  normalisation, EM and F1, but questions without a prediction are left out
  (skip_no_answer)."""
  return _evaluate_max_over_gold(gold_answers, predictions,
                                 skip_unanswered=True)


def _evaluate_max_over_gold(gold_answers: Mapping[str, Sequence[str]],
                            predictions: Mapping[str, str],
                            skip_unanswered: bool) -> Dict[str, float]:
  """exact_match and f1 (percent), each the max over a question's answers."""
  exact = f1 = 0.0
  total = 0
  for qid, answers in gold_answers.items():
    if not answers:
      raise ValueError(f"question {qid!r} has no gold answer")
    if qid not in predictions:
      total += int(not skip_unanswered)
      continue
    total += 1
    exact += max(squad_v1_exact(a, predictions[qid]) for a in answers)
    f1 += max(squad_v1_f1(a, predictions[qid]) for a in answers)
  return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def evaluate_squad_v2(gold_answers: Mapping[str, Sequence[str]],
                      predictions: Mapping[str, str],
                      na_probs: Mapping[str, float],
                      na_prob_thresh: float) -> Dict[str, float]:
  """Official v2.0 script with a no-answer file; keys sorted as official.

  A question with no (non-empty) gold answer is unanswerable; its only correct
  answer is "".  A prediction counts as "no answer" when its na_prob exceeds
  `na_prob_thresh`.  Questions without a prediction are left out.
  """
  has_answer = {qid: bool(answers) for qid, answers in gold_answers.items()}
  exact_raw, f1_raw = {}, {}
  for qid, answers in gold_answers.items():
    answers = [a for a in answers if normalize_answer(a)] or [""]
    if qid not in predictions:
      continue
    exact_raw[qid] = max(squad_v2_exact(a, predictions[qid]) for a in answers)
    f1_raw[qid] = max(squad_v2_f1(a, predictions[qid]) for a in answers)

  def thresholded(scores):
    return {qid: float(not has_answer[qid]) if na_probs[qid] > na_prob_thresh
                 else score for qid, score in scores.items()}

  def summary(exact, f1, qids):
    return {"exact": 100.0 * sum(exact[q] for q in qids) / len(qids),
            "f1": 100.0 * sum(f1[q] for q in qids) / len(qids),
            "total": len(qids)}

  exact, f1 = thresholded(exact_raw), thresholded(f1_raw)
  results = summary(exact, f1, list(exact))
  for prefix, wanted in (("HasAns", True), ("NoAns", False)):
    qids = [q for q, v in has_answer.items() if v == wanted]
    if qids:
      results.update({f"{prefix}_{k}": v
                      for k, v in summary(exact, f1, qids).items()})
  for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
    best, threshold = _best_no_answer_threshold(
        predictions, raw, na_probs, has_answer)
    results[f"best_{name}"] = best
    results[f"best_{name}_thresh"] = threshold
  return dict(sorted(results.items()))


def _best_no_answer_threshold(predictions, scores, na_probs, has_answer
                              ) -> Tuple[float, float]:
  """Score of the best na_prob threshold (official find_best_thresh)."""
  score = best_score = sum(1 for v in has_answer.values() if not v)
  best_threshold = 0.0
  for qid in sorted(na_probs, key=lambda k: na_probs[k]):
    if qid not in scores:
      continue
    if has_answer[qid]:
      score += scores[qid]
    elif predictions[qid]:
      score -= 1
    if score > best_score:
      best_score, best_threshold = score, na_probs[qid]
  return 100.0 * best_score / len(scores), best_threshold


# -------------------------------------------------------------- tagging
# The chunk task's names for finetune/spans.py (where every tagging rule lives).
def span_labels(tags: Sequence[str]) -> List[Span]:
  """(start, end, type) chunks of a tag sequence (official get_span_labels):
  spans.chunk_spans.  An empty sequence has no chunks (the official function
  fails on it)."""
  from electra_tf.finetune import spans  # pylint: disable=g-import-not-at-top
  return spans.chunk_spans(tags)


def tags_from_spans(spans_: Iterable[Span], length: int, encoding: str
                    ) -> List[str]:
  """Tag sequence of `spans_` in an encoding such as "BIOES" or "BIO"
  (spans.encode)."""
  from electra_tf.finetune import spans  # pylint: disable=g-import-not-at-top
  return spans.encode(spans_, length, encoding)


def span_precision_recall_f1(gold: Iterable[Sequence[str]],
                             predicted: Iterable[Sequence[str]]
                             ) -> Tuple[float, float, float]:
  """Chunk-level scores over sentences of gold and predicted tags."""
  from electra_tf.finetune import spans  # pylint: disable=g-import-not-at-top
  return spans.total(spans.span_counts(gold, predicted, spans.chunk_spans)
                     ).precision_recall_f1()
