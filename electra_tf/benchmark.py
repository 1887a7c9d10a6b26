"""Speed of the pre-training step, of the input pipeline, or of an export's signatures (`python -m electra_tf.benchmark`; the command: electra_tf/commands/benchmark.py)."""

from electra_tf.commands import benchmark

if __name__ == "__main__":
  benchmark.run()
