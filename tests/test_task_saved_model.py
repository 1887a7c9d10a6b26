"""The registry walk: every registered fine-tuning task (finetune/config.py
TASKS) served from raw text gives what its Python path gives (featurize ->
model -> evaluate's predictions) on its family's sample inputs, so a task
added tomorrow is covered without a new test.  One tiny random-init model
holds every task's head; each task's export module (what export_task_model
saves) is built and called in-process.  Then one saved export per use
(classifiers, span QA, chunking): the SavedModel round trip, the vocab
asset, saved_model_cli and bad inputs."""

import json
import pathlib
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the exports hold)
import tf_keras as keras

from electra_tf import saved_model, text_graph
from electra_tf.finetune import config as finetune_config
from electra_tf.finetune import job as finetune_job
from electra_tf.finetune import task_builder
from electra_tf.finetune import task_saved_model
from electra_tf.finetune.classification import classification_tasks
from electra_tf.finetune.config import FinetuningConfig
from electra_tf.finetune.model import FinetuningModel
from electra_tf.finetune.qa import qa_tasks
from electra_tf.finetune.tagging import spans, tagging_tasks
from tests.test_export import graph_ops, saved_model_cli

TINY = {"model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 1,
                                   "num_attention_heads": 2},
        "embedding_size": 16, "max_seq_length": 40, "max_query_length": 12,
        "doc_stride": 16, "beam_size": 5, "n_best_size": 5, "init_checkpoint": "none"}
SAVED = ["cola", "rte", "sts", "squadv1", "squad", "chunk"]  # the exports saved to disk
PYTHON_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}
TOKENIZER_OPS = {"FastWordpieceTokenizeWithOffsets", "NormalizeUTF8", "StaticRegexReplace",
                 "LookupTableFindV2"}
CONTEXT_SPACES = "[ \t\r\n\u202f]+"  # what separates context words (qa_tasks.split_context)
LONG = "hello " * 200
# The classification families' samples: (text_a, text_b), single-text tasks
# read text_a alone.  Empty texts, a B of no pieces, texts cut by the
# packing, accents, CJK and punctuation.
SENTENCE_PAIRS = [
    ("A cat sat on the mat.", "An animal sat."),
    ("", ""),
    ("The café's ΟΔΟΣ, naïve İstanbul!", "\u0007"),
    (LONG, "world"),
    ("word " * 30, "long " * 25),
    ("中文字符 テスト", "y " * 11),
    ("short", "A second, longer text: with (brackets) and 3.5 numbers."),
]


def tagging_data(root: pathlib.Path, shared: pathlib.Path, name: str) -> None:
  """A tagging task's train/dev files: CoNLL-2000 sentences (WORD POS CHUNK,
  IOB2 chunks), which every tagging task's reader takes."""
  sentences = (shared / "data" / "finetuning_data" / "chunk" / "dev.txt").read_text(
      encoding="utf-8").strip().split("\n\n")
  folder = root / "finetuning_data" / name
  folder.mkdir(parents=True)
  (folder / "train.txt").write_text("\n\n".join(sentences[:60]) + "\n", encoding="utf-8")
  (folder / "dev.txt").write_text("\n\n".join(sentences[60:70]) + "\n", encoding="utf-8")


def qa_samples(shared: pathlib.Path):
  """(question, context) pairs: questions of a SQuAD paragraph, one context
  written with tabs, line breaks, double and narrow no-break spaces and
  accents, one of several windows, an empty one."""
  paragraphs = json.loads((shared / "data" / "finetuning_data" / "squadv1" / "dev.json")
                          .read_text(encoding="utf-8"))["data"][0]["paragraphs"]
  messy = paragraphs[3]["context"].replace(" the ", " \tthe  ").replace(", ", ",\n").replace(
      " Super", "\u202fSÜPER 中文")
  return ([(qa["question"], paragraphs[2]["context"]) for qa in paragraphs[2]["qas"][:3]]
          + [(qa["question"], messy) for qa in paragraphs[3]["qas"][:2]]
          + [(paragraphs[0]["qas"][0]["question"], ""), ("", "Denver won.")])


