"""`python -m electra_tf.bench_memory`: the launcher of electra_tf/commands/bench_memory.py.

The library: electra_tf/measure/peak_memory.py.
"""

from electra_tf.commands import bench_memory

if __name__ == "__main__":
  bench_memory.run()
