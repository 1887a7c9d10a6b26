"""PretrainingConfig: official names, defaults, resolution order, errors."""

import json

import pytest

from electra_tf import config as config_lib
from electra_tf.errors import ConfigError
from electra_tf.pretrain.config import PretrainingConfig


def test_official_defaults():
  c = PretrainingConfig.create()
  assert (c.gen_weight, c.disc_weight, c.mask_prob) == (1.0, 50.0, 0.15)
  assert (c.learning_rate, c.lr_decay_power, c.weight_decay_rate) == (5e-4, 1.0, 0.01)
  assert (c.num_warmup_steps, c.num_train_steps, c.num_eval_steps) == (10000, 1000000, 100)
  assert (c.save_checkpoints_steps, c.keep_checkpoint_max) == (1000, 5)
  assert (c.max_seq_length, c.train_batch_size, c.eval_batch_size) == (128, 128, 128)
  assert (c.generator_hidden_size, c.generator_layers, c.temperature) == (0.25, 1.0, 1.0)
  assert c.vocab_size == 30522 and c.model_size == "small"
  # small: embedding 128; derived max predictions int((0.15 + 0.005) * 128) = 19
  assert c.embedding_size == 128
  assert c.max_predictions_per_seq == 19


def test_model_sizes_and_generator():
  small = PretrainingConfig.create({"model_size": "small"})
  d = small.encoder_config()
  assert (d.hidden_size, d.num_hidden_layers, d.num_attention_heads,
          d.intermediate_size) == (256, 12, 4, 1024)
  g = small.generator_config()
  assert (g.hidden_size, g.num_hidden_layers, g.num_attention_heads,
          g.intermediate_size) == (64, 12, 1, 256)
  base = PretrainingConfig.create({"model_size": "base"})
  d = base.encoder_config()
  assert (d.hidden_size, d.num_hidden_layers, d.num_attention_heads) == (768, 12, 12)
  # the paper's Table 6 settings for base
  assert (base.max_seq_length, base.learning_rate, base.train_batch_size) == (512, 2e-4, 256)
  assert base.generator_config().hidden_size == 256  # round(768 / 3)
  assert base.max_predictions_per_seq == int((0.15 + 0.005) * 512)
  large = PretrainingConfig.create({"model_size": "large"})
  d = large.encoder_config()
  assert (d.hidden_size, d.num_hidden_layers, d.num_attention_heads) == (1024, 24, 16)
  assert (large.mask_prob, large.train_batch_size) == (0.25, 2048)
  assert large.max_predictions_per_seq == int((0.25 + 0.005) * 512)
  # the official code's literal behaviour (paper block commented out)
  literal = PretrainingConfig.create({"model_size": "base", "paper_hparams": False})
  assert (literal.max_seq_length, literal.embedding_size) == (128, None)
  assert literal.effective_embedding_size == 768


def test_overrides_win_and_heads_follow_hidden():
  c = PretrainingConfig.create({"model_hparam_overrides": {"hidden_size": 64, "num_hidden_layers": 2,
                                                          "num_attention_heads": 4},
                                "embedding_size": 16, "generator_hidden_size": 0.5,
                                "max_seq_length": 32})
  d, g = c.encoder_config(), c.generator_config()
  assert (d.hidden_size, d.num_attention_heads, d.intermediate_size) == (64, 4, 256)
  assert (g.hidden_size, g.num_attention_heads, g.intermediate_size) == (32, 1, 128)
  assert c.embedding_size == 16 and c.max_predictions_per_seq == 4
  c = PretrainingConfig.create({"model_hparam_overrides": {"hidden_size": 128}})
  assert c.encoder_config().num_attention_heads == 2


def test_debug_overrides_and_user_values_win_over_debug():
  c = PretrainingConfig.create({"debug": True})
  assert (c.train_batch_size, c.num_train_steps, c.eval_batch_size,
          c.iterations_per_loop, c.num_eval_steps) == (8, 20, 4, 1, 2)
  assert c.encoder_config().hidden_size == 144
  c = PretrainingConfig.create({"debug": True, "num_train_steps": 7})
  assert c.num_train_steps == 7


