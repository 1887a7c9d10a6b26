"""Shows the pipeline's dynamic masking of pre-training TFRecords (the command: electra_tf/commands/inspect_masking.py)."""

from electra_tf.commands import inspect_masking

if __name__ == "__main__":
  inspect_masking.run()
