"""Sequence tagging: `TaggingTask` (a label per word), `SpanTaggingTask` (tags
read as spans, learned as BIOES as the official tagging model): chunking
(`chunk`) and NER (`ner`).

Features: [CLS] the pieces of the kept words [SEP] (`word_fits`), a word
labelled at its first piece (official):
  <task>_labels             [N, S] int32    label id of word i at column i
  <task>_labels_mask        [N, S] float32  1 for the words that were kept
  <task>_labeled_positions  [N, S] int32    position of word i's first piece
The rules declared here are what the text signature follows too.
"""

from __future__ import annotations

import abc
import dataclasses
import os
from typing import ClassVar, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from electra_tf import tokenization
from electra_tf.errors import ConfigError, DataError
from electra_tf.finetune import metrics
from electra_tf.finetune import readers
from electra_tf.finetune.tagging import spans
from electra_tf.finetune.tagging import tagging_metrics
from electra_tf.finetune.tagging import tagging_serving
from electra_tf.finetune.task import (EvalResult, Features, FeatureSpec, Task,
                                      TaskHead, dense, is_labeled_split,
                                      softmax_cross_entropy)

LABEL_SCHEME = "BIOES"  # the tags a span task's model predicts


@dataclasses.dataclass
class TaggingExample:
  """A sentence: its words, their tags as in the file and their label ids."""
  eid: int
  words: Sequence[str]
  labels: List[int]
  file_tags: Sequence[str] = ()


@dataclasses.dataclass
class TaggedSentence:
  """What `TaggingTask.evaluate` hands the scorer for one example: the
  example, how many words the featurizer kept, and the gold and predicted
  model tags of the kept words."""
  example: TaggingExample
  n_kept: int
  gold: List[str]
  predicted: List[str]


