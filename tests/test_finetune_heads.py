"""Task heads on random encoder outputs: shapes, variable names, values and
losses against NumPy re-computations of the official formulas."""

import numpy as np
import pytest
import scipy.special
import tensorflow as tf

from electra_tf.finetune.classification import classification_tasks as classification
from electra_tf.finetune.qa import qa_tasks as qa
from electra_tf.finetune.tagging import tagging_tasks as tagging
from electra_tf.finetune.config import FinetuningConfig

B, S, H = 3, 10, 8


def encoder_outputs(seed=0):
  rng = np.random.RandomState(seed)
  # scaled so that the gelu layers work in their non-linear range
  return {"sequence_output": tf.constant(3 * rng.randn(B, S, H).astype(np.float32)),
          "pooled_output": tf.constant(rng.randn(B, H).astype(np.float32))}


def weights(head):
  return {w.name: w.numpy() for w in head.weights}


def log_softmax(x):
  return x - scipy.special.logsumexp(x, axis=-1, keepdims=True)


def gelu(x):
  return 0.5 * x * (1.0 + scipy.special.erf(x / np.sqrt(2.0)))


def test_classification_head_matches_numpy():
  head = classification.ClassificationHead("rte", 3)
  enc = encoder_outputs()
  labels = np.array([0, 2, 1], np.int32)
  out = head(enc, {"rte_label_ids": tf.constant(labels)}, training=False)
  w = weights(head)
  assert sorted(w) == ["task_specific/rte/dense/bias:0", "task_specific/rte/dense/kernel:0"]
  kernel = w["task_specific/rte/dense/kernel:0"]
  assert kernel.shape == (H, 3)
  # Glorot-uniform (the TF1 default of tf.layers.dense): |w| <= sqrt(6 / (H + 3))
  assert np.abs(kernel).max() <= np.sqrt(6.0 / (H + 3)) and kernel.std() > 0
  logits = enc["pooled_output"].numpy() @ kernel + w["task_specific/rte/dense/bias:0"]
  np.testing.assert_allclose(out["logits"], logits, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out["loss"], -log_softmax(logits)[np.arange(B), labels],
                             rtol=1e-5)
  np.testing.assert_array_equal(out["predictions"], logits.argmax(-1))
  # dropout 0.1 only in training
  trained = head(enc, {"rte_label_ids": tf.constant(labels)}, training=True)
  assert not np.allclose(trained["logits"], logits)


def test_regression_head_squared_error():
  head = classification.RegressionHead("sts")
  enc = encoder_outputs(1)
  targets = np.array([0.1, 0.5, 0.9], np.float32)
  out = head(enc, {"sts_targets": tf.constant(targets)})
  w = weights(head)
  predictions = (enc["pooled_output"].numpy() @ w["task_specific/sts/dense/kernel:0"] +
                 w["task_specific/sts/dense/bias:0"])[:, 0]
  np.testing.assert_allclose(out["predictions"], predictions, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out["loss"], (predictions - targets) ** 2, rtol=1e-5, atol=1e-6)


def test_tagging_head_gathers_first_pieces_and_masks_loss():
  head = tagging.TaggingHead("chunk", 5)
  enc = encoder_outputs(2)
  rng = np.random.RandomState(3)
  positions = np.zeros((B, S), np.int32)
  mask = np.zeros((B, S), np.float32)
  for b, n in enumerate([4, 2, 6]):
    positions[b, :n] = np.sort(rng.choice(np.arange(1, S), n, replace=False))
    mask[b, :n] = 1.0
  labels = rng.randint(0, 5, (B, S)).astype(np.int32)
  out = head(enc, {"chunk_labeled_positions": tf.constant(positions),
                   "chunk_labels_mask": tf.constant(mask),
                   "chunk_labels": tf.constant(labels)})
  w = weights(head)
  sequence = enc["sequence_output"].numpy()
  gathered = sequence[np.arange(B)[:, None], positions]
  logits = (gathered @ w["task_specific/chunk/dense/kernel:0"] +
            w["task_specific/chunk/dense/bias:0"])
  assert out["logits"].shape == (B, S, 5)
  np.testing.assert_allclose(out["logits"], logits, rtol=1e-5, atol=1e-5)
  per_word = -np.take_along_axis(log_softmax(logits), labels[..., None], -1)[..., 0]
  np.testing.assert_allclose(out["loss"], (per_word * mask).sum(-1), rtol=1e-5)


def qa_config(**hparams):
  return FinetuningConfig.create(dict({"max_seq_length": S, "max_query_length": 2,
                                       "beam_size": 4}, **hparams),
                                 task_names=["squad"])


def qa_features():
  input_mask = np.ones((B, S), np.int32)
  input_mask[1, 8:] = 0
  segment_ids = np.zeros((B, S), np.int32)
  segment_ids[:, 4:] = 1
  segment_ids[1, 8:] = 0
  return {"input_mask": tf.constant(input_mask), "segment_ids": tf.constant(segment_ids),
          "squad_start_positions": tf.constant([5, 0, 6], tf.int32),
          "squad_end_positions": tf.constant([7, 0, 6], tf.int32),
          "squad_is_impossible": tf.constant([0, 1, 0], tf.int32)}


