"""Checkpoint conversion both ways, strict restoring, one-line CLI errors."""

import json
import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from electra_tf import checkpoint_conversion, checkpoints, errors
from electra_tf import config as config_lib
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.modeling.encoder import build_discriminator_encoder
from electra_tf.pretrain.model import build_model
from tests.conftest import run_command

TINY = {"vocab_size": 40, "embedding_size": 8, "max_seq_length": 8,
        "model_hparam_overrides": {"hidden_size": 16, "num_hidden_layers": 2,
                                   "num_attention_heads": 2}}


@pytest.fixture(scope="module")
def fixture_hparams(official_debug_fixture):
  return json.loads((official_debug_fixture / "config.json").read_text())["hparams"]


@pytest.fixture(scope="module")
def converted(official_debug_fixture, fixture_hparams, tmp_path_factory):
  """The fixture's official checkpoint converted by the CLI: its directory."""
  output_dir = tmp_path_factory.mktemp("converted") / "electra"
  assert checkpoint_conversion.official_to_project(
      str(official_debug_fixture / "model.ckpt"), PretrainingConfig.create(fixture_hparams),
      str(output_dir)) == str(output_dir / "model.ckpt")
  return output_dir


def read_all(prefix):
  reader = tf.train.load_checkpoint(str(prefix))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_convert_round_trip_gives_back_the_official_checkpoint(
    official_debug_fixture, fixture_hparams, converted, tmp_path):
  assert sorted(os.listdir(converted)) == [
      "checkpoint", "electra_config.json", "model.ckpt.data-00000-of-00001",
      "model.ckpt.index"]
  assert checkpoints.is_project_checkpoint(str(converted / "model.ckpt"))
  back_dir = tmp_path / "official"
  checkpoint_conversion.project_to_official(
      str(converted), PretrainingConfig.create(fixture_hparams), str(back_dir))
  original = read_all(official_debug_fixture / "model.ckpt")
  back = read_all(back_dir / "model.ckpt")
  assert sorted(back) == sorted(original) and len(back) == 82
  for name, value in original.items():
    assert back[name].dtype == value.dtype and back[name].shape == value.shape, name
    np.testing.assert_array_equal(back[name], value, err_msg=name)
  assert tf.train.latest_checkpoint(str(back_dir)) == str(back_dir / "model.ckpt")


def test_converted_checkpoint_records_its_architecture_and_vocab(
    official_debug_fixture, fixture_hparams, converted, bert_vocab, tmp_path):
  """What the conversion was told travels with the checkpoint: a config given
  the converted directory alone is the fixture's model, the vocab lies beside
  it when one was given, and a vocab of another size is refused with nothing
  written."""
  config = PretrainingConfig.create(fixture_hparams)
  assert (PretrainingConfig.create({}, checkpoint=str(converted)).architecture()
          == config.architecture())
  assert config_lib.recorded_vocab(str(converted)) is None
  official = str(official_debug_fixture / "model.ckpt")
  with_vocab = tmp_path / "with_vocab"
  checkpoint_conversion.official_to_project(official, config, str(with_vocab), str(bert_vocab))
  assert config_lib.recorded_vocab(str(with_vocab)) == str(with_vocab / "vocab.txt")
  assert (with_vocab / "vocab.txt").read_bytes() == bert_vocab.read_bytes()
  short = tmp_path / "short_vocab.txt"
  short.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
  with pytest.raises(errors.DataError, match="vocab_size: 30522 differs from the 5 entries"):
    checkpoint_conversion.official_to_project(official, config, str(tmp_path / "refused"),
                                              str(short))
  assert not (tmp_path / "refused").exists()


def test_project_checkpoint_loads_through_tf_train_checkpoint(
    official_debug_fixture, fixture_hparams, converted):
  model = build_model(PretrainingConfig.create(fixture_hparams))
  status = tf.train.Checkpoint(model=model).read(str(converted / "model.ckpt"))
  status.assert_existing_objects_matched()
  original = read_all(official_debug_fixture / "model.ckpt")
  for variable in model.variables:
    np.testing.assert_array_equal(variable.numpy(),
                                  original[checkpoints.official_name(variable)])


@pytest.mark.parametrize("source", ["project", "official"])
def test_discriminator_encoder_alone_loads_either_format(
    official_debug_fixture, fixture_hparams, converted, source):
  config = PretrainingConfig.create(fixture_hparams)
  encoder = build_discriminator_encoder(config.encoder_config(),
                                        config.effective_embedding_size)
  path = converted if source == "project" else official_debug_fixture / "model.ckpt"
  unused = checkpoints.restore_from_checkpoint(encoder, str(path))
  assert {name.split("/")[0] for name in unused} == {
      "generator", "generator_predictions", "discriminator_predictions"}
  original = read_all(official_debug_fixture / "model.ckpt")
  assert len(encoder.variables) == 39  # 5 embeddings, 2 projection, 2 x 16
  for variable in encoder.variables:
    np.testing.assert_array_equal(variable.numpy(),
                                  original[checkpoints.official_name(variable)])


