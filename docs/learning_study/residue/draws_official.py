"""The OFFICIAL masks and generator samples on the fixture (compat.v1 graph mode).

usage: OFFICIAL=<checkout holding electra/> FIX=... \
    python draws_official.py LOGITS.npz OUT.npz REPLICATES SEED DRAWS
Reads the fixture's records in file order (no shuffle) in batches of 32 and masks every batch
REPLICATES times with pretrain_helpers.mask; then draws DRAWS times from LOGITS' 64 rows with
pretrain_helpers.sample_from_softmax (Gumbel-max).  tf.set_random_seed(SEED).
"""
import json, os, sys, types
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.environ["OFFICIAL"] + "/electra")
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
contrib = types.ModuleType("tensorflow.contrib")
contrib.layers = types.SimpleNamespace(layer_norm=None)
sys.modules["tensorflow.contrib"] = contrib
sys.modules["tensorflow.contrib.layers"] = contrib.layers
tf.estimator = types.SimpleNamespace(SessionRunHook=object)
import configure_pretraining
from pretrain import pretrain_data, pretrain_helpers
FIX = os.environ.get("FIX", "../shared/fixtures/official_trajectory")
logits_file, out, replicates, seed, draws = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
hp = json.load(open(FIX + "/hparams.json")); hp.pop("eval_batch_size", None)
config = configure_pretraining.PretrainingConfig("t", "/tmp/official_unused", **hp,
    pretrain_tfrecords=FIX + "/data/pretrain_data.tfrecord*",
    vocab_file=FIX + "/../../data/vocab/bert_uncased_vocab.txt")
files = sorted(tf.io.gfile.glob(config.pretrain_tfrecords))
spec = {n: tf.io.FixedLenFeature([128], tf.int64)
        for n in ("input_ids", "input_mask", "segment_ids")}
records = tf.data.TFRecordDataset(files).map(
    lambda r: {k: tf.cast(v, tf.int32) for k, v in tf.io.parse_single_example(r, spec).items()})
num_batches = 11449 // 32  # the fixture's records, whole batches
tf.set_random_seed(seed)
features = tf.data.make_one_shot_iterator(records.batch(32, True).repeat()).get_next()
masked = pretrain_helpers.mask(config, pretrain_data.features_to_inputs(features),
                               config.mask_prob)
logits = np.load(logits_file)["logits"]
logits_in = tf.placeholder(tf.float32, logits.shape)
sample = tf.argmax(pretrain_helpers.sample_from_softmax(logits_in), -1, output_type=tf.int32)
res = {k: [] for k in ("records", "input_ids", "positions", "ids", "weights")}
with tf.Session() as s:
  for r in range(replicates):
    for _ in range(num_batches):
      f, m = s.run([features, masked])
      if r == 0:
        res["records"].append(f["input_ids"])
      res["input_ids"].append(m.input_ids); res["positions"].append(m.masked_lm_positions)
      res["ids"].append(m.masked_lm_ids); res["weights"].append(m.masked_lm_weights)
  samples = [s.run(sample, {logits_in: logits}) for _ in range(draws)]
np.savez_compressed(out, samples=np.array(samples, np.int32),
                    **{k: np.concatenate(v) for k, v in res.items() if v})
