"""TFRecords from the OpenWebText layout (official
build_openwebtext_pretraining_dataset.py): a folder of xz-compressed tar
archives of text documents, read directly, document by document."""

import io
import os
import re
import subprocess
import tarfile

import pytest

from electra_tf.errors import DataError
from electra_tf.pretrain import tfrecords as builder_lib

from tests.test_build_tfrecords import output_files, read_records
from tests.conftest import command_python

RESERVED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "cat", "sat", "dog", "ran", "a", "bird", "flew", "cafe", "deja", "vu",
         "ok", "日", "本", "語", "naive", "hi", "yo", "line", "here", "hello", "world",
         "again", ".", ",", "!", "—"] + [str(i) for i in range(20)]
VOCAB = {token: i for i, token in enumerate(RESERVED + WORDS)}
CLS, SEP = VOCAB["[CLS]"], VOCAB["[SEP]"]

# archive name -> [(member name, text)]; within a document every line has the
# same number of tokens, so that segment A then B keeps the text's order.
ARCHIVES = {
    "urlsf_subset00-1_data.xz": [
        ("0000000-a.txt", "The cat sat.\nThe dog ran.\n\n\nA bird flew.\n"),
        ("0000001-b.txt", "  Café déjà vu, ok!  \r\n\n日本語 — naïve.\n"),
        ("0000002-c.txt", ""),  # an empty document
    ],
    "urlsf_subset00-2_data.xz": [
        ("0000003-d.txt", "Hi.\n\n \t\nYo!"),  # 4 tokens: never split (targets >= 5)
        ("0000004-e.txt", "\n\u00a0\n\n"),  # blank lines only
    ],
    "urlsf_subset01-1_data.xz": [
        ("0000005-f.txt", "".join(f"Line {i} here\n" for i in range(15))),
        ("0000006-g.txt", "Hello world, again.\n"),
    ],
}
# The word pieces of each document with text, as the official tokenizer
# gives them (lower-cased, accents stripped, CJK characters apart).
DOCUMENTS = {
    "0000000-a.txt": "the cat sat . the dog ran . a bird flew .",
    "0000001-b.txt": "cafe deja vu , ok ! 日 本 語 — naive .",
    "0000003-d.txt": "hi . yo !",
    "0000005-f.txt": " ".join(f"line {i} here" for i in range(15)),
    "0000006-g.txt": "hello world , again .",
}
DOCUMENT_IDS = {name: [VOCAB[t] for t in text.split()] for name, text in DOCUMENTS.items()}
ARCHIVE_OF = {member: archive for archive, members in ARCHIVES.items()
              for member, _ in members}
MAX_LENGTH = 64  # longer than any document: no example is ever cut
# Builds that test reading alone use the pure-Python tokenizer, which starts
# at once (tensorflow-text's takes seconds; their output is byte-identical).
READING_ONLY = "reference"


def write_archive(path, members):
  """An xz-compressed tar of the (name, text) members, and a folder entry."""
  with tarfile.open(path, "w:xz") as archive:
    folder = tarfile.TarInfo("extras")
    folder.type = tarfile.DIRTYPE
    archive.addfile(folder)
    for name, text in members:
      data = text.encode("utf-8", "surrogateescape")  # "\udcXX": the byte XX
      info = tarfile.TarInfo(name)
      info.size = len(data)
      archive.addfile(info, io.BytesIO(data))


@pytest.fixture
def owt(tmp_path):
  """(openwebtext dir, vocab file) of a tiny OpenWebText release."""
  directory = tmp_path / "openwebtext"
  directory.mkdir()
  for name, members in ARCHIVES.items():
    write_archive(directory / name, members)
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("".join(token + "\n" for token in VOCAB), encoding="utf-8")
  return directory, vocab


def build(owt_dir, vocab, out, **kwargs):
  kwargs = {"num_out_files": 1, "max_seq_length": MAX_LENGTH, "seed": 0, **kwargs}
  return builder_lib.build_tfrecords(owt_dir, vocab, out, openwebtext=True,
                                     log=lambda _: None, **kwargs)


