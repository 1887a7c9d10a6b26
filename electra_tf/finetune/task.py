"""The fine-tuning task interface and the pieces every task shares.

A task (official finetune/task.py) reads a split into examples
(`get_examples`), featurizes them (`featurize`: NumPy arrays, N rows,
input_ids, input_mask, segment_ids [N, S] int32, task_id [N], <task>_eid
[N] and its labels), builds its head (`build_head`: a layer
`task_specific/<task>` called as `head({"sequence_output": [B, S, H],
"pooled_output": [B, H]}, features, training=...)` -> at least "loss" [B])
and scores the head's outputs (`evaluate`).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
import tf_keras as keras
from electra_tf.finetune.config import FinetuningConfig
from electra_tf.train_loop import log

# (per-row shape, dtype) of one feature array.
FeatureSpec = Tuple[Tuple[int, ...], Any]


def is_labeled_split(split: str) -> bool:
  """Official rule: test and diagnostic splits carry no labels."""
  return "test" not in split and "diagnostic" not in split


@dataclasses.dataclass
class Features:
  """Feature arrays of one split, `arrays[k].shape[0] == len(self)`."""
  arrays: Dict[str, np.ndarray]
  example_index: np.ndarray  # [N] index into the split's examples

  def __len__(self) -> int:
    return len(self.example_index)


@dataclasses.dataclass
class EvalResult:
  """Official metrics of a split and one (key, prediction) per example, plus
  what the official prediction files hold (None where a task has none):

  example_outputs  GLUE: example id -> logits [num_labels] (or the prediction)
  qa_preds         span QA: question id -> the best (non-empty) answer
  qa_null_odds     SQuAD 2.0: question id -> null score minus best answer's
  tables           name -> a tab-separated table for
                   results/<task>_<split>_<name>.tsv"""
  metrics: Dict[str, float]
  predictions: List[Tuple[str, str]]
  key_name: str = "index"  # what the key column holds
  example_outputs: Optional[Dict[int, np.ndarray]] = None
  qa_preds: Optional[Dict[str, str]] = None
  qa_null_odds: Optional[Dict[str, float]] = None
  tables: Dict[str, str] = dataclasses.field(default_factory=dict)


class TaskHead(keras.layers.Layer):
  """Base of the task heads: variables under `task_specific/<task>/`."""

  def __init__(self, task_name: str, **kwargs):
    super().__init__(name=f"task_specific/{task_name}", **kwargs)
    self.task_name = task_name

  def get_config(self) -> Dict[str, Any]:
    config = {**super().get_config(), "task_name": self.task_name}
    del config["name"]  # derived from task_name
    return config

  def feature(self, features: Mapping[str, Any], key: str):
    return features[f"{self.task_name}_{key}"]


def softmax_cross_entropy(logits: tf.Tensor, label_ids: tf.Tensor) -> tf.Tensor:
  """-log softmax(logits)[label] over the last axis: [..., C] -> [...]."""
  log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
  one_hot = tf.one_hot(label_ids, tf.shape(logits)[-1], dtype=tf.float32)
  return -tf.reduce_sum(one_hot * log_probs, axis=-1)


def dense(units: int, name: str, activation=None) -> keras.layers.Dense:
  """An official `tf.layers.dense` without initializer arguments: the kernel
  gets the TF1 default Glorot-uniform initializer, the bias zeros."""
  return keras.layers.Dense(units, activation=activation, name=name,
                            kernel_initializer="glorot_uniform",
                            bias_initializer="zeros")


class Task(abc.ABC):
  """One fine-tuning task (official finetune/task.py).

  Class attributes the job reads before building one:
    help                  one line for the --task_names help
    single_task_defaults  hparams the task sets when it is the only task
    check_config(config)  ConfigError when the hparams cannot serve it
    sentence_examples     each example is a text or a text pair
                          (`example_text`)
    feature_hparams       hparams its features depend on (the cache's record)"""
  help: ClassVar[str] = ""
  single_task_defaults: ClassVar[Mapping[str, Any]] = {}
  sentence_examples: ClassVar[bool] = False
  feature_hparams: ClassVar[Tuple[str, ...]] = ("max_seq_length", "do_lower_case", "debug")

  @classmethod
  def check_config(cls, config: FinetuningConfig) -> None:
    """Raises ConfigError naming the hparam when `config` cannot serve the
    task (nothing to check by default)."""

  def __init__(self, config: FinetuningConfig, name: str, tokenizer):
    self.config = config
    self.name = name
    self.tokenizer = tokenizer

  @property
  def task_id(self) -> int:
    return self.config.task_names.index(self.name)

  def eval_splits(self) -> Dict[str, str]:
    """Dev splits to evaluate, each with the prefix of its metric names."""
    return {"dev": ""}

  def test_splits(self) -> List[str]:
    return ["test"]

  @abc.abstractmethod
  def get_examples(self, split: str) -> List[Any]:
    """Examples of `split` in file order."""

  @abc.abstractmethod
  def featurize(self, examples: Sequence[Any], is_training: bool) -> Features:
    """Fixed-length features of `examples` (labels zero where unknown)."""

  @abc.abstractmethod
  def feature_specs(self) -> Dict[str, FeatureSpec]:
    """Every feature array this task produces, by name."""

  @abc.abstractmethod
  def build_head(self) -> TaskHead:
    """A fresh head layer."""

  @abc.abstractmethod
  def evaluate(self, examples: Sequence[Any], features: Features,
               outputs: Mapping[str, np.ndarray], split: str) -> EvalResult:
    """Metrics (labeled splits) and predictions from the head outputs."""

  def example_text(self, example: Any) -> str:
    """The text of an example as one line (tasks with sentence_examples)."""
    raise TypeError(f"task {self.name}: its examples are not sentences")

  def serving_functions(self, model, text_encoder):
    """(serve, serve_text) of this task's SavedModel (finetune/task_saved_model.py):
    `serve` takes the ids, `serve_text` raw strings (None when text_encoder
    is None).  model: the FinetuningModel; text_encoder: a
    text_graph.TextEncoder or None."""
    raise TypeError(f"task {self.name}: {type(self).__name__} has no export")

  # ------------------------------------------------------------- helpers
  def shared_feature_specs(self) -> Dict[str, FeatureSpec]:
    seq = (self.config.max_seq_length,)
    return {"input_ids": (seq, np.int32), "input_mask": (seq, np.int32),
            "segment_ids": (seq, np.int32), "task_id": ((), np.int32),
            f"{self.name}_eid": ((), np.int32)}

  def stack_features(self, rows: Sequence[Mapping[str, Any]],
                     example_index: Sequence[int]) -> Features:
    """Features from per-feature dicts holding every key of feature_specs."""
    if self.config.log_examples and rows:
      log(f"{self.name} first feature: {dict(rows[0])}")
    arrays = {}
    for key, (shape, dtype) in self.feature_specs().items():
      arrays[key] = np.asarray([row[key] for row in rows],
                               dtype=dtype).reshape((len(rows),) + shape)
    return Features(arrays, np.asarray(example_index, np.int64))

  def pad_ids(self, values: List[int]) -> List[int]:
    """Zero-pads `values` to max_seq_length."""
    return values + [0] * (self.config.max_seq_length - len(values))


def combine_features(task_features: Sequence[Tuple[Task, Features]]
                     ) -> Dict[str, np.ndarray]:
  """Rows of several tasks in one set of arrays (multi-task training).

  Every array of every task is present; rows of a task that lacks an array get
  zeros there (the official default feature values).
  """
  specs: Dict[str, FeatureSpec] = {}
  for task, _ in task_features:
    specs.update(task.feature_specs())
  combined = {}
  for key, (shape, dtype) in specs.items():
    parts = [features.arrays.get(key, np.zeros((len(features),) + shape, dtype))
             for _, features in task_features]
    combined[key] = np.concatenate(parts).astype(dtype, copy=False)
  return combined
