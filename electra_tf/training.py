"""The pre-training job: distributed input, the train step, the loop,
checkpoints and resume, logs and TensorBoard, evaluation, export.

One loop serves every tf.distribute strategy.  The global batch
`train_batch_size` is split over replicas; each worker reads its own shard
of the TFRecords (`distribute_datasets_from_function`).

Losses across replicas: every replica divides its summed MLM and
discriminator losses by the GLOBAL sums of masked_lm_weights and input_mask
(an all-reduce), so the summed replica gradients are exactly the gradient of
the official loss computed on the whole global batch on one device.  On one
device this is the official loss itself.

Generator sampling noise is drawn per example from a stateless seed
(seed, global step, global example index), so a run is reproducible and a
MirroredStrategy run sees the same noise as a one-device run on the same
global batch.  Dropout masks are drawn from (seed, step, replica)
(`modeling.dropout`), so a run resumed from a checkpoint continues exactly
as the uninterrupted run would have; the step loop itself (faults, saves,
logs) is `train_loop`'s.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Dict, Optional

import numpy as np
import tensorflow as tf
import tf_keras as keras

from electra_tf import checkpoints
from electra_tf import distribution
from electra_tf import fileio
from electra_tf import export as export_lib
from electra_tf import metrics as metrics_lib
from electra_tf import optimization
from electra_tf import pretrain_data
from electra_tf import tokenization
from electra_tf import train_loop
from electra_tf.config import PretrainingConfig
from electra_tf.modeling import dropout
from electra_tf.modeling.pretrainer import ElectraPretrainer
from electra_tf.train_loop import TrainingError, log as _log

class Pretrainer:
  """Model and optimizer for one PretrainingConfig, built under a strategy.

  `train()` / `evaluate()` read the TFRecords of the config; `train_step` is
  the per-replica step, also driven by the benchmark on synthetic batches.
  """

  def __init__(self, config: PretrainingConfig, strategy: tf.distribute.Strategy):
    self.config = config
    self.strategy = strategy
    # Reproducible initial weights: Keras initialisers without their own seed
    # draw one from Python's `random`, so all generators are seeded.
    keras.utils.set_random_seed(config.seed)
    with strategy.scope(), optimization.dtype_policy(config.mixed_precision):
      self.model = ElectraPretrainer(config)
      self.optimizer = optimization.with_loss_scaling(optimization.create_optimizer(
          learning_rate=config.learning_rate,
          num_train_steps=config.num_train_steps,
          num_warmup_steps=config.num_warmup_steps,
          weight_decay_rate=config.weight_decay_rate,
          lr_decay_power=config.lr_decay_power), config.mixed_precision)
      self.optimizer.build(self.model.trainable_variables)

  # --------------------------------------------------------------- data
  def _dataset(self, is_training: bool, start_step: int = 0
               ) -> tf.distribute.DistributedDataset:
    """Masked batches; training skips the examples of `start_step` steps."""
    config = self.config
    special = special_ids_for(config)
    global_batch = config.train_batch_size if is_training else config.eval_batch_size

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
      batch_size = context.get_per_replica_batch_size(global_batch)
      replicas_per_pipeline = context.num_replicas_in_sync // context.num_input_pipelines
      return pretrain_data.get_dataset(
          config.pretrain_tfrecords,
          batch_size=batch_size,
          skip_examples=start_step * batch_size * replicas_per_pipeline,
          max_seq_length=config.max_seq_length,
          max_predictions_per_seq=config.max_predictions_per_seq,
          mask_prob=config.mask_prob, special=special,
          is_training=is_training, seed=config.seed, input_context=context)

    return self.strategy.distribute_datasets_from_function(dataset_fn)

  # --------------------------------------------------------------- steps
  def _replica_outputs(self, batch, step, global_batch: int, training: bool):
    """Runs the model on one replica's batch with per-example sampling seeds."""
    context = tf.distribute.get_replica_context()
    local_batch = tf.shape(batch["input_ids"])[0]
    first_row = tf.cast(context.replica_id_in_sync_group * local_batch, tf.int64)
    rows = first_row + tf.range(tf.cast(local_batch, tf.int64), dtype=tf.int64)
    sample_seeds = tf.stack(
        [tf.fill(tf.shape(rows), tf.constant(self.config.seed, tf.int64)),
         tf.cast(step, tf.int64) * global_batch + rows], axis=1)  # [B, 2]
    # Global denominators of the two losses (see the module docstring).
    weight_sums = context.all_reduce(
        tf.distribute.ReduceOp.SUM,
        tf.stack([tf.reduce_sum(batch["masked_lm_weights"]),
                  tf.reduce_sum(tf.cast(batch["input_mask"], tf.float32))]))
    return self.model(batch, training=training, sample_seed=sample_seeds,
                      loss_denominators=weight_sums)

  def train_step(self, batch):
    """One replica's step: (losses, all finite) as `train_loop` expects."""
    step = self.optimizer.iterations
    replica_id = tf.distribute.get_replica_context().replica_id_in_sync_group
    with tf.GradientTape() as tape, dropout.seeded(
        dropout.step_seed(self.config.seed, step, replica_id)):
      outputs = self._replica_outputs(batch, step, self.config.train_batch_size,
                                      training=True)
      # Replica losses are already global-normalised: summing gradients over
      # replicas (what apply_gradients does) gives the global-batch gradient.
      loss = optimization.scale_loss(self.optimizer, outputs["total_loss"])
    variables = self.model.trainable_variables
    grads = optimization.unscale_gradients(self.optimizer, tape.gradient(loss, variables))
    finite = train_loop.all_finite(outputs["total_loss"], grads,
                                   loss_scaling=self.config.mixed_precision == "float16")
    self.optimizer.apply_gradients(zip(grads, variables))
    return {name: outputs[key] for name, key in self._loss_keys}, finite

  @property
  def _loss_keys(self):
    """(logged name, model output key) of the losses this objective has."""
    keys = [("loss", "total_loss"), ("mlm_loss", "mlm_loss")]
    if self.config.electra_objective:
      keys.append(("disc_loss", "disc_loss"))
    return keys

  def make_step_loop(self):
    step_fn = (tf.function(self.train_step, jit_compile=True)
               if self.config.jit_compile else self.train_step)
    return train_loop.make_step_loop(self.strategy, step_fn,
                                     [name for name, _ in self._loss_keys],
                                     self.optimizer.iterations)

  def _eval_step(self, batch):
    outputs = self._replica_outputs(batch, tf.constant(0, tf.int64),
                                    self.config.eval_batch_size, training=False)
    return outputs, batch

  # --------------------------------------------------------------- train
  def train(self, init_checkpoint: Optional[str] = None) -> int:
    """Trains to num_train_steps, resuming from model_dir; returns the step."""
    config, strategy = self.config, self.strategy
    chief = distribution.is_chief(strategy)
    checkpoint_dir = distribution.worker_dir(config.model_dir, strategy)
    checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
    manager = checkpoints.training_checkpoint_manager(
        checkpoint, checkpoint_dir, config.keep_checkpoint_max, self.optimizer.iterations)
    if manager.latest_checkpoint:
      checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
      _log(f"Resumed from {manager.latest_checkpoint} at step "
           f"{int(self.optimizer.iterations.numpy())}")
    elif init_checkpoint:
      checkpoints.restore_from_checkpoint(self.model, init_checkpoint,
                                          allow_unused=False)
      _log(f"Initialised the model from {init_checkpoint}")

    step = int(self.optimizer.iterations.numpy())
    # A resumed run continues the seeded data stream where it stopped.
    train_iterator = iter(self._dataset(is_training=True, start_step=step))
    writer = tf.summary.create_file_writer(os.path.join(config.model_dir, "train")) \
        if chief else tf.summary.create_noop_writer()
    _log(f"Training {type(self.model).__name__} on {strategy.num_replicas_in_sync} "
         f"replica(s) ({type(strategy).__name__}), global batch "
         f"{config.train_batch_size}, {config.num_train_steps} steps")
    step = train_loop.train_to_end(
        self.make_step_loop(), train_iterator, self.optimizer, manager,
        train_loop.Schedule(total_steps=config.num_train_steps,
                            log_every=config.log_every,
                            save_every=config.save_checkpoints_steps,
                            steps_per_loop=config.iterations_per_loop,
                            batch_size=config.train_batch_size), writer)
    writer.flush()
    if not chief:
      shutil.rmtree(checkpoint_dir, ignore_errors=True)
      try:  # the shared scratch parent, once the last worker is done with it
        os.rmdir(os.path.dirname(checkpoint_dir))
      except OSError:
        pass
    return step

  # --------------------------------------------------------------- eval
  def evaluate(self) -> Dict[str, float]:
    """Official eval metrics over num_eval_steps batches of the latest checkpoint."""
    config, strategy = self.config, self.strategy
    latest = tf.train.latest_checkpoint(config.model_dir)
    if latest is None:
      raise TrainingError(f"--do_eval: no checkpoint in model_dir {config.model_dir}")
    tf.train.Checkpoint(model=self.model).restore(latest).expect_partial()
    global_step = int(latest.rsplit("-", 1)[1])  # CheckpointManager's ckpt-<step>

    eval_step = tf.function(self._eval_step)

    accumulator = metrics_lib.PretrainingMetrics(config.electra_objective, config.disc_weight)
    iterator = iter(self._dataset(is_training=False))
    for _ in range(config.num_eval_steps):
      try:
        batch = next(iterator)
      except StopIteration:
        break
      outputs, batch = strategy.run(eval_step, args=(batch,))
      for replica_outputs, replica_batch in zip(
          strategy.experimental_local_results(outputs),
          strategy.experimental_local_results(batch)):
        accumulator.update({k: v.numpy() for k, v in replica_outputs.items()},
                           {k: v.numpy() for k, v in replica_batch.items()})
    results = dict(accumulator.result())
    results["global_step"] = global_step
    if distribution.is_chief(strategy):
      write_results(results, config.results_txt, config.results_json)
    for key in sorted(results):
      _log(f"  {key} = {results[key]}")
    return results


