"""Which records the two training pipelines read in steps 1-200 (context for the
data-order explanation): ours (electra_tf.pretrain.data.get_dataset, seeds) vs the
official pretrain_data.get_input_fn (TF1 graph, tf.set_random_seed(seed), sloppy).

usage: python docs/learning_study/residue/order_record.py --side=ours --seeds=1,2,3,4,5 \
           --out=$D/order_ours.json
       python docs/learning_study/residue/order_record.py --side=official --seeds=1,2,3,4,5 \
           --out=$D/order_official.json

Each example of the first 200 batches of 32 is identified with its record (file, index
in file) by its unmasked input_ids (ours: masked positions restored from masked_lm_ids).
Per seed: dup_in_batch_frac (share of a batch's
rows that repeat another row's record), repeat_gap_steps_median, the fraction from file 0, the mean index within file, the number of distinct
records, the epoch-fraction covered, and batch locality: the mean over batches of the
within-batch std of the records' position in their file, and the mean number of
distinct 'blocks' of 32 consecutive file records a batch draws from.
"""
import glob
import hashlib
import json
import os
import sys
import types

import numpy as np
from absl import flags

FIXTURE = os.environ.get("FIX", "../shared/fixtures/official_trajectory")
flags.DEFINE_enum("side", None, ["ours", "official"], "whose input pipeline")
flags.DEFINE_list("seeds", ["1", "2", "3", "4", "5"], "seeds, comma-separated")
flags.DEFINE_integer("steps", 200, "steps (batches of 32) read")
flags.DEFINE_string("out", None, "the JSON written")
flags.DEFINE_string("save_dir", None,
                    "also save each seed's records in read order to <save_dir>/order_<side>_s<seed>.npz "
                    "(input_ids, input_mask, segment_ids [steps*32, 128]) for replay_official.py --records")
flags.mark_flags_as_required(["side", "out"])
flags.FLAGS(sys.argv)
args = flags.FLAGS
B, S = 32, 128
files = sorted(glob.glob(os.path.join(FIXTURE, "data", "pretrain_data.tfrecord*")))


def key(ids):
  return hashlib.sha1(np.asarray(ids, np.int32).tobytes()).hexdigest()


def index_records(read_file):
  table = {}
  for f, path in enumerate(files):
    for i, ids in enumerate(read_file(path)):
      table.setdefault(key(ids), (f, i))
  return table


