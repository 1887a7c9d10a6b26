"""Optimizer and schedule against the official TF1 fixture (official_optimizer)."""

import json
import os
import subprocess
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import optimization
from electra_tf.errors import ConfigError
from tests.conftest import command_python



def _load(fixture_dir):
  with open(fixture_dir / "optimizer_fixture.json", encoding="utf-8") as f:
    return json.load(f), np.load(fixture_dir / "optimizer_fixture.npz")


def _optimizer(hparams, case=None):
  case = case or {}
  return optimization.create_optimizer(
      hparams["learning_rate"], hparams["num_train_steps"],
      hparams["warmup_steps"], hparams["weight_decay_rate"],
      lr_decay_power=hparams["lr_decay_power"],
      layerwise_lr_decay=case.get("layerwise_lr_decay_power"),
      n_transformer_layers=case.get("n_transformer_layers"))


def _check_case(fixture_dir, case_name):
  """Runs the fixture's 3 updates in a tf.function and compares every step."""
  meta, arrays = _load(fixture_dir)
  case = meta[case_name]
  names = [v["name"] for v in case["variables"]]
  variables = [tf.Variable(arrays[f"{case_name}/init/{n}"], name=n) for n in names]
  optimizer = _optimizer(meta["hparams"], case)

  @tf.function
  def apply(grads):
    optimizer.apply_gradients(zip(grads, variables))

  for k, step in enumerate(case["steps"], start=1):
    apply([tf.constant(arrays[f"{case_name}/step{k}/grad/{n}"]) for n in names])
    assert int(optimizer.iterations) == step["global_step_after"]
    base_lr = float(optimizer.current_learning_rate())
    assert base_lr == pytest.approx(meta["lr_schedule"][k]["lr"], rel=1e-6)
    for i, n in enumerate(names):
      prefix = f"{case_name}/step{k}"
      # Bit for bit (docs/faithfulness.md): weights and both Adam slots.
      np.testing.assert_array_equal(variables[i].numpy(), arrays[f"{prefix}/param/{n}"],
                                    err_msg=f"step {k} {n}")
      np.testing.assert_array_equal(optimizer._adam_m[i].numpy(),
                                    arrays[f"{prefix}/adam_m/{n}"], err_msg=f"step {k} {n}")
      np.testing.assert_array_equal(optimizer._adam_v[i].numpy(),
                                    arrays[f"{prefix}/adam_v/{n}"], err_msg=f"step {k} {n}")
  return meta, case, optimizer


def test_learning_rate_at_matches_official_schedule(official_optimizer_fixture):
  meta, _ = _load(official_optimizer_fixture)
  hp = meta["hparams"]
  for row in meta["lr_schedule"]:
    lr = optimization.learning_rate_at(
        row["global_step"], hp["learning_rate"], hp["num_train_steps"],
        hp["warmup_steps"], hp["lr_decay_power"])
    assert lr.dtype == tf.float32
    assert float(lr) == pytest.approx(row["lr"], rel=1e-7, abs=1e-12)


def test_schedule_without_warmup_and_with_power():
  # warm-up 0: plain polynomial decay; power 2: (1 - step/total)^2.
  lrs = [float(optimization.learning_rate_at(s, 1e-3, 4, 0, 2.0)) for s in range(6)]
  np.testing.assert_allclose(lrs, [1e-3, 1e-3 * 0.5625, 1e-3 * 0.25, 1e-3 * 0.0625, 0, 0],
                             rtol=1e-6)
  # The schedule the optimizer evaluates at `iterations` is one step ahead.
  schedule = optimization.ElectraLearningRate(1e-3, 4, 0, 2.0)
  assert float(schedule(tf.constant(0, tf.int64))) == pytest.approx(lrs[1], rel=1e-6)


def test_plain_case_matches_official(official_optimizer_fixture):
  _check_case(official_optimizer_fixture, "plain")


def test_layerwise_case_matches_official(official_optimizer_fixture):
  meta, case, optimizer = _check_case(official_optimizer_fixture, "layerwise")
  names = [v["name"] for v in case["variables"]]
  multipliers = optimization.layer_lr_multipliers(names, 0.8, 12)
  keys = {n: next(k for k in meta["layer_lrs"]["multipliers"] if k in n) for n in names}
  base_lr = optimizer.current_learning_rate()
  for n in names:
    # float32 rate * multiplier, as the official per-key rates.
    lr = float(base_lr * multipliers[n])
    assert lr == pytest.approx(case["steps"][-1]["lr_at_global_step_after"][keys[n]],
                               rel=1e-6)


