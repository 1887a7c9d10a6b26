"""Span-extraction QA (official qa_tasks): SQuAD 1.1 (`squadv1`), 2.0 (`squad`)
and the MRQA sets (`newsqa`, `naturalqs`, `triviaqa`, `searchqa`).

Features: [CLS] question [SEP] window [SEP].  Per row:
  <task>_eid              [N] int32  1000 * example id + window index
  <task>_start_positions  [N] int32  answer start in the row (0 = [CLS] when
  <task>_end_positions    [N] int32  the window misses it); training only
  <task>_is_impossible    [N] int32  SQuAD 2.0 unanswerable; training only
Reading rules and official quirks: docs/finetuning.md.
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from electra_tf.errors import ConfigError, DataError
from electra_tf.finetune import readers
from electra_tf.finetune import task_saved_model
from electra_tf.finetune.config import FinetuningConfig
from electra_tf.finetune.qa import qa_metrics
from electra_tf.finetune.qa import qa_serving
from electra_tf.finetune.task import (EvalResult, Features, FeatureSpec, Task,
                                      TaskHead, dense, is_labeled_split,
                                      softmax_cross_entropy)
from electra_tf.train_loop import log

_MASK_PENALTY = 1000.0  # official: logits outside the window (but [CLS]) get -1000
_MRQA_DEBUG_LINES = 11  # official debug mode: lines 0-10, header included


@dataclasses.dataclass
class QAExample:
  """One question on one context; positions are word indices (training)."""
  eid: int
  qas_id: str  # SQuAD id or MRQA qid: the key of predictions
  question_text: str
  doc_tokens: List[str]  # shared by the questions of a paragraph
  answers: List[str]  # every gold answer text (evaluation)
  orig_answer_text: Optional[str] = None
  start_position: Optional[int] = None
  end_position: Optional[int] = None
  is_impossible: bool = False


@dataclasses.dataclass
class QAWindow:
  """Evaluation info of one feature row."""
  tokens: List[str]
  token_to_orig_map: Dict[int, int]  # row position -> document word
  token_is_max_context: Dict[int, bool]


@dataclasses.dataclass
class QAFeatures(Features):
  windows: List[QAWindow]


def _is_whitespace(c: str) -> bool:
  return c in " \t\r\n" or ord(c) == 0x202F


def split_context(text: str) -> Tuple[List[str], List[int]]:
  """Whitespace-separated words and, per character, its word index."""
  words: List[str] = []
  char_to_word = []
  previous_is_whitespace = True
  for c in text:
    if _is_whitespace(c):
      previous_is_whitespace = True
    else:
      if previous_is_whitespace:
        words.append(c)
      else:
        words[-1] += c
      previous_is_whitespace = False
    char_to_word.append(len(words) - 1)
  return words, char_to_word


def improve_answer_span(doc_tokens: Sequence[str], start: int, end: int,
                        answer_tokens: Sequence[str]) -> Tuple[int, int]:
  """The smallest sub-span of [start, end] whose word pieces equal the answer's."""
  answer = " ".join(answer_tokens)
  for new_start in range(start, end + 1):
    for new_end in range(end, new_start - 1, -1):
      if " ".join(doc_tokens[new_start:new_end + 1]) == answer:
        return new_start, new_end
  return start, end


def is_max_context(spans: Sequence[Tuple[int, int]], span_index: int,
                   position: int) -> bool:
  """Whether window `span_index` gives `position` the most context.

  spans: (start, length) of every window; the score of a window is the
  smaller of the left and right context plus 0.01 * its length.
  """
  best_score, best_index = None, None
  for index, (start, length) in enumerate(spans):
    end = start + length - 1
    if position < start or position > end:
      continue
    score = min(position - start, end - position) + 0.01 * length
    if best_score is None or score > best_score:
      best_score, best_index = score, index
  return span_index == best_index


