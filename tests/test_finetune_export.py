"""Fine-tuning exports from raw text: tiny models fine-tuned on slices of the
shared data, exported by the job, moved away from their vocab and loaded in
a fresh process without the project; their text signatures give the
predictions the job wrote and the logits of the ids path; standard tools and
bad inputs."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the exports hold)

from electra_tf.finetune import job as finetune_job
from electra_tf.finetune import outputs, task_builder
from electra_tf.finetune.config import FinetuningConfig
from tests.test_export import _project_free_env, graph_ops, saved_model_cli
from tests.test_finetune_run import TINY, read_tsv

TASKS = ["cola", "rte", "sts", "squadv1", "squad", "chunk"]
PYTHON_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}
CONTEXT_SPACES = "[ \t\r\n\u202f]+"  # what separates context words (qa.split_context)


def _lines(src: pathlib.Path, dst: pathlib.Path, n: int, sep: str = "\n") -> None:
  dst.parent.mkdir(parents=True, exist_ok=True)
  dst.write_text(sep.join(src.read_text(encoding="utf-8").split(sep)[:n]) + sep,
                 encoding="utf-8")


def _squad(dst: pathlib.Path, paragraphs, v2: bool) -> None:
  """SQuAD JSON of `paragraphs`; for 2.0 the last question of each is
  unanswerable."""
  if v2:
    paragraphs = json.loads(json.dumps(paragraphs))
    for paragraph in paragraphs:
      for k, qa in enumerate(paragraph["qas"]):
        qa["is_impossible"] = k == len(paragraph["qas"]) - 1
        if qa["is_impossible"]:
          qa["answers"] = []
  dst.parent.mkdir(parents=True, exist_ok=True)
  dst.write_text(json.dumps({"version": "2.0" if v2 else "1.1", "data": [
      {"title": "t", "paragraphs": paragraphs}]}), encoding="utf-8")


def make_data_dir(root: pathlib.Path, shared: pathlib.Path) -> pathlib.Path:
  """Slices of the shared data; the SQuAD dev sets add a context written
  with tabs, line breaks, double and narrow no-break spaces and accents."""
  src, dst = shared / "data" / "finetuning_data", root / "finetuning_data"
  for task, rows in (("cola", 40), ("rte", 24), ("sts", 24)):
    for split in ("train", "dev"):
      _lines(src / task / f"{split}.tsv", dst / task / f"{split}.tsv", rows + 1)
  for split, n in (("train", 40), ("dev", 20)):
    _lines(src / "chunk" / f"{split}.txt", dst / "chunk" / f"{split}.txt", n, "\n\n")
  paragraphs = json.loads((src / "squadv1" / "dev.json").read_text())["data"][0]["paragraphs"]
  messy = dict(paragraphs[3], context=paragraphs[3]["context"].replace(
      " the ", " \tthe  ").replace(", ", ",\n").replace(" Super", "\u202fSÜPER 中文"))
  for task, v2 in (("squadv1", False), ("squad", True)):
    _squad(dst / task / "train.json", paragraphs[:1], v2)
    _squad(dst / task / "dev.json", [paragraphs[2], messy], v2)
  shutil.copy(shared / "data" / "vocab" / "bert_uncased_vocab.txt", root / "vocab.txt")
  return root


def text_inputs(task, examples, contexts):
  """The text signature's inputs of `examples` (lists of strings)."""
  if task.name in ("squadv1", "squad"):
    return {"question": [e.question_text for e in examples], "context": contexts}
  if task.name == "chunk":
    return {"text": [" ".join(e.words) for e in examples]}
  if task.single_text:
    return {"text_a": [e.text_a for e in examples]}
  return {"text_a": [e.text_a for e in examples], "text_b": [e.text_b for e in examples]}


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory, shared_dir):
  """Every task fine-tuned jointly and exported by the job; the dev inputs of
  both signatures; then the exports moved and the vocab deleted."""
  root = tmp_path_factory.mktemp("finetuned")
  data_dir = make_data_dir(root / "data", shared_dir)
  config = FinetuningConfig.create(dict(TINY, init_checkpoint="none"), task_names=TASKS,
                                   data_dir=str(data_dir), model_dir=str(root / "model"))
  finetune_job.run(config, strategy_name="one_device", export_dir=str(root / "export"))
  tasks = task_builder.get_tasks(config, finetune_job.load_tokenizer(config))
  inputs, data = {}, {}
  for task in tasks:
    data[task.name] = finetune_job.read_split(task, "dev")
    contexts = None
    if task.name in ("squadv1", "squad"):
      dev = json.loads((data_dir / "finetuning_data" / task.name / "dev.json").read_text())
      contexts = [p["context"] for p in dev["data"][0]["paragraphs"] for _ in p["qas"]]
    inputs[task.name] = text_inputs(task, data[task.name].examples, contexts)
  exports = root / "moved" / "exports"
  shutil.copytree(root / "export", exports)
  shutil.rmtree(root / "export")
  os.remove(data_dir / "vocab.txt")  # the exports hold their own copy
  return {"config": config, "tasks": {t.name: t for t in tasks}, "data": data,
          "inputs": inputs, "exports": exports}


