"""One example as a person reads it: the generator's replacements and the
discriminator's verdicts, marked in the text.

    the [cat->dog]* sat on [the->a] mat* .

`[orig->new]`: a token the generator replaced; `*`: the discriminator calls
it replaced.  Pieces are joined into words unless one of them is marked.
"""

from __future__ import annotations

from typing import Dict, Mapping

import numpy as np

LEGEND = ("The discriminator on an eval example: [original->replacement] is a token "
          "the generator replaced; * marks what the discriminator calls replaced "
          "([a->b]* caught, [a->b] missed, word* a false alarm).")


def render(outputs: Mapping[str, np.ndarray], batch: Mapping[str, np.ndarray],
           row: int, inv_vocab: Dict[int, str]) -> str:
  """Row `row` of an eval batch and the model's outputs on it.

  outputs: the pre-trainer's `corrupted_ids`, `disc_labels` and `disc_preds`
  [B, S]; batch: `input_ids` [B, S] (masked), `input_mask`,
  `masked_lm_positions` and `masked_lm_ids` [B, N].
  """
  input_ids = np.array(batch["input_ids"][row])
  for position, original in zip(batch["masked_lm_positions"][row],
                                batch["masked_lm_ids"][row]):
    if position > 0:
      input_ids[position] = original  # undo the [MASK]s
  corrupted = outputs["corrupted_ids"][row]
  labels, preds = outputs["disc_labels"][row], outputs["disc_preds"][row]
  words = []  # [text, whether it carries a mark]
  for position in range(int(np.sum(batch["input_mask"][row]))):
    token = inv_vocab.get(int(input_ids[position]), "[UNK]")
    marked = bool(labels[position] or preds[position])
    if labels[position]:
      token = f"[{token}->{inv_vocab.get(int(corrupted[position]), '[UNK]')}]"
    if preds[position]:
      token += "*"
    if token.startswith("##") and words and not marked and not words[-1][1]:
      words[-1][0] += token[2:]
    else:
      words.append([token, marked])
  return " ".join(text for text, _ in words)
