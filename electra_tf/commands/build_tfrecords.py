r"""Writes pre-training TFRecords from text (official build_pretraining_dataset.py
and, with --openwebtext_dir, build_openwebtext_pretraining_dataset.py).

  python data_prep/build_tfrecords.py (--corpus_dir=DIR | --openwebtext_dir=DIR) \
      --vocab_file=FILE --output_dir=DIR [--max_seq_length=128] [--num_processes=1] \
      [--num_out_files=1000] [--noblanks_separate_docs] [--nodo_lower_case] \
      [--nostrip_accents] [--seed=N] [--tokenizer=fast|reference] \
      [--skip_invalid_utf8] [--num_workers=CORES] [--checkpoint_every_mb=64]

An interrupted build (exit status 130) leaves no file under a final name and
the same command finishes it, byte for byte as an uninterrupted one
(docs/pretraining.md).  What it writes: electra_tf/pretrain/tfrecords.py.
"""

import signal
import sys

from absl import flags

from electra_tf import cli
from electra_tf.pretrain import tfrecords

FLAGS = flags.FLAGS


def define_flags() -> None:
  cli.define_shared_flag("corpus_dir")
  flags.DEFINE_string("openwebtext_dir", None,
                      "The unpacked OpenWebText release's openwebtext/ folder of "
                      "urlsf_subset*_data.xz archives (read directly, as official).")
  cli.define_shared_flag("vocab_file")
  flags.DEFINE_string("output_dir", None, "Where the TFRecords are written.")
  flags.DEFINE_integer("max_seq_length", 128, "Tokens per example.")
  flags.DEFINE_integer("num_processes", 1,
                       "As official: the output of this many processes (job j reads the "
                       "files i with i % N == j and writes the output files i with "
                       "i % N == j). The work runs on --num_workers processes.")
  flags.DEFINE_integer("num_workers", None,
                       "Tokenizing processes (default: the cores this process may use); "
                       "the output is the same for any number.")
  flags.DEFINE_float("checkpoint_every_mb", tfrecords.CHECKPOINT_MB,
                     "Note the progress (for a rerun to go on from) about every this many "
                     "MB of input.")
  flags.DEFINE_integer("num_out_files", 1000, "Number of output files.")
  flags.DEFINE_bool("blanks_separate_docs", None,
                    "Blank lines end documents (default: yes; no with --openwebtext_dir, "
                    "as official).")
  cli.define_shared_flag("do_lower_case", True)
  cli.define_shared_flag("strip_accents", True)
  flags.DEFINE_integer("seed", None,
                       "Seed of the random choices (default: unseeded, as official).")
  flags.DEFINE_enum("tokenizer", "fast", tfrecords.TOKENIZERS,
                    "fast: tensorflow-text; reference: the pure-Python tokenizer.")
  cli.define_shared_flag("skip_invalid_utf8", False)
  flags.mark_flags_as_required(["vocab_file", "output_dir"])
  flags.mark_flags_as_mutual_exclusive(["corpus_dir", "openwebtext_dir"], required=True)

PROGRAM = "build_tfrecords.py"


def _raise_interrupt(signum, frame):  # pylint: disable=unused-argument
  raise KeyboardInterrupt()


def main() -> int:
  signal.signal(signal.SIGTERM, _raise_interrupt)
  openwebtext = FLAGS.openwebtext_dir is not None
  try:
    tfrecords.build_tfrecords(
        FLAGS.openwebtext_dir if openwebtext else FLAGS.corpus_dir, FLAGS.vocab_file,
        FLAGS.output_dir,
        max_seq_length=FLAGS.max_seq_length, num_out_files=FLAGS.num_out_files,
        num_processes=FLAGS.num_processes, blanks_separate_docs=FLAGS.blanks_separate_docs,
        do_lower_case=FLAGS.do_lower_case, strip_accents=FLAGS.strip_accents,
        seed=FLAGS.seed, tokenizer=FLAGS.tokenizer, skip_invalid_utf8=FLAGS.skip_invalid_utf8,
        openwebtext=openwebtext,
        num_workers=FLAGS.num_workers or tfrecords.usable_cores(),
        checkpoint_every_mb=FLAGS.checkpoint_every_mb)
  except KeyboardInterrupt:
    print(f"{PROGRAM}: interrupted; no output file was written; rerun the same command "
          "to finish the build", file=sys.stderr)
    return 130
  return 0


def run() -> None:
  """The command (console script and data_prep/build_tfrecords.py)."""
  define_flags()
  cli.run(main, PROGRAM)


if __name__ == "__main__":
  run()
