"""The ner task on small CoNLL-2003-format files written here (four entity
types, ill-formed gold sequences, words of many pieces, a sentence longer
than max_seq_length): reading, featurizing, scores equal to seqeval's on the
predictions it writes, bad files, casing; end to end: training, the result
files and the export's text signature from a fresh process."""

import json
import os
import pathlib
import random
import string
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from electra_tf import tokenization
from electra_tf.errors import ConfigError
from electra_tf.finetune import job as finetune_job
from electra_tf.finetune import task_builder
from electra_tf.finetune.tagging import spans
from electra_tf.finetune.config import FinetuningConfig
from tests.conftest import run_command

seqeval_metrics = pytest.importorskip("seqeval.metrics")
from seqeval import scheme as seqeval_scheme  # noqa: E402

SEQEVAL_SCHEMES = {"IOB1": seqeval_scheme.IOB1, "IOB2": seqeval_scheme.IOB2,
                   "BIOES": seqeval_scheme.IOBES}
NAMES = {"PER": ["John", "Mary", "Zoë", "Smith"], "LOC": ["Paris", "Zürich", "Berlin"],
         "ORG": ["Google", "Acme", "Siemens"], "MISC": ["German", "Olympics"]}
LONG_WORD = "Llanfairpwllgwyngyllgogerychwyrndrobwll"  # one piece per character
FILLER = ["the", "visited", "and", "met", "in", "a", "city", ",", "."]
VOCAB_WORDS = ["John", "Mary", "Paris", "Google", "the", "visited", "and", "met", "in"]
MAX_SEQ_LENGTH = 48
TINY = {"model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 1,
                                   "num_attention_heads": 2},
        "embedding_size": 16, "max_seq_length": MAX_SEQ_LENGTH, "train_batch_size": 16,
        "eval_batch_size": 32, "num_train_epochs": 1.0, "init_checkpoint": "none"}


def cased_vocab():
  """Special tokens, a few whole words, every character alone and as ##."""
  chars = string.ascii_letters + string.digits + string.punctuation + "üëÜ"
  return (list(tokenization.SPECIAL_TOKENS) + VOCAB_WORDS + list(chars)
          + ["##" + c for c in chars])


def _sentence(rng, n_words, ill_formed):
  """Words and IOB2 tags; with ill_formed, some I- after O and I- of
  another type."""
  words, tags = [], []
  while len(words) < n_words:
    if rng.random() < 0.35:
      kind = rng.choice(sorted(NAMES))
      for j in range(rng.randint(1, 3)):
        words.append(LONG_WORD if rng.random() < 0.05 else rng.choice(NAMES[kind]))
        tags.append(("B-" if j == 0 else "I-") + kind)
    else:
      words.append(rng.choice(FILLER))
      tags.append("O")
  if ill_formed:
    i = rng.randrange(len(tags))
    tags[i] = "I-" + rng.choice(sorted(NAMES))
  return words, tags


def write_conll(path: pathlib.Path, sentences, scheme="IOB2"):
  """CoNLL-2003 layout: -DOCSTART-, four columns, a blank line after each
  sentence; the tags rewritten in `scheme` (ill-formed ones kept as such
  for IOB2)."""
  lines = ["-DOCSTART- -X- -X- O", ""]
  for words, tags in sentences:
    if scheme != "IOB2":
      tags = spans.convert(tags, scheme)
    lines += [f"{w} NNP I-NP {t}" for w, t in zip(words, tags)] + [""]
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def ner_sentences(seed):
  rng = random.Random(seed)
  train = [_sentence(rng, rng.randint(3, 14), False) for _ in range(48)]
  dev = [_sentence(rng, rng.randint(3, 14), i % 3 == 0) for i in range(15)]
  dev.append(_sentence(rng, 60, True))  # longer than max_seq_length
  dev.append(([LONG_WORD, "visited", "Zürich"], ["B-PER", "O", "B-LOC"]))
  return train, dev


