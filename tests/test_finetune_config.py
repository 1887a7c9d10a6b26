"""FinetuningConfig: official names, defaults, per-task/per-size overrides, errors."""

import os

import pytest

from electra_tf.errors import ConfigError
from electra_tf.finetune.config import TASK_NAMES, FinetuningConfig


def test_official_defaults():
  c = FinetuningConfig.create({}, task_names=["sst", "cola"])
  assert (c.learning_rate, c.weight_decay_rate, c.layerwise_lr_decay) == (1e-4, 0.01, 0.8)
  assert (c.num_train_epochs, c.warmup_proportion, c.num_trials) == (3.0, 0.1, 1)
  assert (c.max_seq_length, c.train_batch_size, c.eval_batch_size) == (128, 32, 32)
  assert (c.doc_stride, c.max_query_length, c.n_best_size, c.max_answer_length) == (128, 64, 20, 30)
  assert c.double_unordered and c.answerable_classifier and c.joint_prediction
  assert (c.answerable_weight, c.beam_size, c.qa_na_threshold) == (0.5, 20, -2.75)
  assert c.embedding_size == 128 and c.model_size == "small"
  assert (c.write_test_outputs, c.n_writes_test, c.do_train, c.do_eval) == (False, 5, True, True)
  model = c.encoder_config()
  assert (model.hidden_size, model.num_hidden_layers, model.num_attention_heads) == (256, 12, 4)


@pytest.mark.parametrize("task,epochs,seq", [
    ("rte", 10.0, 128), ("sts", 10.0, 128), ("squad", 2.0, 512),
    ("squadv1", 2.0, 512), ("chunk", 3.0, 256), ("mnli", 3.0, 128),
    ("newsqa", 2.0, 512), ("triviaqa", 2.0, 512), ("searchqa", 2.0, 512),
    ("naturalqs", 3.0, 128)])  # official name test: naturalqs has no "qa"
def test_single_task_defaults(task, epochs, seq):
  c = FinetuningConfig.create({}, task_names=[task])
  assert (c.num_train_epochs, c.max_seq_length) == (epochs, seq)


def test_user_values_win_over_task_size_and_debug_defaults():
  c = FinetuningConfig.create({"num_train_epochs": 4, "max_seq_length": 384,
                               "learning_rate": 3e-4, "debug": True},
                              task_names=["squad"], model_size="large")
  assert (c.num_train_epochs, c.max_seq_length, c.learning_rate) == (4, 384, 3e-4)
  assert c.layerwise_lr_decay == 0.9  # large default, not overridden
  assert c.log_examples and c.iterations_per_loop == 1  # debug settings
  assert c.encoder_config().num_hidden_layers == 3  # official debug shrink
  large = FinetuningConfig.create({}, task_names=["rte"], model_size="large")
  assert (large.learning_rate, large.layerwise_lr_decay, large.embedding_size) == (5e-5, 0.9, None)
  assert large.effective_embedding_size == 1024
  # a QA task among several tasks does not get the single-task SQuAD defaults
  multi = FinetuningConfig.create({}, task_names=["squad", "rte"])
  assert (multi.max_seq_length, multi.num_train_epochs) == (128, 3.0)


def test_flags_win_over_hparams_and_paths(tmp_path):
  c = FinetuningConfig.create({"task_names": ["sst"], "model_size": "base"},
                              task_names=["rte", "mrpc"], model_size="small",
                              data_dir=str(tmp_path))
  assert c.task_names == ["rte", "mrpc"] and c.model_size == "small"
  pretrained = os.path.join(str(tmp_path), "models", "electra")
  assert c.init_checkpoint == pretrained
  assert c.model_dir == os.path.join(pretrained, "finetuning_models", "rte,mrpc_model")
  assert c.results_txt == os.path.join(c.model_dir, "results", "rte,mrpc_results.txt")
  assert c.vocab_file == os.path.join(str(tmp_path), "vocab.txt")
  assert c.raw_data_dir("rte") == os.path.join(str(tmp_path), "finetuning_data", "rte")
  # The featurized-data cache: the official place when neither model_dir
  # nor preprocessed_data_dir is given, else beside the given model_dir.
  assert c.preprocessed_data_dir == os.path.join(pretrained, "finetuning_tfrecords",
                                                 "rte,mrpc_tfrecords")
  c = FinetuningConfig.create({}, task_names=["rte"], model_dir="/m", init_checkpoint="/ckpt")
  assert (c.model_dir, c.results_dir, c.init_checkpoint) == ("/m", "/m/results", "/ckpt")
  assert c.preprocessed_data_dir == "/m/featurized_data"
  c = FinetuningConfig.create({"preprocessed_data_dir": "/p"}, task_names=["rte"],
                              model_dir="/m")
  assert c.preprocessed_data_dir == "/p"


