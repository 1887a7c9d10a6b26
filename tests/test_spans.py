"""finetune/tagging/spans.py and tagging_metrics.py alone: every decoder and
score against seqeval (default and strict modes), on hand-picked ill-formed
sequences, on random ones, and on the full CoNLL-2000 test set written in
IOB1, IOB2 and BIOES."""

import random
import warnings

import pytest

from electra_tf.finetune.tagging import spans, tagging_metrics

seqeval_metrics = pytest.importorskip("seqeval.metrics")
from seqeval import scheme as seqeval_scheme  # noqa: E402
from seqeval.metrics.sequence_labeling import get_entities  # noqa: E402

SEQEVAL_SCHEMES = {"IOB1": seqeval_scheme.IOB1, "IOB2": seqeval_scheme.IOB2,
                   "BIOES": seqeval_scheme.IOBES}
TYPES = ("PER", "LOC", "ORG")


def seqeval_spans(tags, scheme=None):
  """seqeval's entities of one sentence as sorted (start, end, type)."""
  if scheme is None:
    return sorted((start, end, kind) for kind, start, end in get_entities(list(tags)))
  entities = seqeval_scheme.Entities([list(tags)], SEQEVAL_SCHEMES[scheme]).entities[0]
  return sorted((e.start, e.end - 1, e.tag) for e in entities)


def seqeval_scores(gold, predicted, scheme, strict):
  """Overall (micro average) and per-type (precision, recall, f1) as seqeval
  computes them (one classification_report: one pass over the data)."""
  kwargs = {"mode": "strict", "scheme": SEQEVAL_SCHEMES[scheme]} if strict else {}
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # zero-division warnings
    report = seqeval_metrics.classification_report(gold, predicted, output_dict=True,
                                                   **kwargs)
  def scores(row):
    return tuple(float(row[k]) for k in ("precision", "recall", "f1-score"))
  types = sorted(k for k in report if not k.endswith(" avg"))
  return scores(report["micro avg"]), [scores(report[t]) for t in types]


def our_scores(gold, predicted, scheme, strict):
  counts = tagging_metrics.entity_counts(gold, predicted, scheme, strict)
  return (tagging_metrics.total(counts).precision_recall_f1(),
          [c.precision_recall_f1() for c in counts.values()])


def assert_same_scores(gold, predicted, scheme, strict):
  ours, theirs = our_scores(gold, predicted, scheme, strict), seqeval_scores(
      gold, predicted, scheme, strict)
  assert ours[0] == pytest.approx(theirs[0], abs=1e-12)
  assert len(ours[1]) == len(theirs[1])
  for mine, seqeval_type in zip(ours[1], theirs[1]):
    assert mine == pytest.approx(seqeval_type, abs=1e-12)


ILL_FORMED = [
    ["O", "I-PER", "I-PER", "O"],                      # I- after O
    ["B-PER", "I-LOC", "I-LOC"],                       # I- of another type
    ["I-PER", "B-PER", "I-PER", "B-LOC", "I-ORG"],     # IOB1 written sequence
    ["B-PER", "I-PER", "O", "B-PER", "B-PER"],         # IOB2
    ["B-PER", "I-PER", "E-PER", "S-LOC", "B-ORG", "O"],  # BIOES, B- without E-
    ["O", "E-PER", "I-PER", "S-PER", "E-PER"],         # E- after O, I- after S-
    ["B-LOC", "E-PER", "I-PER"],                       # E- of another type
    [],
]


@pytest.mark.parametrize("tags", ILL_FORMED)
def test_lenient_decoder_is_seqevals_default_mode(tags):
  assert sorted(spans.entity_spans(tags)) == seqeval_spans(tags)


@pytest.mark.parametrize("scheme", spans.SCHEMES)
def test_strict_decoder_is_seqevals_strict_mode(scheme):
  allowed = spans.ALLOWED_PREFIXES[scheme]
  checked = 0
  for tags in ILL_FORMED:
    if all(t == "O" or t[0] in allowed for t in tags):
      assert sorted(spans.strict_entity_spans(tags, scheme)) == seqeval_spans(tags, scheme)
      checked += 1
    else:
      with pytest.raises(ValueError, match=f"is not an {scheme} tag"):
        spans.strict_entity_spans(tags, scheme)
  assert checked >= 3
  # the hand-checked cases
  assert spans.strict_entity_spans(["O", "I-PER", "I-PER"], "IOB2") == []
  assert spans.strict_entity_spans(["O", "I-PER", "I-PER"], "IOB1") == [(1, 2, "PER")]
  assert spans.strict_entity_spans(["B-PER", "I-PER", "O"], "BIOES") == []


def _random_tags(rng, prefixes, length):
  return [rng.choice(["O", "O"] + [f"{p}-{t}" for p in prefixes for t in TYPES])
          for _ in range(length)]


