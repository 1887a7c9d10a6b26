"""Checkpoints written by an earlier version (main 809aba9) still load.

The checkpoints in tests/data/checkpoints_809aba9 (see the README there) hold
model and optimizer; they must restore with every object matched and give
the outputs that version computed.
"""

import json
import pathlib

import numpy as np
import tensorflow as tf

from electra_tf import optimization
from electra_tf import train_loop
from electra_tf.finetune import job as finetune_job
from electra_tf.finetune import task_builder
from electra_tf.finetune.config import FinetuningConfig
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.model import build_model

DATA = pathlib.Path(__file__).resolve().parent / "data" / "checkpoints_809aba9"


def test_pretraining_checkpoint_restores_model_optimizer_and_outputs():
  directory = DATA / "pretraining"
  config = PretrainingConfig.create(json.loads((directory / "hparams.json").read_text()))
  trainer = train_loop.Trainer(
      tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: build_model(config),
      lambda model: optimization.create_optimizer(
          config.learning_rate, config.num_train_steps, config.num_warmup_steps,
          config.weight_decay_rate), seed=config.seed)
  assert trainer.restore_latest(str(directory)) == str(directory / "ckpt-3")
  assert int(trainer.optimizer.iterations.numpy()) == 3
  slots = [v for v in trainer.optimizer.variables() if "adam_m" in v.name]
  assert len(slots) == len(trainer.model.trainable_variables)
  assert all(np.any(v.numpy() != 0) for v in slots[:5])  # trained, not fresh
  expected = dict(np.load(directory / "expected.npz"))
  batch = {key: tf.constant(expected[key]) for key in (
      "input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
      "masked_lm_weights")}
  outputs = trainer.model(batch, training=False,
                          sample_seed=tf.constant([[3, i] for i in range(4)], tf.int64))
  np.testing.assert_array_equal(outputs["sampled_ids"], expected["sampled_ids"])
  for key in ("mlm_logits", "disc_logits", "total_loss"):
    np.testing.assert_allclose(outputs[key], expected[key], rtol=1e-6, atol=1e-6,
                               err_msg=key)


def test_finetuning_checkpoint_restores_model_optimizer_and_outputs():
  directory = DATA / "finetuning"
  config = FinetuningConfig.create(json.loads((directory / "hparams.json").read_text()),
                                   task_names=["rte", "sts"], data_dir="/nonexistent",
                                   model_dir=str(directory))
  tasks = task_builder.get_tasks(config, None)
  job = finetune_job.TrialJob(config, tasks, tf.distribute.OneDeviceStrategy("/cpu:0"),
                              1, num_train_steps=10)
  job.initialize(None)  # restores trial_1's latest checkpoint
  assert int(job.optimizer.iterations.numpy()) == 2
  expected = dict(np.load(directory / "expected.npz"))
  batch = {key: tf.constant(value) for key, value in expected.items()
           if key not in ("rte_logits", "sts_predictions")}
  np.testing.assert_allclose(job.model.task_outputs(batch, "rte")["logits"],
                             expected["rte_logits"], rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(job.model.task_outputs(batch, "sts")["predictions"],
                             expected["sts_predictions"], rtol=1e-6, atol=1e-6)
