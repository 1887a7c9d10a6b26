"""Pre-trains ELECTRA (or a plain masked LM) on TFRecords (the command: electra_tf/commands/pretrain.py)."""

from electra_tf.commands import pretrain

if __name__ == "__main__":
  pretrain.run()
