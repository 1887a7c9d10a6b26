"""Pre-trains ELECTRA (or a plain masked LM) on TFRecords.

    python run_pretraining.py --model_size=small --data_dir=DIR [--model_name=NAME]
    python run_pretraining.py --pretrain_tfrecords='a/*.tfrecord*,b/*' --vocab_file=V
    python run_pretraining.py          # the embedded default: a few CPU minutes

Hyperparameters take their official names in --hparams (a JSON string or a
.json file); a flag that shares an hparam's name overrides it.  Rerunning a
command resumes from model_dir with the hparams the run recorded
(training_runs.json) unless it sets them.  Directories, the architecture
hparams and reruns: docs/pretraining.md.  The job: electra_tf/pretrain/job.py.
"""

import shlex
import sys

from absl import flags

from electra_tf import cli
from electra_tf import config as config_lib
from electra_tf.pretrain import demo
from electra_tf.pretrain.config import PretrainingConfig

FLAGS = flags.FLAGS


def define_flags() -> None:
  cli.define_job_flags(config_lib.STRATEGIES, vocab_default="data_dir/vocab.txt")
  cli.define_shared_flag("pretrain_tfrecords",
                         unset="data_dir/pretrain_tfrecords/pretrain_data.tfrecord*")
  flags.DEFINE_integer("num_train_steps", None, "Overrides the hparam of that name.")
  flags.DEFINE_string("export_hf", None,
                      "At the end, also write DIR/discriminator and DIR/generator in "
                      "transformers' ELECTRA layout (python -m electra_tf.convert --to_hf).")


def main() -> int:
  # A model_dir that holds a run continues it (its records, vocab, schedule).
  use_demo = not (FLAGS.data_dir or FLAGS.pretrain_tfrecords or (
      FLAGS.model_dir and config_lib.training_runs(FLAGS.model_dir)))
  export_text = cli.export_text_signature(FLAGS.signatures)
  overrides = cli.hparam_flags(PretrainingConfig)
  # Only --do_eval: evaluate without training; the demo does both.
  if overrides["do_train"] is None:
    overrides["do_train"] = not overrides["do_eval"] or use_demo
  if overrides["do_eval"] is None:
    overrides["do_eval"] = use_demo
  if use_demo:
    config = demo.prepare(FLAGS.hparams, overrides, model_name=FLAGS.model_name)
  else:
    config = PretrainingConfig.from_flags(FLAGS.hparams, overrides, data_dir=FLAGS.data_dir,
                                          model_name=FLAGS.model_name,
                                          checkpoint=FLAGS.init_checkpoint)
  export_dir = FLAGS.export_dir or (demo.export_dir(config) if use_demo else None)
  # Imported once the flags and hparams are valid, so that their errors do
  # not pay for TensorFlow.
  from electra_tf import train_loop  # pylint: disable=g-import-not-at-top
  from electra_tf.pretrain import job  # pylint: disable=g-import-not-at-top
  try:
    job.run(config, strategy_name=FLAGS.strategy, tpu=FLAGS.tpu,
            init_checkpoint=FLAGS.init_checkpoint, export_dir=export_dir,
            export_text=export_text, export_hf=FLAGS.export_hf,
            command=" ".join(["python run_pretraining.py"]
                             + [shlex.quote(arg) for arg in sys.argv[1:]]))
  except train_loop.Preempted as stop:  # SIGTERM / SIGINT: saved, resumable
    return stop.report("run_pretraining.py")
  return 0


def run() -> None:
  """The command (console script and run_pretraining.py)."""
  define_flags()
  cli.run(main, "run_pretraining.py")


if __name__ == "__main__":
  run()