def test_official_hparams_json_loads_unchanged(official_debug_fixture, tmp_path):
  hparams = json.loads((official_debug_fixture / "config.json").read_text())["hparams"]
  path = tmp_path / "hparams.json"
  path.write_text(json.dumps(hparams))
  c = PretrainingConfig.create(config_lib.parse_hparams(str(path)))
  resolved = json.loads((official_debug_fixture / "config.json").read_text())
  assert c.encoder_config().to_dict() == resolved["discriminator_bert_config"]
  assert c.generator_config().to_dict() == resolved["generator_bert_config"]
  assert c.max_predictions_per_seq == resolved["pretraining_config"]["max_predictions_per_seq"]


def test_paths_follow_official_layout():
  c = PretrainingConfig.create(data_dir="/d", model_name="m")
  assert c.pretrain_tfrecords == "/d/pretrain_tfrecords/pretrain_data.tfrecord*"
  assert c.vocab_file == "/d/vocab.txt"
  assert c.model_dir == "/d/models/m"
  assert c.results_txt == "/d/models/m/results/unsup_results.txt"
  assert c.results_json == "/d/models/m/results/unsup_results.json"


@pytest.mark.parametrize("hparams,needle", [
    ({"no_such_key": 1}, "Unknown hparam 'no_such_key'"),
    ({"learnin_rate": 1e-3}, "Unknown hparam 'learnin_rate' (did you mean learning_rate?)"),
    ({"num_layers": 4}, "Unknown hparam 'num_layers' (did you mean num_hidden_layers in "
                        "model_hparam_overrides or "),
    ({"learning_rate": "fast"}, "hparam learning_rate: expected float"),
    ({"num_train_steps": 1.5}, "hparam num_train_steps: expected int"),
    ({"debug": 1}, "hparam debug: expected bool"),
    ({"model_size": "huge"}, "hparam model_size: 'huge' is not one of"),
    ({"mask_prob": 1.0}, "hparam mask_prob: 1.0 is outside (0, 1)"),
    ({"mask_prob": 0.0}, "hparam mask_prob: 0.0 is outside (0, 1)"),
    ({"model_hparam_overrides": {"hidden": 3}}, "model_hparam_overrides: unknown key"),
    ({"electric_objective": True, "two_tower_generator": False},
     "hparam two_tower_generator=false: electric_objective needs"),
    ({"electric_objective": True, "untied_generator": False},
     "hparam two_tower_generator=true needs"),
    ({"two_tower_generator": True, "uniform_generator": True},
     "hparam two_tower_generator=true needs"),
    ({"two_tower_generator": True, "electra_objective": False},
     "hparam two_tower_generator=true needs"),
    ({"max_seq_length": 1024}, "exceeds max_position_embeddings 512"),
])
def test_bad_hparams_are_one_line_errors(hparams, needle):
  with pytest.raises(ConfigError) as e:
    PretrainingConfig.create(hparams)
  assert needle in str(e.value) and "\n" not in str(e.value)


def test_parse_hparams_string_file_and_errors(tmp_path):
  assert config_lib.parse_hparams('{"mask_prob": 0.2}') == {"mask_prob": 0.2}
  with pytest.raises(ConfigError, match="invalid JSON"):
    config_lib.parse_hparams('{"mask_prob": }')
  with pytest.raises(ConfigError, match="neither a JSON object nor an existing"):
    config_lib.parse_hparams(str(tmp_path / "missing.json"))
  bad = tmp_path / "bad.json"
  bad.write_text("[1, 2]")
  with pytest.raises(ConfigError, match=f"--hparams file {bad}: expected a JSON object"):
    config_lib.parse_hparams(str(bad))


def _write_json(path, values):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(values), encoding="utf-8")