class TaggingTask(Task):
  """One tag per word of CoNLL-format sentences, the file's sorted tags as
  labels; accuracy over the kept words.  Subclasses may change the rules
  below, which the featurizer and the text signature both read."""
  help = "token-level tagging of CoNLL files"
  sentence_examples = True
  tag_field: ClassVar[int] = -1  # the field of a CoNLL line that holds the tag
  span_rule: ClassVar[Optional[spans.BoundaryRule]] = None  # None: token-level
  segment_id: ClassVar[int] = 0  # of every token
  # The piece of a word that has none (only control characters), so that
  # every word has a labelled position; None: the word has no piece.
  empty_word_piece: ClassVar[Optional[str]] = tokenization.UNK_TOKEN
  # The text signature also returns the entities (span tasks) with character
  # offsets; its words are then split as the tokenizer splits them.
  entity_outputs: ClassVar[bool] = False
  # Words cut at max_seq_length are tagged O in the predictions and the text
  # signature (span tasks); else they have no tag.
  tags_cut_words: ClassVar[bool] = False

  def __init__(self, config, name: str, tokenizer):
    super().__init__(config, name, tokenizer)
    self._label_mapping: Optional[Dict[str, int]] = None

  # ------------------------------------------------------------- reading
  def data_path(self, split: str) -> str:
    return os.path.join(self.config.raw_data_dir(self.name), split + ".txt")

  def sentences(self, split: str) -> List[readers.ConllSentence]:
    """The sentences of `split` (101 in debug mode, as official)."""
    return readers.read_conll_sentences(
        self.data_path(split), max_sentences=101 if self.config.debug else None,
        tag_field=self.tag_field, span_tags=self.span_rule is not None)

  def to_model_tags(self, tags: Sequence[str]) -> List[str]:
    """File tags -> the tags the model learns."""
    return list(tags)

  def label_tags(self) -> List[str]:
    """The tags the model predicts, in label-id order: the sorted model
    tags of every split file present (train, dev, test; official)."""
    tags = set()
    for split in ("train", "dev", "test"):
      if os.path.isfile(self.data_path(split)):
        for sentence in self.sentences(split):
          tags.update(self.to_model_tags(sentence.tags))
    if not tags:
      raise DataError(f"{self.config.raw_data_dir(self.name)}: no train/dev/test .txt "
                      f"file to take the {self.name} labels from")
    return sorted(tags)

  @property
  def label_mapping(self) -> Dict[str, int]:
    """Model tag -> label id."""
    if self._label_mapping is None:
      self._label_mapping = {tag: i for i, tag in enumerate(self.label_tags())}
    return self._label_mapping

  @property
  def label_list(self) -> List[str]:
    return sorted(self.label_mapping, key=self.label_mapping.get)

  def get_examples(self, split: str) -> List[TaggingExample]:
    mapping = self.label_mapping
    examples = []
    for i, sentence in enumerate(self.sentences(split)):
      examples.append(TaggingExample(
          i, sentence.words, [mapping[t] for t in self.to_model_tags(sentence.tags)],
          sentence.tags))
    return examples

  def example_text(self, example: TaggingExample) -> str:
    """The words separated by spaces."""
    return " ".join(example.words)

  # --------------------------------------------------------- featurizing
  def feature_specs(self) -> Dict[str, FeatureSpec]:
    seq = (self.config.max_seq_length,)
    specs = self.shared_feature_specs()
    specs.update({f"{self.name}_labels": (seq, np.int32),
                  f"{self.name}_labels_mask": (seq, np.float32),
                  f"{self.name}_labeled_positions": (seq, np.int32)})
    return specs

  def word_pieces(self, word: str) -> List[str]:
    """The pieces of one word (empty_word_piece for a word that has none)."""
    pieces = self.tokenizer.tokenize(word)
    if not pieces and self.empty_word_piece is not None:
      return [self.empty_word_piece]
    return pieces

  def word_fits(self, begin, n_pieces, n_words):
    """Whether a word whose n_pieces start at token position `begin` is
    kept, in a sentence of n_words words: ints here, int64 tensors in the
    text signature (arithmetic only).  [CLS] is the word of one piece at
    0.  Once a word does not fit, no later one does.  Here: [CLS], the
    word's pieces and [SEP] fit max_seq_length."""
    del n_words  # unused by this rule
    return begin + n_pieces + 1 <= self.config.max_seq_length

  def pack_words(self, pieces_per_word: Sequence[Sequence[str]]
                 ) -> Tuple[List[str], List[int]]:
    """[CLS] (if it fits) the pieces of the words that fit [SEP] (`word_fits`):
    the tokens and the position of each kept word's first piece."""
    n_words = len(pieces_per_word)
    if not self.word_fits(0, 1, n_words):
      return ["[SEP]"], []
    tokens, positions = ["[CLS]"], []
    for pieces in pieces_per_word:
      if not self.word_fits(len(tokens), len(pieces), n_words):
        break
      positions.append(len(tokens))
      tokens.extend(pieces)
    return tokens + ["[SEP]"], positions

  def featurize(self, examples: Sequence[TaggingExample],
                is_training: bool) -> Features:
    max_length = self.config.max_seq_length
    rows = []
    for example in examples:
      tokens, positions = self.pack_words([self.word_pieces(w) for w in example.words])
      input_ids = list(self.tokenizer.convert_tokens_to_ids(tokens))
      rows.append({
          "input_ids": self.pad_ids(input_ids),
          "input_mask": self.pad_ids([1] * len(input_ids)),
          "segment_ids": self.pad_ids([self.segment_id] * len(input_ids)),
          "task_id": self.task_id,
          f"{self.name}_eid": example.eid,
          f"{self.name}_labels": self.pad_ids(example.labels[:max_length]),
          f"{self.name}_labels_mask": self.pad_ids([1.0] * len(positions)),
          f"{self.name}_labeled_positions": self.pad_ids(positions)})
    return self.stack_features(rows, range(len(examples)))

  def build_head(self) -> TaskHead:
    return TaggingHead(self.name, len(self.label_mapping))

  # ------------------------------------------------------------- scoring
  def evaluate(self, examples, features, outputs, split) -> EvalResult:
    labels = self.label_list
    sentences = []
    for row, example_index in enumerate(features.example_index):
      n_kept = int(round(float(
          np.sum(features.arrays[f"{self.name}_labels_mask"][row]))))
      sentences.append(TaggedSentence(
          examples[example_index], n_kept,
          [labels[i] for i in features.arrays[f"{self.name}_labels"][row][:n_kept]],
          [labels[i] for i in outputs["predictions"][row][:n_kept]]))
    loss_sum = float(np.sum(outputs["loss"]))
    return self.score(sentences, loss_sum, is_labeled_split(split))

  def score(self, sentences: Sequence[TaggedSentence], loss_sum: float,
            labeled: bool) -> EvalResult:
    """Metrics (when `labeled`) and one prediction per sentence (its tags,
    space-separated).  loss_sum: the head's loss summed over the kept words
    of all sentences."""
    predictions = [(str(s.example.eid), " ".join(s.predicted)) for s in sentences]
    if not labeled:
      return EvalResult({}, predictions)
    n_words = sum(s.n_kept for s in sentences)
    return EvalResult({
        "accuracy": 100.0 * metrics.accuracy([t for s in sentences for t in s.gold],
                                             [t for s in sentences for t in s.predicted]),
        "loss": loss_sum / max(1, n_words)}, predictions)

  # ------------------------------------------------------------- serving
  def serving_functions(self, model, text_encoder):
    return tagging_serving.tagger_functions(model, self, text_encoder)


