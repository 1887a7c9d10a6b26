"""Tag sequences and the spans they mark: schemes, decoders and encoders.

A tag is "O" or PREFIX-TYPE (B, I, E, S); a span is (start, end inclusive,
type) over word indices.  Schemes (SCHEMES): IOB1, IOB2 / "BIO", BIOES.
Decoders agree on well-formed tags and differ on ill-formed:

  LENIENT  conlleval / seqeval default (`entity_spans`)
  CHUNK    official tagging_utils, for `chunk` (`chunk_spans`): E- does not
           close a span, a type change does not split it
  strict   seqeval strict mode (`strict_entity_spans`)

LENIENT and CHUNK read only the tags of words i-1 and i, so
`boundary_tables` and `prefix_table` tabulate them for the serving graphs.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

from electra_tf.errors import ConfigError, DataError

Span = Tuple[int, int, str]
OUTSIDE = "O"
SCHEMES = ("IOB1", "IOB2", "BIOES")
_SCHEME_ALIASES = {"BIO": "IOB2", "IOBES": "BIOES"}
# The prefixes a file written in each scheme may hold.
ALLOWED_PREFIXES = {"IOB1": "BI", "IOB2": "BI", "BIOES": "BIES"}


def canonical_scheme(scheme: str) -> str:
  """`scheme` as one of SCHEMES ("BIO" is IOB2, "IOBES" BIOES); else ConfigError."""
  name = _SCHEME_ALIASES.get(scheme.upper(), scheme.upper())
  if name not in SCHEMES:
    raise ConfigError(f"unknown tagging scheme {scheme!r}; known: "
                      f"{', '.join(SCHEMES)} (BIO = IOB2)")
  return name


def prefix_of(tag: str) -> str:
  """"O" for O, else the letter before the first "-"."""
  return OUTSIDE if tag == OUTSIDE else tag.split("-", 1)[0]


def type_of(tag: str) -> str:
  """The type after the first "-" ("" for O)."""
  return "" if tag == OUTSIDE else tag.split("-", 1)[1]


# ------------------------------------------------------------ boundary rules
@dataclasses.dataclass(frozen=True)
class BoundaryRule:
  """closes(prev, tag): a span ends at the word before `tag`;
  opens(prev, tag): a span starts at `tag`.  For every pair, closes with a
  non-O tag implies opens, and a non-O tag that does not open continues the
  span of the previous (non-O) word."""
  name: str
  closes: Callable[[str, str], bool]
  opens: Callable[[str, str], bool]


def _lenient_closes(prev: str, tag: str) -> bool:
  if prev == OUTSIDE:
    return False
  return (prefix_of(prev) in "ES" or tag == OUTSIDE or prefix_of(tag) in "BS"
          or type_of(prev) != type_of(tag))


def _lenient_opens(prev: str, tag: str) -> bool:
  if tag == OUTSIDE:
    return False
  return (prefix_of(tag) in "BS" or prev == OUTSIDE or prefix_of(prev) in "ES"
          or type_of(prev) != type_of(tag))


def _chunk_closes(prev: str, tag: str) -> bool:
  return prev != OUTSIDE and (tag == OUTSIDE or prefix_of(tag) in "BS")


def _chunk_opens(prev: str, tag: str) -> bool:
  return tag != OUTSIDE and (prefix_of(tag) in "BS" or prev == OUTSIDE)


LENIENT = BoundaryRule("lenient", _lenient_closes, _lenient_opens)
CHUNK = BoundaryRule("chunk", _chunk_closes, _chunk_opens)


def decode(tags: Sequence[str], rule: BoundaryRule) -> List[Span]:
  """The spans `rule` reads in `tags`, in order; each takes the type of its
  last tag (under LENIENT all its tags have one type)."""
  spans = []
  start = 0
  for i, tag in enumerate(list(tags) + [OUTSIDE]):
    prev = tags[i - 1] if i else OUTSIDE
    if rule.closes(prev, tag):
      spans.append((start, i - 1, type_of(prev)))
    if rule.opens(prev, tag):
      start = i
  return spans


def entity_spans(tags: Sequence[str]) -> List[Span]:
  """Spans as conlleval and seqeval's default mode read them (any scheme)."""
  return decode(tags, LENIENT)


