"""Task scorers on fixed model outputs, and the result files."""

import json
import math
import os
import pickle
import shutil

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.finetune import outputs, task_builder
from electra_tf.finetune.qa import qa_metrics
from electra_tf.finetune.qa import qa_tasks as qa
from electra_tf.finetune.tagging import spans
from electra_tf.finetune.config import FinetuningConfig
from electra_tf.finetune.task import EvalResult, combine_features
from tests.test_finetune_data import mrqa_lines


@pytest.fixture(scope="module")
def tokenizer(bert_vocab):
  from official.nlp.tools import tokenization
  return tokenization.FullTokenizer(str(bert_vocab), do_lower_case=True)


def make_task(name, data_dir, tokenizer, task_names=None, **hparams):
  config = FinetuningConfig.create(hparams, task_names=task_names or [name],
                                   data_dir=str(data_dir))
  return task_builder.get_task(name, config, tokenizer)


def classifier_outputs(predicted, loss):
  """Head outputs whose logits (-1 or 1 per label) agree with `predicted`."""
  logits = 2 * np.eye(2, dtype=np.float32)[predicted] - 1
  return {"predictions": predicted, "logits": logits, "loss": loss}


def test_classification_scores_and_predictions(finetuning_data_dir, tokenizer):
  rng = np.random.RandomState(0)
  task = make_task("rte", finetuning_data_dir.parent, tokenizer)
  examples = task.get_examples("dev")
  features = task.featurize(examples, is_training=False)
  labels = features.arrays["rte_label_ids"]
  predicted = np.where(rng.rand(len(labels)) < 0.7, labels, 1 - labels)
  loss = rng.rand(len(labels))
  head_outputs = classifier_outputs(predicted, loss)
  result = task.evaluate(examples, features, head_outputs, "dev")
  assert result.metrics == pytest.approx(
      {"accuracy": 100 * np.mean(predicted == labels), "loss": loss.mean()})
  assert result.key_name == "index"
  assert result.predictions[:3] == [
      (str(i), ["entailment", "not_entailment"][predicted[i]]) for i in range(3)]
  test = task.evaluate(examples, features, head_outputs, "test")
  assert test.metrics == {} and test.predictions == result.predictions
  # the official test pickle's content: example id -> logits
  assert sorted(test.example_outputs) == [e.eid for e in examples]
  np.testing.assert_array_equal(
      np.stack([test.example_outputs[e.eid] for e in examples]), head_outputs["logits"])
  assert test.qa_preds is None and test.qa_null_odds is None