class SpanTaggingTask(TaggingTask):
  """Tags read as spans: files in `file_scheme`, spans read by `span_rule`,
  learned and predicted as BIOES tags; predictions written in file_scheme.
  Subclasses score (`score`)."""
  span_rule = spans.LENIENT

  def __init__(self, config, name: str, tokenizer, file_scheme: str):
    super().__init__(config, name, tokenizer)
    self.file_scheme = spans.canonical_scheme(file_scheme)

  def to_model_tags(self, tags: Sequence[str]) -> List[str]:
    """File tags -> BIOES tags (through the spans `span_rule` reads)."""
    return spans.encode(spans.decode(tags, self.span_rule), len(tags), LABEL_SCHEME)

  def file_tags(self, model_tags: Sequence[str], n_words: int) -> List[str]:
    """Predicted BIOES tags of the first words -> tags of `n_words` words in
    file_scheme (the words after them O)."""
    return spans.encode(spans.decode(model_tags, self.span_rule), n_words,
                        self.file_scheme)

  def predicted_tags(self, sentence: TaggedSentence) -> List[str]:
    """A sentence's predicted tags in file_scheme: its kept words' (all its
    words' with tags_cut_words)."""
    n_words = len(sentence.example.words) if self.tags_cut_words else sentence.n_kept
    return self.file_tags(sentence.predicted, n_words)

  @abc.abstractmethod
  def score(self, sentences, loss_sum, labeled) -> EvalResult:
    """As TaggingTask.score, the predictions being `predicted_tags`."""


class ChunkingTask(SpanTaggingTask):
  """Text chunking on CoNLL-2000 (official tagging_tasks.Chunking).

  Official behaviour kept: IOB2 files read by the CHUNK rule, sorted BIOES
  labels from every split, segment id 1, a sentence cut when its pieces plus
  one slot per word would exceed max_seq_length, chunk F1 over kept words,
  each word's eval loss counted twice."""
  span_rule = spans.CHUNK
  segment_id = 1
  empty_word_piece = None
  help = "CoNLL-2000 chunking (official; IOB2 files, chunk-level F1)"
  single_task_defaults = {"max_seq_length": 256}

  def __init__(self, config, tokenizer, name: str = "chunk"):
    super().__init__(config, name, tokenizer, "IOB2")

  def word_fits(self, begin, n_pieces, n_words):
    # The official loop over [CLS], the words and [SEP] stops when the
    # entries (n_words + 2), the tokens so far and one exceed max_seq_length.
    del n_pieces  # unused by this rule
    return n_words + 3 + begin <= self.config.max_seq_length

  def score(self, sentences, loss_sum, labeled) -> EvalResult:
    predictions = [(str(s.example.eid), " ".join(self.predicted_tags(s)))
                   for s in sentences]
    if not labeled:
      return EvalResult({}, predictions)
    precision, recall, f1 = tagging_metrics.span_precision_recall_f1(
        [s.gold for s in sentences], [s.predicted for s in sentences])
    # Official quirk: its scorer adds each loss twice before dividing by
    # the number of words.
    n_words = sum(s.n_kept for s in sentences)
    return EvalResult({"precision": 100.0 * precision, "recall": 100.0 * recall,
                       "f1": 100.0 * f1, "loss": 2.0 * loss_sum / max(1, n_words)},
                      predictions)


