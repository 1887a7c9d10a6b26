"""Tasks by their names (official finetune/task_builder.py); the registry
itself is `TASKS` in finetune/config.py, whose `task_class` imports a class."""

from __future__ import annotations

from typing import List

from electra_tf.errors import ConfigError
from electra_tf.finetune.config import FinetuningConfig, task_class
from electra_tf.finetune.task import Task


def get_task(name: str, config: FinetuningConfig, tokenizer) -> Task:
  """The task `name`, which must be one of config.task_names.

  tokenizer: FullTokenizer-like (`tokenize`, `convert_tokens_to_ids`; the
  QA tasks also split words before WordPiece, with `basic_tokenize` or
  the official `basic_tokenizer.tokenize`).
  """
  task = task_class(name)
  if name not in config.task_names:
    raise ConfigError(f"task {name!r} is not in hparam task_names "
                      f"{config.task_names}")
  return task(config, tokenizer)


def get_tasks(config: FinetuningConfig, tokenizer) -> List[Task]:
  return [get_task(name, config, tokenizer) for name in config.task_names]
