"""Tasks by their official names (official finetune/task_builder.py)."""

from __future__ import annotations

from typing import Dict, List, Type

from electra_tf.finetune import classification
from electra_tf.finetune import qa
from electra_tf.finetune import tagging
from electra_tf.finetune.config import TASK_NAMES, ConfigError, FinetuningConfig
from electra_tf.finetune.task import Task

_TASKS: Dict[str, Type[Task]] = {
    "cola": classification.CoLA,
    "sst": classification.SST,
    "mrpc": classification.MRPC,
    "sts": classification.STS,
    "qqp": classification.QQP,
    "mnli": classification.MNLI,
    "qnli": classification.QNLI,
    "rte": classification.RTE,
    "squadv1": qa.SQuADv1,
    "squad": qa.SQuAD,
    "newsqa": qa.NewsQA,
    "naturalqs": qa.NaturalQuestions,
    "triviaqa": qa.TriviaQA,
    "searchqa": qa.SearchQA,
    "chunk": tagging.ChunkingTask,
}
assert tuple(_TASKS) == TASK_NAMES


def get_task(name: str, config: FinetuningConfig, tokenizer) -> Task:
  """The task `name`, which must be one of config.task_names.

  tokenizer: FullTokenizer-like (`tokenize`, `convert_tokens_to_ids`; the
  QA tasks also split words before WordPiece, with `basic_tokenize` or
  the official `basic_tokenizer.tokenize`).
  """
  if name not in _TASKS:
    raise ConfigError(f"Unknown task {name!r}; known: {', '.join(TASK_NAMES)}")
  if name not in config.task_names:
    raise ConfigError(f"task {name!r} is not in hparam task_names "
                      f"{config.task_names}")
  return _TASKS[name](config, tokenizer)


def get_tasks(config: FinetuningConfig, tokenizer) -> List[Task]:
  return [get_task(name, config, tokenizer) for name in config.task_names]