def documents_in(records):
  """The documents that the examples hold, in order. Checks that each fills
  consecutive examples with its tokens in order, alone."""
  order, remaining = [], []
  for input_ids, input_mask, _ in records:
    assert input_ids[0] == CLS
    tokens = [t for t in input_ids[1:sum(input_mask)] if t != SEP]
    if not remaining:  # a document starts
      starting = [name for name, ids in DOCUMENT_IDS.items()
                  if ids[:len(tokens)] == tokens and name not in order]
      assert len(starting) == 1, tokens
      order += starting
      remaining = DOCUMENT_IDS[starting[0]]
    assert remaining[:len(tokens)] == tokens
    remaining = remaining[len(tokens):]
  assert not remaining
  return order


def test_records_hold_the_documents_in_order(owt, tmp_path):
  owt_dir, vocab = owt
  summary = build(owt_dir, vocab, tmp_path / "fast")
  (path,) = output_files(tmp_path / "fast")
  records = read_records([path])
  assert len(records) == summary["examples"]
  order = documents_in(records)
  assert sorted(order) == sorted(DOCUMENTS)
  archives = [ARCHIVE_OF[name] for name in order]
  runs = [a for i, a in enumerate(archives) if i == 0 or a != archives[i - 1]]
  assert len(runs) == len(set(runs)) == len(ARCHIVES)  # archive after archive
  # Blank lines do not end an OpenWebText document: "Hi. / Yo!" is one example.
  assert [DOCUMENT_IDS["0000003-d.txt"]] == [
      tokens for tokens in ([t for t in ids[1:sum(mask)] if t != SEP]
                            for ids, mask, _ in records) if VOCAB["yo"] in tokens]
  assert {key: summary[key] for key in ("archives", "files", "empty_files", "documents",
                                        "tokens", "invalid_utf8_lines")} == {
      "archives": 3, "files": 7, "empty_files": 2, "documents": 5,
      "tokens": sum(map(len, DOCUMENT_IDS.values())), "invalid_utf8_lines": 0}
  assert "corpus files: 7 (2 empty) in 3 archives," in builder_lib.format_summary(
      summary, str(tmp_path), 1)
  # Reproducible with --seed, whichever tokenizer.
  build(owt_dir, vocab, tmp_path / "reference", tokenizer=READING_ONLY)
  assert [p.read_bytes() for p in output_files(tmp_path / "reference")] == [
      path.read_bytes()]
  # --blanks_separate_docs given: blank lines end documents there too.
  summary = build(owt_dir, vocab, tmp_path / "blanks", blanks_separate_docs=True,
                  tokenizer=READING_ONLY)
  assert summary["documents"] == 8 and summary["files"] == 7


