"""The pipeline's dynamic masking of pre-training TFRecords, shown and counted.

`inspect` (behind `data_prep/inspect_masking.py`) masks the first K records
as training does, prints the first `num_print` as the official print_tokens
does and, with `as_json`, ends with one JSON object of the shares over the K
examples (docs/pretraining.md).
"""

from __future__ import annotations

import json
import sys
from typing import Dict, List, Sequence

import numpy as np

from electra_tf import tokenization
from electra_tf.errors import DataError
from electra_tf.pretrain import data as pretrain_data
from electra_tf.pretrain.config import max_predictions_per_seq
from electra_tf.tokenization import SpecialIds

_RED = "\033[91m"
_END_COLOR = "\033[0m"
_BATCH_SIZE = 256


def masked_examples(file_patterns: str, special: SpecialIds, num_examples: int,
                    mask_prob: float, seed: int) -> Dict[str, np.ndarray]:
  """The first `num_examples` records, masked: numpy arrays [K, ...]."""
  files = pretrain_data.find_tfrecords(file_patterns)
  max_seq_length = pretrain_data.record_length(files)
  dataset = pretrain_data.get_dataset(
      file_patterns, batch_size=min(num_examples, _BATCH_SIZE),
      max_seq_length=max_seq_length,
      max_predictions_per_seq=max_predictions_per_seq(mask_prob, max_seq_length),
      mask_prob=mask_prob, special=special, is_training=False, seed=seed,
      single_pass=True)
  batches: List[Dict[str, np.ndarray]] = []
  count = 0
  for batch in dataset:
    batches.append({name: value.numpy() for name, value in batch.items()})
    count += len(batches[-1]["input_ids"])
    if count >= num_examples:
      break
  return {name: np.concatenate([b[name] for b in batches])[:num_examples]
          for name in batches[0]}


def masking_statistics(examples: Dict[str, np.ndarray], special: SpecialIds
                       ) -> Dict[str, float]:
  """Over the examples: selected_fraction (used slots / real tokens), the
  shares of used slots mask_fraction, keep_fraction, random_fraction,
  special_selected (slots on [CLS], [SEP], [PAD]: 0), single_segment_fraction,
  mean_length, num_examples."""
  used = examples["masked_lm_weights"] > 0
  positions = examples["masked_lm_positions"]
  shown = np.take_along_axis(examples["input_ids"], positions, axis=1)[used]
  original = examples["masked_lm_ids"][used]
  is_mask = shown == special.mask_id
  is_kept = ~is_mask & (shown == original)
  num_used = max(1, int(used.sum()))
  return {
      "selected_fraction": float(used.sum() / examples["input_mask"].sum()),
      "mask_fraction": float(is_mask.sum() / num_used),
      "keep_fraction": float(is_kept.sum() / num_used),
      "random_fraction": float((~is_mask & ~is_kept).sum() / num_used),
      "special_selected": int(np.isin(
          original, [special.cls_id, special.sep_id, special.pad_id]).sum()),
      "single_segment_fraction": float((examples["segment_ids"].max(axis=1) == 0).mean()),
      "mean_length": float(examples["input_mask"].sum(axis=1).mean()),
      "num_examples": int(len(examples["input_ids"])),
  }


def format_example(input_ids: Sequence[int], positions: Sequence[int],
                   original_ids: Sequence[int], weights: Sequence[float],
                   inv_vocab: Dict[int, str], color: bool) -> str:
  """Tokens up to [PAD]; selected ones as `token (original)` (official print_tokens)."""
  original_at = {int(p): int(i) for p, i, w in zip(positions, original_ids, weights) if w}
  tokens: List[str] = []
  for position, token_id in enumerate(input_ids):
    token = inv_vocab[int(token_id)]
    if token == "[PAD]":
      break
    if position in original_at:
      token = f"{token} ({inv_vocab[original_at[position]]})"
      if color:
        token = _RED + token + _END_COLOR
    tokens.append(token)
  return " ".join(tokens)


def inspect(file_patterns: str, vocab_file: str, num_examples: int,
            mask_prob: float, seed: int, num_print: int, as_json: bool,
            out=sys.stdout) -> Dict[str, float]:
  if num_examples < 1:
    raise DataError(f"--num_examples: {num_examples} must be >= 1")
  if not 0.0 < mask_prob < 1.0:
    raise DataError(f"--mask_prob: {mask_prob} is outside (0, 1)")
  vocab = tokenization.load_vocab(vocab_file)
  special = tokenization.special_ids(vocab, vocab_file)
  inv_vocab = {i: token for token, i in vocab.items()}
  examples = masked_examples(file_patterns, special, num_examples, mask_prob, seed)
  color = out.isatty()
  for i in range(min(num_print, len(examples["input_ids"]))):
    print(f"example {i}: " + format_example(
        examples["input_ids"][i], examples["masked_lm_positions"][i],
        examples["masked_lm_ids"][i], examples["masked_lm_weights"][i],
        inv_vocab, color), file=out)
  stats = masking_statistics(examples, special)
  if as_json:
    print(json.dumps(stats, sort_keys=True), file=out)
  return stats
