"""Our electra_tf PretrainingJob replaying the official driver's recorded draws.

usage: python docs/learning_study/residue/replay_ours.py --official=$D/official \
           --out=$D/ours [--steps=200] [--force_official_lr]

Inputs per step from <official>/draws.npz: the official masked input_ids,
masked_lm_positions, masked_lm_ids, masked_lm_weights (the official mask), input_mask,
segment_ids, and the official sampled ids, which replace our sampler's draw
(electra_tf.modeling.objectives.sample_from_softmax is swapped for a read of a variable
holding that step's ids).  Everything else is our code unchanged: the model
(pretrain/model.build_model via PretrainingJob), its losses (objectives.Electra), the
shared train step (train_loop.Trainer.train_step), the clip and AdamWeightDecay
(electra_tf/optimization.py), initialised from the fixture's model.ckpt by
checkpoints.restore_from_checkpoint.  Dropout 0 (hidden and attention, both networks).

--dropout=0.1: the official run's dropout keep masks (recorded by official_replay.py
--record_dropout) replace our Dropout layers' draws (electra_tf.modeling.dropout.
draw_keep_mask swapped for a read of the step's recorded mask, in call order).

--force_official_lr: (diagnostic only) the schedule returns the official run's recorded
per-step lr instead of ours.

Writes <out>/curves.json (as the official driver's) and <out>/grads_step1.npz (every
variable's dense pre-clip gradient at step 1, by TF1 name).
"""
import json
import sys
import os
import pathlib
import time

import numpy as np
import tensorflow as tf

from electra_tf import checkpoints
from electra_tf import optimization
from electra_tf.modeling import objectives
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.job import PretrainingJob
from absl import flags

FIXTURE = pathlib.Path(os.environ.get("FIX", "../shared/fixtures/official_trajectory"))
VOCAB = os.environ.get("VOCAB", "../shared/data/vocab/bert_uncased_vocab.txt")

flags.DEFINE_string("official", None, "replay_official.py's output folder")
flags.DEFINE_string("out", None, "output folder")
flags.DEFINE_integer("steps", 200, "training steps")
flags.DEFINE_bool("force_official_lr", False, "(diagnostic) the official run's per-step lr")
flags.DEFINE_float("dropout", 0.0,
                   "hidden and attention dropout; > 0 needs the official run's recorded "
                   "keep masks (replay_official.py --record_dropout), which replace ours")
flags.mark_flags_as_required(["official", "out"])
flags.FLAGS(sys.argv)
args = flags.FLAGS

draws = dict(np.load(os.path.join(args.official, "draws.npz")))
official_curves = json.load(open(os.path.join(args.official, "curves.json")))
B, N = draws["masked_lm_positions"].shape[1:]

hparams = json.loads((FIXTURE / "hparams.json").read_text())
hparams["model_hparam_overrides"] = dict(hparams["model_hparam_overrides"],
                                         hidden_dropout_prob=args.dropout,
                                         attention_probs_dropout_prob=args.dropout)
os.makedirs(args.out, exist_ok=True)
config = PretrainingConfig.create(
    {**hparams, "seed": 1, "log_every": 1, "save_checkpoints_steps": 10 ** 6,
     "iterations_per_loop": 1},
    pretrain_tfrecords=str(FIXTURE / "data" / "pretrain_data.tfrecord*"),
    vocab_file=VOCAB, model_dir=os.path.join(args.out, "model_dir"))
assert config.max_predictions_per_seq == N, (config.max_predictions_per_seq, N)

# ---- the replayed sample: our sampler returns the official draw of the step
replay_ids = tf.Variable(tf.zeros([B, N], tf.int32), trainable=False)


def replayed_sample(logits, seed=None, disallow=None):
  del seed, disallow
  return tf.identity(replay_ids) + tf.zeros(tf.shape(logits)[:-1], tf.int32)


objectives.sample_from_softmax = replayed_sample

# ---- the replayed dropout: our Dropout layers' keep masks are the official ones, in
# call order (generator: embeddings, then per layer attention probs, attention output,
# FFN output; then the discriminator likewise), checked against the official shapes.
mask_vars, traced_shapes = [], []
if args.dropout:
  from electra_tf.modeling import dropout as dropout_lib
  mask_shapes = official_curves["mask_shapes"]
  assert mask_shapes, "the official run recorded no dropout masks (--record_dropout)"
  mask_vars = [tf.Variable(tf.zeros(shape, tf.bool), trainable=False) for shape in mask_shapes]

  def replayed_keep_mask(shape, seed, rate):
    del seed, rate
    i = len(traced_shapes) % len(mask_vars)
    static = tf.get_static_value(shape)
    traced_shapes.append(None if static is None else [int(x) for x in static])
    return tf.reshape(mask_vars[i], shape)

  dropout_lib.draw_keep_mask = replayed_keep_mask


def load_masks(step):
  packed = np.load(os.path.join(args.official, "masks", f"step{step}.npz"))
  for i, (var, shape) in enumerate(zip(mask_vars, official_curves["mask_shapes"])):
    count = int(np.prod(shape))
    var.assign(np.unpackbits(packed[f"m{i}"], count=count).astype(bool).reshape(shape))


class ReplayJob(PretrainingJob):
  """Records the discriminator labels and the sampled ids the model used."""

  def __init__(self, config):
    super().__init__(config, tf.distribute.get_strategy())
    self.seen_labels = tf.Variable(tf.zeros([B, config.max_seq_length], tf.int32),
                                   trainable=False)
    self.seen_sampled = tf.Variable(tf.zeros([B, N], tf.int32), trainable=False)

  def _replica_outputs(self, batch, first_counter, training, part=None):
    outputs = super()._replica_outputs(batch, first_counter, training, part)
    self.seen_labels.assign(outputs["disc_labels"])
    self.seen_sampled.assign(outputs["sampled_ids"])
    return outputs


