"""Writes pre-training TFRecords from text, as the official build_pretraining_dataset.py does (the command: electra_tf/commands/build_tfrecords.py)."""

from electra_tf.commands import build_tfrecords

if __name__ == "__main__":
  build_tfrecords.run()