def final_text(pred_text: str, orig_text: str,
               basic_tokenize: Callable[[str], List[str]]) -> str:
  """Projects a normalised predicted text back onto the original words.

  `orig_text` is the original words of the predicted span, which may carry
  extra characters ("Smith's" for "smith").  Both sides are aligned character
  by character after basic tokenization without spaces; when that fails the
  whole `orig_text` is returned (official get_final_text).
  """
  def strip_spaces(text):
    chars, to_original = [], {}
    for i, c in enumerate(text):
      if c != " ":
        to_original[len(chars)] = i
        chars.append(c)
    return "".join(chars), to_original

  tok_text = " ".join(basic_tokenize(orig_text))
  start = tok_text.find(pred_text)
  if start == -1:
    return orig_text
  end = start + len(pred_text) - 1
  orig_chars, orig_map = strip_spaces(orig_text)
  tok_chars, tok_map = strip_spaces(tok_text)
  if len(orig_chars) != len(tok_chars):
    return orig_text
  tok_to_stripped = {original: stripped for stripped, original in tok_map.items()}
  orig_start = orig_map.get(tok_to_stripped.get(start, -1))
  orig_end = orig_map.get(tok_to_stripped.get(end, -1))
  if orig_start is None or orig_end is None:
    return orig_text
  return orig_text[orig_start:orig_end + 1]


def best_indexes(logits: np.ndarray, n_best_size: int) -> List[int]:
  """Positions of the n largest logits, ties in position order."""
  return [int(i) for i in np.argsort(-np.asarray(logits), kind="stable")[:n_best_size]]