job = ReplayJob(config)
model, optimizer = job.model, job.optimizer
variables = model.trainable_variables
names = [checkpoints.official_name(v) for v in variables]
checkpoints.restore_from_checkpoint(model, str(FIXTURE / "model.ckpt"), allow_unused=False)
missing = set(official_curves["variable_names"]) ^ set(names)
assert not missing, missing

if args.force_official_lr:
  lrs = tf.constant([s["lr"] for s in official_curves["steps"]], tf.float32)
  schedule = optimization.base_optimizer(optimizer)._learning_rate
  schedule.__class__ = type("ForcedLR", (type(schedule),), {
      "__call__": lambda self, it: tf.gather(lrs, tf.cast(it, tf.int32))})

# ---- recording clip (as tools/research/residue_trace.py): norms of the dense gradients
grad_norm = tf.Variable(0.0, trainable=False)
var_norms = tf.Variable(tf.zeros([len(variables)]), trainable=False)
_clip = optimization.clip_by_global_norm


def recording_clip(gradients, clip_norm=optimization.CLIP_NORM):
  dense = optimization.dense_gradients(gradients)
  grad_norm.assign(tf.linalg.global_norm(dense))
  var_norms.assign(tf.stack([tf.norm(g) for g in dense]))
  return _clip(dense, clip_norm)


optimization.clip_by_global_norm = recording_clip

replica_gradients = job.trainer.replica_gradients(job.loss, compile_xla=False)


@tf.function(autograph=False)
def train_step(batch):
  logged, finite = job.trainer.train_step(job.loss, batch, job.replica_sums_fn,
                                          replica_gradients)
  return logged, finite


@tf.function(autograph=False)
def gradients_only(batch):
  """The step's gradients without an update (step 1's, for the per-variable table)."""
  step = optimizer.iterations
  sums = job.model.denominators(batch)
  loss, logged, grads = replica_gradients(batch, tf.identity(step),
                                          tf.constant([0, 0], tf.int64), sums)
  return logged, optimization.dense_gradients(grads)


def batch_at(step):
  i = step - 1
  return {"input_ids": tf.constant(draws["masked_input_ids"][i], tf.int32),
          "input_mask": tf.constant(draws["input_mask"][i], tf.int32),
          "segment_ids": tf.constant(draws["segment_ids"][i], tf.int32),
          "masked_lm_positions": tf.constant(draws["masked_lm_positions"][i], tf.int32),
          "masked_lm_ids": tf.constant(draws["masked_lm_ids"][i], tf.int32),
          "masked_lm_weights": tf.constant(draws["masked_lm_weights"][i], tf.float32)}


groups = {"shared_embeddings": lambda n: n.startswith("electra/embeddings/"),
          "generator": lambda n: n.startswith("generator"),
          "discriminator": lambda n: not (n.startswith("electra/embeddings/")
                                          or n.startswith("generator"))}
steps = []
t0 = time.time()
for step in range(1, args.steps + 1):
  batch = batch_at(step)
  replay_ids.assign(draws["sampled_ids"][step - 1])
  if mask_vars:
    load_masks(step)
  if step == 1:
    logged1, grads1 = gradients_only(batch)
    np.savez(os.path.join(args.out, "grads_step1.npz"),
             **{n: g.numpy() for n, g in zip(names, grads1)})
  logged, finite = train_step(batch)
  assert bool(finite)
  if step == 1 and mask_vars:
    n = len(mask_vars)
    official = official_curves["mask_shapes"]
    for k in range(len(traced_shapes)):
      a, b = traced_shapes[k], official[k % n]
      assert a is not None and int(np.prod(a)) == int(np.prod(b)) and a[-1] == b[-1], (k, a, b)
    print(f"dropout masks: {len(traced_shapes)} traced calls match the {n} official "
          f"shapes in order", flush=True)
  labels_ok = bool(np.array_equal(job.seen_labels.numpy(), draws["disc_labels"][step - 1]))
  sampled_ok = bool(np.array_equal(job.seen_sampled.numpy(), draws["sampled_ids"][step - 1]))
  vn = var_norms.numpy().astype(np.float64)
  row = {"step": step, "mlm_loss": float(logged["mlm_loss"]),
         "disc_loss": float(logged["disc_loss"]), "loss": float(logged["loss"]),
         "lr": float(optimization.base_optimizer(optimizer).current_learning_rate())
         if not args.force_official_lr else official_curves["steps"][step - 1]["lr"],
         "grad_norm": float(grad_norm.numpy()),
         "labels_match_official": labels_ok, "sampled_match": sampled_ok,
         "group_norms": {g: float(np.sqrt(sum(vn[i] ** 2 for i, n in enumerate(names)
                                              if f(n)))) for g, f in groups.items()},
         "var_norms": vn.tolist()}
  steps.append(row)
  if step % 10 == 0 or step <= 3:
    print(f"step {step} mlm {row['mlm_loss']:.4f} disc {row['disc_loss']:.4f} "
          f"lr {row['lr']:.3e} gn {row['grad_norm']:.4f} labels {labels_ok} "
          f"({time.time() - t0:.0f}s)", flush=True)

json.dump({"what": "our replay " + os.path.abspath(__file__), "args": {f.name: f.value for f in args.get_key_flags_for_module(sys.argv[0])},
           "variable_names": names, "steps": steps, "seconds": time.time() - t0},
          open(os.path.join(args.out, "curves.json"), "w"))
print("done", time.time() - t0)
