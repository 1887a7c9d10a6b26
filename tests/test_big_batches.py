"""Big batches: gradient accumulation, layer recomputation, LAMB, out-of-memory.

* N micro-batches of B/N give the update of one batch of B (pre-training
  and fine-tuning losses, tiny models, dropout off: with dropout on the
  micro-batches draw other masks, docs/big_batches.md).  Tolerance: the
  weights agree to 2 float32 ulps plus 1e-5 of the largest update (float32
  sums in another order; Adam's m / sqrt(v) magnifies the rounding of
  near-zero gradients), the losses to 1e-6 relative.
* A run resumed from a checkpoint of an accumulating run continues exactly
  (bit for bit): steps are indivisible, so no checkpoint falls inside one.
* Recomputed Transformer layers give the plain gradients (dropout on: the
  recomputation replays the same masks).
* LAMB against a NumPy step and against Model Garden's LAMB.
"""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import errors
from electra_tf import optimization
from electra_tf import train_loop
from electra_tf.errors import ConfigError
from electra_tf.finetune import job as finetune_job
from electra_tf.finetune import task_builder
from electra_tf.finetune.config import FinetuningConfig
from electra_tf.modeling import dropout
from electra_tf.pretrain import data as pretrain_data
from electra_tf.pretrain import job as job_lib
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.tokenization import SpecialIds

NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
ARCH = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 32}
HPARAMS = {"vocab_size": 60, "embedding_size": 8, "generator_hidden_size": 0.5,
           "max_seq_length": 16, "train_batch_size": 8, "num_train_steps": 10,
           "num_warmup_steps": 2, "model_hparam_overrides": dict(ARCH, **NO_DROPOUT)}
UPDATE_RTOL = 1e-5


def _pretraining_batches(steps=2, rows=8):
  special = SpecialIds(pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
  rng = np.random.RandomState(0)
  batches = []
  for step in range(steps):
    ids = rng.randint(5, 60, size=(rows, 16)).astype(np.int32)
    ids[:, 0], ids[:, -1] = 2, 3
    mask = np.ones_like(ids)
    ids[::3, 10:], mask[::3, 10:] = 0, 0
    batches.append(pretrain_data.mask_batch(
        {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)},
        max_predictions_per_seq=2, mask_prob=0.15, special=special,
        seed=tf.constant([9, step])))
  return batches


def _pretraining_job(**hparams):
  config = PretrainingConfig.create(dict(HPARAMS, **hparams))
  return job_lib.PretrainingJob(config, tf.distribute.OneDeviceStrategy("/cpu:0"))


def _run_steps(job, batches):
  """Runs the shared train step on each batch; returns (variables, last logged)."""

  @tf.function
  def step(batch):
    return job.strategy.run(lambda b: job.trainer.train_step(job.loss, b), args=(batch,))

  logged = None
  for batch in batches:
    logged, finite = step(batch)
    assert bool(finite)
  return [v.numpy() for v in job.model.trainable_variables], logged


def _assert_same_updates(initial, plain, accumulated):
  """Weights equal to 2 float32 ulps of the weight plus UPDATE_RTOL of the
  largest update (the gradients are summed in another order)."""
  scale = max(np.abs(p - i).max() for p, i in zip(plain, initial))
  assert scale > 0
  for a, p in zip(accumulated, plain):
    excess = np.abs(a - p) - (UPDATE_RTOL * scale + 2 * np.spacing(np.abs(p)))
    assert excess.max() <= 0, (np.abs(a - p).max(), scale)


