"""Learns a BERT-style WordPiece vocab from a corpus (tensorflow-text's learner) (the command: electra_tf/commands/build_vocab.py)."""

from electra_tf.commands import build_vocab

if __name__ == "__main__":
  build_vocab.run()
