"""Pre-trains ELECTRA (or a plain masked LM) on TFRecords (the command: electra_tf/commands/pretrain.py)."""

from electra_tf.commands import pretrain

__doc__ = pretrain.__doc__  # absl's --help shows the __main__ module's docstring: the usage

if __name__ == "__main__":
  pretrain.run()
