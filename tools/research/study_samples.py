"""The training samples of the learning studies' fine-tuning settings.

tools/research/learning_study.py (which fine-tunes on them), tools/research/full_label_study.py
(which holds out a selection set) and tools/research/learning_analysis.py (which fits
the trivial baselines on them) cut a task's training file here, so that they
all see the same examples.
"""

import pathlib
import random
from typing import List, Tuple

# Each task's (training, dev) file names in its data folder.
TASK_FILES = {"sst": ("train.tsv", "dev.tsv"), "cola": ("train.tsv", "dev.tsv"),
              "chunk": ("train.txt", "dev.txt")}


def _examples(text: str, task: str) -> Tuple[str, List[str]]:
  """(header, examples) of a task's training file text: chunking's examples
  are sentences, which end at a blank line (no header); SST-2 and the other
  GLUE files have a header line, CoLA's has none."""
  if task == "chunk":
    return "", [sentence + "\n\n" for sentence in text.strip("\n").split("\n\n")]
  lines = text.splitlines(keepends=True)
  header = 0 if task == "cola" else 1
  return "".join(lines[:header]), lines[header:]


def count_examples(text: str, task: str) -> int:
  """How many examples a task's training file text holds."""
  return len(_examples(text, task)[1])


def head_examples(text: str, task: str, count: int) -> str:
  """The first `count` examples of a task's training file text (a header stays)."""
  header, examples = _examples(text, task)
  return header + "".join(examples[:count])


def split_examples(text: str, task: str, held_out: int, seed: int) -> Tuple[str, str]:
  """(kept, held-out) texts of a task's training file text: `held_out`
  examples drawn at random with `seed`, the rest kept, each in file order
  (a header stays on both). Drawn, not cut: CoLA's file runs source by
  source, so its tail is other sources than its head."""
  header, examples = _examples(text, task)
  chosen = set(random.Random(seed).sample(range(len(examples)), held_out))
  return (header + "".join(e for i, e in enumerate(examples) if i not in chosen),
          header + "".join(e for i, e in enumerate(examples) if i in chosen))


def training_text(task: str, data_dir: pathlib.Path) -> str:
  """The text of `task`'s training file in data_dir/<task>/."""
  return (pathlib.Path(data_dir) / task / TASK_FILES[task][0]).read_text(encoding="utf-8")
