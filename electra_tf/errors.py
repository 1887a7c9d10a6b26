"""The project's errors: each is a bad input or a state the run cannot go on
from, reported to the user as one line (`cli.run`: `<program>: error: <message>`,
exit status 2)."""

from __future__ import annotations

import re


class ConfigError(ValueError):
  """A hyperparameter or flag is unknown, ill-typed or out of range."""


class DataError(ValueError):
  """Input data (vocab, corpus, TFRecords, task files) is missing or malformed."""


class CheckpointError(ValueError):
  """A checkpoint is absent, unreadable or does not fit the model."""


class TrainingError(ValueError):
  """The run cannot go on (non-finite loss, unusable model_dir)."""


# Lines of a TensorFlow error message that frame the error instead of saying
# it, and the op names ("{{function_node ...}}", "[Op:ReadFile]") in a line.
_TF_FRAMING = ("Graph execution error", "Detected at node", "<stack traces", "File ",
               "[[")
_TF_OP_NAMES = re.compile(r"\{\{[^}]*\}\}|\[Op:[^\]]*\]( name: \S*)?")


def error_message(error: BaseException) -> str:
  """The error as one line (an OpError: the first line of its message that
  says what went wrong)."""
  text = str(error)
  if isinstance(getattr(error, "message", None), str):
    lines = [line.strip() for line in error.message.splitlines()]
    text = _TF_OP_NAMES.sub("", next(
        (line for line in lines if line and not line.startswith(_TF_FRAMING)), text))
  return " ".join(text.split()) or type(error).__name__