def chunk_spans(tags: Sequence[str]) -> List[Span]:
  """Spans as the official chunking scorer reads them (CHUNK rule)."""
  return decode(tags, CHUNK)


# ----------------------------------------------------------- strict decoding
def _same_type(prev: str, tag: str) -> bool:
  return type_of(prev) == type_of(tag)


def _iob1_starts(prev: str, tag: str) -> bool:
  p, t = prefix_of(prev), prefix_of(tag)
  if t == "I":
    return p in "OB" or (p == "I" and not _same_type(prev, tag))
  return t == "B" and p in "IB" and _same_type(prev, tag)


def _iob1_ends(prev: str, tag: str) -> bool:
  p, t = prefix_of(prev), prefix_of(tag)
  if p == "I":
    return t in "OB" or not _same_type(prev, tag)
  if p == "B":
    return t == "O" or (t == "I") != _same_type(prev, tag)
  return False


def _iob_continues(prev: str, tag: str) -> bool:
  return prefix_of(prev) in "BI" and prefix_of(tag) == "I" and _same_type(prev, tag)


def _iob2_ends(prev: str, tag: str) -> bool:
  p, t = prefix_of(prev), prefix_of(tag)
  return p in "BI" and (t in "OB" or (t == "I" and not _same_type(prev, tag)))


def _bioes_continues(prev: str, tag: str) -> bool:
  return (prefix_of(prev) in "BI" and prefix_of(tag) in "IE"
          and _same_type(prev, tag))


@dataclasses.dataclass(frozen=True)
class StrictRule:
  """How a scheme writes a span, tag pair by tag pair: `starts(prev, tag)`
  (a span begins at tag), `continues(prev, tag)` (tag extends the span whose
  last word is prev) and `ends(last, next)` (a span whose last tag is `last`
  is complete when `next` follows)."""
  starts: Callable[[str, str], bool]
  continues: Callable[[str, str], bool]
  ends: Callable[[str, str], bool]


STRICT_RULES = {
    "IOB1": StrictRule(_iob1_starts, _iob_continues, _iob1_ends),
    "IOB2": StrictRule(lambda prev, tag: prefix_of(tag) == "B",
                       _iob_continues, _iob2_ends),
    "BIOES": StrictRule(lambda prev, tag: prefix_of(tag) in "BS",
                        _bioes_continues,
                        lambda last, tag: prefix_of(last) in "ES"),
}


def check_scheme_tags(tags: Iterable[str], scheme: str) -> None:
  """DataError naming the first tag whose prefix `scheme` does not use."""
  allowed = ALLOWED_PREFIXES[canonical_scheme(scheme)]
  for tag in tags:
    if tag != OUTSIDE and prefix_of(tag) not in allowed:
      raise DataError(f"tag {tag!r} is not an {canonical_scheme(scheme)} tag "
                      f"(prefixes {', '.join(allowed)})")


def strict_entity_spans(tags: Sequence[str], scheme: str) -> List[Span]:
  """Spans as seqeval's strict mode reads them with `scheme`: a span counts
  only if written as the scheme writes it.  DataError on a prefix the scheme
  does not use."""
  scheme = canonical_scheme(scheme)
  check_scheme_tags(tags, scheme)
  rule = STRICT_RULES[scheme]
  padded = list(tags) + [OUTSIDE]
  spans = []
  i = 0
  while i < len(padded):
    prev = padded[i - 1] if i else OUTSIDE
    if rule.starts(prev, padded[i]):
      after = i + 1
      while after < len(padded) and rule.continues(padded[after - 1], padded[after]):
        after += 1
      if rule.ends(padded[after - 1], padded[after]):
        spans.append((i, after - 1, type_of(padded[i])))
      i = after
    else:
      i += 1
  return spans


# ---------------------------------------------------------- scheme of a file
# A file is in another scheme than the declared one when that scheme reads at
# most 1/SCHEME_FIT_RATIO as many of its entities ill-formed (docs/
# finetuning.md, "Tagging schemes").
SCHEME_FIT_RATIO = 10