def samples(task, dev_texts, qa_pairs):
  """The text signature's inputs of a task's family and, for the Python
  path, a function of the signature's outputs giving their examples."""
  if isinstance(task, classification_tasks.SingleOutputTask):
    inputs = {"text_a": [a for a, _ in SENTENCE_PAIRS]}
    if not task.single_text:
      inputs["text_b"] = [b for _, b in SENTENCE_PAIRS]
    return inputs, lambda _: [
        classification_tasks.InputExample(i, a, None if task.single_text else b,
                                          task.dummy_label)
        for i, (a, b) in enumerate(SENTENCE_PAIRS)]
  if isinstance(task, qa_tasks.QATask):
    return ({"question": [q for q, _ in qa_pairs], "context": [c for _, c in qa_pairs]},
            lambda _: [qa_tasks.QAExample(i, str(i), q, qa_tasks.split_context(c)[0], [])
                       for i, (q, c) in enumerate(qa_pairs)])
  if isinstance(task, tagging_tasks.TaggingTask):  # the words the signature split
    return {"text": dev_texts}, lambda out: [
        tagging_tasks.TaggingExample(i, words, [0] * len(words))
        for i, words in enumerate(_strings(out["words"]))]
  raise AssertionError(f"{task.name}: a task family without samples here")


def _strings(values) -> list:
  """Rows of a string tensor, padding ("") dropped, decoded."""
  return [[v.decode("utf-8") for v in row if v] for row in np.asarray(values)]


def _op_types(function) -> set:
  graph_def = function.get_concrete_function().graph.as_graph_def()
  return ({node.op for node in graph_def.node}
          | {node.op for f in graph_def.library.function for node in f.node_def})


@pytest.fixture(scope="module")
def walk(tmp_path_factory, shared_dir, bert_vocab):
  """Every registered task: its export module (what export_task_model
  saves), its text signature run on its samples (eagerly, op by op: tracing
  and running each graph would cost ten times as much; the saved exports
  check the graphs give the same) and traced for its op types, and the
  Python path's examples, features, head outputs and evaluation.  The
  SAVED exports are written, then the vocab they were made from removed."""
  root = tmp_path_factory.mktemp("walk")
  for name in finetune_config.TASKS:
    if issubclass(finetune_config.task_class(name), tagging_tasks.TaggingTask):
      tagging_data(root, shared_dir, name)
  shutil.copy(bert_vocab, root / "vocab.txt")
  config = FinetuningConfig.create(TINY, task_names=list(finetune_config.TASKS),
                                   data_dir=str(root), model_dir=str(root / "model"))
  tasks = task_builder.get_tasks(config, finetune_job.load_tokenizer(config))
  keras.utils.set_random_seed(0)
  model = FinetuningModel(config, tasks)
  tagger = next(t for t in tasks if isinstance(t, tagging_tasks.TaggingTask))
  dev_texts = [" ".join(sentence.words) for sentence in tagger.sentences("dev")]
  qa_pairs = qa_samples(shared_dir)
  walked = {}
  for task in tasks:
    inputs, examples_of = samples(task, dev_texts, qa_pairs)
    with text_graph.text_encoder(task.tokenizer) as text_encoder:
      module = task_saved_model.serving_module(model, task, text_encoder)
      text = {k: v.numpy() for k, v in module.serve_text.python_function(
          **{k: tf.constant(v, tf.string) for k, v in inputs.items()}).items()}
      ops = _op_types(module.serve_text)
      if task.name in SAVED:
        saved_model.save_serving_module(module, str(root / "exports" / task.name))
    examples = examples_of(text)
    features = task.featurize(examples, is_training=False)
    outputs = {k: v.numpy() for k, v in model.task_outputs(
        {k: tf.constant(v) for k, v in features.arrays.items()}, task.name).items()}
    walked[task.name] = dict(
        task=task, inputs=inputs, text=text, examples=examples, features=features,
        outputs=outputs, result=task.evaluate(examples, features, outputs, "test"), ops=ops)
  (root / "vocab.txt").unlink()  # the exports hold their own copy
  return {"config": config, "tasks": walked, "exports": root / "exports"}


def _best_span_score(task, features, outputs, example_index):
  """The n-best search's best start + end log-prob of one example from the
  head's per-window outputs (qa_tasks.QATask._best_answer's candidates);
  None without a candidate."""
  best = None
  for row in np.flatnonzero(features.example_index == example_index):
    window = features.windows[row]
    for i, start in enumerate(outputs["start_top_index"][row]):
      for j, end in enumerate(outputs["end_top_index"][row][i]):
        if (start in window.token_to_orig_map and end in window.token_to_orig_map
            and window.token_is_max_context.get(start, False) and start <= end
            and end - start + 1 <= task.config.max_answer_length):
          score = (float(outputs["start_top_log_probs"][row][i]) +
                   float(outputs["end_top_log_probs"][row][i, j]))
          best = score if best is None else max(best, score)
  return best