def stats(locs, n_per_file):
  locs = np.array(locs).reshape(-1, B, 2)
  f, i = locs[..., 0], locs[..., 1]
  flat = [tuple(x) for x in locs.reshape(-1, 2)]
  return {"frac_file0": float((f == 0).mean()),
          "mean_index_in_file": float(i.mean()),
          "max_index_in_file": int(i.max()),
          "distinct_records": len(set(flat)),
          "within_batch_std_of_index": float(np.mean([
              np.mean([i[b][f[b] == k].std() for k in (0, 1) if (f[b] == k).sum() > 1])
              for b in range(len(locs))])),
          "distinct_blocks32_per_batch": float(np.mean([
              len(set(zip(f[b], i[b] // 32))) for b in range(len(locs))])),
          "dup_in_batch_frac": float(np.mean([1 - len(set(zip(f[b], i[b]))) / B
                                              for b in range(len(locs))])),
          "repeat_gap_steps_median": _repeat_gap(flat),
          "files_records": n_per_file}


def _repeat_gap(flat):
  """Median distance in steps between a record's first and second reading (None: no repeat)."""
  first, gaps = {}, []
  for n, x in enumerate(flat):
    if x in first:
      gaps.append((n - first[x]) / B)
    else:
      first[x] = n
  return float(np.median(gaps)) if gaps else None


result = {"side": args.side, "per_seed": {}}


def save(seed, saved):
  if args.save_dir:
    os.makedirs(args.save_dir, exist_ok=True)
    np.savez(os.path.join(args.save_dir, f"order_{args.side}_s{seed}.npz"),
             **{k: np.concatenate(v).astype(np.int32) for k, v in saved.items()})
if args.side == "ours":
  import tensorflow as tf
  from electra_tf.pretrain import data as pretrain_data
  from electra_tf import vocabulary
  vocab_path = os.environ.get("VOCAB", "../shared/data/vocab/bert_uncased_vocab.txt")
  special = vocabulary.special_ids(vocabulary.load_vocab(vocab_path), vocab_path)
  spec = pretrain_data.feature_spec(S)
  table = index_records(lambda p: (tf.io.parse_single_example(r, spec)["input_ids"].numpy()
                                   for r in tf.data.TFRecordDataset(p)))
  n_per_file = [sum(1 for v in table.values() if v[0] == k) for k in (0, 1)]
  for seed in map(int, args.seeds):
    ds = pretrain_data.get_dataset(os.path.join(FIXTURE, "data", "pretrain_data.tfrecord*"),
                                   batch_size=B, max_seq_length=S, max_predictions_per_seq=19,
                                   mask_prob=0.15, special=special, is_training=True, seed=seed)
    locs, saved = [], {"input_ids": [], "input_mask": [], "segment_ids": []}
    for b in ds.take(args.steps).as_numpy_iterator():
      ids = b["input_ids"].copy()
      for r in range(B):
        used = b["masked_lm_weights"][r] > 0
        ids[r, b["masked_lm_positions"][r][used]] = b["masked_lm_ids"][r][used]
        locs.append(table[key(ids[r])])
      for k, v in (("input_ids", ids), ("input_mask", b["input_mask"]),
                   ("segment_ids", b["segment_ids"])):
        saved[k].append(v)
    save(seed, saved)
    result["per_seed"][seed] = stats(locs, n_per_file)
    print(seed, result["per_seed"][seed], flush=True)
else:
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
  import tensorflow.compat.v1 as tf
  tf.disable_v2_behavior()
  import tf_slim
  contrib = types.ModuleType("tensorflow.contrib")
  contrib.layers = tf_slim.layers
  sys.modules["tensorflow.contrib"] = contrib
  sys.modules["tensorflow.contrib.layers"] = tf_slim.layers
  sys.path.insert(0, os.environ["OFFICIAL"])
  if not hasattr(tf, "estimator"):
    tf.estimator = types.SimpleNamespace(SessionRunHook=tf.train.SessionRunHook)
  import configure_pretraining  # noqa: E402
  from pretrain import pretrain_data  # noqa: E402
  spec = {"input_ids": tf.io.FixedLenFeature([S], tf.int64)}

  def read_file(path):
    g = tf.Graph()
    with g.as_default():
      it = tf.data.make_one_shot_iterator(tf.data.TFRecordDataset(path).map(
          lambda r: tf.io.parse_single_example(r, spec)["input_ids"]).batch(100000))
      with tf.Session(graph=g) as s:
        return list(s.run(it.get_next()))

  table = index_records(read_file)
  n_per_file = [sum(1 for v in table.values() if v[0] == k) for k in (0, 1)]
  hp = json.load(open(os.path.join(FIXTURE, "hparams.json")))
  kw = {k: v for k, v in hp.items() if k != "model_hparam_overrides"}
  config = configure_pretraining.PretrainingConfig(
      "order", "/tmp/unused_official_data_dir",
      model_hparam_overrides=hp["model_hparam_overrides"],
      vocab_file=os.environ.get("VOCAB", "../shared/data/vocab/bert_uncased_vocab.txt"), **kw)
  config.pretrain_tfrecords = os.path.join(FIXTURE, "data", "pretrain_data.tfrecord*")
  for seed in map(int, args.seeds):
    g = tf.Graph()
    with g.as_default():
      tf.set_random_seed(seed)
      d = pretrain_data.get_input_fn(config, True)({"batch_size": B})
      nxt = tf.data.make_one_shot_iterator(d).get_next()
      locs, saved = [], {"input_ids": [], "input_mask": [], "segment_ids": []}
      with tf.Session(graph=g) as s:
        for _ in range(args.steps):
          b = s.run(nxt)
          for k in saved:
            saved[k].append(b[k])
          for ids in b["input_ids"]:
            locs.append(table[key(ids)])
    save(seed, saved)
    result["per_seed"][seed] = stats(locs, n_per_file)
    print(seed, result["per_seed"][seed], flush=True)

json.dump(result, open(args.out, "w"), indent=1)
