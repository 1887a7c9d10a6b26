r"""Shows the pipeline's dynamic masking of pre-training TFRecords.

  python data_prep/inspect_masking.py --pretrain_tfrecords=GLOB \
      --vocab_file=FILE --num_examples=K [--mask_prob=0.15] [--seed=0] \
      [--num_print=10] [--json]

What it prints and counts: electra_tf/pretrain/masking_report.py.
"""

from absl import flags

from electra_tf import cli
from electra_tf.config import MASK_PROB
from electra_tf.pretrain import masking_report

FLAGS = flags.FLAGS


def define_flags() -> None:
  cli.define_shared_flag("pretrain_tfrecords")
  cli.define_shared_flag("vocab_file")
  flags.DEFINE_integer("num_examples", 1000, "Examples to mask and count (K).")
  flags.DEFINE_float("mask_prob", MASK_PROB, "Share of tokens to mask.")
  flags.DEFINE_integer("seed", 0, "Masking seed.")
  flags.DEFINE_integer("num_print", 10, "Masked examples to print.")
  flags.DEFINE_bool("json", False, "End with one JSON line of statistics.")
  flags.mark_flags_as_required(["pretrain_tfrecords", "vocab_file"])


def main() -> int:
  masking_report.inspect(FLAGS.pretrain_tfrecords, FLAGS.vocab_file, FLAGS.num_examples,
                         FLAGS.mask_prob, FLAGS.seed, FLAGS.num_print, FLAGS.json)
  return 0


def run() -> None:
  """The command (console script and data_prep/inspect_masking.py)."""
  define_flags()
  cli.run(main, "inspect_masking.py")


if __name__ == "__main__":
  run()