def make_ner_dir(root: pathlib.Path, scheme="IOB2") -> pathlib.Path:
  train, dev = ner_sentences(0)
  write_conll(root / "finetuning_data" / "ner" / "train.txt", train, scheme)
  write_conll(root / "finetuning_data" / "ner" / "dev.txt", dev, scheme)
  (root / "vocab.txt").write_text("\n".join(cased_vocab()) + "\n", encoding="utf-8")
  return root


def ner_config(data_dir, model_dir=None, **hparams):
  values = dict(TINY, vocab_size=len(cased_vocab()))
  values.update(hparams)
  return FinetuningConfig.create(values, task_names=["ner"], data_dir=str(data_dir),
                                 model_dir=str(model_dir) if model_dir else None)


def ner_task(data_dir, **hparams):
  config = ner_config(data_dir, **hparams)
  return task_builder.get_task("ner", config, finetune_job.load_tokenizer(config))


def seqeval_table(gold, predicted, scheme, strict):
  """type (and "ALL" for the micro average) -> (precision, recall, f1) in %."""
  kwargs = {"mode": "strict", "scheme": SEQEVAL_SCHEMES[scheme]} if strict else {}
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    report = seqeval_metrics.classification_report(gold, predicted, output_dict=True,
                                                   **kwargs)
  return {("ALL" if k == "micro avg" else k):
          tuple(100 * float(v[m]) for m in ("precision", "recall", "f1-score"))
          for k, v in report.items() if k in ("micro avg",) or not k.endswith(" avg")}


@pytest.fixture(scope="module")
def ner_dir(tmp_path_factory):
  return make_ner_dir(tmp_path_factory.mktemp("ner"))


