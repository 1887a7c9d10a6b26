"""Fine-tunes ELECTRA on GLUE, SQuAD 1.1/2.0 and chunking (official recipe).

    python run_finetuning.py --data_dir=DIR --task_names=rte[,sst,...] \
        [--model_size=small] [--init_checkpoint=PATH] [--model_dir=DIR] \
        [--hparams=JSON] [--strategy=auto] [--do_train] [--do_eval] \
        [--export_dir=DIR]

Raw data follow the official layout DIR/finetuning_data/<task>/; the vocab is
DIR/models/<model_name>/vocab.txt or DIR/vocab.txt (or --vocab_file).
--init_checkpoint is a project checkpoint (a pre-training model_dir or a
ckpt prefix, or a Google checkpoint converted by `python -m
electra_tf.convert`) or an official TF1 checkpoint; without it the encoder
starts from DIR/models/<model_name> when that holds a checkpoint, else from
random initialisation.  --hparams takes the official configure_finetuning.py
names (a JSON object or a .json file); the flags that share a name with an
hparam override it.  Several tasks train jointly, as official.  Results go to
MODEL_DIR/results/ and a table of them is printed at the end; rerunning the
same command resumes.  See electra_tf/finetune/runner.py.
"""

from __future__ import annotations

import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from electra_tf import cli  # noqa: E402
from electra_tf import config as config_lib  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Folder with finetuning_data/, vocab.txt "
                    "and models/ (official layout).")
flags.DEFINE_string("model_name", "electra", "Name of the pre-trained model: "
                    "data_dir/models/<model_name> holds it by default.")
flags.DEFINE_list("task_names", None, "Comma-separated official task names "
                  "(cola, sst, mrpc, sts, qqp, mnli, qnli, rte, squadv1, squad, "
                  "chunk).")
flags.DEFINE_enum("model_size", None, list(config_lib.MODEL_SIZES),
                  "small, base or large.")
flags.DEFINE_string("init_checkpoint", None,
                    "Checkpoint (prefix or directory) the encoder starts from.")
flags.DEFINE_string("model_dir", None, "Where checkpoints and results go "
                    "(default data_dir/models/<model_name>/finetuning_models/"
                    "<tasks>_model).")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab (default: "
                    "data_dir/models/<model_name>/vocab.txt or data_dir/vocab.txt).")
flags.DEFINE_string("hparams", None, "JSON object or .json file of official "
                    "fine-tuning hparams.")
flags.DEFINE_enum("strategy", "auto", ["auto", "one_device", "mirrored", "tpu"],
                  "tf.distribute strategy; auto: TPU if --tpu, else all GPUs, "
                  "else CPU.")
flags.DEFINE_string("tpu", None, "TPU name or grpc:// address ('local' on a TPU VM).")
flags.DEFINE_boolean("do_train", None, "Train (overrides hparam do_train, "
                     "default true).")
flags.DEFINE_boolean("do_eval", None, "Evaluate on dev (overrides hparam "
                     "do_eval, default true).")
flags.DEFINE_enum("mixed_precision", None, ["bfloat16", "float16"],
                  "Mixed precision (float16 with dynamic loss scaling); default float32.")
flags.DEFINE_boolean("jit_compile", False, "XLA-compile the train step.")
flags.DEFINE_string("export_dir", None, "Write each task's fine-tuned "
                    "classifier as a SavedModel to export_dir/<task>.")


def main(argv):
  if len(argv) > 1:
    print(f"run_finetuning.py: error: unexpected argument(s): {' '.join(argv[1:])}",
          file=sys.stderr)
    return 2
  # Imported here so that --help and flag or hparam errors do not pay for
  # TensorFlow.
  from electra_tf.finetune.config import FinetuningConfig  # pylint: disable=g-import-not-at-top

  with cli.one_line_errors():
    if not FLAGS.data_dir:
      raise ValueError("--data_dir is required")
    hparams = config_lib.parse_hparams(FLAGS.hparams)
    hparams.update({key: value for key, value in (
        ("vocab_file", FLAGS.vocab_file), ("do_train", FLAGS.do_train),
        ("do_eval", FLAGS.do_eval)) if value is not None})
    config = FinetuningConfig.create(
        hparams, task_names=FLAGS.task_names, model_size=FLAGS.model_size,
        data_dir=FLAGS.data_dir, model_dir=FLAGS.model_dir,
        init_checkpoint=FLAGS.init_checkpoint, model_name=FLAGS.model_name)
    from electra_tf.finetune import runner  # pylint: disable=g-import-not-at-top
    # TensorFlow's own INFO lines (saver, SavedModel builder) are noise here.
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    runner.run(config, strategy_name=FLAGS.strategy, tpu=FLAGS.tpu,
               explicit_init_checkpoint=bool(FLAGS.init_checkpoint or
                                             hparams.get("init_checkpoint")),
               export_dir=FLAGS.export_dir, mixed_precision=FLAGS.mixed_precision,
               jit_compile=FLAGS.jit_compile)
  return 0


if __name__ == "__main__":
  app.run(main, flags_parser=cli.flags_parser())
