"""Streaming pre-training metrics against NumPy and tf.compat.v1.metrics."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.pretrain import metrics

B, S, N, VOCAB = 4, 24, 4, 7


def _batch(rng):
  """One eval batch: model outputs and batch features with padding."""
  lengths = rng.integers(3, S + 1, size=B)
  input_mask = (np.arange(S)[None, :] < lengths[:, None]).astype(np.int32)
  masked_lm_ids = rng.integers(0, VOCAB, size=(B, N)).astype(np.int32)
  masked_lm_weights = (rng.random((B, N)) < 0.75).astype(np.float32)
  outputs = {
      "mlm_per_example_loss": rng.gamma(2.0, 1.0, size=(B, N)).astype(np.float32),
      "mlm_preds": np.where(rng.random((B, N)) < 0.5, masked_lm_ids,
                            rng.integers(0, VOCAB, size=(B, N))).astype(np.int32),
  }
  batch = {"masked_lm_ids": masked_lm_ids, "masked_lm_weights": masked_lm_weights,
           "input_mask": input_mask}
  labels = (rng.random((B, S)) < 0.2).astype(np.int32)
  probs = np.clip(0.35 * labels + 0.65 * rng.random((B, S)), 0, 1).astype(np.float32)
  probs[0, :3] = [0.0, 1.0, 0.5]
  outputs.update(
      sampled_ids=np.where(rng.random((B, N)) < 0.4, masked_lm_ids,
                           rng.integers(0, VOCAB, size=(B, N))).astype(np.int32),
      disc_per_example_loss=rng.gamma(1.0, 0.3, size=B).astype(np.float32),
      disc_probs=probs,
      disc_preds=(probs > 0.5).astype(np.int32),
      disc_labels=labels)
  return outputs, batch


def _batches(seed=0, count=3):
  rng = np.random.default_rng(seed)
  return [_batch(rng) for _ in range(count)]


def _concat(batches, part, key):
  """All batches' values of `key` in part 0 (outputs) or 1 (batch), float64."""
  return np.concatenate([b[part][key] for b in batches]).astype(np.float64)


def _mann_whitney_auc(labels, scores):
  """P(score of a positive > score of a negative), ties counted 1/2."""
  pos, neg = scores[labels != 0], scores[labels == 0]
  diff = pos[:, None] - neg[None, :]
  return float(np.mean((diff > 0) + 0.5 * (diff == 0)))


def _streamed(batches, **kwargs):
  stream = metrics.PretrainingMetrics(**kwargs)
  for outputs, batch in batches:
    stream.update(outputs, batch)
  return stream.result()


def test_streaming_matches_numpy_reference():
  batches = _batches()
  result = _streamed(batches)
  out = lambda k: _concat(batches, 0, k)
  inp = lambda k: _concat(batches, 1, k)
  w, mask = inp("masked_lm_weights"), inp("input_mask")
  labels, preds = out("disc_labels"), out("disc_preds")
  expected = {
      "masked_lm_accuracy": np.sum(w * (out("mlm_preds") == inp("masked_lm_ids"))) / w.sum(),
      "masked_lm_loss": np.sum(w * out("mlm_per_example_loss")) / w.sum(),
      "sampled_masked_lm_accuracy":
          np.sum(w * (out("sampled_ids") == inp("masked_lm_ids"))) / w.sum(),
      "disc_loss": out("disc_per_example_loss").mean(),
      "disc_accuracy": np.sum(mask * (labels == preds)) / mask.sum(),
      # Among predicted positives / among actual positives (non-padding).
      "disc_precision": np.sum(mask * preds * labels) / np.sum(mask * preds),
      "disc_recall": np.sum(mask * preds * labels) / np.sum(mask * labels),
      # The baseline: every real token called real.
      "disc_always_real_accuracy": np.sum(mask * (labels == 0)) / mask.sum(),
  }
  assert list(result) == list(metrics.MLM_METRICS + metrics.SAMPLING_METRICS
                              + metrics.DISC_METRICS)
  for name, value in expected.items():
    assert result[name] == pytest.approx(value, rel=1e-9), name
  assert 0.5 < result["disc_auc"] < 1.0


