"""PretrainingConfig: official names, defaults, resolution order, errors."""

import json

import pytest

from electra_tf import config as config_lib
from electra_tf.config import ConfigError
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
