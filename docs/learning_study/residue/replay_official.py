"""Official ELECTRA (google-research/electra @8a46635; $OFFICIAL: a checkout of it)
trained from the official_trajectory fixture's step-0 weights, recording every draw
(--records: on a given record order, e.g. our pipeline's, saved by order_record.py).

usage: OFFICIAL=<checkout> python docs/learning_study/residue/replay_official.py --out=$D/official \
           [--steps=200] [--seed=1234] [--dropout=0.0] [--record_dropout]

Graph mode (tensorflow.compat.v1, v2 behaviour disabled) under TF 2.20.  Shims, none of
which changes what the official model computes:
  * `tensorflow.contrib.layers` -> `tf_slim.layers` (its layer_norm is contrib's code);
  * thin wrappers that only *capture* tensors: pretrain_helpers.mask's returned Inputs,
    pretrain_helpers.sample_from_softmax's one-hot samples, the discriminator output,
    the gradients handed to tf.clip_by_global_norm in create_optimizer and the learning
    rate tensor given to AdamWeightDecayOptimizer.
Features: placeholders [32, 128] fed with the fixture's records in file order (sorted
files, no shuffle), batch k = records [32k, 32k+32).  Masking and sampling are the
official code's own (stateful tf.random ops, graph seed --seed).  Optimizer: the
official model/optimization.create_optimizer (clip 1.0, warm-up x linear decay, Adam
without bias correction, weight decay 0.01).

Writes <out>/draws.npz (per step: masked input_ids, masked_lm_positions, masked_lm_ids,
masked_lm_weights, sampled_ids, input_mask, segment_ids, original input_ids),
<out>/curves.json (per step: mlm_loss, disc_loss, loss, lr, grad_norm (global, pre-clip,
dense), grad_norm_tf (as tf.clip_by_global_norm computed it), group norms, per-variable
norms) and <out>/grads_step1.npz (every variable's dense pre-clip gradient at step 1,
by TF1 name).  --record_dropout (with --dropout > 0): every dropout keep mask of every
step (the bool input of tf.nn.dropout's final where; captured, not recomputed) to
<out>/masks/step<k>.npz, bit-packed, in call order; their shapes in curves.json.
"""
import glob
import json
import os
import sys
import time
import types

import numpy as np

OFFICIAL = os.environ["OFFICIAL"]
FIXTURE = os.environ.get("FIX", "../shared/fixtures/official_trajectory")
VOCAB = os.environ.get("VOCAB", "../shared/data/vocab/bert_uncased_vocab.txt")

from absl import flags  # noqa: E402
flags.DEFINE_string("out", None, "output folder")
flags.DEFINE_integer("steps", 200, "training steps")
flags.DEFINE_integer("seed", 1234, "graph-level random seed")
flags.DEFINE_float("dropout", 0.0, "hidden and attention dropout")
flags.DEFINE_string("records", None,
                    "npz of input_ids/input_mask/segment_ids in read order (order_record.py "
                    "--save_dir) instead of the fixture's records in file order")
flags.DEFINE_bool("record_dropout", False,
                  "also record every dropout keep mask (<out>/masks/step<k>.npz, bit-packed)")
flags.mark_flag_as_required("out")
flags.FLAGS(sys.argv)
args = flags.FLAGS

# tf.compat.v1.layers (tf.layers.dense in the official code) needs Keras 2 (tf_keras).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import tensorflow.compat.v1 as tf  # noqa: E402
tf.disable_v2_behavior()
import tf_slim  # noqa: E402

contrib = types.ModuleType("tensorflow.contrib")
contrib.layers = tf_slim.layers
sys.modules["tensorflow.contrib"] = contrib
sys.modules["tensorflow.contrib.layers"] = tf_slim.layers
sys.path.insert(0, OFFICIAL)
# util/training_utils defines an ETAHook(tf.estimator.SessionRunHook) at import (unused here).
if not hasattr(tf, "estimator"):
  tf.estimator = types.SimpleNamespace(SessionRunHook=tf.train.SessionRunHook)

import configure_pretraining  # noqa: E402
import run_pretraining  # noqa: E402
from model import optimization  # noqa: E402
from pretrain import pretrain_helpers  # noqa: E402
from model import modeling  # noqa: E402

B, S = 32, 128

