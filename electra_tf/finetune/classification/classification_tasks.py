"""GLUE sentence(-pair) classification and regression tasks.

Readers as official classification_tasks.py; malformed rows:
docs/finetuning.md ("Malformed data").  Features: [CLS] A [SEP] (B [SEP]),
longer text truncated first; labels `<task>_label_ids` [N] int32, or for STS
`<task>_targets` [N] float32 = score / 5.  Heads on the pooled [CLS] vector:
dropout 0.1 and `task_specific/<task>/dense` (softmax cross-entropy, or 1
output and squared error).
"""

from __future__ import annotations

import abc
import dataclasses
import os
from typing import Any, ClassVar, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from electra_tf import text_graph
from electra_tf.errors import DataError
from electra_tf.finetune import metrics
from electra_tf.finetune import readers
from electra_tf.finetune.classification import classification_metrics
from electra_tf.finetune.classification import classification_serving
from electra_tf.finetune.config import FinetuningConfig
from electra_tf.finetune.task import (EvalResult, Features, FeatureSpec, Task,
                                      TaskHead, dense, is_labeled_split,
                                      softmax_cross_entropy)
from electra_tf.modeling import dropout

_SKIPPED_SHOWN = 5  # skipped train rows named in the warning


@dataclasses.dataclass
class InputExample:
  """One text or text pair with its label (a dummy one on test splits)."""
  eid: int
  text_a: str
  text_b: Optional[str]
  label: Any


