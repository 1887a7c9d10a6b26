r"""Learns a BERT-style WordPiece vocab from a corpus (tensorflow-text's learner).

  python data_prep/build_vocab.py (--corpus_dir=DIR | --corpus_files=A,B) \
      --vocab_size=N --output_file=FILE [--nodo_lower_case] [--nostrip_accents] \
      [--skip_invalid_utf8]

The learner may find fewer entries than --vocab_size; the jobs read
vocab_size from the file.  How: electra_tf/pretrain/vocab_builder.py.
"""

import os

from absl import flags

from electra_tf import cli
from electra_tf import fileio
from electra_tf.pretrain import vocab_builder

FLAGS = flags.FLAGS


def define_flags() -> None:
  cli.define_shared_flag("corpus_dir")
  flags.DEFINE_list("corpus_files", None, "Comma-separated text files.")
  flags.DEFINE_integer("vocab_size", None, "Largest vocab size.")
  flags.DEFINE_string("output_file", None, "Where the vocab is written.")
  cli.define_shared_flag("do_lower_case", True)
  cli.define_shared_flag("strip_accents", True)
  cli.define_shared_flag("skip_invalid_utf8", False)
  flags.mark_flags_as_required(["vocab_size", "output_file"])
  flags.mark_flags_as_mutual_exclusive(["corpus_dir", "corpus_files"], required=True)


def main() -> int:
  # Before the corpus is read: a folder that cannot be written fails at once
  # (made once the vocab is learned, so a failure leaves none behind).
  output_dir = os.path.dirname(FLAGS.output_file) or "."
  fileio.check_writable(output_dir, "--output_file", create=False)
  if FLAGS.corpus_dir:
    texts = vocab_builder.read_corpus_texts(FLAGS.corpus_dir, "--corpus_dir",
                                            FLAGS.skip_invalid_utf8)
  else:
    texts = vocab_builder.read_corpus_texts(FLAGS.corpus_files, "--corpus_files",
                                            FLAGS.skip_invalid_utf8)
  vocab = vocab_builder.build_vocab(texts, FLAGS.vocab_size, FLAGS.do_lower_case,
                                    FLAGS.strip_accents)
  os.makedirs(output_dir, exist_ok=True)
  fileio.atomic_write_text(FLAGS.output_file, "".join(t + "\n" for t in vocab))
  found = ("" if len(vocab) == FLAGS.vocab_size else
           f" (the learner found {len(vocab):,} of the {FLAGS.vocab_size:,} asked for)")
  print(f"Wrote {len(vocab):,} entries to {FLAGS.output_file}{found}; the jobs read "
        "vocab_size from the file")
  return 0


def run() -> None:
  """The command (console script and data_prep/build_vocab.py)."""
  define_flags()
  cli.run(main, "build_vocab.py")


if __name__ == "__main__":
  run()
