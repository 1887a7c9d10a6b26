"""The pre-training job: distributed input, the loss, the loop, evaluation, export.

`run(config, ...)` checks every input before anything is written, then trains
(`PretrainingJob.train`), evaluates (`evaluate`) and exports.  One loop serves
every tf.distribute strategy (`train_loop.Trainer`: the step, checkpoints,
resume).  The global batch `train_batch_size` is split over replicas; each
worker reads its own shard of the TFRecords (`distribute_datasets_from_function`).

Losses across replicas: every replica divides its summed MLM and
discriminator losses by the GLOBAL sums of masked_lm_weights and input_mask
(an all-reduce), so the summed replica gradients are exactly the gradient of
the official loss computed on the whole global batch on one device.  On one
device this is the official loss itself.

Generator sampling noise is drawn per example from a stateless seed: (seed,
step * global batch + row) in training, (seed, -(eval batch + 1) * global
batch + row) in evaluation, so a run is reproducible, a resumed run draws
what the uninterrupted one would have, and a MirroredStrategy run sees the
same noise as a one-device run on the same global batch.

What a run leaves in model_dir: `ckpt-<step>` checkpoints, `electra_config.json`
(the architecture; a rerun with another is refused), TensorBoard scalars in
`train/` and `eval/`, and in `results/`: the official `unsup_results.txt`,
its JSON twin and `curves.png` (training losses, learning rate, eval metrics).
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from electra_tf import checkpoints
from electra_tf import curves
from electra_tf import distribution
from electra_tf import export as export_lib
from electra_tf import fileio
from electra_tf import optimization
from electra_tf import stop_points
from electra_tf import tokenization
from electra_tf import train_loop
from electra_tf.pretrain import data as pretrain_data
from electra_tf.pretrain import metrics as metrics_lib
from electra_tf.pretrain import verdicts
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.model import build_model
from electra_tf.train_loop import TrainingError, log as _log

RUN_RECORD = "electra_config.json"


class PretrainingJob:
  """The model and optimizer of one PretrainingConfig, built under a strategy.

  `train()` / `evaluate()` read the config's TFRecords; `loss` is the
  per-replica loss the shared train step differentiates, also driven by the
  benchmark on synthetic batches (`make_step_loop`).
  """

  def __init__(self, config: PretrainingConfig, strategy: tf.distribute.Strategy):
    self.config = config
    self.strategy = strategy
    self.trainer = train_loop.Trainer(
        strategy, lambda: build_model(config),
        lambda model: optimization.create_optimizer(
            learning_rate=config.learning_rate,
            num_train_steps=config.num_train_steps,
            num_warmup_steps=config.num_warmup_steps,
            weight_decay_rate=config.weight_decay_rate,
            lr_decay_power=config.lr_decay_power),
        seed=config.seed, mixed_precision=config.mixed_precision,
        jit_compile=config.jit_compile)
    self.model = self.trainer.model
    self.optimizer = self.trainer.optimizer

  # --------------------------------------------------------------- data
  def _dataset(self, is_training: bool, start_step: int = 0
               ) -> tf.distribute.DistributedDataset:
    """Masked batches; training skips the examples of `start_step` steps."""
    config = self.config
    special = special_ids_for(config)
    global_batch = config.train_batch_size if is_training else config.eval_batch_size
    files = config.pretrain_tfrecords if is_training else config.eval_files

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
      batch_size = context.get_per_replica_batch_size(global_batch)
      replicas_per_pipeline = context.num_replicas_in_sync // context.num_input_pipelines
      return pretrain_data.get_dataset(
          files, batch_size=batch_size,
          skip_examples=start_step * batch_size * replicas_per_pipeline,
          max_seq_length=config.max_seq_length,
          max_predictions_per_seq=config.max_predictions_per_seq,
          mask_prob=config.mask_prob, special=special,
          is_training=is_training, seed=config.seed, input_context=context)

    return self.strategy.distribute_datasets_from_function(dataset_fn)

  # --------------------------------------------------------------- steps
  def _replica_outputs(self, batch, first_counter, training: bool):
    """The model on one replica's batch; row r of the global batch samples
    with the noise of (seed, first_counter + r)."""
    context = tf.distribute.get_replica_context()
    local_batch = tf.shape(batch["input_ids"])[0]
    first_row = tf.cast(context.replica_id_in_sync_group * local_batch, tf.int64)
    rows = first_row + tf.range(tf.cast(local_batch, tf.int64), dtype=tf.int64)
    sample_seeds = tf.stack(
        [tf.fill(tf.shape(rows), tf.constant(self.config.seed, tf.int64)),
         tf.cast(first_counter, tf.int64) + rows], axis=1)  # [B, 2]
    # Global denominators of the two losses (see the module docstring).
    weight_sums = context.all_reduce(
        tf.distribute.ReduceOp.SUM,
        tf.stack([tf.reduce_sum(batch["masked_lm_weights"]),
                  tf.reduce_sum(tf.cast(batch["input_mask"], tf.float32))]))
    return self.model(batch, training=training, sample_seed=sample_seeds,
                      loss_denominators=weight_sums)

  def loss(self, batch, step):
    """The shared step's loss_fn: (total loss, logged losses) of one replica.

    Replica losses are global-normalised: their sum over replicas is the
    official loss of the global batch.
    """
    outputs = self._replica_outputs(
        batch, tf.cast(step, tf.int64) * self.config.train_batch_size, training=True)
    return outputs["total_loss"], {name: outputs[key] for name, key in self._loss_keys}

  @property
  def _loss_keys(self):
    """(logged name, model output key) of the losses this objective has."""
    keys = [("loss", "total_loss"), ("mlm_loss", "mlm_loss")]
    if self.config.electra_objective:
      keys.append(("disc_loss", "disc_loss"))
    return keys

  def make_step_loop(self):
    return self.trainer.step_loop(self.loss, [name for name, _ in self._loss_keys])

  # --------------------------------------------------------------- train
  def train(self, init_checkpoint: Optional[str] = None,
            until_step: Optional[int] = None) -> int:
    """Trains to num_train_steps, resuming from model_dir; returns the step.

    `until_step` stops earlier, at a step of the same schedule (the learning
    rate still decays to 0 at num_train_steps); a rerun continues from there.
    """
    config, strategy = self.config, self.strategy
    chief = distribution.is_chief(strategy)
    checkpoint_dir = distribution.worker_dir(config.model_dir, strategy)
    latest = self.trainer.restore_latest(checkpoint_dir)
    if latest:
      _log(f"Resumed from {latest} at step {int(self.optimizer.iterations.numpy())}")
    elif init_checkpoint:
      checkpoints.restore_from_checkpoint(self.model, init_checkpoint, allow_unused=False)
      _log(f"Initialised the model from {init_checkpoint}")

    step = int(self.optimizer.iterations.numpy())
    # A resumed run continues the seeded data stream where it stopped.
    train_iterator = iter(self._dataset(is_training=True, start_step=step))
    writer = tf.summary.create_file_writer(os.path.join(config.model_dir, "train")) \
        if chief else tf.summary.create_noop_writer()
    _log(f"Training {type(self.model).__name__} on {strategy.num_replicas_in_sync} "
         f"replica(s) ({type(strategy).__name__}), global batch "
         f"{config.train_batch_size}, {config.num_train_steps} steps")
    step = self.trainer.train(
        self.loss, [name for name, _ in self._loss_keys], train_iterator,
        checkpoint_dir, config.keep_checkpoint_max,
        train_loop.Schedule(total_steps=min(until_step or config.num_train_steps,
                                            config.num_train_steps),
                            log_every=config.log_every,
                            save_every=config.save_checkpoints_steps,
                            steps_per_loop=config.iterations_per_loop,
                            batch_size=config.train_batch_size), writer)
    writer.flush()
    if chief:
      self.plot_curves()
    else:
      shutil.rmtree(checkpoint_dir, ignore_errors=True)
      try:  # the shared scratch parent, once the last worker is done with it
        os.rmdir(os.path.dirname(checkpoint_dir))
      except OSError:
        pass
    return step

  def plot_curves(self) -> str:
    return curves.plot_run(self.config.model_dir,
                           title=f"pre-training {self.config.model_name}")

  # --------------------------------------------------------------- eval
  def evaluate(self) -> Dict[str, float]:
    """Official eval metrics over num_eval_steps batches of the latest checkpoint.

    Also logs them to TensorBoard (model_dir/eval), redraws curves.png and
    prints the discriminator's verdicts on the first eval example.
    """
    config, strategy = self.config, self.strategy
    latest = tf.train.latest_checkpoint(config.model_dir)
    if latest is None:
      raise TrainingError(f"--do_eval: no checkpoint in model_dir {config.model_dir}")
    tf.train.Checkpoint(model=self.model).restore(latest).expect_partial()
    global_step = int(latest.rsplit("-", 1)[1])  # CheckpointManager's ckpt-<step>

    @tf.function
    def eval_step(batch, index):
      def replica_fn(replica_batch):
        first = -(tf.cast(index, tf.int64) + 1) * config.eval_batch_size
        return self._replica_outputs(replica_batch, first, training=False), replica_batch
      return strategy.run(replica_fn, args=(batch,))

    accumulator = metrics_lib.PretrainingMetrics(config.electra_objective, config.disc_weight)
    iterator = iter(self._dataset(is_training=False))
    shown = None
    for index in range(config.num_eval_steps):
      try:
        batch = next(iterator)
      except StopIteration:
        break
      outputs, batch = eval_step(batch, tf.constant(index, tf.int64))
      for replica_outputs, replica_batch in zip(
          strategy.experimental_local_results(outputs),
          strategy.experimental_local_results(batch)):
        replica_outputs = {k: v.numpy() for k, v in replica_outputs.items()}
        replica_batch = {k: v.numpy() for k, v in replica_batch.items()}
        accumulator.update(replica_outputs, replica_batch)
        if shown is None:
          shown = (replica_outputs, replica_batch)
      stop_points.reached("eval_batch")
    results = dict(accumulator.result())
    results["global_step"] = global_step
    for key in sorted(results):
      _log(f"  {key} = {results[key]}")
    if shown is not None and config.electra_objective:
      vocab = tokenization.load_vocab(config.vocab_file)
      _log(verdicts.LEGEND)
      _log(verdicts.render(shown[0], shown[1], 0, {i: t for t, i in vocab.items()}))
    if distribution.is_chief(strategy):
      write_results(results, config.results_txt, config.results_json)
      with tf.summary.create_file_writer(os.path.join(config.model_dir, "eval")).as_default(
          step=global_step):
        for key, value in results.items():
          if key != "global_step":
            tf.summary.scalar(key, value)
      self.plot_curves()
    return results


def special_ids_for(config: PretrainingConfig) -> tokenization.SpecialIds:
  """The vocab's special ids; its size must equal the hparam vocab_size."""
  vocab = tokenization.load_vocab(config.vocab_file)
  tokenization.check_vocab_size(vocab, config.vocab_size, config.vocab_file)
  return tokenization.special_ids(vocab, config.vocab_file)


