"""Which fixture records our job's input pipeline yields at each step (seeds given)."""
import json, os, sys, hashlib
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1"); os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np, tensorflow as tf, tf_keras as keras
from electra_tf.pretrain import data as pretrain_data
from electra_tf import tokenization
FIX = os.environ.get("FIX", "../shared/fixtures/official_trajectory")
vocab = tokenization.load_vocab(FIX + "/../../data/vocab/bert_uncased_vocab.txt")
special = tokenization.special_ids(vocab, "vocab")
out = {}
for seed in map(int, sys.argv[1].split(",")):
  keras.utils.set_random_seed(seed)
  ds = pretrain_data.get_dataset(FIX + "/data/pretrain_data.tfrecord*", batch_size=32, max_seq_length=128,
                                 max_predictions_per_seq=19, mask_prob=0.15, special=special,
                                 is_training=True, seed=seed)
  steps = []
  for b in ds.take(400):
    ids = b["input_ids"].numpy().copy()
    pos = b["masked_lm_positions"].numpy(); mid = b["masked_lm_ids"].numpy(); w = b["masked_lm_weights"].numpy()
    for i in range(ids.shape[0]):
      for p, m, ww in zip(pos[i], mid[i], w[i]):
        if ww > 0: ids[i, p] = m
    steps.append([hashlib.md5(r.astype(np.int32).tobytes()).hexdigest()[:12] for r in ids])
  out[seed] = steps
json.dump(out, open(sys.argv[2], "w"))