def qa_numpy(w, sequence, features, joint, training, beam):
  """The official get_prediction_module in NumPy (tiled concatenation)."""
  name = lambda n: w[f"task_specific/squad/{n}:0"]
  dense = lambda x, layer: x @ name(f"{layer}/kernel") + name(f"{layer}/bias")
  answer_mask = (features["input_mask"].numpy() *
                 features["segment_ids"].numpy()).astype(np.float32)
  answer_mask[:, 0] += 1.0
  penalty = 1000.0 * (answer_mask - 1.0)
  start_logits = dense(sequence, "dense")[..., 0] + penalty
  result = {"start_logits": start_logits}
  if not joint:
    result["end_logits"] = dense(sequence, "dense_1")[..., 0] + penalty
    return result
  def end_logits_for(start):  # start [B] -> [B, S]
    start_vectors = np.repeat(sequence[np.arange(B), start][:, None], S, axis=1)
    hidden = gelu(dense(np.concatenate([start_vectors, sequence], -1), "qa_hidden"))
    return dense(hidden, "dense_1")[..., 0] + penalty
  if training:
    result["end_logits"] = end_logits_for(features["squad_start_positions"].numpy())
    return result
  start_log_probs = log_softmax(start_logits)
  top_index = np.argsort(-start_log_probs, axis=-1, kind="stable")[:, :beam]
  result["start_top_index"] = top_index
  result["start_top_log_probs"] = np.take_along_axis(start_log_probs, top_index, -1)
  end_log_probs = np.stack([log_softmax(end_logits_for(top_index[:, k]))
                            for k in range(beam)], 1)  # [B, K, S]
  end_top = np.argsort(-end_log_probs, axis=-1, kind="stable")[..., :beam]
  result["end_top_index"] = end_top
  result["end_top_log_probs"] = np.take_along_axis(end_log_probs, end_top, -1)
  return result


@pytest.mark.parametrize("joint,training", [(False, False), (False, True),
                                            (True, True), (True, False)])
def test_qa_head_matches_official_formulas(joint, training):
  config = qa_config(joint_prediction=joint)
  head = qa.QAHead.for_config("squad", config)
  enc = encoder_outputs(4)
  features = qa_features()
  out = head(enc, features, training=training)
  w = weights(head)
  expected_layers = (["dense", "qa_hidden", "dense_1", "dense_2", "dense_3"] if joint
                     else ["dense", "dense_1", "dense_2", "dense_3"])
  assert [v.name for v in head.weights] == [
      f"task_specific/squad/{layer}/{part}:0" for layer in expected_layers
      for part in ("kernel", "bias")]
  if joint:
    assert w["task_specific/squad/qa_hidden/kernel:0"].shape == (2 * H, 512)
  sequence = enc["sequence_output"].numpy()
  expected = qa_numpy(w, sequence, features, joint, training, config.beam_size)
  np.testing.assert_allclose(out["start_logits"], expected["start_logits"], rtol=1e-5, atol=2e-5)
  if joint and not training:
    np.testing.assert_array_equal(out["start_top_index"], expected["start_top_index"])
    np.testing.assert_allclose(out["start_top_log_probs"], expected["start_top_log_probs"],
                               rtol=1e-5, atol=2e-5)
    np.testing.assert_array_equal(out["end_top_index"], expected["end_top_index"])
    np.testing.assert_allclose(out["end_top_log_probs"], expected["end_top_log_probs"],
                               rtol=1e-5, atol=2e-5)
    np.testing.assert_array_equal(out["end_logits"], np.zeros((B, S)))
    end_logits = np.zeros((B, S))
  else:
    np.testing.assert_allclose(out["end_logits"], expected["end_logits"], rtol=1e-5, atol=2e-5)
    end_logits = expected["end_logits"]
  # positions outside the window (question, padding) are pushed to -1000
  assert (out["start_logits"].numpy()[1, 1:4] < -900).all()
  assert (out["start_logits"].numpy()[1, 8:] < -900).all()

  # loss: mean of the span cross-entropies + 0.5 * answerable sigmoid CE
  starts = features["squad_start_positions"].numpy()
  ends = features["squad_end_positions"].numpy()
  span_loss = -(log_softmax(expected["start_logits"])[np.arange(B), starts] +
                log_softmax(end_logits)[np.arange(B), ends]) / 2.0
  start_probs = np.exp(log_softmax(expected["start_logits"]))
  representation = np.concatenate(
      [sequence[:, 0], np.einsum("bs,bsh->bh", start_probs, sequence)], -1)
  hidden = gelu(representation @ w["task_specific/squad/dense_2/kernel:0"] +
                w["task_specific/squad/dense_2/bias:0"])
  answerable = (hidden @ w["task_specific/squad/dense_3/kernel:0"] +
                w["task_specific/squad/dense_3/bias:0"])[:, 0]
  np.testing.assert_allclose(out["answerable_logit"], answerable, rtol=1e-5, atol=2e-5)
  impossible = features["squad_is_impossible"].numpy()
  sigmoid_ce = (np.maximum(answerable, 0) - answerable * impossible +
                np.log1p(np.exp(-np.abs(answerable))))
  np.testing.assert_allclose(out["loss"], span_loss + 0.5 * sigmoid_ce, rtol=1e-5, atol=2e-5)


def test_qa_head_without_answerable_classifier():
  head = qa.QAHead.for_config("squad", qa_config(answerable_classifier=False, joint_prediction=False))
  out = head(encoder_outputs(5), qa_features(), training=True)
  assert [v.name for v in head.weights] == [
      "task_specific/squad/dense/kernel:0", "task_specific/squad/dense/bias:0",
      "task_specific/squad/dense_1/kernel:0", "task_specific/squad/dense_1/bias:0"]
  np.testing.assert_array_equal(out["answerable_logit"], np.zeros(B))
  head = qa.QAHead.for_config("squad", qa_config(answerable_uses_start_logits=False))
  head(encoder_outputs(5), qa_features(), training=True)
  assert head.weights[-2].name == "task_specific/squad/dense_2/kernel:0"
  assert head.weights[-2].shape == (H, 1)