class NER(SpanTaggingTask):
  """Named-entity recognition on CoNLL-2003-format files.

  Tags in hparam `tagging_scheme`, entity types the training file's, spans
  by the conlleval rule; words cut at max_seq_length are predicted O.  Scores
  as seqeval (default and strict_*), per type in `entities`."""
  help = "named-entity recognition (CoNLL-2003 format; entity F1 as seqeval)"
  entity_outputs = True
  tags_cut_words = True
  single_task_defaults = {"do_lower_case": False}

  @classmethod
  def check_config(cls, config) -> None:
    try:
      spans.canonical_scheme(config.tagging_scheme)
    except ConfigError as e:
      raise ConfigError(f"hparam tagging_scheme: {e}") from None

  def __init__(self, config, tokenizer, name: str = "ner"):
    super().__init__(config, name, tokenizer, config.tagging_scheme)
    self._sentences: Dict[str, List[readers.ConllSentence]] = {}

  def sentences(self, split: str) -> List[readers.ConllSentence]:
    """As TaggingTask.sentences, the file checked against file_scheme (a
    file in another scheme, `spans.better_scheme`, is a DataError that
    names it) and each tag against file_scheme and (but on train) the
    training file's types (DataError with file:line)."""
    if split not in self._sentences:
      types = None if split == "train" else self.entity_types()  # train checked first
      path = self.data_path(split)
      sentences = super().sentences(split)
      self._check_scheme(path, sentences)
      for sentence in sentences:
        for tag, line_number in zip(sentence.tags, sentence.line_numbers):
          try:
            spans.check_scheme_tags([tag], self.file_scheme)
          except DataError as e:
            raise DataError(f"{path}:{line_number}: {e} (hparam tagging_scheme "
                            f"{self.file_scheme})") from None
          if types is not None and tag != spans.OUTSIDE and spans.type_of(tag) not in types:
            raise DataError(
                f"{path}:{line_number}: entity type {spans.type_of(tag)!r} does not "
                f"occur in {self.data_path('train')} (types: {', '.join(types)})")
      self._sentences[split] = sentences
    return self._sentences[split]

  def _check_scheme(self, path: str, sentences: Sequence[readers.ConllSentence]) -> None:
    found = spans.better_scheme([sentence.tags for sentence in sentences], self.file_scheme)
    if found:
      declared, other = found
      sentence, word = declared.first_ill_formed
      in_other = f"{other.n_ill_formed:,}" if other.n_ill_formed else "none"
      raise DataError(
          f"{path}: {declared.n_ill_formed:,} of {declared.n_entities:,} entities are "
          f"ill-formed in hparam tagging_scheme {declared.scheme} (the first on line "
          f"{sentences[sentence].line_numbers[word]}) but {in_other} in {other.scheme}; "
          f"set hparam tagging_scheme to {other.scheme}")

  def entity_types(self) -> List[str]:
    """The sorted entity types of the training file."""
    return sorted({spans.type_of(tag) for sentence in self.sentences("train")
                   for tag in sentence.tags if tag != spans.OUTSIDE})

  def label_tags(self) -> List[str]:
    return [spans.OUTSIDE] + [f"{prefix}-{entity_type}"
                              for entity_type in self.entity_types()
                              for prefix in LABEL_SCHEME if prefix != spans.OUTSIDE]

  def score(self, sentences, loss_sum, labeled) -> EvalResult:
    predicted = [self.predicted_tags(s) for s in sentences]
    predictions = [(str(s.example.eid), " ".join(tags))
                   for s, tags in zip(sentences, predicted)]
    if not labeled:
      return EvalResult({}, predictions)
    gold = [list(s.example.file_tags) for s in sentences]
    results, tables = {}, {}
    rows = ["mode\ttype\tprecision\trecall\tf1\tgold\tpredicted\tcorrect"]
    for mode, strict in (("", False), ("strict_", True)):
      counts = tagging_metrics.entity_counts(gold, predicted, self.file_scheme, strict)
      all_types = [("ALL", tagging_metrics.total(counts))]
      for entity_type, type_counts in all_types + list(counts.items()):
        scores = [100.0 * v for v in type_counts.precision_recall_f1()]
        if entity_type == "ALL":
          results.update(dict(zip((mode + "precision", mode + "recall", mode + "f1"),
                                  scores)))
        rows.append("\t".join([mode.rstrip("_") or "default", entity_type] +
                              [f"{v:.2f}" for v in scores] +
                              [str(type_counts.n_gold), str(type_counts.n_predicted),
                               str(type_counts.n_correct)]))
    tables["entities"] = "\n".join(rows) + "\n"
    results["loss"] = loss_sum / max(1, sum(s.n_kept for s in sentences))
    return EvalResult(results, predictions, tables=tables)


class TaggingHead(TaskHead):
  """Dense over the labels at each word's first piece.

  Returns loss [B] (sum over words), logits [B, S, C], predictions [B, S].
  """

  def __init__(self, task_name: str, num_labels: int, **kwargs):
    super().__init__(task_name, **kwargs)
    self.num_labels = num_labels
    self.dense = dense(num_labels, "dense")

  def get_config(self):
    return {**super().get_config(), "num_labels": self.num_labels}

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
