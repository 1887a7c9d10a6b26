"""Fine-tuning readers and featurization on the shared data and on small files."""

import gzip
import json
import os
import shutil

import numpy as np
import pytest

from electra_tf.finetune import task_builder
from electra_tf.finetune.config import FinetuningConfig


@pytest.fixture(scope="module")
def tokenizer(bert_vocab):
  from official.nlp.tools import tokenization
  return tokenization.FullTokenizer(str(bert_vocab), do_lower_case=True)


def make_task(name, data_dir, tokenizer, **hparams):
  config = FinetuningConfig.create(hparams, task_names=[name],
                                   data_dir=str(data_dir))
  return task_builder.get_task(name, config, tokenizer)


def raw_rows(path):
  with open(path, encoding="utf-8-sig") as f:
    return [line.rstrip("\n").split("\t") for line in f]


@pytest.mark.parametrize("name,split,count,text_a,text_b,label,header", [
    ("cola", "dev", 1043, 3, None, 1, False),
    ("cola", "train", 8551, 3, None, 1, False),
    ("sst", "dev", 872, 0, None, 1, True),
    ("mrpc", "dev", 64, 3, 4, 0, True),
    ("sts", "dev", 64, 7, 8, 9, True),
    ("rte", "dev", 64, 1, 2, 3, True),
    ("qnli", "dev", 64, 1, 2, 3, True),
])
def test_glue_tasks_read_official_columns(finetuning_data_dir, tokenizer, name,
                                          split, count, text_a, text_b, label,
                                          header):
  task = make_task(name, finetuning_data_dir.parent, tokenizer)
  examples = task.get_examples(split)
  rows = raw_rows(finetuning_data_dir / name / f"{split}.tsv")[1 if header else 0:]
  assert len(examples) == count == len(rows)
  for index in (0, count // 2, count - 1):
    example, row = examples[index], rows[index]
    assert example.eid == index
    assert example.text_a == row[text_a]
    assert example.text_b == (None if text_b is None else row[text_b])
    if name == "sts":
      assert example.label == pytest.approx(float(row[label]))
    else:
      assert example.label == row[label]


def test_double_unordered_swaps_pairs_for_mrpc_and_sts_train(finetuning_data_dir,
                                                             tokenizer):
  for name in ("mrpc", "sts"):
    examples = make_task(name, finetuning_data_dir.parent, tokenizer).get_examples("train")
    assert len(examples) == 128
    first, swapped = examples[0], examples[64]
    assert (swapped.eid, swapped.text_a, swapped.text_b, swapped.label) == (
        64, first.text_b, first.text_a, first.label)
    single = make_task(name, finetuning_data_dir.parent, tokenizer,
                       double_unordered=False).get_examples("train")
    assert len(single) == 64
  assert len(make_task("rte", finetuning_data_dir.parent, tokenizer)
             .get_examples("train")) == 64


def test_pair_features_layout_and_truncation(finetuning_data_dir, tokenizer):
  task = make_task("rte", finetuning_data_dir.parent, tokenizer)
  example = task.get_examples("dev")[0]
  features = task.featurize([example], is_training=False)
  a, b = tokenizer.tokenize(example.text_a), tokenizer.tokenize(example.text_b)
  expected = tokenizer.convert_tokens_to_ids(["[CLS]"] + a + ["[SEP]"] + b + ["[SEP]"])
  n = len(expected)
  arrays = features.arrays
  assert arrays["input_ids"].dtype == np.int32 and arrays["input_ids"].shape == (1, 128)
  assert list(arrays["input_ids"][0, :n]) == expected and not arrays["input_ids"][0, n:].any()
  assert list(arrays["input_mask"][0]) == [1] * n + [0] * (128 - n)
  assert list(arrays["segment_ids"][0]) == [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * (128 - n)
  assert arrays["rte_label_ids"][0] == 1 and arrays["task_id"][0] == 0  # not_entailment

  short = make_task("rte", finetuning_data_dir.parent, tokenizer, max_seq_length=16)
  ids = short.featurize([example], is_training=True).arrays["input_ids"][0]
  # 13 word pieces for the pair: the longer text (a) is cut first
  n_b = min(len(b), 13 - min(len(a), 13 - len(b)))
  assert list(ids) == tokenizer.convert_tokens_to_ids(
      ["[CLS]"] + a[:13 - n_b] + ["[SEP]"] + b[:n_b] + ["[SEP]"])
  single = make_task("sst", finetuning_data_dir.parent, tokenizer, max_seq_length=8)
  sst = single.get_examples("dev")[0]
  assert list(single.featurize([sst], False).arrays["input_ids"][0]) == (
      tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize(sst.text_a)[:6] + ["[SEP]"]))


def test_sts_targets_are_normalised(finetuning_data_dir, tokenizer):
  task = make_task("sts", finetuning_data_dir.parent, tokenizer)
  examples = task.get_examples("dev")[:5]
  targets = task.featurize(examples, False).arrays["sts_targets"]
  assert targets.dtype == np.float32
  np.testing.assert_allclose(targets, [e.label / 5.0 for e in examples], rtol=1e-6)


def _write(path, lines, bom=False):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(("\ufeff" if bom else "") + "\n".join(lines) + "\n")


def test_mnli_matched_mismatched_test_and_diagnostic(tmp_path, tokenizer):
  header = "\t".join(f"c{i}" for i in range(12))
  row = lambda a, b, label: "\t".join(["x"] * 8 + [a, b, "y", label])
  folder = tmp_path / "finetuning_data" / "mnli"
  _write(str(folder / "dev_matched.tsv"), [header, row("a1", "b1", "neutral")], bom=True)
  _write(str(folder / "dev_mismatched.tsv"), [header, row("a2", "b2", "entailment"),
                                              row("a3", "b3", "contradiction")])
  _write(str(folder / "test_matched.tsv"), ["\t".join(["h"] * 10),
                                            "\t".join(["x"] * 8 + ["t1", "t2"])])
  _write(str(folder / "diagnostic.tsv"), ["index\ts1\ts2", "0\td1\td2"])
  task = make_task("mnli", tmp_path, tokenizer)
  assert task.eval_splits() == {"dev": "", "dev_mismatched": "mismatched_"}
  assert task.test_splits() == ["test_matched", "test_mismatched", "diagnostic"]
  [matched] = task.get_examples("dev")
  assert (matched.text_a, matched.text_b, matched.label) == ("a1", "b1", "neutral")
  mismatched = task.get_examples("dev_mismatched")
  assert [e.label for e in mismatched] == ["entailment", "contradiction"]
  [test] = task.get_examples("test_matched")
  assert (test.text_a, test.text_b, test.label) == ("t1", "t2", "contradiction")
  [diagnostic] = task.get_examples("diagnostic")
  assert (diagnostic.text_a, diagnostic.text_b) == ("d1", "d2")
  assert task.featurize(mismatched, False).arrays["mnli_label_ids"].tolist() == [1, 0]


def test_qqp_and_cola_test_columns(tmp_path, tokenizer):
  folder = tmp_path / "finetuning_data"
  _write(str(folder / "qqp" / "dev.tsv"), ["id\tqid1\tqid2\tq1\tq2\tis_duplicate",
                                           "7\t1\t2\tHow?\tWhy?\t1"])
  _write(str(folder / "qqp" / "test.tsv"), ["id\tq1\tq2", "0\tWho?\tWhere?"])
  _write(str(folder / "cola" / "test.tsv"), ["index\tsentence", "0\tThe cat sat."])
  qqp = make_task("qqp", tmp_path, tokenizer)
  [dev] = qqp.get_examples("dev")
  assert (dev.text_a, dev.text_b, dev.label) == ("How?", "Why?", "1")
  [test] = qqp.get_examples("test")
  assert (test.text_a, test.text_b, test.label) == ("Who?", "Where?", "0")
  [cola] = make_task("cola", tmp_path, tokenizer).get_examples("test")
  assert (cola.eid, cola.text_a, cola.text_b) == (0, "The cat sat.", None)


@pytest.mark.parametrize("name,lines,message", [
    ("rte", ["index\ts1\ts2\tlabel", "0\ta\tb\tentailment", "1\ta\tb"],
     "rte/dev.tsv:3: expected at least 4 tab-separated columns, found 3"),
    ("rte", ["index\ts1\ts2\tlabel", "0\ta\tb\tmaybe"],
     "rte/dev.tsv:2: label 'maybe' is not one of entailment, not_entailment"),
    ("sts", ["h", "\t".join(["x"] * 7 + ["a", "b", "5.5"])],
     "sts/dev.tsv:2: score 5.5 is outside [0.0, 5.0]"),
    ("sts", ["h", "\t".join(["x"] * 7 + ["a", "b", "high"])],
     "sts/dev.tsv:2: score 'high' is not a number"),
    ("cola", ["gj04\t1\t\tok", "", "gj04\t0\t*\tbad"],
     "cola/dev.tsv:2: empty line inside the data"),
])
def test_malformed_rows_name_file_and_line(tmp_path, tokenizer, name, lines, message):
  _write(str(tmp_path / "finetuning_data" / name / "dev.tsv"), lines)
  with pytest.raises(ValueError) as info:
    make_task(name, tmp_path, tokenizer).get_examples("dev")
  assert message in str(info.value) and "\n" not in str(info.value)


def test_missing_file_is_named(tmp_path, tokenizer):
  with pytest.raises(FileNotFoundError, match="finetuning_data/sst/dev.tsv"):
    make_task("sst", tmp_path, tokenizer).get_examples("dev")


def test_chunk_reads_conll_and_labels_first_word_pieces(finetuning_data_dir, tokenizer):
  task = make_task("chunk", finetuning_data_dir.parent, tokenizer)
  examples = task.get_examples("dev")
  assert len(examples) == 2012 and sum(len(e.words) for e in examples) == 47377
  labels = task.label_list
  assert labels == sorted(labels) and "O" in labels and "S-VP" in labels
  assert all(tag == "O" or tag[0] in "BIES" for tag in labels)
  first = examples[0]
  assert first.words[:3] == ("Rockwell", "International", "Corp.")
  # B-NP I-NP I-NP B-NP I-NP I-NP -> BIOES: B E ... (Corp. ends the chunk)
  assert [labels[i] for i in first.labels[:6]] == ["B-NP", "I-NP", "E-NP",
                                                   "B-NP", "I-NP", "E-NP"]
  features = task.featurize(examples[:20], is_training=True).arrays
  for row, example in enumerate(examples[:20]):
    n = len(example.words)
    positions = features["chunk_labeled_positions"][row][:n]
    ids = features["input_ids"][row]
    for word, position in zip(example.words, positions):
      assert ids[position] == tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word)[:1])[0]
    assert features["chunk_labels_mask"][row].sum() == n
    assert list(features["chunk_labels"][row][:n]) == example.labels
    length = features["input_mask"][row].sum()
    assert ids[0] == 101 and ids[length - 1] == 102
    assert list(features["segment_ids"][row]) == list(features["input_mask"][row])
  # the official cut: pieces so far + one slot per word + 1 must fit
  short = make_task("chunk", finetuning_data_dir.parent, tokenizer, max_seq_length=40)
  arrays = short.featurize(examples[:1], True).arrays
  n_kept = int(arrays["chunk_labels_mask"][0].sum())
  n_words = len(examples[0].words)
  assert 0 < n_kept < n_words
  assert arrays["input_mask"][0].sum() <= 40 - n_words - 2 + 1


