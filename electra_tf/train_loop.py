"""The train step and the step loop, written once for both jobs.

`Trainer` holds what a training job builds under its tf.distribute strategy
(the model and the optimizer, with the mixed-precision dtype policy and, for
float16, dynamic loss scaling) and runs THE train step: the job supplies only
its loss function

    loss_fn(batch, step) -> (loss, logged)

for one replica's batch: `loss` the float32 scalar to differentiate (its SUM
over replicas must be the global loss) and `logged` a dict of float32
scalars to log (summed over replicas too).  The step takes the gradient
under seeded dropout (`modeling.dropout`: masks from (seed, step, replica),
so a resumed run continues exactly), scales and unscales it for float16,
checks it is finite, and applies it.

`make_step_loop` runs the step for a number of steps inside one tf.function
(the official iterations_per_loop) and stops at the first faulty step;
`train_to_end` drives those calls from the restored step to the last one,
logging, writing TensorBoard scalars and saving checkpoints at their
boundaries:

  * a faulty step stops the job with a `TrainingError` naming that step; no
    checkpoint is written after the fault, so the last good one stays the
    latest (float16 loss scaling is different: a step whose gradients
    overflow is skipped by the optimizer and is not a fault);
  * a checkpoint that cannot be written (full disk, unwritable directory)
    is a one-line `CheckpointError`, the previous checkpoint intact.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf
import tf_keras as keras

from electra_tf import checkpoints
from electra_tf import fileio
from electra_tf import optimization
from electra_tf.modeling import dropout

StepFn = Callable[[Mapping[str, tf.Tensor]], Tuple[Dict[str, tf.Tensor], tf.Tensor]]
LossFn = Callable[[Mapping[str, tf.Tensor], tf.Tensor],
                  Tuple[tf.Tensor, Dict[str, tf.Tensor]]]


class TrainingError(ValueError):
  """The run cannot go on (non-finite loss, unusable model_dir); one line."""


def format_duration(seconds: float) -> str:
  seconds = int(round(max(seconds, 0)))
  hours, rest = divmod(seconds, 3600)
  minutes, secs = divmod(rest, 60)
  return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressLog:
  """The official ETAHook's line and more: step/total, %, steps/s, seq/s, ETA."""

  def __init__(self, total_steps: int, batch_size: int, start_step: int):
    self._total = total_steps
    self._batch = batch_size
    self._start_step = start_step
    self._start_time = time.time()
    self._last_step = start_step
    self._last_time = self._start_time

  def line(self, step: int, values: Dict[str, float]) -> str:
    now = time.time()
    recent_sps = (step - self._last_step) / max(now - self._last_time, 1e-9)
    overall_sps = (step - self._start_step) / max(now - self._start_time, 1e-9)
    self._last_step, self._last_time = step, now
    eta = (self._total - step) / overall_sps if overall_sps > 0 else float("inf")
    parts = [f"step {step}/{self._total} = {100.0 * step / self._total:.1f}%",
             f"{recent_sps:.2f} steps/s", f"{recent_sps * self._batch:.1f} seq/s",
             f"elapsed {format_duration(now - self._start_time)}",
             f"ETA {format_duration(eta) if math.isfinite(eta) else '?'}"]
    parts += [f"{name} {value:.4g}" for name, value in values.items()]
    return " - ".join(parts)


def log(message: str = "") -> None:
  print(message, flush=True)


# ------------------------------------------------------------ run records
def check_run_record(model_dir: str, name: str, record: Mapping[str, object]) -> bool:
  """Refuses a model_dir whose record `name` (JSON) differs from `record`.

  A job records in its model_dir what its checkpoints depend on (the
  architecture, the fine-tuning hparams); a rerun with other values would mix
  or fail to restore them, so it is a one-line error that says what differs.
  Returns whether a record exists.
  """
  path = os.path.join(model_dir, name)
  if not os.path.isfile(path):
    return False
  with open(path, encoding="utf-8") as f:
    recorded = json.load(f)
  current = json.loads(json.dumps(record))  # as JSON would give it back
  differences = [f"{key}: {recorded.get(key)!r} there, {value!r} now"
                 for key, value in current.items() if recorded.get(key) != value]
  if differences:
    raise TrainingError(f"model_dir {model_dir} holds a run of other hparams "
                        f"({'; '.join(differences)}); use another --model_dir")
  return True