class SingleOutputTask(Task):
  """A task with one prediction per example, read from `<split>.tsv`.

  single_text: the examples hold one text (text_a) and the text signature
  takes `text_a` alone; else text pairs.  regression: a score, not a label.
  """
  single_text: ClassVar[bool] = False
  regression: ClassVar[bool] = False
  sentence_examples = True

  def example_text(self, example: InputExample) -> str:
    """text_a, and text_b after a space for a pair."""
    return " ".join(filter(None, (example.text_a, example.text_b))).strip()

  def data_path(self, split: str) -> str:
    return os.path.join(self.config.raw_data_dir(self.name), split + ".tsv")

  def get_examples(self, split: str) -> List[InputExample]:
    path = self.data_path(split)
    rows = readers.read_tsv(path, max_lines=100 if self.config.debug else None)
    return self._create_examples(path, rows, split)

  @abc.abstractmethod
  def _create_examples(self, path: str, rows: Sequence[readers.TsvRow],
                       split: str) -> List[InputExample]:
    """Examples from the rows of `path` (the task's columns)."""

  @property
  @abc.abstractmethod
  def dummy_label(self) -> Any:
    """The label given to examples of unlabeled splits."""

  def _load_glue(self, path: str, rows: Sequence[readers.TsvRow], split: str,
                 text_a_column: int, text_b_column: Optional[int],
                 label_column: Optional[int], skip_first_line: bool,
                 eid_offset: int = 0, swap: bool = False) -> List[InputExample]:
    """Official _load_glue: a row without the columns read is skipped on
    train (one warning) and a MalformedRowError elsewhere; a bad label is an
    error everywhere."""
    examples, skipped = [], []
    for i, row in enumerate(rows):
      if i == 0 and skip_first_line:
        continue
      eid = i - (1 if skip_first_line else 0) + eid_offset
      try:
        text_a = readers.column(path, row, text_a_column)
        text_b = (None if text_b_column is None
                  else readers.column(path, row, text_b_column))
        label_text = (readers.column(path, row, label_column)
                      if is_labeled_split(split) else None)
      except readers.MalformedRowError:
        if split != "train":
          raise
        skipped.append(row.line_number)
        continue
      label = (self.dummy_label if label_text is None
               else self._parse_label(path, row, label_text))
      if swap:
        text_a, text_b = text_b, text_a
      examples.append(InputExample(eid, text_a, text_b, label))
    if skipped and not swap:  # the swapped pass re-reads the same rows
      logging.warning(
          "%s: skipped %d malformed row(s) (too few columns or empty), as the "
          "official reader does: %s%s", path, len(skipped),
          ", ".join(f"{path}:{n}" for n in skipped[:_SKIPPED_SHOWN]),
          ", ..." if len(skipped) > _SKIPPED_SHOWN else "")
    return examples

  @abc.abstractmethod
  def _parse_label(self, path: str, row: readers.TsvRow, text: str) -> Any:
    """The label of a row, or a DataError naming file and line."""

  def featurize(self, examples: Sequence[InputExample],
                is_training: bool) -> Features:
    rows = []
    for example in examples:
      row = self.encode_texts(example.text_a, example.text_b)
      row.update({"task_id": self.task_id, f"{self.name}_eid": example.eid})
      row.update(self._label_features(example))
      rows.append(row)
    return self.stack_features(rows, range(len(examples)))

  def encode_texts(self, text_a: str, text_b: Optional[str]
                   ) -> Dict[str, List[int]]:
    """input_ids / input_mask / segment_ids of [CLS] A [SEP] (B [SEP]), cut
    by text_graph.packed_lengths (the text signature's rule too)."""
    tokens_a = self.tokenizer.tokenize(text_a)
    tokens_b = self.tokenizer.tokenize(text_b) if text_b else []
    keep_a, keep_b = text_graph.packed_lengths(
        len(tokens_a), len(tokens_b), self.config.max_seq_length, np)
    tokens = ["[CLS]"] + tokens_a[:keep_a] + ["[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b:
      tokens += tokens_b[:keep_b] + ["[SEP]"]
      segment_ids += [1] * (keep_b + 1)
    input_ids = self.tokenizer.convert_tokens_to_ids(tokens)
    return {"input_ids": self.pad_ids(list(input_ids)),
            "input_mask": self.pad_ids([1] * len(input_ids)),
            "segment_ids": self.pad_ids(segment_ids)}

  @abc.abstractmethod
  def _label_features(self, example: InputExample) -> Dict[str, Any]:
    """The task-specific label feature(s) of an example."""

  def serving_functions(self, model, text_encoder):
    return classification_serving.classifier_functions(model, self, text_encoder)

  def _example_outputs(self, features: Features, values: np.ndarray
                       ) -> Dict[int, np.ndarray]:
    """Example id -> its row of `values` (the official test-set pickle)."""
    return {int(eid): values[row]
            for row, eid in enumerate(features.arrays[f"{self.name}_eid"])}


class ClassificationTask(SingleOutputTask):
  """One label out of `label_list` per example; accuracy."""

  def __init__(self, config: FinetuningConfig, name: str, tokenizer,
               label_list: Sequence[str]):
    super().__init__(config, name, tokenizer)
    self.label_list = list(label_list)

  @property
  def dummy_label(self) -> str:
    return self.label_list[0]

  def _parse_label(self, path, row, text):
    if text not in self.label_list:
      raise DataError(f"{path}:{row.line_number}: label {text!r} is not one "
                      f"of {', '.join(self.label_list)}")
    return text

  def _label_features(self, example):
    return {f"{self.name}_label_ids": self.label_list.index(example.label)}

  def feature_specs(self) -> Dict[str, FeatureSpec]:
    specs = self.shared_feature_specs()
    specs[f"{self.name}_label_ids"] = ((), np.int32)
    return specs

  def build_head(self) -> TaskHead:
    return ClassificationHead(self.name, len(self.label_list))

  def evaluate(self, examples, features, outputs, split) -> EvalResult:
    predicted = np.asarray(outputs["predictions"])
    predictions = [(str(examples[i].eid), self.label_list[int(p)])
                   for i, p in zip(features.example_index, predicted)]
    result = {}
    if is_labeled_split(split):
      labels = features.arrays[f"{self.name}_label_ids"]
      result = self.metrics(labels, predicted)
      result["loss"] = float(np.mean(outputs["loss"]))
    return EvalResult(result, predictions, example_outputs=self._example_outputs(
        features, np.asarray(outputs["logits"], np.float32)))

  def metrics(self, labels: np.ndarray, predicted: np.ndarray
              ) -> Dict[str, float]:
    return {"accuracy": 100.0 * metrics.accuracy(labels, predicted)}


class RegressionTask(SingleOutputTask):
  """A real-valued score in [min_value, max_value] per example."""
  regression = True

  def __init__(self, config: FinetuningConfig, name: str, tokenizer,
               min_value: float, max_value: float):
    super().__init__(config, name, tokenizer)
    self.min_value = min_value
    self.max_value = max_value

  @property
  def dummy_label(self) -> float:
    return 0.0

  def _parse_label(self, path, row, text):
    try:
      value = float(text)
    except ValueError:
      raise DataError(f"{path}:{row.line_number}: score {text!r} is not a "
                      "number") from None
    if not self.min_value <= value <= self.max_value:
      raise DataError(f"{path}:{row.line_number}: score {value} is outside "
                      f"[{self.min_value}, {self.max_value}]")
    return value

  def normalize(self, score: float) -> float:
    # Official quirk: divides by max_value, not (max - min); same for STS.
    return (score - self.min_value) / self.max_value

  def denormalize(self, target: float) -> float:
    return target * self.max_value + self.min_value

  def _label_features(self, example):
    return {f"{self.name}_targets": self.normalize(example.label)}

  def feature_specs(self) -> Dict[str, FeatureSpec]:
    specs = self.shared_feature_specs()
    specs[f"{self.name}_targets"] = ((), np.float32)
    return specs

  def build_head(self) -> TaskHead:
    return RegressionHead(self.name)

  def evaluate(self, examples, features, outputs, split) -> EvalResult:
    predicted = np.asarray(outputs["predictions"], np.float64)
    predictions = [(str(examples[i].eid), f"{self.denormalize(p):.6f}")
                   for i, p in zip(features.example_index, predicted)]
    result = {}
    if is_labeled_split(split):
      targets = features.arrays[f"{self.name}_targets"].astype(np.float64)
      result = {"pearson": 100.0 * classification_metrics.pearson(targets, predicted),
                "spearman": 100.0 * classification_metrics.spearman(targets, predicted),
                # on the normalised scale, as official
                "mse": float(np.mean(np.square(targets - predicted))),
                "loss": float(np.mean(outputs["loss"]))}
    return EvalResult(result, predictions, example_outputs=self._example_outputs(
        features, np.asarray(outputs["predictions"], np.float32)))


class ClassificationHead(TaskHead):
  """Dropout + dense on the pooled output; softmax cross-entropy.

  Returns loss [B], logits [B, num_labels], predictions [B] int32.
  """

  def __init__(self, task_name: str, num_labels: int, **kwargs):
    super().__init__(task_name, **kwargs)
    self.num_labels = num_labels
    self.dropout = dropout.Dropout(0.1)
    self.dense = dense(num_labels, "dense")

  def get_config(self):
    return {**super().get_config(), "num_labels": self.num_labels}

  def call(self, encoder_outputs, features, training=False):
    pooled = self.dropout(encoder_outputs["pooled_output"], training=training)
    logits = tf.cast(self.dense(pooled), tf.float32)
    return {"loss": softmax_cross_entropy(logits, self.feature(features,
                                                               "label_ids")),
            "logits": logits,
            "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}


class RegressionHead(TaskHead):
  """Dropout + dense(1) on the pooled output; squared error.

  Returns loss [B] and predictions [B] (normalised scale).
  """

  def __init__(self, task_name: str, **kwargs):
    super().__init__(task_name, **kwargs)
    self.dropout = dropout.Dropout(0.1)
    self.dense = dense(1, "dense")

  def call(self, encoder_outputs, features, training=False):
    pooled = self.dropout(encoder_outputs["pooled_output"], training=training)
    predictions = tf.squeeze(tf.cast(self.dense(pooled), tf.float32), -1)
    targets = tf.cast(self.feature(features, "targets"), tf.float32)
    return {"loss": tf.square(predictions - targets),
            "predictions": predictions}


# ------------------------------------------------------------------ tasks
class CoLA(ClassificationTask):
  """Corpus of Linguistic Acceptability; Matthews correlation."""
  help = "GLUE CoLA: acceptability of one sentence (mcc)"
  single_text = True

  def __init__(self, config, tokenizer):
    super().__init__(config, "cola", tokenizer, ["0", "1"])

  def _create_examples(self, path, rows, split):
    is_test = split == "test"
    return self._load_glue(path, rows, split, 1 if is_test else 3, None, 1,
                           skip_first_line=is_test)

  def metrics(self, labels, predicted):
    return {"mcc": 100.0 * classification_metrics.matthews_corrcoef(labels, predicted)}


class SST(ClassificationTask):
  """Stanford Sentiment Treebank (binary)."""
  help = "GLUE SST-2: sentiment of one sentence (accuracy)"
  single_text = True

  def __init__(self, config, tokenizer):
    super().__init__(config, "sst", tokenizer, ["0", "1"])

  def _create_examples(self, path, rows, split):
    if "test" in split:
      return self._load_glue(path, rows, split, 1, None, None, True)
    return self._load_glue(path, rows, split, 0, None, 1, True)


class _ParaphraseTask(ClassificationTask):
  """MRPC / QQP: accuracy plus precision, recall and F1 of label "1".

  The official code reports accuracy only (its unused F1Scorer counts
  predictions as gold); GLUE reports F1 too, with the definition here.
  """

  def metrics(self, labels, predicted):
    precision, recall, f1 = classification_metrics.binary_precision_recall_f1(
        labels, predicted, positive_label=self.label_list.index("1"))
    return {"accuracy": 100.0 * metrics.accuracy(labels, predicted),
            "precision": 100.0 * precision, "recall": 100.0 * recall,
            "f1": 100.0 * f1}


class MRPC(_ParaphraseTask):
  """Microsoft Research Paraphrase Corpus."""
  help = "GLUE MRPC: paraphrase pairs (accuracy, f1)"
  feature_hparams = Task.feature_hparams + ("double_unordered",)

  def __init__(self, config, tokenizer):
    super().__init__(config, "mrpc", tokenizer, ["0", "1"])

  def _create_examples(self, path, rows, split):
    examples = self._load_glue(path, rows, split, 3, 4, 0, True)
    if self.config.double_unordered and split == "train":
      examples += self._load_glue(path, rows, split, 3, 4, 0, True,
                                  eid_offset=len(examples), swap=True)
    return examples


class QQP(_ParaphraseTask):
  """Quora Question Pairs."""
  help = "GLUE QQP: duplicate question pairs (accuracy, f1)"

  def __init__(self, config, tokenizer):
    super().__init__(config, "qqp", tokenizer, ["0", "1"])

  def _create_examples(self, path, rows, split):
    is_test = split == "test"
    return self._load_glue(path, rows, split, 1 if is_test else 3,
                           2 if is_test else 4, 5, True)


class MNLI(ClassificationTask):
  """Multi-Genre NLI; dev is reported matched and mismatched."""
  help = "GLUE MNLI: 3-way entailment (accuracy)"

  def __init__(self, config, tokenizer):
    super().__init__(config, "mnli", tokenizer,
                     ["contradiction", "entailment", "neutral"])

  def data_path(self, split: str) -> str:
    return super().data_path("dev_matched" if split == "dev" else split)

  def eval_splits(self) -> Dict[str, str]:
    return {"dev": "", "dev_mismatched": "mismatched_"}

  def test_splits(self) -> List[str]:
    return ["test_matched", "test_mismatched", "diagnostic"]

  def _create_examples(self, path, rows, split):
    if split == "diagnostic":
      return self._load_glue(path, rows, split, 1, 2, None, True)
    return self._load_glue(path, rows, split, 8, 9, -1, True)


class RTE(ClassificationTask):
  """Recognizing Textual Entailment."""
  help = "GLUE RTE: entailment (accuracy)"
  single_task_defaults = {"num_train_epochs": 10.0}

  def __init__(self, config, tokenizer):
    super().__init__(config, "rte", tokenizer, ["entailment", "not_entailment"])

  def _create_examples(self, path, rows, split):
    return self._load_glue(path, rows, split, 1, 2, 3, True)


class QNLI(ClassificationTask):
  """Question NLI."""
  help = "GLUE QNLI: question-sentence entailment (accuracy)"

  def __init__(self, config, tokenizer):
    super().__init__(config, "qnli", tokenizer,
                     ["entailment", "not_entailment"])

  def _create_examples(self, path, rows, split):
    return self._load_glue(path, rows, split, 1, 2, 3, True)


class STS(RegressionTask):
  """Semantic Textual Similarity Benchmark; Pearson and Spearman."""
  help = "GLUE STS-B: similarity score 0-5 (pearson, spearman)"
  single_task_defaults = {"num_train_epochs": 10.0}
  feature_hparams = Task.feature_hparams + ("double_unordered",)

  def __init__(self, config, tokenizer):
    super().__init__(config, "sts", tokenizer, 0.0, 5.0)

  def _create_examples(self, path, rows, split):
    if split == "test":
      examples = self._load_glue(path, rows, split, -2, -1, None, True)
    else:
      examples = self._load_glue(path, rows, split, -3, -2, -1, True)
    if self.config.double_unordered and split == "train":
      examples += self._load_glue(path, rows, split, -3, -2, -1, True,
                                  eid_offset=len(examples), swap=True)
    return examples
