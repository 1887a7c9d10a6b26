"""TFRecord builder: the official ExampleBuilder rules, the record format, the
fast/reference tokenizer equivalence, inputs, errors and interruption."""

import concurrent.futures
import gzip
import os
import random
import re
import signal
import subprocess
import sys

import pytest
import tensorflow as tf

from electra_tf import stop_points
from electra_tf import tokenization
from electra_tf.errors import DataError
from electra_tf.pretrain import corpus as corpus_lib
from electra_tf.pretrain import tfrecords as builder_lib
from electra_tf.pretrain.tfrecords import ExampleBuilder
from tests.conftest import command_python

CLS, SEP = 101, 102


class ScriptedRandom(random.Random):
  """Returns the given random() / randint() values in turn."""

  def __init__(self, values, ints=()):
    super().__init__(0)
    self.values, self.ints = list(values), list(ints)

  def random(self):
    return self.values.pop(0)

  def randint(self, a, b):
    value = self.ints.pop(0)
    assert a <= value <= b
    return value


def read_records(paths):
  """[(input_ids, input_mask, segment_ids)] of the records, in file order."""
  records = []
  for path in paths:
    for raw in tf.data.TFRecordDataset(str(path)):
      features = tf.train.Example.FromString(raw.numpy()).features.feature
      assert sorted(features) == ["input_ids", "input_mask", "segment_ids"]
      records.append(tuple(list(features[name].int64_list.value)
                           for name in ("input_ids", "input_mask", "segment_ids")))
  return records


def output_files(directory):
  return sorted(p for p in directory.iterdir() if p.name.startswith("pretrain_data"))


# ------------------------------------------------------- ExampleBuilder rules
def build(rng, lines, max_length=32):
  builder = ExampleBuilder(max_length, CLS, SEP, rng)
  examples = [builder.add_line(line) for line in lines]
  return builder, examples


@pytest.mark.parametrize("overflow_draw, first_len", [(0.3, 20), (0.7, 10)])
def test_two_segments_split_near_half_the_target(overflow_draw, first_len):
  # 0.5: not single-segment; then line 2 would overflow A (10 + 10 >= 14):
  # it joins A with probability 1/2; 0.9: the next target stays 32.
  rng = ScriptedRandom([0.5, overflow_draw, 0.9])
  lines = [[1] * 10, [2] * 10, [3] * 10, [4] * 10]
  _, examples = build(rng, lines)
  assert examples[:3] == [None] * 3 and not rng.values
  input_ids, input_mask, segment_ids = examples[3]
  second_len = 32 - first_len - 3  # B cut to max_length - len(A) - 3
  tokens = sum(lines, [])
  assert input_ids == [CLS] + tokens[:first_len] + [SEP] + tokens[
      first_len:first_len + second_len] + [SEP]
  assert input_mask == [1] * 32
  assert segment_ids == [0] * (first_len + 2) + [1] * (second_len + 1)


def test_forced_single_segment_and_truncation():
  rng = ScriptedRandom([0.05, 0.9])  # < 0.1: everything in segment A
  _, examples = build(rng, [[1] * 10, [2] * 10, [3] * 10, [4] * 10])
  input_ids, _, segment_ids = examples[3]
  assert input_ids == [CLS] + [1] * 10 + [2] * 10 + [3] * 10 + [SEP]  # A cut to 30
  assert segment_ids == [0] * 32 and not rng.values


def test_random_shorter_target_for_the_next_example():
  rng = ScriptedRandom([0.5, 0.01, 0.5, 0.9], ints=[12])
  builder, examples = build(rng, [[9] * 40])
  assert examples[0][0] == [CLS] + [9] * 30 + [SEP]  # a single line stays in A
  examples = [builder.add_line([5] * 5) for _ in range(3)]  # target is now 12
  assert examples[:2] == [None, None]
  input_ids, input_mask, segment_ids = examples[2]
  # first-segment target (12 - 3) // 2 = 4; lines 2 and 3 go to B
  assert input_ids == [CLS] + [5] * 5 + [SEP] + [5] * 10 + [SEP] + [0] * 14
  assert input_mask == [1] * 18 + [0] * 14
  assert segment_ids == [0] * 7 + [1] * 11 + [0] * 14
  assert not rng.values and not rng.ints


