"""Learns a BERT-style WordPiece vocab from a corpus (tensorflow-text's learner) (the command: electra_tf/commands/build_vocab.py)."""

import os
import sys

# The checkout's own package, whether or not it is installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from electra_tf.commands import build_vocab  # noqa: E402

if __name__ == "__main__":
  build_vocab.run()
