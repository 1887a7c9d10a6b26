"""The train step and the step loop, written once for both jobs.

`Trainer` holds the model and optimizer built under a tf.distribute strategy
and runs the train step on the job's loss function
`loss_fn(batch, step[, part]) -> (loss, logged)`: `loss` a float32 scalar
whose SUM over replicas is the global loss, `logged` a dict of float32
scalars (summed over replicas).  Dropout is seeded by (seed, step, replica).
With `gradient_accumulation_steps` N, a replica batch [B, ...] runs as N
micro-batches [B/N, ...] whose losses sum to the batch's (`BatchPart`), one
update of the summed float32 gradients.  `train_to_end` runs, logs and
checkpoints; faults, preemption and accumulation: docs/operations.md, docs/big_batches.md,
docs/performance.md ("Strategies, precision and XLA").
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf
import tf_keras as keras

from electra_tf import checkpoints
from electra_tf import config as config_lib
from electra_tf import fileio
from electra_tf import optimization
from electra_tf import stop_points
from electra_tf.errors import ConfigError, TrainingError
from electra_tf.modeling import dropout

StepFn = Callable[[Mapping[str, tf.Tensor]], Tuple[Dict[str, tf.Tensor], tf.Tensor]]


@dataclasses.dataclass(frozen=True)
class BatchPart:
  """Where a loss_fn's (micro-)batch lies in its replica's batch of the step.

  replica_batch: the replica's whole batch of the step ([B, ...] tensors),
    e.g. for loss denominators over all of it.
  first_row: int64 scalar, the row of replica_batch where the micro-batch
    starts (k * B / N for micro-batch k; 0 without accumulation).
  global_sums: the SUM over all replicas of `replica_sums_fn(replica_batch)`
    (the same nest) when the step was given a replica_sums_fn (e.g. the
    global batch's named loss denominators), else None.
  """
  replica_batch: Mapping[str, tf.Tensor]
  first_row: tf.Tensor
  global_sums: Any = None


LossFn = Callable[[Mapping[str, tf.Tensor], tf.Tensor, BatchPart],
                  Tuple[tf.Tensor, Dict[str, tf.Tensor]]]
# replica batch -> float32 tensors (a nest, e.g. a name -> tensor dict) that
# the loss needs summed over replicas.
ReplicaSumsFn = Callable[[Mapping[str, tf.Tensor]], Any]


# The checkpoint entry of the training input's position (a tf.data iterator).
INPUT_KEY = "train_input"


class Preempted(Exception):
  """A stop signal arrived; a checkpoint of the current step was saved.

  `exit_status`: 128 + the signal's number (143 SIGTERM, 130 SIGINT)."""

  def __init__(self, signal_name: str, step: int, checkpoint: str):
    super().__init__(f"stopped by {signal_name} at step {step}; {checkpoint} is saved: "
                     "rerun the same command to resume")
    number = getattr(signal.Signals, signal_name, signal.SIGTERM)
    self.exit_status = 128 + int(number)

  def report(self, program: str) -> int:
    """Prints the one line on stderr; returns the exit status."""
    print(f"{program}: {self}", file=sys.stderr, flush=True)
    return self.exit_status


class StopSignals:
  """While active (a context manager), SIGTERM and SIGINT only set `received`
  (the name of the first one), for the loop to stop at its next boundary."""

  SIGNALS = (signal.SIGTERM, signal.SIGINT)

  def __init__(self):
    self.received: Optional[str] = None
    self._previous = {}

  def _handle(self, signum, frame):  # pylint: disable=unused-argument
    self.received = self.received or signal.Signals(signum).name

  def __enter__(self) -> "StopSignals":
    if threading.current_thread() is threading.main_thread():
      self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
    return self

  def __exit__(self, *exc) -> None:
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)


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


# ------------------------------------------------------- model_dir, run records
@contextlib.contextmanager
def holding_model_dir(model_dir: str, chief: bool = True) -> Iterator[None]:
  """The chief's hold on its model_dir while it writes there: checked
  writable, locked for this job alone, cleared of what killed runs left
  (`checkpoints.remove_interrupted_writes`)."""
  if not chief:
    yield
    return
  fileio.check_writable(model_dir, "model_dir")
  with fileio.exclusive_use(model_dir, "model_dir"):
    for path in checkpoints.remove_interrupted_writes(model_dir):
      log(f"Removed {path}, left by an interrupted earlier run")
    yield


