"""Command-line plumbing shared by every command: one `main` contract.

Every command defines its absl flags when it runs, not on import (absl
refuses a flag defined twice), a flag several commands take through
`define_shared_flag`, and hands its `main()` to `cli.run`:

  * a bad flag, a positional argument or a user error (`is_user_error`) ends
    it with ONE line on stderr, `<program>: error: <what is wrong>`, exit
    status 2 (ELECTRA_TF_TRACEBACK=1 shows the traceback behind it);
  * any other exception is a bug: a traceback, exit status 1;
  * otherwise the exit status is what `main()` returns (None: 0);
  * `--help` prints the command's docstring and its own flags, exit status 0;
  * flag names may be written with hyphens (`--data-dir DIR`), as the
    official scripts' command lines do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import sys
from typing import Callable, List, NoReturn, Optional, Sequence

from absl import app
from absl import flags
from absl import logging

from electra_tf.config import MIXED_PRECISIONS, MODEL_SIZES
from electra_tf.errors import ConfigError, UserError, error_message

# The file-system errors a user's paths cause (a missing input, an output
# path that is a file, no permission), an input file that is not UTF-8 text
# (read where no reader names the file and line), and the errnos of an
# OSError that say the disk is full or read-only.  Any other OSError is a
# traceback.
FILE_ERRORS = (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError,
               FileExistsError, UnicodeDecodeError)
DISK_ERRNOS = (errno.ENOSPC, errno.EROFS, errno.EDQUOT)

# TensorFlow's op errors over files and paths (tf.errors.<name>): a missing,
# unreadable, damaged or truncated file, a full disk (TensorFlow reports
# ENOSPC as ResourceExhausted).  InvalidArgumentError, InternalError and the
# other op errors are tracebacks: what they report is the program's.
TF_FILE_ERRORS = ("NotFoundError", "PermissionDeniedError", "AlreadyExistsError",
                  "DataLossError", "OutOfRangeError", "FailedPreconditionError",
                  "ResourceExhaustedError")


def is_user_error(error: BaseException) -> bool:
  """Whether `error` is the user's to fix (one line) rather than a bug: a
  UserError, a FILE_ERRORS error, an OSError with a DISK_ERRNOS errno, or,
  when TensorFlow is already loaded, one of TF_FILE_ERRORS."""
  if isinstance(error, (UserError,) + FILE_ERRORS):
    return True
  if isinstance(error, OSError) and error.errno in DISK_ERRNOS:
    return True
  tf = sys.modules.get("tensorflow")
  return tf is not None and isinstance(
      error, tuple(getattr(tf.errors, name) for name in TF_FILE_ERRORS))


def _fail(program: str, message: str) -> NoReturn:
  print(f"{program}: error: {message}", file=sys.stderr, flush=True)
  sys.exit(2)


@contextlib.contextmanager
def one_line_errors(program: str = os.path.basename(sys.argv[0])):
  """Ends the process with `<program>: error: <message>` and exit status 2 on
  a user error (`is_user_error`); any other exception propagates."""
  try:
    yield
  except Exception as e:  # pylint: disable=broad-except
    if not is_user_error(e) or os.environ.get("ELECTRA_TF_TRACEBACK"):
      raise
    _fail(program, error_message(e))


def underscored_flag_names(argv: Sequence[str],
                           known: Optional[flags.FlagValues] = None) -> List[str]:
  """`--data-dir` -> `--data_dir` (the official scripts' spelling) where the
  underscored name is a flag of `known` (default: every defined flag); values
  and other arguments unchanged."""
  known = flags.FLAGS if known is None else known
  result = [argv[0]] if argv else []
  for arg in argv[1:]:
    name, sep, value = arg.partition("=")
    if name.startswith("--") and "-" in name[2:]:
      bare = name[2:].replace("-", "_")
      if bare in known:
        arg = f"--{bare}{sep}{value}"
      elif bare.startswith("no_") and bare[3:] in known:  # --no-do-lower-case
        arg = f"--no{bare[3:]}{sep}{value}"
    result.append(arg)
  return result


def flags_parser(program: str = os.path.basename(sys.argv[0])):
  """An `absl.app.run(flags_parser=...)` that reports a bad flag as
  `<program>: error: <what is wrong>`, exit status 2."""

  def parse(argv: Sequence[str]) -> List[str]:
    try:
      return flags.FLAGS(underscored_flag_names(argv))
    except flags.Error as e:
      _fail(program, error_message(e))
    except SystemExit as e:  # absl's help flags print the help, then exit 1
      if e.code != 1:
        raise
      sys.exit(0)

  return parse


def _show_own_flags_in_help(command_module: str) -> None:
  """Makes absl's `--help` show the command: its module's docstring and its
  own flags (absl shows `__main__`'s docstring and the key flags of the
  module at sys.argv[0], which for a console script or a thin wrapper defines
  none)."""
  module = sys.modules.get(command_module)
  main_module = sys.modules["__main__"]
  if module is not None and module is not main_module and module.__doc__:
    main_module.__doc__ = module.__doc__
  by_module = flags.FLAGS.flags_by_module_dict()
  for name in (command_module, __name__):
    for flag in by_module.get(name, ()):
      flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)


def run(main: Callable[[], Optional[int]],
        program: str = os.path.basename(sys.argv[0])) -> NoReturn:
  """Parses the absl flags and runs `main()` under the contract above."""
  _show_own_flags_in_help(main.__module__)

  def absl_main(argv: Sequence[str]) -> int:
    if len(argv) > 1:
      _fail(program, f"unexpected argument(s): {' '.join(argv[1:])} (every "
            "option is a --flag)")
    if not flags.FLAGS["verbosity"].present:
      logging.set_verbosity(logging.WARNING)
    with one_line_errors(program):
      return main() or 0

  app.run(absl_main, flags_parser=flags_parser(program))


# ------------------------------------------ the flags several commands take
# Each is defined here, once, with one help text (`define_shared_flag`); the
# command gives its default and, when the default is None, what it means.
SHARED_FLAGS = {
    "vocab_file": (flags.DEFINE_string, {}, "WordPiece vocab, one token per line"),
    "hparams": (flags.DEFINE_string, {},
                "JSON object or .json file of official hparams (the flags that set one "
                "override it)"),
    "checkpoint": (flags.DEFINE_string, {},
                   "Project or official checkpoint (prefix or directory)"),
    "do_lower_case": (flags.DEFINE_boolean, {},
                      "Lower-case the text (an uncased vocab and model)"),
    "strip_accents": (flags.DEFINE_boolean, {},
                      "Strip accents (only when lower-casing, as official)"),
    "model_size": (flags.DEFINE_enum, {"enum_values": list(MODEL_SIZES)},
                   "small, base or large"),
    "mixed_precision": (flags.DEFINE_enum,
                        {"enum_values": [p for p in MIXED_PRECISIONS if p]},
                        "Mixed precision (float16 with dynamic loss scaling); default "
                        "float32"),
    "jit_compile": (flags.DEFINE_boolean, {}, "XLA-compile the train step"),
    "pretrain_tfrecords": (flags.DEFINE_string, {},
                           "Glob(s) of pre-training TFRecords, comma-separated"),
    "corpus_dir": (flags.DEFINE_string, {}, "Folder of text files"),
    "skip_invalid_utf8": (flags.DEFINE_boolean, {},
                          "Skip (and count) corpus lines that are not valid UTF-8 instead "
                          "of stopping with an error"),
}


def define_shared_flag(name: str, default=None, unset: str = "") -> None:
  """Defines the SHARED_FLAGS flag `name` with the command's `default`;
  `unset` says what the command does when a flag of default None is not
  given ("": nothing to say, e.g. the flag is required)."""
  define, args, help_text = SHARED_FLAGS[name]
  define(name, default, help=help_text + (f" (default: {unset})." if unset else "."), **args)


# ------------------------------------------------- the two jobs' flags
def define_job_flags(strategies: Sequence[str], vocab_default: str) -> None:
  """The flags run_pretraining.py and run_finetuning.py share (those named like
  an hparam override it); `vocab_default` says where the job looks for the
  vocab without --vocab_file."""
  flags.DEFINE_string("data_dir", None,
                      "Folder of the official layout: pretrain_tfrecords/ or "
                      "finetuning_data/, vocab.txt and models/.")
  flags.DEFINE_string("model_name", None, "Name of the model: data_dir/models/<model_name> "
                      "(default electra).")
  define_shared_flag("model_size")
  flags.DEFINE_string("model_dir", None, "Where checkpoints, logs and results go.")
  define_shared_flag("vocab_file", unset=vocab_default)
  define_shared_flag("hparams")
  flags.DEFINE_enum("strategy", "auto", list(strategies),
                    "tf.distribute strategy; auto: the TPU if --tpu, else every GPU, "
                    "else the CPU.")
  flags.DEFINE_string("tpu", None, "TPU name or grpc:// address ('local' on a TPU VM).")
  flags.DEFINE_boolean("do_train", None, "Train.")
  flags.DEFINE_boolean("do_eval", None, "Evaluate.")
  flags.DEFINE_string("init_checkpoint", None,
                      "Checkpoint the model starts from (project, converted Google or "
                      "official TF1; prefix or directory).")
  flags.DEFINE_string("export_dir", None, "Write a SavedModel here at the end.")
  define_signatures_flag()
  define_shared_flag("mixed_precision")
  define_shared_flag("jit_compile")


EXPORT_SIGNATURES = ("ids", "text")


def define_signatures_flag() -> None:
  """--signatures, the flag of every command that exports a SavedModel."""
  flags.DEFINE_string(
      "signatures", "ids,text",
      "Signatures of the exported SavedModel: ids (serving_default: int32 ids in; loads "
      "with TensorFlow alone) and text (raw strings in, tokenized in the graph by "
      "tensorflow-text ops: loading needs `import tensorflow_text`). "
      "--signatures=ids writes no tensorflow-text op and needs no vocab.")


def export_text_signature(value: str) -> bool:
  """--signatures=ids[,text] -> whether the export gets the text signature."""
  names = [name.strip() for name in value.split(",") if name.strip()]
  unknown = sorted(set(names) - set(EXPORT_SIGNATURES))
  if unknown:
    raise ConfigError(f"--signatures: unknown {', '.join(unknown)} (choose from "
                      f"{', '.join(EXPORT_SIGNATURES)})")
  if "ids" not in names:
    raise ConfigError("--signatures: ids is required (every export has the ids "
                      "serving_default signature; text is added beside it)")
  return "text" in names


def hparam_flags(config_class) -> dict:
  """The values of the command's flags named like an hparam of `config_class`
  (a JobConfig dataclass; None: not given), which override it; data_dir and
  model_name, which place the job, are passed on their own."""
  names = {field.name for field in dataclasses.fields(config_class) if field.init}
  return {name: flags.FLAGS[name].value for name in flags.FLAGS
          if name in names - {"data_dir", "model_name"}}
