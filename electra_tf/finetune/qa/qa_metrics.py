"""The official SQuAD v1.1, v2.0 and MRQA 2019 evaluation scripts, as pure
functions: answer normalisation (MRQA's is v1.1's), exact match and token
F1, and their whole-dataset evaluations (in percent, under the official key
names)."""

from __future__ import annotations

import collections
import re
import string
from typing import Dict, List, Mapping, Sequence, Tuple

_PUNCTUATION = frozenset(string.punctuation)


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