def test_conll_errors_name_file_and_line(tmp_path, tokenizer):
  path = tmp_path / "finetuning_data" / "chunk" / "train.txt"
  _write(str(path), ["He PRP B-NP", "runs VBZ B-VP", "", "It PRP XX-NP"])
  with pytest.raises(ValueError, match=r"chunk/train.txt:4: tag 'XX-NP'"):
    make_task("chunk", tmp_path, tokenizer).get_examples("train")
  _write(str(path), ["He PRP B-NP", "runs"])
  with pytest.raises(ValueError, match=r"chunk/train.txt:2: expected 'WORD ... TAG'"):
    make_task("chunk", tmp_path, tokenizer).get_examples("train")


@pytest.fixture(scope="module")
def squad_dir(tmp_path_factory, finetuning_data_dir):
  """The SQuAD v1.1 sample as dev.json and as train.json (to get answer positions)."""
  root = tmp_path_factory.mktemp("squad")
  folder = root / "finetuning_data" / "squadv1"
  folder.mkdir(parents=True)
  shutil.copy(finetuning_data_dir / "squadv1" / "dev.json", folder / "dev.json")
  shutil.copy(finetuning_data_dir / "squadv1" / "dev.json", folder / "train.json")
  return root


def test_squad_windows_cover_the_document(squad_dir, tokenizer):
  task = make_task("squadv1", squad_dir, tokenizer, max_seq_length=128,
                   doc_stride=48, max_query_length=24)
  examples = task.get_examples("dev")
  assert len(examples) == 1169
  assert examples[0].qas_id == "56be4db0acb8001400a502ec"
  assert examples[0].answers == ["Denver Broncos"] * 3
  sample = examples[:40]
  features = task.featurize(sample, is_training=False)
  assert features.arrays["input_ids"].shape[1] == 128
  assert len(features) > len(sample)  # long paragraphs need several windows
  for example_index in range(len(sample)):
    rows = np.flatnonzero(features.example_index == example_index)
    example = sample[example_index]
    eids = features.arrays["squadv1_eid"][rows]
    assert list(eids) == [1000 * example.eid + k for k in range(len(rows))]
    words_seen, max_context_windows = set(), {}
    question_pieces = tokenizer.tokenize(example.question_text)
    n_pieces = sum(len(tokenizer.tokenize(w)) for w in example.doc_tokens)
    n_query, spans = task.doc_windows(n_pieces, len(question_pieces))
    query = question_pieces[:24]
    size = 128 - len(query) - 3
    assert n_query == len(query) and spans[0] == (0, min(n_pieces, size))
    assert [b[0] - a[0] for a, b in zip(spans, spans[1:])] == [48] * (len(spans) - 1)
    assert spans[-1][0] + spans[-1][1] == n_pieces  # the last window reaches the end
    assert len(spans) == 1 or spans[-2][0] + size < n_pieces  # its predecessor does not
    assert len(spans) == len(rows)
    for row, (span_start, span_length) in zip(rows, spans):
      window = features.windows[row]
      ids = features.arrays["input_ids"][row]
      n = int(features.arrays["input_mask"][row].sum())
      assert n == len(query) + span_length + 3
      assert list(ids[:n]) == tokenizer.convert_tokens_to_ids(window.tokens)
      assert window.tokens[:len(query) + 2] == ["[CLS]"] + query + ["[SEP]"]
      segments = features.arrays["segment_ids"][row]
      assert segments[len(query) + 1] == 0 and segments[len(query) + 2] == 1
      words_seen.update(window.token_to_orig_map.values())
      for position, is_max in window.token_is_max_context.items():
        piece = span_start + position - (len(query) + 2)
        max_context_windows[piece] = max_context_windows.get(piece, 0) + is_max
    assert words_seen == set(range(len(example.doc_tokens)))
    # every word piece has exactly one window with its maximum context
    assert sorted(max_context_windows) == list(range(n_pieces))
    assert set(max_context_windows.values()) == {1}