def test_a_checkpoints_record_gives_its_architecture_and_casing(tmp_path):
  built = PretrainingConfig.create({
      "model_size": "small", "vocab_size": 7149, "embedding_size": 64,
      "model_hparam_overrides": {"hidden_size": 128, "num_hidden_layers": 4},
      "do_lower_case": False})
  model_dir = tmp_path / "models" / "mine"
  _write_json(model_dir / config_lib.ARCHITECTURE_RECORD, built.architecture())
  # A rerun / evaluation in the same model_dir: nothing typed again.
  again = PretrainingConfig.create(data_dir=str(tmp_path), model_name="mine")
  assert again.architecture() == built.architecture()
  assert (again.vocab_size, again.effective_embedding_size, again.do_lower_case) == (
      7149, 64, False)
  # Another job reading a checkpoint of that directory (a prefix in it).
  exported = PretrainingConfig.create(checkpoint=str(model_dir / "ckpt-400"))
  assert exported.encoder_config() == built.encoder_config()
  assert exported.generator_config() == built.generator_config()
  # The same values typed again are fine; a contradicting one names both.
  PretrainingConfig.create({"vocab_size": 7149, "model_size": "small"},
                           checkpoint=str(model_dir))
  record = str(model_dir / config_lib.ARCHITECTURE_RECORD)
  with pytest.raises(ConfigError, match=f"hparam vocab_size: 30522 contradicts the 7149 "
                     f"that {record} records"):
    PretrainingConfig.create({"vocab_size": 30522}, checkpoint=str(model_dir))
  with pytest.raises(ConfigError, match="model_hparam_overrides: hidden_size 256 contradicts"):
    PretrainingConfig.create({"model_hparam_overrides": {"hidden_size": 256}},
                             checkpoint=str(model_dir))
  # Dropout is not the architecture: the user's value wins.
  tuned = PretrainingConfig.create(
      {"model_hparam_overrides": {"hidden_dropout_prob": 0.0}}, checkpoint=str(model_dir))
  assert tuned.encoder_config().hidden_dropout_prob == 0.0
  assert tuned.encoder_config().hidden_size == 128


def test_finetuning_reads_the_record_of_its_init_checkpoint(tmp_path):
  from electra_tf.finetune.config import FinetuningConfig  # pylint: disable=g-import-not-at-top
  built = PretrainingConfig.create({
      "vocab_size": 500, "embedding_size": 64,
      "model_hparam_overrides": {"hidden_size": 128, "num_hidden_layers": 4}})
  pretrained = tmp_path / "models" / "electra_demo"
  _write_json(pretrained / config_lib.ARCHITECTURE_RECORD, built.architecture())
  tuned = FinetuningConfig.create({"task_names": ["rte"], "model_size": "small"},
                                  data_dir=str(tmp_path), model_name="electra_demo")
  assert tuned.encoder_config() == built.encoder_config()
  assert (tuned.vocab_size, tuned.effective_embedding_size) == (500, 64)
  # The vocab beside the checkpoint (pre-training copies it there) is the default.
  (pretrained / config_lib.VOCAB_NAME).write_text("[PAD]\n", encoding="utf-8")
  assert FinetuningConfig.create({"task_names": ["rte"], "vocab_size": 500},
                                 data_dir=str(tmp_path), model_name="electra_demo",
                                 ).vocab_file == str(pretrained / "vocab.txt")
  # Random initialisation reads no record: the size's defaults.
  fresh = FinetuningConfig.create({"task_names": ["rte"], "init_checkpoint": "none"},
                                  data_dir=str(tmp_path), model_name="electra_demo")
  assert (fresh.encoder_config().hidden_size, fresh.effective_embedding_size) == (256, 128)
  # A transformers import's hparams.json counts too, and only its architecture.
  imported = tmp_path / "from_hf"
  _write_json(imported / config_lib.IMPORTED_HPARAMS, {
      "model_size": "small", "vocab_size": 321, "embedding_size": 96, "max_seq_length": 128,
      "do_lower_case": False, "model_hparam_overrides": {"hidden_size": 192}})
  from_hf = FinetuningConfig.create({"task_names": ["chunk"], "init_checkpoint": str(imported)},
                                    data_dir=str(tmp_path))
  assert (from_hf.vocab_size, from_hf.effective_embedding_size, from_hf.do_lower_case,
          from_hf.max_seq_length) == (321, 96, False, 256)  # chunk's own length stays


