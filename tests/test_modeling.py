"""The Transformer encoder against the official TF1 outputs and the paper."""

import json

import numpy as np
import pytest
import scipy.special
import tensorflow as tf

from electra_tf import checkpoints
from electra_tf.config import ModelConfig
from electra_tf.errors import ConfigError
from electra_tf.modeling import encoder as encoder_lib
from electra_tf.pretrain.config import PretrainingConfig
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


def test_gelu_gradient_is_phi_plus_x_times_density():
  x = tf.constant(np.linspace(-8, 8, 201).astype(np.float32))
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = encoder_lib.gelu(x)
  grad = tape.gradient(y, x, output_gradients=tf.fill(x.shape, 2.0)).numpy()
  x64 = x.numpy().astype(np.float64)
  exact = 2.0 * (0.5 * (1 + scipy.special.erf(x64 / np.sqrt(2)))
                 + x64 * np.exp(-x64 ** 2 / 2) / np.sqrt(2 * np.pi))
  np.testing.assert_allclose(grad, exact, atol=2e-6)
  assert grad[0] == pytest.approx(0.0, abs=1e-6) and grad[-1] == pytest.approx(2.0)


def _keras_layer_norm_and_ours(shape, seed=0, dtype=None):
  """Keras' LayerNormalization and ours with the same random gamma, beta."""
  import tf_keras as keras  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(seed)
  theirs = keras.layers.LayerNormalization(epsilon=encoder_lib.LAYER_NORM_EPSILON,
                                           dtype=dtype)
  ours = encoder_lib.LayerNorm(dtype=dtype)
  for layer in (theirs, ours):
    layer.build(shape)
  for name in ("gamma", "beta"):
    value = rng.normal(1.0 if name == "gamma" else 0.0, 0.3, shape[-1:]).astype(np.float32)
    getattr(theirs, name).assign(value)
    getattr(ours, name).assign(value)
  return theirs, ours


def test_layer_norm_matches_keras_forward_exactly_and_its_gradients():
  shape = (3, 7, 24)
  theirs, ours = _keras_layer_norm_and_ours(shape)
  rng = np.random.RandomState(1)
  x = tf.constant(rng.normal(2.0, 5.0, shape).astype(np.float32))
  upstream = tf.constant(rng.normal(size=shape).astype(np.float32))
  results = []
  for layer in (theirs, ours):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = layer(x)
    results.append([y] + tape.gradient(y, [x, layer.gamma, layer.beta],
                                       output_gradients=upstream))
  (y_theirs, *grads_theirs), (y_ours, *grads_ours) = results
  np.testing.assert_array_equal(y_ours, y_theirs)  # the same ops, bit for bit
  for name, g_ours, g_theirs in zip(("x", "gamma", "beta"), grads_ours, grads_theirs):
    np.testing.assert_allclose(g_ours, g_theirs, rtol=1e-5, atol=1e-5, err_msg=name)
  # The closed form's defining properties: the gradient for x sums to 0 and
  # is orthogonal to the normalized input along the normalized axis.
  dx = grads_ours[0].numpy()
  normalized = (y_ours.numpy() - ours.beta.numpy()) / ours.gamma.numpy()
  np.testing.assert_allclose(dx.sum(-1), 0.0, atol=1e-4)
  np.testing.assert_allclose((dx * normalized).sum(-1), 0.0, atol=1e-3)
  assert ours.get_config()["epsilon"] == 1e-12 and ours.name == "LayerNorm"


def test_layer_norm_keeps_float16_outputs_with_float32_statistics():
  theirs, ours = _keras_layer_norm_and_ours((4, 8), dtype="mixed_float16")
  x = tf.constant(np.linspace(-300, 300, 32).reshape(4, 8), tf.float16)
  y = ours(x)
  assert y.dtype == tf.float16 and ours.gamma.dtype == tf.float32
  np.testing.assert_array_equal(y, theirs(x))
  x32 = tf.cast(x, tf.float32)
  expected = ((x32 - tf.reduce_mean(x32, -1, keepdims=True))
              / tf.math.reduce_std(x32, -1, keepdims=True)) * ours.gamma + ours.beta
  np.testing.assert_allclose(tf.cast(y, tf.float32), expected, rtol=2e-3, atol=2e-3)
  with pytest.raises(ValueError, match="last axis only"):
    encoder_lib.LayerNorm(axis=1).build((2, 3, 4))


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