def test_end_document_flushes_only_pending_tokens():
  rng = ScriptedRandom([0.5, 0.9])
  builder, _ = build(rng, [[7, 8]])
  assert builder.end_document()[0][:4] == [CLS, 7, 8, SEP]
  assert builder.end_document() is None and not rng.values


def test_encoder_bytes_equal_deterministic_tf_example():
  encoder = builder_lib.ExampleEncoder(30522)
  rng = random.Random(0)
  for length in (5, 128, 512):
    for _ in range(50):
      n = rng.randint(3, length)
      example = ([rng.randrange(30522) for _ in range(n)] + [0] * (length - n),
                 [1] * n + [0] * (length - n),
                 [rng.randint(0, 1) for _ in range(n)] + [0] * (length - n))
      proto = tf.train.Example(features=tf.train.Features(feature={
          name: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
          for name, values in zip(("input_ids", "input_mask", "segment_ids"), example)}))
      assert encoder.encode(example) == proto.SerializeToString(deterministic=True)


def test_encoded_lines_give_the_bytes_of_id_lists():
  # Varints of 1 to 4 bytes; cuts inside and between lines; with and without B.
  rng = random.Random(1)
  vocab_size = 1 << 17
  for length in (5, 16, 64):
    encoder = builder_lib.ExampleEncoder(vocab_size, CLS, SEP, length)
    for _ in range(200):
      lines = [[rng.choice((rng.randrange(128), rng.randrange(1 << 14), rng.randrange(1 << 17)))
                for _ in range(rng.randrange(0, 12))] for _ in range(rng.randrange(1, 6))]
      flat = [i for line in lines for i in line]
      splits = [0]
      for line in lines:
        splits.append(splits[-1] + len(line))
      encoded = builder_lib.lines_of(*builder_lib.encoded_lines(flat, splits))
      assert [len(line) for line in encoded] == [len(line) for line in lines]
      cut = rng.randrange(1, len(lines) + 1)
      first_length = min(sum(map(len, lines[:cut])), rng.randrange(0, length - 1))
      second_length = min(sum(map(len, lines[cut:])),
                          max(0, length - first_length - 3 - rng.randrange(3)))
      builder = ExampleBuilder(length, CLS, SEP, rng)
      expected = builder._pack_lists(lines[:cut], first_length, lines[cut:], second_length)
      record, tokens, single = encoder.encode_lines(encoded[:cut], first_length,
                                                    encoded[cut:], second_length)
      assert record == encoder.encode(expected)
      assert (tokens, single) == (sum(expected[1]), not any(expected[2]))


# ----------------------------------------------------------- real text builds
@pytest.fixture(scope="module")
def corpus_build(corpus_dir, bert_vocab, tmp_path_factory):
  out = tmp_path_factory.mktemp("records")
  summary = builder_lib.build_tfrecords(corpus_dir, bert_vocab, out, num_out_files=3,
                                        seed=0)
  return summary, read_records(output_files(out)), out


@pytest.mark.slow
def test_record_structure_on_real_text(corpus_build):
  summary, records, out = corpus_build
  assert [p.name for p in output_files(out)] == [
      f"pretrain_data.tfrecord-{i}-of-3" for i in range(3)]
  assert len(records) == summary["examples"] > 10_000
  single = lengths = 0
  for input_ids, input_mask, segment_ids in records:
    assert len(input_ids) == len(input_mask) == len(segment_ids) == 128
    n = sum(input_mask)
    assert input_mask == [1] * n + [0] * (128 - n)
    assert input_ids[n:] == [0] * (128 - n) and segment_ids[n:] == [0] * (128 - n)
    assert input_ids[0] == CLS and input_ids[n - 1] == SEP
    seps = [i for i in range(n) if input_ids[i] == SEP]
    assert CLS not in input_ids[1:n] and len(seps) in (1, 2) and 0 not in input_ids[:n]
    if len(seps) == 1:
      single += 1
      assert segment_ids == [0] * 128
    else:  # segment B starts after the first [SEP]
      assert segment_ids[:n] == [0] * (seps[0] + 1) + [1] * (n - seps[0] - 1)
    lengths += n
  assert summary["single_segment_fraction"] == pytest.approx(single / len(records))
  assert summary["mean_length"] == pytest.approx(lengths / len(records))
  # Paragraph-per-line text with blank lines between: most documents are one
  # line, so most examples have one segment, as with the official script.
  assert 0.5 < summary["single_segment_fraction"] < 0.75
  assert summary["files"] == 7 and summary["documents"] > 8000
  assert summary["tokens"] == 912_808  # the word pieces of the whole corpus