def test_decoders_and_scores_equal_seqeval_on_random_sequences():
  rng = random.Random(34)
  for _ in range(600):
    scheme = rng.choice(spans.SCHEMES)
    prefixes = spans.ALLOWED_PREFIXES[scheme]
    gold = [_random_tags(rng, prefixes, rng.randint(0, 9)) for _ in range(3)]
    predicted = [_random_tags(rng, prefixes, len(tags)) for tags in gold]
    for tags in gold:
      assert sorted(spans.entity_spans(tags)) == seqeval_spans(tags)
      assert sorted(spans.strict_entity_spans(tags, scheme)) == seqeval_spans(tags, scheme)
    if any(gold):
      assert_same_scores(gold, predicted, scheme, strict=False)
      assert_same_scores(gold, predicted, scheme, strict=True)


def test_every_scheme_encodes_spans_all_decoders_read_back():
  rng = random.Random(3)
  for _ in range(500):
    length, cursor, written = rng.randint(0, 12), 0, []
    while cursor < length:
      start = cursor + rng.randint(0, 2)
      end = start + rng.randint(0, 3)
      if end >= length:
        break
      written.append((start, end, rng.choice(TYPES)))
      cursor = end + 1
    for scheme in spans.SCHEMES:
      tags = spans.encode(written, length, scheme)
      assert spans.entity_spans(tags) == written
      assert spans.strict_entity_spans(tags, scheme) == written
      assert spans.convert(tags, "BIOES") == spans.encode(written, length, "BIOES")
  assert spans.encode([(0, 0, "PER"), (1, 2, "PER"), (3, 3, "LOC")], 5, "IOB1") == [
      "I-PER", "B-PER", "I-PER", "I-LOC", "O"]


def test_chunk_rule_keeps_the_official_quirks():
  # An I- of another type continues the chunk (which takes the last type);
  # E- does not close it.
  assert spans.chunk_spans(["B-NP", "I-VP", "O"]) == [(0, 1, "VP")]
  assert spans.entity_spans(["B-NP", "I-VP", "O"]) == [(0, 0, "NP"), (1, 1, "VP")]
  assert spans.chunk_spans(["B-NP", "E-NP", "I-NP"]) == [(0, 2, "NP")]
  assert spans.chunk_spans(["O", "I-NP", "I-VP"]) == [(1, 2, "VP")]


def test_boundary_tables_are_the_rules():
  labels = ["O", "B-PER", "I-PER", "I-LOC"]
  closes, opens = spans.boundary_tables(labels, spans.LENIENT)
  names = labels + ["O"]
  assert len(closes) == len(opens) == 5
  for p, prev in enumerate(names):
    for c, tag in enumerate(names):
      assert closes[p][c] == spans.LENIENT.closes(prev, tag)
      assert opens[p][c] == spans.LENIENT.opens(prev, tag)
  assert spans.prefix_table("BIOES") == ["I", "I", "E", "E", "B", "B", "S", "S"]
  assert spans.prefix_table("IOB1") == ["I", "I", "I", "I", "I", "B", "I", "B"]


def _conll2000_tags(finetuning_data_dir):
  sentences = (finetuning_data_dir / "chunk" / "dev.txt").read_text().split("\n\n")
  return [[line.split()[-1] for line in s.splitlines()] for s in sentences if s.strip()]


def _corrupted(gold_sentences, seed):
  """Predictions: the gold chunks with some dropped, retyped or cut short."""
  rng = random.Random(seed)
  predicted = []
  for tags in gold_sentences:
    chunks = []
    for start, end, kind in spans.entity_spans(tags):
      roll = rng.random()
      if roll < 0.05:
        continue
      if roll < 0.10:
        kind = "NP" if kind != "NP" else "VP"
      elif roll < 0.15 and end > start:
        end -= 1
      chunks.append((start, end, kind))
    predicted.append(spans.encode(chunks, len(tags), "IOB2"))
  return predicted


def test_conll2000_in_three_schemes_scores_the_same_as_seqeval(finetuning_data_dir):
  gold = _conll2000_tags(finetuning_data_dir)
  assert len(gold) == 2012 and sum(map(len, gold)) == 47377
  predicted = _corrupted(gold, seed=0)
  results = {}
  for scheme in spans.SCHEMES:
    scheme_gold = [spans.convert(tags, scheme) for tags in gold]
    scheme_predicted = [spans.convert(tags, scheme) for tags in predicted]
    for strict in (False, True):
      results[scheme, strict] = our_scores(scheme_gold, scheme_predicted, scheme, strict)
    if scheme != "IOB2":  # IOB2 is checked against seqeval below
      continue
    for strict in (False, True):
      assert_same_scores(scheme_gold, scheme_predicted, scheme, strict)
  assert len(set(map(repr, results.values()))) == 1
  overall = results["IOB2", False][0]
  assert 0.85 < overall[2] < 0.95  # ~15% of the chunks changed
  # the chunk task's official scorer agrees on well-formed IOB2
  assert tagging_metrics.span_precision_recall_f1(gold, predicted) == pytest.approx(overall, abs=1e-12)