@dataclasses.dataclass(frozen=True)
class SchemeFit:
  """How sentences of tags read in `scheme`: their entities (spans as
  `entity_spans` reads them), how many of those the scheme does not write so
  (strict mode drops them), and where the first of those starts, (sentence,
  word), or None."""
  scheme: str
  n_entities: int
  n_ill_formed: int
  first_ill_formed: Optional[Tuple[int, int]]


def scheme_fit(sentences: Sequence[Sequence[str]], scheme: str) -> SchemeFit:
  """`SchemeFit` of `sentences` in `scheme`; every entity of a sentence
  with a prefix the scheme does not use counts as ill-formed."""
  scheme = canonical_scheme(scheme)
  n_entities = n_ill_formed = 0
  first = None
  for index, tags in enumerate(sentences):
    try:
      strict = set(strict_entity_spans(tags, scheme))
    except DataError:
      strict = set()
    for span in entity_spans(tags):
      n_entities += 1
      if span not in strict:
        n_ill_formed += 1
        first = first or (index, span[0])
  return SchemeFit(scheme, n_entities, n_ill_formed, first)


def better_scheme(sentences: Sequence[Sequence[str]], declared: str
                  ) -> Optional[Tuple[SchemeFit, SchemeFit]]:
  """(the declared scheme's fit, another's) when the sentences are in that
  other scheme: the declared one reads some entities ill-formed and the
  other at most 1/SCHEME_FIT_RATIO as many (the fewest of the schemes);
  None otherwise, so well-formed tags in `declared` always pass."""
  fit = scheme_fit(sentences, declared)
  if not fit.n_ill_formed:
    return None
  best = min((scheme_fit(sentences, scheme) for scheme in SCHEMES if scheme != fit.scheme),
             key=lambda other: other.n_ill_formed)
  if best.n_ill_formed * SCHEME_FIT_RATIO <= fit.n_ill_formed:
    return fit, best
  return None


# ------------------------------------------------------------------ encoding
def span_prefix(scheme: str, first: bool, last: bool,
                follows_same_type: bool) -> str:
  """The prefix `scheme` writes on a word of a span: first / last word of
  it, and whether the span directly follows a span of its type."""
  scheme = canonical_scheme(scheme)
  if scheme == "IOB1":
    return "B" if first and follows_same_type else "I"
  if scheme == "IOB2":
    return "B" if first else "I"
  if first:
    return "S" if last else "B"
  return "E" if last else "I"


def encode(spans: Iterable[Span], length: int, scheme: str) -> List[str]:
  """The tags of `length` words holding non-overlapping `spans`."""
  tags = [OUTSIDE] * length
  previous_end, previous_type = -2, None
  for start, end, span_type in sorted(spans):
    follows = previous_end == start - 1 and previous_type == span_type
    for i in range(start, end + 1):
      tags[i] = span_prefix(scheme, i == start, i == end, follows) + "-" + span_type
    previous_end, previous_type = end, span_type
  return tags


def convert(tags: Sequence[str], scheme: str) -> List[str]:
  """`tags` (any scheme, read by LENIENT) rewritten in `scheme`."""
  return encode(entity_spans(tags), len(tags), scheme)


# ---------------------------------------------------- tables for the graphs
def boundary_tables(labels: Sequence[str], rule: BoundaryRule
                    ) -> Tuple[List[List[bool]], List[List[bool]]]:
  """`rule` over label ids: closes[p][c] and opens[p][c] for the labels p, c
  of two neighbouring words, where id len(labels) stands for the "O" before
  the first word and after the last.  Both are (C+1) x (C+1) for C labels."""
  names = list(labels) + [OUTSIDE]
  return ([[rule.closes(p, c) for c in names] for p in names],
          [[rule.opens(p, c) for c in names] for p in names])


def prefix_table(scheme: str) -> List[str]:
  """span_prefix of `scheme` for the 8 cases, indexed by
  4 * first + 2 * last + follows_same_type."""
  return [span_prefix(scheme, bool(i & 4), bool(i & 2), bool(i & 1))
          for i in range(8)]