def test_examples_follow_the_text_in_order(corpus_dir, bert_vocab, tmp_path):
  path = corpus_dir / "gutenberg" / "31251-0.txt"
  summary = builder_lib.build_tfrecords([path], bert_vocab, tmp_path, num_out_files=1,
                                        max_seq_length=64, seed=3)
  reference = tokenization.FullTokenizer(str(bert_vocab))
  lines = [line.strip() for line in path.read_bytes().decode("utf-8").split("\n")]
  stream = sum(reference.tokenize_to_ids([line for line in lines if line]), [])
  start = kept = 0
  for input_ids, input_mask, segment_ids in read_records(output_files(tmp_path)):
    n = sum(input_mask)
    end = start
    for segment in (0, 1):  # each an in-order subsequence of the text's tokens
      tokens = [t for t, s in zip(input_ids[1:n], segment_ids[1:n])
                if s == segment and t != SEP]
      position = start
      for token in tokens:
        position = stream.index(token, position) + 1
      end = max(end, position)
      kept += len(tokens)
    start = end  # the next example continues after this one
  assert summary["tokens"] == len(stream)
  assert kept > 0.9 * len(stream)  # only the tails of overlong examples are cut


@pytest.mark.slow
def test_fast_and_reference_tokenizers_write_identical_files(corpus_dir, bert_vocab,
                                                            tmp_path):
  corpus = [corpus_dir / "gutenberg" / "31251-0.txt", corpus_dir / "gutenberg" / "jnglb10.txt"]
  contents = {}
  for tokenizer, seed in (("fast", 5), ("reference", 5), ("fast", 6)):
    out = tmp_path / f"{tokenizer}{seed}"
    builder_lib.build_tfrecords(corpus, bert_vocab, out, num_out_files=2, seed=seed,
                                tokenizer=tokenizer)
    contents[tokenizer, seed] = [p.read_bytes() for p in output_files(out)]
  assert contents["fast", 5] == contents["reference", 5]  # byte for byte
  assert contents["fast", 5] != contents["fast", 6]  # the seed drives the choices


@pytest.mark.slow
def test_two_processes_split_files_and_outputs(corpus_dir, bert_vocab, tmp_path):
  corpus = [corpus_dir / "gutenberg" / "31251-0.txt", corpus_dir / "gutenberg" / "43790-0.txt"]
  one = builder_lib.build_tfrecords(corpus, bert_vocab, tmp_path / "one", num_out_files=4,
                                    seed=1)
  two = builder_lib.build_tfrecords(corpus, bert_vocab, tmp_path / "two", num_out_files=4,
                                    seed=1, num_processes=2)
  assert (two["files"], two["tokens"], two["documents"]) == (
      one["files"], one["tokens"], one["documents"])
  records = [read_records([p]) for p in output_files(tmp_path / "two")]
  assert sum(map(len, records)) == two["examples"] > 0
  assert all(records)  # process j cycles through files j and j + 2


def test_blank_lines_gz_invalid_utf8_and_empty_files(bert_vocab, tmp_path):
  corpus = tmp_path / "corpus"
  (corpus / "sub").mkdir(parents=True)
  (corpus / "a.txt").write_bytes(b"Hello world\n\nSecond doc here\n\xff\xfe bad line\n")
  with gzip.open(corpus / "sub" / "b.gz", "wb") as f:
    f.write(b"Gzipped text.\r\n")
  (corpus / "empty.txt").write_bytes(b"\n \n")
  (corpus / ".hidden").write_bytes(b"never read\n")
  summary = builder_lib.build_tfrecords(corpus, bert_vocab, tmp_path / "out",
                                        num_out_files=1, max_seq_length=16, seed=0,
                                        skip_invalid_utf8=True)
  assert (summary["files"], summary["empty_files"], summary["invalid_utf8_lines"]) == (3, 1, 1)
  vocab = tokenization.load_vocab(bert_vocab)
  texts = [[vocab[t] for t in ("hello", "world")],
           [vocab[t] for t in ("second", "doc", "here")],
           [vocab[t] for t in ("g", "##zi", "##pped", "text", ".")]]
  got = sorted(ids[1:sum(mask) - 1] for ids, mask, _ in
               read_records(output_files(tmp_path / "out")))
  assert got == sorted(texts) and summary["documents"] == 3
  # Without blank-line documents the two lines of a.txt share an example.
  summary = builder_lib.build_tfrecords(corpus, bert_vocab, tmp_path / "out2",
                                        num_out_files=1, max_seq_length=16, seed=0,
                                        blanks_separate_docs=False, skip_invalid_utf8=True)
  assert summary["examples"] == summary["documents"] == 2