@pytest.mark.slow
@pytest.mark.parametrize("extra", [{}, {"clip_per_replica": True}, {"optimizer": "lamb"}])
def test_accumulated_pretraining_update_equals_big_batch(extra):
  batches = _pretraining_batches()
  plain_job = _pretraining_job(**extra)
  initial = [v.numpy() for v in plain_job.model.trainable_variables]
  plain, plain_logged = _run_steps(plain_job, batches)
  accumulating = _pretraining_job(gradient_accumulation_steps=4, **extra)
  for variable, value in zip(accumulating.model.trainable_variables, initial):
    variable.assign(value)
  accumulated, logged = _run_steps(accumulating, batches)
  _assert_same_updates(initial, plain, accumulated)
  # The micro-batch losses sum to the big batch's (global denominators).
  for name, value in plain_logged.items():
    np.testing.assert_allclose(logged[name], value, rtol=1e-6, err_msg=name)
  assert int(accumulating.optimizer.iterations.numpy()) == 2  # one step per batch


def test_accumulated_sampling_noise_is_the_big_batchs():
  """Micro-batch k's rows draw the generator samples of their rows in the big batch."""
  batch = _pretraining_batches(steps=1)[0]
  job = _pretraining_job()
  whole = job._replica_outputs(batch, 0, training=True)["sampled_ids"]
  for k in range(4):
    rows = slice(2 * k, 2 * k + 2)
    part = train_loop.BatchPart(batch, tf.constant(2 * k, tf.int64))
    micro = job._replica_outputs({key: v[rows] for key, v in batch.items()}, 0,
                                 training=True, part=part)
    np.testing.assert_array_equal(micro["sampled_ids"], whole[rows])


def _finetuning_job(**hparams):
  config = FinetuningConfig.create(
      dict({"vocab_size": 64, "embedding_size": 8, "max_seq_length": 16,
            "train_batch_size": 8, "model_hparam_overrides": dict(ARCH, **NO_DROPOUT)},
           **hparams), task_names=["rte", "sts"], data_dir="/nonexistent")
  tasks = task_builder.get_tasks(config, None)
  job = finetune_job.TrialJob(config, tasks, tf.distribute.OneDeviceStrategy("/cpu:0"),
                              1, num_train_steps=10)
  for layer in job.model.submodules:  # the heads' official dropout 0.1 too
    if isinstance(layer, dropout.Dropout):
      layer.rate = 0.0
  return job


def _finetuning_batches():
  rng = np.random.RandomState(1)
  batches = []
  for _ in range(2):
    ids = rng.randint(5, 64, size=(8, 16)).astype(np.int32)
    mask = np.ones_like(ids)
    ids[::2, 12:], mask[::2, 12:] = 0, 0
    batches.append({"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids),
                    "task_id": np.array([0, 1] * 4, np.int32),
                    "rte_eid": np.arange(8, dtype=np.int32),
                    "sts_eid": np.arange(8, dtype=np.int32),
                    "rte_label_ids": rng.randint(0, 2, 8).astype(np.int32),
                    "sts_targets": rng.uniform(0, 5, 8).astype(np.float32)})
  return batches


@pytest.mark.slow
def test_accumulated_finetuning_update_equals_big_batch():
  batches = _finetuning_batches()
  plain_job = _finetuning_job(layerwise_lr_decay=0.8)
  initial = [v.numpy() for v in plain_job.model.trainable_variables]
  plain, plain_logged = _run_steps(plain_job, batches)
  accumulating = _finetuning_job(layerwise_lr_decay=0.8, gradient_accumulation_steps=2)
  for variable, value in zip(accumulating.model.trainable_variables, initial):
    variable.assign(value)
  accumulated, logged = _run_steps(accumulating, batches)
  _assert_same_updates(initial, plain, accumulated)
  np.testing.assert_allclose(logged["loss"], plain_logged["loss"], rtol=1e-6)


