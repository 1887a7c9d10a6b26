"""Converts checkpoints between Google's TF1 layout, the project's and transformers' folders (`python -m electra_tf.convert`; the command: electra_tf/commands/convert.py, the library: electra_tf/checkpoint_conversion.py)."""

from electra_tf.commands import convert

if __name__ == "__main__":
  convert.run()