def write_run_record(model_dir: str, name: str, record: Mapping[str, object]) -> None:
  """Writes the record `check_run_record` checks (atomically; once)."""
  path = os.path.join(model_dir, name)
  if not os.path.isfile(path):
    os.makedirs(model_dir, exist_ok=True)
    fileio.atomic_write_text(path, json.dumps(record, indent=2, sort_keys=True) + "\n")


# ------------------------------------------------------------ the step
def scale_loss(optimizer: keras.optimizers.Optimizer, loss: tf.Tensor) -> tf.Tensor:
  """The loss times the current loss scale (unchanged without loss scaling)."""
  if isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer):
    return optimizer.get_scaled_loss(loss)
  return loss


def unscale_gradients(optimizer: keras.optimizers.Optimizer,
                      gradients: List[Optional[tf.Tensor]]) -> List[Optional[tf.Tensor]]:
  """Gradients of a `scale_loss` loss back at true scale."""
  if isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer):
    return optimizer.get_unscaled_gradients(gradients)
  return gradients


def all_finite(loss: tf.Tensor, gradients: Sequence[tf.Tensor],
               loss_scaling: bool) -> tf.Tensor:
  """Whether a step is free of NaN/Inf (bool scalar).

  With dynamic loss scaling (float16) overflowing gradients are the
  optimizer's business (it skips the step), so only the loss counts.
  """
  finite = tf.reduce_all(tf.math.is_finite(loss))
  if not loss_scaling:
    finite = tf.logical_and(finite, tf.math.is_finite(tf.linalg.global_norm(
        [g for g in gradients if g is not None])))
  return finite


class Trainer:
  """A model and its optimizer under a strategy, and the one train step.

  Args:
    strategy: the tf.distribute strategy everything is built under.
    build_model: () -> the Keras model (built, variables named).
    build_optimizer: model -> its optimizer; None for a job that only
      evaluates or exports.
    seed: seeds the initial weights (Keras initialisers without their own
      seed draw from Python's `random`, so every generator is seeded) and
      the dropout masks.
    mixed_precision: None (float32), "bfloat16" or "float16" (with dynamic
      loss scaling); variables stay float32.
    jit_compile: XLA-compile the per-replica step.

  `checkpoint` is `tf.train.Checkpoint(model=..., optimizer=...)`, the layout
  of every training checkpoint of the project.
  """

  def __init__(self, strategy: tf.distribute.Strategy,
               build_model: Callable[[], keras.Model],
               build_optimizer: Optional[Callable[[keras.Model], keras.optimizers.Optimizer]],
               *, seed: int, mixed_precision: Optional[str] = None,
               jit_compile: bool = False):
    self.strategy = strategy
    self.seed = seed
    self.mixed_precision = mixed_precision
    self.jit_compile = jit_compile
    keras.utils.set_random_seed(seed)
    with strategy.scope(), optimization.dtype_policy(mixed_precision):
      self.model = build_model()
      self.optimizer = None
      if build_optimizer is not None:
        self.optimizer = optimization.with_loss_scaling(build_optimizer(self.model),
                                                        mixed_precision)
        self.optimizer.build(self.model.trainable_variables)
    tracked = {"model": self.model}
    if self.optimizer is not None:
      tracked["optimizer"] = self.optimizer
    self.checkpoint = tf.train.Checkpoint(**tracked)

  def train_step(self, loss_fn: LossFn, batch: Mapping[str, tf.Tensor]
                 ) -> Tuple[Dict[str, tf.Tensor], tf.Tensor]:
    """One replica's step: (logged scalars, all finite) as `make_step_loop` expects."""
    step = self.optimizer.iterations
    replica_id = tf.distribute.get_replica_context().replica_id_in_sync_group
    with tf.GradientTape() as tape, dropout.seeded(
        dropout.step_seed(self.seed, step, replica_id)):
      loss, logged = loss_fn(batch, step)
      scaled_loss = scale_loss(self.optimizer, loss)
    variables = self.model.trainable_variables
    grads = unscale_gradients(self.optimizer, tape.gradient(scaled_loss, variables))
    finite = all_finite(loss, grads, loss_scaling=self.mixed_precision == "float16")
    # apply_gradients sums the replicas' gradients: each replica's loss is
    # its share of the global loss, so the sum is the global-batch gradient.
    self.optimizer.apply_gradients(zip(grads, variables))
    return logged, finite

  def step_loop(self, loss_fn: LossFn, loss_names: Sequence[str]):
    """`make_step_loop` of this trainer's step with `loss_fn`."""
    step_fn = functools.partial(self.train_step, loss_fn)
    if self.jit_compile:
      step_fn = tf.function(step_fn, jit_compile=True)
    return make_step_loop(self.strategy, step_fn, loss_names, self.optimizer.iterations)

  def restore_latest(self, directory: str) -> Optional[str]:
    """Restores the latest checkpoint of `directory` (model, and optimizer
    when training); returns its path, None when there is none."""
    latest = tf.train.latest_checkpoint(directory)
    if latest:
      status = self.checkpoint.restore(latest)
      if self.optimizer is None:
        status.expect_partial()
      else:
        status.assert_existing_objects_matched()
    return latest

  def train(self, loss_fn: LossFn, loss_names: Sequence[str], iterator,
            directory: str, keep_checkpoints: int, schedule: "Schedule", writer,
            fault_context: str = "") -> int:
    """Trains from the optimizer's step to schedule.total_steps, saving
    `ckpt-<step>` checkpoints in `directory` (`train_to_end`); returns the step."""
    manager = checkpoints.training_checkpoint_manager(
        self.checkpoint, directory, keep_checkpoints, self.optimizer.iterations)
    return train_to_end(self.step_loop(loss_fn, loss_names), iterator, self.optimizer,
                        manager, schedule, writer, fault_context)


