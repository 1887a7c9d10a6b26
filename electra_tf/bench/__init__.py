"""Benchmarks: each module is a command (python -m electra_tf.bench.NAME) that prints its figures as JSON."""
