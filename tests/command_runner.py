"""Runs the project's commands in the test's own process, as a user starts them.

`run_command("pretrain", ["--model_dir=M", ...])` does what `python
run_pretraining.py --model_dir=M ...` does after its imports: the command
defines its flags, parses the argv (hyphens and all, `cli.flags_parser`),
runs `main()` under the one-line error contract (`cli.one_line_errors`) and
returns its exit status with what it printed.  A bug still raises (the test
fails with its traceback).  One TensorFlow start serves every command of a
test file, instead of ~7.5 CPU-seconds a process; tests whose point is the
process boundary (kills, fresh-process loading, several workers) start
processes instead.
"""

import contextlib
import dataclasses
import gc
import importlib
import io
import sys
from typing import List

from absl import flags

from electra_tf import cli

PROGRAMS = {"pretrain": "run_pretraining.py", "finetune": "run_finetuning.py",
            "build_vocab": "build_vocab.py", "build_tfrecords": "build_tfrecords.py",
            "export": "electra_tf.export", "convert": "electra_tf.convert"}


@dataclasses.dataclass
class Result:
  returncode: int
  stdout: str
  stderr: str

  def error_line(self) -> str:
    """The one-line error of a failed command (asserting the contract)."""
    assert self.returncode == 2, (self.returncode, self.stdout[-2000:], self.stderr[-2000:])
    lines = [line for line in self.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, self.stderr[-3000:]
    return lines[0]


def run_command(name: str, argv: List[str]) -> Result:
  """Runs the command module electra_tf/commands/<name>.py with argv."""
  program = PROGRAMS[name]
  command = importlib.import_module(f"electra_tf.commands.{name}")
  defined = set(flags.FLAGS)
  command.define_flags()
  out, err = io.StringIO(), io.StringIO()
  saved_argv = sys.argv
  sys.argv = [program, *argv]
  try:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
      try:
        cli.flags_parser(program)(sys.argv)
        with cli.one_line_errors(program):
          code = command.main() or 0
      except SystemExit as e:
        code = e.code
  finally:
    sys.argv = saved_argv
    for flag in set(flags.FLAGS) - defined:
      delattr(flags.FLAGS, flag)
    if "tf_keras" in sys.modules:  # free the command's models and traced functions
      sys.modules["tf_keras"].backend.clear_session()
    gc.collect()
  return Result(code, out.getvalue(), err.getvalue())
