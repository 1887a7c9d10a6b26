"""Writes pre-training TFRecords from text, as the official build_pretraining_dataset.py does (the command: electra_tf/commands/build_tfrecords.py)."""

import os
import sys

# The checkout's own package, whether or not it is installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from electra_tf.commands import build_tfrecords  # noqa: E402

if __name__ == "__main__":
  build_tfrecords.run()