def test_a_finetuning_trials_checkpoint_reads_its_model_dirs_record(tmp_path):
  """A fine-tuned checkpoint (MODEL_DIR/trial_<n>/ckpt-N) gives its encoder's
  architecture and vocab from the job's record and vocab copy in MODEL_DIR."""
  from electra_tf.finetune.config import FinetuningConfig  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune import job as finetune_job  # pylint: disable=g-import-not-at-top
  tuned = FinetuningConfig.create({
      "task_names": ["rte"], "vocab_size": 500, "embedding_size": 64, "init_checkpoint": "none",
      "model_hparam_overrides": {"hidden_size": 128, "num_hidden_layers": 4},
      "do_lower_case": False})
  model_dir = tmp_path / "models" / "mine_rte"
  _write_json(model_dir / config_lib.FINETUNING_RECORD, finetune_job._run_record(tuned))
  (model_dir / "trial_1").mkdir()
  (model_dir / config_lib.VOCAB_NAME).write_text("[PAD]\n", encoding="utf-8")
  for checkpoint in (model_dir / "trial_1" / "ckpt-2", model_dir / "trial_1"):
    read = PretrainingConfig.create(checkpoint=str(checkpoint))
    assert read.encoder_config() == tuned.encoder_config()
    assert (read.vocab_size, read.effective_embedding_size, read.do_lower_case) == (
        500, 64, False)
    assert config_lib.recorded_vocab(str(checkpoint)) == str(model_dir / "vocab.txt")
  # Only a trial_<n> directory under a fine-tuning record looks one level up.
  (tmp_path / "other" / "trial_1").mkdir(parents=True)
  assert config_lib.recorded_hparams(str(tmp_path / "other" / "trial_1")) is None
  assert config_lib.record_directory(str(model_dir / "trial_x" / "c")) == str(
      model_dir / "trial_x")