def test_stale_outputs_removed_others_kept(corpus_dir, bert_vocab, tmp_path):
  (tmp_path / "pretrain_data.tfrecord-7-of-9").write_bytes(b"old")
  (tmp_path / "notes.txt").write_text("mine")
  builder_lib.build_tfrecords([corpus_dir / "gutenberg" / "31251-0.txt"], bert_vocab,
                              tmp_path, num_out_files=2, seed=0)
  assert sorted(p.name for p in tmp_path.iterdir()) == [
      builder_lib.BUILD_RECORD, "notes.txt", "pretrain_data.tfrecord-0-of-2",
      "pretrain_data.tfrecord-1-of-2"]


# ----------------------------------------------------------------- errors
def test_input_errors(corpus_dir, bert_vocab, tmp_path):
  book = [corpus_dir / "gutenberg" / "31251-0.txt"]
  no_mask = tmp_path / "vocab.txt"
  no_mask.write_text("".join(t + "\n" for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "a")))
  (tmp_path / "empty_dir").mkdir()
  (tmp_path / "empty_dir" / ".hidden").write_text("x")
  (tmp_path / "blank").mkdir()
  (tmp_path / "blank" / "a.txt").write_text("\n\n")
  out = tmp_path / "out"
  cases = [
      ((tmp_path / "missing", bert_vocab), {}, r"--corpus_dir .*missing: does not exist"),
      ((book[0], bert_vocab), {}, r"--corpus_dir .*31251-0.txt: is not a directory"),
      ((tmp_path / "empty_dir", bert_vocab), {}, r"empty_dir: contains no files"),
      ((book, tmp_path / "nope.txt"), {}, r"vocab file .*nope.txt: does not exist"),
      ((book, no_mask), {}, r"vocab file .*vocab.txt: missing special token\(s\) \[MASK\]"),
      ((book, bert_vocab), {"num_out_files": 1, "num_processes": 2}, r"--num_out_files: 1"),
      ((book, bert_vocab), {"max_seq_length": 4}, r"--max_seq_length: 4 is below 5"),
      ((tmp_path / "blank", bert_vocab), {}, r"no text in the 1 corpus file"),
  ]
  for (corpus, vocab), kwargs, message in cases:
    with pytest.raises(DataError, match=message):
      builder_lib.build_tfrecords(corpus, vocab, out, **kwargs)
    assert not out.exists() or not list(out.iterdir())  # nothing written


def test_starting_the_workers_stops_quietly_once_a_failed_build_shut_the_pool():
  # A bad corpus line can end the build before the thread that starts the
  # workers has submitted their first tasks; that thread printed a
  # "cannot schedule new futures after shutdown" traceback under the build's
  # one-line error (seen with a fast-starting process, 2026-11-28).
  pool = concurrent.futures.ProcessPoolExecutor(2)
  pool.shutdown()
  builder_lib._start_each_worker(pool, 2)  # pylint: disable=protected-access
  with pytest.raises(RuntimeError):  # what the thread met
    pool.submit(builder_lib._worker_ready)  # pylint: disable=protected-access


def run_cli(args, python=sys.executable, **kwargs):
  return subprocess.Popen([python, "data_prep/build_tfrecords.py", *args],
                          cwd=os.path.dirname(os.path.dirname(__file__)),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          **kwargs)


@pytest.mark.slow
def test_cli_error_is_one_line(corpus_dir, tmp_path):
  process = run_cli([f"--corpus_dir={corpus_dir}", f"--vocab_file={tmp_path}/v.txt",
                     f"--output_dir={tmp_path}/out"])
  _, stderr = process.communicate(timeout=120)
  assert process.returncode == 2
  assert stderr.strip().splitlines()[-1] == (
      f"build_tfrecords.py: error: vocab file {tmp_path}/v.txt: does not exist")
  assert "Traceback" not in stderr and not (tmp_path / "out").exists()


