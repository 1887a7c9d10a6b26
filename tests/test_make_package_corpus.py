"""tools/make_package_corpus.py: text extraction per format, deduplication, the
held-out split, the report, and refusals, on the fixture under
tests/data/package_corpus/root (hand-written pages in each package's layout)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from electra_tf.tokenization import FullTokenizer
from tools import make_package_corpus as mpc

REPO = pathlib.Path(__file__).resolve().parent.parent
ROOT = REPO / "tests" / "data" / "package_corpus" / "root"
PACKAGES = "python3.11-doc,perl-doc,dict-gcide,wordnet-base"


def _read(path):
  return (ROOT / path).read_text(encoding="utf-8")


def test_sentences_split_at_sentence_ends_only():
  assert mpc.split_sentences("It works. Call f() now! Is 3.5 ok? yes, e.g. this.") == [
      "It works.", "Call f() now!", "Is 3.5 ok? yes, e.g. this."]


def test_prose_needs_words_and_letters():
  assert mpc.is_prose("Only the keys are kept in memory.", 4)
  assert not mpc.is_prose("Too short.", 4)
  assert not mpc.is_prose("x = 1; y = 2; z = [3, 4, 5]", 4)


def test_html_keeps_prose_and_drops_code_tables_navigation():
  paragraphs = mpc.html_paragraphs(_read("usr/share/doc/python3.11/html/library/shelve.html"))
  assert paragraphs[0] == "shelve — Python object persistence"  # the pilcrow link is gone
  assert "Call close() when you are done with the shelf & its file. Do not rely on the shelf " \
         "being closed automatically!" in paragraphs                # inline code kept
  assert "Only the keys are kept in memory, not the values stored under them." in paragraphs
  text = " ".join(paragraphs)
  for dropped in ("shelve.open", "Meaning of the option", "next page", "sidebar links",
                  "Copyright", "color: black", "var x"):
    assert dropped not in text


def test_pod_keeps_paragraphs_and_drops_verbatim_and_other_formats():
  paragraphs = mpc.pod_paragraphs(_read("usr/share/perl/5.36.0/pod/perlsample.pod"))
  assert paragraphs == [
      "NAME", "perlsample - how a sample manual page reads", "DESCRIPTION",
      "A bold word, an italic one and code inline all keep their text. See the perlfunc "
      "page for the list of built-in functions, and write <STDIN> to read a line.",
      "The first item of a list reads as a paragraph too.",
      "Closing words",
      "A paragraph after the code has its own place in the document again."]


def test_dictd_numbers_are_base64_digits():
  assert mpc.dictd_number("A") == 0
  assert mpc.dictd_number("BF") == 64 + 5
  assert mpc.dictd_number("B/b") == 64 * 64 + 63 * 64 + 27


def test_dictd_entries_lose_markup_and_share_a_page():
  pages = list(mpc.dictd_documents(str(ROOT / "usr/share/dictd/gcide.index"), page_words=1000))
  assert len(pages) == 1  # two entries (the second headword of Abate read once), one page
  name, paragraphs = pages[0]
  assert name.endswith(":Abate")
  assert paragraphs == [
      "To lessen in force or intensity; to reduce the amount of.",
      "The fever of his ambition at length began to abate.",
      "A monastery or society of persons secluded from the world; the church of such a house.",
      "Monastery; convent; cloister; priory."]


def test_wordnet_glosses_become_sentences_in_pages_per_lexicographer_file():
  pages = list(mpc.wordnet_documents(str(ROOT / "usr/share/wordnet/data.noun"), page_words=15))
  # 17 words fill the first page; the next two synsets (11 + 20 words) share the second.
  assert [name for name, _ in pages] == ["data.noun:00001740", "data.noun:00002137",
                                         "data.noun:00005930"]
  assert pages[1][1] == ["A general concept formed by extracting common features from specific "
                         "examples.",
                         "A living thing that has (or can develop) the ability to act or "
                         "function independently. The organism grew. Every organism needs "
                         "energy."]
  assert pages[2][1] == ["A plant or animal that is atypically small."]  # lexfile 05


def _corpus_documents(path):
  text = path.read_text(encoding="utf-8")
  return [block.split("\n") for block in text.split("\n\n") if block.strip()]


@pytest.mark.slow
def test_command_writes_corpus_report_and_heldout(tmp_path, bert_vocab):
  out = tmp_path / "corpus"
  result = subprocess.run(
      [sys.executable, "-m", "tools.make_package_corpus", f"--root={ROOT}",
       f"--packages={PACKAGES}", f"--output_dir={out}", f"--vocab_file={bert_vocab}",
       "--heldout_percent=50", "--page_words=15"],
      cwd=REPO, capture_output=True, text=True, check=False)
  assert result.returncode == 0, result.stderr
  assert sorted(os.listdir(out)) == ["heldout", "report.json", "train"]
  assert sorted(os.listdir(out / "train")) == sorted(f"{p}.txt" for p in PACKAGES.split(","))
  assert os.listdir(out / "heldout") == ["heldout.txt"]
  report = json.loads((out / "report.json").read_text())
  tokenizer = FullTokenizer(str(bert_vocab), do_lower_case=True)
  all_lines = []
  for package in PACKAGES.split(","):
    train_docs = _corpus_documents(out / "train" / f"{package}.txt")
    counts = report["packages"][package]["train"]
    assert counts["documents"] == len(train_docs)
    lines = [line for doc in train_docs for line in doc]
    assert counts["sentences"] == len(lines)
    assert counts["tokens"] == sum(len(tokenizer.tokenize(line)) for line in lines)
    all_lines += lines
  heldout = [line for doc in _corpus_documents(out / "heldout" / "heldout.txt") for line in doc]
  assert report["total"]["heldout"]["sentences"] == len(heldout)
  assert report["total"]["train"]["documents"] + report["total"]["heldout"]["documents"] == \
      sum(report["packages"][p][part]["documents"] for p in report["packages"]
          for part in ("train", "heldout"))
  everything = all_lines + heldout
  # The paragraph both Python pages carry is kept once; the excluded index page is not read.
  assert sum(line == "A shelf is a persistent, dictionary-like object." for line in everything) == 1
  assert not any("Index of every name" in line for line in everything)
  assert "The dbm module is a generic interface to variants of the DBM database." in everything
  assert "Every organism needs energy." in " ".join(everything)


@pytest.mark.slow
def test_command_refuses_bad_input_and_writes_nothing(tmp_path, bert_vocab):
  def run(*args):
    return subprocess.run([sys.executable, "-m", "tools.make_package_corpus",
                           f"--vocab_file={bert_vocab}", *args],
                          cwd=REPO, capture_output=True, text=True, check=False)

  existing = tmp_path / "existing"
  existing.mkdir()
  (existing / "keep.txt").write_text("mine")
  result = run(f"--root={ROOT}", f"--output_dir={existing}")
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1].startswith("make_package_corpus.py: error: "
                                                           "--output_dir:")
  assert os.listdir(existing) == ["keep.txt"]

  result = run(f"--root={ROOT}", "--packages=nosuch-doc", f"--output_dir={tmp_path / 'a'}")
  assert result.returncode == 2 and "--packages: unknown nosuch-doc" in result.stderr

  # rust-doc has no file in the fixture: the error names it and no folder is left.
  result = run(f"--root={ROOT}", "--packages=perl-doc,rust-doc", f"--output_dir={tmp_path / 'b'}")
  assert result.returncode == 2 and "--packages: rust-doc has no files" in result.stderr
  assert sorted(os.listdir(tmp_path)) == ["existing"]