def test_vocab_size_defaults_to_the_vocab_files_entries(tmp_path):
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]
  (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
  assert PretrainingConfig.create(data_dir=str(tmp_path)).vocab_size == 100
  assert PretrainingConfig.create({"vocab_size": 64}, data_dir=str(tmp_path)).vocab_size == 64
  assert PretrainingConfig.create().vocab_size == 30522  # no vocab file: the official default


# ------------------------------------------------------ a rerun's defaults
def _model_dir_with_run(tmp_path, hparams, checkpoint=True):
  """A model_dir as a finished run leaves it: its training record (the last
  run's full hparams), vocab and, unless told, a checkpoint state file."""
  model_dir = tmp_path / "model"
  model_dir.mkdir(parents=True)
  first = PretrainingConfig.create({**hparams, "model_dir": str(model_dir)})
  from electra_tf import hf  # the record job.train writes
  (model_dir / "training_runs.json").write_text(json.dumps(
      {"runs": [{"from_step": 0, "command": "", "hparams": hf.card_hparams(first)}]}))
  (model_dir / "vocab.txt").write_text("[PAD]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
  if checkpoint:
    (model_dir / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\n')
  return model_dir


RUN = {"train_batch_size": 32, "num_warmup_steps": 20, "num_train_steps": 200,
       "max_seq_length": 64, "learning_rate": 2e-4, "vocab_size": 5,
       "model_hparam_overrides": {"hidden_size": 64, "num_hidden_layers": 2}}


def test_a_rerun_takes_every_recorded_hparam_it_does_not_set(tmp_path):
  model_dir = _model_dir_with_run(tmp_path, RUN)
  c = PretrainingConfig.create({"model_dir": str(model_dir), "num_train_steps": 220})
  assert (c.train_batch_size, c.num_warmup_steps, c.max_seq_length) == (32, 20, 64)
  assert (c.learning_rate, c.num_train_steps, c.encoder_config().hidden_size) == (2e-4, 220, 64)
  assert c.max_predictions_per_seq == int((0.15 + 0.005) * 64)
  assert c.vocab_file == str(model_dir / "vocab.txt")  # the vocab kept beside the run
  assert c.rerun.changed == {"num_train_steps": (200, 220)}
  assert c.rerun.lines() == [
      f"Continuing the run recorded in {model_dir / 'training_runs.json'}: every hparam not "
      "set here is the recorded one", "  num_train_steps: 220 (recorded: 200)"]
  # What the command does is its own: do_eval is never taken.
  assert PretrainingConfig.create({"model_dir": str(model_dir), "do_train": False,
                                   "do_eval": True}).do_train is False
  assert PretrainingConfig.create().rerun is None  # no record: a first run


def test_a_resume_refuses_what_its_input_position_depends_on(tmp_path):
  model_dir = _model_dir_with_run(tmp_path, RUN)
  for key, value in (("train_batch_size", 16), ("max_seq_length", 128), ("mask_prob", 0.2),
                     ("seed", 3)):
    with pytest.raises(ConfigError) as raised:
      PretrainingConfig.create({"model_dir": str(model_dir), key: value})
    message = str(raised.value)
    assert message.startswith(f"hparam {key}: {value!r}, but the run in model_dir "
                              f"{model_dir} was trained with "), message
    assert f"--init_checkpoint={model_dir}" in message
  # Evaluating, or a model_dir without a checkpoint, is no resume.
  assert PretrainingConfig.create({"model_dir": str(model_dir), "do_train": False,
                                   "train_batch_size": 16}).train_batch_size == 16
  fresh = _model_dir_with_run(tmp_path / "fresh", RUN, checkpoint=False)
  assert PretrainingConfig.create({"model_dir": str(fresh),
                                   "train_batch_size": 16}).train_batch_size == 16


def test_data_dir_places_the_records_of_a_rerun(tmp_path):
  model_dir = _model_dir_with_run(tmp_path, {**RUN, "pretrain_tfrecords": "old/*"})
  assert PretrainingConfig.create({"model_dir": str(model_dir)}).pretrain_tfrecords == "old/*"
  placed = PretrainingConfig.create({"model_dir": str(model_dir)}, data_dir="/d")
  assert placed.pretrain_tfrecords == "/d/pretrain_tfrecords/pretrain_data.tfrecord*"


def test_another_vocab_than_the_checkpoints_is_refused(tmp_path):
  model_dir = _model_dir_with_run(tmp_path, RUN)
  other = tmp_path / "other.txt"
  other.write_text("[PAD]\n[CLS]\n[SEP]\n[MASK]\nthe\n".upper())
  with pytest.raises(ConfigError, match=f"--vocab_file {other}: not the vocab {model_dir} was "
                     f"trained with, {model_dir / 'vocab.txt'} \\(line 5 holds"):
    PretrainingConfig.create({"model_dir": str(model_dir), "vocab_file": str(other)})
  same = tmp_path / "same.txt"
  same.write_bytes((model_dir / "vocab.txt").read_bytes())
  assert PretrainingConfig.create({"model_dir": str(model_dir),
                                   "vocab_file": str(same)}).vocab_file == str(same)


def test_max_seq_length_comes_from_the_records(tmp_path):
  from electra_tf.pretrain import tfrecords  # pylint: disable=g-import-not-at-top
  records = tmp_path / "records"
  records.mkdir()
  (records / tfrecords.BUILD_RECORD).write_text(json.dumps(
      {"complete": True, "settings": {"max_seq_length": 96}}))
  (records / "pretrain_data.tfrecord-0-of-1").write_bytes(b"")
  c = PretrainingConfig.create({"pretrain_tfrecords": str(records / "*")})
  assert (c.max_seq_length, c.inferred) == (96, {"max_seq_length": 96})
  # Given, it wins (the job's length check then compares it with the records).
  assert PretrainingConfig.create({"pretrain_tfrecords": str(records / "*"),
                                   "max_seq_length": 32}).max_seq_length == 32