def test_matches_tf_v1_metrics_in_a_graph():
  """All nine metrics against tf.compat.v1.metrics streamed over 3 batches."""
  batches = _batches(seed=1)
  result = _streamed(batches)
  v1 = tf.compat.v1
  with tf.Graph().as_default():
    feeds = {k: v1.placeholder(tf.as_dtype(v.dtype), [None] * v.ndim)
             for part in batches[0] for k, v in part.items()}
    flat = lambda k: tf.reshape(feeds[k], [-1])
    mask = feeds["input_mask"]
    ops = {
        "masked_lm_accuracy": v1.metrics.accuracy(
            flat("masked_lm_ids"), flat("mlm_preds"), flat("masked_lm_weights")),
        "masked_lm_loss": v1.metrics.mean(flat("mlm_per_example_loss"),
                                          flat("masked_lm_weights")),
        "sampled_masked_lm_accuracy": v1.metrics.accuracy(
            flat("masked_lm_ids"), flat("sampled_ids"), flat("masked_lm_weights")),
        "disc_loss": v1.metrics.mean(feeds["disc_per_example_loss"]),
        "disc_auc": v1.metrics.auc(feeds["disc_labels"] * mask,
                                   feeds["disc_probs"] * tf.cast(mask, tf.float32)),
        "disc_accuracy": v1.metrics.accuracy(feeds["disc_labels"], feeds["disc_preds"], mask),
        "disc_precision": v1.metrics.accuracy(feeds["disc_labels"], feeds["disc_preds"],
                                              feeds["disc_preds"] * mask),
        "disc_recall": v1.metrics.accuracy(feeds["disc_labels"], feeds["disc_preds"],
                                           feeds["disc_labels"] * mask),
        # The addition: the same AUC with padding weighted out.
        "disc_auc_real_tokens": v1.metrics.auc(feeds["disc_labels"], feeds["disc_probs"],
                                               weights=mask),
    }
    with v1.Session() as session:
      session.run(v1.local_variables_initializer())
      for outputs, batch in batches:
        session.run({k: op[1] for k, op in ops.items()},
                    {feeds[k]: v for k, v in {**outputs, **batch}.items()})
      official = session.run({k: op[0] for k, op in ops.items()})
  assert set(result) - set(official) == {"disc_always_real_accuracy"}  # not official
  for name, value in official.items():
    assert result[name] == pytest.approx(float(value), rel=1e-5, abs=1e-6), name


def test_auc_is_exact_roc_when_scores_fall_in_distinct_bins():
  """With scores at bin centres, 200-threshold ROC AUC = Mann-Whitney AUC.

  Padding enters as label 0 with score 0 (the official quirk), so it is part
  of the exact computation too.
  """
  rng = np.random.default_rng(2)
  thresholds = metrics.auc_thresholds().astype(np.float64)
  centres = (thresholds[:-1] + thresholds[1:]) / 2
  stream = metrics.PretrainingMetrics()
  all_labels, all_scores = [], []
  for outputs, batch in _batches(seed=2):
    labels = outputs["disc_labels"]
    bins = np.clip(rng.integers(0, 120, size=labels.shape) + 70 * labels, 0, 198)
    outputs["disc_probs"] = centres[bins].astype(np.float32)
    stream.update(outputs, batch)
    mask = batch["input_mask"]
    all_labels.append((labels * mask).reshape(-1))
    all_scores.append((outputs["disc_probs"] * mask).reshape(-1))
  exact = _mann_whitney_auc(np.concatenate(all_labels), np.concatenate(all_scores))
  assert stream.result()["disc_auc"] == pytest.approx(exact, abs=1e-5)
  real = np.concatenate([b["input_mask"].reshape(-1) for _, b in _batches(seed=2)]) != 0
  exact_real = _mann_whitney_auc(np.concatenate(all_labels)[real],
                                 np.concatenate(all_scores)[real])
  assert stream.result()["disc_auc_real_tokens"] == pytest.approx(exact_real, abs=1e-5)
  # Padding changes the value: the same tokens without padding give another AUC.
  assert abs(exact - _mann_whitney_auc(
      np.concatenate(all_labels)[np.concatenate(all_scores) > 0],
      np.concatenate(all_scores)[np.concatenate(all_scores) > 0])) > 1e-3