@pytest.mark.slow
def test_resume_after_accumulated_steps_is_exact(tmp_path):
  """With dropout on: masks follow (seed, step, replica, micro-batch)."""
  dropout_on = dict(HPARAMS["model_hparam_overrides"], hidden_dropout_prob=0.1,
                    attention_probs_dropout_prob=0.1)
  hparams = {"gradient_accumulation_steps": 2, "model_hparam_overrides": dropout_on}
  batches = _pretraining_batches()
  straight, _ = _run_steps(_pretraining_job(**hparams), batches)
  first = _pretraining_job(**hparams)
  _run_steps(first, batches[:1])
  saved = first.trainer.checkpoint.save(str(tmp_path / "ckpt"))
  resumed_job = _pretraining_job(**hparams)
  resumed_job.trainer.checkpoint.restore(saved).assert_existing_objects_matched()
  resumed, _ = _run_steps(resumed_job, batches[1:])
  for a, b in zip(straight, resumed):
    np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_recomputed_layers_give_the_plain_gradients():
  dropout_on = dict(HPARAMS["model_hparam_overrides"], hidden_dropout_prob=0.1,
                    attention_probs_dropout_prob=0.1)
  batches = _pretraining_batches(steps=1)
  plain_job = _pretraining_job(model_hparam_overrides=dropout_on)
  initial = [v.numpy() for v in plain_job.model.trainable_variables]
  plain, plain_logged = _run_steps(plain_job, batches)
  recomputing = _pretraining_job(model_hparam_overrides=dropout_on, recompute_layers=True)
  for variable, value in zip(recomputing.model.trainable_variables, initial):
    variable.assign(value)
  recomputed, logged = _run_steps(recomputing, batches)
  _assert_same_updates(initial, plain, recomputed)
  np.testing.assert_allclose(logged["loss"], plain_logged["loss"], rtol=1e-6)


def _numpy_lamb(w, g, m, v, k, lr, decay, adapt):
  m = 0.9 * m + 0.1 * g
  v = 0.999 * v + 0.001 * g * g
  update = (m / (1 - 0.9 ** k)) / (np.sqrt(v / (1 - 0.999 ** k)) + 1e-6)
  ratio = 1.0
  if adapt:
    update = update + decay * w
    ratio = np.linalg.norm(w) / np.linalg.norm(update)
  return w - lr * ratio * update, m, v


def test_lamb_matches_numpy_and_model_garden():
  rng = np.random.RandomState(3)
  names = ["electra/encoder/layer_0/dense/kernel", "electra/encoder/layer_0/dense/bias",
           "task_specific/out/kernel"]
  values = [rng.normal(size=(4, 3)).astype(np.float32),
            rng.normal(size=(3,)).astype(np.float32),
            rng.normal(size=(3, 2)).astype(np.float32)]
  grads = [[rng.normal(scale=0.2, size=w.shape).astype(np.float32) for w in values]
           for _ in range(2)]
  variables = [tf.Variable(w, name=n) for w, n in zip(values, names)]
  assert [v.name for v in variables] == [n + ":0" for n in names]
  optimizer = optimization.create_optimizer(1e-2, 10, 2, 0.01, layerwise_lr_decay=0.5,
                                            n_transformer_layers=1, optimizer="lamb")
  for step_grads in grads:
    optimizer.apply_gradients(zip([tf.constant(g) for g in step_grads], variables))

  multipliers = [0.5 ** 2, 0.5 ** 2, 1.0]  # layer_0 is depth 1 of 1 layer; head 3
  expected = []
  for w, n, mult, i in zip(values, names, multipliers, range(3)):
    m = v = np.zeros_like(w)
    for k, step_grads in enumerate(grads, start=1):
      norm = np.sqrt(sum((g ** 2).sum() for g in step_grads))
      g = step_grads[i] / max(norm, 1.0)  # the official global-norm clip
      lr = 1e-2 * (1 - k / 10) * min(1.0, k / 2)
      w, m, v = _numpy_lamb(w, g, m, v, k, lr * mult, 0.01, "bias" not in n)
    expected.append(w)
  for variable, value in zip(variables, expected):
    np.testing.assert_allclose(variable.numpy(), value, rtol=1e-5, atol=1e-7)

  # Model Garden's LAMB, same steps (gradients pre-clipped, constant rates
  # without layer-wise decay): the same update.
  from official.modeling.optimization import lamb  # pylint: disable=import-outside-toplevel
  ours = [tf.Variable(w, name=n) for w, n in zip(values, names)]
  theirs = [tf.Variable(w, name=n) for w, n in zip(values, names)]
  schedule = optimization.ElectraLearningRate(1e-2, 10, 0)
  mine = optimization.Lamb(schedule, weight_decay_rate=0.01)
  garden = lamb.LAMB(lambda: schedule(garden.iterations), weight_decay_rate=0.01,
                     exclude_from_weight_decay=list(optimization.EXCLUDE_FROM_WEIGHT_DECAY))
  for step_grads in grads:
    norm = np.sqrt(sum((g ** 2).sum() for g in step_grads))
    clipped = [tf.constant(g / max(norm, 1.0)) for g in step_grads]
    mine.apply_gradients(zip(clipped, ours))
    garden.apply_gradients(zip(clipped, theirs))
  for a, b in zip(ours, theirs):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)