def test_cola_mcc_and_mrpc_f1(finetuning_data_dir, tokenizer):
  cola = make_task("cola", finetuning_data_dir.parent, tokenizer)
  examples = cola.get_examples("dev")[:200]
  features = cola.featurize(examples, False)
  labels = features.arrays["cola_label_ids"]
  predicted = labels.copy()
  predicted[:40] = 1 - predicted[:40]
  metrics = cola.evaluate(examples, features,
                          classifier_outputs(predicted, np.zeros(200)), "dev").metrics
  tp = np.sum((labels == 1) & (predicted == 1)); tn = np.sum((labels == 0) & (predicted == 0))
  fp = np.sum((labels == 0) & (predicted == 1)); fn = np.sum((labels == 1) & (predicted == 0))
  mcc = (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
  assert sorted(metrics) == ["loss", "mcc"] and metrics["mcc"] == pytest.approx(100 * mcc)

  mrpc = make_task("mrpc", finetuning_data_dir.parent, tokenizer)
  examples = mrpc.get_examples("dev")
  features = mrpc.featurize(examples, False)
  labels = features.arrays["mrpc_label_ids"]
  predicted = np.ones_like(labels)
  metrics = mrpc.evaluate(examples, features, classifier_outputs(
      predicted, np.zeros(len(labels))), "dev").metrics
  precision = labels.mean()  # everything predicted positive: recall 1
  assert metrics["recall"] == pytest.approx(100.0)
  assert metrics["precision"] == pytest.approx(100 * precision)
  assert metrics["f1"] == pytest.approx(100 * 2 * precision / (precision + 1))
  assert metrics["accuracy"] == pytest.approx(100 * precision)


def test_sts_correlations_and_denormalised_predictions(finetuning_data_dir, tokenizer):
  task = make_task("sts", finetuning_data_dir.parent, tokenizer)
  examples = task.get_examples("dev")
  features = task.featurize(examples, False)
  targets = features.arrays["sts_targets"].astype(np.float64)
  predicted = targets ** 2  # monotone: Spearman 1, Pearson < 1
  result = task.evaluate(examples, features, {"predictions": predicted,
                                              "loss": (predicted - targets) ** 2}, "dev")
  assert result.metrics["spearman"] == pytest.approx(100.0)
  assert result.metrics["pearson"] == pytest.approx(100 * np.corrcoef(targets, predicted)[0, 1])
  assert result.metrics["mse"] == pytest.approx(np.mean((targets - predicted) ** 2))
  assert float(result.predictions[0][1]) == pytest.approx(5.0 * predicted[0], abs=1e-6)
  # official test pickle: the prediction on the normalised scale
  value = result.example_outputs[examples[3].eid]
  assert value.dtype == np.float32 and value == np.float32(predicted[3])


def test_chunk_oracle_scores_100_and_writes_file_tags(finetuning_data_dir, tokenizer):
  task = make_task("chunk", finetuning_data_dir.parent, tokenizer)
  examples = task.get_examples("dev")[:100]
  features = task.featurize(examples, False)
  labels = features.arrays["chunk_labels"]
  mask = features.arrays["chunk_labels_mask"]
  loss = np.full(len(examples), 3.0)
  result = task.evaluate(examples, features, {"predictions": labels, "loss": loss}, "dev")
  n_words = sum(len(e.words) for e in examples)
  assert result.metrics == pytest.approx({"precision": 100.0, "recall": 100.0, "f1": 100.0,
                                          "loss": 2 * 3.0 * 100 / n_words})
  with open(finetuning_data_dir / "chunk" / "dev.txt") as f:
    first_tags = [line.split()[-1] for line in f.read().split("\n\n")[0].splitlines()]
  assert result.predictions[0] == ("0", " ".join(first_tags))
  # one chunk shortened ("Rockwell" tagged O): one of the chunks is wrong
  n_chunks = sum(len(spans.chunk_spans(t.split())) for _, t in result.predictions)
  wrong = labels.copy()
  wrong[0, 0] = task.label_mapping["O"]
  metrics = task.evaluate(examples, features, {"predictions": wrong, "loss": loss}, "dev").metrics
  expected = 100.0 * (n_chunks - 1) / n_chunks
  assert (metrics["precision"], metrics["recall"]) == pytest.approx((expected, expected))
  assert result.metrics["f1"] == 100.0 and mask.sum() == n_words


@pytest.fixture(scope="module")
def squad_dir(tmp_path_factory, finetuning_data_dir):
  root = tmp_path_factory.mktemp("squad")
  folder = root / "finetuning_data" / "squadv1"
  folder.mkdir(parents=True)
  for split in ("dev", "train"):  # train: the same questions with positions
    shutil.copy(finetuning_data_dir / "squadv1" / "dev.json", folder / f"{split}.json")
  return root


def oracle_outputs(train_features, name, joint, beam):
  """Head outputs that put all the mass on the gold span of each window."""
  starts = train_features.arrays[f"{name}_start_positions"]
  ends = train_features.arrays[f"{name}_end_positions"]
  n, seq = len(starts), train_features.arrays["input_ids"].shape[1]
  if not joint:
    start_logits = np.full((n, seq), -10.0)
    end_logits = np.full((n, seq), -10.0)
    start_logits[np.arange(n), starts] = 10.0
    end_logits[np.arange(n), ends] = 10.0
    return {"start_logits": start_logits, "end_logits": end_logits,
            "answerable_logit": np.zeros(n)}
  others = np.arange(1, beam)[None, :].repeat(n, 0)
  start_top_index = np.concatenate([starts[:, None], others], 1)
  end_top_index = np.concatenate([ends[:, None], others], 1)[:, None, :].repeat(beam, 1)
  start_top_log_probs = np.full((n, beam), -20.0)
  start_top_log_probs[:, 0] = 0.0
  end_top_log_probs = np.full((n, beam, beam), -20.0)
  end_top_log_probs[:, 0, 0] = 0.0
  return {"start_top_index": start_top_index, "end_top_index": end_top_index,
          "start_top_log_probs": start_top_log_probs,
          "end_top_log_probs": end_top_log_probs,
          "start_logits": np.zeros((n, seq)), "end_logits": np.zeros((n, seq)),
          "answerable_logit": np.zeros(n)}


@pytest.mark.parametrize("joint", [False, True])
def test_squad_v1_oracle_spans_score_near_100(squad_dir, tokenizer, joint):
  task = make_task("squadv1", squad_dir, tokenizer, max_seq_length=128,
                   doc_stride=64, max_query_length=32, joint_prediction=joint)
  dev = task.get_examples("dev")[:300]
  train_features = task.featurize(task.get_examples("train")[:300], is_training=True)
  dev_features = task.featurize(dev, is_training=False)
  np.testing.assert_array_equal(dev_features.arrays["squadv1_eid"],
                                train_features.arrays["squadv1_eid"])
  result = task.evaluate(dev, dev_features, oracle_outputs(
      train_features, "squadv1", joint, task.config.beam_size), "dev")
  assert sorted(result.metrics) == ["exact_match", "f1"]
  # the 10 misses are answers inside a word ("gold" of "golden", "8" of
  # "20–18"): the prediction is the whole word
  assert result.metrics["exact_match"] == pytest.approx(100.0 * 290 / 300)
  assert result.key_name == "id" and len(result.predictions) == 300
  assert result.predictions[0] == ("56be4db0acb8001400a502ec", "Denver Broncos")
  assert result.qa_preds == dict(result.predictions) and result.qa_null_odds is None


def test_final_text_projects_onto_original_words(tokenizer):
  basic = tokenizer.basic_tokenizer.tokenize
  assert qa.final_text("steve smith", "Steve Smith's", basic) == "Steve Smith"
  assert qa.final_text("1895", "(1895-1943).", basic) == "1895"
  assert qa.final_text("cafe", "Café,", basic) == "Café"
  assert qa.final_text("gold", "golden", basic) == "gold"
  # not found after tokenization: the original words are kept
  assert qa.final_text("silver", "golden", basic) == "golden"


def test_squad_v2_no_answer_threshold(tmp_path, tokenizer):
  context = "The cat sat on the mat. It was a sunny day in Paris."
  data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
      "context": context, "qas": [
          {"id": "a", "question": "Where was it?", "is_impossible": False,
           "answers": [{"text": "Paris", "answer_start": context.index("Paris")}]},
          {"id": "b", "question": "Who sang?", "is_impossible": True, "answers": []},
          {"id": "c", "question": "What sat?", "is_impossible": False,
           "answers": [{"text": "The cat", "answer_start": 0}]}]}]}]}
  folder = tmp_path / "finetuning_data" / "squad"
  folder.mkdir(parents=True)
  for split in ("dev", "train"):
    (folder / f"{split}.json").write_text(json.dumps(data))
  task = make_task("squad", tmp_path, tokenizer, max_seq_length=64,
                   max_query_length=16, joint_prediction=False)
  train_features = task.featurize(task.get_examples("train"), is_training=True)
  np.testing.assert_array_equal(train_features.arrays["squad_is_impossible"], [0, 1, 0])
  dev = task.get_examples("dev")
  dev_features = task.featurize(dev, is_training=False)
  head_outputs = oracle_outputs(train_features, "squad", False, 20)
  # null odds: b clearly unanswerable, c just below the -2.75 threshold
  head_outputs["answerable_logit"] = np.array([-8.0, 3.0, -3.0])
  result = task.evaluate(dev, dev_features, head_outputs, "dev")
  assert result.predictions == [("a", "Paris"), ("b", ""), ("c", "The cat")]
  assert result.metrics["exact"] == pytest.approx(100.0)
  assert (result.metrics["HasAns_total"], result.metrics["NoAns_total"]) == (2, 1)
  head_outputs["answerable_logit"] = np.array([-8.0, 3.0, -2.0])  # c above: ""
  result = task.evaluate(dev, dev_features, head_outputs, "dev")
  assert result.predictions[2] == ("c", "")
  # the official preds file holds the best non-empty answers, before the
  # threshold; the null odds are the answerable logits (answerable_classifier)
  assert result.qa_preds == {"a": "Paris", "b": result.qa_preds["b"], "c": "The cat"}
  assert result.qa_preds["b"] and result.qa_preds["b"] in context
  assert result.qa_null_odds == {"a": -8.0, "b": 3.0, "c": -2.0}
  assert result.metrics["HasAns_exact"] == pytest.approx(50.0)
  assert result.metrics["best_exact"] == pytest.approx(100.0)
  assert result.metrics["best_exact_thresh"] == -2.0


