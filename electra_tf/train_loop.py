"""The step loop shared by pre-training and fine-tuning.

A job supplies a per-replica step `step_fn(batch) -> (losses, finite)`:
`losses` a dict of float32 scalars whose SUM over replicas is the global
loss, `finite` a bool scalar that is false when the step's loss or
gradients held a NaN or Inf.  `make_step_loop` runs it for a number of steps
inside one tf.function (the official iterations_per_loop) and stops at the
first faulty step; `train_to_end` drives those calls from the restored step
to the last one, logging, writing TensorBoard scalars and saving
checkpoints at their boundaries:

  * a faulty step stops the job with a `TrainingError` naming that step; no
    checkpoint is written after the fault, so the last good one stays the
    latest (float16 loss scaling is different: a step whose gradients
    overflow is skipped by the optimizer and is not a fault);
  * a checkpoint that cannot be written (full disk, unwritable directory)
    is a one-line `CheckpointError`, the previous checkpoint intact.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, Dict, Mapping, Sequence, Tuple

import tensorflow as tf

from electra_tf import checkpoints
from electra_tf import optimization

StepFn = Callable[[Mapping[str, tf.Tensor]], Tuple[Dict[str, tf.Tensor], tf.Tensor]]


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
