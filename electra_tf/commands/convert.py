r"""Converts checkpoints between Google's official TF1 layout, the project's and transformers'.

  python -m electra_tf.convert --official_checkpoint=PREFIX --hparams=JSON \
      [--vocab_file=VOCAB] [--nodo_lower_case] --output_dir=DIR
  python -m electra_tf.convert --to_official --checkpoint=PATH --hparams=JSON \
      --output_dir=DIR
  python -m electra_tf.convert --to_hf=DIR --checkpoint=PATH --hparams=JSON \
      --vocab_file=VOCAB [--nodo_lower_case] [--encoder_only]
  python -m electra_tf.convert --from_hf=DISC_DIR[,GEN_DIR] --output_dir=DIR

--official_checkpoint writes the project checkpoint DIR/model.ckpt with the
architecture and casing it was given (electra_config.json) and VOCAB as
DIR/vocab.txt; --to_official the reverse; --to_hf writes transformers'
folders (DIR/discriminator and DIR/generator, or DIR/encoder); --from_hf
reads them back.  --hparams (official names) describes the model.  Every
direction is strict (a variable unmapped, missing or mis-shaped is a
one-line error) and writes DIR through a temporary directory.
docs/huggingface.md, docs/faithfulness.md.
"""

import os
import shlex
import sys

from absl import flags

from electra_tf import checkpoint_conversion
from electra_tf import checkpoints
from electra_tf import cli
from electra_tf import config as config_lib
from electra_tf.errors import ConfigError
from electra_tf.pretrain.config import PretrainingConfig

FLAGS = flags.FLAGS


def define_flags() -> None:
  flags.DEFINE_string("official_checkpoint", None, "Official TF1 checkpoint prefix to convert.")
  flags.DEFINE_boolean("to_official", False,
                       "Convert --checkpoint (project) to the official layout.")
  cli.define_shared_flag("checkpoint")
  cli.define_shared_flag("hparams")
  flags.DEFINE_string("output_dir", None, "New directory for DIR/model.ckpt.")
  flags.DEFINE_string("to_hf", None, "New directory for transformers folders of --checkpoint.")
  flags.DEFINE_list("from_hf", None, "transformers ELECTRA folder(s): DISC_DIR or "
                    "DISC_DIR,GEN_DIR (safetensors) to convert to --output_dir.")
  cli.define_shared_flag("vocab_file", unset="the vocab.txt beside the checkpoint; read by "
                         "--to_hf, copied beside the converted checkpoint by "
                         "--official_checkpoint; with --from_hf it must be the folder's own")
  cli.define_shared_flag("do_lower_case", unset="what the checkpoint records, else true; "
                         "read by --to_hf, recorded by --official_checkpoint; with --from_hf "
                         "it must be the folder's own")
  flags.DEFINE_boolean("encoder_only", False, "--to_hf: export the discriminator encoder "
                       "alone as ElectraModel (fine-tuned checkpoints).")


def main() -> int:
  if FLAGS.to_hf:
    if not FLAGS.checkpoint:
      raise ConfigError("--to_hf needs --checkpoint")
    # The checkpoint's model_dir: its run record, vocab and casing.
    config = PretrainingConfig.from_flags(
        FLAGS.hparams, {"vocab_file": FLAGS.vocab_file, "do_lower_case": FLAGS.do_lower_case,
                        "model_dir": config_lib.record_directory(FLAGS.checkpoint)},
        checkpoint=FLAGS.checkpoint)
    vocab_file = config.vocab_file
    if not os.path.isfile(vocab_file):
      raise ConfigError("--to_hf needs --vocab_file: no vocab.txt lies beside the checkpoint "
                        f"{FLAGS.checkpoint}")
    checkpoints.check_vocab(vocab_file, FLAGS.checkpoint, "--vocab_file")
    command = "python -m electra_tf.convert " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    for folder in checkpoint_conversion.project_to_hf(
        FLAGS.checkpoint, config, vocab_file, config.do_lower_case, FLAGS.to_hf,
        FLAGS.encoder_only, command):
      print(f"wrote {folder}")
    return 0
  if FLAGS.from_hf:
    if not FLAGS.output_dir:
      raise ConfigError("--from_hf=DISC_DIR[,GEN_DIR] needs --output_dir")
    written = checkpoint_conversion.hf_to_project(FLAGS.from_hf, FLAGS.output_dir,
                                                  FLAGS.vocab_file, FLAGS.do_lower_case)
    print(f"wrote {written}")
    return 0
  if not FLAGS.output_dir:
    raise ConfigError("--output_dir is required")
  if FLAGS.to_official:
    if not FLAGS.checkpoint or FLAGS.official_checkpoint:
      raise ConfigError("--to_official needs --checkpoint (and no --official_checkpoint)")
  elif not FLAGS.official_checkpoint or FLAGS.checkpoint:
    raise ConfigError("give --official_checkpoint=PREFIX, or --to_official with "
                      "--checkpoint=PATH")
  if FLAGS.to_official:
    config = PretrainingConfig.from_flags(
        FLAGS.hparams, {"model_dir": config_lib.record_directory(FLAGS.checkpoint)},
        checkpoint=FLAGS.checkpoint)
    written = checkpoint_conversion.project_to_official(FLAGS.checkpoint, config, FLAGS.output_dir)
  else:
    config = PretrainingConfig.from_flags(
        FLAGS.hparams, {"vocab_file": FLAGS.vocab_file, "do_lower_case": FLAGS.do_lower_case},
        checkpoint=FLAGS.official_checkpoint)
    written = checkpoint_conversion.official_to_project(FLAGS.official_checkpoint, config,
                                                        FLAGS.output_dir, FLAGS.vocab_file)
  print(f"wrote {written}")
  return 0


def run() -> None:
  """The command (console script and python -m electra_tf.convert)."""
  define_flags()
  cli.run(main, "electra_tf.convert")


if __name__ == "__main__":
  run()
