"""Learns a BERT-style WordPiece vocab from a corpus (tensorflow-text's learner).

  python data_prep/build_vocab.py (--corpus_dir=DIR | --corpus_files=A,B) \
      --vocab_size=N --output_file=FILE [--nodo_lower_case] [--nostrip_accents] \
      [--skip_invalid_utf8]

How the vocab is learned: electra_tf/pretrain/vocab.py.
"""

from electra_tf.commands import build_vocab

if __name__ == "__main__":
  build_vocab.run()
