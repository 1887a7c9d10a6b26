"""Shows the pipeline's dynamic masking of pre-training TFRecords.

  python data_prep/inspect_masking.py --pretrain_tfrecords=GLOB \
      --vocab_file=FILE --num_examples=K [--mask_prob=0.15] [--seed=0] \
      [--num_print=10] [--json]

What it prints and counts: electra_tf/pretrain/masking_report.py.
"""

from electra_tf.commands import inspect_masking

if __name__ == "__main__":
  inspect_masking.run()