def check_classifier(walked):
  task, text, outputs = walked["task"], walked["text"], walked["outputs"]
  predicted = [p for _, p in walked["result"].predictions]
  if task.regression:  # the score on the task's scale, as the predictions file
    np.testing.assert_allclose(text["score"], [float(p) for p in predicted], atol=1e-5)
    np.testing.assert_allclose(text["score"], task.denormalize(outputs["predictions"]),
                               atol=1e-5)
    return
  assert [v.decode() for v in text["label"]] == predicted
  np.testing.assert_allclose(text["logits"], outputs["logits"], atol=1e-5)
  np.testing.assert_allclose(text["probabilities"].sum(-1), 1.0, atol=1e-6)


def check_span_qa(walked, config):
  task, text, features = walked["task"], walked["text"], walked["features"]
  result, contexts = walked["result"], walked["inputs"]["context"]
  answers = [a.decode() for a in text["answer"]]
  assert answers == [p for _, p in result.predictions]
  for i, context in enumerate(contexts):
    best = _best_span_score(task, features, walked["outputs"], i)
    start, end = int(text["answer_start"][i]), int(text["answer_end"][i])
    if best is None:  # no window or no candidate: the official placeholder
      assert (result.qa_preds[str(i)], start, end) == ("empty", -1, -1)
      continue
    assert 0 <= start < end <= len(context)
    assert text["score"][i] == pytest.approx(best, abs=1e-5)
    if answers[i]:  # the span's text, with one space between its words
      assert re.sub(CONTEXT_SPACES, " ", context[start:end]) == answers[i]
  if task.v2:
    null_odds = [result.qa_null_odds[str(i)] for i in range(len(contexts))]
    np.testing.assert_allclose(text["null_score"], null_odds, atol=1e-4)
    assert text["no_answer"].dtype == bool and text["no_answer"].shape == (len(contexts),)
    np.testing.assert_array_equal(text["no_answer"],
                                  text["null_score"] > config.qa_na_threshold)
    assert [a == "" for a in answers] == text["no_answer"].tolist()


def check_tagger(walked):
  task, text, features = walked["task"], walked["text"], walked["features"]
  texts = walked["inputs"]["text"]
  tags = [" ".join(row) for row in _strings(text["tags"])]
  assert tags == [p for _, p in walked["result"].predictions]
  kept = features.arrays[f"{task.name}_labels_mask"].sum(1).astype(int)
  words = _strings(text["words"])
  assert kept.min() < max(len(w) for w in words)  # some sentences are cut
  for row, n in enumerate(kept):
    np.testing.assert_allclose(text["logits"][row, :n], walked["outputs"]["logits"][row, :n],
                               atol=1e-5)
  if not task.entity_outputs:
    assert words == [t.split() for t in texts]
    return
  for row, sentence in enumerate(texts):  # the tags' spans, at their words' characters
    starts, cursor = [], 0
    for word in words[row]:
      cursor = sentence.index(word, cursor)
      starts.append(cursor)
      cursor += len(word)
    expected = [(kind, starts[s], starts[e] + len(words[row][e]))
                for s, e, kind in spans.entity_spans(tags[row].split())]
    n = len(expected)
    assert list(zip(_strings(text["entity_type"][row:row + 1])[0],
                    text["entity_start"][row][:n].tolist(),
                    text["entity_end"][row][:n].tolist())) == expected
    assert _strings(text["entity_text"][row:row + 1])[0] == [
        sentence[s:e] for _, s, e in expected]


@pytest.mark.slow
def test_every_registered_task_serves_text_as_its_python_path(walk):
  assert sorted(walk["tasks"]) == sorted(finetune_config.TASKS)
  for name, walked in walk["tasks"].items():
    task = walked["task"]
    if isinstance(task, classification_tasks.SingleOutputTask):
      check_classifier(walked)
    elif isinstance(task, qa_tasks.QATask):
      check_span_qa(walked, walk["config"])
    else:
      check_tagger(walked)
    ops = walked["ops"]
    assert not ops & PYTHON_OPS and TOKENIZER_OPS <= ops, (name, ops & PYTHON_OPS)


@pytest.fixture(scope="module")
def signatures(walk):
  return {name: tf.saved_model.load(str(walk["exports"] / name)).signatures
          for name in SAVED}


