"""Our masks and generator samples on the fixture, drawn as draws_official.py draws the official.

usage: FIX=... python draws_ours.py LOGITS.npz OUT.npz REPLICATES SEED DRAWS
Masks: pretrain_data.get_dataset(single_pass=True) reads the fixture's records in file order and
masks each example with mask_batch from its own stateless seed (seed, 2 * example index: the
evaluation stream, the same function as training's); replicate r uses seed SEED + 1000 r.
Samples: sample_from_softmax on LOGITS' 64 rows as [4, 16, V], per-row seeds (SEED, 4 * draw + row)
as PretrainingJob forms them (seed, first_counter + row).
"""
import os, sys
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np, tensorflow as tf
from electra_tf import tokenization
from electra_tf.modeling.sampling import sample_from_softmax
from electra_tf.pretrain import data as pretrain_data
FIX = os.environ.get("FIX", "../shared/fixtures/official_trajectory")
logits_file, out, replicates, seed, draws = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
vocab_file = FIX + "/../../data/vocab/bert_uncased_vocab.txt"
special = tokenization.special_ids(tokenization.load_vocab(vocab_file), vocab_file)
res = {k: [] for k in ("input_ids", "positions", "ids", "weights")}
for r in range(replicates):
  batches = pretrain_data.get_dataset(
      FIX + "/data/pretrain_data.tfrecord*", batch_size=32, max_seq_length=128,
      max_predictions_per_seq=19, mask_prob=0.15, special=special, is_training=False,
      seed=seed + 1000 * r, single_pass=True)
  for b in batches.take(11449 // 32):  # whole batches, as draws_official.py
    for key, name in (("input_ids", "input_ids"), ("positions", "masked_lm_positions"),
                      ("ids", "masked_lm_ids"), ("weights", "masked_lm_weights")):
      res[key].append(b[name].numpy())
logits = tf.reshape(tf.constant(np.load(logits_file)["logits"]), [4, 16, -1])
draw = tf.function(lambda s: sample_from_softmax(logits, seed=s))
samples = [tf.reshape(draw(tf.stack([tf.fill([4], tf.constant(seed, tf.int64)),
                                     tf.range(4, dtype=tf.int64) + 4 * d], 1)), [-1]).numpy()
           for d in range(draws)]
np.savez_compressed(out, samples=np.array(samples, np.int32),
                    **{k: np.concatenate(v) for k, v in res.items() if v})
