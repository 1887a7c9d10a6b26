r"""Fine-tunes ELECTRA on GLUE, SQuAD 1.1/2.0, MRQA, chunking and NER (official recipe).

    python run_finetuning.py --data_dir=DIR --task_names=rte[,sst,...] \
        [--model_size=small] [--init_checkpoint=PATH|none] [--model_dir=DIR] \
        [--hparams=JSON] [--strategy=auto] [--do_train] [--do_eval] \
        [--export_dir=DIR]

Raw data in the official layout DIR/finetuning_data/<task>/; --hparams takes
the official configure_finetuning.py names, flags of the same name override
them; several tasks train jointly; rerunning resumes.  Where the vocab and
the initial checkpoint come from, results: docs/finetuning.md.  The job:
electra_tf/finetune/job.py.
"""

from absl import flags

from electra_tf import cli
from electra_tf import config as config_lib
from electra_tf.errors import ConfigError
from electra_tf.finetune import config as finetune_config
from electra_tf.finetune.config import FinetuningConfig

FLAGS = flags.FLAGS


class _TaskNamesFlag(flags.Flag):
  """--task_names (comma-separated); its help, built when shown, lists the
  registered tasks."""

  @property
  def help(self) -> str:
    return ("Comma-separated task names (several train jointly):\n" +
            finetune_config.task_names_help())

  @help.setter
  def help(self, value: str) -> None:
    del value  # absl sets the help at construction; the property builds it


def define_flags() -> None:
  cli.define_job_flags(config_lib.FINETUNING_STRATEGIES, vocab_default=(
      "the vocab.txt beside --init_checkpoint, else data_dir/models/<model_name>/vocab.txt, "
      "else data_dir/vocab.txt"))
  flags.DEFINE_flag(_TaskNamesFlag(flags.ListParser(), flags.CsvListSerializer(","),
                                   "task_names", None, ""))


def main() -> int:
  if not FLAGS.data_dir:
    raise ConfigError("--data_dir is required")
  export_text = cli.export_text_signature(FLAGS.signatures)
  config = FinetuningConfig.from_flags(FLAGS.hparams, cli.hparam_flags(FinetuningConfig),
                                       data_dir=FLAGS.data_dir,
                                       model_name=FLAGS.model_name)
  # Imported once the flags and hparams are valid, so that their errors do
  # not pay for TensorFlow (the task classes, which resolve the single-task
  # defaults, import it once the task names are known to be registered).
  from electra_tf import train_loop  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune import job  # pylint: disable=g-import-not-at-top
  try:
    job.run(config, strategy_name=FLAGS.strategy, tpu=FLAGS.tpu,
            export_dir=FLAGS.export_dir, export_text=export_text)
  except train_loop.Preempted as stop:  # SIGTERM / SIGINT: saved, resumable
    return stop.report("run_finetuning.py")
  return 0


def run() -> None:
  """The command (console script and run_finetuning.py)."""
  define_flags()
  cli.run(main, "run_finetuning.py")


if __name__ == "__main__":
  run()
