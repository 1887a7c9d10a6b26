"""The pre-training job: distributed input, the loss, the loop, evaluation, export.

`run(config, ...)` checks every input before anything is written, then trains
(`PretrainingJob.train`), evaluates (`evaluate`) and exports.  How replicas
and workers share the global batch and its loss, the sampling noise and what
a run leaves in model_dir: docs/pretraining.md and docs/operations.md.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from electra_tf import checkpoints
from electra_tf import config as config_lib
from electra_tf import curves
from electra_tf import distribution
from electra_tf import fileio
from electra_tf import hf
from electra_tf import optimization
from electra_tf import saved_model
from electra_tf import stop_points
from electra_tf import tokenization
from electra_tf import train_loop
from electra_tf.errors import TrainingError
from electra_tf.modeling import encoder as encoder_lib
from electra_tf.pretrain import data as pretrain_data
from electra_tf.pretrain import metrics as metrics_lib
from electra_tf.pretrain import model as model_lib
from electra_tf.pretrain import records_info
from electra_tf.pretrain import verdicts
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.train_loop import log as _log

RUN_RECORD = config_lib.ARCHITECTURE_RECORD  # the architecture; a rerun with another is refused
# What the checkpoints were trained with (each run's hparams and command): a
# rerun's defaults, and what the model card of a transformers export states.
TRAINING_RECORD = config_lib.TRAINING_RECORD


class PretrainingJob:
  """The model and optimizer of one PretrainingConfig, built under a strategy.

  `loss` is the per-replica loss the shared train step differentiates."""

  def __init__(self, config: PretrainingConfig, strategy: tf.distribute.Strategy,
               vocab: Optional[Dict[str, int]] = None):
    """vocab: the config's vocab (`load_checked_vocab`) when the caller has
    read it; else it is read, once, when first needed (synthetic-batch
    callers such as the benchmark never need it)."""
    self.config = config
    self.strategy = strategy
    self._vocab = vocab
    self._eval_step = None  # evaluate()'s step function, once traced
    self.objective = model_lib.objective(config)
    special = self.special_ids if self.objective.needs_special_ids else None

    def build():
      model = model_lib.build_model(config, special)
      if config.recompute_layers:
        encoder_lib.recompute_layers(model)
      return model

    self.trainer = train_loop.Trainer(
        strategy, build,
        lambda model: optimization.create_optimizer(
            learning_rate=config.learning_rate,
            num_train_steps=config.num_train_steps,
            num_warmup_steps=config.num_warmup_steps,
            weight_decay_rate=config.weight_decay_rate,
            lr_decay_power=config.lr_decay_power,
            clip_per_replica=config.clip_per_replica,
            optimizer=config.optimizer),
        seed=config.seed, mixed_precision=config.mixed_precision,
        jit_compile=config.jit_compile,
        gradient_accumulation_steps=config.gradient_accumulation_steps)
    self.model = self.trainer.model
    self.optimizer = self.trainer.optimizer

  # --------------------------------------------------------------- data
  @property
  def vocab(self) -> Dict[str, int]:
    """The config's vocab (token -> id), read once."""
    if self._vocab is None:
      self._vocab = load_checked_vocab(self.config)
    return self._vocab

  @property
  def special_ids(self) -> tokenization.SpecialIds:
    return tokenization.special_ids(self.vocab, self.config.vocab_file)

  def _dataset(self, is_training: bool, start_step: int = 0
               ) -> tf.distribute.DistributedDataset:
    """Masked batches; training skips the examples of `start_step` steps.

    Every worker reads the one stream a single process reads and keeps its
    replicas' rows: replica r of R takes rows [r G/R, (r+1) G/R) of global
    batch s, the stream's examples [s G, (s+1) G)."""
    config = self.config
    global_batch = config.train_batch_size if is_training else config.eval_batch_size

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
      batch_size = context.get_per_replica_batch_size(global_batch)
      dataset = self._pipeline(is_training, batch_size, start_step * global_batch)
      if context.num_input_pipelines == 1:
        return dataset
      replicas = context.num_replicas_in_sync
      replicas_per_pipeline = replicas // context.num_input_pipelines
      return dataset.enumerate().filter(
          lambda index, batch: (index % replicas) // replicas_per_pipeline ==
          context.input_pipeline_id).map(lambda index, batch: batch)

    return self.strategy.distribute_datasets_from_function(dataset_fn)

  def _pipeline(self, is_training: bool, batch_size: int, skip_examples: int = 0
                ) -> tf.data.Dataset:
    """The one stream of masked batches of `batch_size` (`get_dataset`)."""
    config = self.config
    return pretrain_data.get_dataset(
        config.pretrain_tfrecords if is_training else config.eval_files,
        batch_size=batch_size, skip_examples=skip_examples,
        max_seq_length=config.max_seq_length,
        max_predictions_per_seq=config.max_predictions_per_seq,
        mask_prob=config.mask_prob, special=self.special_ids,
        is_training=is_training, seed=config.seed)

  def _train_input(self, latest: Optional[str], step: int):
    """(iterator of training batches from `step`, its checkpointable state or None).

    Resumes by restoring the saved iterator position when the checkpoint has
    one, else by skipping the examples of the steps done."""
    config, strategy = self.config, self.strategy
    skip = step * config.train_batch_size
    if not saves_input_position(strategy):
      if step:
        _log(f"Skipping the {skip} examples of {step} steps ({type(strategy).__name__} "
             "does not save the input position)")
      return iter(self._dataset(is_training=True, start_step=step)), None
    per_replica = config.train_batch_size // strategy.num_replicas_in_sync

    def local_iterator(skip_examples):
      with tf.device("/cpu:0"):
        return iter(self._pipeline(True, per_replica, skip_examples))

    def restored_iterator():
      iterator = local_iterator(0)
      position = pretrain_data.InputPosition(iterator)
      tf.train.Checkpoint(**{train_loop.INPUT_KEY: position}).read(latest).expect_partial()
      return iterator, position

    reason = f"{latest} holds no input position"
    if latest and input_position_saved(latest):
      try:
        # A position saved with another per-replica batch (a changed
        # train_batch_size or replica count) restores, then fails at its first
        # batch: try one on a copy first.
        next(restored_iterator()[0])
        iterator, position = restored_iterator()
        _log(f"Restored the input position of step {step} from {latest}")
        return LocalInput(strategy, iterator), position
      except tf.errors.OpError:
        reason = (f"the input position in {latest} does not fit this run's input: its batch "
                  "per replica, records or sequence length changed, or a version that read "
                  "files in another order saved it")
    if step:
      _log(f"Skipping the {skip} examples of {step} steps ({reason})")
    iterator = local_iterator(skip)
    return LocalInput(strategy, iterator), pretrain_data.InputPosition(iterator)

  # --------------------------------------------------------------- steps
  def _replica_outputs(self, batch, first_counter, training: bool,
                       part: Optional[train_loop.BatchPart] = None):
    """The model on one replica's batch; row r of the global batch samples
    with the noise of (seed, first_counter + r).

    `part`: where `batch` lies in the replica's batch (gradient accumulation;
    None: the whole of it).  Loss denominators are `part.global_sums`, else
    all-reduced here (eval)."""
    context = tf.distribute.get_replica_context()
    whole = batch if part is None else part.replica_batch
    local_batch = tf.shape(batch["input_ids"])[0]
    replica_batch = tf.shape(whole["input_ids"])[0]
    first_row = tf.cast(context.replica_id_in_sync_group * replica_batch, tf.int64)
    if part is not None:
      first_row += part.first_row
    rows = first_row + tf.range(tf.cast(local_batch, tf.int64), dtype=tf.int64)
    sample_seeds = tf.stack(
        [tf.fill(tf.shape(rows), tf.constant(self.config.seed, tf.int64)),
         tf.cast(first_counter, tf.int64) + rows], axis=1)  # [B, 2]
    # Denominators of the losses (docs/pretraining.md, Distribution): global ones, or
    # with clip_per_replica the replica's own; both over whole batches.
    weight_sums = None
    if not self.config.clip_per_replica:
      weight_sums = part.global_sums if part is not None else None
      if weight_sums is None:
        weight_sums = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                         self.model.denominators(whole))
    elif part is not None:
      weight_sums = self.model.denominators(whole)
    return self.model(batch, training=training, sample_seed=sample_seeds,
                      loss_denominators=weight_sums)

  @property
  def replica_sums_fn(self):
    """The shared step's replica_sums_fn: the named loss denominators of a
    replica's batch (`denominators`), which the step sums over replicas
    outside the XLA-compiled part; None with clip_per_replica (each replica
    normalises by its own batch)."""
    return None if self.config.clip_per_replica else self.model.denominators

  def loss(self, batch, step, part: Optional[train_loop.BatchPart] = None):
    """The shared step's loss_fn: (total loss, logged losses) of one replica
    (or micro-batch `part`); summed over replicas, the official loss of the
    global batch."""
    outputs = self._replica_outputs(
        batch, tf.cast(step, tf.int64) * self.config.train_batch_size, training=True,
        part=part)
    logged = {name: outputs[key] for name, key in self._loss_keys}
    if self.config.clip_per_replica:
      # Per-replica means, summed by the step: log their mean.
      replicas = tf.distribute.get_replica_context().num_replicas_in_sync
      logged = {name: value / replicas for name, value in logged.items()}
    return outputs["total_loss"], logged

  @property
  def _loss_keys(self):
    """(logged name, model output key) of the losses this objective has."""
    return [("loss", "total_loss")] + [(name, name) for name in self.objective.loss_names]

  def make_step_loop(self):
    return self.trainer.step_loop(self.loss, [name for name, _ in self._loss_keys],
                                  self.replica_sums_fn)

  # --------------------------------------------------------------- train
  def train(self, init_checkpoint: Optional[str] = None,
            until_step: Optional[int] = None, command: str = "") -> int:
    """Trains to num_train_steps (or `until_step`, on the same schedule),
    resuming from model_dir; records the run in TRAINING_RECORD; returns the step."""
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
    if chief:
      train_loop.record_training_run(config.model_dir, TRAINING_RECORD,
                                     hf.card_hparams(config), step, command)
    # A resumed run continues the seeded data stream where it stopped.
    train_iterator, input_state = self._train_input(latest, step)
    writer = tf.summary.create_file_writer(os.path.join(config.model_dir, "train")) \
        if chief else tf.summary.create_noop_writer()
    _log(f"Training {type(self.model).__name__} on {strategy.num_replicas_in_sync} "
         f"replica(s) ({type(strategy).__name__}), global batch "
         f"{config.train_batch_size}, {config.num_train_steps} steps")
    for line in start_warnings(config):
      _log(line)
    try:
      step = self.trainer.train(
          self.loss, [name for name, _ in self._loss_keys], train_iterator,
          checkpoint_dir, config.keep_checkpoint_max,
          train_loop.Schedule(total_steps=min(until_step or config.num_train_steps,
                                              config.num_train_steps),
                              log_every=config.log_every,
                              save_every=config.save_checkpoints_steps,
                              steps_per_loop=config.iterations_per_loop,
                              batch_size=config.train_batch_size,
                              eval_every=config.eval_every_steps if config.do_eval else 0,
                              evaluate=lambda step: self.evaluate()), writer,
          input_state=input_state, replica_sums_fn=self.replica_sums_fn)
    except tf.errors.OpError as e:
      # A corrupt record stops the job before any checkpoint of its step.
      kept = tf.train.latest_checkpoint(checkpoint_dir)
      bad = pretrain_data.bad_record_error(e, "; stopped without saving: " + (
          f"the last good checkpoint {kept} stays the latest" if kept else
          "no checkpoint was written"))
      if bad is None:
        raise
      raise bad from None
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
    path = curves.plot_run(self.config.model_dir,
                           title=f"pre-training {self.config.model_name}")
    _log(f"Drew the curves in {path}")
    return path

  # --------------------------------------------------------------- eval
  def evaluate(self) -> Dict[str, float]:
    """Official eval metrics over num_eval_steps batches of the latest checkpoint,
    logged to TensorBoard, curves.png and the verdicts on the first example."""
    config, strategy = self.config, self.strategy
    if tf.train.latest_checkpoint(config.model_dir) is None:
      raise TrainingError(f"--do_eval: no checkpoint in model_dir {config.model_dir}")
    latest = checkpoints.resolve_checkpoint(config.model_dir)  # read whole
    tf.train.Checkpoint(model=self.model).restore(latest).expect_partial()
    global_step = checkpoints.training_step(latest)

    if self._eval_step is None:  # traced once, whatever the number of evaluations

      @tf.function(autograph=False)
      def eval_step(batch, index):
        def replica_fn(replica_batch):
          first = eval_first_counter(tf.cast(index, tf.int64), config.eval_batch_size)
          return self._replica_outputs(replica_batch, first, training=False), replica_batch
        return strategy.run(replica_fn, args=(batch,))

      self._eval_step = eval_step

    held_out = not reads_training_records(config)
    _log(f"Evaluating {latest} on {config.num_eval_steps} batches of {config.eval_files}"
         + ("" if held_out else " (the TRAINING records: set hparam eval_tfrecords to "
            "held-out records for a fair measure)"))
    accumulator = metrics_lib.PretrainingMetrics.for_objective(self.objective)
    iterator = iter(self._dataset(is_training=False))
    progress = train_loop.ProgressLog(config.num_eval_steps, config.eval_batch_size, 0)
    report_every = max(1, config.num_eval_steps // 10)
    shown = None
    for index in range(config.num_eval_steps):
      try:
        batch = next(iterator)
      except StopIteration:
        break
      except tf.errors.OpError as e:
        bad = pretrain_data.bad_record_error(e)
        if bad is None:
          raise
        raise bad from None
      outputs, batch = self._eval_step(batch, tf.constant(index, tf.int64))
      # Replica losses are shares of the global batch's (see `loss`): their
      # sum, or with clip_per_replica their mean, is the batch's loss.
      accumulator.add_batch_loss(float(strategy.reduce(
          tf.distribute.ReduceOp.MEAN if config.clip_per_replica else tf.distribute.ReduceOp.SUM,
          outputs["total_loss"], axis=None)))
      for replica_outputs, replica_batch in zip(
          strategy.experimental_local_results(outputs),
          strategy.experimental_local_results(batch)):
        replica_outputs = {k: v.numpy() for k, v in replica_outputs.items()}
        replica_batch = {k: v.numpy() for k, v in replica_batch.items()}
        accumulator.update(replica_outputs, replica_batch)
        if shown is None:
          shown = (replica_outputs, replica_batch)
      stop_points.reached("eval_batch")
      if (index + 1) % report_every == 0 and index + 1 < config.num_eval_steps:
        _log("  eval " + progress.line(index + 1, {}))
    results = dict(accumulator.result())
    results["global_step"] = global_step
    for key in sorted(results):
      _log(f"  {key} = {results[key]}")
    if shown is not None and self.objective.has_discriminator:
      _log(verdicts.LEGEND)
      _log(verdicts.render(shown[0], shown[1], 0, {i: t for t, i in self.vocab.items()}))
    if distribution.is_chief(strategy):
      write_results(results, evaluation_record(config, latest, held_out), config)
      with tf.summary.create_file_writer(os.path.join(config.model_dir, "eval")).as_default(
          step=global_step):
        for key, value in results.items():
          if key != "global_step":
            tf.summary.scalar(key, value)
      self.plot_curves()
    return results


def record_hparams(config: PretrainingConfig) -> Dict[str, str]:
  """The records the run reads, by the hparam that names them."""
  records = {"pretrain_tfrecords": config.pretrain_tfrecords} if config.do_train else {}
  if config.do_eval and config.eval_files not in records.values():
    records["eval_tfrecords" if config.eval_tfrecords else "pretrain_tfrecords"] = \
        config.eval_files
  return records


def start_notes(config: PretrainingConfig) -> List[str]:
  """What a run took from elsewhere than the command: a rerun's recorded
  hparams (and the values changed), values read from the records."""
  lines = config.rerun.lines() if config.rerun else []
  if "max_seq_length" in config.inferred:
    lines.append(f"max_seq_length: {config.max_seq_length}, the length of the records "
                 f"{config.pretrain_tfrecords}")
  return lines


def start_warnings(config: PretrainingConfig) -> List[str]:
  """What a user should know before the first step: the total loss's parts,
  and a warm-up that covers most of the run."""
  lines = []
  summary = model_lib.objective(config).loss_summary()
  if summary:
    lines.append(summary)
  if config.num_warmup_steps > config.num_train_steps / 2:
    peak = float(tf.reduce_max(optimization.learning_rate_at(
        tf.range(1, config.num_train_steps + 1), config.learning_rate,
        config.num_train_steps, config.num_warmup_steps, config.lr_decay_power)))
    lines.append(
        f"WARNING: hparam num_warmup_steps {config.num_warmup_steps} covers most of the "
        f"{config.num_train_steps}-step run: the learning rate peaks at {peak:.3g}, not "
        f"{config.learning_rate:g}; a warm-up of about 10% of num_train_steps "
        f"({max(1, config.num_train_steps // 10)}) fits it")
  return lines


def eval_first_counter(index, eval_batch_size: int):
  """The sampling-noise counter of eval batch `index`'s first row (ints or int64
  tensors): eval batches count down from -1, training rows up from 0."""
  return -(index + 1) * eval_batch_size


def saves_input_position(strategy: tf.distribute.Strategy) -> bool:
  """Whether training checkpoints hold the input pipeline's position: one
  worker's tf.data iterator can be saved; distributed iterators (multi-worker,
  TPU) cannot and resume by skipping examples."""
  return isinstance(strategy, (tf.distribute.OneDeviceStrategy, tf.distribute.MirroredStrategy))


def input_position_saved(checkpoint: str) -> bool:
  return tf.train.load_checkpoint(checkpoint).has_tensor(
      f"{train_loop.INPUT_KEY}/.ATTRIBUTES/py_state")


class LocalInput:
  """The training batches of a one-worker strategy from one tf.data iterator
  (`next` inside the step loop): the per-replica batches of a step are the
  iterator's next `num_replicas_in_sync` batches, in replica order, as
  `distribute_datasets_from_function` hands them out."""

  def __init__(self, strategy: tf.distribute.Strategy, iterator):
    self.strategy = strategy
    self.iterator = iterator

  def __iter__(self):
    return self

  def __next__(self):
    batches = [next(self.iterator) for _ in range(self.strategy.num_replicas_in_sync)]
    if len(batches) == 1:
      return batches[0]
    return self.strategy.experimental_distribute_values_from_function(
        lambda context: batches[context.replica_id_in_sync_group])


def load_checked_vocab(config: PretrainingConfig) -> Dict[str, int]:
  """The config's vocab file (token -> id); its size must equal the hparam
  vocab_size and it must hold the special tokens."""
  vocab = tokenization.load_vocab(config.vocab_file)
  tokenization.check_vocab_size(vocab, config.vocab_size, config.vocab_file)
  tokenization.special_ids(vocab, config.vocab_file)
  return vocab


def reads_training_records(config: PretrainingConfig) -> bool:
  """Whether evaluation reads records the run trains on (the same patterns,
  or a file both match)."""
  if config.eval_files == config.pretrain_tfrecords:
    return True
  return bool(set(map(os.path.abspath, records_info.local_files(config.eval_files))) &
              set(map(os.path.abspath, records_info.local_files(config.pretrain_tfrecords))))


def evaluation_record(config: PretrainingConfig, checkpoint: str,
                      held_out: bool) -> Dict[str, object]:
  """What an evaluation measured (hf.EVALUATION_KEYS): the checkpoint, the
  records (patterns, files, build records' sha256), whether they are
  held out from training, the examples read, and when (UTC)."""
  return {"checkpoint": checkpoint,
          "eval_records": records_info.build_summary(config.eval_files),
          "held_out": held_out,
          "eval_examples": config.num_eval_steps * config.eval_batch_size,
          "evaluated_at": datetime.datetime.now(datetime.timezone.utc).isoformat(
              timespec="seconds")}


EVAL_HISTORY = "eval_history.json"  # in results/: every evaluation, oldest first


def write_results(results: Dict[str, float], evaluation: Dict[str, object],
                  config: PretrainingConfig) -> None:
  """Writes an evaluation: the official `key = value` lines of its metrics
  (results_txt), the metrics and `evaluation` as one JSON object
  (results_json, the latest), and that object appended to EVAL_HISTORY."""
  os.makedirs(os.path.dirname(config.results_txt), exist_ok=True)
  lines = "".join(f"{key} = {results[key]}\n" for key in sorted(results))
  fileio.atomic_write_text(config.results_txt, lines)
  entry = {**{k: _plain(v) for k, v in results.items()}, **evaluation}
  fileio.atomic_write_text(config.results_json, json.dumps(entry, sort_keys=True) + "\n")
  history_path = os.path.join(os.path.dirname(config.results_json), EVAL_HISTORY)
  history = []
  if os.path.isfile(history_path):
    with open(history_path, encoding="utf-8") as f:
      history = json.load(f)["evaluations"]
  fileio.atomic_write_text(history_path, json.dumps(
      {"evaluations": history + [entry]}, indent=1, sort_keys=True) + "\n")


def _plain(value):
  return value.item() if isinstance(value, np.generic) else value


def run(config: PretrainingConfig, *, strategy_name: str = "auto",
        tpu: Optional[str] = None, init_checkpoint: Optional[str] = None,
        export_dir: Optional[str] = None, export_text: bool = True,
        export_hf: Optional[str] = None, command: str = "") -> Dict[str, float]:
  """The whole job: validate inputs, train, evaluate, export (the text
  signature too when export_text).  Nothing is written to model_dir before
  every check has passed."""
  for line in start_notes(config):
    _log(line)
  vocab = load_checked_vocab(config)  # the run's one read of the vocab file
  records = record_hparams(config)
  for hparam, patterns in records.items():  # the records meet the vocab and casing
    pretrain_data.find_tfrecords(patterns)
    records_info.check_built_with(patterns, hparam, config.vocab_file, config.do_lower_case)
  # A rerun replaces the SavedModel an earlier run of the job exported.
  replace_export = bool(export_dir) and checkpoints.holds_saved_model(export_dir)
  if export_dir:
    checkpoints.check_output_dir(export_dir, "--export_dir", overwrite=replace_export)
  if export_hf:
    hf.check_exportable(config, "--export_hf")
    checkpoints.check_output_dir(export_hf, "--export_hf")
  strategy = distribution.create_job_strategy(config, strategy_name, tpu)
  for patterns in records.values():  # ... the length, and ids within the vocab
    pretrain_data.check_tfrecords(patterns, config.max_seq_length, len(vocab))
  job = PretrainingJob(config, strategy, vocab)
  if init_checkpoint:  # another architecture is refused before model_dir exists
    checkpoints.check_restorable(job.model, init_checkpoint, allow_unused=False)
  chief = distribution.is_chief(strategy)
  if chief:
    train_loop.check_run_record(config.model_dir, RUN_RECORD, config.architecture())
  with train_loop.holding_model_dir(config.model_dir, chief):
    if chief:
      train_loop.keep_vocab_beside(config.model_dir, config.vocab_file)
      train_loop.write_run_record(config.model_dir, RUN_RECORD, config.architecture())
    results: Dict[str, float] = {}
    try:
      if config.do_train:
        results["global_step"] = job.train(init_checkpoint, command=command)
      if config.do_eval:
        results = job.evaluate()
    except tf.errors.UnavailableError as e:
      lost = distribution.lost_worker_error(e, strategy)
      if lost is None:
        raise
      raise lost from None
    if export_dir and chief:
      _log(f"Exporting the SavedModel to {export_dir}")
      saved_model.export_saved_model(
          job.model, export_dir, overwrite=replace_export,
          tokenizer=(tokenization.FullTokenizer(config.vocab_file, config.do_lower_case,
                                                    vocab=vocab)
                         if export_text else None),
          max_seq_length=config.max_seq_length)
      _log(f"Exported the SavedModel to {export_dir}")
    if export_hf and chief:
      parts = {"discriminator": config.encoder_config(),
               "generator": config.generator_config()}
      values = {name: variable.numpy() for name, variable in
                checkpoints.named_variables(job.model).items()}
      provenance = hf.Provenance(
          config_lib.training_runs(config.model_dir),
          checkpoints.training_step(tf.train.latest_checkpoint(config.model_dir) or ""),
          results if config.do_eval else None, command, config.model_dir)
      for folder in hf.export_model(values, parts, config.effective_embedding_size,
                                    config.vocab_file, config.do_lower_case, export_hf,
                                    provenance):
        _log(f"Exported the transformers model {folder}")
  return results