def test_out_of_memory_names_the_hparams_to_change(tmp_path):
  def step_loop(iterator, num_steps, stop):
    raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")

  optimizer = optimization.create_optimizer(1e-3, 10, 0, 0.0)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(optimizer=optimizer),
                                       str(tmp_path), 1)
  with pytest.raises(errors.TrainingError) as error:
    train_loop.train_to_end(step_loop, None, optimizer, manager,
                            train_loop.Schedule(10, 5, 5, 5, 8),
                            tf.summary.create_noop_writer())
  message = str(error.value)
  assert "\n" not in message and "step 1" in message
  for name in ("gradient_accumulation_steps", "recompute_layers", "mixed_precision",
               "train_batch_size"):
    assert name in message
  assert not list(tmp_path.iterdir())  # nothing saved


@pytest.mark.parametrize("hparams, error", [
    ({"train_batch_size": 8, "gradient_accumulation_steps": 3},
     "hparam gradient_accumulation_steps: 3 does not divide train_batch_size 8"),
    ({"gradient_accumulation_steps": 0}, "hparam gradient_accumulation_steps: 0 must be > 0"),
    ({"optimizer": "sgd"}, "hparam optimizer: 'sgd' is not one of adamw, lamb"),
])
def test_big_batch_hparams_are_checked(hparams, error):
  with pytest.raises(ConfigError, match=error):
    PretrainingConfig.create(hparams)
  with pytest.raises(ConfigError, match=error):
    FinetuningConfig.create(hparams, task_names=["rte"])


def _start_loss_scale(job, scale):
  # (tf_keras keeps the dynamic scale in a private state object.)
  job.optimizer._loss_scale.current_loss_scale.assign(scale)  # pylint: disable=protected-access


@pytest.mark.slow
def test_accumulation_under_float16_loss_scaling():
  """Each micro-batch's loss is scaled and its gradient unscaled; the sum is
  applied once (float16 activations: agreement to float16 rounding).  Both
  runs start at loss scale 16: at the default 2^15 this tiny model's
  float16 weight gradients overflow, for the big batch on more steps than
  for its micro-batches (fewer rows summed), see docs/big_batches.md."""
  batches = _pretraining_batches(steps=1)
  plain_job = _pretraining_job(mixed_precision="float16")
  _start_loss_scale(plain_job, 16.0)
  initial = [v.numpy() for v in plain_job.model.trainable_variables]
  plain, plain_logged = _run_steps(plain_job, batches)
  accumulating = _pretraining_job(mixed_precision="float16", gradient_accumulation_steps=2)
  _start_loss_scale(accumulating, 16.0)
  for variable, value in zip(accumulating.model.trainable_variables, initial):
    variable.assign(value)
  accumulated, logged = _run_steps(accumulating, batches)
  scale = max(np.abs(p - i).max() for p, i in zip(plain, initial))
  worst = max(np.abs(a - p).max() for a, p in zip(accumulated, plain))
  assert scale > 0 and worst <= 1e-2 * scale, (worst, scale)
  np.testing.assert_allclose(logged["loss"], plain_logged["loss"], rtol=1e-3)
  assert float(accumulating.optimizer.loss_scale) == float(plain_job.optimizer.loss_scale)