def test_layer_lr_multipliers_match_official_table(official_optimizer_fixture):
  meta, _ = _load(official_optimizer_fixture)
  table = meta["layer_lrs"]["multipliers"]
  # Keras names with an outer prefix: model/electra/embeddings/w:0,
  # model/electra/encoder/layer_3/w:0, model/task_specific/w:0.
  scope = lambda key: ("electra" + key if key.startswith("/") else
                       key if key.startswith("task_specific") else "electra/" + key)
  names = [f"model/{scope(key)}w:0" for key in table]
  multipliers = optimization.layer_lr_multipliers(names, 0.8, 12)
  for key, name in zip(table, names):
    assert multipliers[name] == pytest.approx(table[key], rel=1e-12), name
  assert multipliers["model/electra/encoder/layer_11/w:0"] == pytest.approx(0.8 ** 2)
  assert optimization.layer_depths(2) == {
      "/embeddings/": 0, "/embeddings_project/": 0, "task_specific/": 4,
      "encoder/layer_0/": 1, "encoder/layer_1/": 2}
  with pytest.raises(ConfigError, match="generator/pooler/dense.*no key"):
    optimization.layer_lr_multipliers(["generator/pooler/dense"], 0.8, 12)
  # A Keras model's own head (electra_tf.api): Keras' names, the head's rate;
  # a name matching two keys is still an error.
  assert optimization.layer_lr_multipliers(
      ["dense/kernel:0", "electra/encoder/layer_0/w:0"], 0.8, 12, unmatched_as_head=True
  ) == {"dense/kernel:0": 1.0, "electra/encoder/layer_0/w:0": pytest.approx(0.8 ** 13)}
  with pytest.raises(ConfigError, match="contains keys"):
    optimization.layer_lr_multipliers(["task_specific/embeddings_project/w:0"], 0.8, 12,
                                      unmatched_as_head=True)


def test_weight_decay_exclusion():
  assert optimization.uses_weight_decay("electra/encoder/layer_0/output/dense/kernel:0")
  assert optimization.uses_weight_decay("electra/embeddings/word_embeddings:0")
  for name in ("electra/encoder/layer_0/output/dense/bias:0",
               "electra/embeddings/LayerNorm/gamma:0", "a/layer_norm/beta:0",
               "generator_predictions/output_bias:0"):
    assert not optimization.uses_weight_decay(name)


def test_bad_arguments_raise_one_line_errors():
  cases = [(dict(learning_rate=0.0), "learning_rate"),
           (dict(num_train_steps=0), "num_train_steps"),
           (dict(num_warmup_steps=-1), "num_warmup_steps"),
           (dict(weight_decay_rate=-0.1), "weight_decay_rate"),
           (dict(layerwise_lr_decay=0.8), "n_transformer_layers"),
           (dict(layerwise_lr_decay=-1.0), "layerwise_lr_decay")]
  for overrides, flag in cases:
    args = dict(learning_rate=1e-4, num_train_steps=10, num_warmup_steps=1,
                weight_decay_rate=0.01)
    args.update(overrides)
    with pytest.raises(ConfigError, match=flag) as error:
      optimization.create_optimizer(**args)
    assert "\n" not in str(error.value)


