"""The single source of every fine-tuning hyperparameter.

`FinetuningConfig` carries the official `configure_finetuning` names and
defaults, built once by `FinetuningConfig.create` in the official order.
Unlike the official code, results, test predictions and (with model_dir)
the featurized-data cache go under model_dir.  docs/finetuning.md.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Type

from electra_tf.config import FINETUNING_RECORD, MODEL_SIZE_TABLE, JobConfig, read_json_object
from electra_tf.errors import ConfigError

# The task registry: name -> its class, as "module.Class" under
# electra_tf/finetune/, a folder per family (named, not imported, so that
# checking hparam names and types does not load TensorFlow; `task_class`
# imports the ones a job asks for).  In the order of the paper's tables, then
# the 2019 MRQA shared-task sets, chunking, NER and part-of-speech tagging.
# Everything else about a task (its single-task defaults, help line,
# featurizer, head, scorer, serving functions) is on its class; adding a task
# is a module (or a class) and a line here.
TASKS = {
    "cola": "classification.classification_tasks.CoLA",
    "sst": "classification.classification_tasks.SST",
    "mrpc": "classification.classification_tasks.MRPC",
    "sts": "classification.classification_tasks.STS",
    "qqp": "classification.classification_tasks.QQP",
    "mnli": "classification.classification_tasks.MNLI",
    "qnli": "classification.classification_tasks.QNLI",
    "rte": "classification.classification_tasks.RTE",
    "squadv1": "qa.qa_tasks.SQuADv1", "squad": "qa.qa_tasks.SQuAD",
    "newsqa": "qa.qa_tasks.NewsQA", "naturalqs": "qa.qa_tasks.NaturalQuestions",
    "triviaqa": "qa.qa_tasks.TriviaQA", "searchqa": "qa.qa_tasks.SearchQA",
    "chunk": "tagging.tagging_tasks.ChunkingTask", "ner": "tagging.tagging_tasks.NER",
    "pos": "tagging.pos.POS",
}
TASK_NAMES = tuple(TASKS)


def check_task_names(task_names: List[str]) -> None:
  """ConfigError unless `task_names` are registered, without repeats."""
  if not task_names:
    raise ConfigError("hparam task_names: no task given")
  for name in task_names:
    if name not in TASKS:
      raise ConfigError(f"hparam task_names: unknown task {name!r}; known: "
                        f"{', '.join(TASK_NAMES)}")
  if len(set(task_names)) != len(task_names):
    raise ConfigError(f"hparam task_names: {task_names} repeats a task")


def task_class(name: str) -> Type[Any]:
  """The Task subclass registered as `name` (imports its module)."""
  check_task_names([name])
  module, cls = TASKS[name].rsplit(".", 1)
  return getattr(importlib.import_module(f"electra_tf.finetune.{module}"), cls)


def task_names_help() -> str:
  """One line per registered task, `name: help` (each class's `help`)."""
  return "\n".join(f"{name}: {task_class(name).help}" for name in TASKS)


_DEBUG_SETTINGS = {"save_checkpoints_steps": 1000000,
                   "use_tfrecords_if_existing": False, "num_trials": 1,
                   "iterations_per_loop": 1, "train_batch_size": 32,
                   "num_train_epochs": 3.0, "log_examples": True}

# Names the official config computes and code calls as functions
# (`raw_data_dir(task)`, `qa_preds_file(task)`, ...): not settable by hparams.
_DERIVED_NAMES = ("raw_data_dir", "qa_eval_file", "qa_preds_file",
                  "qa_na_file", "test_predictions")


NO_CHECKPOINT = "none"  # init_checkpoint that asks for random initialisation
# preprocessed_data_dir under a given model_dir (the official default is
# under data_dir: see FinetuningConfig._derive)
FEATURE_CACHE_DIR = "featurized_data"


@dataclasses.dataclass
class FinetuningConfig(JobConfig):
  """Fine-tuning hyperparameters under their official names and defaults."""
  # general
  log_examples: bool = False  # log the first featurized example of each set
  num_trials: int = 1  # train + eval runs with different seeds
  do_eval: bool = True
  keep_all_models: bool = True  # False: delete each trial's model but the last

  # model
  task_names: List[str] = dataclasses.field(default_factory=lambda: ["chunk"])

  # training
  learning_rate: float = 1e-4
  layerwise_lr_decay: float = 0.8  # lr * decay^(depth from the top); <= 0: off
  num_train_epochs: float = 3.0
  warmup_proportion: float = 0.1
  save_checkpoints_steps: int = 1000000
  iterations_per_loop: int = 1000
  use_tfrecords_if_existing: bool = True  # reuse preprocessed data if found

  # writing model outputs to disk
  write_test_outputs: bool = False
  n_writes_test: int = 5  # write test predictions for the first n trials

  # sizing
  train_batch_size: int = 32
  eval_batch_size: int = 32
  predict_batch_size: int = 32
  double_unordered: bool = True  # MRPC/STS: also train on swapped pairs

  # question answering
  max_query_length: int = 64
  doc_stride: int = 128
  n_best_size: int = 20
  max_answer_length: int = 30
  answerable_classifier: bool = True
  answerable_uses_start_logits: bool = True
  answerable_weight: float = 0.5
  joint_prediction: bool = True  # end position conditioned on a start beam
  beam_size: int = 20
  qa_na_threshold: float = -2.75  # SQuAD 2.0: "no answer" above this

  # tagging (electra-tf addition): the scheme of the ner files and of its
  # predictions, IOB1, IOB2 (BIO) or BIOES (tagging/spans.py); chunk's is
  # IOB2, as official
  tagging_scheme: str = "IOB2"

  # training curves (electra-tf addition): after every whole epoch (and
  # before the first step), the dev metrics of every task, the mean training
  # loss since the last point and the weights' norms per layer, appended to
  # results/epoch_metrics.json (finetune/job.py, record_epoch)
  epoch_metrics: bool = False

  # locations (official conventions under data_dir; docs/finetuning.md)
  init_checkpoint: str = ""
  preprocessed_data_dir: str = ""

  POSITIVE: ClassVar[Tuple[str, ...]] = JobConfig.POSITIVE + (
      "num_trials", "train_batch_size", "eval_batch_size", "predict_batch_size",
      "max_query_length", "doc_stride", "n_best_size", "max_answer_length",
      "beam_size", "save_checkpoints_steps", "iterations_per_loop", "learning_rate",
      "num_train_epochs")
  DERIVED: ClassVar[Tuple[str, ...]] = _DERIVED_NAMES

  # ---------------------------------------------------------------- creation
  def _checkpoint_dirs(self) -> list:
    """The encoder's checkpoint: its record gives the architecture."""
    return [] if self.init_checkpoint == NO_CHECKPOINT else [self.init_checkpoint]

  def _run_record(self) -> Optional[Tuple[Dict[str, Any], str]]:
    """model_dir's record of the fine-tuning run (finetune/job.py RUN_KEYS)."""
    path = os.path.join(self.model_dir, FINETUNING_RECORD)
    return (read_json_object(path), path) if os.path.isfile(path) else None

  def _apply_job_defaults(self) -> None:
    check_task_names(self.task_names)
    if len(self.task_names) == 1:
      # The task's own (official: rte/sts 10 epochs, span QA 512 / 2 epochs,
      # chunk 256; ner do_lower_case false); the others keep 3 epochs.
      self.num_train_epochs = 3.0
      self.update(task_class(self.task_names[0]).single_task_defaults)
    size = MODEL_SIZE_TABLE.get(self.model_size, {})  # unknown: validate says so
    if "embedding_size" in size:
      self.embedding_size = size["embedding_size"]
    self.update(size.get("finetuning", {}))
    if self.debug:
      self.update(_DEBUG_SETTINGS)

  @property
  def pretrained_model_dir(self) -> str:
    return os.path.join(self.data_dir, "models", self.model_name)

  @property
  def results_dir(self) -> str:
    """Where metrics, predictions and the results txt go."""
    return os.path.join(self.model_dir, "results")

  def raw_data_dir(self, task_name: str) -> str:
    """The official `data_dir/finetuning_data/<task>` folder."""
    return os.path.join(self.data_dir, "finetuning_data", task_name)

  def qa_eval_file(self, task_name: str,
                   results_dir: Optional[str] = None) -> str:
    """The official `<tasks>_qa/<task>_eval.json` (SQuAD 2.0 eval script
    output) under results_dir (default: config.results_dir)."""
    return self._qa_file(task_name, "eval", results_dir)

  def qa_preds_file(self, task_name: str,
                    results_dir: Optional[str] = None) -> str:
    """The official `<tasks>_qa/<task>_preds.json` (question id -> answer)."""
    return self._qa_file(task_name, "preds", results_dir)

  def qa_na_file(self, task_name: str,
                 results_dir: Optional[str] = None) -> str:
    """The official `<tasks>_qa/<task>_null_odds.json` (SQuAD 2.0)."""
    return self._qa_file(task_name, "null_odds", results_dir)

  def _qa_file(self, task_name: str, kind: str,
               results_dir: Optional[str]) -> str:
    return os.path.join(results_dir or self.results_dir,
                        ",".join(self.task_names) + "_qa",
                        f"{task_name}_{kind}.json")

  def test_predictions(self, task_name: str, split: str, trial: int) -> str:
    """The official `test_predictions/<task>_<split>_<trial>_predictions.pkl`
    (under model_dir)."""
    return os.path.join(self.model_dir, "test_predictions",
                        f"{task_name}_{split}_{trial}_predictions.pkl")

  def _derive(self) -> None:
    tasks = ",".join(self.task_names)
    if not self.init_checkpoint:
      self.init_checkpoint = self.pretrained_model_dir
    if not self.vocab_file:  # the official places (`create` prefers the encoder's own)
      self.vocab_file = os.path.join(self.pretrained_model_dir, "vocab.txt")
      if not os.path.exists(self.vocab_file):
        self.vocab_file = os.path.join(self.data_dir, "vocab.txt")
    if not self.preprocessed_data_dir and self.model_dir:  # with the job's outputs
      self.preprocessed_data_dir = os.path.join(self.model_dir, FEATURE_CACHE_DIR)
    elif not self.preprocessed_data_dir:  # official: under data_dir
      self.preprocessed_data_dir = os.path.join(
          self.pretrained_model_dir, "finetuning_tfrecords",
          tasks + "_tfrecords" + ("-debug" if self.debug else ""))
    if not self.model_dir:
      self.model_dir = os.path.join(self.pretrained_model_dir,
                                    "finetuning_models", tasks + "_model")
    if not self.results_txt:
      self.results_txt = os.path.join(self.results_dir, tasks + "_results.txt")
    if not self.results_pkl:
      self.results_pkl = os.path.join(self.results_dir, tasks + "_results.pkl")

  # ------------------------------------------------------------ validation
  def validate(self) -> None:
    """Raises ConfigError naming the hparam and what is wrong."""
    check_task_names(self.task_names)
    super().validate()
    for name in ("weight_decay_rate", "answerable_weight", "n_writes_test"):
      if getattr(self, name) < 0:
        raise ConfigError(f"hparam {name}: {getattr(self, name)} must be >= 0")
    if not 0.0 <= self.warmup_proportion <= 1.0:
      raise ConfigError(f"hparam warmup_proportion: {self.warmup_proportion} "
                        "is outside [0, 1]")
    for name in self.task_names:
      task_class(name).check_config(self)

  # ------------------------------------------------------- derived values
  def num_train_steps(self, n_train_features: int) -> int:
    """Official step count: the padded feature count // batch * epochs."""
    batch = self.train_batch_size
    padded = -(-n_train_features // batch) * batch
    return int(padded // batch * self.num_train_epochs)
