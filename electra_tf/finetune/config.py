"""The single source of every fine-tuning hyperparameter.

`FinetuningConfig` carries the official `configure_finetuning.FinetuningConfig`
names and defaults, so an official `--hparams` JSON loads unchanged.  It is
built once at an entry point (`FinetuningConfig.create`) and passed down as a
value.

Resolution order (as official):
  1. defaults below;
  2. the user's hparams (and the flags that share an hparam's name, which win
     over hparams: --task_names, --model_size, --model_dir, --init_checkpoint);
  3. single-task defaults: rte/sts train 10 epochs, SQuAD 2 epochs at
     max_seq_length 512 (and no test outputs), chunk max_seq_length 256, every
     other single task 3 epochs;
  4. model-size defaults: large uses learning_rate 5e-5 and layerwise_lr_decay
     0.9, small uses embedding_size 128;
  5. `debug` overrides;
  6. the user's hparams (and flags) again, so that they win over 3-5.

Locations follow the official layout under `data_dir`: raw data in
`data_dir/finetuning_data/<task>/`, the pre-trained model in
`data_dir/models/<model_name>/`.  Unlike the official code, the results go to
`model_dir/results/` (the official code writes them beside the pre-trained
model).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

from electra_tf.config import (MODEL_SIZES, ConfigError, ModelConfig,
                               PretrainingConfig, _check_value)

# Official task names (finetune/task_builder.py), in the order of the paper's
# tables.  The MRQA tasks of the official code are not implemented.
TASK_NAMES = ("cola", "sst", "mrpc", "sts", "qqp", "mnli", "qnli", "rte",
              "squadv1", "squad", "chunk")
_MRQA_TASK_NAMES = ("newsqa", "naturalqs", "triviaqa", "searchqa")

_DEBUG_SETTINGS = {"save_checkpoints_steps": 1000000,
                   "use_tfrecords_if_existing": False, "num_trials": 1,
                   "iterations_per_loop": 1, "train_batch_size": 32,
                   "num_train_epochs": 3.0, "log_examples": True}

# Names the official config computes and code calls as functions
# (`raw_data_dir(task)`, `qa_preds_file(task)`, ...): not settable by hparams.
_DERIVED_NAMES = ("raw_data_dir", "qa_eval_file", "qa_preds_file",
                  "qa_na_file", "test_predictions")


def is_qa_task(task_name: str) -> bool:
  """The official test for span-QA tasks (SQuAD and MRQA)."""
  return "squad" in task_name or "qa" in task_name


@dataclasses.dataclass
class FinetuningConfig:
  """Fine-tuning hyperparameters under their official names and defaults."""
  # general
  model_name: str = "electra"
  debug: bool = False  # small data (first 100 lines / sentences), tiny model
  log_examples: bool = False  # log the first featurized example of each set
  num_trials: int = 1  # train + eval runs with different seeds
  do_train: bool = True
  do_eval: bool = True
  keep_all_models: bool = True  # False: delete each trial's model but the last

  # model
  model_size: str = "small"
  task_names: List[str] = dataclasses.field(default_factory=lambda: ["chunk"])
  model_hparam_overrides: Dict[str, Any] = dataclasses.field(default_factory=dict)
  embedding_size: Optional[int] = None  # hidden size when None
  vocab_size: int = 30522
  do_lower_case: bool = True

  # training
  learning_rate: float = 1e-4
  weight_decay_rate: float = 0.01
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
  max_seq_length: int = 128
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

  # TPU settings (official names)
  use_tpu: bool = False
  num_tpu_cores: int = 1
  tpu_job_name: Optional[str] = None
  tpu_name: Optional[str] = None
  tpu_zone: Optional[str] = None
  gcp_project: Optional[str] = None

  # locations (official conventions under data_dir; see module docstring)
  data_dir: str = ""
  vocab_file: str = ""
  init_checkpoint: str = ""
  model_dir: str = ""
  results_txt: str = ""
  results_pkl: str = ""
  preprocessed_data_dir: str = ""

  # electra-tf addition
  seed: int = 0  # base seed of initialisation, dropout and shuffling

  # ---------------------------------------------------------------- creation
  @classmethod
  def create(cls, hparams: Optional[Mapping[str, Any]] = None,
             task_names: Optional[Sequence[str]] = None,
             model_size: Optional[str] = None, data_dir: str = "",
             model_dir: Optional[str] = None,
             init_checkpoint: Optional[str] = None,
             model_name: str = "electra") -> "FinetuningConfig":
    """Resolves defaults, hparams and flags in the official order."""
    user = dict(hparams or {})
    flags = {"task_names": list(task_names) if task_names is not None else None,
             "model_size": model_size, "model_dir": model_dir,
             "init_checkpoint": init_checkpoint}
    user.update({k: v for k, v in flags.items() if v is not None})
    _check_hparams(user)
    config = cls(model_name=model_name, data_dir=data_dir)
    config._apply(user)
    if len(config.task_names) == 1:
      task_name = config.task_names[0]
      if task_name in ("rte", "sts"):
        config.num_train_epochs = 10.0
      elif is_qa_task(task_name):
        config.max_seq_length = 512
        config.num_train_epochs = 2.0
        config.write_test_outputs = False
      elif task_name == "chunk":
        config.max_seq_length = 256
      else:
        config.num_train_epochs = 3.0
    if config.model_size == "large":
      config.learning_rate = 5e-5
      config.layerwise_lr_decay = 0.9
    elif config.model_size == "small":
      config.embedding_size = 128
    if config.debug:
      config._apply(_DEBUG_SETTINGS)
    config._apply(user)
    config._fill_paths()
    config.validate()
    return config

  def _apply(self, values: Mapping[str, Any]) -> None:
    for key, value in values.items():
      setattr(self, key, list(value) if key == "task_names" else value)

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

  def _fill_paths(self) -> None:
    tasks = ",".join(self.task_names)
    if not self.vocab_file:
      self.vocab_file = os.path.join(self.pretrained_model_dir, "vocab.txt")
      if not os.path.exists(self.vocab_file):
        self.vocab_file = os.path.join(self.data_dir, "vocab.txt")
    if not self.init_checkpoint:
      self.init_checkpoint = self.pretrained_model_dir
    if not self.model_dir:
      self.model_dir = os.path.join(self.pretrained_model_dir,
                                    "finetuning_models", tasks + "_model")
    if not self.results_txt:
      self.results_txt = os.path.join(self.results_dir, tasks + "_results.txt")
    if not self.results_pkl:
      self.results_pkl = os.path.join(self.results_dir, tasks + "_results.pkl")
    if not self.preprocessed_data_dir:
      self.preprocessed_data_dir = os.path.join(
          self.pretrained_model_dir, "finetuning_tfrecords",
          tasks + "_tfrecords" + ("-debug" if self.debug else ""))

  # ------------------------------------------------------------ validation
  def validate(self) -> None:
    """Raises ConfigError naming the hparam and what is wrong."""
    if self.model_size not in MODEL_SIZES:
      raise ConfigError(f"hparam model_size: {self.model_size!r} is not one of "
                        f"{', '.join(MODEL_SIZES)}")
    if not self.task_names:
      raise ConfigError("hparam task_names: no task given")
    for name in self.task_names:
      if name in _MRQA_TASK_NAMES:
        raise ConfigError(f"hparam task_names: the MRQA task {name!r} is not "
                          f"implemented in electra-tf")
      if name not in TASK_NAMES:
        raise ConfigError(f"hparam task_names: unknown task {name!r}; known: "
                          f"{', '.join(TASK_NAMES)}")
    if len(set(self.task_names)) != len(self.task_names):
      raise ConfigError(f"hparam task_names: {self.task_names} repeats a task")
    for name in ("num_trials", "max_seq_length", "train_batch_size",
                 "eval_batch_size", "predict_batch_size", "max_query_length",
                 "doc_stride", "n_best_size", "max_answer_length", "beam_size",
                 "vocab_size", "save_checkpoints_steps", "iterations_per_loop"):
      if getattr(self, name) <= 0:
        raise ConfigError(f"hparam {name}: {getattr(self, name)} must be > 0")
    for name in ("learning_rate", "num_train_epochs"):
      if getattr(self, name) <= 0:
        raise ConfigError(f"hparam {name}: {getattr(self, name)} must be > 0")
    for name in ("weight_decay_rate", "answerable_weight", "n_writes_test"):
      if getattr(self, name) < 0:
        raise ConfigError(f"hparam {name}: {getattr(self, name)} must be >= 0")
    if not 0.0 <= self.warmup_proportion <= 1.0:
      raise ConfigError(f"hparam warmup_proportion: {self.warmup_proportion} "
                        "is outside [0, 1]")
    model = self.model_config()
    if self.max_seq_length > model.max_position_embeddings:
      raise ConfigError(f"hparam max_seq_length: {self.max_seq_length} exceeds "
                        f"max_position_embeddings {model.max_position_embeddings}")
    if any(is_qa_task(name) for name in self.task_names):
      if self.max_seq_length - self.max_query_length - 3 < 1:
        raise ConfigError(
            f"hparams max_seq_length ({self.max_seq_length}) and "
            f"max_query_length ({self.max_query_length}) leave no room for the "
            "document (need max_seq_length > max_query_length + 3)")
      if self.joint_prediction and self.beam_size > self.max_seq_length:
        raise ConfigError(f"hparam beam_size: {self.beam_size} exceeds "
                          f"max_seq_length {self.max_seq_length}")

  # ------------------------------------------------------- derived values
  def model_config(self) -> ModelConfig:
    """The encoder config (official training_utils.get_bert_config).

    Shared with pre-training, including the debug-mode shrink to 3 layers of
    hidden size 144 that the official FinetuningModel applies.
    """
    return PretrainingConfig.create({
        "model_size": self.model_size, "vocab_size": self.vocab_size,
        "model_hparam_overrides": dict(self.model_hparam_overrides),
        "debug": self.debug}).discriminator_config()

  @property
  def effective_embedding_size(self) -> int:
    """Width of the embedding tables (hidden size when unset)."""
    if self.embedding_size is None:
      return self.model_config().hidden_size
    return int(self.embedding_size)

  def num_train_steps(self, n_train_features: int) -> int:
    """Official step count: the padded feature count // batch * epochs."""
    batch = self.train_batch_size
    padded = -(-n_train_features // batch) * batch
    return int(padded // batch * self.num_train_epochs)

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


def _check_hparams(hparams: Mapping[str, Any]) -> None:
  types = {f.name: f.type for f in dataclasses.fields(FinetuningConfig)}
  for key, value in hparams.items():
    if key in _DERIVED_NAMES:
      raise ConfigError(f"hparam {key}: derived from data_dir, not settable")
    if key not in types:
      raise ConfigError(f"Unknown hparam {key!r}")
    if key == "task_names":
      if (not isinstance(value, list) or
          not all(isinstance(v, str) for v in value)):
        raise ConfigError(f"hparam task_names: expected a list of task names, "
                          f"got {value!r}")
    else:
      _check_value(key, types[key], value)
