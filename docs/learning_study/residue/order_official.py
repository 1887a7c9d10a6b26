"""Which fixture records the OFFICIAL input function yields at each step (compat.v1, seeds given)."""
import json, os, sys, hashlib, types
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1"); os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.environ["OFFICIAL"] + "/electra")
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
contrib = types.ModuleType("tensorflow.contrib"); contrib.layers = types.SimpleNamespace(layer_norm=None)
sys.modules["tensorflow.contrib"] = contrib; sys.modules["tensorflow.contrib.layers"] = contrib.layers
tf.estimator = types.SimpleNamespace(SessionRunHook=object)
import configure_pretraining
from pretrain import pretrain_data
FIX = os.environ.get("FIX", "../shared/fixtures/official_trajectory")
hp = json.load(open(FIX + "/hparams.json")); hp.pop("eval_batch_size", None)
out = {}
for seed in map(int, sys.argv[1].split(",")):
  tf.reset_default_graph()
  config = configure_pretraining.PretrainingConfig("t", "/tmp/official_unused", **hp,
      pretrain_tfrecords=FIX + "/data/pretrain_data.tfrecord*",
      vocab_file=FIX + "/../../data/vocab/bert_uncased_vocab.txt")
  tf.set_random_seed(seed)
  f = tf.data.make_one_shot_iterator(pretrain_data.get_input_fn(config, True)({"batch_size": 32})).get_next()
  steps = []
  with tf.Session() as s:
    for _ in range(400):
      ids = s.run(f["input_ids"])
      steps.append([hashlib.md5(r.astype(np.int32).tobytes()).hexdigest()[:12] for r in ids])
  out[seed] = steps
json.dump(out, open(sys.argv[2], "w"))