def check_run_record(model_dir: str, name: str, record: Mapping[str, object]) -> bool:
  """Raises ConfigError, saying what differs, when model_dir's record `name`
  (JSON) differs from `record`; returns whether a record exists."""
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


def keep_vocab_beside(model_dir: str, vocab_file: str) -> None:
  """Copies the vocab into model_dir (once), so that every later step
  (evaluation, fine-tuning, export, conversion) finds it beside the
  checkpoints; a different vocab there is refused."""
  target = os.path.join(model_dir, config_lib.VOCAB_NAME)
  with open(vocab_file, "rb") as f:
    vocab = f.read()
  if not os.path.exists(target):
    fileio.atomic_write_bytes(target, vocab)
  elif not os.path.samefile(target, vocab_file):
    with open(target, "rb") as f:
      if f.read() != vocab:
        raise ConfigError(f"model_dir {model_dir} holds a run of another vocab "
                          f"({target} differs from {vocab_file}); use another --model_dir")


def record_training_run(model_dir: str, name: str, hparams: Mapping[str, object],
                        from_step: int, command: str) -> None:
  """Adds a run to the training record `name` of model_dir (JSON, {"runs":
  [{"from_step", "command", "hparams"}]}) unless it goes on with the last
  run's hparams (a resume): what the checkpoints were trained with, read by
  the model card of an export (electra_tf/hf.py)."""
  runs = config_lib.training_runs(model_dir, name)
  hparams = json.loads(json.dumps(hparams, default=str))  # as JSON gives it back
  if runs and runs[-1].get("hparams") == hparams:
    return
  runs.append({"from_step": from_step, "command": command, "hparams": hparams})
  os.makedirs(model_dir, exist_ok=True)
  fileio.atomic_write_text(os.path.join(model_dir, name),
                           json.dumps({"runs": runs}, indent=1, sort_keys=True) + "\n")


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
  """Whether a step is free of NaN/Inf (bool scalar); under dynamic loss
  scaling only the loss counts (the optimizer skips overflowing gradients)."""
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
    build_optimizer: model -> its optimizer; None to evaluate or export only.
    seed: seeds the initial weights and the dropout masks.
    mixed_precision: None (float32), "bfloat16" or "float16" (dynamic loss
      scaling); variables stay float32.
    jit_compile: XLA-compile the per-replica forward and backward pass.
    gradient_accumulation_steps: micro-batches per replica batch (it must
      divide the per-replica batch)."""

  def __init__(self, strategy: tf.distribute.Strategy,
               build_model: Callable[[], keras.Model],
               build_optimizer: Optional[Callable[[keras.Model], keras.optimizers.Optimizer]],
               *, seed: int, mixed_precision: Optional[str] = None,
               jit_compile: bool = False, gradient_accumulation_steps: int = 1):
    self.strategy = strategy
    self.seed = seed
    self.mixed_precision = mixed_precision
    self.jit_compile = jit_compile
    self.gradient_accumulation_steps = gradient_accumulation_steps
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

  def train_step(self, loss_fn: LossFn, batch: Mapping[str, tf.Tensor],
                 replica_sums_fn: Optional[ReplicaSumsFn] = None,
                 replica_gradients=None) -> Tuple[Dict[str, tf.Tensor], tf.Tensor]:
    """One replica's step: (logged scalars, all finite); `replica_gradients`
    as built by `self.replica_gradients(loss_fn)`, None: built here, uncompiled."""
    step = self.optimizer.iterations
    context = tf.distribute.get_replica_context()
    seed = dropout.step_seed(self.seed, step, context.replica_id_in_sync_group)
    global_sums = None
    if replica_sums_fn is not None:
      global_sums = context.all_reduce(tf.distribute.ReduceOp.SUM, replica_sums_fn(batch))
    if replica_gradients is None:
      replica_gradients = self.replica_gradients(loss_fn, compile_xla=False)
    loss, logged, grads = replica_gradients(batch, tf.identity(step), seed, global_sums)
    variables = self.model.trainable_variables
    finite = all_finite(loss, grads, loss_scaling=self.mixed_precision == "float16")
    # apply_gradients sums the replicas' gradients: each replica's loss is
    # its share of the global loss, so the sum is the global-batch gradient.
    self.optimizer.apply_gradients(zip(grads, variables))
    return logged, finite

  def replica_gradients(self, loss_fn: LossFn, compile_xla: Optional[bool] = None):
    """(batch, step, dropout seed, global_sums) -> (loss, logged, true-scale
    gradients) of one replica's batch, with no cross-replica op: plain or
    accumulated over micro-batches.  compile_xla (default: jit_compile, except
    under TPUStrategy, which compiles the whole step) wraps it in a
    tf.function(jit_compile=True)."""

    def gradients(batch, step, seed, global_sums):
      if self.gradient_accumulation_steps == 1:
        return self._gradients(
            loss_fn, batch, step,
            BatchPart(batch, tf.constant(0, tf.int64), global_sums), seed)
      return self._accumulated_gradients(loss_fn, batch, step, seed, global_sums)

    if compile_xla is None:
      compile_xla = self.jit_compile and not isinstance(self.strategy, tf.distribute.TPUStrategy)
    return (tf.function(gradients, jit_compile=True, autograph=False) if compile_xla
            else gradients)

  def _gradients(self, loss_fn: LossFn, batch: Mapping[str, tf.Tensor], step: tf.Tensor,
                 part: BatchPart, seed: tf.Tensor):
    """(loss, logged, true-scale gradients) of `batch` under dropout `seed`."""
    with tf.GradientTape() as tape, dropout.seeded(seed):
      loss, logged = loss_fn(batch, step, part)
      scaled_loss = scale_loss(self.optimizer, loss)
    grads = tape.gradient(scaled_loss, self.model.trainable_variables)
    return loss, logged, unscale_gradients(self.optimizer, grads)

  def _accumulated_gradients(self, loss_fn: LossFn, batch: Mapping[str, tf.Tensor],
                             step: tf.Tensor, seed: tf.Tensor,
                             global_sums: Any = None):
    """(loss, logged, gradients) summed over the N micro-batches of `batch`,
    run one after another; micro-batch k: rows [k B/N, (k+1) B/N), dropout
    seed fold_in(seed, k); gradients: dense float32 sums."""
    n = self.gradient_accumulation_steps
    rows = next(iter(batch.values())).shape[0]
    if rows is not None and rows % n:
      raise TrainingError(
          f"gradient_accumulation_steps {n} does not divide the per-replica batch "
          f"of {rows} rows (train_batch_size / number of replicas)")
    micro = rows // n if rows is not None else tf.shape(next(iter(batch.values())))[0] // n
    parts = {key: tf.reshape(value, tf.concat([[n, micro], tf.shape(value)[1:]], 0))
             for key, value in batch.items()}

    # One trace serves micro-batch 0 and the loop's body (a nested function:
    # tracing the model's forward and backward twice doubled the step's trace).
    @tf.function(autograph=False)
    def micro_step(k):
      micro_batch = {key: value[k] for key, value in parts.items()}
      part = BatchPart(batch, tf.cast(k, tf.int64) * tf.cast(micro, tf.int64), global_sums)
      loss, logged, grads = self._gradients(
          loss_fn, micro_batch, step, part,
          tf.random.experimental.stateless_fold_in(seed, tf.cast(k, tf.int64)))
      return loss, logged, optimization.dense_gradients(grads)

    # Micro-batch 0 outside the loop: it fixes which variables have a
    # gradient (None stays None, as in the plain step).
    loss, logged, grads = micro_step(tf.constant(0))
    present = [i for i, g in enumerate(grads) if g is not None]

    def body(k, loss_sum, logged_sum, grad_sums):
      loss, logged, grads = micro_step(k)
      return (k + 1, loss_sum + loss,
              {name: logged_sum[name] + logged[name] for name in logged_sum},
              [total + grads[i] for total, i in zip(grad_sums, present)])

    _, loss, logged, sums = tf.while_loop(
        lambda k, *_: k < n, body,
        (tf.constant(1), loss, logged, [grads[i] for i in present]),
        parallel_iterations=1, maximum_iterations=n - 1)
    for i, total in zip(present, sums):
      grads[i] = total
    return loss, logged, grads

  def step_loop(self, loss_fn: LossFn, loss_names: Sequence[str],
                replica_sums_fn: Optional[ReplicaSumsFn] = None):
    """`make_step_loop` of this trainer's step with `loss_fn` (and
    `replica_sums_fn`, see BatchPart)."""
    step_fn = functools.partial(self.train_step, loss_fn, replica_sums_fn=replica_sums_fn,
                                replica_gradients=self.replica_gradients(loss_fn))
    return make_step_loop(self.strategy, step_fn, loss_names, self.optimizer.iterations)

  def restore_latest(self, directory: str) -> Optional[str]:
    """Restores the latest intact checkpoint of `directory` (model, and
    optimizer when training), damaged newer ones set aside; returns its path
    or None."""
    latest, damaged = checkpoints.set_aside_damaged(directory)
    for prefix, why in damaged:
      log(f"WARNING: checkpoint {prefix} is damaged ({why}); its files are kept as "
          f"{os.path.basename(prefix)}.*{checkpoints.DAMAGED_SUFFIX}, never read again")
    if damaged:
      log(f"WARNING: resuming from {latest}, the newest intact checkpoint")
    if latest:
      status = self.checkpoint.restore(latest)
      if self.optimizer is not None:
        status.assert_existing_objects_matched()
      # A saved input position (INPUT_KEY) is restored by the job.
      status.expect_partial()
    return latest

  def train(self, loss_fn: LossFn, loss_names: Sequence[str], iterator,
            directory: str, keep_checkpoints: int, schedule: "Schedule", writer,
            fault_context: str = "", input_state=None,
            replica_sums_fn: Optional[ReplicaSumsFn] = None) -> int:
    """Trains from the optimizer's step to schedule.total_steps, saving
    `ckpt-<step>` in `directory` (with `input_state` as INPUT_KEY when given);
    returns the step."""
    checkpoint = self.checkpoint
    if input_state is not None:
      checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                       **{INPUT_KEY: input_state})
      checkpoint.save_counter.assign(self.checkpoint.save_counter)
    manager = checkpoints.training_checkpoint_manager(
        checkpoint, directory, keep_checkpoints, self.optimizer.iterations)
    return train_to_end(self.step_loop(loss_fn, loss_names, replica_sums_fn), iterator,
                        self.optimizer, manager, schedule, writer, fault_context)


# ------------------------------------------------------------ the loop
def make_step_loop(strategy: tf.distribute.Strategy, step_fn: StepFn,
                   loss_names: Sequence[str], iterations: tf.Variable):
  """A tf.function (iterator, num_steps, stop) -> (losses, faulty_step, stopping).

  When any worker's `stop` (bool scalar) is true, no step runs and
  `stopping` is true everywhere; else up to `num_steps` steps run.  `losses`:
  the last step's, summed over replicas; `faulty_step`: the 1-based global
  step with a NaN/Inf, where the loop stopped, or -1."""

  def replica_step(batch):
    losses, finite = step_fn(batch)
    return losses, tf.cast(tf.logical_not(finite), tf.int32)

  # autograph off here and in every graph function of the library: no Python
  # control flow on tensors (its conversion took 3 of a tiny run's 11 CPU-s)
  @tf.function(autograph=False)
  def step_loop(iterator, num_steps, stop):
    stopping = strategy.reduce(
        tf.distribute.ReduceOp.SUM,
        strategy.run(lambda: tf.cast(stop, tf.int32)), axis=None) > 0

    def run_step(done, losses, faulty_step):
      del losses  # the last step's are returned
      replica_losses, replica_faulty = strategy.run(replica_step, args=(next(iterator),))
      losses = {name: strategy.reduce(tf.distribute.ReduceOp.SUM,
                                      replica_losses[name], axis=None)
                for name in loss_names}
      num_faulty = strategy.reduce(tf.distribute.ReduceOp.SUM, replica_faulty, axis=None)
      faulty_step = tf.where(num_faulty > 0, tf.cast(iterations, tf.int64), faulty_step)
      return done + 1, losses, faulty_step

    def more_steps(done, losses, faulty_step):
      del losses
      return tf.logical_not(stopping) & (done < num_steps) & (faulty_step < 0)

    _, losses, faulty_step = tf.while_loop(
        more_steps, run_step,
        (tf.zeros_like(num_steps), {name: tf.constant(0.0) for name in loss_names},
         tf.constant(-1, tf.int64)))
    return losses, faulty_step, stopping

  return step_loop


@dataclasses.dataclass(frozen=True)
class Schedule:
  """When the loop stops to log, save and evaluate (all in steps)."""
  total_steps: int
  log_every: int
  save_every: int
  steps_per_loop: int  # the official iterations_per_loop
  batch_size: int  # global, for sequences/s
  # Every eval_every steps before the end (0: never), after the checkpoint of
  # that step is saved: evaluate(step); and at the step a run resumes from,
  # if it is one (the stopped run may have been killed before or during it).
  eval_every: int = 0
  evaluate: Optional[Callable[[int], None]] = None


def _evaluates_at(schedule: Schedule, step: int) -> bool:
  return (schedule.evaluate is not None and schedule.eval_every > 0 and
          step % schedule.eval_every == 0 and step < schedule.total_steps)


def _next_multiple(step: int, every: int) -> int:
  return (step // every + 1) * every


def train_to_end(step_loop, iterator, optimizer, manager: tf.train.CheckpointManager,
                 schedule: Schedule, writer, fault_context: str = "") -> int:
  """Runs `step_loop` from the optimizer's step to total_steps; returns it.

  `fault_context` (e.g. " of trial 2") is appended to the step in errors.
  """
  step = int(optimizer.iterations.numpy())
  progress = ProgressLog(schedule.total_steps, schedule.batch_size, step)
  if _evaluates_at(schedule, step) and step > 0:
    schedule.evaluate(step)
  with StopSignals() as signals:
    while step < schedule.total_steps:
      boundary = min(_next_multiple(step, schedule.log_every),
                     _next_multiple(step, schedule.save_every),
                     _next_multiple(step, schedule.eval_every or schedule.total_steps),
                     step + schedule.steps_per_loop, schedule.total_steps)
      try:
        losses, faulty_step, stopping = step_loop(
            iterator, tf.constant(boundary - step),
            tf.constant(signals.received is not None))
      except tf.errors.ResourceExhaustedError:
        raise TrainingError(out_of_memory_message(step + 1, fault_context)) from None
      if bool(stopping.numpy()):
        writer.flush()
        if manager.latest_checkpoint is None or not manager.latest_checkpoint.endswith(
            f"-{step}"):
          checkpoints.save_checkpoint(manager, step)
        raise Preempted(signals.received or "a stop signal to another worker", step,
                        manager.latest_checkpoint)
      step = _after_loop(losses, faulty_step, optimizer, manager, schedule, writer,
                         progress, fault_context)
  writer.flush()
  return step


def out_of_memory_message(step: int, fault_context: str = "") -> str:
  """The one line of a step that ran out of device memory: what to lower."""
  return (f"out of device memory at step {step}{fault_context}: raise hparam "
          "gradient_accumulation_steps (same update, smaller micro-batches), set "
          "recompute_layers=true (recompute activations in the backward pass), set "
          "mixed_precision to bfloat16 or float16, or lower train_batch_size "
          "(docs/big_batches.md)")


def _after_loop(losses, faulty_step, optimizer, manager, schedule: Schedule, writer,
                progress: ProgressLog, fault_context: str) -> int:
  """Checks, logs and saves after a step_loop call; returns the new step."""
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
    stop_points.reached("step_logged")
  evaluating = _evaluates_at(schedule, step)
  if step % schedule.save_every == 0 or step == schedule.total_steps or evaluating:
    writer.flush()
    checkpoints.save_checkpoint(manager, step)
    log(f"Saved checkpoint {manager.latest_checkpoint}")
  if evaluating:
    schedule.evaluate(step)
  return step
