"""Every custom layer rebuilds from its get_config: a JSON round trip of the
config gives a layer with the same config and variable names, and with the
original's weights copied in, bit-identical outputs."""

import json

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import ModelConfig
from electra_tf.finetune.classification import classification_tasks as classification
from electra_tf.finetune.qa import qa_tasks as qa
from electra_tf.finetune.tagging import tagging_tasks as tagging
from electra_tf.finetune.config import FinetuningConfig
from electra_tf.modeling import dropout
from electra_tf.modeling import encoder as encoder_lib
from electra_tf.modeling import pretrainer

B, S, H, E, V = 2, 6, 16, 8, 50


def model_config(**overrides):
  values = dict(vocab_size=V, hidden_size=H, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=32, max_position_embeddings=S + 2)
  values.update(overrides)
  return ModelConfig(**values)


def randomize(layer, seed=0):
  """Random values in every variable, so that copying them is what matters
  (a LayerNorm's initial gamma / beta would match by construction)."""
  rng = np.random.RandomState(seed)
  for variable in layer.weights:
    variable.assign(0.5 * rng.randn(*variable.shape).astype(np.float32))


def ids(seed, high):
  return tf.constant(np.random.RandomState(seed).randint(0, high, (B, S)), tf.int32)


def floats(seed, *shape):
  return tf.constant(np.random.RandomState(seed).randn(*shape).astype(np.float32))


def rebuilt(layer, run):
  """(the layer rebuilt from its JSON-round-tripped config and run once,
  its outputs before the weights are copied, after)."""
  config = layer.get_config()
  text = json.dumps(config)
  clone = type(layer).from_config(json.loads(text))
  assert json.dumps(clone.get_config()) == text
  before = run(clone)
  clone.set_weights(layer.get_weights())
  return clone, before, run(clone)


def assert_rebuilds(layer, run, weights_matter=True):
  """`layer` (built) rebuilds with its variable names and outputs."""
  randomize(layer)
  expected = run(layer)
  clone, before, outputs = rebuilt(layer, run)
  assert [v.name for v in clone.weights] == [v.name for v in layer.weights]
  for want, got in zip(tf.nest.flatten(expected), tf.nest.flatten(outputs)):
    np.testing.assert_array_equal(got, want)
  if weights_matter:  # the copy, not the construction, made them equal
    assert any(not np.array_equal(got, want) for want, got in
               zip(tf.nest.flatten(expected), tf.nest.flatten(before))
               if np.asarray(want).dtype.kind == "f")
  return clone


def test_dropout_rebuilds_with_its_rate_and_masks():
  layer = dropout.Dropout(0.3, name="drop")
  inputs = floats(0, B, S, H)
  seed = tf.constant([7, 3], tf.int64)

  def run(layer):
    with dropout.seeded(seed):
      return layer(inputs, training=True), layer(inputs, training=False)

  clone = assert_rebuilds(layer, run, weights_matter=False)
  assert clone.rate == 0.3 and clone.name == "drop"
  dropped, kept = run(clone)
  np.testing.assert_array_equal(kept, inputs)
  assert 0 < np.mean(dropped.numpy() == 0) < 1


def test_layer_norm_rebuilds():
  layer = encoder_lib.LayerNorm()
  inputs = floats(1, B, S, H)
  layer(inputs)
  clone = assert_rebuilds(layer, lambda layer: layer(inputs))
  assert clone.epsilon == 1e-12
  assert [v.name for v in clone.weights] == ["LayerNorm/gamma:0", "LayerNorm/beta:0"]


def test_embedding_layer_rebuilds():
  layer = encoder_lib.EmbeddingLayer(V, E, 2, S + 2, 0.02)
  input_ids, segment_ids = ids(2, V), ids(3, 2)
  layer(input_ids, segment_ids)
  assert_rebuilds(layer, lambda layer: layer(input_ids, segment_ids))
  assert layer.get_config()["embedding_size"] == E


def test_transformer_layer_rebuilds():
  layer = encoder_lib.TransformerLayer(model_config(), name="layer_0")
  hidden = floats(4, B, S, H)
  adder = tf.constant(np.where(np.arange(S) < S - 2, 0.0, -10000.0)[None, None, None, :],
                      tf.float32)
  run = lambda layer: layer(hidden, adder, training=False)
  run(layer)
  clone = assert_rebuilds(layer, run)
  assert clone.get_config()["config"] == model_config().to_dict()
  assert "layer_0/attention/self/query/kernel:0" in [v.name for v in clone.weights]


@pytest.mark.parametrize("kwargs", [{}, {"embedding_size": E}, {"ltr": True},
                                    {"rtl": True, "name": "generator_rtl"}])
