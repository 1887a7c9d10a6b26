"""What the benchmark commands measure (electra_tf.benchmark, electra_tf.bench_memory)."""