# ------------------------------------------------- the official line rule
GFILE_CASES = {
    "stray carriage return": b"inner\rcarriage return\r\nnext line\n",
    "crlf": b"x\r\ny\r\n\r\nz\r\n",
    "old mac file": b"one\rtwo\rthree\r",
    "lone cr at the end": b"abc\ndef\r",
    "only cr": b"\r",
    "crs and blank lines": b"a\r\r\n\r\n\n\rb\r\n\r",
    "no final newline": b"a\nb",
    "other separators": "a\u2028b\x85c\x0bd\x0ce \r f\n".encode(),
    "cr between bytes of a character": b"caf\xc3\r\xa9\n",
}


@pytest.mark.parametrize("name", sorted(GFILE_CASES))
def test_lines_are_read_as_gfile_reads_them(name, tmp_path):
  data = GFILE_CASES[name]
  (tmp_path / "plain.txt").write_bytes(data)
  with gzip.open(tmp_path / "packed.gz", "wb") as f:
    f.write(data)
  with tf.io.gfile.GFile(str(tmp_path / "plain.txt")) as f:
    official = [line.strip() for line in f]  # the official builder's reading
  for path in ("plain.txt", "packed.gz"):
    chunks = list(corpus_lib.read_corpus_lines(str(tmp_path / path)))
    assert [line for chunk in chunks for line in chunk.lines] == official, path


def test_a_carriage_return_inside_a_line_is_deleted(bert_vocab, tmp_path):
  (tmp_path / "corpus").mkdir()
  (tmp_path / "corpus" / "a.txt").write_bytes(b"the inner\rcarriage\r\n")
  builder_lib.build_tfrecords(tmp_path / "corpus", bert_vocab, tmp_path / "out",
                              num_out_files=1, max_seq_length=8, seed=0, log=lambda _: None)
  vocab = tokenization.load_vocab(bert_vocab)
  (input_ids, _, _), = read_records(output_files(tmp_path / "out"))
  assert input_ids == [CLS, vocab["the"], vocab["inner"], vocab["##carriage"], SEP, 0, 0, 0]


# ----------------------------------------------------- resuming, workers
def resume_corpus(corpus_dir, tmp_path):
  """Three files (one gzipped) of 4,000 to 22,000 lines: chunks within files."""
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  for name in ("pg2701.txt", "31251-0.txt"):
    (corpus / name).write_bytes((corpus_dir / "gutenberg" / name).read_bytes())
  with gzip.open(corpus / "43790-0.txt.gz", "wb") as f:
    f.write((corpus_dir / "gutenberg" / "43790-0.txt").read_bytes())
  return corpus


RESUME_SETTINGS = {"num_out_files": 3, "num_processes": 2, "seed": 4, "max_seq_length": 64}


def build_flags(corpus, vocab, out):
  return [f"--corpus_dir={corpus}", f"--vocab_file={vocab}", f"--output_dir={out}",
          "--num_workers=1", "--checkpoint_every_mb=0.05",
          *(f"--{name}={value}" for name, value in RESUME_SETTINGS.items())]


@pytest.fixture(scope="module")
def uninterrupted(corpus_dir, bert_vocab, tmp_path_factory):
  """(corpus, the files of an uninterrupted build with RESUME_SETTINGS)."""
  root = tmp_path_factory.mktemp("uninterrupted")
  corpus = resume_corpus(corpus_dir, root)
  builder_lib.build_tfrecords(corpus, bert_vocab, root / "out", log=lambda _: None,
                              checkpoint_every_mb=1e6, **RESUME_SETTINGS)
  return corpus, {p.name: p.read_bytes() for p in output_files(root / "out")}


