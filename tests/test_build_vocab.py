"""build_vocab: a WordPiece vocab learned from real text, reserved tokens
first, usable by the project's tokenizer; the CLI and its errors."""

import os

import pytest

from electra_tf import tokenization
from electra_tf.errors import DataError
from electra_tf.pretrain import vocab_builder
from tests.conftest import run_command


@pytest.fixture(scope="module")
def book_lines(corpus_dir):
  text = (corpus_dir / "gutenberg" / "jnglb10.txt").read_bytes().decode("utf-8")
  return [line for line in text.split("\n")[:1200] if line.strip()]


def tokenize_with(vocab, lines, tmp_path, do_lower_case):
  path = tmp_path / "vocab.txt"
  path.write_text("".join(token + "\n" for token in vocab), encoding="utf-8")
  tokenizer = tokenization.FullTokenizer(str(path), do_lower_case)
  return [token for line in lines for token in tokenizer.tokenize(line)]


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False])
def test_learned_vocab_covers_the_text(book_lines, tmp_path, do_lower_case):
  vocab = vocab_builder.build_vocab(book_lines, vocab_size=500, do_lower_case=do_lower_case)
  assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert 0.95 * 500 <= len(vocab) <= 500 and len(set(vocab)) == len(vocab)
  assert any(t.startswith("##") for t in vocab) and "the" in vocab
  assert any(t != t.lower() for t in vocab[5:]) == (not do_lower_case)
  tokens = tokenize_with(vocab, book_lines, tmp_path, do_lower_case)
  assert tokens.count("[UNK]") < 0.001 * len(tokens)
  # learned pieces shorten the text well below one token per character
  assert len(tokens) < 0.5 * sum(len(line) for line in book_lines)
  ids = tokenization.special_ids(tokenization.load_vocab(tmp_path / "vocab.txt"), "v")
  assert (ids.pad_id, ids.unk_id, ids.cls_id, ids.sep_id, ids.mask_id) == (0, 1, 2, 3, 4)


@pytest.mark.slow
def test_vocab_size_errors(book_lines):
  with pytest.raises(DataError, match="--vocab_size: 5 leaves no room"):
    vocab_builder.build_vocab(book_lines, vocab_size=5)
  with pytest.raises(DataError,
                     match=r"--vocab_size: 20 is below the \d+ reserved tokens and char"):
    vocab_builder.build_vocab(book_lines[:50], vocab_size=20)
  with pytest.raises(DataError, match="no text to learn a vocab from"):
    vocab_builder.build_vocab(["", "  "], vocab_size=100)


@pytest.mark.slow
def test_cli(book_lines, tmp_path):
  corpus = tmp_path / "book.txt"
  corpus.write_text("\n".join(book_lines[:300]) + "\n", encoding="utf-8")
  output = tmp_path / "new" / "folders" / "vocab.txt"  # made by the command
  done = run_command("electra_tf.commands.build_vocab", [
      f"--corpus_files={corpus}", "--vocab_size=300", f"--output_file={output}"],
      "build_vocab.py")
  assert done.returncode == 0, done.stderr
  vocab = tokenization.load_vocab(output)
  assert 285 <= len(vocab) <= 300 and vocab["[PAD]"] == 0 and vocab["[MASK]"] == 4
  found = "" if len(vocab) == 300 else f" (the learner found {len(vocab)} of the 300 asked for)"
  assert done.stdout.strip() == (f"Wrote {len(vocab)} entries to {output}{found}; the jobs "
                                 "read vocab_size from the file")


@pytest.mark.parametrize("files, message", [
    ([], "--corpus_dir {corpus}: contains no files"),
    (["empty.txt"], "corpus: no text to learn a vocab from")])
def test_cli_on_an_empty_corpus_writes_nothing(tmp_path, files, message):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  for name in files:
    (corpus / name).write_text("\n\n", encoding="utf-8")
  earlier = tmp_path / "vocab.txt"
  earlier.write_text("[PAD]\n")
  for output in (tmp_path / "new" / "vocab.txt", earlier):
    done = run_command("electra_tf.commands.build_vocab", [
        f"--corpus_dir={corpus}", "--vocab_size=100", f"--output_file={output}"],
        "build_vocab.py")
    assert done.returncode == 2
    assert done.stderr == f"build_vocab.py: error: {message.format(corpus=corpus)}\n"
    assert sorted(os.listdir(tmp_path)) == ["corpus", "vocab.txt"]
    assert earlier.read_text() == "[PAD]\n"


def test_corpus_errors(tmp_path):
  with pytest.raises(DataError, match=r"--corpus_dir .*missing: does not exist"):
    vocab_builder.read_corpus_texts(tmp_path / "missing", "--corpus_dir")
  with pytest.raises(DataError, match=r"--corpus_files: corpus file .*nope.txt does not"):
    vocab_builder.read_corpus_texts([tmp_path / "nope.txt"], "--corpus_files")
