r"""Exports the discriminator as a TensorFlow SavedModel.

  python -m electra_tf.export --checkpoint=PATH --export_dir=DIR \
      [--hparams=JSON] [--vocab_file=VOCAB] [--nodo_lower_case] [--nostrip_accents]
  python -m electra_tf.export --checkpoint=PATH --export_dir=DIR --signatures=ids

PATH is a project checkpoint (prefix or directory) or an official TF1 one;
the architecture, casing and vocab come from the record beside it, else from
--hparams, --vocab_file and --do_lower_case (a contradiction is refused
before anything is written).  Signatures: `serving_default` (int32
input_ids, input_mask, segment_ids [batch, seq]) and `text` (tf.string
[batch]; needs `import tensorflow_text` to load); their outputs:
docs/serving.md.  Written through a temporary directory.
"""

from __future__ import annotations

import os

from absl import flags

from electra_tf import checkpoints
from electra_tf import cli
from electra_tf import config as config_lib
from electra_tf import tokenization
from electra_tf.errors import ConfigError
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.model import build_model
from electra_tf.saved_model import export_saved_model

FLAGS = flags.FLAGS


def define_flags() -> None:
  cli.define_shared_flag("checkpoint")
  cli.define_shared_flag("hparams")
  cli.define_shared_flag("vocab_file", unset="the vocab.txt beside the checkpoint; needed by "
                         "the `text` signature")
  cli.define_shared_flag("do_lower_case", unset="what the checkpoint records, else true")
  cli.define_shared_flag("strip_accents", True)
  flags.DEFINE_string("export_dir", None, "New directory for the SavedModel.")
  cli.define_signatures_flag()
  flags.mark_flags_as_required(["checkpoint", "export_dir"])


def main() -> int:
  # The checkpoint's model_dir: its run record (max_seq_length ...), vocab and casing.
  config = PretrainingConfig.from_flags(
      FLAGS.hparams, {"vocab_file": FLAGS.vocab_file, "do_lower_case": FLAGS.do_lower_case,
                      "model_dir": config_lib.record_directory(FLAGS.checkpoint)},
      checkpoint=FLAGS.checkpoint)
  vocab_file = config.vocab_file if os.path.isfile(config.vocab_file) else None
  if vocab_file:
    checkpoints.check_vocab(vocab_file, FLAGS.checkpoint, "--vocab_file")
  tokenizer = None
  if cli.export_text_signature(FLAGS.signatures):
    if not vocab_file:
      raise ConfigError("--vocab_file is required for the text signature: there is no "
                        f"vocab.txt beside {FLAGS.checkpoint} (or export the ids signature "
                        "alone: --signatures=ids)")
    tokenizer = tokenization.FullTokenizer(vocab_file, config.do_lower_case,
                                           FLAGS.strip_accents)
    tokenization.check_vocab_size(tokenizer.vocab, config.vocab_size, vocab_file)
    tokenization.special_ids(tokenizer.vocab, vocab_file)
  prefix = checkpoints.resolve_checkpoint(FLAGS.checkpoint)
  pretrainer = build_model(config)
  checkpoints.restore_from_checkpoint(pretrainer, prefix)
  export_dir = export_saved_model(pretrainer, FLAGS.export_dir, tokenizer=tokenizer,
                                  max_seq_length=config.max_seq_length)
  print(f"wrote {export_dir}")
  return 0


def run() -> None:
  """The command (console script and python -m electra_tf.export)."""
  define_flags()
  cli.run(main, "electra_tf.export")


if __name__ == "__main__":
  run()