def check_ids_signature(walked, serve_ids):
  """A saved ids signature on the Python featurizer's arrays gives the
  model's outputs (tagging: at the kept words) and, for regression, the
  text signature's score."""
  task, arrays = walked["task"], walked["features"].arrays
  names = serve_ids.structured_input_signature[1]
  ids_out = serve_ids(**{k: tf.constant(arrays[k] if k in arrays else arrays[f"{task.name}_{k}"])
                         for k in names})
  kept = arrays.get(f"{task.name}_labels_mask")
  compared = 0
  for key, value in ids_out.items():
    if getattr(task, "regression", False):
      expected = walked["text"]["score"]
    elif key in walked["outputs"]:
      expected = walked["outputs"][key]
    else:
      continue
    value = value.numpy()
    if kept is not None:
      value, expected = value[kept > 0], expected[kept > 0]
    np.testing.assert_allclose(value, expected, atol=1e-5, err_msg=f"{task.name} {key}")
    compared += 1
  assert compared, task.name


@pytest.mark.slow
def test_saved_exports_give_the_walks_outputs_and_hold_the_vocab(walk, signatures, bert_vocab):
  for name in SAVED:
    walked = walk["tasks"][name]
    loaded = signatures[name]["text"](
        **{k: tf.constant(v, tf.string) for k, v in walked["inputs"].items()})
    assert sorted(loaded) == sorted(walked["text"]), name
    for key, value in loaded.items():
      if value.dtype in (tf.string, tf.bool):
        np.testing.assert_array_equal(value.numpy(), walked["text"][key], err_msg=name)
      else:
        np.testing.assert_allclose(value.numpy(), walked["text"][key], atol=1e-5,
                                   err_msg=f"{name} {key}")
    check_ids_signature(walked, signatures[name]["serving_default"])
    export_dir = walk["exports"] / name
    ops = graph_ops(export_dir)
    assert not ops & PYTHON_OPS, (name, ops & PYTHON_OPS)
    assert TOKENIZER_OPS | {"InitializeTableFromTextFileV2"} <= ops, name
    assert (export_dir / "assets" / "vocab.txt").read_bytes() == bert_vocab.read_bytes()


def _strings_tensor(values):
  return tf.constant(values, tf.string)


@pytest.mark.slow
def test_classifier_inputs_are_truncated_checked_and_batch_independent(walk, signatures):
  rte, cola = signatures["rte"]["text"], signatures["cola"]["text"]
  max_length = walk["config"].max_seq_length
  # "" packs [CLS] [SEP] (an empty B: a single text, as the featurizer)
  empty = rte(text_a=_strings_tensor([""]), text_b=_strings_tensor([""]))
  cls_sep = signatures["rte"]["serving_default"](
      input_ids=tf.constant([[101, 102]]), input_mask=tf.constant([[1, 1]]),
      segment_ids=tf.constant([[0, 0]]))
  np.testing.assert_allclose(empty["logits"], cls_sep["logits"], atol=1e-6)
  # 120,000 characters: cut as the official truncate_seq_pair cuts
  long_text = "hello " * 20_000
  np.testing.assert_allclose(
      rte(text_a=_strings_tensor([long_text]), text_b=_strings_tensor(["world"]))["logits"],
      rte(text_a=_strings_tensor(["hello " * (max_length - 4)]),
          text_b=_strings_tensor(["world"]))["logits"], atol=1e-6)
  np.testing.assert_allclose(
      cola(text_a=_strings_tensor([long_text]))["logits"],
      cola(text_a=_strings_tensor(["hello " * (max_length - 2)]))["logits"], atol=1e-6)
  # rows of very different lengths, padded together: each as alone
  texts_a = ["", "A short one.", long_text, "Somewhat longer text, with commas."]
  texts_b = ["b", "", "x " * 500, "Another text."]
  together = rte(text_a=_strings_tensor(texts_a), text_b=_strings_tensor(texts_b))
  for i, (a, b) in enumerate(zip(texts_a, texts_b)):
    alone = rte(text_a=_strings_tensor([a]), text_b=_strings_tensor([b]))
    np.testing.assert_allclose(together["logits"][i], alone["logits"][0], atol=1e-5)
    assert together["label"][i] == alone["label"][0]
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"text_b: is not valid UTF-8 at rows\] \[1\]"):
    rte(text_a=_strings_tensor(["a", "b"]), text_b=tf.constant([b"ok", b"\xff\xfe"]))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="text_b: batch size differs from the batch size of text_a"):
    rte(text_a=_strings_tensor(["a", "b"]), text_b=_strings_tensor(["c"]))
  with pytest.raises(TypeError, match="text_b"):
    rte(text_a=_strings_tensor(["a pair task needs text_b"]))
  none = rte(text_a=_strings_tensor([]), text_b=_strings_tensor([]))  # a batch of no rows
  assert none["logits"].shape == (0, 2) and none["label"].shape == (0,)
  assert signatures["sts"]["text"](text_a=_strings_tensor([]),
                                   text_b=_strings_tensor([]))["score"].shape == (0,)


