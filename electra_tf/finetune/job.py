"""The fine-tuning job (official run_finetuning.py): trials of train + eval.

`run(config, ...)` checks every input and reads every data file first, so a
bad flag, hparam or data row stops the job before anything is written.  Then
each trial t = 1..num_trials (seed + t - 1) builds a `FinetuningModel` whose
encoder comes from the initial checkpoint (`initial_checkpoint`), trains all
tasks jointly as official and evaluates every task, writing the result files
(outputs.py) to model_dir/results/.  Joint training, trials, model_dir's
layout, resuming and the featurized-data cache: docs/finetuning.md.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import json
import os
import re
import shutil
import zipfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from electra_tf import checkpoints
from electra_tf import config as config_lib
from electra_tf import curves
from electra_tf import distribution
from electra_tf import fileio
from electra_tf import optimization
from electra_tf import stop_points
from electra_tf import tokenization
from electra_tf import train_loop
from electra_tf.errors import ConfigError, DataError
from electra_tf.finetune import outputs
from electra_tf.finetune import task_builder
from electra_tf.finetune import task_saved_model
from electra_tf.finetune.config import NO_CHECKPOINT, FinetuningConfig
from electra_tf.finetune.model import FinetuningModel
from electra_tf.finetune.task import Features, Task, combine_features
from electra_tf.modeling import encoder as encoder_lib
from electra_tf.modeling.encoder import build_discriminator_encoder

KEEP_CHECKPOINTS = 5  # the official RunConfig's keep_checkpoint_max
RUN_RECORD = config_lib.FINETUNING_RECORD
SHUFFLE_BUFFER = 100  # official input_fn

# Hparams that define the models a model_dir holds (recorded, checked on rerun).
RUN_KEYS = ("task_names", "model_size", "model_hparam_overrides",
            "embedding_size", "vocab_size", "do_lower_case", "debug",
            "max_seq_length", "learning_rate", "weight_decay_rate",
            "layerwise_lr_decay", "num_train_epochs", "warmup_proportion",
            "train_batch_size", "double_unordered", "max_query_length",
            "doc_stride", "answerable_classifier",
            "answerable_uses_start_logits", "answerable_weight",
            "joint_prediction", "seed", "init_checkpoint")
# The key of the featurized-data cache's .npz under which it records what it
# was made from (`feature_record`).
CACHE_RECORD_KEY = "__record"


_log = train_loop.log


# ------------------------------------------------------------------ data
@dataclasses.dataclass
class SplitData:
  """One split of one task: its examples (file order) and their features."""
  task: Task
  split: str
  examples: List[Any]
  features: Features


@dataclasses.dataclass
class TrainingData:
  """The training features of all tasks, unshuffled.

  arrays: every feature of every task, [N, ...] (other tasks' keys are zero);
  groups: [N] int64, the example each row came from, so shuffling keeps an
  example's rows (SQuAD windows) together."""
  arrays: Dict[str, np.ndarray]
  groups: np.ndarray

  def __len__(self) -> int:
    return len(self.groups)


def load_tokenizer(config: FinetuningConfig) -> tokenization.FullTokenizer:
  """The WordPiece tokenizer of vocab_file.  ConfigError unless its size is
  vocab_size and its casing do_lower_case's, or both are the init
  checkpoint's own (its record and the vocab beside it)."""
  tokenizer = tokenization.FullTokenizer(config.vocab_file,
                                         do_lower_case=config.do_lower_case)
  tokenization.check_vocab_size(tokenizer.vocab, config.vocab_size, config.vocab_file)
  recorded = (config_lib.recorded_vocab(config.init_checkpoint)
              if config.init_checkpoint != NO_CHECKPOINT
              and config_lib.recorded_hparams(config.init_checkpoint) else None)
  if not (recorded and os.path.samefile(recorded, config.vocab_file)):
    tokenization.check_vocab_casing(tokenizer.vocab, config.do_lower_case, config.vocab_file)
  return tokenizer


def read_split(task: Task, split: str, is_training: bool = False) -> SplitData:
  """Reads and featurizes one split; an empty split is an error."""
  examples = task.get_examples(split)
  if not examples:
    raise DataError(f"{task.config.raw_data_dir(task.name)}: the {split} "
                    f"split of {task.name} has no examples")
  return SplitData(task, split, examples, task.featurize(examples, is_training))


def featurize_training_data(tasks: Sequence[Task]) -> TrainingData:
  """Reads and featurizes the train split of every task (not cached)."""
  parts, groups, offset = [], [], 0
  for task in tasks:
    data = read_split(task, "train", is_training=True)
    parts.append((task, data.features))
    groups.append(offset + data.features.example_index)
    offset += len(data.examples)
  return TrainingData(combine_features(parts), np.concatenate(groups))


def shuffled_row_order(groups: np.ndarray, rng: np.random.RandomState
                       ) -> np.ndarray:
  """Row indices with the examples in random order, each example's rows
  consecutive and in their original order (official random.shuffle of the
  examples before featurizing)."""
  unique, example_of_row = np.unique(groups, return_inverse=True)
  rank = np.empty(len(unique), np.int64)
  rank[rng.permutation(len(unique))] = np.arange(len(unique))
  return np.argsort(rank[example_of_row], kind="stable")


def pad_rows(arrays: Dict[str, np.ndarray], multiple: int,
             padding_task_id: int) -> Dict[str, np.ndarray]:
  """Appends zero rows (task_id = padding_task_id) up to a multiple of
  `multiple` rows (official serialize_examples padding)."""
  n_rows = len(arrays["task_id"])
  n_padding = -n_rows % multiple
  padded = {}
  for key, values in arrays.items():
    padding = np.zeros((n_padding,) + values.shape[1:], values.dtype)
    if key == "task_id":
      padding[:] = padding_task_id
    padded[key] = np.concatenate([values, padding])
  return padded


def feature_record(config: FinetuningConfig, tasks: Sequence[Task]) -> Dict[str, Any]:
  """What the featurized training data are made from: the task names (their
  order gives the task ids), the hparams the tasks' features depend on
  (`Task.feature_hparams`), and the SHA-256 of the vocab and of every file
  in the tasks' data folders (chunk takes its labels from all its splits)."""
  hparams = sorted({name for task in tasks for name in task.feature_hparams})
  files = {}
  for name in config.task_names:
    directory = config.raw_data_dir(name)
    if os.path.isdir(directory):  # else featurizing names the missing file
      for file_name in sorted(os.listdir(directory)):
        path = os.path.join(directory, file_name)
        if os.path.isfile(path):
          files[f"{name}/{file_name}"] = fileio.file_sha256(path)
  return {"task_names": list(config.task_names),
          "hparams": {name: getattr(config, name) for name in hparams},
          "vocab_sha256": fileio.file_sha256(config.vocab_file), "files": files}


def record_changes(cached: Dict[str, Any], current: Dict[str, Any]) -> List[str]:
  """What differs between a cache's record and the current one, a phrase per
  difference ("max_seq_length 128 -> 64", "rte/train.tsv changed")."""
  changes = []
  if cached.get("task_names") != current["task_names"]:
    changes.append(f"task_names {cached.get('task_names')} -> {current['task_names']}")
  old_hparams = cached.get("hparams", {})
  for name in sorted(set(old_hparams) | set(current["hparams"])):
    before, now = old_hparams.get(name), current["hparams"].get(name)
    if before != now:
      changes.append(f"{name} {json.dumps(before)} -> {json.dumps(now)}")
  if cached.get("vocab_sha256") != current["vocab_sha256"]:
    changes.append("another vocab (sha256 "
                   f"{str(cached.get('vocab_sha256'))[:12]} -> {current['vocab_sha256'][:12]})")
  old_files = cached.get("files", {})
  for name in sorted(set(old_files) | set(current["files"])):
    if name not in current["files"]:
      changes.append(f"{name} gone")
    elif name not in old_files:
      changes.append(f"{name} new")
    elif old_files[name] != current["files"][name]:
      changes.append(f"{name} changed")
  return changes


def _cached_training_data(path: str, record: Dict[str, Any]) -> Optional[TrainingData]:
  """The training data cached in `path` if it records `record`, else None;
  says which, and why it is not used, in one line."""
  if not os.path.isfile(path):
    return None
  try:
    with np.load(path) as cached:
      arrays = {key: cached[key] for key in cached.files}
  except (OSError, ValueError, zipfile.BadZipFile) as e:
    _log(f"Rebuilding the featurized training data {path}: unreadable ({e})")
    return None
  if CACHE_RECORD_KEY not in arrays:
    _log(f"Rebuilding the featurized training data {path}: it does not record what it was "
         "made from (an older electra-tf wrote it)")
    return None
  changes = record_changes(json.loads(str(arrays.pop(CACHE_RECORD_KEY))), record)
  if changes:
    _log(f"Rebuilding the featurized training data {path}: made from other inputs "
         f"({'; '.join(changes)})")
    return None
  _log(f"Using the featurized training data in {path}")
  return TrainingData(arrays, arrays.pop("__groups"))


def training_data(config: FinetuningConfig, tasks: Sequence[Task]
                  ) -> TrainingData:
  """Featurized training data, from/to the cache when use_tfrecords_if_existing:
  preprocessed_data_dir/<task names, sorted>_train.npz, rebuilt when its
  `feature_record` (CACHE_RECORD_KEY) differs, replaced by a rename."""
  if not config.use_tfrecords_if_existing:
    return featurize_training_data(tasks)
  prefix = os.path.join(config.preprocessed_data_dir,
                        "_".join(sorted(config.task_names)) + "_train")
  for path in fileio.remove_stale_temporaries(config.preprocessed_data_dir):
    _log(f"Removed {path}, left by an interrupted earlier run")
  record = feature_record(config, tasks)
  data = _cached_training_data(prefix + ".npz", record)
  if data is not None:
    return data
  data = featurize_training_data(tasks)
  os.makedirs(config.preprocessed_data_dir, exist_ok=True)
  buffer = io.BytesIO()
  np.savez(buffer, **{CACHE_RECORD_KEY: np.array(json.dumps(record)),
                      "__groups": data.groups}, **data.arrays)
  fileio.atomic_write_bytes(prefix + ".npz", buffer.getvalue())
  fileio.atomic_write_text(prefix + ".json", json.dumps(record, indent=1) + "\n")
  return data


# ------------------------------------------------------------ one trial
def trial_dir(config: FinetuningConfig, trial: int) -> str:
  return os.path.join(config.model_dir, f"trial_{trial}")


class TrialJob:
  """The model (and, when training, the optimizer) of one trial."""

  def __init__(self, config: FinetuningConfig, tasks: Sequence[Task],
               strategy: tf.distribute.Strategy, trial: int,
               num_train_steps: Optional[int]):
    self.config = config
    self.tasks = list(tasks)
    self.strategy = strategy
    self.trial = trial
    self.seed = config.seed + trial - 1
    self.directory = trial_dir(config, trial)
    self.num_train_steps = num_train_steps

    def build_optimizer(model: FinetuningModel):
      return optimization.create_optimizer(
          learning_rate=config.learning_rate,
          num_train_steps=num_train_steps,
          # official: max(num_train_steps * warmup_proportion, warmup_steps=0)
          num_warmup_steps=num_train_steps * config.warmup_proportion,
          weight_decay_rate=config.weight_decay_rate,
          layerwise_lr_decay=(config.layerwise_lr_decay
                              if config.layerwise_lr_decay > 0 else None),
          n_transformer_layers=model.encoder.config.num_hidden_layers,
          optimizer=config.optimizer)

    def build_model() -> FinetuningModel:
      model = FinetuningModel(config, tasks)
      if config.recompute_layers:
        encoder_lib.recompute_layers(model)
      return model

    self.trainer = train_loop.Trainer(
        strategy, build_model,
        build_optimizer if num_train_steps is not None else None,
        seed=self.seed, mixed_precision=config.mixed_precision,
        jit_compile=config.jit_compile,
        gradient_accumulation_steps=config.gradient_accumulation_steps)
    self.model = self.trainer.model
    self.optimizer = self.trainer.optimizer
    self._predict_steps: Dict[str, Any] = {}

  # ------------------------------------------------------- initialisation
  def initialize(self, init_checkpoint: Optional[str]) -> None:
    """Restores the trial's latest checkpoint, else the encoder from
    `init_checkpoint` (None: random initialisation)."""
    latest = self.trainer.restore_latest(self.directory)
    if latest:
      _log(f"Restored trial {self.trial} from {latest}")
    elif init_checkpoint:
      unused = checkpoints.restore_from_checkpoint(self.model.encoder,
                                                   init_checkpoint)
      _log(f"Initialised the encoder from {init_checkpoint} ({len(unused)} "
           "checkpoint variables outside `electra/` left unused)")
    else:
      _log(f"init_checkpoint={NO_CHECKPOINT}: the encoder starts from random "
           "initialisation")

  # ------------------------------------------------------------- training
  def _train_dataset(self, data: TrainingData, skip_batches: int
                     ) -> tf.data.Dataset:
    batch = self.config.train_batch_size
    order = shuffled_row_order(data.groups, np.random.RandomState(self.seed))
    arrays = pad_rows({k: v[order] for k, v in data.arrays.items()}, batch,
                      len(self.tasks))
    dataset = tf.data.Dataset.from_tensor_slices(arrays).repeat()
    dataset = dataset.shuffle(SHUFFLE_BUFFER, seed=self.seed)
    return dataset.batch(batch, drop_remainder=True).skip(skip_batches)

  def loss(self, batch: Dict[str, tf.Tensor], step: tf.Tensor,
           part: Optional[train_loop.BatchPart] = None
           ) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """The shared step's loss_fn: one replica's loss is the sum over its rows,
    so the summed replica (and micro-batch) gradients are those of the
    official loss on the global batch."""
    del step, part
    loss = self.model.training_loss(self.model(batch, training=True), batch["task_id"])
    return loss, {"loss": loss}

  def train(self, data: TrainingData,
            after_epoch: Optional[Callable[[int, int], None]] = None) -> int:
    """Trains to num_train_steps from the restored step; returns the step.
    after_epoch(step, steps_per_epoch), if given, runs after every whole
    epoch but the last (its checkpoint saved first)."""
    config, strategy = self.config, self.strategy
    total = self.num_train_steps
    step = int(self.optimizer.iterations.numpy())
    if step >= total:
      _log(f"Trial {self.trial} is already trained ({step} steps)")
      return step
    iterator = iter(strategy.experimental_distribute_dataset(
        self._train_dataset(data, skip_batches=step)))
    _log(f"Training for {total} steps ({len(data)} training features, batch "
         f"{config.train_batch_size}, {strategy.num_replicas_in_sync} "
         f"replica(s), {type(strategy).__name__}); the logged loss is the batch's "
         "sum over its examples, as official (the dev loss is a mean per example)")
    writer = tf.summary.create_file_writer(os.path.join(self.directory, "train"))
    steps_per_epoch = steps_in_an_epoch(config, len(data))
    step = self.trainer.train(
        self.loss, ["loss"], iterator, self.directory, KEEP_CHECKPOINTS,
        train_loop.Schedule(total_steps=total, log_every=config.log_every,
                            save_every=config.save_checkpoints_steps,
                            steps_per_loop=config.iterations_per_loop,
                            batch_size=config.train_batch_size,
                            eval_every=steps_per_epoch if after_epoch else 0,
                            evaluate=after_epoch and (
                                lambda step: after_epoch(step, steps_per_epoch))),
        writer, fault_context=f" of trial {self.trial}")
    self.plot_curves()
    return step

  def plot_curves(self) -> str:
    tasks = ",".join(self.config.task_names)
    return curves.plot_run(self.directory, title=f"fine-tuning {tasks}, trial {self.trial}")

  # ----------------------------------------------------------- prediction
  def _predict_step(self, task_name: str):
    if task_name not in self._predict_steps:
      @tf.function(autograph=False)
      def predict_step(batch):
        return self.strategy.run(
            lambda b: self.model.task_outputs(b, task_name), args=(batch,))
      self._predict_steps[task_name] = predict_step
    return self._predict_steps[task_name]

  def predict(self, data: SplitData, batch_size: int) -> Dict[str, np.ndarray]:
    """Head outputs for every feature row of `data`, in row order."""
    n_rows = len(data.features)
    arrays = pad_rows(data.features.arrays, batch_size, data.task.task_id)
    # Padded to whole batches: dropping the remainder drops nothing and gives
    # the static batch shape TPUs need.
    dataset = tf.data.Dataset.from_tensor_slices(arrays).batch(
        batch_size, drop_remainder=True)
    predict_step = self._predict_step(data.task.name)
    parts = collections.defaultdict(list)
    for batch in self.strategy.experimental_distribute_dataset(dataset):
      for replica in self.strategy.experimental_local_results(predict_step(batch)):
        for key, value in replica.items():
          parts[key].append(value.numpy())
      stop_points.reached("eval_batch")
    return {key: np.concatenate(values)[:n_rows]
            for key, values in parts.items()}


# ----------------------------------------------------------- evaluation
def _results_dirs(config: FinetuningConfig, trial: int) -> List[str]:
  dirs = [config.results_dir]
  if config.num_trials > 1:
    dirs.append(os.path.join(config.results_dir, f"trial_{trial}"))
  return dirs


def task_split_results(job: TrialJob, task: Task,
                       eval_data: Dict[str, Dict[str, SplitData]]) -> Dict[str, Any]:
  """{split: the task's evaluation of the job's model on that split}."""
  return {split: task.evaluate(data.examples, data.features,
                               job.predict(data, job.config.eval_batch_size), split)
          for split, data in eval_data[task.name].items()}


def steps_in_an_epoch(config: FinetuningConfig, n_train_features: int) -> int:
  """Training steps of one epoch (the padded features // batch)."""
  return -(-n_train_features // config.train_batch_size)


def weight_norms(model: tf.keras.Model) -> Dict[str, float]:
  """The L2 norm of the model's weights per part: `embeddings` (tables,
  their LayerNorm and projection), `layer_<i>` (Transformer layer i) and
  `heads` (everything else: the task heads)."""
  squares: Dict[str, float] = collections.defaultdict(float)
  for variable in model.weights:
    layer = re.search(r"layer_(\d+)/", variable.name)
    part = (f"layer_{layer.group(1)}" if layer else
            "embeddings" if "embeddings" in variable.name else "heads")
    squares[part] += float(tf.reduce_sum(tf.square(tf.cast(variable, tf.float32))))
  return {part: float(np.sqrt(value)) for part, value in sorted(squares.items())}


EPOCH_METRICS = "epoch_metrics.json"


def record_epoch(job: TrialJob, eval_data: Dict[str, Dict[str, SplitData]], step: int,
                 steps_per_epoch: int) -> Dict[str, Any]:
  """Appends the job's state at `step` to results/epoch_metrics.json (hparam
  epoch_metrics): {trial, step, epoch, dev: {task: metrics}, weight_norms,
  train_loss: the mean logged training loss per example over the steps since
  the trial's previous point (None at step 0)}; returns that point. A point
  of the same trial and step replaces the one recorded (a resumed trial)."""
  path = os.path.join(job.config.results_dir, EPOCH_METRICS)
  points = json.loads(tf.io.gfile.GFile(path).read()) if tf.io.gfile.exists(path) else []
  points = [p for p in points if (p["trial"], p["step"]) != (job.trial, step)]
  earlier = [p["step"] for p in points if p["trial"] == job.trial and p["step"] < step]
  logged = curves.read_scalars(os.path.join(job.directory, "train")).get("loss", {})
  since = [value for s, value in logged.items() if max(earlier, default=0) < s <= step]
  point = {"trial": job.trial, "step": step, "epoch": step / steps_per_epoch,
           "dev": {task.name: outputs.merge_metrics(task_split_results(job, task, eval_data),
                                                    task.eval_splits())
                   for task in job.tasks},
           "weight_norms": weight_norms(job.model),
           "train_loss": (sum(since) / len(since) / job.config.train_batch_size
                          if since else None)}
  points.append(point)
  points.sort(key=lambda p: (p["trial"], p["step"]))
  tf.io.gfile.makedirs(job.config.results_dir)
  fileio.atomic_write_text(path, json.dumps(points, indent=1, sort_keys=True))
  _log(f"Epoch {point['epoch']:g} of trial {job.trial}: dev "
       + ", ".join(f"{t} {m}" for t, m in point["dev"].items()))
  return point


def evaluate_trial(job: TrialJob, eval_data: Dict[str, Dict[str, SplitData]],
                   test_data: Dict[str, Dict[str, SplitData]]
                   ) -> Dict[str, Dict[str, float]]:
  """Dev metrics of every task; writes metrics, predictions, test outputs."""
  config, trial = job.config, job.trial
  results = {}
  for task in job.tasks:
    split_results = task_split_results(job, task, eval_data)
    metrics = outputs.merge_metrics(split_results, task.eval_splits())
    results[task.name] = metrics
    step = int(job.optimizer.iterations.numpy()) if job.optimizer is not None else 0
    with tf.summary.create_file_writer(os.path.join(job.directory, "eval")).as_default(
        step=step):
      for name, value in metrics.items():
        tf.summary.scalar(f"{task.name}/{name}", value)
    _log(outputs.results_text([{task.name: metrics}]).strip())
    for directory in _results_dirs(config, trial):
      outputs.write_metrics_json(
          outputs.metrics_path(directory, task.name, "dev"), metrics, trial)
      for split, result in split_results.items():
        outputs.write_predictions_tsv(
            outputs.predictions_path(directory, task.name, split), result)
        outputs.write_tables(directory, task.name, split, result)
        outputs.write_qa_files(config, task.name, result, directory)
    if trial <= config.n_writes_test:
      for split, data in test_data.get(task.name, {}).items():
        result = task.evaluate(data.examples, data.features,
                               job.predict(data, config.predict_batch_size),
                               split)
        for directory in _results_dirs(config, trial):
          outputs.write_predictions_tsv(
              outputs.predictions_path(directory, task.name, split), result)
        outputs.write_official_test_outputs(config, task.name, split, trial,
                                            result, _results_dirs(config, trial))
        _log(f"Wrote the {task.name} {split} predictions of trial {trial}")
  job.plot_curves()
  return results


# ------------------------------------------------------ checks, the job
def initial_checkpoint(config: FinetuningConfig) -> Optional[str]:
  """The checkpoint prefix the encoder starts from; None (random init) only
  for init_checkpoint "none".  As official, the default data_dir/models/
  <model_name> must hold a checkpoint."""
  if config.init_checkpoint == NO_CHECKPOINT:
    return None
  if (config.init_checkpoint == config.pretrained_model_dir and
      not tf.train.latest_checkpoint(config.init_checkpoint)):
    raise ConfigError(
        f"--init_checkpoint: not given, and the default {config.init_checkpoint} holds "
        "no checkpoint; give the pre-trained model (a checkpoint prefix or directory), "
        f"or --init_checkpoint={NO_CHECKPOINT} to fine-tune from random initialisation")
  return checkpoints.resolve_checkpoint(config.init_checkpoint)


def _run_record(config: FinetuningConfig) -> Dict[str, Any]:
  return {key: getattr(config, key) for key in RUN_KEYS}


def _check_export_dirs(tasks: Sequence[Task], export_dir: str) -> None:
  """Each task's export target must be new, empty, or an earlier export."""
  for task in tasks:
    target = os.path.join(export_dir, task.name)
    checkpoints.check_output_dir(target, "--export_dir",
                                 overwrite=checkpoints.holds_saved_model(target))


def run(config: FinetuningConfig, *, strategy_name: str = "auto",
        tpu: Optional[str] = None,
        export_dir: Optional[str] = None,
        export_text: bool = True) -> List[Dict[str, Dict[str, float]]]:
  """The whole job (module docstring); returns the results of every trial.
  One host only, as official: multi_worker_mirrored is refused."""
  if not (config.do_train or config.do_eval or export_dir):
    raise ConfigError("hparams do_train and do_eval are both false and there "
                      "is no --export_dir: nothing to do")
  if strategy_name == "multi_worker_mirrored":
    raise ConfigError("--strategy: multi_worker_mirrored is for pre-training; "
                      "fine-tuning runs on one host")
  for line in config.rerun.lines() if config.rerun else []:
    _log(line)
  tokenizer = load_tokenizer(config)
  tasks = task_builder.get_tasks(config, tokenizer)
  init_checkpoint = initial_checkpoint(config)
  if export_dir:
    _check_export_dirs(tasks, export_dir)
  has_record = train_loop.check_run_record(config.model_dir, RUN_RECORD, _run_record(config))
  if not config.do_train:  # evaluate every trial, or export the last one
    first = 1 if config.do_eval else config.num_trials
    for trial in range(first, config.num_trials + 1):
      if not tf.train.latest_checkpoint(trial_dir(config, trial)):
        raise ConfigError(f"do_train=false: {trial_dir(config, trial)} holds no "
                          "checkpoint to evaluate or export")

  # The process's first TensorFlow op (`distribution` module docstring):
  # the checks above use none, those below may.
  strategy = distribution.create_job_strategy(config, strategy_name, tpu)
  if init_checkpoint:  # another architecture is refused before anything is written
    checkpoints.check_restorable(build_discriminator_encoder(
        config.encoder_config(), config.effective_embedding_size), init_checkpoint)
  # Read every split first: a malformed file stops the job here.
  eval_data: Dict[str, Dict[str, SplitData]] = {}
  test_data: Dict[str, Dict[str, SplitData]] = {}
  if config.do_eval:
    for task in tasks:
      eval_data[task.name] = {split: read_split(task, split)
                              for split in task.eval_splits()}
      if config.write_test_outputs and config.n_writes_test > 0:
        test_data[task.name] = {split: read_split(task, split)
                                for split in task.test_splits()}
  data, num_train_steps = None, None
  if config.do_train:
    data = training_data(config, tasks)
    num_train_steps = config.num_train_steps(len(data))
    if num_train_steps <= 0:
      raise ConfigError(
          f"hparams num_train_epochs {config.num_train_epochs} and "
          f"train_batch_size {config.train_batch_size} give 0 training steps "
          f"for {len(data)} training features")

  with train_loop.holding_model_dir(config.model_dir):
    results = outputs.load_results(config) if (
        config.do_train and config.do_eval and has_record) else []
    for trial in range(1, config.num_trials + 1):
      heading = f"model={config.model_name}, trial {trial}/{config.num_trials}"
      done = trial <= len(results)
      exporting = export_dir and trial == config.num_trials
      if done and not exporting:
        _log(f"== {heading}: already done (recorded in {config.results_pkl}) ==")
        if trial != config.num_trials and not config.keep_all_models:
          shutil.rmtree(trial_dir(config, trial), ignore_errors=True)
        continue
      job = TrialJob(config, tasks, strategy, trial, num_train_steps)
      job.initialize(init_checkpoint)
      if not has_record:
        train_loop.write_run_record(config.model_dir, RUN_RECORD, _run_record(config))
        train_loop.keep_vocab_beside(config.model_dir, config.vocab_file)
        has_record = True
      if config.do_train and not done:
        _log(f"== Start training: {heading} ==")
        after_epoch = None
        if config.epoch_metrics and config.do_eval:
          def after_epoch(step, steps_per_epoch, job=job):
            record_epoch(job, eval_data, step, steps_per_epoch)
          if int(job.optimizer.iterations.numpy()) == 0:
            after_epoch(0, steps_in_an_epoch(config, len(data)))
        job.train(data, after_epoch)
        if after_epoch:
          after_epoch(int(job.optimizer.iterations.numpy()),
                      steps_in_an_epoch(config, len(data)))
      if config.do_eval and not done:
        _log(f"== Run dev set evaluation: {heading} ==")
        results.append(evaluate_trial(job, eval_data, test_data))
        outputs.write_results(config, results)
      if exporting:
        for task in tasks:
          target = os.path.join(export_dir, task.name)
          task_saved_model.export_task_model(
              job.model, task, target, overwrite=checkpoints.holds_saved_model(target),
              text=export_text)
          _log(f"Exported the {task.name} model to {target}")
      if trial != config.num_trials and not config.keep_all_models:
        shutil.rmtree(job.directory, ignore_errors=True)
  if results:
    _log(f"Results over {len(results)} trial(s) (written to {config.results_txt}):")
    _log(outputs.results_table(results))
  return results
