"""The fixture's unigram counts and 64 rows of generator-like logits that both samplers draw from.

usage: FIX=... python draws_logits.py OUT.npz
Row r: alpha_r * log(count + 0.5) + N(0, 1) noise, alpha 0.5-1.0 (entropies 6.9-9.3 nats,
the range of the generator's masked-LM loss over the fixture's first 400 steps).
"""
import glob, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np, tensorflow as tf
FIX = os.environ.get("FIX", "../shared/fixtures/official_trajectory")
spec = {n: tf.io.FixedLenFeature([128], tf.int64)
        for n in ("input_ids", "input_mask", "segment_ids")}
batches = tf.data.TFRecordDataset(sorted(glob.glob(FIX + "/data/pretrain_data.tfrecord*"))).batch(
    1024).map(lambda r: tf.io.parse_example(r, spec))
ids = np.concatenate([b["input_ids"].numpy()[b["input_mask"].numpy() == 1] for b in batches])
counts = np.bincount(ids, minlength=30522).astype(np.float64)
alphas = np.linspace(0.5, 1.0, 64)[:, None]
noise = np.random.default_rng(0).normal(0, 1, (64, len(counts)))
logits = (alphas * np.log(counts + 0.5) + noise).astype(np.float32)
np.savez(sys.argv[1], counts=counts, logits=logits)