@pytest.mark.slow
def test_pair_task_from_saved_model_cli(walk):
  """A session-based server (saved_model_cli, TensorFlow Serving) fails a
  call without text_b with an InvalidArgumentError naming it."""
  export_dir = walk["exports"] / "rte"
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
def test_span_qa_bad_and_long_contexts(walk, signatures):
  v1, v2 = signatures["squadv1"]["text"], signatures["squad"]["text"]
  question = walk["tasks"]["squadv1"]["inputs"]["question"][0]
  context = walk["tasks"]["squadv1"]["inputs"]["context"][0]
  # no context: no window, no candidate: "empty" as official; 2.0: no answer
  empty = v1(question=_strings_tensor([question]), context=_strings_tensor([""]))
  assert empty["answer"].numpy().tolist() == [b"empty"]
  assert empty["answer_start"].numpy().tolist() == [-1] == empty["answer_end"].numpy().tolist()
  empty = v2(question=_strings_tensor([question]), context=_strings_tensor([""]))
  assert empty["answer"].numpy().tolist() == [b""]
  assert empty["no_answer"].numpy().tolist() == [True]
  # 100,000 characters: hundreds of windows, an answer from the context
  long_context = (context + " ") * (100_000 // len(context) + 1)
  contexts = [context, long_context, "", "Denver won."]
  questions = [question, question, question, ""]
  together = v1(question=_strings_tensor(questions), context=_strings_tensor(contexts))
  for i, (q, c) in enumerate(zip(questions, contexts)):
    alone = v1(question=_strings_tensor([q]), context=_strings_tensor([c]))
    for key in ("answer", "answer_start", "answer_end"):
      assert together[key][i] == alone[key][0]
    assert float(together["score"][i]) == pytest.approx(float(alone["score"][0]), abs=1e-5)
  start, end = int(together["answer_start"][1]), int(together["answer_end"][1])
  assert 0 <= start < end <= len(long_context)
  assert (re.sub(CONTEXT_SPACES, " ", long_context[start:end])
          == together["answer"][1].numpy().decode())
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"question: is not valid UTF-8 at rows\] \[0\]"):
    v1(question=tf.constant([b"\xc3("]), context=_strings_tensor([context]))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="context: batch size differs from the batch size of question"):
    v1(question=_strings_tensor([question, question]), context=_strings_tensor([context]))
  none = v2(question=_strings_tensor([]), context=_strings_tensor([]))  # a batch of no rows
  assert none["answer"].shape == (0,) and none["no_answer"].shape == (0,)


@pytest.mark.slow
def test_chunk_cuts_long_sentences_as_the_featurizer(signatures):
  chunk = signatures["chunk"]["text"]
  empty = chunk(text=_strings_tensor([""]))
  assert empty["tags"].shape == (1, 0) and empty["words"].shape == (1, 0)
  assert chunk(text=_strings_tensor([]))["tags"].shape == (0, 0)  # a batch of no rows
  # 20,000 words: more than max_seq_length, so the featurizer keeps none
  long_text = "word " * 20_000
  texts = ["He reckons the current account deficit will narrow .", long_text, ""]
  together = chunk(text=_strings_tensor(texts))
  assert together["tags"].shape == (3, 20_000)
  assert set(together["tags"][1].numpy().tolist()) == {b""}
  assert [w.decode() for w in together["words"][0].numpy()[:9]] == texts[0].split()
  alone = chunk(text=_strings_tensor(texts[:1]))
  np.testing.assert_array_equal(together["tags"][0, :9], alone["tags"][0])
  np.testing.assert_allclose(together["logits"][0, :9], alone["logits"][0], atol=1e-5)
  assert all(tag in (b"O",) or tag[:2] in (b"B-", b"I-") for tag in alone["tags"][0].numpy())