def test_mrqa_metrics_skip_unanswered_questions():
  gold = {"q1": ["Paris", "the city of Paris"], "q2": ["1889"], "q3": ["Eiffel"]}
  predictions = {"q1": "City of Paris!", "q2": "in 1889"}
  # q1 matches its second answer after normalisation; q2: F1 2/3; q3 has no
  # prediction: left out by the MRQA script, a zero for SQuAD 1.1
  assert qa_metrics.evaluate_mrqa(gold, predictions) == pytest.approx(
      {"exact_match": 50.0, "f1": 100 * (1 + 2 / 3) / 2})
  assert qa_metrics.evaluate_squad_v1(gold, predictions) == pytest.approx(
      {"exact_match": 100 / 3, "f1": 100 * (1 + 2 / 3) / 3})


def test_mrqa_oracle_spans_score_100_keyed_by_qid(tmp_path, tokenizer):
  folder = tmp_path / "finetuning_data" / "naturalqs"
  folder.mkdir(parents=True)
  lines = mrqa_lines("dev")[:2]  # q1 (two gold answers) and q2
  for split in ("train", "dev"):
    (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
  task = make_task("naturalqs", tmp_path, tokenizer, max_query_length=8,
                   joint_prediction=False)
  train_features = task.featurize(task.get_examples("train"), is_training=True)
  dev = task.get_examples("dev")
  result = task.evaluate(dev, task.featurize(dev, is_training=False),
                         oracle_outputs(train_features, "naturalqs", False, 20), "dev")
  assert result.predictions == [("q1", "Eiffel"), ("q2", "1889")]
  assert result.metrics == {"exact_match": 100.0, "f1": 100.0}
  assert result.qa_preds == {"q1": "Eiffel", "q2": "1889"}
  assert result.qa_null_odds is None


def test_squad_head_outputs_give_answers_from_the_context(squad_dir, tokenizer):
  task = make_task("squadv1", squad_dir, tokenizer, max_seq_length=128,
                   doc_stride=64, max_query_length=32, max_answer_length=5)
  examples = task.get_examples("dev")[:6]
  features = task.featurize(examples, is_training=False)
  head = task.build_head()
  rng = np.random.RandomState(0)
  batch = {k: tf.constant(v) for k, v in features.arrays.items()}
  encoded = {"sequence_output": tf.constant(rng.randn(len(features), 128, 16).astype(np.float32))}
  encoded["pooled_output"] = encoded["sequence_output"][:, 0]
  head_outputs = {k: v.numpy() for k, v in head(encoded, batch, training=False).items()}
  result = task.evaluate(examples, features, head_outputs, "dev")
  for example, (qid, answer) in zip(examples, result.predictions):
    assert qid == example.qas_id
    assert answer and answer in " ".join(example.doc_tokens)
    assert len(answer.split()) <= 5
  assert 0.0 <= result.metrics["exact_match"] <= result.metrics["f1"] <= 100.0


def test_result_files(tmp_path):
  config = FinetuningConfig.create({}, task_names=["rte", "sts"], model_dir=str(tmp_path / "m"))
  results_dir = config.results_dir
  dev = EvalResult({"accuracy": 61.5, "loss": 0.25},
                   [("0", "entailment"), ("1", "not\tentail\nment")])
  mismatched = EvalResult({"accuracy": 60.0, "loss": 0.5}, [])
  merged = outputs.merge_metrics({"dev": dev, "dev_mismatched": mismatched},
                                 {"dev": "", "dev_mismatched": "mismatched_"})
  assert merged == {"accuracy": 61.5, "loss": 0.25, "mismatched_accuracy": 60.0,
                    "mismatched_loss": 0.5}
  path = outputs.metrics_path(results_dir, "rte")
  outputs.write_metrics_json(path, dict(merged, pearson=float("nan")), trial=2)
  assert path == str(tmp_path / "m" / "results" / "rte_dev_metrics.json")
  with open(path) as f:
    assert json.load(f) == dict(merged, pearson=None, trial=2)
  tsv = outputs.predictions_path(results_dir, "rte", "dev")
  outputs.write_predictions_tsv(tsv, dev)
  with open(tsv) as f:
    assert f.read() == "index\tprediction\n0\tentailment\n1\tnot entail ment\n"
  squad = EvalResult({}, [("q1", "Denver Broncos")], key_name="id")
  outputs.write_predictions_tsv(outputs.predictions_path(results_dir, "squad", "test"), squad)
  with open(tmp_path / "m" / "results" / "squad_test_predictions.tsv") as f:
    assert f.read() == "id\tprediction\nq1\tDenver Broncos\n"

  trials = [{"rte": {"accuracy": 60.0, "loss": 0.5}, "sts": {"pearson": 80.0}},
            {"rte": {"accuracy": 70.0, "loss": 0.25}, "sts": {"pearson": 84.0}},
            {"rte": {"accuracy": 62.0, "loss": 0.5}, "sts": {"pearson": 85.0}}]
  outputs.write_results(config, trials)
  with open(config.results_txt) as f:
    lines = f.read().splitlines()
  assert config.results_txt.endswith("results/rte,sts_results.txt")
  assert lines[:2] == ["rte: accuracy: 60.00 - loss: 0.50", "sts: pearson: 80.00"]
  assert len(lines) == 6
  with open(config.results_pkl, "rb") as f:
    assert pickle.load(f) == trials
  table = outputs.results_table(trials).splitlines()
  assert table[0].split() == ["task", "metric", "mean", "median", "trials"]
  assert table[1].split() == ["rte", "accuracy", "64.00", "62.00", "3"]
  assert table[3].split() == ["sts", "pearson", "83.00", "84.00", "3"]


def test_official_qa_and_test_prediction_files(tmp_path):
  config = FinetuningConfig.create({}, task_names=["squad", "squadv1", "rte", "sts"],
                                   model_dir=str(tmp_path / "m"))
  trial_dir = str(tmp_path / "m" / "results" / "trial_1")

  def load(path):
    with open(path) as f:
      return json.load(f)

  dev = EvalResult({"exact": 50.0, "total": 2}, [("a", "Paris"), ("c", "")], "id",
                   qa_preds={"a": "Paris", "c": "The cat"},
                   qa_null_odds={"a": np.float32(-8.0), "c": -2.0})
  for directory in (config.results_dir, trial_dir):
    outputs.write_qa_files(config, "squad", dev, directory)
  assert config.qa_preds_file("squad").endswith(
      "m/results/squad,squadv1,rte,sts_qa/squad_preds.json")
  for directory in (None, trial_dir):
    assert load(config.qa_preds_file("squad", directory)) == {"a": "Paris", "c": "The cat"}
    assert load(config.qa_na_file("squad", directory)) == {"a": -8.0, "c": -2.0}
    assert load(config.qa_eval_file("squad", directory)) == {"exact": 50.0, "total": 2}
  v1 = EvalResult({"exact_match": 100.0, "f1": 100.0}, [("q", "x")], "id",
                  qa_preds={"q": "x"})
  outputs.write_qa_files(config, "squadv1", v1, config.results_dir)
  assert load(config.qa_preds_file("squadv1")) == {"q": "x"}
  assert not os.path.exists(config.qa_na_file("squadv1"))
  assert not os.path.exists(config.qa_eval_file("squadv1"))
  outputs.write_official_test_outputs(config, "squadv1", "test", 1,
                                      EvalResult({}, [("q", "y")], "id", qa_preds={"q": "y"}),
                                      [config.results_dir])
  assert not os.path.exists(config.test_predictions("squadv1", "test", 1))
  assert load(config.qa_preds_file("squadv1")) == {"q": "x"}  # not a test output

  logits = {0: np.array([0.5, -1.0], np.float32), 2: np.array([2.0, 1.0], np.float32)}
  outputs.write_official_test_outputs(
      config, "rte", "test", 1, EvalResult({}, [("0", "entailment")],
                                           example_outputs=logits), [config.results_dir])
  path = config.test_predictions("rte", "test", 1)
  assert path == str(tmp_path / "m" / "test_predictions" / "rte_test_1_predictions.pkl")
  with open(path, "rb") as f:
    loaded = pickle.load(f)
  assert sorted(loaded) == [0, 2]
  np.testing.assert_array_equal(loaded[2], logits[2])

  # SQuAD 2.0 test: thresholded answers as JSON in the .pkl-named file, and
  # the test answers and null odds replace the dev ones (official quirks)
  test = EvalResult({}, [("t", "")], "id", qa_preds={"t": "Rome"}, qa_null_odds={"t": 1.5})
  outputs.write_official_test_outputs(config, "squad", "test", 3, test,
                                      [config.results_dir, trial_dir])
  assert load(config.test_predictions("squad", "test", 3)) == {"t": ""}
  for directory in (None, trial_dir):
    assert load(config.qa_preds_file("squad", directory)) == {"t": "Rome"}
    assert load(config.qa_na_file("squad", directory)) == {"t": 1.5}
    assert load(config.qa_eval_file("squad", directory)) == {"exact": 50.0, "total": 2}


def test_combine_features_fills_other_tasks_with_zeros(finetuning_data_dir, tokenizer):
  names = ["rte", "sts"]
  rte = make_task("rte", finetuning_data_dir.parent, tokenizer, task_names=names)
  sts = make_task("sts", finetuning_data_dir.parent, tokenizer, task_names=names)
  rte_features = rte.featurize(rte.get_examples("dev")[:3], True)
  sts_features = sts.featurize(sts.get_examples("dev")[:2], True)
  combined = combine_features([(rte, rte_features), (sts, sts_features)])
  assert sorted(combined) == sorted(["input_ids", "input_mask", "segment_ids", "task_id",
                                     "rte_eid", "rte_label_ids", "sts_eid", "sts_targets"])
  assert combined["task_id"].tolist() == [0, 0, 0, 1, 1]
  assert combined["sts_targets"].dtype == np.float32
  assert combined["sts_targets"][:3].tolist() == [0, 0, 0]
  assert combined["rte_label_ids"][3:].tolist() == [0, 0]
  np.testing.assert_array_equal(combined["input_ids"][3:], sts_features.arrays["input_ids"])
