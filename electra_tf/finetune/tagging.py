"""CoNLL-2000 chunking (`chunk`), official tagging_tasks.

Reading: `<split>.txt` in CoNLL format (readers.read_conll); the chunk tags
(IOB2 in the file) are converted to BIOES, the label space of the model.  The
label ids number the sorted BIOES tags seen in every split file present
(train, dev, test), as official.

Featurizing: [CLS] word pieces of every word [SEP]; the first word piece of
each word is the labelled position.  Official quirks kept: all tokens have
segment id 1, and a sentence is cut as soon as its pieces so far plus one slot
per word would exceed max_seq_length.  Per feature row:
  <task>_labels             [N, S] int32    label id of word i at column i
  <task>_labels_mask        [N, S] float32  1 for the words that were kept
  <task>_labeled_positions  [N, S] int32    position of word i's first piece

Head: dense (`task_specific/chunk/dense`) over the label set at the labelled
positions; loss = the sum of the words' softmax cross-entropies.  Score:
chunk-level precision / recall / F1 (official span F1).  Predictions are the
words' tags converted back to IOB2, space-separated.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from electra_tf.finetune import metrics
from electra_tf.finetune import readers
from electra_tf.finetune.task import (EvalResult, Features, FeatureSpec, Task,
                                      TaskHead, dense, is_labeled_split,
                                      softmax_cross_entropy)

LABEL_ENCODING = "BIOES"
_FILE_ENCODING = "BIO"  # IOB2, as in the CoNLL-2000 files


@dataclasses.dataclass
class TaggingExample:
  """A sentence: its words and their BIOES label ids."""
  eid: int
  words: Sequence[str]
  labels: List[int]


def to_model_tags(tags: Sequence[str]) -> List[str]:
  """File tags -> BIOES tags (through the chunk spans)."""
  return metrics.tags_from_spans(metrics.span_labels(tags), len(tags),
                                 LABEL_ENCODING)


class ChunkingTask(Task):
  """Text chunking (official tagging_tasks.Chunking)."""

  def __init__(self, config, tokenizer, name: str = "chunk"):
    super().__init__(config, name, tokenizer)
    self._label_mapping: Optional[Dict[str, int]] = None

  def data_path(self, split: str) -> str:
    return os.path.join(self.config.raw_data_dir(self.name), split + ".txt")

  def _sentences(self, split: str):
    return readers.read_conll(self.data_path(split),
                              max_sentences=101 if self.config.debug else None)

  @property
  def label_mapping(self) -> Dict[str, int]:
    """BIOES tag -> label id, over every split file present."""
    if self._label_mapping is None:
      tags = set()
      for split in ("train", "dev", "test"):
        if os.path.isfile(self.data_path(split)):
          for _, sentence_tags in self._sentences(split):
            tags.update(to_model_tags(sentence_tags))
      if not tags:
        raise FileNotFoundError(
            f"{self.config.raw_data_dir(self.name)}: no train/dev/test .txt "
            f"file to take the {self.name} labels from")
      self._label_mapping = {tag: i for i, tag in enumerate(sorted(tags))}
    return self._label_mapping

  @property
  def label_list(self) -> List[str]:
    return sorted(self.label_mapping, key=self.label_mapping.get)

  def get_examples(self, split: str) -> List[TaggingExample]:
    mapping = self.label_mapping
    return [TaggingExample(i, words, [mapping[t] for t in to_model_tags(tags)])
            for i, (words, tags) in enumerate(self._sentences(split))]

  def feature_specs(self) -> Dict[str, FeatureSpec]:
    seq = (self.config.max_seq_length,)
    specs = self.shared_feature_specs()
    specs.update({f"{self.name}_labels": (seq, np.int32),
                  f"{self.name}_labels_mask": (seq, np.float32),
                  f"{self.name}_labeled_positions": (seq, np.int32)})
    return specs

  def featurize(self, examples: Sequence[TaggingExample],
                is_training: bool) -> Features:
    max_length = self.config.max_seq_length
    rows = []
    for example in examples:
      # The official code normalises each word as BasicTokenizer does (clean,
      # lower case, strip accents, split punctuation) then WordPiece: the
      # same as tokenize(word) for a word without spaces, apart from CJK.
      words_to_tokens = ([["[CLS]"]] +
                         [self.tokenizer.tokenize(w) for w in example.words] +
                         [["[SEP]"]])
      tokens, tagged_positions = [], []
      for word_tokens in words_to_tokens:
        if len(words_to_tokens) + len(tokens) + 1 > max_length:
          tokens.append("[SEP]")
          break
        if "[CLS]" not in word_tokens and "[SEP]" not in word_tokens:
          tagged_positions.append(len(tokens))
        tokens.extend(word_tokens)
      input_ids = list(self.tokenizer.convert_tokens_to_ids(tokens))
      rows.append({
          "input_ids": self.pad_ids(input_ids),
          "input_mask": self.pad_ids([1] * len(input_ids)),
          "segment_ids": self.pad_ids([1] * len(input_ids)),
          "task_id": self.task_id,
          f"{self.name}_eid": example.eid,
          f"{self.name}_labels": self.pad_ids(example.labels[:max_length]),
          f"{self.name}_labels_mask": self.pad_ids([1.0] * len(tagged_positions)),
          f"{self.name}_labeled_positions": self.pad_ids(tagged_positions)})
    return self.stack_features(rows, range(len(examples)))

  def build_head(self) -> TaskHead:
    return TaggingHead(self.name, len(self.label_mapping))

  def evaluate(self, examples, features, outputs, split) -> EvalResult:
    labels = self.label_list
    gold, predicted, predictions = [], [], []
    n_words_total = 0
    for row, example_index in enumerate(features.example_index):
      n_words = int(round(float(
          np.sum(features.arrays[f"{self.name}_labels_mask"][row]))))
      n_words_total += n_words
      gold.append([labels[i] for i in
                   features.arrays[f"{self.name}_labels"][row][:n_words]])
      predicted.append([labels[i] for i in outputs["predictions"][row][:n_words]])
      file_tags = metrics.tags_from_spans(
          metrics.span_labels(predicted[-1]), n_words, _FILE_ENCODING)
      predictions.append((str(examples[example_index].eid), " ".join(file_tags)))
    result = {}
    if is_labeled_split(split):
      precision, recall, f1 = metrics.span_precision_recall_f1(gold, predicted)
      # Official quirk: its scorer adds each loss twice before dividing by
      # the number of words.
      loss = 2.0 * float(np.sum(outputs["loss"])) / max(1, n_words_total)
      result = {"precision": 100.0 * precision, "recall": 100.0 * recall,
                "f1": 100.0 * f1, "loss": loss}
    return EvalResult(result, predictions)


class TaggingHead(TaskHead):
  """Dense over the labels at each word's first piece.

  Returns loss [B] (sum over words), logits [B, S, C], predictions [B, S].
  """

  def __init__(self, task_name: str, num_labels: int, **kwargs):
    super().__init__(task_name, **kwargs)
    self.dense = dense(num_labels, "dense")

  def call(self, encoder_outputs, features, training=False):
    word_vectors = tf.gather(encoder_outputs["sequence_output"],
                             self.feature(features, "labeled_positions"),
                             batch_dims=1)
    logits = tf.cast(self.dense(word_vectors), tf.float32)
    losses = softmax_cross_entropy(logits, self.feature(features, "labels"))
    mask = tf.cast(self.feature(features, "labels_mask"), tf.float32)
    return {"loss": tf.reduce_sum(losses * mask, axis=-1),
            "logits": logits,
            "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}