def test_squad_training_positions_point_at_the_answer(squad_dir, tokenizer):
  task = make_task("squadv1", squad_dir, tokenizer, max_seq_length=128,
                   doc_stride=48, max_query_length=24)
  examples = task.get_examples("train")[:60]
  features = task.featurize(examples, is_training=True)
  found = exact = 0
  for row, example_index in enumerate(features.example_index):
    start = features.arrays["squadv1_start_positions"][row]
    end = features.arrays["squadv1_end_positions"][row]
    if start == 0:
      assert end == 0  # window without the answer points at [CLS]
      continue
    found += 1
    tokens = features.windows[row].tokens[start:end + 1]
    answer = tokenizer.tokenize(examples[example_index].orig_answer_text)
    # answers inside a word ("gold" in "golden", "8" in "20–18") keep the word
    exact += tokens == answer
    assert " ".join(answer).replace(" ##", "") in " ".join(tokens).replace(" ##", "")
  assert found >= len(examples)  # each answer lies in at least one window
  assert exact >= 0.9 * found


def test_squad_json_errors_name_file_and_place(tmp_path, tokenizer):
  path = tmp_path / "finetuning_data" / "squadv1" / "dev.json"
  _write(str(path), ['{"data": [', '{"paragraphs": [}]}'])
  with pytest.raises(ValueError, match=r"squadv1/dev.json:2: invalid JSON"):
    make_task("squadv1", tmp_path, tokenizer).get_examples("dev")
  _write(str(path), [json.dumps({"data": [{"paragraphs": [
      {"context": "c", "qas": [{"id": "q1"}]}]}]})])
  with pytest.raises(ValueError, match=r"data\[0\].paragraphs\[0\].qas\[0\] has no 'question'"):
    make_task("squadv1", tmp_path, tokenizer).get_examples("dev")
  train = tmp_path / "finetuning_data" / "squad" / "train.json"
  _write(str(train), [json.dumps({"data": [{"paragraphs": [
      {"context": "c", "qas": [{"id": "q1", "question": "q", "answers": []}]}]}]})])
  with pytest.raises(ValueError, match=r"no 'is_impossible' boolean"):
    make_task("squad", tmp_path, tokenizer).get_examples("train")


