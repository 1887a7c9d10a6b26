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

import argparse
import os
import sys
from typing import Callable, List, Optional

from electra_tf import checkpoints
from electra_tf.cli import one_line_errors
from electra_tf.config import PretrainingConfig, parse_hparams
from electra_tf.modeling.pretrainer import ElectraPretrainer


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
  pretrainer = ElectraPretrainer(config)
  checkpoints.restore_from_checkpoint(pretrainer, prefix, allow_unused=False)
  return _write_checkpoint_dir(
      output_dir, lambda path: checkpoints.save_project_checkpoint(pretrainer, path))


def project_to_official(checkpoint: str, config: PretrainingConfig,
                        output_dir: str) -> str:
  """Project checkpoint -> official TF1 checkpoint; returns its prefix."""
  prefix = checkpoints.resolve_checkpoint(checkpoint)
  pretrainer = ElectraPretrainer(config)
  checkpoints.restore_from_checkpoint(pretrainer, prefix)
  return _write_checkpoint_dir(
      output_dir, lambda path: checkpoints.save_official_checkpoint(pretrainer, path))


def main(argv: Optional[List[str]] = None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m electra_tf.convert", allow_abbrev=False,
      description="Convert ELECTRA checkpoints between the official TF1 layout "
                  "and the project's.")
  parser.add_argument("--official_checkpoint",
                      help="official TF1 checkpoint prefix to convert")
  parser.add_argument("--to_official", action="store_true",
                      help="convert --checkpoint (project) to the official layout")
  parser.add_argument("--checkpoint", help="project checkpoint prefix or directory")
  parser.add_argument("--hparams", default=None,
                      help="pre-training hparams: JSON object or .json file")
  parser.add_argument("--output_dir", help="new directory for DIR/model.ckpt")
  with one_line_errors("electra_tf.convert"):
    args, unknown = parser.parse_known_args(argv)
    if unknown:
      raise ValueError(f"unknown flag(s): {' '.join(unknown)}")
    if not args.output_dir:
      raise ValueError("--output_dir is required")
    if args.to_official:
      if not args.checkpoint or args.official_checkpoint:
        raise ValueError("--to_official needs --checkpoint (and no "
                         "--official_checkpoint)")
    elif not args.official_checkpoint or args.checkpoint:
      raise ValueError("give --official_checkpoint=PREFIX, or --to_official with "
                       "--checkpoint=PATH")
    config = PretrainingConfig.create(parse_hparams(args.hparams))
    if args.to_official:
      written = project_to_official(args.checkpoint, config, args.output_dir)
    else:
      written = official_to_project(args.official_checkpoint, config, args.output_dir)
    print(f"wrote {written}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