@pytest.mark.slow
@pytest.mark.parametrize("point, count, how", [
    ("tfrecords_writing", 4, "kill"),  # between two progress notes, in a file
    ("tfrecords_checkpoint", 5, "kill"),  # just after a note, inside a file
    ("tfrecords_finishing", 1, "kill"),  # one output file renamed, two not
    ("tfrecords_writing", 2, "interrupt"),  # Ctrl-C
])
def test_a_rerun_finishes_a_killed_build_identically(point, count, how, uninterrupted,
                                                     bert_vocab, tmp_path):
  corpus, expected = uninterrupted
  out = tmp_path / "out"
  # (The zygote's process takes SIGINT as a terminal's Ctrl-C finds it, also
  # in a suite started in the background, which inherits SIGINT ignored.)
  process = run_cli(build_flags(corpus, bert_vocab, out), python=command_python(),
                    env=dict(os.environ, **stop_points.environment(point, count)))
  try:
    assert stop_points.wait_until_stopped(process), process.communicate()[1][-2000:]
    if how == "kill":
      process.kill()  # SIGKILL: no clean-up at all
      process.wait(timeout=60)
    else:
      process.send_signal(signal.SIGINT)  # pending until the process continues
      process.send_signal(signal.SIGCONT)
      _, stderr = process.communicate(timeout=600)
      assert process.returncode == 130, stderr[-2000:]
      assert stderr.strip().splitlines()[-1].endswith(
          "no output file was written; rerun the same command to finish the build")
  finally:
    process.kill()
  renamed = len(output_files(out))
  assert renamed == (1 if point == "tfrecords_finishing" else 0)
  # Other settings are refused, in one line, and change nothing.
  before = {p.name: p.read_bytes() for p in out.iterdir()}
  with pytest.raises(DataError, match=(
      f"^--output_dir {out}: holds an unfinished build with other settings "
      r"\(max_seq_length: 64 there, 128 here\); use another --output_dir")):
    builder_lib.build_tfrecords(corpus, bert_vocab, out, num_workers=1,
                                **{**RESUME_SETTINGS, "max_seq_length": 128})
  assert {p.name: p.read_bytes() for p in out.iterdir()} == before
  logs = []
  summary = builder_lib.build_tfrecords(corpus, bert_vocab, out, num_workers=1,
                                        log=logs.append, checkpoint_every_mb=0.05,
                                        **RESUME_SETTINGS)
  assert logs[0].startswith(f"Resuming the unfinished build in {out}")
  assert {p.name: p.read_bytes() for p in output_files(out)} == expected  # byte for byte
  assert sorted(p.name for p in out.iterdir()) == sorted(
      [builder_lib.BUILD_RECORD, *expected])  # no piece left
  assert summary["files"] == 3 and summary["examples"] == sum(
      len(read_records([out / name])) for name in expected)
  # The same command once more: nothing to do.
  logs = []
  builder_lib.build_tfrecords(corpus, bert_vocab, out, num_workers=1, log=logs.append,
                              **RESUME_SETTINGS)
  assert logs[0].startswith(f"Already built {summary['examples']} examples")


def test_other_settings_are_refused_on_a_finished_build(corpus_dir, bert_vocab, tmp_path):
  book = [corpus_dir / "gutenberg" / "31251-0.txt"]
  builder_lib.build_tfrecords(book, bert_vocab, tmp_path, num_out_files=1, seed=1,
                              log=lambda _: None)
  before = (tmp_path / "pretrain_data.tfrecord-0-of-1").read_bytes()
  for kwargs, message in [
      ({"seed": 2}, "seed: 1 there, 2 here"),
      ({"seed": 1, "do_lower_case": False}, "do_lower_case: true there, false here"),
      ({"seed": 1, "num_out_files": 2}, "num_out_files: 1 there, 2 here"),
  ]:
    with pytest.raises(DataError, match=re.escape(
        f"--output_dir {tmp_path}: holds a finished build with other settings ({message})")):
      builder_lib.build_tfrecords(book, bert_vocab, tmp_path, **{"num_out_files": 1, **kwargs})
  other = tmp_path / "vocab.txt"
  other.write_bytes(bert_vocab.read_bytes() + b"zzextrazz\n")
  with pytest.raises(DataError, match="other settings \\(vocab_sha256: "):
    builder_lib.build_tfrecords(book, other, tmp_path, num_out_files=1, seed=1)
  assert (tmp_path / "pretrain_data.tfrecord-0-of-1").read_bytes() == before


@pytest.mark.slow
def test_workers_write_the_bytes_of_one_process(uninterrupted, bert_vocab, tmp_path):
  # Two tokenizing processes; a file of six chunks is shared between them.
  corpus, expected = uninterrupted
  builder_lib.build_tfrecords(corpus, bert_vocab, tmp_path, num_workers=2,
                              log=lambda _: None, **RESUME_SETTINGS)
  assert {p.name: p.read_bytes() for p in output_files(tmp_path)} == expected
