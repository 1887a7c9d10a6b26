"""Fine-tuning end to end on slices of the shared data: every task trains a
few steps jointly with others, is evaluated and writes its result files;
export through a fresh process; resume; checkpoint initialisation; CLI
errors."""

import csv
import gzip
import hashlib
import json
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import checkpoint_conversion, checkpoints, curves, errors
from electra_tf.errors import ConfigError
from electra_tf.finetune import job as finetune_job
from electra_tf.finetune import outputs, task_builder
from electra_tf.finetune.config import FinetuningConfig
from electra_tf.finetune.model import multitask_loss
from electra_tf.pretrain.config import PretrainingConfig
from tests.conftest import command_python, run_command
from tests.test_finetune_data import mrqa_lines

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
TINY = {"model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 1,
                                   "num_attention_heads": 2},
        "embedding_size": 16, "max_seq_length": 64, "train_batch_size": 16,
        "eval_batch_size": 32, "num_train_epochs": 1.0, "max_query_length": 16,
        "doc_stride": 32, "beam_size": 5, "n_best_size": 5}
GLUE = ("cola", "sst", "mrpc", "sts", "rte", "qnli")
# Rows of each GLUE file kept in the test data_dir (QNLI trains on its dev).
GLUE_ROWS = {"cola": 40, "sst": 40, "mrpc": 24, "sts": 24, "rte": 24, "qnli": 24}


def _head_rows(src: pathlib.Path, dst: pathlib.Path, n_rows: int,
               header: bool) -> None:
  lines = src.read_text(encoding="utf-8").split("\n")
  dst.parent.mkdir(parents=True, exist_ok=True)
  dst.write_text("\n".join(lines[:n_rows + int(header)]) + "\n", encoding="utf-8")


def _conll_sentences(src: pathlib.Path, dst: pathlib.Path, n: int) -> None:
  sentences = src.read_text(encoding="utf-8").split("\n\n")[:n]
  dst.parent.mkdir(parents=True, exist_ok=True)
  dst.write_text("\n\n".join(sentences) + "\n\n", encoding="utf-8")


def _squad_paragraphs(src: pathlib.Path, dst: pathlib.Path, paragraphs) -> None:
  dataset = json.loads(src.read_text(encoding="utf-8"))
  article = dataset["data"][0]
  article = dict(article, paragraphs=[article["paragraphs"][i] for i in paragraphs])
  dst.parent.mkdir(parents=True, exist_ok=True)
  dst.write_text(json.dumps({"data": [article], "version": "1.1"}), encoding="utf-8")


def make_data_dir(root: pathlib.Path, shared: pathlib.Path) -> pathlib.Path:
  """A data_dir in the official layout with a slice of each shared file."""
  src = shared / "data" / "finetuning_data"
  dst = root / "finetuning_data"
  for task, n_rows in GLUE_ROWS.items():
    header = task != "cola"
    _head_rows(src / task / "dev.tsv", dst / task / "dev.tsv", n_rows, header)
    train = src / task / ("dev.tsv" if task == "qnli" else "train.tsv")
    _head_rows(train, dst / task / "train.tsv", n_rows, header)
  _squad_paragraphs(src / "squadv1" / "dev.json", dst / "squadv1" / "train.json", [0])
  _squad_paragraphs(src / "squadv1" / "dev.json", dst / "squadv1" / "dev.json", [2])
  _conll_sentences(src / "chunk" / "train.txt", dst / "chunk" / "train.txt", 40)
  _conll_sentences(src / "chunk" / "dev.txt", dst / "chunk" / "dev.txt", 20)
  (dst / "newsqa").mkdir()  # MRQA: hand-written lines, the train file gzipped
  with gzip.open(dst / "newsqa" / "train.jsonl.gz", "wt", encoding="utf-8") as f:
    f.write("\n".join(mrqa_lines("train")) + "\n")
  (dst / "newsqa" / "dev.jsonl").write_text("\n".join(mrqa_lines("dev")) + "\n")
  (root / "vocab.txt").write_bytes(
      (shared / "data" / "vocab" / "bert_uncased_vocab.txt").read_bytes())
  return root


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, shared_dir):
  return make_data_dir(tmp_path_factory.mktemp("data"), shared_dir)


def tiny_config(data_dir, model_dir, task_names, **hparams):
  """Tiny models fine-tuned from random initialisation (init_checkpoint none)."""
  return FinetuningConfig.create(dict(TINY, init_checkpoint="none", **hparams),
                                 task_names=task_names,
                                 data_dir=str(data_dir), model_dir=str(model_dir))


def read_tsv(path):
  with open(path, encoding="utf-8-sig", newline="") as f:
    return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def dev_labels(data_dir, task, column):
  rows = read_tsv(data_dir / "finetuning_data" / task / "dev.tsv")
  return [row[column] for row in (rows if task == "cola" else rows[1:])]


