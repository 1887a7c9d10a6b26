"""Scores of tag sequences: span counts per type (a span is correct when gold
and predicted both have it), as the official chunk scorer, conlleval and
seqeval count them; the rules that read the spans are spans.py's."""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Iterable, List, Mapping, Sequence, Tuple

from electra_tf.finetune import metrics
from electra_tf.finetune.tagging import spans
from electra_tf.finetune.tagging.spans import Span


@dataclasses.dataclass(frozen=True)
class Counts:
  """Spans of one type (or all): gold, predicted and both."""
  n_gold: int = 0
  n_predicted: int = 0
  n_correct: int = 0

  def __add__(self, other: "Counts") -> "Counts":
    return Counts(self.n_gold + other.n_gold, self.n_predicted + other.n_predicted,
                  self.n_correct + other.n_correct)

  def precision_recall_f1(self) -> Tuple[float, float, float]:
    """Fractions; all 0 when nothing is correct (seqeval's default
    zero_division gives the same, with a warning)."""
    return metrics.precision_recall_f1(self.n_correct, self.n_predicted, self.n_gold)


def span_counts(gold: Iterable[Sequence[str]], predicted: Iterable[Sequence[str]],
                spans_of: Callable[[Sequence[str]], List[Span]]
                ) -> Dict[str, Counts]:
  """Counts per type over sentences of gold and predicted tags, each read
  by `spans_of` (e.g. entity_spans); a span is correct when both have it."""
  counts: Dict[str, Counts] = {}
  gold, predicted = list(gold), list(predicted)
  if len(gold) != len(predicted):
    raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted ones")
  for gold_tags, predicted_tags in zip(gold, predicted):
    if len(gold_tags) != len(predicted_tags):
      raise ValueError(f"a sentence has {len(gold_tags)} gold tags and "
                       f"{len(predicted_tags)} predicted ones")
    gold_spans, predicted_spans = set(spans_of(gold_tags)), set(spans_of(predicted_tags))
    for found, field in ((gold_spans, 0), (predicted_spans, 1),
                         (gold_spans & predicted_spans, 2)):
      for _, _, span_type in found:
        values = [0, 0, 0]
        values[field] = 1
        counts[span_type] = counts.get(span_type, Counts()) + Counts(*values)
  return dict(sorted(counts.items()))


def total(counts: Mapping[str, Counts]) -> Counts:
  """All types together (micro average)."""
  return sum(counts.values(), Counts())


def entity_counts(gold: Iterable[Sequence[str]], predicted: Iterable[Sequence[str]],
                  scheme: str, strict: bool) -> Dict[str, Counts]:
  """Per-type counts as seqeval counts them: default mode (`strict` False,
  any scheme) or strict mode with `scheme`."""
  if strict:
    scheme = spans.canonical_scheme(scheme)
    return span_counts(gold, predicted,
                       lambda tags: spans.strict_entity_spans(tags, scheme))
  return span_counts(gold, predicted, spans.entity_spans)


def span_precision_recall_f1(gold: Iterable[Sequence[str]],
                             predicted: Iterable[Sequence[str]]
                             ) -> Tuple[float, float, float]:
  """Chunk-level scores over sentences of gold and predicted tags (the
  official chunk scorer's, spans.chunk_spans)."""
  return total(span_counts(gold, predicted, spans.chunk_spans)).precision_recall_f1()
