"""Sequence tagging: the `TaggingTask` base, chunking (`chunk`) and NER (`ner`).

CoNLL files (`readers.read_conll_sentences`) whose tags are in the task's
`file_scheme` are read as spans by its `span_rule` and learned as BIOES tags
(spans.encode), as the official tagging model does.  Features: [CLS] the
pieces of each word [SEP], a word labelled at its first piece (official):
  <task>_labels             [N, S] int32    label id of word i at column i
  <task>_labels_mask        [N, S] float32  1 for the words that were kept
  <task>_labeled_positions  [N, S] int32    position of word i's first piece
Predictions: the predicted tags read by `span_rule`, written in
`file_scheme`, one line per sentence.  A new tagging task is a subclass
(see `NER`) and a registry line (finetune/config.py TASKS); docs/finetuning.md.
"""

from __future__ import annotations

import abc
import dataclasses
import os
from typing import ClassVar, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from electra_tf.errors import DataError
from electra_tf.finetune import readers
from electra_tf.finetune import spans
from electra_tf.finetune.task import (EvalResult, Features, FeatureSpec, Task,
                                      TaskHead, dense, is_labeled_split,
                                      softmax_cross_entropy)

LABEL_SCHEME = "BIOES"  # the tags the model predicts
UNKNOWN_TOKEN = "[UNK]"


@dataclasses.dataclass
class TaggingExample:
  """A sentence: its words, their tags as in the file and their label ids
  (the BIOES tags of the file's spans)."""
  eid: int
  words: Sequence[str]
  labels: List[int]
  file_tags: Sequence[str] = ()


@dataclasses.dataclass
class TaggedSentence:
  """What `TaggingTask.evaluate` hands the scorer for one example: the
  example, how many words the featurizer kept, and the gold and predicted
  BIOES tags of the kept words."""
  example: TaggingExample
  n_kept: int
  gold: List[str]
  predicted: List[str]


class TaggingTask(Task):
  """One tag per word of CoNLL-format sentences (module docstring).

  Subclasses set `file_scheme` (the scheme of the data files) and may change
  `span_rule` (how tags are read as spans), `segment_id`, how a sentence is
  cut (`pack_words`), the label set (`label_tags`) and scoring (`score`).
  """
  span_rule: ClassVar[spans.BoundaryRule] = spans.LENIENT
  segment_id: ClassVar[int] = 0  # of every token
  # The text signature returns entities with character offsets (else the
  # words and their tags; finetune/tagging_export.py).
  serves_entities: ClassVar[bool] = False
  sentence_examples = True

  def __init__(self, config, name: str, tokenizer, file_scheme: str):
    super().__init__(config, name, tokenizer)
    self.file_scheme = spans.canonical_scheme(file_scheme)
    self._label_mapping: Optional[Dict[str, int]] = None

  # ------------------------------------------------------------- reading
  def data_path(self, split: str) -> str:
    return os.path.join(self.config.raw_data_dir(self.name), split + ".txt")

  def sentences(self, split: str) -> List[readers.ConllSentence]:
    """The sentences of `split` (101 in debug mode, as official)."""
    return readers.read_conll_sentences(
        self.data_path(split), max_sentences=101 if self.config.debug else None)

  def to_model_tags(self, tags: Sequence[str]) -> List[str]:
    """File tags -> BIOES tags (through the spans `span_rule` reads)."""
    return spans.encode(spans.decode(tags, self.span_rule), len(tags), LABEL_SCHEME)

  @abc.abstractmethod
  def label_tags(self) -> List[str]:
    """The BIOES tags the model predicts, in label-id order."""

  @property
  def label_mapping(self) -> Dict[str, int]:
    """BIOES tag -> label id."""
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
    """The pieces of one word; [UNK] for a word that has none (e.g. only
    control characters), so that every word has a labelled position."""
    return self.tokenizer.tokenize(word) or [UNKNOWN_TOKEN]

  def pack_words(self, pieces_per_word: Sequence[Sequence[str]]
                 ) -> Tuple[List[str], List[int]]:
    """[CLS] the pieces of the words that fit [SEP]: the tokens and the
    position of each kept word's first piece.  Words are kept from the start
    while [CLS], their pieces and [SEP] fit max_seq_length."""
    tokens, positions = ["[CLS]"], []
    for pieces in pieces_per_word:
      if len(tokens) + len(pieces) + 1 > self.config.max_seq_length:
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

  def file_tags(self, model_tags: Sequence[str], n_words: int) -> List[str]:
    """Predicted BIOES tags of the first words -> tags of `n_words` words in
    file_scheme (the words after them O)."""
    return spans.encode(spans.decode(model_tags, self.span_rule), n_words,
                        self.file_scheme)

  @abc.abstractmethod
  def score(self, sentences: Sequence[TaggedSentence], loss_sum: float,
            labeled: bool) -> EvalResult:
    """Metrics (when `labeled`) and one prediction per sentence (its tags
    in file_scheme, space-separated).  loss_sum: the head's loss summed over
    the kept words of all sentences."""

  # ------------------------------------------------------------- serving
  def serving_functions(self, model, text_encoder):
    from electra_tf.finetune import tagging_export  # pylint: disable=g-import-not-at-top
    return tagging_export.tagger_functions(model, self, text_encoder)