# Runs in a fresh interpreter, outside the repository, without electra_tf:
# each export's text signature on the dev texts and its ids signature on the
# Python featurizer's arrays.
LOADER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # registers the tokenizer ops
    exports, texts_json, arrays_npz, outputs_npz = sys.argv[1:]
    texts, arrays = json.load(open(texts_json)), np.load(arrays_npz)
    results = {}
    for task, task_texts in texts.items():
      loaded = tf.saved_model.load(f"{exports}/{task}")
      text_out = loaded.signatures["text"](**{k: tf.constant(v) for k, v in task_texts.items()})
      ids_in = {k.split("/")[1]: tf.constant(arrays[k]) for k in arrays.files
                if k.startswith(task + "/")}
      ids_out = loaded.signatures["serving_default"](**ids_in)
      for kind, out in (("text", text_out), ("ids", ids_out)):
        for key, value in out.items():
          results[f"{task}/{kind}/{key}"] = value.numpy()
    assert "electra_tf" not in sys.modules
    np.savez(outputs_npz, **results)
""")


def _ids_inputs(name, features):
  arrays = {k: features.arrays[k] for k in ("input_ids", "input_mask", "segment_ids")}
  if name == "chunk":
    arrays["labeled_positions"] = features.arrays["chunk_labeled_positions"]
  return {f"{name}/{k}": v for k, v in arrays.items()}


def _tsv_predictions(config, name):
  rows = read_tsv(outputs.predictions_path(config.results_dir, name, "dev"))
  return [row[1] for row in rows[1:]]


def _tsv_text(prediction: str) -> str:
  """A prediction as outputs.write_predictions_tsv writes it."""
  return " ".join(prediction.splitlines()).replace("\t", " ")


def _best_span_score(task, features, ids_out, example_index):
  """The n-best search's best start + end log-prob of one example from the
  ids signature's per-window outputs (qa.QATask._best_answer's candidates)."""
  best = None
  for row in np.flatnonzero(features.example_index == example_index):
    window = features.windows[row]
    for i, start in enumerate(ids_out["start_top_index"][row]):
      for j, end in enumerate(ids_out["end_top_index"][row][i]):
        if (start in window.token_to_orig_map and end in window.token_to_orig_map
            and window.token_is_max_context.get(start, False) and start <= end
            and end - start + 1 <= task.config.max_answer_length):
          score = (float(ids_out["start_top_log_probs"][row][i]) +
                   float(ids_out["end_top_log_probs"][row][i, j]))
          best = score if best is None else max(best, score)
  return best


@pytest.mark.slow
def test_text_signatures_give_the_jobs_predictions_in_a_fresh_process(finetuned, tmp_path):
  config, data, exports = finetuned["config"], finetuned["data"], finetuned["exports"]
  assert sorted(os.listdir(exports)) == sorted(TASKS)
  (tmp_path / "texts.json").write_text(json.dumps(finetuned["inputs"]))
  arrays = {}
  for name in TASKS:
    arrays.update(_ids_inputs(name, data[name].features))
  np.savez(tmp_path / "arrays.npz", **arrays)
  subprocess.run([sys.executable, "-c", LOADER, str(exports), str(tmp_path / "texts.json"),
                  str(tmp_path / "arrays.npz"), str(tmp_path / "out.npz")],
                 cwd=tmp_path, env=_project_free_env(), check=True, timeout=600)
  out = np.load(tmp_path / "out.npz", allow_pickle=True)  # strings: object arrays

  def decoded(key):
    return [value.decode("utf-8") for value in out[key]]

  for name in ("cola", "rte"):  # labels as the job wrote them, logits as the ids path
    assert decoded(f"{name}/text/label") == _tsv_predictions(config, name)
    np.testing.assert_allclose(out[f"{name}/text/logits"], out[f"{name}/ids/logits"],
                               atol=1e-5)
    np.testing.assert_allclose(out[f"{name}/text/probabilities"].sum(-1), 1.0, atol=1e-6)
  scores = np.array([float(s) for s in _tsv_predictions(config, "sts")])
  np.testing.assert_allclose(out["sts/text/score"], scores, atol=1e-5)
  np.testing.assert_allclose(out["sts/text/score"], out["sts/ids/predictions"], atol=1e-5)

  tags = [" ".join(t.decode() for t in row if t) for row in out["chunk/text/tags"]]
  assert tags == _tsv_predictions(config, "chunk")
  words = finetuned["inputs"]["chunk"]["text"]
  assert [sum(1 for w in row if w) for row in out["chunk/text/words"]] == [
      len(text.split()) for text in words]
  kept = data["chunk"].features.arrays["chunk_labels_mask"].sum(1).astype(int)
  assert kept.min() < max(len(t.split()) for t in words)  # some sentences are cut
  for row, n in enumerate(kept):
    np.testing.assert_allclose(out["chunk/text/logits"][row, :n],
                               out["chunk/ids/logits"][row, :n], atol=1e-5)

  for name in ("squadv1", "squad"):
    task, features = finetuned["tasks"][name], data[name].features
    answers = decoded(f"{name}/text/answer")
    assert [_tsv_text(a) for a in answers] == _tsv_predictions(config, name)
    contexts = finetuned["inputs"][name]["context"]
    starts, ends = out[f"{name}/text/answer_start"], out[f"{name}/text/answer_end"]
    ids_out = {k.split("/")[2]: out[k] for k in out.files if k.startswith(f"{name}/ids/")}
    for i, context in enumerate(contexts):
      best = _best_span_score(task, features, ids_out, i)
      assert best is not None and 0 <= starts[i] < ends[i] <= len(context)
      assert out[f"{name}/text/score"][i] == pytest.approx(best, abs=1e-5)
      if answers[i]:  # the span's text, with one space between its words
        assert re.sub(CONTEXT_SPACES, " ", context[starts[i]:ends[i]]) == answers[i]
  no_answer = out["squad/text/no_answer"]
  assert no_answer.dtype == bool and no_answer.shape == (len(answers),)
  np.testing.assert_array_equal(no_answer, out["squad/text/null_score"] > config.qa_na_threshold)
  assert [a == "" for a in decoded("squad/text/answer")] == no_answer.tolist()


@pytest.mark.slow
def test_exports_hold_only_graph_ops_and_the_vocab_asset(finetuned, bert_vocab):
  for name in TASKS:
    export_dir = finetuned["exports"] / name
    ops = graph_ops(export_dir)
    assert not ops & PYTHON_OPS, (name, ops & PYTHON_OPS)
    assert {"FastWordpieceTokenizeWithOffsets", "NormalizeUTF8", "StaticRegexReplace",
            "LookupTableFindV2", "InitializeTableFromTextFileV2"} <= ops, name
    assert (export_dir / "assets" / "vocab.txt").read_bytes() == bert_vocab.read_bytes()


@pytest.fixture(scope="module")
def signatures(finetuned):
  return {name: tf.saved_model.load(str(finetuned["exports"] / name)).signatures
          for name in TASKS}


def _strings(values):
  return tf.constant(values, tf.string)


@pytest.mark.slow
def test_classifier_inputs_are_truncated_checked_and_batch_independent(signatures):
  rte, cola = signatures["rte"]["text"], signatures["cola"]["text"]
  # "" packs [CLS] [SEP] (an empty B: a single text, as the featurizer)
  empty = rte(text_a=_strings([""]), text_b=_strings([""]))
  cls_sep = signatures["rte"]["serving_default"](
      input_ids=tf.constant([[101, 102]]), input_mask=tf.constant([[1, 1]]),
      segment_ids=tf.constant([[0, 0]]))
  np.testing.assert_allclose(empty["logits"], cls_sep["logits"], atol=1e-6)
  # 120,000 characters: cut as truncate_seq_pair cuts (max_seq_length 64)
  long_text = "hello " * 20_000
  np.testing.assert_allclose(
      rte(text_a=_strings([long_text]), text_b=_strings(["world"]))["logits"],
      rte(text_a=_strings(["hello " * 60]), text_b=_strings(["world"]))["logits"], atol=1e-6)
  np.testing.assert_allclose(cola(text_a=_strings([long_text]))["logits"],
                             cola(text_a=_strings(["hello " * 62]))["logits"], atol=1e-6)
  # rows of very different lengths, padded together: each as alone
  texts_a = ["", "A short one.", long_text, "Somewhat longer text, with commas."]
  texts_b = ["b", "", "x " * 500, "Another text."]
  together = rte(text_a=_strings(texts_a), text_b=_strings(texts_b))
  for i, (a, b) in enumerate(zip(texts_a, texts_b)):
    alone = rte(text_a=_strings([a]), text_b=_strings([b]))
    np.testing.assert_allclose(together["logits"][i], alone["logits"][0], atol=1e-5)
    assert together["label"][i] == alone["label"][0]
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"text_b: is not valid UTF-8 at rows\] \[1\]"):
    rte(text_a=_strings(["a", "b"]), text_b=tf.constant([b"ok", b"\xff\xfe"]))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="text_b: batch size differs from the batch size of text_a"):
    rte(text_a=_strings(["a", "b"]), text_b=_strings(["c"]))
  with pytest.raises(TypeError, match="text_b"):
    rte(text_a=_strings(["a pair task needs text_b"]))
  none = rte(text_a=_strings([]), text_b=_strings([]))  # a batch of no rows
  assert none["logits"].shape == (0, 2) and none["label"].shape == (0,)
  assert signatures["sts"]["text"](text_a=_strings([]), text_b=_strings([]))["score"].shape == (0,)


@pytest.mark.slow
def test_pair_task_from_saved_model_cli(finetuned):
  """A session-based server (saved_model_cli, TensorFlow Serving) fails a
  call without text_b with an InvalidArgumentError naming it."""
  export_dir = finetuned["exports"] / "rte"
  run = saved_model_cli("run", "--dir", str(export_dir), "--tag_set", "serve",
                         "--signature_def", "text", "--input_exprs",
                         'text_a=["A cat sat."];text_b=["An animal sat."]')
  assert run.returncode == 0, run.stderr[-2000:]
  assert re.search(r"Result for output key label:\n\[b'(not_)?entailment'\]", run.stdout)
  run = saved_model_cli("run", "--dir", str(export_dir), "--tag_set", "serve",
                         "--signature_def", "text", "--input_exprs", 'text_a=["A cat sat."]')
  assert run.returncode != 0
  assert re.search(r"InvalidArgumentError.*You must feed a value for placeholder tensor "
                   r"'text_text_b'", run.stderr)


@pytest.mark.slow
def test_span_qa_bad_and_long_contexts(signatures, finetuned):
  v1, v2 = signatures["squadv1"]["text"], signatures["squad"]["text"]
  question = finetuned["inputs"]["squadv1"]["question"][0]
  context = finetuned["inputs"]["squadv1"]["context"][0]
  # no context: no window, no candidate: "empty" as official; 2.0: no answer
  empty = v1(question=_strings([question]), context=_strings([""]))
  assert empty["answer"].numpy().tolist() == [b"empty"]
  assert empty["answer_start"].numpy().tolist() == [-1] == empty["answer_end"].numpy().tolist()
  empty = v2(question=_strings([question]), context=_strings([""]))
  assert empty["answer"].numpy().tolist() == [b""] and empty["no_answer"].numpy().tolist() == [True]
  # 100,000 characters: hundreds of windows, an answer from the context
  long_context = (context + " ") * (100_000 // len(context) + 1)
  contexts = [context, long_context, "", "Denver won."]
  questions = [question, question, question, ""]
  together = v1(question=_strings(questions), context=_strings(contexts))
  for i, (q, c) in enumerate(zip(questions, contexts)):
    alone = v1(question=_strings([q]), context=_strings([c]))
    for key in ("answer", "answer_start", "answer_end"):
      assert together[key][i] == alone[key][0]
    assert float(together["score"][i]) == pytest.approx(float(alone["score"][0]), abs=1e-5)
  start, end = int(together["answer_start"][1]), int(together["answer_end"][1])
  assert 0 <= start < end <= len(long_context)
  assert re.sub(CONTEXT_SPACES, " ", long_context[start:end]) == together["answer"][1].numpy().decode()
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"question: is not valid UTF-8 at rows\] \[0\]"):
    v1(question=tf.constant([b"\xc3("]), context=_strings([context]))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="context: batch size differs from the batch size of question"):
    v1(question=_strings([question, question]), context=_strings([context]))
  none = v2(question=_strings([]), context=_strings([]))  # a batch of no rows
  assert none["answer"].shape == (0,) and none["no_answer"].shape == (0,)


@pytest.mark.slow
def test_chunk_cuts_long_sentences_as_the_featurizer(signatures):
  chunk = signatures["chunk"]["text"]
  empty = chunk(text=_strings([""]))
  assert empty["tags"].shape == (1, 0) and empty["words"].shape == (1, 0)
  assert chunk(text=_strings([]))["tags"].shape == (0, 0)  # a batch of no rows
  # 20,000 words: more than max_seq_length, so the featurizer keeps none
  long_text = "word " * 20_000
  texts = ["He reckons the current account deficit will narrow .", long_text, ""]
  together = chunk(text=_strings(texts))
  assert together["tags"].shape == (3, 20_000)
  assert set(together["tags"][1].numpy().tolist()) == {b""}
  assert [w.decode() for w in together["words"][0].numpy()[:9]] == texts[0].split()
  alone = chunk(text=_strings(texts[:1]))
  np.testing.assert_array_equal(together["tags"][0, :9], alone["tags"][0])
  np.testing.assert_allclose(together["logits"][0, :9], alone["logits"][0], atol=1e-5)
  assert all(tag in (b"O",) or tag[:2] in (b"B-", b"I-") for tag in alone["tags"][0].numpy())