def test_seeded_dropout_masks_are_a_function_of_seed_and_call_and_its_gradient():
  from electra_tf.modeling import dropout  # pylint: disable=g-import-not-at-top
  x = tf.constant(np.random.RandomState(0).normal(size=(4, 2, 64, 64)).astype(np.float32))
  seed = tf.constant([5, 11], tf.int64)
  layer = dropout.Dropout(0.1)

  def two_calls():
    with tf.GradientTape() as tape:
      tape.watch(x)
      with dropout.seeded(seed):
        first, second = layer(x, training=True), layer(x, training=True)
    return first, second, tape.gradient(first, x).numpy()

  first, second, grad = two_calls()
  again = two_calls()
  # The same seed gives the same masks; each call in the block its own.
  np.testing.assert_array_equal(first, again[0])
  np.testing.assert_array_equal(second, again[1])
  kept = first.numpy() != 0
  assert 0.09 < 1 - kept.mean() < 0.11 and (kept != (second.numpy() != 0)).any()
  # Each call draws from the seed folded with its call index.
  for call_index, ours in enumerate((first, second)):
    keep = dropout.draw_keep_mask(tf.shape(x), tf.random.experimental.stateless_fold_in(
        seed, call_index), 0.1)
    np.testing.assert_array_equal(ours.numpy() != 0, keep.numpy())
  np.testing.assert_allclose(first.numpy()[kept], x.numpy()[kept] / 0.9, rtol=1e-6)
  np.testing.assert_array_equal(grad, np.where(kept, np.float32(1 / 0.9), 0.0))
  np.testing.assert_array_equal(layer(x, training=False), x)


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_keep_mask_drops_at_the_rate_for_any_shape(rate):
  from electra_tf.modeling import dropout  # pylint: disable=g-import-not-at-top
  # 16-bit draws: the drop probability is round(rate * 2^16) / 2^16, within
  # 2^-17 of the rate (a bfloat16 uniform would give 13/128 = 0.1016 at 0.1).
  units = 1 << 22
  keep = dropout.draw_keep_mask(tf.constant([units]), tf.constant([3, 4], tf.int64), rate)
  dropped = 1.0 - keep.numpy().mean()
  sigma = (rate * (1 - rate) / units) ** 0.5
  assert abs(dropped - round(rate * 65536) / 65536) < 5 * sigma
  # Odd sizes and any rank: the mask has the input's shape; its bits differ
  # between units (no unit pairs up with a neighbour).
  odd = dropout.draw_keep_mask(tf.constant([3, 5, 7]), tf.constant([1, 2], tf.int64), 0.5)
  assert odd.shape == (3, 5, 7) and odd.dtype == tf.bool
  pairs = keep.numpy().reshape(-1, 2)
  assert abs(np.mean(pairs[:, 0] == pairs[:, 1]) - (rate ** 2 + (1 - rate) ** 2)) < 0.01


def test_seeded_dropout_on_bfloat16_drops_at_the_rate():
  from electra_tf.modeling import dropout  # pylint: disable=g-import-not-at-top
  # A bfloat16 uniform has 7 random bits: it would drop 13/128 = 0.1016 of the
  # units at rate 0.1, 11 standard deviations away at this size.
  x = tf.ones([1 << 22], tf.bfloat16)
  with dropout.seeded(tf.constant([7, 8], tf.int64)):
    out = dropout.Dropout(0.1, dtype="mixed_bfloat16")(x, training=True)
  assert out.dtype == tf.bfloat16
  dropped = float(np.mean(out.numpy().astype(np.float32) == 0))
  assert abs(dropped - 6554 / 65536) < 5 * (0.09 / (1 << 22)) ** 0.5
