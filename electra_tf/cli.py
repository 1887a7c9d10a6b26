"""Command-line plumbing shared by the entry points: one-line errors."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import List, NoReturn, Sequence, Tuple, Type

from absl import flags

# Errors that describe bad input (flags, hparams, files): reported as one line
# on stderr with exit status 2.  Set ELECTRA_TF_TRACEBACK=1 to see tracebacks.
USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, PermissionError,
               OSError)


def _user_errors() -> Tuple[Type[BaseException], ...]:
  """USER_ERRORS, plus TensorFlow's op errors when TensorFlow is loaded.

  A tf.errors.OpError (a truncated file, an unreadable path, a failed
  assertion) raised by a command is bad input too; TensorFlow is not imported
  here so that commands that have not loaded it stay light.
  """
  tf = sys.modules.get("tensorflow")
  return USER_ERRORS + ((tf.errors.OpError,) if tf is not None else ())


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


def _fail(program: str, message: str) -> NoReturn:
  print(f"{program}: error: {message}", file=sys.stderr, flush=True)
  sys.exit(2)


@contextlib.contextmanager
def one_line_errors(program: str = os.path.basename(sys.argv[0])):
  try:
    yield
  except _user_errors() as e:  # evaluated when an exception arrives
    if os.environ.get("ELECTRA_TF_TRACEBACK"):
      raise
    _fail(program, error_message(e))


def flags_parser(program: str = os.path.basename(sys.argv[0])):
  """An `absl.app.run(flags_parser=...)` that reports a bad flag as one line.

  absl's default prints the error and then a "Pass --helpshort" hint; here the
  last line of stderr is `<program>: error: <what is wrong>`, exit status 2.
  """

  def parse(argv: Sequence[str]) -> List[str]:
    try:
      return flags.FLAGS(list(argv))
    except flags.Error as e:
      _fail(program, error_message(e))

  return parse