# ------------------------------------------------------------ the loop
def make_step_loop(strategy: tf.distribute.Strategy, step_fn: StepFn,
                   loss_names: Sequence[str], iterations: tf.Variable):
  """A tf.function (iterator, num_steps) -> (losses, faulty_step).

  Runs up to `num_steps` steps; `losses` are those of the last step run
  (summed over replicas), `faulty_step` the 1-based global step at which a
  replica reported a NaN/Inf, where the loop stopped, or -1.
  """

  def replica_step(batch):
    losses, finite = step_fn(batch)
    return losses, tf.cast(tf.logical_not(finite), tf.int32)

  @tf.function
  def step_loop(iterator, num_steps):
    losses = {name: tf.constant(0.0) for name in loss_names}
    faulty_step = tf.constant(-1, tf.int64)
    for _ in tf.range(num_steps):
      replica_losses, replica_faulty = strategy.run(replica_step, args=(next(iterator),))
      losses = {name: strategy.reduce(tf.distribute.ReduceOp.SUM,
                                      replica_losses[name], axis=None)
                for name in loss_names}
      num_faulty = strategy.reduce(tf.distribute.ReduceOp.SUM, replica_faulty, axis=None)
      if num_faulty > 0:
        faulty_step = tf.cast(iterations, tf.int64)
        break
    return losses, faulty_step

  return step_loop


@dataclasses.dataclass(frozen=True)
class Schedule:
  """When the loop stops to log and save (all in steps)."""
  total_steps: int
  log_every: int
  save_every: int
  steps_per_loop: int  # the official iterations_per_loop
  batch_size: int  # global, for sequences/s


def _next_multiple(step: int, every: int) -> int:
  return (step // every + 1) * every


def train_to_end(step_loop, iterator, optimizer, manager: tf.train.CheckpointManager,
                 schedule: Schedule, writer, fault_context: str = "") -> int:
  """Runs `step_loop` from the optimizer's step to total_steps; returns it.

  `fault_context` (e.g. " of trial 2") is appended to the step in errors.
  """
  step = int(optimizer.iterations.numpy())
  progress = ProgressLog(schedule.total_steps, schedule.batch_size, step)
  while step < schedule.total_steps:
    boundary = min(_next_multiple(step, schedule.log_every),
                   _next_multiple(step, schedule.save_every),
                   step + schedule.steps_per_loop, schedule.total_steps)
    losses, faulty_step = step_loop(iterator, tf.constant(boundary - step))
    values = {name: float(value.numpy()) for name, value in losses.items()}
    faulty_step = int(faulty_step.numpy())
    if faulty_step >= 0:
      raise TrainingError(
          f"NaN or Inf in the loss or gradients at step {faulty_step}"
          f"{fault_context} (losses {values}); stopped without saving, the last "
          f"good checkpoint {manager.latest_checkpoint} stays the latest")
    step = int(optimizer.iterations.numpy())
    values["lr"] = float(
        optimization.base_optimizer(optimizer).current_learning_rate())
    if step % schedule.log_every == 0 or step == schedule.total_steps:
      log(progress.line(step, values))
      with writer.as_default(step=step):
        for name, value in values.items():
          tf.summary.scalar(name, value)
    if step % schedule.save_every == 0 or step == schedule.total_steps:
      writer.flush()
      checkpoints.save_checkpoint(manager, step)
      log(f"Saved checkpoint {manager.latest_checkpoint}")
  writer.flush()
  return step
