"""Fine-tunes ELECTRA on GLUE, SQuAD 1.1/2.0, MRQA and chunking (the command: electra_tf/commands/finetune.py)."""

from electra_tf.commands import finetune

if __name__ == "__main__":
  finetune.run()
