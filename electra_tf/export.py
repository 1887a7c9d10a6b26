"""Exports the discriminator as a TensorFlow SavedModel (`python -m electra_tf.export`; the command: electra_tf/commands/export.py)."""

from electra_tf.commands import export

if __name__ == "__main__":
  export.run()