class ChunkingTask(TaggingTask):
  """Text chunking on CoNLL-2000 (official tagging_tasks.Chunking).

  Official behaviour kept: the file is IOB2; the CHUNK rule reads spans (an
  I- of another type continues a chunk); the labels are the sorted BIOES
  tags seen in every split file present (train, dev, test); every token has
  segment id 1; a sentence is cut as soon as its pieces so far plus one slot
  per word would exceed max_seq_length; the score is chunk-level F1 over the
  kept words; the eval loss adds each word's loss twice.
  """
  span_rule = spans.CHUNK
  segment_id = 1
  help = "CoNLL-2000 chunking (official; IOB2 files, chunk-level F1)"
  single_task_defaults = {"max_seq_length": 256}

  def __init__(self, config, tokenizer, name: str = "chunk"):
    super().__init__(config, name, tokenizer, "IOB2")

  def label_tags(self) -> List[str]:
    tags = set()
    for split in ("train", "dev", "test"):
      if os.path.isfile(self.data_path(split)):
        for sentence in self.sentences(split):
          tags.update(self.to_model_tags(sentence.tags))
    if not tags:
      raise FileNotFoundError(
          f"{self.config.raw_data_dir(self.name)}: no train/dev/test .txt "
          f"file to take the {self.name} labels from")
    return sorted(tags)

  def word_pieces(self, word: str) -> List[str]:
    # The official code normalises each word as BasicTokenizer does (clean,
    # lower case, strip accents, split punctuation) then WordPiece: the
    # same as tokenize(word) for a word without spaces, apart from CJK.
    return self.tokenizer.tokenize(word)

  def pack_words(self, pieces_per_word):
    max_length = self.config.max_seq_length
    words_to_tokens = [["[CLS]"]] + list(pieces_per_word) + [["[SEP]"]]
    tokens, positions = [], []
    for word_tokens in words_to_tokens:
      if len(words_to_tokens) + len(tokens) + 1 > max_length:
        tokens.append("[SEP]")
        break
      if "[CLS]" not in word_tokens and "[SEP]" not in word_tokens:
        positions.append(len(tokens))
      tokens.extend(word_tokens)
    return tokens, positions

  def score(self, sentences, loss_sum, labeled) -> EvalResult:
    predictions = [(str(s.example.eid), " ".join(self.file_tags(s.predicted, s.n_kept)))
                   for s in sentences]
    if not labeled:
      return EvalResult({}, predictions)
    counts = spans.total(spans.span_counts([s.gold for s in sentences],
                                           [s.predicted for s in sentences],
                                           spans.chunk_spans))
    precision, recall, f1 = counts.precision_recall_f1()
    # Official quirk: its scorer adds each loss twice before dividing by
    # the number of words.
    n_words = sum(s.n_kept for s in sentences)
    return EvalResult({"precision": 100.0 * precision, "recall": 100.0 * recall,
                       "f1": 100.0 * f1, "loss": 2.0 * loss_sum / max(1, n_words)},
                      predictions)


class NER(TaggingTask):
  """Named-entity recognition on CoNLL-2003-format files.

  Tags in hparam `tagging_scheme` (IOB1, IOB2, BIOES), the entity types those
  of the training file (others are an error), spans read by the conlleval
  rule (spans.LENIENT).  Words cut at max_seq_length are predicted O.  Scores
  as seqeval over whole sentences: precision, recall, f1 (default mode) and
  strict_* (strict mode), micro-averaged, and per type in the `entities`
  table; the eval loss is the mean over kept words.  do_lower_case false by
  default (a cased vocab).
  """
  help = "named-entity recognition (CoNLL-2003 format; entity F1 as seqeval)"
  serves_entities = True
  single_task_defaults = {"do_lower_case": False}

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
    predicted = [self.file_tags(s.predicted, len(s.example.words)) for s in sentences]
    predictions = [(str(s.example.eid), " ".join(tags))
                   for s, tags in zip(sentences, predicted)]
    if not labeled:
      return EvalResult({}, predictions)
    gold = [list(s.example.file_tags) for s in sentences]
    metrics, tables = {}, {}
    rows = ["mode\ttype\tprecision\trecall\tf1\tgold\tpredicted\tcorrect"]
    for mode, strict in (("", False), ("strict_", True)):
      counts = spans.entity_counts(gold, predicted, self.file_scheme, strict)
      for entity_type, type_counts in [("ALL", spans.total(counts))] + list(counts.items()):
        scores = [100.0 * v for v in type_counts.precision_recall_f1()]
        if entity_type == "ALL":
          metrics.update(dict(zip((mode + "precision", mode + "recall", mode + "f1"),
                                  scores)))
        rows.append("\t".join([mode.rstrip("_") or "default", entity_type] +
                              [f"{v:.2f}" for v in scores] +
                              [str(type_counts.n_gold), str(type_counts.n_predicted),
                               str(type_counts.n_correct)]))
    tables["entities"] = "\n".join(rows) + "\n"
    metrics["loss"] = loss_sum / max(1, sum(s.n_kept for s in sentences))
    return EvalResult(metrics, predictions, tables=tables)


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