def test_auc_over_real_tokens_does_not_count_padding():
  """A discriminator that scores real tokens at random: chance over real
  tokens, while the official AUC is flattered by the padding it ranks last."""
  rng = np.random.default_rng(7)
  stream = metrics.PretrainingMetrics()
  for outputs, batch in _batches(seed=7):
    mask = np.zeros_like(batch["input_mask"])
    mask[:, :S // 4] = 1  # three quarters padding
    outputs["disc_probs"] = (rng.random((B, S)) * mask).astype(np.float32)
    outputs["disc_labels"] = outputs["disc_labels"] * mask
    stream.update(outputs, dict(batch, input_mask=mask))
  result = stream.result()
  assert result["disc_auc"] > 0.7
  assert abs(result["disc_auc_real_tokens"] - 0.5) < 0.15


def test_thresholds_and_counts():
  thresholds = metrics.auc_thresholds()
  assert thresholds.shape == (200,) and thresholds.dtype == np.float32
  assert thresholds[0] < 0 and thresholds[-1] > 1
  assert thresholds[1] == np.float32(1 / 199)
  counts = metrics.confusion_counts(np.array([1, 0, 1, 0]),
                                    np.array([0.0, 0.0, 1.0, 0.6], np.float32),
                                    thresholds)
  # At the lowest threshold everything is predicted positive, at the highest
  # nothing; at threshold 0.5 only the scores 1.0 (pos) and 0.6 (neg).
  assert [int(counts[k][0]) for k in ("tp", "fn", "tn", "fp")] == [2, 0, 0, 2]
  assert [int(counts[k][-1]) for k in ("tp", "fn", "tn", "fp")] == [0, 2, 2, 0]
  middle = int(np.searchsorted(thresholds, 0.5))
  assert [int(counts[k][middle]) for k in ("tp", "fn", "tn", "fp")] == [1, 1, 1, 1]


def test_loss_is_the_mean_of_the_batch_losses():
  stream = metrics.PretrainingMetrics()
  outputs, batch = _batches(seed=5, count=1)[0]
  stream.update(outputs, batch)
  assert "loss" not in stream.result()  # only when batch losses are given
  for loss in (20.0, 23.0, 29.0):
    stream.add_batch_loss(loss)
  assert list(stream.result())[0] == "loss"
  assert stream.result()["loss"] == pytest.approx(24.0)
  stream.reset()
  assert "loss" not in stream.result()


def test_mlm_only_and_disc_weight_zero():
  mlm_keys = ("mlm_per_example_loss", "mlm_preds")
  mlm_batches = [({k: o[k] for k in mlm_keys}, b) for o, b in _batches(seed=3)]
  result = _streamed(mlm_batches, electra_objective=False)
  assert list(result) == ["masked_lm_accuracy", "masked_lm_loss"]
  full = _streamed(_batches(seed=3), electra_objective=True, disc_weight=50.0)
  assert result["masked_lm_loss"] == pytest.approx(full["masked_lm_loss"])
  no_disc = _streamed(_batches(seed=3), electra_objective=True, disc_weight=0.0)
  assert list(no_disc) == ["masked_lm_accuracy", "masked_lm_loss",
                           "sampled_masked_lm_accuracy"]


def test_eager_tensors_reset_and_empty_weights():
  outputs, batch = _batches(seed=4, count=1)[0]
  stream = metrics.PretrainingMetrics()
  stream.update({k: tf.constant(v) for k, v in outputs.items()},
                {k: tf.constant(v) for k, v in batch.items()})
  assert stream.result() == pytest.approx(_streamed([(outputs, batch)]))
  stream.reset()
  zero_weights = dict(batch, masked_lm_weights=np.zeros((B, N), np.float32))
  stream.update(outputs, zero_weights)
  assert stream.result()["masked_lm_accuracy"] == 0.0  # 0 / 0 reads 0, as TF


def test_bad_inputs_raise_one_line_errors():
  outputs, batch = _batches(seed=5, count=1)[0]
  stream = metrics.PretrainingMetrics()
  bad_cases = [
      ({k: v for k, v in outputs.items() if k != "disc_probs"}, batch, "lacks 'disc_probs'"),
      (outputs, dict(batch, input_mask=batch["input_mask"][:, :5]), r"disc_labels.*shape"),
      (dict(outputs, disc_probs=outputs["disc_probs"] + 1.5), batch, r"\[0, 1\]"),
  ]
  for bad_outputs, bad_batch, message in bad_cases:
    with pytest.raises(ValueError, match=message) as error:
      stream.update(bad_outputs, bad_batch)
    assert "\n" not in str(error.value)


def test_representation_stats_effective_rank_and_cosine():
  rng = np.random.RandomState(0)
  mask = np.ones((4, 250), np.int64)
  mask[:, 200:] = 0  # padding, left out: it holds far-off vectors below
  # Isotropic vectors: rank near H, cosines near 0.
  isotropic = rng.normal(size=(4, 250, 16))
  isotropic[:, 200:] = 1e3
  stats = metrics.RepresentationStats(16)
  stats.update(isotropic[:2], mask[:2])
  stats.update(isotropic[2:], mask[2:])  # streaming equals one batch
  whole = metrics.RepresentationStats(16)
  whole.update(isotropic, mask)
  assert stats.result() == pytest.approx(whole.result())
  assert stats.count == 800 and 15.0 < stats.result()["effective_rank"] <= 16.0
  assert abs(stats.result()["mean_cosine"]) < 0.01
  # Spread evenly over 3 orthogonal directions, around a shared offset:
  # rank 3, and the offset shows in the cosine, not in the rank.
  directions = np.eye(16)[:3] * 2.0
  offset = np.full(16, 0.5)
  collapsed = (rng.choice([-1.0, 1.0], size=(4, 250, 3)) @ directions) + offset
  stats = metrics.RepresentationStats(16)
  stats.update(collapsed, mask)
  result = stats.result()
  assert result["effective_rank"] == pytest.approx(3.0, abs=0.02)
  # Against the brute-force mean over all pairs of distinct real tokens.
  vectors = collapsed[mask != 0]
  unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
  cosines = unit @ unit.T
  expected = (cosines.sum() - np.trace(cosines)) / (len(unit) * (len(unit) - 1))
  assert result["mean_cosine"] == pytest.approx(expected, abs=1e-9)
  # One line: rank 1.
  line = rng.normal(size=(4, 250, 1)) * np.linspace(1, 2, 16)
  stats = metrics.RepresentationStats(16)
  stats.update(line, mask)
  assert stats.result()["effective_rank"] == pytest.approx(1.0, abs=1e-6)
  with pytest.raises(ValueError, match=r"not \[B, S, 16\]"):
    stats.update(line[:, :, :8], mask)
  with pytest.raises(ValueError, match="0 real tokens"):
    metrics.RepresentationStats(16).result()
