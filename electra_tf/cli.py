"""Command-line plumbing shared by the entry points: one-line errors."""

from __future__ import annotations

import contextlib
import os
import sys

# Errors that describe bad input (flags, hparams, files): reported as one line
# on stderr with exit status 2.  Set ELECTRA_TF_TRACEBACK=1 to see tracebacks.
USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, PermissionError,
               OSError)


@contextlib.contextmanager
def one_line_errors(program: str = os.path.basename(sys.argv[0])):
  try:
    yield
  except USER_ERRORS as e:
    if os.environ.get("ELECTRA_TF_TRACEBACK"):
      raise
    message = " ".join(str(e).split()) or type(e).__name__
    print(f"{program}: error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)