# ------------------------------------------------------------------- GLUE: skipped train rows
def test_short_train_rows_are_skipped_and_counted(tmp_path, tokenizer, caplog):
  lines = ["index\ts1\ts2\tlabel", "0\ta\tb\tentailment", "1\tonly one", "",
           "3\tc\td\tnot_entailment"]
  _write(str(tmp_path / "finetuning_data" / "rte" / "train.tsv"), lines)
  _write(str(tmp_path / "finetuning_data" / "mrpc" / "train.tsv"),
         ["q\t1\t2\ta\tb", "1\t1\t2\tx\ty", "0\t1\t2\tonly x", "0\t1\t2\tu\tv"])
  with caplog.at_level("WARNING"):
    examples = make_task("rte", tmp_path, tokenizer).get_examples("train")
  # official: the rows are skipped, the ids keep counting rows
  assert [(e.eid, e.text_a, e.label) for e in examples] == [
      (0, "a", "entailment"), (3, "c", "not_entailment")]
  path = tmp_path / "finetuning_data" / "rte" / "train.tsv"
  [warning] = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
  assert "skipped 2 malformed row(s)" in warning and f"{path}:3, {path}:4" in warning
  caplog.clear()
  with caplog.at_level("WARNING"):  # both orders of MRPC: one warning
    mrpc = make_task("mrpc", tmp_path, tokenizer).get_examples("train")
  assert [(e.text_a, e.text_b) for e in mrpc] == [("x", "y"), ("u", "v"), ("y", "x"),
                                                  ("v", "u")]
  assert len([r for r in caplog.records if "skipped 1 malformed" in r.getMessage()]) == 1
  # a bad label still stops, with file and line
  _write(str(path), lines[:2] + ["2\te\tf\tmaybe"])
  with pytest.raises(ValueError, match=r"rte/train.tsv:3: label 'maybe' is not one"):
    make_task("rte", tmp_path, tokenizer).get_examples("train")