# ------------------------------------------------------------------ data (fixed order)
def read_records(n):
  files = sorted(glob.glob(os.path.join(FIXTURE, "data", "pretrain_data.tfrecord*")))
  feats = {k: tf.io.FixedLenFeature([S], tf.int64)
           for k in ("input_ids", "input_mask", "segment_ids")}
  ds = tf.data.TFRecordDataset(files).take(n).map(
      lambda r: tf.io.parse_single_example(r, feats)).batch(n)
  batch = tf.data.make_one_shot_iterator(ds).get_next()
  with tf.Session(graph=tf.get_default_graph()) as s:
    out = s.run(batch)
  return {k: v.astype(np.int32) for k, v in out.items()}, files

g = tf.Graph()
with g.as_default():
  records, files = read_records(args.steps * B)
if args.records:
  loaded = np.load(args.records)
  records = {k: loaded[k][:args.steps * B].astype(np.int32) for k in records}
  files = [args.records]
assert records["input_ids"].shape[0] == args.steps * B, records["input_ids"].shape

# ------------------------------------------------------------------ capture shims
captured = {}


def capture(owner, name, key):
  """Wraps owner.name so that its output is also kept as captured[key]."""
  original = getattr(owner, name)

  def capturing(*a, **k):
    captured[key] = out = original(*a, **k)
    return out
  setattr(owner, name, capturing)


capture(pretrain_helpers, "mask", "masked")
capture(pretrain_helpers, "sample_from_softmax", "sampled_onehot")

_disc = run_pretraining.PretrainingModel._get_discriminator_output
def capturing_disc(self, *a, **k):
  out = _disc(self, *a, **k)
  captured["disc"] = out
  return out
run_pretraining.PretrainingModel._get_discriminator_output = capturing_disc

captured["dropout_masks"] = []
_dropout = modeling.dropout
def capturing_dropout(input_tensor, dropout_prob):
  out = _dropout(input_tensor, dropout_prob)
  if dropout_prob:
    # tf.nn.dropout's output is where(keep_mask, x * scale, 0): keep_mask is its input 0.
    assert out.op.type == "SelectV2", out.op.type
    captured["dropout_masks"].append(out.op.inputs[0])
  return out
modeling.dropout = capturing_dropout

_clip = tf.clip_by_global_norm
def capturing_clip(t_list, clip_norm, *a, **k):
  captured["grads"] = list(t_list)
  out = _clip(t_list, clip_norm, *a, **k)
  captured["tf_global_norm"] = out[1]
  return out
optimization.tf.clip_by_global_norm = capturing_clip  # the tf.compat.v1 module

_adam_init = optimization.AdamWeightDecayOptimizer.__init__
def capturing_adam_init(self, learning_rate, **k):
  captured["lr"] = learning_rate
  _adam_init(self, learning_rate, **k)
optimization.AdamWeightDecayOptimizer.__init__ = capturing_adam_init

# ------------------------------------------------------------------ model
hp = json.load(open(os.path.join(FIXTURE, "hparams.json")))
overrides = dict(hp["model_hparam_overrides"],
                 hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout)
kw = {k: v for k, v in hp.items() if k not in ("model_hparam_overrides",)}
config = configure_pretraining.PretrainingConfig(
    "replay", "/tmp/unused_official_data_dir", model_hparam_overrides=overrides,
    vocab_file=VOCAB, **kw)
assert config.embedding_size == 64 and config.max_predictions_per_seq == 19

graph = tf.Graph()
with graph.as_default():
  tf.set_random_seed(args.seed)
  features = {k: tf.placeholder(tf.int32, [B, S], name=k)
              for k in ("input_ids", "input_mask", "segment_ids")}
  model = run_pretraining.PretrainingModel(config, features, is_training=True)
  train_op = optimization.create_optimizer(
      model.total_loss, config.learning_rate, config.num_train_steps,
      weight_decay_rate=config.weight_decay_rate, use_tpu=config.use_tpu,
      warmup_steps=config.num_warmup_steps, lr_decay_power=config.lr_decay_power)
  tvars = tf.trainable_variables()
  names = [v.op.name for v in tvars]
  dense = [tf.convert_to_tensor(gr) if isinstance(gr, tf.IndexedSlices) else gr
           for gr in captured["grads"]]
  kinds = [type(gr).__name__ for gr in captured["grads"]]
  var_norms = tf.stack([tf.norm(d) for d in dense])
  global_norm = tf.linalg.global_norm(dense)
  masked = captured["masked"]
  sampled_ids = tf.argmax(captured["sampled_onehot"], -1, output_type=tf.int32)
  fetch = {
      "mlm_loss": model.mlm_output.loss, "disc_loss": captured["disc"].loss,
      "loss": model.total_loss, "lr": captured["lr"], "grad_norm": global_norm,
      "grad_norm_tf": captured["tf_global_norm"], "var_norms": var_norms,
      "masked_input_ids": masked.input_ids,
      "masked_lm_positions": masked.masked_lm_positions,
      "masked_lm_ids": masked.masked_lm_ids,
      "masked_lm_weights": masked.masked_lm_weights,
      "sampled_ids": sampled_ids,
      "disc_labels": captured["disc"].labels,
      "global_step_before": tf.train.get_global_step().read_value()
      if hasattr(tf.train.get_global_step(), "read_value") else tf.identity(
          tf.train.get_global_step()),
  }
  mask_tensors = captured["dropout_masks"] if args.record_dropout else []
  mask_shapes = [m.shape.as_list() for m in mask_tensors]
  mask_names = [m.op.name for m in mask_tensors]
  init = tf.global_variables_initializer()
  ckpt = os.path.join(FIXTURE, "model.ckpt")
  saver = tf.train.Saver(var_list={v.op.name: v for v in tvars})

