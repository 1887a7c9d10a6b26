"""Peak memory of the pre-training step and the micro-batch a budget fits (`python -m electra_tf.bench_memory`; the command: electra_tf/commands/bench_memory.py, the library: electra_tf/measure/peak_memory.py)."""

from electra_tf.commands import bench_memory

if __name__ == "__main__":
  bench_memory.run()