@pytest.mark.slow
def test_training_checkpoint_with_optimizer_state_restores(tmp_path):
  config = PretrainingConfig.create(TINY)
  model = build_model(config)
  optimizer = keras.optimizers.Adam(0.01)
  ids = np.arange(1, 9, dtype=np.int32).reshape(1, 8)
  batch = {"input_ids": ids, "input_mask": np.ones_like(ids),
           "segment_ids": np.zeros_like(ids),
           "masked_lm_positions": np.array([[2]], np.int32),
           "masked_lm_ids": np.array([[5]], np.int32),
           "masked_lm_weights": np.ones([1, 1], np.float32)}
  with tf.GradientTape() as tape:
    loss = model(batch, training=True)["total_loss"]
  optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))
  prefix = tf.train.Checkpoint(model=model, optimizer=optimizer).save(
      str(tmp_path / "ckpt"))
  fresh = build_model(config)
  assert checkpoints.restore_from_checkpoint(fresh, str(tmp_path)) == []
  for a, b in zip(model.variables, fresh.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  assert prefix == tf.train.latest_checkpoint(str(tmp_path))


def test_other_architecture_fails_naming_variable_and_shapes(converted, fixture_hparams):
  hparams = dict(fixture_hparams, model_hparam_overrides={
      "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4})
  model = build_model(PretrainingConfig.create(hparams))
  with pytest.raises(errors.CheckpointError) as error:
    checkpoints.restore_from_checkpoint(model, str(converted))
  message = str(error.value)
  assert "\n" not in message
  assert "variable electra/embeddings_project/kernel has shape [16, 64] there but " \
         "the model expects [16, 256]" in message


def test_missing_and_unmapped_variables_are_errors(tmp_path):
  two_layers = build_model(PretrainingConfig.create(TINY))
  prefix = checkpoints.save_official_checkpoint(two_layers, str(tmp_path / "two"))
  deeper = dict(TINY, model_hparam_overrides=dict(
      TINY["model_hparam_overrides"], num_hidden_layers=3))
  with pytest.raises(errors.CheckpointError,
                     match=r"lacks model variable electra/encoder/layer_2/\S+ "
                           r"\(and 31 more\)"):
    checkpoints.restore_from_checkpoint(
        build_model(PretrainingConfig.create(deeper)), prefix)
  shallower = dict(TINY, model_hparam_overrides=dict(
      TINY["model_hparam_overrides"], num_hidden_layers=1))
  with pytest.raises(errors.CheckpointError,
                     match=r"variable electra/encoder/layer_1/\S+ \(and 31 more\) "
                           "has no counterpart in the model"):
    checkpoints.restore_from_checkpoint(
        build_model(PretrainingConfig.create(shallower)), prefix)
  with pytest.raises(errors.CheckpointError, match="not found"):
    checkpoints.restore_from_checkpoint(two_layers, str(tmp_path / "absent"))
  with pytest.raises(errors.CheckpointError, match="holds no checkpoint"):
    checkpoints.restore_from_checkpoint(two_layers, str(tmp_path))


def test_official_optimizer_state_is_ignored(tmp_path):
  model = build_model(PretrainingConfig.create(TINY))
  kernel = model.discriminator_predictions.dense.kernel
  extra = [tf.Variable(0, dtype=tf.int64, name="global_step"),
           tf.Variable(tf.zeros_like(kernel), name="discriminator_predictions/dense/kernel/adam_m")]
  prefix = checkpoints.save_official_checkpoint(model.variables + extra,
                                                str(tmp_path / "with_adam"))
  assert checkpoints.restore_from_checkpoint(model, prefix) == []


def test_conversion_errors_name_the_problem_and_leave_nothing(
    official_debug_fixture, fixture_hparams, converted, tmp_path):
  output = tmp_path / "out"
  official = str(official_debug_fixture / "model.ckpt")
  config = PretrainingConfig.create(fixture_hparams)

  def fails(checkpoint, hparams=fixture_hparams, output_dir=output):
    with pytest.raises(ValueError) as error:
      checkpoint_conversion.official_to_project(checkpoint, PretrainingConfig.create(hparams),
                                             str(output_dir))
    assert "\n" not in str(error.value)
    return str(error.value)

  assert "not found" in fails(str(tmp_path / "nope"))
  assert "already a project checkpoint" in fails(str(converted))
  assert "already exists and is not empty" in fails(official, output_dir=converted)
  err = fails(official, dict(fixture_hparams, embedding_size=32))
  assert "electra/embeddings" in err and "[30522, 16]" in err and "[30522, 32]" in err
  assert "generator/embeddings_project/bias (and 38 more) is not part of the model" in fails(
      official, dict(fixture_hparams, uniform_generator=True))
  assert config.encoder_config() is not None
  assert not output.exists() and os.listdir(tmp_path) == []


@pytest.mark.slow
def test_convert_cli(official_debug_fixture, fixture_hparams, tmp_path):
  """The command: one line and exit 2 on bad input, nothing written."""
  def convert_cli(*argv):  # python -m electra_tf.convert ARGV, in this process
    return run_command("electra_tf.commands.convert", argv, "electra_tf.convert")

  output = tmp_path / "out"
  official = f"--official_checkpoint={official_debug_fixture / 'model.ckpt'}"
  for argv, message in [
      ((official,), "--output_dir is required"),
      ((official, f"--output_dir={output}", '--hparams={"hiden_size": 3}'),
       "Unknown hparam 'hiden_size' (did you mean hidden_size in model_hparam_overrides or "
       "model_size or generator_hidden_size?)"),
      ((official, f"--output_dir={output}", "stray"), "unexpected argument(s): stray (every option is a --flag)")]:
    run = convert_cli(*argv)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == f"electra_tf.convert: error: {message}"
  assert not output.exists()
  run = convert_cli(official, f"--hparams={json.dumps(fixture_hparams)}",
                    f"--output_dir={output}")
  assert run.returncode == 0, run.stderr[-2000:]
  assert run.stdout.strip() == f"wrote {output / 'model.ckpt'}"
  assert checkpoints.is_project_checkpoint(str(output / "model.ckpt"))


# ------------------------------------------------------ damaged checkpoints
def _saved_steps(directory, steps):
  """Training checkpoints ckpt-<step> of two variables, as the jobs save them."""
  step = tf.Variable(0, dtype=tf.int64)
  weights = tf.Variable(tf.range(4096, dtype=tf.float32))
  manager = checkpoints.training_checkpoint_manager(
      tf.train.Checkpoint(weights=weights, step=step), str(directory), 5, step)
  for value in steps:
    step.assign(value)
    weights.assign_add(tf.ones_like(weights))
    checkpoints.save_checkpoint(manager, value)
  return directory


def _damage(prefix, how):
  data = pathlib.Path(f"{prefix}.data-00000-of-00001")
  content = bytearray(data.read_bytes())
  if how == "truncated":
    data.write_bytes(bytes(content[:len(content) // 2]))
  else:  # a flipped bit in the weights' bytes
    content[len(content) // 2] ^= 0x10
    data.write_bytes(bytes(content))


@pytest.mark.parametrize("how", ["truncated", "bit_flipped"])
def test_a_damaged_newest_checkpoint_is_named_with_the_newest_intact_one(tmp_path, how):
  directory = _saved_steps(tmp_path / "run", [10, 20, 30])
  assert checkpoints.damage(str(directory / "ckpt-30")) is None
  _damage(directory / "ckpt-30", how)
  why = checkpoints.damage(str(directory / "ckpt-30"))
  assert why and "\n" not in why
  assert checkpoints.newest_intact(str(directory)) == (
      str(directory / "ckpt-20"), [(str(directory / "ckpt-30"), why)])
  for path in (directory, directory / "ckpt-30"):  # read-only users: one line, no choice made
    with pytest.raises(errors.CheckpointError) as raised:
      checkpoints.resolve_checkpoint(str(path))
    assert str(raised.value) == (
        f"checkpoint {directory / 'ckpt-30'} is damaged ({why}); the newest intact one is "
        f"{directory / 'ckpt-20'} (name it where a checkpoint is asked for; a training rerun "
        "resumes from it and sets the damaged one aside)")
  assert checkpoints.resolve_checkpoint(str(directory / "ckpt-20")) == str(directory / "ckpt-20")
  # Training: the damaged files are kept aside and the state names ckpt-20.
  assert checkpoints.set_aside_damaged(str(directory))[0] == str(directory / "ckpt-20")
  assert tf.train.latest_checkpoint(str(directory)) == str(directory / "ckpt-20")
  assert sorted(p.name for p in directory.glob("ckpt-30*")) == [
      "ckpt-30.data-00000-of-00001.damaged", "ckpt-30.index.damaged"]
  state = tf.train.get_checkpoint_state(str(directory))
  assert list(state.all_model_checkpoint_paths) == [str(directory / "ckpt-10"),
                                                    str(directory / "ckpt-20")]
  assert checkpoints.remove_interrupted_writes(str(directory)) == []  # kept, not debris
  assert checkpoints.set_aside_damaged(str(directory)) == (str(directory / "ckpt-20"), [])


def test_every_checkpoint_damaged_is_one_line(tmp_path):
  directory = _saved_steps(tmp_path / "run", [1, 2])
  for step in (1, 2):
    _damage(directory / f"ckpt-{step}", "truncated")
  with pytest.raises(errors.CheckpointError, match=r"ckpt-2 is damaged .*and so is every "
                     "older one"):
    checkpoints.set_aside_damaged(str(directory))
  assert sorted(p.name for p in directory.iterdir())[0] == "checkpoint"  # nothing renamed
  assert not list(directory.glob("*.damaged"))