# ------------------------------------------------------------------------------ MRQA
MRQA_CONTEXT = ("The Eiffel Tower is in Paris . It was finished in 1889 and "
                "named after Gustave Eiffel , whose company built it .")


def mrqa_question(qid, question, answers, detected):
  """An MRQA question; `detected`: (text, [char starts]) of each detected answer."""
  return {"qid": qid, "question": question, "answers": answers,
          "detected_answers": [
              {"text": text, "char_spans": [[s, s + len(text) - 1] for s in starts],
               "token_spans": [[0, 0]] * len(starts)} for text, starts in detected]}


def mrqa_lines(split):
  """A header and two contexts in the MRQA layout."""
  eiffel = [MRQA_CONTEXT.index("Eiffel"), MRQA_CONTEXT.rindex("Eiffel")]
  return [json.dumps({"header": {"dataset": "NewsQA", "split": split}}),
          json.dumps({"id": "c1", "context": MRQA_CONTEXT, "qas": [
              # several spans of one answer and a second answer: the first
              # span of the first detected answer is the training target
              mrqa_question("q1", "Who is it named after?", ["Eiffel", "Gustave Eiffel"],
                            [("Eiffel", eiffel), ("Gustave Eiffel", [eiffel[1] - 8])]),
              mrqa_question("q2", "When was it finished?", ["1889"],
                            [("1889", [MRQA_CONTEXT.index("1889")])])]}),
          json.dumps({"id": "c2", "context": "Mount Fuji is in Japan .", "qas": [
              # a detected span that does not hold its text: skipped (official)
              mrqa_question("q3", "Where is it?", ["Japan"], [("Japan", [0])])]})]