def test_damaged_archives_stop_the_build(owt, tmp_path):
  owt_dir, vocab = owt
  path = owt_dir / "urlsf_subset00-2_data.xz"
  good = path.read_bytes()
  corrupt = bytearray(good)
  corrupt[len(good) // 2] ^= 0xFF
  nested = tmp_path / "openwebtext.tar.xz"  # the release itself, not unpacked
  with tarfile.open(nested, "w:xz") as archive:
    archive.add(owt_dir / "urlsf_subset00-1_data.xz", "openwebtext/urlsf_subset00-1_data.xz")
  damaged = r"damaged or not an xz-compressed tar archive "
  cut = damaged + r"\(Compressed file ended before the end-of-stream marker was reached\)"
  cases = [
      (good[:len(good) // 2], cut),
      (good[:-20], cut),  # only the xz footer is missing
      (bytes(corrupt), damaged + r"\(Corrupt input data\)"),
      (b"plain text\n", damaged + r"\(Input format not supported by decoder\)"),
      (nested.read_bytes(), r"holds the archive openwebtext/urlsf_subset00-1_data.xz, "
       r"not texts \(unpack the OpenWebText download first"),
  ]
  out = tmp_path / "out"
  out.mkdir()
  (out / "pretrain_data.tfrecord-0-of-1").write_bytes(b"earlier records")
  for data, message in cases:
    path.write_bytes(data)
    with pytest.raises(DataError, match=f"^corpus archive {re.escape(str(path))}: "
                       + message):
      build(owt_dir, vocab, out, num_out_files=2, tokenizer=READING_ONLY)
    assert sorted(p.name for p in out.iterdir()) == ["pretrain_data.tfrecord-0-of-1"]
    assert (out / "pretrain_data.tfrecord-0-of-1").read_bytes() == b"earlier records"
  with pytest.raises(DataError, match=r"^--openwebtext_dir .*missing: does not exist$"):
    build(tmp_path / "missing", vocab, out, tokenizer=READING_ONLY)


def test_invalid_utf8_in_a_document(owt, tmp_path):
  owt_dir, vocab = owt
  path = owt_dir / "urlsf_subset00-2_data.xz"
  path.unlink()
  write_archive(path, [("0000003-d.txt", "Hi.\n\udcff bad\nYo!\n")])
  with pytest.raises(DataError, match=(
      f"^corpus file {re.escape(str(path))}, document 0000003-d.txt: line 2 is not "
      r"valid UTF-8 \(invalid start byte at byte offset 4\)")):
    build(owt_dir, vocab, tmp_path / "out", tokenizer=READING_ONLY)
  assert not (tmp_path / "out").exists()
  summary = build(owt_dir, vocab, tmp_path / "out", tokenizer=READING_ONLY,
                  skip_invalid_utf8=True)
  assert (summary["invalid_utf8_lines"], summary["files"], summary["documents"]) == (1, 6, 5)
  assert sorted(documents_in(read_records(output_files(tmp_path / "out")))) == sorted(
      DOCUMENTS)


def run_cli(args):
  return subprocess.run([command_python(), "data_prep/build_tfrecords.py", *args],
                        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
def test_cli_two_processes_cover_the_same_documents(owt, tmp_path):
  owt_dir, vocab = owt
  one = build(owt_dir, vocab, tmp_path / "one")
  result = run_cli([f"--openwebtext_dir={owt_dir}", f"--vocab_file={vocab}",
                    f"--output_dir={tmp_path / 'two'}", "--num_processes=2",
                    "--num_out_files=2", f"--max_seq_length={MAX_LENGTH}"])
  assert result.returncode == 0, result.stderr[-2000:]
  assert "corpus files: 7 (2 empty) in 3 archives, lines skipped as invalid UTF-8: 0" \
      in result.stdout
  assert f"documents: {one['documents']}, tokens: {one['tokens']}" in result.stdout
  # Process j reads the archives i with i % 2 == j (sorted names) and alone
  # writes output file j.
  names = sorted(ARCHIVES)
  for j, path in enumerate(output_files(tmp_path / "two")):
    order = documents_in(read_records([path]))
    assert sorted(order) == sorted(
        member for member in DOCUMENTS if names.index(ARCHIVE_OF[member]) % 2 == j)


@pytest.mark.slow
def test_cli_damaged_archive_is_one_line(owt, tmp_path):
  owt_dir, vocab = owt
  damaged = owt_dir / "urlsf_subset01-1_data.xz"
  damaged.write_bytes(damaged.read_bytes()[:-20])
  out = tmp_path / "out"
  result = run_cli([f"--openwebtext_dir={owt_dir}", f"--vocab_file={vocab}",
                    f"--output_dir={out}", "--num_processes=2", "--num_out_files=2"])
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1] == (
      f"build_tfrecords.py: error: corpus archive {damaged}: damaged or not an "
      "xz-compressed tar archive (Compressed file ended before the end-of-stream "
      "marker was reached)")
  assert "Traceback" not in result.stderr and not out.exists()
