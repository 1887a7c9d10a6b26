"""Pre-trains ELECTRA (or a plain masked LM) on TFRecords.

    python run_pretraining.py --model_size=small --data_dir=DIR [--model_name=NAME]
    python run_pretraining.py --pretrain_tfrecords='a/*.tfrecord*,b/*' --vocab_file=V
    python run_pretraining.py          # the embedded default: a few CPU minutes

Hyperparameters take their official names in --hparams (a JSON string or a
.json file); the flags below that share a name with an hparam override it.
The official directory conventions hold: data_dir/pretrain_tfrecords/
pretrain_data.tfrecord*, data_dir/vocab.txt, data_dir/models/<model_name>.
Re-running the same command resumes from the latest checkpoint in model_dir.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from electra_tf import cli  # noqa: E402
from electra_tf import config as config_lib  # noqa: E402
from electra_tf import demo  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Folder with pretrain_tfrecords/, vocab.txt and models/.")
flags.DEFINE_string("pretrain_tfrecords", None,
                    "Glob(s) of TFRecords, comma-separated (default: "
                    "data_dir/pretrain_tfrecords/pretrain_data.tfrecord*).")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab (default: data_dir/vocab.txt).")
flags.DEFINE_string("model_name", None, "Run name: model_dir is data_dir/models/<model_name>.")
flags.DEFINE_string("model_dir", None, "Where checkpoints, logs and results go.")
flags.DEFINE_enum("model_size", None, list(config_lib.MODEL_SIZES), "small, base or large.")
flags.DEFINE_string("hparams", None, "JSON object or .json file of official hparams.")
flags.DEFINE_enum("strategy", "auto", ["auto", "one_device", "mirrored",
                                       "multi_worker_mirrored", "tpu"],
                  "tf.distribute strategy; auto: TPU if --tpu, else all GPUs, else CPU.")
flags.DEFINE_string("tpu", None, "TPU name or grpc:// address ('local' on a TPU VM).")
flags.DEFINE_integer("num_train_steps", None, "Overrides the hparam of that name.")
flags.DEFINE_boolean("do_train", None, "Train (default: true unless only --do_eval is given).")
flags.DEFINE_boolean("do_eval", None, "Evaluate the latest checkpoint on num_eval_steps batches.")
flags.DEFINE_string("init_checkpoint", None,
                    "Start from this checkpoint (project or converted Google one) "
                    "when model_dir has none.")
flags.DEFINE_string("export_dir", None, "Write a SavedModel here after training.")
flags.DEFINE_enum("mixed_precision", None, ["bfloat16", "float16"],
                  "Mixed precision (float16 with dynamic loss scaling); overrides "
                  "the hparam of that name; default float32.")
flags.DEFINE_boolean("jit_compile", None, "XLA-compile the train step (overrides the hparam).")


def main(argv):
  del argv
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)

  use_demo = not (FLAGS.data_dir or FLAGS.pretrain_tfrecords)
  do_train, do_eval = FLAGS.do_train, FLAGS.do_eval
  if do_train is None:
    do_train = not do_eval or use_demo
  if do_eval is None:
    do_eval = use_demo
  overrides = {"model_size": FLAGS.model_size, "num_train_steps": FLAGS.num_train_steps,
               "pretrain_tfrecords": FLAGS.pretrain_tfrecords,
               "vocab_file": FLAGS.vocab_file, "model_dir": FLAGS.model_dir,
               "do_train": do_train, "do_eval": do_eval,
               "mixed_precision": FLAGS.mixed_precision, "jit_compile": FLAGS.jit_compile}
  with cli.one_line_errors():
    if use_demo:
      config = demo.prepare(FLAGS.hparams, overrides, model_name=FLAGS.model_name)
    else:
      config = config_lib.from_flags(FLAGS.hparams, overrides, data_dir=FLAGS.data_dir,
                                     model_name=FLAGS.model_name)
    export_dir = FLAGS.export_dir or (demo.export_dir(config) if use_demo else None)
    # Imported once the flags and hparams are valid, so that their errors do
    # not pay for TensorFlow.
    from electra_tf import training  # pylint: disable=g-import-not-at-top
    training.run(config, strategy_name=FLAGS.strategy, tpu=FLAGS.tpu,
                 init_checkpoint=FLAGS.init_checkpoint, export_dir=export_dir)


if __name__ == "__main__":
  sys.exit(app.run(main, flags_parser=cli.flags_parser()))