def test_vocab_is_found_beside_the_checkpoint_before_the_official_places(tmp_path):
  """The order run_finetuning.py --help and docs/finetuning.md give:
  --vocab_file, the vocab.txt beside --init_checkpoint,
  data_dir/models/<model_name>/vocab.txt, data_dir/vocab.txt."""
  checkpoint = tmp_path / "converted"
  checkpoint.mkdir()

  def vocab_file(**flags):
    return FinetuningConfig.create({}, task_names=["rte"], data_dir=str(tmp_path),
                                   init_checkpoint=str(checkpoint), **flags).vocab_file

  assert vocab_file() == str(tmp_path / "vocab.txt")  # none there: the last, for its error
  for place in (tmp_path / "models" / "electra", checkpoint):
    place.mkdir(parents=True, exist_ok=True)
    (place / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    assert vocab_file() == str(place / "vocab.txt")
  assert vocab_file(vocab_file="given.txt") == "given.txt"


def test_num_train_steps_counts_padded_batches():
  c = FinetuningConfig.create({"train_batch_size": 32}, task_names=["rte"])
  # 2490 features -> 78 batches (last one padded) * 10 epochs
  assert c.num_train_steps(2490) == 780
  c = FinetuningConfig.create({"train_batch_size": 32, "num_train_epochs": 2.5},
                              task_names=["sst"])
  assert c.num_train_steps(64) == 5


@pytest.mark.parametrize("hparams,message", [
    ({"learning_rat": 1e-4}, "Unknown hparam 'learning_rat'"),
    ({"qa_preds_file": "x"}, "hparam qa_preds_file: derived"),
    ({"task_names": "rte"}, "hparam task_names: expected a list"),
    ({"task_names": ["foo"]}, "unknown task 'foo'"),
    ({"task_names": ["rte", "rte"]}, "repeats a task"),
    ({"model_size": "huge"}, "hparam model_size"),
    ({"learning_rate": "big"}, "hparam learning_rate: expected float"),
    ({"max_seq_length": 1024}, "exceeds max_position_embeddings 512"),
    ({"train_batch_size": 0}, "hparam train_batch_size: 0 must be > 0"),
    ({"warmup_proportion": 1.5}, "warmup_proportion"),
    ({"task_names": ["squad"], "max_seq_length": 64}, "leave no room"),
    ({"task_names": ["naturalqs"], "max_seq_length": 60}, "leave no room"),
    ({"task_names": ["squad"], "max_seq_length": 96, "max_query_length": 8,
      "beam_size": 100}, "hparam beam_size"),
    ({"model_hparam_overrides": {"hiden_size": 3}}, "model_hparam_overrides"),
])
def test_bad_hparams_raise_one_line_config_errors(hparams, message):
  with pytest.raises(ConfigError) as info:
    FinetuningConfig.create(dict({"task_names": ["rte"]}, **hparams))
  assert message in str(info.value) and "\n" not in str(info.value)


def test_the_official_tasks_and_ner_are_registered():
  assert set(TASK_NAMES) >= {"cola", "sst", "mrpc", "sts", "qqp", "mnli", "qnli", "rte",
                             "squadv1", "squad", "newsqa", "naturalqs", "triviaqa",
                             "searchqa", "chunk", "ner"}


def test_official_result_file_paths(tmp_path):
  c = FinetuningConfig.create({}, task_names=["squad", "newsqa"],
                              data_dir=str(tmp_path), model_dir="/m")
  assert c.qa_preds_file("squad") == "/m/results/squad,newsqa_qa/squad_preds.json"
  assert c.qa_na_file("squad") == "/m/results/squad,newsqa_qa/squad_null_odds.json"
  assert c.qa_eval_file("newsqa", "/m/results/trial_2") == (
      "/m/results/trial_2/squad,newsqa_qa/newsqa_eval.json")
  assert c.test_predictions("squad", "test", 3) == (
      "/m/test_predictions/squad_test_3_predictions.pkl")


def test_task_classes_give_help_and_single_task_defaults():
  from electra_tf.finetune import config as finetune_config  # pylint: disable=g-import-not-at-top
  lines = finetune_config.task_names_help().splitlines()
  assert [line.split(":")[0] for line in lines] == list(TASK_NAMES)
  assert all(len(line.split(": ", 1)[1]) > 10 for line in lines)
  assert "ner: named-entity recognition (CoNLL-2003 format; entity F1 as seqeval)" in lines
  assert FinetuningConfig.create({}, task_names=["ner"]).do_lower_case is False
  assert FinetuningConfig.create({"do_lower_case": True}, task_names=["ner"]).do_lower_case
  assert FinetuningConfig.create({}, task_names=["ner", "sst"]).do_lower_case  # one vocab
  assert finetune_config.task_class("cola").single_text
  assert not finetune_config.task_class("rte").single_text