def test_transformer_encoder_rebuilds(kwargs):
  layer = encoder_lib.TransformerEncoder(model_config(), **kwargs)
  input_ids, segment_ids = ids(5, V), ids(6, 2)
  input_mask = tf.constant(np.arange(S)[None, :] < np.array([[S], [S - 2]]), tf.int32)
  run = lambda layer: layer(input_ids, input_mask, segment_ids, training=False)
  clone = assert_rebuilds(layer, run)
  assert (clone.embeddings_project is None) == ("embedding_size" not in kwargs)
  assert [v.name for v in clone.weights][0] == (
      f"{kwargs.get('name', 'electra')}/embeddings/word_embeddings:0")


def test_encoder_with_shared_embeddings_rebuilds_owning_its_own():
  discriminator = encoder_lib.TransformerEncoder(model_config())
  generator = encoder_lib.TransformerEncoder(model_config(num_hidden_layers=1),
                                             embeddings=discriminator.embeddings,
                                             name="generator")
  config = generator.get_config()
  assert config["embedding_size"] == H
  clone = encoder_lib.TransformerEncoder.from_config(json.loads(json.dumps(config)))
  assert clone.embeddings is not discriminator.embeddings
  assert [v.name.replace("generator/embeddings/", "electra/embeddings/")
          for v in clone.weights] == [v.name for v in generator.weights]


def test_masked_lm_head_rebuilds_with_its_own_embeddings():
  embeddings = encoder_lib.EmbeddingLayer(V, E, 2, S + 2, 0.02)
  embeddings(ids(7, V), ids(8, 2))
  layer = pretrainer.MaskedLMHead(embeddings, "gelu", 0.02)
  sequence = floats(9, B, S, H)
  positions = tf.constant([[1, 3], [0, 5]], tf.int32)
  run = lambda layer: (layer(sequence, positions), layer(sequence))
  run(layer)
  clone = assert_rebuilds(layer, run)
  assert clone.embeddings is not embeddings
  assert "embeddings/word_embeddings:0" in [v.name for v in clone.weights]


def test_discriminator_head_rebuilds():
  layer = pretrainer.DiscriminatorHead(H, "gelu", 0.02)
  sequence = floats(10, B, S, H)
  layer(sequence)
  assert_rebuilds(layer, lambda layer: layer(sequence))


def encoder_outputs():
  sequence = floats(11, B, S, H)
  return {"sequence_output": sequence, "pooled_output": sequence[:, 0]}


def qa_features():
  return {"input_mask": tf.ones([B, S], tf.int32),
          "segment_ids": tf.constant([[0, 0, 1, 1, 1, 1]] * B, tf.int32),
          "squad_start_positions": tf.constant([2, 0], tf.int32),
          "squad_end_positions": tf.constant([4, 0], tf.int32),
          "squad_is_impossible": tf.constant([0, 1], tf.int32)}


HEADS = {
    "classification": (lambda: classification.ClassificationHead("rte", 3),
                       {"rte_label_ids": tf.constant([0, 2])}),
    "regression": (lambda: classification.RegressionHead("sts"),
                   {"sts_targets": tf.constant([0.2, 0.7])}),
    "tagging": (lambda: tagging.TaggingHead("chunk", 5),
                {"chunk_labeled_positions": tf.constant([[1, 2, 4], [1, 3, 0]]),
                 "chunk_labels_mask": tf.constant([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]),
                 "chunk_labels": tf.constant([[0, 4, 2], [1, 3, 0]])}),
}


def qa_config(**hparams):
  return FinetuningConfig.create(dict({"max_seq_length": S, "max_query_length": 2,
                                       "beam_size": 3}, **hparams), task_names=["squad"])


for joint in (False, True):
  HEADS[f"qa_joint_{joint}"] = (
      lambda joint=joint: qa.QAHead.for_config("squad", qa_config(joint_prediction=joint)),
      qa_features())


@pytest.mark.parametrize("head_name", sorted(HEADS))
def test_task_head_rebuilds(head_name):
  make_head, features = HEADS[head_name]
  layer = make_head()
  enc = encoder_outputs()
  run = lambda layer: layer(enc, features, training=False)
  run(layer)
  clone = assert_rebuilds(layer, run)
  assert clone.name == layer.name and clone.name.startswith("task_specific/")
  assert all(v.name.startswith(layer.name + "/") for v in clone.weights)


def test_qa_head_config_holds_its_finetuning_options():
  config = qa_config(answerable_uses_start_logits=False)
  head_config = qa.QAHead.for_config("squad", config).get_config()
  assert {option: head_config[option] for option in qa.QAHead.OPTIONS} == {
      option: getattr(config, option) for option in qa.QAHead.OPTIONS}
  assert head_config["answerable_uses_start_logits"] is False
