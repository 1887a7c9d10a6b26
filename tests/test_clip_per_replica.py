"""clip_per_replica: the official TPU recipe of clipping each core's gradient.

A 2-replica MirroredStrategy on two logical CPU devices (configured in a
subprocess, before TensorFlow starts) trains a tiny ELECTRA for two steps
with and without the option; both runs are compared with a hand computation
on one device: per-replica losses (each replica's official loss of its half
batch), each replica's gradient clipped by its own dense global norm, summed,
then the official Adam update in NumPy; and, by default, the gradient of the
whole batch's loss clipped once.
"""

import json
import os
import pathlib
import subprocess
import textwrap

import pytest

from electra_tf.pretrain.config import PretrainingConfig
from tests.conftest import command_python

REPO = pathlib.Path(__file__).resolve().parent.parent
HPARAMS = {"vocab_size": 60, "embedding_size": 8, "generator_hidden_size": 0.5,
           "max_seq_length": 16, "train_batch_size": 8, "num_train_steps": 10,
           "num_warmup_steps": 2, "model_hparam_overrides": {
               "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
               "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}}

_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from electra_tf import optimization
    from electra_tf.pretrain import data as pretrain_data
    from electra_tf.pretrain import job as job_lib
    from electra_tf.pretrain.config import PretrainingConfig
    from electra_tf.tokenization import SpecialIds

    hparams = json.loads(sys.argv[1])
    special = SpecialIds(pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
    rng = np.random.RandomState(0)
    batches = []
    for step in range(2):
      ids = rng.randint(5, 60, size=(8, 16)).astype(np.int32)
      ids[:, 0], ids[:, -1] = 2, 3
      mask = np.ones_like(ids)
      ids[::3, 10:], mask[::3, 10:] = 0, 0
      batches.append({k: v.numpy() for k, v in pretrain_data.mask_batch(
          {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)},
          max_predictions_per_seq=2, mask_prob=0.15, special=special,
          seed=tf.constant([9, step])).items()})
    halves = [[{k: v[r * 4:(r + 1) * 4] for k, v in b.items()} for r in range(2)]
              for b in batches]

    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    initial, trained, logged = None, {}, {}
    for clip in (True, False):
      config = PretrainingConfig.create(dict(hparams, clip_per_replica=clip))
      job = job_lib.PretrainingJob(config, mirrored)
      if initial is None:
        initial = [v.numpy() for v in job.model.variables]
      for variable, value in zip(job.model.variables, initial):
        variable.assign(value)

      @tf.function
      def step(batch):
        losses, _ = mirrored.run(lambda b: job.trainer.train_step(job.loss, b), args=(batch,))
        return {k: mirrored.reduce(tf.distribute.ReduceOp.SUM, v, None)
                for k, v in losses.items()}

      for k in range(2):
        batch = mirrored.experimental_distribute_values_from_function(
            lambda ctx: {key: tf.constant(v) for key, v in
                         halves[k][ctx.replica_id_in_sync_group].items()})
        losses = step(batch)
        if k == 0:
          logged[clip] = float(losses["loss"])
      trained[clip] = [v.numpy() for v in job.model.trainable_variables]

    # The hand computation on one device.
    config = PretrainingConfig.create(hparams)
    model = job_lib.PretrainingJob(
        config, tf.distribute.OneDeviceStrategy("/cpu:0")).model
    names = [v.name for v in model.trainable_variables]

    def gradient(batch, first_row, counter):
      rows = np.arange(first_row, first_row + len(batch["input_ids"]))
      seeds = np.stack([np.zeros_like(rows), counter + rows], 1).astype(np.int64)
      with tf.GradientTape() as tape:
        loss = model(batch, training=True, sample_seed=seeds)["total_loss"]
      grads = tape.gradient(loss, model.trainable_variables)
      return float(loss), [tf.convert_to_tensor(g).numpy().astype(np.float64) for g in grads]

    def clipped(grads):
      norm = np.sqrt(sum(float((g ** 2).sum()) for g in grads))
      return [g / max(norm, 1.0) for g in grads]

    def hand(per_replica):
      for variable, value in zip(model.variables, initial):
        variable.assign(value)
      weights = [v.numpy().astype(np.float64) for v in model.trainable_variables]
      m = [np.zeros_like(w) for w in weights]
      v = [np.zeros_like(w) for w in weights]
      first_loss = None
      for k in range(2):
        if per_replica:
          parts = [gradient(halves[k][r], 4 * r, 8 * k) for r in range(2)]
          loss = sum(p[0] for p in parts) / 2
          grads = [a + b for a, b in zip(clipped(parts[0][1]), clipped(parts[1][1]))]
        else:
          loss, grads = gradient(batches[k], 0, 8 * k)
          grads = clipped(grads)
        first_loss = loss if first_loss is None else first_loss
        lr = float(optimization.learning_rate_at(k + 1, config.learning_rate,
                                                 config.num_train_steps,
                                                 config.num_warmup_steps))
        for i, name in enumerate(names):
          m[i] = 0.9 * m[i] + 0.1 * grads[i]
          v[i] = 0.999 * v[i] + 0.001 * grads[i] ** 2
          update = m[i] / (np.sqrt(v[i]) + 1e-6)
          if optimization.uses_weight_decay(name):
            update += config.weight_decay_rate * weights[i]
          weights[i] = weights[i] - lr * update
        for variable, w in zip(model.trainable_variables, weights):
          variable.assign(w)
      return first_loss, weights

    result = {}
    hands = {clip: hand(clip) for clip in (True, False)}
    for clip in (True, False):
      result[str(clip)] = {
          "max_diff": max(float(np.abs(a - b).max())
                          for a, b in zip(trained[clip], hands[clip][1])),
          "logged_loss": logged[clip], "hand_loss": hands[clip][0]}
    result["hand_difference"] = max(float(np.abs(a - b).max())
                                    for a, b in zip(hands[True][1], hands[False][1]))
    result["count"] = len(names)
    print("RESULT " + json.dumps(result))
""")


def test_clip_per_replica_is_a_project_hparam_off_by_default():
  assert PretrainingConfig.create().clip_per_replica is False
  assert PretrainingConfig.create({"clip_per_replica": True}).clip_per_replica is True


@pytest.mark.slow
def test_per_replica_clipping_on_two_replicas_equals_the_hand_computation():
  env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("TF_CONFIG", None)
  proc = subprocess.run([command_python(), "-c", _SCRIPT, json.dumps(HPARAMS)],
                        capture_output=True, text=True, env=env, timeout=600,
                        cwd=REPO, check=False)
  lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
  assert proc.returncode == 0 and lines, proc.stderr[-3000:]
  result = json.loads(lines[-1][len("RESULT "):])
  assert result["count"] > 20
  for clip in ("True", "False"):
    outcome = result[clip]
    assert outcome["max_diff"] < 1e-6, (clip, outcome)
    # Logged: the replicas' mean loss (per-replica), the global loss (default).
    assert outcome["logged_loss"] == pytest.approx(outcome["hand_loss"], rel=1e-5)
  # The two recipes differ by far more than the tolerance above.
  assert result["hand_difference"] > 1e-4, result
