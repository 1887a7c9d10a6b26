"""Tokenization: vocab loading, special ids, and id parity of both tokenizers
with the reference BERT FullTokenizer of tf-models-official."""

import unicodedata

import pytest
import tensorflow as tf

from electra_tf import tokenization
from electra_tf.errors import DataError


def corpus_sample(corpus_dir, every=8):
  """Every `every`-th non-blank line of every corpus file (real text)."""
  lines = []
  for path in sorted(corpus_dir.rglob("*")):
    if path.is_file():
      text = path.read_bytes().decode("utf-8").split("\n")
      lines += [line.strip() for line in text[::every] if line.strip()]
  return lines


@pytest.fixture(scope="module")
def sample_lines(corpus_dir):
  return corpus_sample(corpus_dir)


def test_load_vocab_and_special_ids(bert_vocab):
  vocab = tokenization.load_vocab(bert_vocab)
  assert len(vocab) == 30522
  assert vocab["##s"] == 2015 and vocab["the"] == 1996
  special = tokenization.special_ids(vocab, str(bert_vocab))
  assert special == tokenization.SpecialIds(pad_id=0, unk_id=100, cls_id=101,
                                            sep_id=102, mask_id=103)


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    (b"", "is empty"),
    (b"[PAD]\n\nthe\n", "line 2 is empty"),
    (b"[PAD]\nthe\nthe\n", "'the' on line 3 repeats line 2"),
    (b"[PAD]\n\xff\xfe\n", "line 2 is not valid UTF-8"),
])
def test_load_vocab_errors(tmp_path, content, message):
  path = tmp_path / "vocab.txt"
  if content is not None:
    path.write_bytes(content)
  with pytest.raises(DataError) as e:
    tokenization.load_vocab(path)
  assert str(path) in str(e.value) and message in str(e.value)
  assert "\n" not in str(e.value)


def test_special_ids_names_missing_tokens(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\n[UNK]\n[SEP]\nhello\n")
  with pytest.raises(DataError, match=r"vocab.txt: missing special token\(s\) "
                     r"\[CLS\], \[MASK\]"):
    tokenization.special_ids(tokenization.load_vocab(path), str(path))


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False])
def test_both_tokenizers_match_model_garden_on_corpus(bert_vocab, sample_lines,
                                                      do_lower_case):
  from official.nlp.tools import tokenization as model_garden
  official = model_garden.FullTokenizer(str(bert_vocab), do_lower_case=do_lower_case)
  expected = [official.convert_tokens_to_ids(official.tokenize(line))
              for line in sample_lines]
  assert sum(map(len, expected)) > 100_000
  reference = tokenization.FullTokenizer(str(bert_vocab), do_lower_case)
  assert reference.tokenize_to_ids(sample_lines) == expected
  fast = tokenization.FastTokenizer(str(bert_vocab), do_lower_case)
  assert fast.tokenize_to_ids(sample_lines) == expected
  # word pieces and their inverse mapping
  tokens = reference.tokenize(sample_lines[0])
  assert reference.convert_ids_to_tokens(reference.convert_tokens_to_ids(tokens)) == tokens


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case, strip_accents",
                         [(True, True), (True, False), (False, True)])
def test_fast_matches_reference_on_every_assigned_character(bert_vocab, do_lower_case,
                                                            strip_accents):
  # Each assigned codepoint inside and between words, with ASCII context.
  chars = [chr(cp) for cp in range(0x110000)
           if unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs")]
  lines = [f"A{chars[i]}{chars[i + 1]}b {chars[i + 2]}" + "".join(chars[i + 3:i + 6])
           for i in range(0, len(chars), 6)]
  lines += ["\x00x\ufffdy\u200bz\x85w\u2028v\U000e0001u\U0010fff0t",  # removed / spaces
            "ΟΔΟΣ ΣΟΦΟΣ Σ ΑΣ İstanbul",  # context-dependent lower-casing
            "½ ﬁ Ⅻ ①", "Crème Brûlée naïve", "中文字符 テスト"]
  reference = tokenization.FullTokenizer(str(bert_vocab), do_lower_case, strip_accents)
  fast = tokenization.FastTokenizer(str(bert_vocab), do_lower_case, strip_accents)
  assert fast.tokenize_to_ids(lines) == reference.tokenize_to_ids(lines)


@pytest.mark.slow
def test_fast_basic_tokenizer_lower_cases_sigma_in_every_context(bert_vocab):
  """str.lower's context rules in the graph: capital sigma after each
  assigned character, before it, between cased letters; dotted capital I."""
  chars = [chr(cp) for cp in range(0x110000)
           if unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs")]
  lines = [line for c in chars for line in (f"A{c}\u03a3", f"{c}\u03a3", f"A\u03a3{c}b",
                                            f"x{c}\u03a3.\u03a3'{c}")]
  lines += ["AΣΣ ΣAΣ AΣ'Σ A\u0345Σ İΣ"]
  fast = tokenization.FastBasicTokenizer(do_lower_case=True, strip_accents=False)
  split_words = tf.function(fast.split_words)
  reference = tokenization.FullTokenizer(str(bert_vocab), True, False)
  for start in range(0, len(lines), 50_000):
    batch = lines[start:start + 50_000]
    words = split_words(tf.constant(batch)).to_list()
    assert [[w.decode() for w in row] for row in words] == [
        reference.basic_tokenize(line) for line in batch]


def test_official_rules(bert_vocab):
  lower = tokenization.FullTokenizer(str(bert_vocab))
  assert lower.tokenize("Héllo,WORLD!! unaffable") == [
      "hello", ",", "world", "!", "!", "una", "##ffa", "##ble"]
  assert lower.basic_tokenize("中文a$b") == ["中", "文", "a", "$", "b"]
  # official quirk: accents are stripped only together with lower-casing
  assert tokenization.FullTokenizer(str(bert_vocab), False, True
                                    ).basic_tokenize("Café") == ["Café"]
  assert tokenization.FullTokenizer(str(bert_vocab), True, False
                                    ).basic_tokenize("Café") == ["café"]
  # official max_input_chars_per_word = 200 (Model Garden's is 400), in chars
  fast = tokenization.FastTokenizer(str(bert_vocab))
  unk = lower.vocab["[UNK]"]
  lines = ["a" * 200, "a" * 201, "é" * 150 + "b", "xyz\u1780"]
  ids = lower.tokenize_to_ids(lines)
  assert fast.tokenize_to_ids(lines) == ids
  assert ids[0] != [unk] and ids[1] == [unk]
  assert ids[2] != [unk]  # 301 UTF-8 bytes, but 151 characters
  assert ids[3] == [unk]  # no piece for the Khmer letter: [UNK] for the whole word