sess = tf.Session(graph=graph, config=tf.ConfigProto(
    intra_op_parallelism_threads=2, inter_op_parallelism_threads=1))
sess.run(init)
saver.restore(sess, ckpt)
# The fixture's checkpoint holds every trainable variable.
reader = tf.train.load_checkpoint(ckpt)
assert set(reader.get_variable_to_shape_map()) == set(names), \
    set(reader.get_variable_to_shape_map()) ^ set(names)

os.makedirs(args.out, exist_ok=True)
draw_keys = ("masked_input_ids", "masked_lm_positions", "masked_lm_ids",
             "masked_lm_weights", "sampled_ids", "disc_labels")
draws = {k: [] for k in draw_keys}
steps = []
groups = {"shared_embeddings": lambda n: n.startswith("electra/embeddings/"),
          "generator": lambda n: n.startswith("generator"),
          "discriminator": lambda n: not (n.startswith("electra/embeddings/")
                                          or n.startswith("generator"))}
t0 = time.time()
for step in range(1, args.steps + 1):
  lo = (step - 1) * B
  feed = {features[k]: records[k][lo:lo + B] for k in features}
  if step == 1:
    out, grads1, masks, _ = sess.run([fetch, dense, mask_tensors, train_op], feed)
    np.savez(os.path.join(args.out, "grads_step1.npz"),
             **{n: g1 for n, g1 in zip(names, grads1)})
  else:
    out, masks, _ = sess.run([fetch, mask_tensors, train_op], feed)
  if args.record_dropout:
    os.makedirs(os.path.join(args.out, "masks"), exist_ok=True)
    np.savez(os.path.join(args.out, "masks", f"step{step}.npz"),
             **{f"m{i}": np.packbits(m.ravel()) for i, m in enumerate(masks)})
  for k in draw_keys:
    draws[k].append(out[k])
  vn = out["var_norms"].astype(np.float64)
  row = {"step": step, **{k: float(out[k]) for k in
                          ("mlm_loss", "disc_loss", "loss", "lr", "grad_norm", "grad_norm_tf")},
         "global_step_before": int(out["global_step_before"]),
         "group_norms": {gname: float(np.sqrt(sum(vn[i] ** 2 for i, n in enumerate(names)
                                                  if f(n)))) for gname, f in groups.items()},
         "var_norms": vn.tolist()}
  steps.append(row)
  if step % 10 == 0 or step <= 3:
    print(f"step {step} mlm {row['mlm_loss']:.4f} disc {row['disc_loss']:.4f} "
          f"lr {row['lr']:.3e} gn {row['grad_norm']:.4f} ({time.time() - t0:.0f}s)", flush=True)

np.savez(os.path.join(args.out, "draws.npz"),
         input_ids=records["input_ids"][:args.steps * B].reshape(args.steps, B, S),
         input_mask=records["input_mask"][:args.steps * B].reshape(args.steps, B, S),
         segment_ids=records["segment_ids"][:args.steps * B].reshape(args.steps, B, S),
         **{k: np.stack(v) for k, v in draws.items()})
json.dump({"what": "official code replay driver " + os.path.abspath(__file__),
           "args": {f.name: f.value for f in args.get_key_flags_for_module(sys.argv[0])}, "files": files, "variable_names": names,
           "gradient_kinds": dict(zip(names, kinds)), "steps": steps,
           "mask_shapes": mask_shapes, "mask_names": mask_names,
           "seconds": time.time() - t0},
          open(os.path.join(args.out, "curves.json"), "w"))
print("done", time.time() - t0)