def test_checkpoint_restores_step_and_slots(tmp_path):
  rng = np.random.default_rng(0)
  init = [rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=4).astype(np.float32)]
  names = ["electra/encoder/layer_0/ffn/kernel", "electra/encoder/layer_0/ffn/bias"]
  grads = [[rng.normal(size=w.shape).astype(np.float32) for w in init] for _ in range(3)]

  def make():
    variables = [tf.Variable(w, name=n) for w, n in zip(init, names)]
    optimizer = optimization.create_optimizer(1e-2, 10, 2, 0.01)
    return variables, optimizer

  def step(variables, optimizer, k):
    optimizer.apply_gradients(zip([tf.constant(g) for g in grads[k]], variables))

  straight_vars, straight_opt = make()
  for k in range(3):
    step(straight_vars, straight_opt, k)

  first_vars, first_opt = make()
  for k in range(2):
    step(first_vars, first_opt, k)
  path = tf.train.Checkpoint(optimizer=first_opt, variables=first_vars).save(
      str(tmp_path / "ckpt"))

  resumed_vars, resumed_opt = make()
  tf.train.Checkpoint(optimizer=resumed_opt, variables=resumed_vars).restore(
      path).assert_existing_objects_matched()
  assert int(resumed_opt.iterations) == 2
  step(resumed_vars, resumed_opt, 2)
  for a, b in zip(straight_vars + straight_opt._adam_m + straight_opt._adam_v,
                  resumed_vars + resumed_opt._adam_m + resumed_opt._adam_v):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_sparse_gradients_equal_dense():
  """A gathered embedding (IndexedSlices gradient, repeated ids) updates as dense.

  The gradient norm stays below the clip norm, so only the update is compared
  here (the clip is the next tests').
  """
  rng = np.random.default_rng(1)
  table = rng.normal(size=(6, 3)).astype(np.float32)
  ids = tf.constant([1, 4, 1, 1, 0])
  weights = tf.constant(rng.normal(size=(5, 3)).astype(np.float32))
  results = []
  for lookup in (lambda t: tf.gather(t, ids),
                 lambda t: tf.one_hot(ids, 6) @ t):
    embedding = tf.Variable(table, name="electra/embeddings/word_embeddings")
    optimizer = optimization.create_optimizer(1e-2, 10, 1, 0.01)
    for _ in range(2):
      with tf.GradientTape() as tape:
        loss = 0.02 * tf.reduce_sum(lookup(embedding) * weights)
      optimizer.apply_gradients(zip(tape.gradient(loss, [embedding]), [embedding]))
    results.append(embedding.numpy())
  assert not np.allclose(results[0], table)
  np.testing.assert_allclose(results[0], results[1], atol=1e-7)


def test_clip_uses_the_norm_of_the_dense_gradient():
  """An IndexedSlices with a repeated row is measured after summing it.

  Row 0 gets [3, 0] twice: dense [6, 0].  With a dense [4, 0] beside it the
  true global norm is sqrt(52); the rows' norm that tf.clip_by_global_norm
  takes of an IndexedSlices would be sqrt(34) and clip too little.
  """
  slices = tf.IndexedSlices(values=tf.constant([[3.0, 0.0], [3.0, 0.0]]),
                            indices=tf.constant([0, 0]), dense_shape=tf.constant([2, 2]))
  dense = tf.constant([4.0, 0.0])
  optimizer = optimization.create_optimizer(1e-3, 10, 1, 0.01)
  clipped = optimizer._clip_gradients([slices, dense])  # Keras' global_clipnorm hook
  norm = np.sqrt(52.0)
  np.testing.assert_allclose(clipped[0], [[6 / norm, 0], [0, 0]], rtol=1e-6)
  np.testing.assert_allclose(clipped[1], [4 / norm, 0], rtol=1e-6)


def test_pretraining_gradients_are_clipped_to_their_dense_norm():
  """On a real pre-training batch (repeated tokens, two token types) the
  clipped gradients have global norm exactly 1 once made dense: the clip
  measured the dense norm, as the official graph's does."""
  from electra_tf.pretrain.config import PretrainingConfig  # pylint: disable=g-import-not-at-top
  from electra_tf.pretrain.model import build_model  # pylint: disable=g-import-not-at-top
  model = build_model(PretrainingConfig.create({
      "vocab_size": 30, "embedding_size": 8, "max_seq_length": 16,
      "model_hparam_overrides": {"hidden_size": 16, "num_hidden_layers": 1,
                                 "num_attention_heads": 2}}))
  rng = np.random.default_rng(0)
  ids = rng.integers(5, 12, size=(4, 16)).astype(np.int32)  # 7 ids: many repeats
  batch = {"input_ids": ids, "input_mask": np.ones_like(ids),
           "segment_ids": (np.arange(16) >= 9).astype(np.int32)[np.newaxis].repeat(4, 0),
           "masked_lm_positions": np.tile(np.array([[1, 5, 9]], np.int32), (4, 1)),
           "masked_lm_ids": ids[:, [1, 5, 9]],
           "masked_lm_weights": np.ones((4, 3), np.float32)}
  with tf.GradientTape() as tape:
    loss = model(batch, training=True,
                 sample_seed=tf.constant([[1, 0], [1, 1], [1, 2], [1, 3]], tf.int64)
                 )["total_loss"]
  gradients = tape.gradient(loss, model.trainable_variables)
  dense = optimization.dense_gradients(gradients)
  assert float(tf.linalg.global_norm(dense)) > 2.0  # so the clip acts
  optimizer = optimization.create_optimizer(1e-3, 10, 1, 0.01)
  clipped = optimization.dense_gradients(optimizer._clip_gradients(gradients))
  np.testing.assert_allclose(float(tf.linalg.global_norm(clipped)), 1.0, rtol=1e-5)