def special_ids_for(config: PretrainingConfig) -> tokenization.SpecialIds:
  """The vocab's special ids; its size must equal the hparam vocab_size."""
  vocab = tokenization.load_vocab(config.vocab_file)
  if len(vocab) != config.vocab_size:
    raise TrainingError(
        f"hparam vocab_size: {config.vocab_size} differs from the {len(vocab)} "
        f"entries of {config.vocab_file}")
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



ARCHITECTURE_KEYS = ("model_size", "vocab_size", "embedding_size", "electra_objective",
                     "untied_generator", "untied_generator_embeddings",
                     "uniform_generator", "generator_hidden_size", "generator_layers")


def check_model_dir(config: PretrainingConfig) -> None:
  """Refuses a model_dir written by a different architecture.

  model_dir/electra_config.json records the architecture of the run that
  created it; a rerun with another model size, vocab size, etc. would mix or
  fail to restore weights, so it is an error that says what differs.
  """
  path = os.path.join(config.model_dir, "electra_config.json")
  current = {key: getattr(config, key) for key in ARCHITECTURE_KEYS}
  current["discriminator"] = config.discriminator_config().to_dict()
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      recorded = json.load(f)
    differences = [f"{key}: {recorded.get(key)!r} there, {value!r} now"
                   for key, value in current.items() if recorded.get(key) != value]
    if differences:
      raise TrainingError(f"model_dir {config.model_dir} holds a run of another "
                          f"configuration ({'; '.join(differences)}); use another "
                          "--model_dir or --model_name")
  else:
    os.makedirs(config.model_dir, exist_ok=True)
    fileio.atomic_write_text(path, json.dumps(current, indent=2, sort_keys=True) + "\n")


def run(config: PretrainingConfig, *, strategy_name: str = "auto",
        tpu: Optional[str] = None, init_checkpoint: Optional[str] = None,
        export_dir: Optional[str] = None) -> Dict[str, float]:
  """The whole job: validate inputs, train, evaluate, export."""
  # Validate every input before anything is written to model_dir.
  special_ids_for(config)
  pretrain_data.check_tfrecords(config.pretrain_tfrecords, config.max_seq_length)
  # A rerun replaces the SavedModel an earlier run of the job exported.
  replace_export = bool(export_dir) and checkpoints.holds_saved_model(export_dir)
  if export_dir:
    checkpoints.check_output_dir(export_dir, "--export_dir", overwrite=replace_export)
  strategy = distribution.create_strategy(strategy_name, tpu)
  job = Pretrainer(config, strategy)
  if init_checkpoint:  # another architecture is refused before model_dir exists
    checkpoints.check_restorable(job.model, init_checkpoint, allow_unused=False)
  if distribution.is_chief(strategy):
    check_model_dir(config)
    fileio.check_writable(config.model_dir, "model_dir")
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
