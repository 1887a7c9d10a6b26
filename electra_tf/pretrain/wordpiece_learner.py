"""tensorflow-text's WordPiece vocab learner, with its repeated work done once.

`learn` returns exactly what tensorflow-text's
`wordpiece_tokenizer_learner_lib.learn` returns for the same word counts and
parameters; the threshold-independent work of its bisection is shared and
later passes' counts are cached per set of current pieces.  Vocab order:
reserved tokens, single characters (sorted), learned pieces by count (ties
alphabetical).
"""

from __future__ import annotations

from typing import Dict, FrozenSet, Iterable, List, Sequence, Tuple

WordCounts = List[Tuple[str, int]]
JOINER = "##"


def _characters(word_counts: WordCounts) -> set:
  return {char for word, _ in word_counts for char in word}


def _with_characters(chars: Iterable[str], tokens: Dict[str, int]) -> Dict[str, int]:
  """Every character, alone and as a suffix piece, is a piece (count 1 when
  new), so that any word can still be split."""
  for char in chars:
    tokens.setdefault(char, 1)
    tokens.setdefault(JOINER + char, 1)
  return tokens


def _split_ends(word: str, pieces: Dict[str, int]):
  """End offsets of the greedy longest-match split of `word` into `pieces`
  (a suffix piece carries the joiner), or None when a position has none."""
  ends = []
  start = 0
  length = len(word)
  while start < length:
    end = length
    prefix = JOINER if start else ""
    while end > start and prefix + word[start:end] not in pieces:
      end -= 1
    if end == start:
      return None
    ends.append(end)
    start = end
  return ends


def _pass_counts(word_counts: WordCounts, pieces) -> Dict[str, int]:
  """One learning pass's counts (module docstring): for each piece, the
  summed count of the words in which one of the pass's starting positions
  is followed by exactly that piece up to the word's end.  `pieces` None:
  every position starts (the first pass); else the positions where the
  greedy split of the word into `pieces` starts a piece (a word they cannot
  split adds nothing)."""
  counts: Dict[str, int] = {}
  for word, count in word_counts:
    if pieces is None:
      starts = range(len(word))
    else:
      ends = _split_ends(word, pieces)
      if not ends:
        continue
      starts = [0] + ends[:-1]
    for start in starts:
      key = JOINER + word[start:] if start else word
      counts[key] = counts.get(key, 0) + count
  return counts


class _Learner:
  """The learning passes for one set of words, with the threshold-free work
  of each pass kept (module docstring)."""

  def __init__(self, word_counts: WordCounts, num_iterations: int):
    self.word_counts = word_counts
    self.num_iterations = num_iterations
    self.chars = _characters(word_counts)
    self._first = _pass_counts(word_counts, None)
    self._later: Dict[FrozenSet[str], Dict[str, int]] = {}

  def pieces(self, thresh: int) -> Dict[str, int]:
    """The pieces (with counts) after every pass at `thresh`."""
    tokens: Dict[str, int] = {}
    for iteration in range(self.num_iterations):
      if iteration == 0:
        counts = self._first
      else:
        key = frozenset(tokens)
        if key not in self._later:
          self._later[key] = _pass_counts(self.word_counts, tokens)
        counts = self._later[key]
      tokens = _with_characters(self.chars, {t: c for t, c in counts.items() if c >= thresh})
    return tokens

  def vocab(self, thresh: int, reserved_tokens: Sequence[str]) -> List[str]:
    by_count = sorted(sorted(self.pieces(thresh).items()), key=lambda tc: tc[1], reverse=True)
    vocab, seen = [], set()
    for token in list(reserved_tokens) + sorted(self.chars) + [t for t, _ in by_count]:
      if token not in seen:
        seen.add(token)
        vocab.append(token)
    return vocab


def _input_words(word_counts: WordCounts, reserved_tokens: Sequence[str],
                 max_token_length: int, max_unique_chars: int,
                 max_input_tokens: int) -> WordCounts:
  kept = [(w, c) for w, c in word_counts
          if len(w) <= max_token_length and w not in reserved_tokens]
  char_counts: Dict[str, int] = {}
  for word, count in kept:
    for char in word:
      char_counts[char] = char_counts.get(char, 0) + count
  by_count = sorted(sorted(char_counts.items()), key=lambda cc: cc[1], reverse=True)
  allowed = {char for char, _ in by_count[:max_unique_chars]}
  words = []
  for word, count in sorted(kept, key=lambda wc: wc[1], reverse=True):
    if max_input_tokens != -1 and len(words) >= max_input_tokens:
      break
    if all(char in allowed for char in word):
      words.append((word, count))
  return words


def learn(word_counts: Iterable[Tuple[str, int]], vocab_size: int,
          reserved_tokens: Sequence[str], upper_thresh: int = 10**7,
          lower_thresh: int = 10, num_iterations: int = 4,
          max_input_tokens: int = 5 * 10**6, max_token_length: int = 50,
          max_unique_chars: int = 1000, slack_ratio: float = 0.05) -> List[str]:
  """The vocab tensorflow-text's `learn` returns for these arguments (its
  defaults, joiner "##" included)."""
  word_counts = list(word_counts)
  counts = [count for _, count in word_counts]
  upper = min(max(counts), upper_thresh)
  lower = max(min(counts), lower_thresh)
  learner = _Learner(_input_words(word_counts, reserved_tokens, max_token_length,
                                  max_unique_chars, max_input_tokens),
                     num_iterations)
  slack = max(0.0, slack_ratio * vocab_size)
  while True:
    thresh = (upper + lower) // 2
    vocab = learner.vocab(thresh, reserved_tokens)
    size = len(vocab)
    if (size <= vocab_size and vocab_size - size <= slack) or lower >= upper or thresh <= 1:
      return vocab
    if size > vocab_size:
      lower = thresh + 1
    else:
      upper = thresh - 1
