"""Writes pre-training TFRecords from text (official build_pretraining_dataset.py
and, with --openwebtext_dir, build_openwebtext_pretraining_dataset.py).

  python data_prep/build_tfrecords.py (--corpus_dir=DIR | --openwebtext_dir=DIR) \
      --vocab_file=FILE --output_dir=DIR [--max_seq_length=128] [--num_processes=1] \
      [--num_out_files=1000] [--noblanks_separate_docs] [--nodo_lower_case] \
      [--nostrip_accents] [--seed=N] [--tokenizer=fast|reference] \
      [--skip_invalid_utf8]

What it reads and writes: electra_tf/pretrain/tfrecords.py.  Ctrl-C (or
SIGTERM) stops it with exit status 130 and no file under a final name.
"""

from electra_tf.commands import build_tfrecords

if __name__ == "__main__":
  build_tfrecords.run()
