"""The project's errors for what a user did wrong: each is a bad input (a
flag, hparam, file, data, checkpoint) or a state the run cannot go on from,
reported as one line (`cli.run`: `<program>: error: <message>`, exit status
2).  Any other exception is a bug and surfaces as a traceback: a check that
only a programming mistake can fail raises a plain ValueError (or
AssertionError, TypeError), never one of these."""

from __future__ import annotations

import re


class UserError(ValueError):
  """Something the user gave or can fix; its message names it and says what is
  wrong.  A ValueError, so callers that catch ValueError still catch it."""


class ConfigError(UserError):
  """A hyperparameter or flag is unknown, ill-typed or out of range."""


class DataError(UserError):
  """Input data (vocab, corpus, TFRecords, task files) is missing or malformed."""


class CheckpointError(UserError):
  """A checkpoint is absent, unreadable or does not fit the model."""


class TrainingError(UserError):
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
