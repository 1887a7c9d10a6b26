"""`python -m electra_tf.benchmark`: the launcher of electra_tf/commands/benchmark.py.

The library: electra_tf/measure/.
"""

from electra_tf.commands import benchmark

if __name__ == "__main__":
  benchmark.run()