def test_mrqa_reads_gzipped_and_plain_jsonl(tmp_path, tokenizer):
  folder = tmp_path / "finetuning_data" / "newsqa"
  folder.mkdir(parents=True)
  with gzip.open(folder / "train.jsonl.gz", "wt", encoding="utf-8") as f:
    f.write("\n".join(mrqa_lines("train")) + "\n")
  _write(str(folder / "dev.jsonl"), mrqa_lines("dev"))
  task = make_task("newsqa", tmp_path, tokenizer, max_seq_length=32,
                   max_query_length=8, doc_stride=8)
  assert task.data_path("train").endswith("train.jsonl.gz")
  assert task.data_path("dev").endswith("dev.jsonl") and task.test_splits() == []
  train = task.get_examples("train")
  assert [e.qas_id for e in train] == ["q1", "q2"]  # q3 skipped
  words = MRQA_CONTEXT.split()
  assert words[train[0].start_position] == "Eiffel" and train[0].start_position == 1
  assert (words[train[1].start_position], train[1].end_position) == (
      "1889", train[1].start_position)
  dev = task.get_examples("dev")
  assert [(e.qas_id, e.answers) for e in dev] == [
      ("q1", ["Eiffel", "Gustave Eiffel"]), ("q2", ["1889"]), ("q3", ["Japan"])]
  assert dev[0].doc_tokens == words and dev[2].doc_tokens == "Mount Fuji is in Japan .".split()
  features = task.featurize(train, is_training=True)
  for row, example_index in enumerate(features.example_index):
    start = features.arrays["newsqa_start_positions"][row]
    end = features.arrays["newsqa_end_positions"][row]
    if start:
      answer = tokenizer.tokenize(train[example_index].orig_answer_text)
      assert features.windows[row].tokens[start:end + 1] == answer
  assert set(features.example_index[features.arrays["newsqa_start_positions"] > 0]) == {0, 1}
  # the official name wins over the gzipped one; debug reads 11 lines (header included)
  _write(str(folder / "train.jsonl"), mrqa_lines("train")[:2])
  assert [e.qas_id for e in make_task("newsqa", tmp_path, tokenizer).get_examples(
      "train")] == ["q1", "q2"]
  _write(str(folder / "dev.jsonl"), mrqa_lines("dev")[:1] + mrqa_lines("dev")[1:2] * 12)
  debug = make_task("newsqa", tmp_path, tokenizer, debug=True)
  assert len(debug.get_examples("dev")) == 2 * 10


@pytest.mark.parametrize("split,line,message", [
    ("dev", '{"context": "a b", "qas": [', r"dev.jsonl:3: invalid JSON"),
    ("dev", '{"context": "a b"}', r"dev.jsonl:3: no 'qas' list"),
    ("dev", json.dumps({"context": "a", "qas": [{"qid": "x", "question": "q",
                                                "answers": "a"}]}),
     r"dev.jsonl:3: qas\[0\] \('x'\): 'answers' is not a list of strings"),
    ("dev", json.dumps({"context": "a", "qas": [mrqa_question("x", "q", ["a"], [])]})
     .replace('"detected_answers": []', '"detected_answers": [{"text": "a"}]'),
     r"dev.jsonl:3: qas\[0\].detected_answers\[0\] \('x'\) needs 'text'"),
    ("dev", json.dumps({"context": "a", "qas": [mrqa_question("x", "q", [], [])]}),
     r"dev.jsonl:3: qas\[0\] \('x'\) has an empty 'answers' list"),
    ("train", json.dumps({"context": "a", "qas": [mrqa_question("x", "q", ["a"], [])]}),
     r"train.jsonl:3: qas\[0\] \('x'\) has no 'detected_answers'"),
])
def test_mrqa_errors_name_file_and_line(tmp_path, tokenizer, split, line, message):
  lines = mrqa_lines(split)[:2] + [line]
  _write(str(tmp_path / "finetuning_data" / "triviaqa" / f"{split}.jsonl"), lines)
  with pytest.raises(ValueError, match=message) as info:
    make_task("triviaqa", tmp_path, tokenizer).get_examples(split)
  assert "\n" not in str(info.value)


def test_mrqa_damaged_gzip_and_missing_file(tmp_path, tokenizer):
  folder = tmp_path / "finetuning_data" / "searchqa"
  with pytest.raises(FileNotFoundError, match="searchqa/dev.jsonl: fine-tuning data"):
    make_task("searchqa", tmp_path, tokenizer).get_examples("dev")
  folder.mkdir(parents=True)
  data = gzip.compress(("\n".join(mrqa_lines("dev")) + "\n").encode())
  (folder / "dev.jsonl.gz").write_bytes(data[:len(data) // 2])
  with pytest.raises(ValueError, match="searchqa/dev.jsonl.gz: damaged gzip file"):
    make_task("searchqa", tmp_path, tokenizer).get_examples("dev")
  lines = [line.encode() for line in mrqa_lines("dev")]
  lines[2] = lines[2].replace(b"Mount", b"M\xffount")
  (folder / "dev.jsonl").write_bytes(b"\n".join(lines) + b"\n")
  with pytest.raises(ValueError, match=r"searchqa/dev.jsonl:3: not valid UTF-8 \(byte 26 "):
    make_task("searchqa", tmp_path, tokenizer).get_examples("dev")