def test_config_round_trip():
  optimizer = optimization.create_optimizer(2e-4, 100, 10, 0.01, lr_decay_power=0.5,
                                            layerwise_lr_decay=0.8, n_transformer_layers=12)
  clone = optimization.AdamWeightDecay.from_config(optimizer.get_config())
  assert clone.get_config() == optimizer.get_config()
  assert clone.layerwise_lr_decay == 0.8 and clone.n_transformer_layers == 12
  assert float(clone.current_learning_rate()) == 0.0


# Runs in a fresh interpreter: logical devices must be set before TF starts.
_DISTRIBUTED_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    from electra_tf import optimization

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    fixture_dir = sys.argv[1]
    meta = json.load(open(fixture_dir + "/optimizer_fixture.json"))
    arrays = np.load(fixture_dir + "/optimizer_fixture.npz")
    names = [v["name"] for v in meta["plain"]["variables"]]
    hp = meta["hparams"]
    worst = {}
    strategies = {
        "multi_worker": tf.distribute.MultiWorkerMirroredStrategy(),
        "one_device": tf.distribute.OneDeviceStrategy("/cpu:1"),
        "mirrored": tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]),
    }
    for label, strategy in strategies.items():
      n = strategy.num_replicas_in_sync
      # Replica r holds share[r] * G + sign[r] * D: the parts sum to the global
      # gradient G but point elsewhere, so clipping each part before summing
      # (instead of the sum) would give another result.
      shares, signs = ([0.3, 0.7], [1.0, -1.0]) if n == 2 else ([1.0], [0.0])
      with strategy.scope():
        variables = [tf.Variable(arrays["plain/init/" + k], name=k) for k in names]
        optimizer = optimization.create_optimizer(
            hp["learning_rate"], hp["num_train_steps"], hp["warmup_steps"],
            hp["weight_decay_rate"], hp["lr_decay_power"])
      split = strategy.experimental_distribute_values_from_function(
          lambda ctx: tf.constant([shares[ctx.replica_id_in_sync_group],
                                   signs[ctx.replica_id_in_sync_group]]))
      rng = np.random.default_rng(0)
      offsets = [tf.constant(2 * rng.normal(size=arrays["plain/init/" + k].shape),
                             tf.float32) for k in names]

      @tf.function
      def train_step(split, grads):
        def replica_fn(split):
          parts = [split[0] * g + split[1] * d for g, d in zip(grads, offsets)]
          optimizer.apply_gradients(zip(parts, variables))
        strategy.run(replica_fn, args=(split,))

      diffs = []
      for k in (1, 2, 3):
        train_step(split, [tf.constant(arrays[f"plain/step{k}/grad/" + x]) for x in names])
        for i, x in enumerate(names):
          for got, key in ((variables[i], "param"), (optimizer._adam_m[i], "adam_m"),
                           (optimizer._adam_v[i], "adam_v")):
            diffs.append(float(np.max(np.abs(
                got.numpy() - arrays[f"plain/step{k}/{key}/" + x]))))
      worst[label] = {"replicas": n, "max_abs_diff": max(diffs),
                      "iterations": int(optimizer.iterations.numpy()),
                      "lr": float(optimizer.current_learning_rate())}
    print("RESULT " + json.dumps(worst))
""")


@pytest.mark.slow
def test_distributed_updates_equal_single_device(official_optimizer_fixture, repo_root):
  env = dict(os.environ, PYTHONPATH=str(repo_root), TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("TF_CONFIG", None)
  proc = subprocess.run([command_python(), "-c", _DISTRIBUTED_SCRIPT,
                         str(official_optimizer_fixture)],
                        capture_output=True, text=True, env=env, timeout=300, check=False)
  lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
  assert proc.returncode == 0 and lines, proc.stderr[-3000:]
  result = json.loads(lines[-1][len("RESULT "):])
  assert result["mirrored"]["replicas"] == 2
  official_lr = json.loads((official_optimizer_fixture / "optimizer_fixture.json").read_text(
      encoding="utf-8"))["lr_schedule"][3]["lr"]
  for label, outcome in result.items():
    assert outcome["iterations"] == 3, label
    assert outcome["lr"] == pytest.approx(official_lr, rel=1e-6), label
    assert outcome["max_abs_diff"] < 1e-6, (label, outcome)
