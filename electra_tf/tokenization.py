"""BERT WordPiece tokenization as the official ELECTRA `model/tokenization.py`.

Pipeline: (1) drop NUL, U+FFFD and control characters, whitespace to a
space; (2) spaces around CJK ideographs, split on whitespace; (3) with
`do_lower_case`, lower-case and (with `strip_accents`) strip accents; (4)
split off punctuation; (5) greedy longest-match-first WordPiece, a word over
200 characters or with an unmatched remainder -> one [UNK].

`FullTokenizer` is the pure-Python reference; `FastTokenizer` runs the same
pipeline with tensorflow-text on batches, with the same ids;
`FastBasicTokenizer` and `wordpieces` are graph ops, for SavedModels.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf.errors import ConfigError, DataError

MAX_CHARS_PER_WORD = 200  # official WordpieceTokenizer.max_input_chars_per_word
UNK_TOKEN = "[UNK]"
WORDPIECE_PREFIX = "##"
_SURROGATES = range(0xD800, 0xE000)
_CAPITAL_SIGMA, _FINAL_SIGMA = "\u03a3", "\u03c2"


# ---------------------------------------------------------------- vocab
# In a module without TensorFlow, for processes that read a vocab only.
from electra_tf.vocabulary import (  # pylint: disable=g-import-not-at-top,unused-import
    SPECIAL_TOKENS, SpecialIds, check_vocab_size, load_vocab, special_ids)


def cased_pieces(vocab: Dict[str, int]) -> List[str]:
  """The pieces, other than bracketed special tokens, that hold an upper-case
  character (one that str.lower changes); a vocab learned from text that was
  not lower-cased (a cased vocab) has many, an uncased one none."""
  return [piece for piece in vocab if piece != piece.lower()
          and not (piece.startswith("[") and piece.endswith("]"))]


def check_vocab_casing(vocab: Dict[str, int], do_lower_case: bool, vocab_file: str,
                       source: str = "hparam do_lower_case") -> None:
  """ConfigError when do_lower_case and the vocab's casing disagree: a
  lower-casing tokenizer never produces a cased vocab's upper-case pieces,
  and a cased tokenizer turns every capital of an uncased vocab into
  [UNK] or other pieces than pre-training saw."""
  cased = cased_pieces(vocab)
  if do_lower_case and cased:
    raise ConfigError(f"{source}: true, but {vocab_file} is a cased vocab (e.g. "
                      f"{cased[0]!r}); set do_lower_case false or give an uncased vocab")
  if not do_lower_case and not cased:
    raise ConfigError(f"{source}: false, but {vocab_file} is an uncased vocab (no "
                      "piece has an upper-case letter); give a cased vocab or set "
                      "do_lower_case true")


# ------------------------------------------------------ character classes
def _is_cjk(cp: int) -> bool:
  """CJK Unified Ideographs and compatibility blocks (official _is_chinese_char)."""
  return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or
          0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F or
          0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or
          0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def _is_punctuation(char: str, category: str) -> bool:
  cp = ord(char)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True  # all non-alphanumeric ASCII, e.g. "$", "^", "`"
  return category.startswith("P")


def _is_dropped(char: str, category: str) -> bool:
  """NUL, U+FFFD and control characters other than tab, newline, CR."""
  if char in "\t\n\r":
    return False
  return char in "\x00\ufffd" or category.startswith("C")


def _is_whitespace(char: str, category: str) -> bool:
  return char in " \t\n\r" or category == "Zs"


# ------------------------------------------------ pure-Python reference
class FullTokenizer:
  """Pure-Python tokenizer with the official FullTokenizer interface."""

  def __init__(self, vocab_file: str, do_lower_case: bool = True,
               strip_accents: bool = True, vocab: Optional[Dict[str, int]] = None):
    """vocab: `load_vocab(vocab_file)` when the caller has read it already."""
    self.vocab = load_vocab(vocab_file) if vocab is None else vocab
    self.inv_vocab = {i: token for token, i in self.vocab.items()}
    self.do_lower_case = do_lower_case
    self.strip_accents = strip_accents

  def tokenize(self, text: str) -> List[str]:
    pieces = []
    for word in self.basic_tokenize(text):
      pieces.extend(self.wordpiece_tokenize(word))
    return pieces

  def basic_tokenize(self, text: str | bytes) -> List[str]:
    """Steps 1-4 of the module docstring: cleaned, split words."""
    if isinstance(text, bytes):
      text = text.decode("utf-8", "ignore")  # as official convert_to_unicode
    chars = []
    for char in text:
      category = unicodedata.category(char)
      if _is_dropped(char, category):
        continue
      if _is_whitespace(char, category):
        chars.append(" ")
      elif _is_cjk(ord(char)):
        chars.append(f" {char} ")
      else:
        chars.append(char)
    words = []
    for word in "".join(chars).split():
      if self.do_lower_case:
        word = word.lower()
        if self.strip_accents:
          word = "".join(c for c in unicodedata.normalize("NFD", word)
                         if unicodedata.category(c) != "Mn")
      words.extend(_split_punctuation(word))
    return words

  def wordpiece_tokenize(self, word: str) -> List[str]:
    """Greedy longest-match-first pieces of one word, or [UNK]."""
    if len(word) > MAX_CHARS_PER_WORD:
      return [UNK_TOKEN]
    pieces = []
    start = 0
    while start < len(word):
      for end in range(len(word), start, -1):
        piece = word[start:end] if start == 0 else WORDPIECE_PREFIX + word[start:end]
        if piece in self.vocab:
          pieces.append(piece)
          start = end
          break
      else:
        return [UNK_TOKEN]
    return pieces

  def tokenize_to_ids(self, lines: Sequence[str]) -> List[List[int]]:
    """Token ids of each line (the interface FastTokenizer shares)."""
    return [self.convert_tokens_to_ids(self.tokenize(line)) for line in lines]

  def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
    return [self.vocab[token] for token in tokens]

  def convert_ids_to_tokens(self, ids: Iterable[int]) -> List[str]:
    return [self.inv_vocab[int(i)] for i in ids]


def _split_punctuation(word: str) -> List[str]:
  """Every punctuation character becomes its own word."""
  parts, current = [], []
  for char in word:
    if _is_punctuation(char, unicodedata.category(char)):
      if current:
        parts.append("".join(current))
        current = []
      parts.append(char)
    else:
      current.append(char)
  if current:
    parts.append("".join(current))
  return parts


# ------------------------------------------------ tensorflow-text version
def _re2_class(codepoints: Sequence[int]) -> str:
  """An RE2 character class matching exactly `codepoints` (sorted)."""
  codepoints = np.asarray(codepoints)
  breaks = np.flatnonzero(np.diff(codepoints) != 1)
  starts = codepoints[np.concatenate([[0], breaks + 1])]
  ends = codepoints[np.concatenate([breaks, [len(codepoints) - 1]])]
  return "[" + "".join(
      f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
      for a, b in zip(starts.tolist(), ends.tolist())) + "]"


def _lower_case_context(assigned: Sequence[int]):
  """The classes str.lower's final-sigma rule reads (cased, case-ignorable,
  neither), probed from str.lower with "cΣ" and "AcΣ"."""
  cased, ignorable = [], []
  for cp in assigned:
    char = chr(cp)
    if (char + _CAPITAL_SIGMA).lower().endswith(_FINAL_SIGMA):
      cased.append(cp)
    elif ("A" + char + _CAPITAL_SIGMA).lower().endswith(_FINAL_SIGMA):
      ignorable.append(cp)
  cased_class, ignorable_class = _re2_class(cased), _re2_class(ignorable)
  neither_class = "[^" + _re2_class(sorted(cased + ignorable))[1:]
  # One pass finds every final sigma: a match ends at a character that is
  # neither cased nor ignorable (or the end), which no later match needs.
  return (f"({cased_class}{ignorable_class}*)\\x{{{ord(_CAPITAL_SIGMA):X}}}"
          f"({ignorable_class}*(?:{neither_class}|$))")


@functools.lru_cache(maxsize=1)
def _unicode_tables():
  """RE2 classes and the lower-case tables, from Python's unicodedata and
  str.lower."""
  categories = list(map(unicodedata.category, map(chr, range(0x110000))))
  # Unassigned (Cn), private-use (Co) and surrogate (Cs) codepoints, ~970k of
  # them, are all dropped (C*) and have no other property: skip them here.
  assigned = [cp for cp, category in enumerate(categories)
              if category not in ("Cn", "Co", "Cs")]
  kept, space, cjk, punct, nonspacing = [], [], [], [], []
  lower = np.arange(0x110000, dtype=np.int32)
  multi_lower = {}  # characters whose lower case is several characters
  for cp in assigned:
    char, category = chr(cp), categories[cp]
    if _is_dropped(char, category):
      continue
    kept.append(cp)
    # str.split() also splits at U+2028/U+2029, which _is_whitespace keeps.
    if char != " " and (_is_whitespace(char, category) or char.isspace()):
      space.append(cp)
    if _is_cjk(cp):
      cjk.append(cp)
    if _is_punctuation(char, category):
      punct.append(cp)
    if category == "Mn":
      nonspacing.append(cp)
    lowered = char.lower()
    if len(lowered) == 1:
      lower[cp] = ord(lowered)
    else:
      multi_lower[f"\\x{{{cp:X}}}"] = lowered
  dropped = np.ones(0x110000, dtype=bool)
  dropped[kept] = False
  dropped[_SURROGATES.start:_SURROGATES.stop] = False  # never in UTF-8 text
  # Codepoints above the last one that changes map to themselves.
  lower = lower[:np.flatnonzero(lower != np.arange(0x110000)).max() + 1]
  return {"drop": _re2_class(np.flatnonzero(dropped)), "space": _re2_class(space),
          "cjk": _re2_class(cjk), "punct": _re2_class(punct),
          "nonspacing": _re2_class(nonspacing), "lower": lower,
          "multi_lower": multi_lower,
          "final_sigma": _lower_case_context(kept)}


class FastBasicTokenizer:
  """Steps 1-4 of the module docstring with tensorflow ops: `split_words(lines)`
  maps string [B] to ragged words [B, (words)], traceable, lower-casing as
  str.lower."""

  def __init__(self, do_lower_case: bool = True, strip_accents: bool = True):
    self.do_lower_case = do_lower_case
    self.strip_accents = strip_accents
    self._tables = _unicode_tables()

  def _lower_case(self, text):
    # ASCII lines (most) by the byte-wise op, the others as str.lower: final
    # sigmas and multi-character lower cases by regex, then codepoint by
    # codepoint through the table.
    tables = self._tables
    is_ascii = tf.cast(tf.strings.regex_full_match(text, r"[\x00-\x7f]*"), tf.int32)
    other, ascii_text = tf.dynamic_partition(text, is_ascii, 2)
    other_rows, ascii_rows = tf.dynamic_partition(tf.range(tf.size(text)), is_ascii, 2)
    other = tf.strings.regex_replace(other, tables["final_sigma"],
                                     "\\1" + _FINAL_SIGMA + "\\2")
    for pattern, lowered in tables["multi_lower"].items():
      other = tf.strings.regex_replace(other, pattern, lowered)
    codepoints = tf.strings.unicode_decode(other, "UTF-8")
    table = tf.constant(tables["lower"])
    size = len(tables["lower"])
    lowered = tf.ragged.map_flat_values(
        lambda cps: tf.where(cps < size, tf.gather(table, tf.minimum(cps, size - 1)), cps),
        codepoints)
    return tf.dynamic_stitch(
        [other_rows, ascii_rows],
        [tf.strings.unicode_encode(lowered, "UTF-8"), tf.strings.lower(ascii_text)])

  def split_words(self, lines):
    tables = self._tables
    text = tf.strings.regex_replace(lines, tables["drop"], "")
    text = tf.strings.regex_replace(text, tables["space"], " ")
    text = tf.strings.regex_replace(text, tables["cjk"], r" \0 ")
    if self.do_lower_case:
      text = self._lower_case(text)
      if self.strip_accents:
        text = tf_text.normalize_utf8(text, "NFD")
        text = tf.strings.regex_replace(text, tables["nonspacing"], "")
    text = tf.strings.regex_replace(text, tables["punct"], r" \0 ")
    words = tf.strings.split(text, sep=" ")
    return tf.ragged.boolean_mask(words, tf.strings.length(words) > 0)


  def split_raw_words(self, lines):
    """The words of `lines` (string [B]) as they stand in the text, with
    their UTF-8 byte offsets: (words, starts, ends), each ragged [B, (w)],
    words[i][j] == lines[i][starts[i][j]:ends[i][j]] (bytes).  Words are
    split as `split_words` splits them, before it normalises them:
    whitespace separates words and each punctuation or CJK character is a
    word of its own (dropped characters stay inside words)."""
    tables = self._tables
    return tf_text.regex_split_with_offsets(
        lines, f"(?: |{tables['space']})+|{tables['punct']}|{tables['cjk']}",
        f"{tables['punct']}|{tables['cjk']}")


def fast_wordpiece(vocab: Dict[str, int], token_out_type: tf.DType
                   ) -> tf_text.FastWordpieceTokenizer:
  """The WordPiece of step 5 over `vocab` (token -> id), giving int64 ids or
  tf.string pieces; apply it with `wordpieces`."""
  if UNK_TOKEN not in vocab:
    raise DataError(f"vocab: missing special token(s) {UNK_TOKEN}")
  return tf_text.FastWordpieceTokenizer(
      vocab=sorted(vocab, key=vocab.get), suffix_indicator=WORDPIECE_PREFIX,
      # 4 UTF-8 bytes per character: never reached by words of <= 200 chars.
      max_bytes_per_word=4 * MAX_CHARS_PER_WORD, token_out_type=token_out_type,
      unknown_token=UNK_TOKEN, no_pretokenization=True)


def wordpieces(wordpiece: tf_text.FastWordpieceTokenizer,
               words: tf.RaggedTensor) -> tf.RaggedTensor:
  """Step 5: ragged words [..., (words)] -> [..., (words), (pieces)] of the
  tokenizer's output type; a word of more than MAX_CHARS_PER_WORD characters
  is one [UNK]."""
  too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
  # The word "[UNK]" is in the vocab, so WordPiece maps it to [UNK] whole.
  return wordpiece.tokenize(
      words.with_flat_values(tf.where(too_long, UNK_TOKEN, words.flat_values)))


class FastTokenizer:
  """tensorflow-text tokenizer giving the ids of `FullTokenizer`, in batches."""

  def __init__(self, vocab_file: str, do_lower_case: bool = True,
               strip_accents: bool = True, vocab: Optional[Dict[str, int]] = None):
    """vocab: `load_vocab(vocab_file)` when the caller has read it already."""
    self.vocab = load_vocab(vocab_file) if vocab is None else vocab
    if UNK_TOKEN not in self.vocab:
      raise DataError(f"vocab file {vocab_file}: missing special token(s) {UNK_TOKEN}")
    basic = FastBasicTokenizer(do_lower_case, strip_accents)
    wordpiece = fast_wordpiece(self.vocab, tf.int64)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(lines):
      ids = wordpieces(wordpiece, basic.split_words(lines)).merge_dims(1, 2)
      return ids.flat_values, ids.row_splits

    self._tokenize = tokenize

  def tokenize_to_arrays(self, lines: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
    """Token ids of the lines as flat ids and row splits (line i: ids
    [splits[i]:splits[i + 1]]), NumPy int64 arrays."""
    if not lines:
      return np.zeros([0], np.int64), np.zeros([1], np.int64)
    flat_ids, row_splits = self._tokenize(
        np.array([line.encode("utf-8") for line in lines], dtype=object))
    return flat_ids.numpy(), row_splits.numpy()

  def tokenize_to_ids(self, lines: Sequence[str]) -> List[List[int]]:
    """Token ids of each line, as FullTokenizer.tokenize_to_ids gives them."""
    return ids_lists(*self.tokenize_to_arrays(lines))


def ids_lists(flat_ids: np.ndarray, row_splits: np.ndarray) -> List[List[int]]:
  """The lists of ids of `tokenize_to_arrays`' lines."""
  flat_ids = flat_ids.tolist()
  row_splits = row_splits.tolist()
  return [flat_ids[a:b] for a, b in zip(row_splits, row_splits[1:])]


def candidates_mask(input_ids: tf.Tensor, input_mask: tf.Tensor,
                    special: SpecialIds,
                    disallow_from_mask: Optional[tf.Tensor] = None) -> tf.Tensor:
  """bool [B, S]: real tokens other than [CLS], [SEP], [MASK], [PAD], and
  not in `disallow_from_mask` (bool [B, S]) when given (official
  get_candidates_mask)."""
  candidates = tf.cast(input_mask, tf.bool)
  for token_id in (special.cls_id, special.sep_id, special.mask_id, special.pad_id):
    candidates &= tf.not_equal(input_ids, token_id)
  if disallow_from_mask is not None:
    candidates &= ~tf.cast(disallow_from_mask, tf.bool)
  return candidates