def write_results(results: Dict[str, float], txt_path: str, json_path: str) -> None:
  """Writes eval results as `key = value` lines and as one flat JSON object."""
  os.makedirs(os.path.dirname(txt_path), exist_ok=True)
  lines = "".join(f"{key} = {results[key]}\n" for key in sorted(results))
  fileio.atomic_write_text(txt_path, lines)
  fileio.atomic_write_text(json_path, json.dumps({k: _plain(v) for k, v in results.items()},
                                                 sort_keys=True) + "\n")


def _plain(value):
  return value.item() if isinstance(value, np.generic) else value


def run(config: PretrainingConfig, *, strategy_name: str = "auto",
        tpu: Optional[str] = None, init_checkpoint: Optional[str] = None,
        export_dir: Optional[str] = None) -> Dict[str, float]:
  """The whole job: validate inputs, train, evaluate, export."""
  # Validate every input before anything is written to model_dir.
  special_ids_for(config)
  pretrain_data.check_tfrecords(config.pretrain_tfrecords, config.max_seq_length)
  if config.do_eval and config.eval_files != config.pretrain_tfrecords:
    pretrain_data.check_tfrecords(config.eval_files, config.max_seq_length)
  # A rerun replaces the SavedModel an earlier run of the job exported.
  replace_export = bool(export_dir) and checkpoints.holds_saved_model(export_dir)
  if export_dir:
    checkpoints.check_output_dir(export_dir, "--export_dir", overwrite=replace_export)
  strategy = distribution.create_job_strategy(config, strategy_name, tpu)
  job = PretrainingJob(config, strategy)
  if init_checkpoint:  # another architecture is refused before model_dir exists
    checkpoints.check_restorable(job.model, init_checkpoint, allow_unused=False)
  if distribution.is_chief(strategy):
    train_loop.check_run_record(config.model_dir, RUN_RECORD, config.architecture())
    fileio.check_writable(config.model_dir, "model_dir")
    train_loop.write_run_record(config.model_dir, RUN_RECORD, config.architecture())
    for path in checkpoints.remove_interrupted_writes(config.model_dir):
      _log(f"Removed {path}, left by an interrupted earlier run")
  results: Dict[str, float] = {}
  if config.do_train:
    results["global_step"] = job.train(init_checkpoint)
  if config.do_eval:
    _log(f"Evaluating the latest checkpoint on {config.num_eval_steps} batches")
    results = job.evaluate()
  if export_dir and distribution.is_chief(strategy):
    _log(f"Exporting the SavedModel to {export_dir}")
    export_lib.export_saved_model(job.model, export_dir, overwrite=replace_export)
    _log(f"Exported the SavedModel to {export_dir}")
  return results