# ------------------------------------------------------------ GLUE tasks
@pytest.fixture(scope="module")
def glue_run(data_dir, tmp_path_factory):
  """All six GLUE tasks trained jointly, evaluated, exported with the ids
  signature alone (--signatures=ids: the text signature of a job's export is
  checked by test_ner.py, every task's by test_task_saved_model.py)."""
  root = tmp_path_factory.mktemp("glue")
  config = tiny_config(data_dir, root / "model", list(GLUE))
  results = finetune_job.run(config, strategy_name="one_device",
                             export_dir=str(root / "export"), export_text=False)
  return config, results, root


@pytest.mark.slow
def test_glue_tasks_train_jointly_and_write_official_outputs(glue_run, data_dir):
  config, results, _ = glue_run
  n_features = sum(GLUE_ROWS.values()) + GLUE_ROWS["mrpc"] + GLUE_ROWS["sts"]
  steps = config.num_train_steps(n_features)  # MRPC, STS train on both orders
  assert steps == -(-n_features // 16)
  assert tf.train.latest_checkpoint(str(finetune_job.trial_dir(config, 1))).endswith(
      f"ckpt-{steps}")
  expected_keys = {"cola": {"mcc"}, "sst": {"accuracy"}, "rte": {"accuracy"},
                   "qnli": {"accuracy"}, "sts": {"pearson", "spearman", "mse"},
                   "mrpc": {"accuracy", "precision", "recall", "f1"}}
  label_column = {"cola": 1, "sst": 1, "mrpc": 0, "rte": 3, "qnli": 3}
  results_dir = pathlib.Path(config.results_dir)
  for task in GLUE:
    metrics = json.loads((results_dir / f"{task}_dev_metrics.json").read_text())
    assert set(metrics) == expected_keys[task] | {"loss", "trial"}
    assert metrics["trial"] == 1 and metrics["loss"] > 0
    assert results == json.loads(json.dumps(results))  # plain floats
    assert {k: v for k, v in metrics.items() if k != "trial"} == pytest.approx(
        results[0][task])
    rows = read_tsv(results_dir / f"{task}_dev_predictions.tsv")
    assert rows[0] == ["index", "prediction"]
    assert [int(r[0]) for r in rows[1:]] == list(range(GLUE_ROWS[task]))
    predictions = [r[1] for r in rows[1:]]
    if task == "sts":
      scores = np.array(predictions, float)
      gold = np.array(dev_labels(data_dir, "sts", -1), float) / 5.0
      assert metrics["mse"] == pytest.approx(np.mean((gold - scores / 5) ** 2),
                                             abs=1e-5)
      continue
    gold = dev_labels(data_dir, task, label_column[task])
    assert set(predictions) <= set(gold) | {"0", "1", "entailment",
                                            "not_entailment"}
    if "accuracy" in metrics:
      agree = np.mean([p == g for p, g in zip(predictions, gold)])
      assert metrics["accuracy"] == pytest.approx(100 * agree)
  text = pathlib.Path(config.results_txt).read_text().splitlines()
  assert [line.split(":")[0] for line in text] == list(GLUE)
  assert outputs.load_results(config) == results


EXPORT_LOADER = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf
    export_dir, inputs_npz, outputs_npz = sys.argv[1:]
    inputs = np.load(inputs_npz)
    results = {}
    for task in ("sst", "sts"):
      serve = tf.saved_model.load(f"{export_dir}/{task}").signatures["serving_default"]
      out = serve(**{k: tf.constant(inputs[f"{task}_{k}"])
                     for k in ("input_ids", "input_mask", "segment_ids")})
      for key, value in out.items():
        results[f"{task}_{key}"] = value.numpy()
    assert "electra_tf" not in sys.modules
    np.savez(outputs_npz, **results)
""")


@pytest.mark.slow
def test_exported_classifiers_load_without_the_project(glue_run):
  config, _, root = glue_run
  assert sorted(os.listdir(root / "export")) == sorted(GLUE)
  tasks = {t.name: t for t in task_builder.get_tasks(
      config, finetune_job.load_tokenizer(config))}
  job = finetune_job.TrialJob(config, list(tasks.values()),
                        tf.distribute.OneDeviceStrategy("/cpu:0"), 1, None)
  job.initialize(None)  # the trial's checkpoint
  inputs, expected = {}, {}
  for name in ("sst", "sts"):
    data = finetune_job.read_split(tasks[name], "dev")
    seq = 40  # a shorter sequence than in training works too
    arrays = {k: data.features.arrays[k][:5, :seq]
              for k in ("input_ids", "input_mask", "segment_ids")}
    inputs.update({f"{name}_{k}": v for k, v in arrays.items()})
    expected[name] = job.predict(data, 16)
  np.savez(root / "inputs.npz", **inputs)
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  subprocess.run([sys.executable, "-c", EXPORT_LOADER, str(root / "export"),
                  str(root / "inputs.npz"), str(root / "outputs.npz")],
                 cwd=root, env=env, check=True, timeout=300)
  out = np.load(root / "outputs.npz")
  logits = expected["sst"]["logits"][:5]
  np.testing.assert_allclose(out["sst_logits"], logits, atol=1e-5)
  np.testing.assert_allclose(out["sst_probabilities"],
                             tf.nn.softmax(logits).numpy(), atol=1e-5)
  np.testing.assert_allclose(out["sts_predictions"],
                             5.0 * expected["sts"]["predictions"][:5], atol=1e-4)


@pytest.mark.slow
def test_rerun_skips_done_trials_and_refuses_other_hparams(glue_run, capsys):
  config, results, _ = glue_run
  assert finetune_job.run(config, strategy_name="one_device") == results
  log = capsys.readouterr().out
  assert "trial 1/1: already done" in log and "Start training" not in log
  assert "sst   accuracy" in log  # the results table
  # Evaluation alone restores the trial's checkpoint: the same dev metrics.
  eval_only = FinetuningConfig.create(dict(TINY, init_checkpoint="none", do_train=False),
                                      task_names=list(GLUE), data_dir=config.data_dir,
                                      model_dir=config.model_dir)
  evaluated = finetune_job.run(eval_only, strategy_name="one_device")
  assert "Restored trial 1" in capsys.readouterr().out
  for task in GLUE:
    assert evaluated[0][task] == pytest.approx(results[0][task], rel=1e-5)
  changed = FinetuningConfig.create(dict(TINY, init_checkpoint="none", learning_rate=3e-4),
                                    task_names=list(GLUE), data_dir=config.data_dir,
                                    model_dir=config.model_dir)
  with pytest.raises(errors.TrainingError,
                     match="learning_rate: 0.0001 there, 0.0003 now"):
    finetune_job.run(changed, strategy_name="one_device")


# ------------------------------------------------------ SQuAD and chunk
@pytest.mark.slow
def test_squad_and_chunk_train_jointly_and_write_outputs(data_dir, tmp_path, capsys):
  config = tiny_config(data_dir, tmp_path / "model", ["squadv1", "newsqa", "chunk"],
                       save_checkpoints_steps=3)
  results = finetune_job.run(config, strategy_name="mirrored")
  log = capsys.readouterr().out
  assert "random initialisation" in log and "MirroredStrategy" in log
  results_dir = pathlib.Path(config.results_dir)

  squad = json.loads((data_dir / "finetuning_data/squadv1/dev.json").read_text())
  question_ids = [qa["id"] for p in squad["data"][0]["paragraphs"] for qa in p["qas"]]
  context = squad["data"][0]["paragraphs"][0]["context"]
  rows = read_tsv(results_dir / "squadv1_dev_predictions.tsv")
  assert rows[0] == ["id", "prediction"]
  assert [r[0] for r in rows[1:]] == question_ids
  assert all(r[1] and r[1] in context for r in rows[1:])  # spans of the context
  metrics = json.loads((results_dir / "squadv1_dev_metrics.json").read_text())
  assert set(metrics) == {"exact_match", "f1", "trial"}
  assert 0 <= metrics["exact_match"] <= metrics["f1"] <= 100
  # the official files: question id -> answer; SQuAD 1.1 and MRQA have no
  # null odds or eval file
  qa_dir = results_dir / "squadv1,newsqa,chunk_qa"
  assert json.loads((qa_dir / "squadv1_preds.json").read_text()) == dict(rows[1:])
  newsqa = read_tsv(results_dir / "newsqa_dev_predictions.tsv")
  assert [r[0] for r in newsqa[1:]] == ["q1", "q2", "q3"]
  assert json.loads((qa_dir / "newsqa_preds.json").read_text()) == dict(newsqa[1:])
  assert sorted(os.listdir(qa_dir)) == ["newsqa_preds.json", "squadv1_preds.json"]
  metrics = json.loads((results_dir / "newsqa_dev_metrics.json").read_text())
  assert set(metrics) == {"exact_match", "f1", "trial"}

  sentences = (data_dir / "finetuning_data/chunk/dev.txt").read_text().split("\n\n")
  rows = read_tsv(results_dir / "chunk_dev_predictions.tsv")
  assert rows[0] == ["index", "prediction"]
  assert [int(r[0]) for r in rows[1:]] == list(range(20))
  for row, sentence in zip(rows[1:], sentences):
    tags = row[1].split()
    # words beyond max_seq_length are cut, as official
    assert 0 < len(tags) <= len(sentence.split("\n"))
    assert all(t == "O" or t[:2] in ("B-", "I-") for t in tags)
  metrics = json.loads((results_dir / "chunk_dev_metrics.json").read_text())
  assert set(metrics) == {"precision", "recall", "f1", "loss", "trial"}
  assert set(results[0]) == {"squadv1", "newsqa", "chunk"}

  # A killed run resumes from its latest checkpoint (here: step 3 of 9+).
  trial_dir = finetune_job.trial_dir(config, 1)
  final = tf.train.latest_checkpoint(trial_dir)
  steps = int(final.rsplit("-", 1)[1])
  previous = tf.train.get_checkpoint_state(trial_dir).all_model_checkpoint_paths[-2]
  for name in os.listdir(trial_dir):
    if name.startswith(f"ckpt-{steps}."):
      os.remove(os.path.join(trial_dir, name))
  checkpoints.write_checkpoint_state(trial_dir, os.path.basename(previous))
  os.remove(config.results_pkl)
  finetune_job.run(config, strategy_name="one_device")
  log = capsys.readouterr().out
  assert f"Restored trial 1 from {previous}" in log
  assert f"step {steps}/{steps} = 100.0%" in log
  assert tf.train.latest_checkpoint(trial_dir) == final


@pytest.mark.slow  # trains 6 steps with an evaluation each epoch
def test_epoch_metrics_record_dev_scores_losses_and_norms_each_epoch(data_dir, tmp_path):
  config = tiny_config(data_dir, tmp_path / "model", ["chunk"], num_train_epochs=2.0,
                       log_every=1, epoch_metrics=True)
  results = finetune_job.run(config, strategy_name="one_device")
  points = json.loads((pathlib.Path(config.results_dir) / "epoch_metrics.json").read_text())
  # 40 sentences in batches of 16: 3 steps an epoch; a point before training
  # and after each epoch.
  assert [(p["step"], p["epoch"], p["trial"]) for p in points] == [
      (0, 0.0, 1), (3, 1.0, 1), (6, 2.0, 1)]
  assert points[-1]["dev"]["chunk"] == {k: v for k, v in results[0]["chunk"].items()}
  logged = curves.read_scalars(os.path.join(finetune_job.trial_dir(config, 1), "train"))["loss"]
  assert points[0]["train_loss"] is None
  for point, steps in ((points[1], (1, 2, 3)), (points[2], (4, 5, 6))):
    assert point["train_loss"] == pytest.approx(np.mean([logged[s] for s in steps]) / 16)
  # Norms per part: the embeddings, the one layer, the head; the parts'
  # squares add up to all the weights' squares, and training moves them.
  model = finetune_job.TrialJob(config, task_builder.get_tasks(
      config, finetune_job.load_tokenizer(config)), tf.distribute.get_strategy(), 1,
                                None).model
  norms = finetune_job.weight_norms(model)
  assert list(norms) == ["embeddings", "heads", "layer_0"]
  total = sum(float(np.sum(np.square(w.numpy()))) for w in model.weights)
  assert sum(v ** 2 for v in norms.values()) == pytest.approx(total, rel=1e-5)
  assert all(points[0]["weight_norms"][k] != points[2]["weight_norms"][k] for k in norms)

  # Killed after epoch 1's checkpoint, before its point was written: the rerun
  # resumes there and records it first, the same point (the same weights).
  trial_dir = finetune_job.trial_dir(config, 1)
  for name in os.listdir(trial_dir):
    if name.startswith("ckpt-6."):
      os.remove(os.path.join(trial_dir, name))
  checkpoints.write_checkpoint_state(trial_dir, "ckpt-3")
  os.remove(config.results_pkl)
  metrics_path = pathlib.Path(config.results_dir) / "epoch_metrics.json"
  metrics_path.write_text(json.dumps(points[:1]))
  finetune_job.run(config, strategy_name="one_device")
  resumed = json.loads(metrics_path.read_text())
  assert [p["step"] for p in resumed] == [0, 3, 6]
  assert resumed[1] == points[1]


# ------------------------------------------------------------ the pieces
def test_multitask_loss_sums_each_row_under_its_own_task():
  losses = {"a": tf.constant([1.0, 2.0, 3.0, 4.0]),
            "b": tf.constant([10.0, 20.0, 30.0, 40.0])}
  task_id = tf.constant([0, 1, 1, 2])  # the last row is batch padding
  assert float(multitask_loss(losses, ["a", "b"], task_id)) == 1.0 + 20.0 + 30.0


def test_shuffle_keeps_example_rows_together_and_padding_marks_rows():
  groups = np.array([0, 0, 0, 1, 2, 2, 3])
  order = finetune_job.shuffled_row_order(groups, np.random.RandomState(1))
  assert sorted(order) == list(range(7))
  shuffled = groups[order]
  blocks = [g for i, g in enumerate(shuffled) if i == 0 or g != shuffled[i - 1]]
  assert sorted(blocks) == [0, 1, 2, 3]  # each example's rows are consecutive
  rows_of_0 = [i for i in order if groups[i] == 0]
  assert rows_of_0 == [0, 1, 2]  # and in their original order
  orders = {tuple(finetune_job.shuffled_row_order(groups, np.random.RandomState(s)))
            for s in range(10)}
  assert len(orders) > 1

  arrays = {"task_id": np.array([0, 1, 1], np.int32),
            "x": np.arange(6, dtype=np.float32).reshape(3, 2)}
  padded = finetune_job.pad_rows(arrays, 4, padding_task_id=2)
  np.testing.assert_array_equal(padded["task_id"], [0, 1, 1, 2])
  np.testing.assert_array_equal(padded["x"][3], [0, 0])
  assert len(finetune_job.pad_rows(arrays, 3, 2)["x"]) == 3


def _rte_data_dir(data_dir, root):
  """A data_dir holding the rte slice and the vocab, to change files in."""
  rte = root / "finetuning_data" / "rte"
  rte.mkdir(parents=True)
  shutil.copy(data_dir / "vocab.txt", root / "vocab.txt")
  for split in ("train", "dev"):
    shutil.copy(data_dir / "finetuning_data" / "rte" / f"{split}.tsv", rte / f"{split}.tsv")
  return root


def _swapped_vocab(vocab, path):
  """A copy of `vocab` with two entries (lines 1000 and 1001) swapped: as
  many entries, other ids."""
  tokens = vocab.read_text(encoding="utf-8").splitlines()
  tokens[999], tokens[1000] = tokens[1000], tokens[999]
  path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
  return path


def _cached_record(prefix):
  """The record inside a cache's .npz, and the copy in the .json beside it."""
  with np.load(f"{prefix}.npz") as cached:
    inside = json.loads(str(cached[finetune_job.CACHE_RECORD_KEY]))
  return inside, json.loads(pathlib.Path(f"{prefix}.json").read_text())


def test_training_data_cache_is_reused_only_when_made_from_the_same_inputs(
    data_dir, tmp_path, capsys):
  local = _rte_data_dir(data_dir, tmp_path / "data")
  config = tiny_config(local, tmp_path / "model", ["rte"])
  assert config.preprocessed_data_dir == str(tmp_path / "model" / "featurized_data")
  tasks = task_builder.get_tasks(config, finetune_job.load_tokenizer(config))
  first = finetune_job.training_data(config, tasks)
  prefix = tmp_path / "model" / "featurized_data" / "rte_train"
  inside, beside = _cached_record(prefix)
  assert inside == beside == {
      "task_names": ["rte"],
      "hparams": {"debug": False, "do_lower_case": True, "max_seq_length": 64},
      "vocab_sha256": hashlib.sha256((local / "vocab.txt").read_bytes()).hexdigest(),
      "files": {f"rte/{name}.tsv": hashlib.sha256(
          (local / "finetuning_data" / "rte" / f"{name}.tsv").read_bytes()).hexdigest()
                for name in ("dev", "train")}}
  second = finetune_job.training_data(config, tasks)
  assert capsys.readouterr().out == f"Using the featurized training data in {prefix}.npz\n"
  for key in first.arrays:
    np.testing.assert_array_equal(first.arrays[key], second.arrays[key])
  np.testing.assert_array_equal(first.groups, np.arange(24))

  def rebuilt(*changes, **hparams):
    changed = tiny_config(local, tmp_path / "model", ["rte"], **hparams)
    data = finetune_job.training_data(
        changed, task_builder.get_tasks(changed, finetune_job.load_tokenizer(changed)))
    assert capsys.readouterr().out == (
        f"Rebuilding the featurized training data {prefix}.npz: made from other inputs "
        f"({'; '.join(changes)})\n")
    assert sorted(os.listdir(prefix.parent)) == ["rte_train.json", "rte_train.npz"]
    return data

  assert rebuilt("max_seq_length 64 -> 32", max_seq_length=32).arrays["input_ids"].shape == (
      24, 32)
  vocab = _swapped_vocab(local / "vocab.txt", tmp_path / "swapped.txt")
  new_sha = hashlib.sha256(vocab.read_bytes()).hexdigest()
  assert _cached_record(prefix)[0]["vocab_sha256"] != new_sha
  rebuilt("max_seq_length 32 -> 64", f"another vocab (sha256 "
          f"{_cached_record(prefix)[0]['vocab_sha256'][:12]} -> {new_sha[:12]})",
          vocab_file=str(vocab))
  assert _cached_record(prefix)[0]["vocab_sha256"] == new_sha
  train = local / "finetuning_data" / "rte" / "train.tsv"
  train.write_text("\n".join(train.read_text().splitlines()[:11]) + "\n")
  assert len(rebuilt("rte/train.tsv changed", vocab_file=str(vocab))) == 10

  # A cache of an older version (no record inside): rebuilt, not trusted.
  np.savez(f"{prefix}.npz", __groups=np.arange(3))
  finetune_job.training_data(config, tasks)
  assert capsys.readouterr().out == (
      f"Rebuilding the featurized training data {prefix}.npz: it does not record what "
      "it was made from (an older electra-tf wrote it)\n")


@pytest.mark.slow
def test_command_caches_beside_its_model_dir_and_rebuilds_for_other_inputs(
    data_dir, tmp_path):
  """run_finetuning.py as users start it: with --model_dir the cache goes
  there (the data folder stays as it was); a second run that shares the
  cache with another vocab and length says what changed and rebuilds it."""
  local = _rte_data_dir(data_dir, tmp_path / "data")
  before = sorted(local.rglob("*"))
  hparams = dict(TINY, do_eval=False, num_train_epochs=0.5)
  first = run_command("electra_tf.commands.finetune", [
      f"--data_dir={local}", "--task_names=rte", f"--model_dir={tmp_path / 'a'}",
      "--init_checkpoint=none", f"--hparams={json.dumps(hparams)}"], "run_finetuning.py")
  assert first.returncode == 0, first.stderr
  cache = tmp_path / "a" / "featurized_data" / "rte_train.npz"
  assert "Using the featurized training data" not in first.stdout and cache.is_file()
  assert sorted(local.rglob("*")) == before
  vocab = _swapped_vocab(local / "vocab.txt", tmp_path / "swapped.txt")
  hparams.update(max_seq_length=32, preprocessed_data_dir=str(cache.parent))
  second = run_command("electra_tf.commands.finetune", [
      f"--data_dir={local}", "--task_names=rte", f"--model_dir={tmp_path / 'b'}",
      "--init_checkpoint=none", f"--vocab_file={vocab}", f"--hparams={json.dumps(hparams)}"],
      "run_finetuning.py")
  assert second.returncode == 0, second.stderr
  sha = [hashlib.sha256(path.read_bytes()).hexdigest()[:12] for path in (local / "vocab.txt",
                                                                        vocab)]
  assert (f"Rebuilding the featurized training data {cache}: made from other inputs "
          f"(max_seq_length 64 -> 32; another vocab (sha256 {sha[0]} -> {sha[1]}))\n"
          ) in second.stdout
  assert _cached_record(cache.with_suffix(""))[0]["hparams"]["max_seq_length"] == 32
  assert not (tmp_path / "b" / "featurized_data").exists()


def test_layerwise_learning_rates_of_the_finetuning_model(data_dir, tmp_path):
  n_layers = 3
  config = tiny_config(data_dir, tmp_path, ["rte", "squadv1"],
                       model_hparam_overrides={"hidden_size": 32,
                                               "num_hidden_layers": n_layers,
                                               "num_attention_heads": 2},
                       weight_decay_rate=0.0)
  tasks = task_builder.get_tasks(config, finetune_job.load_tokenizer(config))
  num_train_steps = 100
  job = finetune_job.TrialJob(config, tasks, tf.distribute.OneDeviceStrategy("/cpu:0"),
                        1, num_train_steps)
  variables = job.model.trainable_variables
  before = [v.numpy() for v in variables]
  job.optimizer.apply_gradients([(tf.ones_like(v), v) for v in variables])

  # Gradients of ones clipped to global norm 1; first Adam step without bias
  # correction; warm-up over 100 * 0.1 steps, linear decay over 100.
  g = 1.0 / np.sqrt(sum(v.shape.num_elements() for v in variables))
  update = 0.1 * g / (np.sqrt(0.001 * g * g) + 1e-6)
  lr_1 = 1e-4 * (1 - 1 / num_train_steps) * (1 / (num_train_steps * 0.1))
  seen = set()
  for variable, old in zip(variables, before):
    name = variable.name
    if name.startswith(("electra/embeddings/", "electra/embeddings_project/")):
      depth = 0
    elif name.startswith("electra/encoder/layer_"):
      depth = int(name.split("/")[2].split("_")[1]) + 1
    else:
      assert name.startswith("task_specific/"), name
      depth = n_layers + 2
    seen.add(depth)
    rate = lr_1 * 0.8 ** (n_layers + 2 - depth)
    np.testing.assert_allclose(old - variable.numpy(), rate * update, rtol=2e-3,
                               atol=1e-10, err_msg=name)
  assert seen == {0, 1, 2, 3, n_layers + 2}


FIXTURE_HPARAMS = {"model_hparam_overrides": {"hidden_size": 64, "num_hidden_layers": 2,
                                              "num_attention_heads": 4},
                   "embedding_size": 16, "max_seq_length": 32}


def test_encoder_starts_from_a_converted_google_checkpoint(
    official_debug_fixture, data_dir, tmp_path, capsys):
  official = official_debug_fixture / "model.ckpt"
  hparams = json.loads((official_debug_fixture / "config.json").read_text())["hparams"]
  checkpoint_conversion.official_to_project(str(official), PretrainingConfig.create(hparams),
                                         str(tmp_path / "converted"))
  config = FinetuningConfig.create(
      FIXTURE_HPARAMS, task_names=["rte"], data_dir=str(data_dir),
      model_dir=str(tmp_path / "model"), init_checkpoint=str(tmp_path / "converted"))
  prefix = finetune_job.initial_checkpoint(config)
  assert prefix == str(tmp_path / "converted" / "model.ckpt")
  tasks = task_builder.get_tasks(config, finetune_job.load_tokenizer(config))
  job = finetune_job.TrialJob(config, tasks, tf.distribute.OneDeviceStrategy("/cpu:0"),
                        1, None)
  random_init = {v.name: v.numpy() for v in job.model.variables}
  job.initialize(prefix)
  assert "Initialised the encoder from" in capsys.readouterr().out
  reader = tf.train.load_checkpoint(str(official))
  encoder_names = {v.name for v in job.model.encoder.variables}
  assert len(encoder_names) == 2 + 3 + 2 + 2 * 16  # embeddings, project, layers
  for variable in job.model.variables:
    if variable.name in encoder_names:
      expected = reader.get_tensor(variable.name[:-2])
      np.testing.assert_array_equal(variable.numpy(), expected)
      assert not np.array_equal(random_init[variable.name], expected)
    else:  # the head starts fresh
      np.testing.assert_array_equal(variable.numpy(), random_init[variable.name])

  # Without --init_checkpoint: the official default place, which must hold
  # a checkpoint; random initialisation only when asked for.
  empty = tmp_path / "empty_data_dir"
  default = FinetuningConfig.create(FIXTURE_HPARAMS, task_names=["rte"],
                                    data_dir=str(empty))
  with pytest.raises(ConfigError) as error:
    finetune_job.initial_checkpoint(default)
  assert str(error.value) == (
      f"--init_checkpoint: not given, and the default {empty / 'models' / 'electra'} holds "
      "no checkpoint; give the pre-trained model (a checkpoint prefix or directory), or "
      "--init_checkpoint=none to fine-tune from random initialisation")
  assert finetune_job.initial_checkpoint(
      FinetuningConfig.create(dict(FIXTURE_HPARAMS, init_checkpoint="none"),
                              task_names=["rte"], data_dir=str(empty))) is None
  (empty / "models").mkdir(parents=True)
  os.rename(tmp_path / "converted", empty / "models" / "electra")
  assert finetune_job.initial_checkpoint(default) == str(
      empty / "models" / "electra" / "model.ckpt")
  with pytest.raises(errors.CheckpointError, match="not found"):
    finetune_job.initial_checkpoint(config)
  # Another architecture is refused naming the variable and both shapes.
  other = FinetuningConfig.create(dict(FIXTURE_HPARAMS, embedding_size=8),
                                  task_names=["rte"], data_dir=str(data_dir))
  job = finetune_job.TrialJob(other, task_builder.get_tasks(other, finetune_job.load_tokenizer(other)),
                        tf.distribute.OneDeviceStrategy("/cpu:0"), 1, None)
  with pytest.raises(errors.CheckpointError, match=r"shape \[30522, 16\] there"):
    job.initialize(str(official))


# ------------------------------------------------------------------- CLI
def run_cli(args, cwd, python=sys.executable):
  env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run([python, str(REPO_ROOT / "run_finetuning.py")] + args,
                        cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _rte_with_short_row(data_dir, local, split):
  """rte train/dev in `local` with line 5 of `split` cut to two columns."""
  rte = local / "finetuning_data" / "rte"
  rte.mkdir(parents=True)
  (local / "vocab.txt").symlink_to(data_dir / "vocab.txt")
  for name in ("train", "dev"):
    lines = (data_dir / "finetuning_data" / "rte" / f"{name}.tsv").read_text().splitlines()
    if name == split:
      lines[4] = "4\tonly one sentence"
    (rte / f"{name}.tsv").write_text("\n".join(lines) + "\n")
  return rte / f"{split}.tsv"


def test_short_train_row_is_left_out_of_training_and_logged(data_dir, tmp_path, caplog):
  path = _rte_with_short_row(data_dir, tmp_path / "data", "train")
  config = tiny_config(tmp_path / "data", tmp_path / "model", ["rte"],
                       use_tfrecords_if_existing=False)
  tasks = task_builder.get_tasks(config, finetune_job.load_tokenizer(config))
  with caplog.at_level("WARNING"):
    data = finetune_job.training_data(config, tasks)
  assert len(data) == GLUE_ROWS["rte"] - 1
  np.testing.assert_array_equal(data.arrays["rte_eid"],
                                [i for i in range(GLUE_ROWS["rte"]) if i != 3])
  assert [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()] == [
      f"{path}: skipped 1 malformed row(s) (too few columns or empty), as the "
      f"official reader does: {path}:5"]


@pytest.mark.slow
def test_cli_malformed_row_is_one_line_error_and_writes_nothing(data_dir, tmp_path):
  dev = _rte_with_short_row(data_dir, tmp_path / "data", "dev")
  local = tmp_path / "data"
  before = sorted(str(p) for p in tmp_path.rglob("*"))
  result = run_cli(["--data_dir", str(local), "--task_names=rte",
                    f"--model_dir={tmp_path / 'model'}",
                    f"--export_dir={tmp_path / 'export'}", "--init_checkpoint=none",
                    f"--hparams={json.dumps(TINY)}"], tmp_path, python=command_python())
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1] == (
      f"run_finetuning.py: error: {dev}:5: expected at least 3 "
      "tab-separated columns, found 2")
  assert sorted(str(p) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("args, message", [
    (["--task_names=rte", '--hparams={"learning_rat": 0.1}'],
     "Unknown hparam 'learning_rat'"),
    (["--task_names=rte", '--hparams={"num_train_epochs": "3"}'],
     "hparam num_train_epochs: expected float, got str '3'"),
    (["--task_names=mnli,bogus"], "unknown task 'bogus'"),
])
def test_cli_bad_hparams_and_flags(tmp_path, args, message):
  result = run_cli([f"--data_dir={tmp_path}"] + args, tmp_path)
  assert result.returncode == 2
  assert result.stderr.strip() == f"run_finetuning.py: error: {message}" or (
      message in result.stderr and len(result.stderr.strip().splitlines()) == 1)
  assert os.listdir(tmp_path) == []


MIRRORED_CHECK = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from electra_tf.finetune import job as finetune_job
    from electra_tf.finetune import task_builder
    from electra_tf.finetune.config import FinetuningConfig
    from electra_tf.modeling import dropout
    data_dir, out_dir, hparams = sys.argv[1], sys.argv[2], eval(sys.argv[3])
    weights, predictions = {}, {}
    for name, strategy in [
        ("one_device", tf.distribute.OneDeviceStrategy("/cpu:0")),
        ("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))]:
      config = FinetuningConfig.create(hparams, task_names=["rte", "sts"],
                                       data_dir=data_dir, model_dir=f"{out_dir}/{name}")
      tasks = task_builder.get_tasks(config, finetune_job.load_tokenizer(config))
      data = finetune_job.training_data(config, tasks)
      job = finetune_job.TrialJob(config, tasks, strategy, 1, config.num_train_steps(len(data)))
      # No dropout: each replica draws its own masks, so only dropout-free
      # updates are comparable across strategies.
      dropout_layers = [layer for layer in job.model.submodules
                        if isinstance(layer, dropout.Dropout)]
      assert len(dropout_layers) > 3
      for layer in dropout_layers:
        layer.rate = 0.0
      job.initialize(None)
      job.train(data)
      weights[name] = [v.numpy() for v in job.model.trainable_variables]
      predictions[name] = job.predict(finetune_job.read_split(tasks[1], "dev"), 16)
    assert strategy.num_replicas_in_sync == 2
    for a, b in zip(weights["one_device"], weights["mirrored"]):
      np.testing.assert_allclose(a, b, atol=2e-5)
    np.testing.assert_allclose(predictions["one_device"]["predictions"],
                               predictions["mirrored"]["predictions"], atol=1e-4)
    print("steps", int(job.optimizer.iterations.numpy()))
""")


@pytest.mark.slow
def test_mirrored_on_two_replicas_matches_one_device(data_dir, tmp_path):
  hparams = dict(TINY, use_tfrecords_if_existing=False, train_batch_size=8)
  env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="3")
  result = subprocess.run(
      [command_python(), "-c", MIRRORED_CHECK, str(data_dir), str(tmp_path),
       repr(hparams)], env=env, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "steps 9" in result.stdout  # (24 + 48) / 8 steps of one epoch


@pytest.mark.slow
def test_trials_test_outputs_and_keep_all_models(data_dir, tmp_path):
  local = tmp_path / "data"
  rte = local / "finetuning_data" / "rte"
  rte.mkdir(parents=True)
  (local / "vocab.txt").symlink_to(data_dir / "vocab.txt")
  for split in ("train", "dev"):
    (rte / f"{split}.tsv").write_bytes(
        (data_dir / "finetuning_data" / "rte" / f"{split}.tsv").read_bytes())
  test_rows = ["\t".join(row[:3]) for row in read_tsv(rte / "dev.tsv")[:9]]
  (rte / "test.tsv").write_text("\n".join(test_rows) + "\n")  # no label column
  config = tiny_config(local, tmp_path / "model", ["rte"], num_trials=2,
                       num_train_epochs=2.0, keep_all_models=False,
                       write_test_outputs=True, n_writes_test=1)
  results = finetune_job.run(config, strategy_name="one_device")
  assert len(results) == 2 and results[0] != results[1]  # other seeds
  assert not os.path.exists(finetune_job.trial_dir(config, 1))  # not kept
  assert tf.train.latest_checkpoint(finetune_job.trial_dir(config, 2)).endswith("ckpt-4")
  results_dir = pathlib.Path(config.results_dir)
  for trial in (1, 2):
    metrics = json.loads((results_dir / f"trial_{trial}" / "rte_dev_metrics.json")
                         .read_text())
    assert metrics["trial"] == trial
    assert metrics["accuracy"] == pytest.approx(results[trial - 1]["rte"]["accuracy"])
  assert json.loads((results_dir / "rte_dev_metrics.json").read_text())["trial"] == 2
  # test predictions for the first n_writes_test trials only
  rows = read_tsv(results_dir / "trial_1" / "rte_test_predictions.tsv")
  assert rows[0] == ["index", "prediction"] and len(rows) == 9
  assert {r[1] for r in rows[1:]} <= {"entailment", "not_entailment"}
  assert not (results_dir / "trial_2" / "rte_test_predictions.tsv").exists()
  assert (results_dir / "rte_test_predictions.tsv").read_text() == (
      results_dir / "trial_1" / "rte_test_predictions.tsv").read_text()
  # the official test pickle: example id -> logits, first n_writes_test trials
  with open(config.test_predictions("rte", "test", 1), "rb") as f:
    logits = pickle.load(f)
  assert sorted(logits) == list(range(8))
  assert all(v.shape == (2,) and v.dtype == np.float32 for v in logits.values())
  labels = ["entailment", "not_entailment"]
  assert [labels[int(np.argmax(logits[i]))] for i in range(8)] == [r[1] for r in rows[1:]]
  assert os.listdir(tmp_path / "model" / "test_predictions") == ["rte_test_1_predictions.pkl"]
  assert len(pathlib.Path(config.results_txt).read_text().splitlines()) == 2