# ---------------------------------------------------------------- reading
def test_reads_conll_2003_and_takes_labels_from_train(ner_dir):
  task = ner_task(ner_dir)
  assert task.config.do_lower_case is False  # ner's single-task default
  assert task.entity_types() == ["LOC", "MISC", "ORG", "PER"]
  assert task.label_list[:5] == ["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
  assert len(task.label_list) == 1 + 4 * 4
  train, dev = ner_sentences(0)
  examples = task.get_examples("dev")
  assert [list(e.words) for e in examples] == [w for w, _ in dev]
  assert [list(e.file_tags) for e in examples] == [t for _, t in dev]
  # labels: the BIOES tags of the spans conlleval reads (I- after O opens one)
  for example, (_, tags) in zip(examples, dev):
    bioes = spans.encode(spans.entity_spans(tags), len(tags), "BIOES")
    assert [task.label_list[i] for i in example.labels] == bioes


def test_featurizes_first_pieces_and_cuts_long_sentences(ner_dir):
  task = ner_task(ner_dir)
  tokenizer = task.tokenizer
  examples = task.get_examples("dev")
  features = task.featurize(examples, is_training=False).arrays
  assert set(features["segment_ids"].ravel()) == {0}
  cut = []
  for row, example in enumerate(examples):
    pieces = [tokenizer.tokenize(w) for w in example.words]
    n_kept = int(features["ner_labels_mask"][row].sum())
    ends = np.cumsum([len(p) for p in pieces]) + 2  # [CLS] ... [SEP]
    assert n_kept == int(np.sum(ends <= MAX_SEQ_LENGTH))
    if n_kept < len(example.words):
      cut.append(row)
    positions = features["ner_labeled_positions"][row][:n_kept]
    assert list(positions) == list(np.cumsum([1] + [len(p) for p in pieces])[:n_kept])
    ids = features["input_ids"][row]
    for word_pieces, position in zip(pieces, positions):  # the word starts there
      assert tokenizer.convert_ids_to_tokens(ids[position:position + len(word_pieces)]) == \
          word_pieces
    assert tokenizer.convert_ids_to_tokens([ids[n] for n in range(
        int(features["input_mask"][row].sum()))])[-1] == "[SEP]"
    assert list(features["ner_labels"][row][:n_kept]) == example.labels[:n_kept]
    if LONG_WORD in example.words:
      assert len(pieces[example.words.index(LONG_WORD)]) == len(LONG_WORD)
  assert len(examples) - 2 in cut and len(examples) - 1 not in cut  # 60 words; 46 pieces


@pytest.mark.parametrize("scheme", spans.SCHEMES)
def test_scores_are_seqevals_on_the_predictions_written(tmp_path, scheme):
  """Random predicted labels: the task's metrics and per-type table are
  seqeval's on (gold file tags, the prediction file's tags), both modes; the
  words cut at max_seq_length are predicted O."""
  data_dir = make_ner_dir(tmp_path, scheme)
  task = ner_task(data_dir, tagging_scheme=scheme)
  examples = task.get_examples("dev")
  features = task.featurize(examples, is_training=False)
  rng = np.random.default_rng(0)
  n = len(features)
  predicted = rng.integers(0, len(task.label_list), (n, MAX_SEQ_LENGTH)).astype(np.int32)
  oracle = features.arrays["ner_labels"]
  keep = rng.random((n, MAX_SEQ_LENGTH)) < 0.6  # mostly right, to have hits
  predicted = np.where(keep, oracle, predicted)
  result = task.evaluate(examples, features, {"predictions": predicted,
                                              "loss": np.ones(n, np.float32)}, "dev")
  gold = [list(e.file_tags) for e in examples]
  written = [p.split() for _, p in result.predictions]
  assert [len(w) for w in written] == [len(g) for g in gold]
  assert all(t == "O" for t in written[-2][int(features.arrays["ner_labels_mask"][-2].sum()):])
  spans.check_scheme_tags([t for tags in written for t in tags], scheme)
  table_rows = [line.split("\t") for line in result.tables["entities"].splitlines()[1:]]
  for mode, strict in (("", False), ("strict_", True)):
    expected = seqeval_table(gold, written, scheme, strict)
    assert tuple(result.metrics[mode + k] for k in ("precision", "recall", "f1")) == \
        pytest.approx(expected["ALL"], abs=1e-9)
    rows = {r[1]: tuple(float(v) for v in r[2:5]) for r in table_rows
            if r[0] == (mode.rstrip("_") or "default")}
    assert rows.keys() == expected.keys()
    for kind, values in expected.items():
      assert rows[kind] == pytest.approx(values, abs=0.006)  # 2 decimals
  assert 20 < result.metrics["f1"] < 95
  assert result.metrics["loss"] == pytest.approx(
      n / features.arrays["ner_labels_mask"].sum())
  if scheme == "IOB2":  # ill-formed gold (I- after O): strict drops those spans
    assert result.metrics["strict_recall"] != result.metrics["recall"]


def test_bad_files_are_one_line_errors_naming_file_and_line(tmp_path):
  data_dir = make_ner_dir(tmp_path)
  train = data_dir / "finetuning_data" / "ner" / "train.txt"
  lines = train.read_text().splitlines()
  lines[3] = "Paris NNP I-NP E-LOC"
  train.write_text("\n".join(lines) + "\n")
  with pytest.raises(ValueError, match=rf"^{train}:4: tag 'E-LOC' is not an IOB2 tag "
                                       r"\(prefixes B, I\) \(hparam tagging_scheme IOB2\)$"):
    ner_task(data_dir).label_list
  with pytest.raises(ValueError, match=rf"^{train}: 116 of 116 entities are ill-formed in "
                                       r"hparam tagging_scheme BIOES \(the first on line 4\) "
                                       r"but 4 in IOB2; set hparam tagging_scheme to IOB2$"):
    ner_task(data_dir, tagging_scheme="BIOES").label_list  # E- is BIOES, the rest is not
  lines[3] = "Paris NNP I-NP B-LOC"
  train.write_text("\n".join(lines) + "\n")
  dev = data_dir / "finetuning_data" / "ner" / "dev.txt"
  dev.write_text(dev.read_text().replace("\n\n", "\nMoon NN I-NP B-PLANET\n\n", 2))
  line = dev.read_text().splitlines().index("Moon NN I-NP B-PLANET") + 1
  with pytest.raises(ValueError, match=rf"^{dev}:{line}: entity type 'PLANET' does not "
                                       rf"occur in {train} \(types: LOC, MISC, ORG, PER\)$"):
    ner_task(data_dir).get_examples("dev")


def seqeval_ill_formed(sentences, scheme):
  """(entities, how many of them seqeval's strict mode drops) of sentences
  of tags: seqeval's default-mode entities against its strict-mode ones."""
  strict = seqeval_scheme.Entities(sentences, SEQEVAL_SCHEMES[scheme]).entities
  n_entities = n_dropped = 0
  for tags, kept in zip(sentences, strict):
    kept = {(e.start, e.end - 1, e.tag) for e in kept}
    found = [(start, end, kind) for kind, start, end in
             seqeval_metrics.sequence_labeling.get_entities(list(tags))]
    n_entities += len(found)
    n_dropped += sum(span not in kept for span in found)
  return n_entities, n_dropped


def test_files_in_another_tagging_scheme_are_refused_naming_the_one_they_fit(
    finetuning_data_dir, tmp_path):
  """The CoNLL-2000 test set (IOB2, well-formed: it passes as IOB2) and its
  IOB1 and BIOES rewritings, and ner's own test sentences with ill-formed
  IOB2 entities: ill-formed counts are seqeval's; a file is refused when
  another scheme reads at most a tenth as many entities ill-formed.  Through
  run_finetuning.py: IOB1 files under the default IOB2 are one line naming
  the file and IOB1, nothing written."""
  from electra_tf.finetune import readers  # pylint: disable=g-import-not-at-top
  chunk = [list(s.tags) for s in readers.read_conll_sentences(
      str(finetuning_data_dir / "chunk" / "dev.txt"))]
  assert spans.better_scheme(chunk, "IOB2") is None  # all 23,852 chunks well-formed IOB2
  assert spans.scheme_fit(chunk, "IOB2") == spans.SchemeFit("IOB2", 23852, 0, None)
  # The first 400 sentences (seqeval takes seconds over the whole file).
  written = {scheme: [spans.convert(tags, scheme) for tags in chunk[:400]]
             for scheme in spans.SCHEMES}
  ner_dev = [tags for _, tags in ner_sentences(0)[1]]
  for sentences, schemes in [(written["IOB1"], spans.SCHEMES), (written["IOB2"], spans.SCHEMES),
                             (written["BIOES"], ["BIOES"]),  # E-, S-: not IOB tags
                             (ner_dev, spans.SCHEMES)]:
    for scheme in schemes:
      fit = spans.scheme_fit(sentences, scheme)
      assert (fit.n_entities, fit.n_ill_formed) == seqeval_ill_formed(sentences, scheme)
  fit = spans.scheme_fit(written["BIOES"], "IOB2")  # a tag IOB2 does not use: all ill-formed
  assert fit.n_ill_formed == fit.n_entities > 4000
  for sentences, declared, fits in [
      (written["IOB1"], "IOB1", None), (written["BIOES"], "BIOES", None),
      (ner_dev, "IOB2", None),  # a few ill-formed entities in IOB2, many more in IOB1
      (written["IOB2"], "IOB1", "IOB2"), (written["IOB2"], "BIOES", "IOB2"),
      (written["IOB1"], "IOB2", "IOB1"), (written["BIOES"], "IOB2", "BIOES")]:
    found = spans.better_scheme(sentences, declared)
    assert (found and found[1].scheme) == fits, (declared, fits)

  data_dir = make_ner_dir(tmp_path / "data", "IOB1")
  before = sorted((tmp_path / "data").rglob("*"))
  train = data_dir / "finetuning_data" / "ner" / "train.txt"
  n_entities, n_ill_formed = seqeval_ill_formed(
      [spans.convert(tags, "IOB1") for _, tags in ner_sentences(0)[0]], "IOB2")
  first = next(number for number, line in enumerate(train.read_text().splitlines(), 1)
               if line.split()[-1:] not in ([], ["O"]))  # IOB1: entities begin with I-
  hparams = json.dumps(dict(TINY, vocab_size=len(cased_vocab())))
  result = run_command("electra_tf.commands.finetune", [
      f"--data_dir={data_dir}", "--task_names=ner", f"--model_dir={tmp_path / 'model'}",
      "--init_checkpoint=none", f"--hparams={hparams}"], "run_finetuning.py")
  assert (result.returncode, result.stderr) == (2, (
      f"run_finetuning.py: error: {train}: {n_ill_formed} of {n_entities} entities are "
      f"ill-formed in hparam tagging_scheme IOB2 (the first on line {first}) but none in IOB1; "
      "set hparam tagging_scheme to IOB1\n"))
  assert sorted((tmp_path / "data").rglob("*")) == before
  assert not (tmp_path / "model").exists()


def test_casing_of_vocab_and_tokenizer_must_agree(tmp_path, bert_vocab):
  data_dir = make_ner_dir(tmp_path)
  with pytest.raises(ConfigError, match=r"^hparam do_lower_case: true, but .*vocab.txt is "
                                        r"a cased vocab \(e.g. 'John'\); set do_lower_case"):
    ner_task(data_dir, do_lower_case=True)
  (data_dir / "vocab.txt").write_bytes(bert_vocab.read_bytes())
  with pytest.raises(ConfigError, match=r"^hparam do_lower_case: false, but .*vocab.txt "
                                        r"is an uncased vocab \(no piece has an upper-case"):
    ner_task(data_dir, vocab_size=30522)
  with pytest.raises(ConfigError, match="hparam tagging_scheme: unknown tagging scheme 'BILOU'"):
    ner_config(data_dir, tagging_scheme="BILOU")
  # A checkpoint's own vocab and casing (here a transformers import whose
  # lower-casing tokenizer has upper-case pieces) are what it was trained
  # with: taken as they are.
  imported = tmp_path / "imported"
  imported.mkdir()
  (imported / "vocab.txt").write_text("\n".join(cased_vocab()) + "\n", encoding="utf-8")
  (imported / "hparams.json").write_text(json.dumps(
      {"model_size": "small", "vocab_size": len(cased_vocab()), "do_lower_case": True}))
  task = ner_task(data_dir, init_checkpoint=str(imported), vocab_size=len(cased_vocab()),
                  do_lower_case=True)
  assert task.config.vocab_file == str(imported / "vocab.txt") and task.config.do_lower_case


# --------------------------------------------------------------- end to end
LOADER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # registers the tokenizer ops
    export, texts_json, arrays_npz, out_npz = sys.argv[1:]
    loaded = tf.saved_model.load(export)
    texts = json.load(open(texts_json))
    out = {"text/" + k: v.numpy() for k, v in
           loaded.signatures["text"](text=tf.constant(texts)).items()}
    arrays = np.load(arrays_npz)
    ids = loaded.signatures["serving_default"](**{k: tf.constant(arrays[k]) for k in arrays.files})
    out.update({"ids/" + k: v.numpy() for k, v in ids.items()})
    assert "electra_tf" not in sys.modules
    np.savez(out_npz, **out)
""")


@pytest.mark.slow
def test_trains_writes_results_and_serves_entities_from_a_fresh_process(tmp_path):
  data_dir = make_ner_dir(tmp_path / "data")
  config = ner_config(data_dir, tmp_path / "model", num_train_epochs=2.0)
  results = finetune_job.run(config, strategy_name="one_device",
                             export_dir=str(tmp_path / "export"))
  results_dir = pathlib.Path(config.results_dir)
  assert sorted(os.listdir(results_dir)) == [
      "ner_dev_entities.tsv", "ner_dev_metrics.json", "ner_dev_predictions.tsv",
      "ner_results.pkl", "ner_results.txt"]
  metrics = json.loads((results_dir / "ner_dev_metrics.json").read_text())
  assert metrics == dict(results[0]["ner"], trial=1)
  rows = [line.split("\t") for line in
          (results_dir / "ner_dev_predictions.tsv").read_text().splitlines()]
  assert rows[0] == ["index", "prediction"]
  written = [row[1].split() for row in rows[1:]]
  _, dev = ner_sentences(0)
  gold = [tags for _, tags in dev]
  for mode, strict in (("", False), ("strict_", True)):
    expected = seqeval_table(gold, written, "IOB2", strict)["ALL"]
    assert tuple(metrics[mode + k] for k in ("precision", "recall", "f1")) == \
        pytest.approx(expected, abs=1e-9)
  assert (results_dir / "ner_results.txt").read_text().startswith("ner: precision: ")

  task = task_builder.get_task("ner", config, finetune_job.load_tokenizer(config))
  examples = task.get_examples("dev")
  features = task.featurize(examples, is_training=False).arrays
  texts = [" ".join(words) for words, _ in dev] + [
      "  Zürich\tand  Zoë,Mary.", "", LONG_WORD + " visited Paris"]
  (tmp_path / "texts.json").write_text(json.dumps(texts))
  np.savez(tmp_path / "arrays.npz", **{
      k: features[k] for k in ("input_ids", "input_mask", "segment_ids")},
      labeled_positions=features["ner_labeled_positions"])
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  subprocess.run([sys.executable, "-c", LOADER, str(tmp_path / "export" / "ner"),
                  str(tmp_path / "texts.json"), str(tmp_path / "arrays.npz"),
                  str(tmp_path / "out.npz")], cwd=tmp_path, env=env, check=True, timeout=600)
  out = np.load(tmp_path / "out.npz", allow_pickle=True)

  def strings(row):
    return [v.decode("utf-8") for v in row if v]

  # the text signature's tags are the predictions file's
  assert [strings(row) for row in out["text/tags"][:len(dev)]] == written
  assert [strings(row) for row in out["text/words"][:len(dev)]] == [w for w, _ in dev]
  # the ids signature gives the same predicted labels on the kept words
  for row, tags in enumerate(written):
    n_kept = int(features["ner_labels_mask"][row].sum())
    labels = [task.label_list[i] for i in out["ids/predictions"][row][:n_kept]]
    assert task.file_tags(labels, len(tags)) == tags
  # entities: the spans of the tags, at the characters of their words
  probabilities_ok = (out["text/entity_score"] >= 0) & (out["text/entity_score"] <= 1)
  assert probabilities_ok.all()
  for row, text in enumerate(texts):
    words = strings(out["text/words"][row])
    tags = strings(out["text/tags"][row])
    word_starts, cursor = [], 0
    for word in words:
      cursor = text.index(word, cursor)
      word_starts.append(cursor)
      cursor += len(word)
    expected = [(kind, word_starts[s], word_starts[e] + len(words[e]))
                for s, e, kind in spans.entity_spans(tags)]
    n = len(expected)
    got = list(zip(strings(out["text/entity_type"][row]),
                   out["text/entity_start"][row][:n].tolist(),
                   out["text/entity_end"][row][:n].tolist()))
    assert got == expected
    assert strings(out["text/entity_text"][row]) == [text[s:e] for _, s, e in expected]
    assert (out["text/entity_start"][row][n:] == -1).all()
  assert strings(out["text/words"][len(dev)]) == ["Zürich", "and", "Zoë", ",", "Mary", "."]
  assert out["text/tags"][len(dev) + 1].tolist() == [b""] * out["text/tags"].shape[1]
  assert len(strings(out["text/tags"][-1])) == 3
