"""Fine-tunes ELECTRA on GLUE, SQuAD 1.1/2.0, MRQA and chunking (the command: electra_tf/commands/finetune.py)."""

from electra_tf.commands import finetune

__doc__ = finetune.__doc__  # absl's --help shows the __main__ module's docstring: the usage

if __name__ == "__main__":
  finetune.run()
