"""Converts checkpoints between Google's official TF1 layout and the project's.

  python -m electra_tf.convert --official_checkpoint=PREFIX --hparams=JSON \
      --output_dir=DIR
    reads a checkpoint in the official variable layout (electra/...,
    generator/..., generator_predictions/..., discriminator_predictions/...;
    Google's released electra_small / base / large use it) and writes the
    project checkpoint DIR/model.ckpt: `tf.train.Checkpoint(model=<the
    ElectraPretrainer>)`, which every entry point takes as --init_checkpoint.

  python -m electra_tf.convert --to_official --checkpoint=PATH --hparams=JSON \
      --output_dir=DIR
    writes DIR/model.ckpt in the official TF1 layout from a project checkpoint
    (a prefix, or a directory such as a pre-training model_dir).

--hparams (a JSON object or .json file, official names) describes the model,
as for pre-training.  Both directions are strict: a variable that is
unmapped, missing or mis-shaped stops the conversion with a one-line error.
DIR also gets a `checkpoint` state file, so DIR itself works as a checkpoint
path; it must not exist yet (or be empty) and is written through a temporary
directory, so a failure leaves nothing under its name.
"""

from __future__ import annotations

import os
from typing import Callable

from absl import flags

from electra_tf import checkpoints
from electra_tf import cli
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.model import build_model


def _write_checkpoint_dir(output_dir: str, save: Callable[[str], str]) -> str:
  """save(prefix) into a fresh output_dir with a `checkpoint` state file."""
  with checkpoints.atomic_output_dir(output_dir, "--output_dir") as tmp_dir:
    save(os.path.join(tmp_dir, checkpoints.CHECKPOINT_NAME))
    checkpoints.write_checkpoint_state(tmp_dir)
  return os.path.join(output_dir, checkpoints.CHECKPOINT_NAME)


def official_to_project(official_checkpoint: str, config: PretrainingConfig,
                        output_dir: str) -> str:
  """Official TF1 checkpoint -> project checkpoint; returns its prefix."""
  prefix = checkpoints.resolve_checkpoint(official_checkpoint)
  if checkpoints.is_project_checkpoint(prefix):
    raise ValueError(f"--official_checkpoint: {prefix} is already a project "
                     "checkpoint (object-based); nothing to convert")
  pretrainer = build_model(config)
  checkpoints.restore_from_checkpoint(pretrainer, prefix, allow_unused=False)
  return _write_checkpoint_dir(
      output_dir, lambda path: checkpoints.save_project_checkpoint(pretrainer, path))


def project_to_official(checkpoint: str, config: PretrainingConfig,
                        output_dir: str) -> str:
  """Project checkpoint -> official TF1 checkpoint; returns its prefix."""
  prefix = checkpoints.resolve_checkpoint(checkpoint)
  pretrainer = build_model(config)
  checkpoints.restore_from_checkpoint(pretrainer, prefix)
  return _write_checkpoint_dir(
      output_dir, lambda path: checkpoints.save_official_checkpoint(pretrainer, path))


FLAGS = flags.FLAGS


def _define_flags() -> None:
  """The command's flags (defined only when run, not when imported)."""
  flags.DEFINE_string("official_checkpoint", None, "Official TF1 checkpoint prefix to convert.")
  flags.DEFINE_boolean("to_official", False,
                       "Convert --checkpoint (project) to the official layout.")
  flags.DEFINE_string("checkpoint", None, "Project checkpoint prefix or directory.")
  flags.DEFINE_string("hparams", None, "Pre-training hparams: JSON object or .json file.")
  flags.DEFINE_string("output_dir", None, "New directory for DIR/model.ckpt.")


def main() -> int:
  if not FLAGS.output_dir:
    raise ValueError("--output_dir is required")
  if FLAGS.to_official:
    if not FLAGS.checkpoint or FLAGS.official_checkpoint:
      raise ValueError("--to_official needs --checkpoint (and no --official_checkpoint)")
  elif not FLAGS.official_checkpoint or FLAGS.checkpoint:
    raise ValueError("give --official_checkpoint=PREFIX, or --to_official with "
                     "--checkpoint=PATH")
  config = PretrainingConfig.from_flags(FLAGS.hparams, {})
  if FLAGS.to_official:
    written = project_to_official(FLAGS.checkpoint, config, FLAGS.output_dir)
  else:
    written = official_to_project(FLAGS.official_checkpoint, config, FLAGS.output_dir)
  print(f"wrote {written}")
  return 0


def run() -> None:
  """The command (console script and python -m electra_tf.convert)."""
  _define_flags()
  cli.run(main, "electra_tf.convert")


if __name__ == "__main__":
  run()