class QATask(Task):
  """A span-extraction task; subclasses read their format and score.

  As a single task, 2 epochs at max_seq_length 512 and no test outputs (the
  official rule gives these to the tasks whose name holds "squad" or "qa").
  """
  single_task_defaults = {"max_seq_length": 512, "num_train_epochs": 2.0,
                          "write_test_outputs": False}
  feature_hparams = Task.feature_hparams + ("max_query_length", "doc_stride")

  @classmethod
  def check_config(cls, config: FinetuningConfig) -> None:
    if config.max_seq_length - config.max_query_length - 3 < 1:
      raise ConfigError(
          f"hparams max_seq_length ({config.max_seq_length}) and "
          f"max_query_length ({config.max_query_length}) leave no room for the "
          "document (need max_seq_length > max_query_length + 3)")
    if config.joint_prediction and config.beam_size > config.max_seq_length:
      raise ConfigError(f"hparam beam_size: {config.beam_size} exceeds "
                        f"max_seq_length {config.max_seq_length}")

  def __init__(self, config: FinetuningConfig, name: str, tokenizer,
               v2: bool):
    super().__init__(config, name, tokenizer)
    self.v2 = v2
    self._examples: Dict[str, List[QAExample]] = {}
    # The word splitting before WordPiece (official BasicTokenizer.tokenize):
    # `basic_tokenize` of electra_tf.tokenization.FullTokenizer, or
    # `basic_tokenizer.tokenize` of the official-interface tokenizers.
    self._basic_tokenize = (tokenizer.basic_tokenize
                            if hasattr(tokenizer, "basic_tokenize")
                            else tokenizer.basic_tokenizer.tokenize)

  def serving_functions(self, model, text_encoder):
    return qa_serving.qa_functions(
        model.encoder.config, self, text_encoder,
        lambda features: task_saved_model.task_outputs(model, self, features))

  def window_layout(self, n_pieces, n_query, xp):
    """How a question of n_query pieces and a document of n_pieces are
    packed, the rule the featurizer (ints, xp=numpy) and the text signature
    (int64 [B], xp=tf) both read: (query pieces kept, window size, stride,
    window count).  Window i starts at i * stride and holds
    min(n_pieces - start, size) pieces; [CLS] query [SEP] window [SEP] fills
    at most max_seq_length (official: windows doc_stride apart)."""
    query = xp.minimum(n_query, self.config.max_query_length)
    size = self.config.max_seq_length - query - 3
    stride = xp.minimum(size, self.config.doc_stride)
    count = xp.where(n_pieces > 0,
                     1 + (xp.maximum(n_pieces - size, 0) + stride - 1) // stride, 0)
    return query, size, stride, count

  def doc_windows(self, n_pieces: int, n_query: int
                  ) -> Tuple[int, List[Tuple[int, int]]]:
    """The query pieces kept and the (start, length) of each window
    (window_layout)."""
    query, size, stride, count = self.window_layout(n_pieces, n_query, np)
    return int(query), [(int(i * stride), int(min(n_pieces - i * stride, size)))
                        for i in range(count)]

  # -------------------------------------------------------------- reading
  def get_examples(self, split: str) -> List[QAExample]:
    if split not in self._examples:
      examples: List[QAExample] = []
      failures = self._read_examples(split, examples)
      log(f"{self.name} {split}: {len(examples)} examples, {failures} failures")
      self._examples[split] = examples
    return self._examples[split]

  @abc.abstractmethod
  def _read_examples(self, split: str, examples: List[QAExample]) -> int:
    """Appends the examples of `split`; returns how many training questions
    were skipped because their answer is not in the context."""

  def _locate_answer(self, path: str, qid: str, text: str, offset: int,
                     example: QAExample, char_to_word: Sequence[int]) -> bool:
    """Sets the example's answer word span from the answer's text and first
    character; False when it is not found in the context (official)."""
    if not 0 <= offset <= offset + len(text) - 1 < len(char_to_word):
      logging.warning("%s: answer of %s is outside its context", path, qid)
      return False
    example.orig_answer_text = text
    example.start_position = char_to_word[offset]
    example.end_position = char_to_word[offset + len(text) - 1]
    actual = " ".join(example.doc_tokens[
        example.start_position:example.end_position + 1]).lower()
    if actual.find(" ".join(text.split()).lower()) == -1:
      logging.warning("%s: could not find answer %r of %s in its context",
                      path, text, qid)
      return False
    return True

  # ---------------------------------------------------------- featurizing
  def feature_specs(self) -> Dict[str, FeatureSpec]:
    specs = self.shared_feature_specs()
    for key in ("start_positions", "end_positions", "is_impossible"):
      specs[f"{self.name}_{key}"] = ((), np.int32)
    return specs

  def featurize(self, examples: Sequence[QAExample],
                is_training: bool) -> QAFeatures:
    rows, example_index, windows = [], [], []
    tokenized_docs: Dict[int, Tuple[List[int], List[int], List[str]]] = {}
    for i, example in enumerate(examples):
      key = id(example.doc_tokens)
      if key not in tokenized_docs:
        tokenized_docs[key] = self._tokenize_doc(example.doc_tokens)
      for row, window in self._featurize_example(
          example, is_training, *tokenized_docs[key]):
        rows.append(row)
        windows.append(window)
        example_index.append(i)
    features = self.stack_features(rows, example_index)
    return QAFeatures(features.arrays, features.example_index, windows)

  def _tokenize_doc(self, doc_tokens: Sequence[str]):
    tok_to_orig, orig_to_tok, pieces = [], [], []
    for i, word in enumerate(doc_tokens):
      orig_to_tok.append(len(pieces))
      for piece in self.tokenizer.tokenize(word):
        tok_to_orig.append(i)
        pieces.append(piece)
    return tok_to_orig, orig_to_tok, pieces

  def _featurize_example(self, example: QAExample, is_training: bool,
                         tok_to_orig: List[int], orig_to_tok: List[int],
                         doc_pieces: List[str]):
    """Yields (feature row, window info) per document window."""
    query = self.tokenizer.tokenize(example.question_text)
    n_query, spans = self.doc_windows(len(doc_pieces), len(query))
    query = query[:n_query]
    answer_start = answer_end = 0
    has_answer = is_training and not example.is_impossible
    if has_answer:
      answer_start = orig_to_tok[example.start_position]
      if example.end_position < len(example.doc_tokens) - 1:
        answer_end = orig_to_tok[example.end_position + 1] - 1
      else:
        answer_end = len(doc_pieces) - 1
      answer_start, answer_end = improve_answer_span(
          doc_pieces, answer_start, answer_end,
          self.tokenizer.tokenize(example.orig_answer_text))

    for span_index, (span_start, span_length) in enumerate(spans):
      tokens = ["[CLS]"] + query + ["[SEP]"]
      segment_ids = [0] * len(tokens)
      token_to_orig, token_is_max_context = {}, {}
      for piece_index in range(span_start, span_start + span_length):
        token_to_orig[len(tokens)] = tok_to_orig[piece_index]
        token_is_max_context[len(tokens)] = is_max_context(
            spans, span_index, piece_index)
        tokens.append(doc_pieces[piece_index])
      tokens.append("[SEP]")
      segment_ids += [1] * (span_length + 1)
      input_ids = list(self.tokenizer.convert_tokens_to_ids(tokens))

      start_position = end_position = 0
      span_end = span_start + span_length - 1
      if has_answer and span_start <= answer_start and answer_end <= span_end:
        offset = len(query) + 2 - span_start
        start_position, end_position = answer_start + offset, answer_end + offset
      row = {"input_ids": self.pad_ids(input_ids),
             "input_mask": self.pad_ids([1] * len(input_ids)),
             "segment_ids": self.pad_ids(segment_ids),
             "task_id": self.task_id,
             f"{self.name}_eid": 1000 * example.eid + span_index,
             f"{self.name}_start_positions": start_position,
             f"{self.name}_end_positions": end_position,
             f"{self.name}_is_impossible": int(is_training and
                                               example.is_impossible)}
      yield row, QAWindow(tokens, token_to_orig, token_is_max_context)

  # -------------------------------------------------------------- the head
  def build_head(self) -> TaskHead:
    return QAHead.for_config(self.name, self.config)

  # ----------------------------------------------------------- evaluation
  def evaluate(self, examples: Sequence[QAExample], features: QAFeatures,
               outputs: Mapping[str, np.ndarray], split: str) -> EvalResult:
    rows_of_example = collections.defaultdict(list)
    for row, example_index in enumerate(features.example_index):
      rows_of_example[int(example_index)].append(row)
    answers, null_odds = {}, {}
    for i, example in enumerate(examples):
      answers[example.qas_id], null_score = self._best_answer(
          example, rows_of_example[i], features.windows, outputs)
      if self.v2:
        null_odds[example.qas_id] = null_score
    threshold = self.config.qa_na_threshold
    predictions = [(qid, "" if self.v2 and null_odds[qid] > threshold else text)
                   for qid, text in answers.items()]
    result = {}
    if is_labeled_split(split):
      result = self._score({example.qas_id: example.answers
                            for example in examples}, answers, null_odds)
    return EvalResult(result, predictions, key_name="id", qa_preds=answers,
                      qa_null_odds=null_odds if self.v2 else None)

  @abc.abstractmethod
  def _score(self, gold: Mapping[str, Sequence[str]],
             answers: Mapping[str, str],
             null_odds: Mapping[str, float]) -> Dict[str, float]:
    """The official evaluation script's metrics (sorted by name)."""

  def _best_answer(self, example: QAExample, rows: Sequence[int],
                   windows: Sequence[QAWindow],
                   outputs: Mapping[str, np.ndarray]) -> Tuple[str, float]:
    """The answer and the null score of an example (official n-best search).

    The answer is the best n-best text (SQuAD 2.0: the best non-empty one);
    the null score is the smallest null score over the example's windows
    (SQuAD 2.0 only; 0 for 1.1).
    """
    config = self.config
    candidates = []  # (score, start logit, end logit, row, start, end)
    score_null = 1000000.0
    for row in rows:
      window = windows[row]
      if config.joint_prediction:
        starts = outputs["start_top_index"][row]
        ends_per_start = outputs["end_top_index"][row]  # [K, K]
      else:
        starts = best_indexes(outputs["start_logits"][row], config.n_best_size)
        ends = best_indexes(outputs["end_logits"][row], config.n_best_size)
        ends_per_start = [ends] * len(starts)
      if self.v2:
        if config.answerable_classifier:
          row_null = float(outputs["answerable_logit"][row])
        else:
          row_null = float(outputs["start_logits"][row][0] +
                           outputs["end_logits"][row][0])
        score_null = min(score_null, row_null)
      for i, start in enumerate(starts):
        for j, end in enumerate(ends_per_start[i]):
          start, end = int(start), int(end)
          if (start == 0 or start >= len(window.tokens) or
              end >= len(window.tokens) or
              start not in window.token_to_orig_map or
              end not in window.token_to_orig_map or
              not window.token_is_max_context.get(start, False) or
              end < start or end - start + 1 > config.max_answer_length):
            continue
          if config.joint_prediction:
            start_logit = float(outputs["start_top_log_probs"][row][i])
            end_logit = float(outputs["end_top_log_probs"][row][i, j])
          else:
            start_logit = float(outputs["start_logits"][row][start])
            end_logit = float(outputs["end_logits"][row][end])
          candidates.append((start_logit + end_logit, start_logit, end_logit,
                             row, start, end))
    candidates.sort(key=lambda c: c[0], reverse=True)

    nbest = []  # (text, start logit, end logit)
    seen = set()
    for _, start_logit, end_logit, row, start, end in candidates:
      if len(nbest) >= config.n_best_size:
        break
      window = windows[row]
      piece_text = " ".join(window.tokens[start:end + 1])
      piece_text = " ".join(
          piece_text.replace(" ##", "").replace("##", "").strip().split())
      orig_text = " ".join(example.doc_tokens[
          window.token_to_orig_map[start]:window.token_to_orig_map[end] + 1])
      text = final_text(piece_text, orig_text, self._basic_tokenize)
      if text in seen:
        continue
      seen.add(text)
      nbest.append((text, start_logit, end_logit))
    if not nbest:
      nbest.append(("empty", 0.0, 0.0))  # official placeholder

    best_text, best_start, best_end = next(
        (entry for entry in nbest if entry[0]), ("", 0.0, 0.0))
    if not self.v2:
      return nbest[0][0], 0.0
    if config.answerable_classifier:
      return best_text, score_null
    return best_text, score_null - best_start - best_end


class QAHead(TaskHead):
  """Span start/end logits and the answerable classifier (docs/finetuning.md).

  Outputs: loss [B], start_logits [B, S], end_logits [B, S] (zeros when the
  joint head is not training), answerable_logit [B] (zeros without the
  classifier); joint head, not training: start_top_log_probs [B, K],
  start_top_index [B, K], end_top_log_probs [B, K, K], end_top_index
  [B, K, K] with K = beam_size.
  """

  # Its constructor arguments: FinetuningConfig fields of the same names.
  OPTIONS = ("joint_prediction", "beam_size", "answerable_classifier",
             "answerable_uses_start_logits", "answerable_weight")

  def __init__(self, task_name: str, joint_prediction: bool, beam_size: int,
               answerable_classifier: bool, answerable_uses_start_logits: bool,
               answerable_weight: float, **kwargs):
    super().__init__(task_name, **kwargs)
    self.joint_prediction = joint_prediction
    self.beam_size = beam_size
    self.answerable_classifier = answerable_classifier
    self.answerable_uses_start_logits = answerable_uses_start_logits
    self.answerable_weight = answerable_weight
    gelu = lambda x: tf.nn.gelu(x, approximate=False)
    # Official creation order and names (tf.layers numbering).
    self.start_dense = dense(1, "dense")
    if self.joint_prediction:
      self.qa_hidden = dense(512, "qa_hidden", activation=gelu)
    self.end_dense = dense(1, "dense_1")
    if self.answerable_classifier:
      if self.answerable_uses_start_logits:
        self.answerable_hidden = dense(512, "dense_2", activation=gelu)
        self.answerable_dense = dense(1, "dense_3")
      else:
        self.answerable_dense = dense(1, "dense_2")

  @classmethod
  def for_config(cls, task_name: str, config: FinetuningConfig) -> "QAHead":
    return cls(task_name, **{option: getattr(config, option) for option in cls.OPTIONS})

  def get_config(self):
    return {**super().get_config(),
            **{option: getattr(self, option) for option in self.OPTIONS}}

  def build(self, input_shape):
    if self.joint_prediction:
      hidden_size = input_shape["sequence_output"][-1]
      # Its kernel is used in two halves (start part, end part) in `call`, so
      # it is built here, under its own name scope, not by calling it.
      with tf.name_scope(self.qa_hidden.name):
        self.qa_hidden.build(tf.TensorShape([None, 2 * hidden_size]))
    super().build(input_shape)

  def _joint_end_logits(self, sequence: tf.Tensor, start_index: tf.Tensor
                        ) -> tf.Tensor:
    """End logits [B, K, S] given K start positions [B, K] per row.

    qa_hidden([start vector; token vector]) computed as
    start @ W[:H] + token @ W[H:] + b, without tiling the concatenation.
    """
    hidden_size = tf.shape(sequence)[-1]
    kernel = tf.cast(self.qa_hidden.kernel, sequence.dtype)
    bias = tf.cast(self.qa_hidden.bias, sequence.dtype)
    start_vectors = tf.gather(sequence, start_index, batch_dims=1)  # [B, K, H]
    start_part = tf.einsum("bkh,hd->bkd", start_vectors, kernel[:hidden_size])
    token_part = tf.einsum("bsh,hd->bsd", sequence, kernel[hidden_size:])
    hidden = self.qa_hidden.activation(
        start_part[:, :, None, :] + token_part[:, None, :, :] + bias)
    return tf.squeeze(tf.cast(self.end_dense(hidden), tf.float32), -1)

  def call(self, encoder_outputs, features, training=False):
    sequence = encoder_outputs["sequence_output"]  # [B, S, H]
    seq_length = tf.shape(sequence)[1]
    answer_mask = (tf.cast(features["input_mask"], tf.float32) *
                   tf.cast(features["segment_ids"], tf.float32) +
                   tf.one_hot(0, seq_length))  # document window and [CLS]
    mask_bias = _MASK_PENALTY * (answer_mask - 1.0)
    start_positions = self.feature(features, "start_positions")
    end_positions = self.feature(features, "end_positions")

    start_logits = tf.squeeze(
        tf.cast(self.start_dense(sequence), tf.float32), -1) + mask_bias
    outputs = {}
    if self.joint_prediction:
      if training:
        end_logits = self._joint_end_logits(
            sequence, start_positions[:, None])[:, 0] + mask_bias
      else:
        start_top_log_probs, start_top_index = tf.math.top_k(
            tf.nn.log_softmax(start_logits), k=self.beam_size)
        beam_end_logits = (self._joint_end_logits(sequence, start_top_index) +
                           mask_bias[:, None, :])
        end_top_log_probs, end_top_index = tf.math.top_k(
            tf.nn.log_softmax(beam_end_logits), k=self.beam_size)
        end_logits = tf.zeros_like(start_logits)
        outputs.update(start_top_log_probs=start_top_log_probs,
                       start_top_index=start_top_index,
                       end_top_log_probs=end_top_log_probs,
                       end_top_index=end_top_index)
    else:
      end_logits = tf.squeeze(
          tf.cast(self.end_dense(sequence), tf.float32), -1) + mask_bias

    loss = (softmax_cross_entropy(start_logits, start_positions) +
            softmax_cross_entropy(end_logits, end_positions)) / 2.0
    answerable_logit = tf.zeros_like(start_logits[:, 0])
    if self.answerable_classifier:
      representation = sequence[:, 0]
      if self.answerable_uses_start_logits:
        start_probs = tf.cast(tf.nn.softmax(start_logits), sequence.dtype)
        start_vector = tf.einsum("bs,bsh->bh", start_probs, sequence)
        representation = self.answerable_hidden(
            tf.concat([representation, start_vector], -1))
      answerable_logit = tf.squeeze(
          tf.cast(self.answerable_dense(representation), tf.float32), -1)
      # Official: added whenever the classifier is on, for SQuAD 1.1 too.
      loss += self.answerable_weight * tf.nn.sigmoid_cross_entropy_with_logits(
          labels=tf.cast(self.feature(features, "is_impossible"), tf.float32),
          logits=answerable_logit)
    outputs.update(loss=loss, start_logits=start_logits, end_logits=end_logits,
                   answerable_logit=answerable_logit)
    return outputs


class SQuADTask(QATask):
  """SQuAD 1.1 or 2.0 (`{"data": [{"paragraphs": [...]}]}` JSON)."""

  def data_path(self, split: str) -> str:
    return os.path.join(self.config.raw_data_dir(self.name),
                        split + ("-debug" if self.config.debug else "") + ".json")

  def _read_examples(self, split: str, examples: List[QAExample]) -> int:
    path = self.data_path(split)
    return sum(self._add_examples(path, location, paragraph, split, examples)
               for location, paragraph in readers.squad_paragraphs(
                   path, readers.read_json(path)))

  def _add_examples(self, path: str, location: str, paragraph: Mapping[str, Any],
                    split: str, examples: List[QAExample]) -> int:
    """Appends the paragraph's questions; returns how many were skipped."""
    doc_tokens, char_to_word = split_context(paragraph["context"])
    failures = 0
    for k, qa in enumerate(paragraph["qas"]):
      example = QAExample(eid=len(examples), qas_id=qa["id"],
                          question_text=qa["question"], doc_tokens=doc_tokens,
                          answers=[a["text"] for a in qa.get("answers", [])])
      if split != "train" and is_labeled_split(split):
        self._check_gold_answers(path, location, k, qa, split)
      if split == "train":
        if self.v2:
          if not isinstance(qa.get("is_impossible"), bool):
            raise DataError(f"{path}: {location}.qas[{k}] ('{qa['id']}') has "
                            "no 'is_impossible' boolean (SQuAD 2.0 train)")
          example.is_impossible = qa["is_impossible"]
        if example.is_impossible:
          example.start_position = example.end_position = -1
          example.orig_answer_text = ""
        else:
          if not qa.get("answers"):
            raise DataError(f"{path}: {location}.qas[{k}] ('{qa['id']}') has "
                            "no answer (training needs one)")
          answer = qa["answers"][0]
          if not self._locate_answer(path, qa["id"], answer["text"],
                                     answer["answer_start"], example,
                                     char_to_word):
            failures += 1
            continue
      examples.append(example)
    return failures

  def _check_gold_answers(self, path, location, k, qa, split) -> None:
    """An evaluated question needs its gold answers: SQuAD 1.1 at least one,
    SQuAD 2.0 the 'answers' list itself (empty: unanswerable)."""
    if "answers" not in qa:
      raise DataError(f"{path}: {location}.qas[{k}] ('{qa['id']}') has no "
                      f"'answers' list ({split} is scored against it)")
    if not self.v2 and not qa["answers"]:
      raise DataError(f"{path}: {location}.qas[{k}] ('{qa['id']}') has an "
                      f"empty 'answers' list (SQuAD 1.1 {split} is scored "
                      "against at least one)")

  def _score(self, gold, answers, null_odds):
    if self.v2:
      return qa_metrics.evaluate_squad_v2(gold, answers, null_odds,
                                       self.config.qa_na_threshold)
    return dict(sorted(qa_metrics.evaluate_squad_v1(gold, answers).items()))


class MRQATask(QATask):
  """A 2019 MRQA shared-task set (JSON lines, gzipped or plain)."""

  def __init__(self, config: FinetuningConfig, name: str, tokenizer):
    super().__init__(config, name, tokenizer, v2=False)

  def data_path(self, split: str) -> str:
    """`<split>.jsonl` (official), else `<split>.jsonl.gz` when only it exists."""
    path = os.path.join(self.config.raw_data_dir(self.name), split + ".jsonl")
    return path + ".gz" if (not os.path.exists(path) and
                            os.path.exists(path + ".gz")) else path

  def test_splits(self) -> List[str]:
    return []  # MRQA has no test sets; the official code writes none

  def _read_examples(self, split: str, examples: List[QAExample]) -> int:
    path = self.data_path(split)
    records = readers.read_jsonl(path, max_lines=(_MRQA_DEBUG_LINES
                                                  if self.config.debug else None))
    failures = 0
    for line_number, context in readers.mrqa_contexts(path, records):
      doc_tokens, char_to_word = split_context(context["context"])
      for k, qa in enumerate(context["qas"]):
        where = f"{path}:{line_number}: qas[{k}] ('{qa['qid']}')"
        example = QAExample(eid=len(examples), qas_id=qa["qid"],
                            question_text=qa["question"],
                            doc_tokens=doc_tokens, answers=qa["answers"])
        if split == "train":
          if not qa.get("detected_answers"):
            raise DataError(f"{where} has no 'detected_answers' (training "
                            "needs one)")
          answer = qa["detected_answers"][0]
          if not self._locate_answer(path, qa["qid"], answer["text"],
                                     answer["char_spans"][0][0], example,
                                     char_to_word):
            failures += 1
            continue
        elif is_labeled_split(split) and not qa["answers"]:
          raise DataError(f"{where} has an empty 'answers' list ({split} is "
                          "scored against it)")
        examples.append(example)
    return failures

  def _score(self, gold, answers, null_odds):
    return dict(sorted(qa_metrics.evaluate_mrqa(gold, answers).items()))


class SQuAD(SQuADTask):
  """SQuAD 2.0."""
  help = "SQuAD 2.0 (JSON; exact, f1 as the v2.0 script)"

  def __init__(self, config, tokenizer):
    super().__init__(config, "squad", tokenizer, v2=True)


class SQuADv1(SQuADTask):
  """SQuAD 1.1."""
  help = "SQuAD 1.1 (JSON; exact_match, f1)"

  def __init__(self, config, tokenizer):
    super().__init__(config, "squadv1", tokenizer, v2=False)


class NewsQA(MRQATask):
  """NewsQA (MRQA)."""
  help = "NewsQA (MRQA 2019 JSON lines)"

  def __init__(self, config, tokenizer):
    super().__init__(config, "newsqa", tokenizer)


class NaturalQuestions(MRQATask):
  """Natural Questions (MRQA)."""
  help = "Natural Questions (MRQA 2019 JSON lines)"
  # Official quirk: its name holds neither "squad" nor "qa", so as a single
  # task it keeps the general defaults (3 epochs at max_seq_length 128).
  single_task_defaults = {}

  def __init__(self, config, tokenizer):
    super().__init__(config, "naturalqs", tokenizer)


class TriviaQA(MRQATask):
  """TriviaQA (MRQA)."""
  help = "TriviaQA (MRQA 2019 JSON lines)"

  def __init__(self, config, tokenizer):
    super().__init__(config, "triviaqa", tokenizer)


class SearchQA(MRQATask):
  """SearchQA (MRQA)."""
  help = "SearchQA (MRQA 2019 JSON lines)"

  def __init__(self, config, tokenizer):
    super().__init__(config, "searchqa", tokenizer)
