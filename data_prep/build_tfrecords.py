"""Writes pre-training TFRecords from text, as the official build_pretraining_dataset.py does (the command: electra_tf/commands/build_tfrecords.py)."""

from electra_tf.commands import build_tfrecords

__doc__ = build_tfrecords.__doc__  # absl's --help shows the __main__ module's docstring: the usage

if __name__ == "__main__":
  build_tfrecords.run()
