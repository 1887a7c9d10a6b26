"""The Transformer encoder against the official TF1 outputs and the paper."""

import json

import numpy as np
import pytest
import scipy.special
import tensorflow as tf

from electra_tf import checkpoints
from electra_tf.config import ConfigError, ModelConfig
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.modeling import encoder as encoder_lib
from electra_tf.pretrain.model import build_model

TOL = dict(atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def official(official_debug_fixture):
  """(restored pre-trainer, fixture arrays, official variables list)."""
  hparams = json.loads((official_debug_fixture / "config.json").read_text())["hparams"]
  model = build_model(PretrainingConfig.create(hparams))
  checkpoints.restore_from_checkpoint(model, str(official_debug_fixture / "model.ckpt"))
  arrays = dict(np.load(official_debug_fixture / "fixture.npz"))
  variables = json.loads((official_debug_fixture / "variables.json").read_text())
  return model, arrays, variables


def tiny_config(**overrides) -> ModelConfig:
  values = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                num_attention_heads=2, intermediate_size=32,
                max_position_embeddings=16)
  values.update(overrides)
  return ModelConfig(**values)


def test_variable_names_and_shapes_are_the_official_ones(official):
  model, _, variables = official
  ours = {checkpoints.official_name(v): v.shape.as_list() for v in model.variables}
  assert ours == {v["name"]: v["shape"] for v in variables}
  assert len(model.variables) == 82


@pytest.mark.parametrize("tower", ["gen", "disc"])
def test_every_intermediate_tensor_matches_official(official, tower):
  model, arrays, _ = official
  encoder = model.generator if tower == "gen" else model.discriminator
  ids = arrays["generator_input_ids" if tower == "gen" else "discriminator_input_ids"]
  outputs = encoder(ids, arrays["input_mask"], arrays["segment_ids"], training=False)
  np.testing.assert_allclose(outputs["embeddings"], arrays[f"{tower}_embeddings_layernorm"], **TOL)
  np.testing.assert_allclose(outputs["embedding_output"], arrays[f"{tower}_embedding_output"], **TOL)
  np.testing.assert_allclose(np.stack(outputs["encoder_outputs"]),
                             arrays[f"{tower}_encoder_layers"], **TOL)
  np.testing.assert_allclose(outputs["sequence_output"], arrays[f"{tower}_sequence_output"], **TOL)
  np.testing.assert_allclose(outputs["pooled_output"],
                             arrays[f"{tower}_sequence_output"][:, 0], **TOL)
  if tower == "disc":
    np.testing.assert_allclose(np.stack(outputs["attention_probs"]),
                               arrays["disc_attention_probs"], **TOL)


def test_gelu_is_the_exact_erf_form():
  x = np.linspace(-6, 6, 101).astype(np.float32)
  exact = x * 0.5 * (1 + scipy.special.erf(x / np.sqrt(2)))
  np.testing.assert_allclose(encoder_lib.gelu(tf.constant(x)), exact, atol=1e-6)
  tanh_form = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
  assert np.abs(exact - tanh_form).max() > 1e-4
  with pytest.raises(ConfigError, match="hidden_act 'swish'"):
    encoder_lib.get_activation("swish")


def test_padding_is_invisible_to_real_tokens():
  encoder = encoder_lib.TransformerEncoder(tiny_config(), embedding_size=8)
  rng = np.random.RandomState(0)
  ids = rng.randint(1, 50, size=(2, 10)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[:, 6:] = 0
  other_ids = ids.copy()
  other_ids[:, 6:] = rng.randint(1, 50, size=(2, 4))
  segments = np.zeros_like(ids)
  first = encoder(ids, mask, segments, training=False)
  second = encoder(other_ids, mask, segments, training=False)
  np.testing.assert_allclose(first["sequence_output"][:, :6],
                             second["sequence_output"][:, :6], atol=1e-6)
  assert np.abs(first["sequence_output"][:, 6:] - second["sequence_output"][:, 6:]).max() > 1e-3
  probs = np.stack(first["attention_probs"])  # [layer, B, heads, S, S]
  assert probs[..., 6:].max() < 1e-4
  np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)


def test_dropout_only_when_training():
  encoder = encoder_lib.TransformerEncoder(tiny_config())
  ids = np.arange(1, 11, dtype=np.int32).reshape(1, 10)
  args = (ids, np.ones_like(ids), np.zeros_like(ids))
  evals = [encoder(*args, training=False)["sequence_output"] for _ in range(2)]
  trains = [encoder(*args, training=True)["sequence_output"] for _ in range(2)]
  np.testing.assert_array_equal(evals[0], evals[1])
  assert np.abs(trains[0] - trains[1]).max() > 1e-3
  # No embeddings_project when the embedding width is the hidden size.
  assert encoder.embeddings_project is None


def test_heads_must_divide_hidden_size():
  with pytest.raises(ConfigError, match="hidden_size 16 is not a multiple of "
                     "num_attention_heads 3"):
    encoder_lib.TransformerEncoder(tiny_config(num_attention_heads=3))


@pytest.mark.slow
@pytest.mark.parametrize("size,paper_millions", [("small", 14), ("base", 110),
                                                 ("large", 335)])
def test_discriminator_parameter_count_matches_paper(size, paper_millions):
  config = PretrainingConfig.create({"model_size": size})
  with tf.Graph().as_default():  # shapes only: no weights are initialised
    encoder = encoder_lib.build_discriminator_encoder(
        config.encoder_config(), config.effective_embedding_size)
    count = sum(int(np.prod(v.shape)) for v in encoder.variables)
  assert abs(count / 1e6 - paper_millions) / paper_millions < 0.05, count
