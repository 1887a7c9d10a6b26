"""Our electra_tf PretrainingJob on the fixture's records in FIXED file order, with OUR
own randomness (masks, generator samples, dropout): the same-order counterpart of
replay_official.py --seed=S --dropout=0.1.

usage: python docs/learning_study/residue/same_order_ours.py --seed=1 --out=$D/ours_s1 \
           [--steps=200] [--dropout=0.1] [--masks_from=$D/official_s1]

Data: the fixture's records read in sorted-file order, no shuffle, step k = records
[32(k-1), 32k) -- the order replay_official.py feeds (checked against the unmasked
input_ids/input_mask/segment_ids in $D/official/draws.npz).
Masking: OUR electra_tf.pretrain.data.mask_batch, per example, seeded exactly as our
training pipeline get_dataset seeds it: example i (0-based position in the stream) gets
the stateless seed [--seed, 2 i + 1] (single pipeline, training stream), then batched
by 32.  Contract checked against job._pipeline(True, 32).element_spec (keys, dtypes,
shapes; N = max_predictions_per_seq = 19 from the fixture hparams).
Sampling: our unpatched sampler, seeded by the job as always (config.seed = --seed,
per-row counter step * 32 + row).  Dropout: our unpatched Dropout, seeded by the trainer
as always (step_seed(config.seed, step, replica)).  Model, losses, clip, optimizer and
lr schedule: our PretrainingJob unchanged, initialised from the fixture's model.ckpt.

--masks_from=<official run dir>: (bisection) feed that run's recorded masks
(masked input_ids, positions, ids, weights from its draws.npz) instead of ours;
sampler and dropout stay ours.
--pipeline: (context) our normal training input instead of the fixed order: the first
200 batches of our get_dataset (job._pipeline(True, 32), seed --seed), masks included.

Writes <out>/curves.json: per step mlm_loss, disc_loss, loss, lr, fake_frac (replaced
real tokens / real tokens), n_masked (sum of masked_lm_weights).
"""
import glob
import json
import sys
import os
import pathlib
import time

import numpy as np
import tensorflow as tf

from electra_tf import checkpoints
from electra_tf import optimization
from electra_tf.pretrain import data as pretrain_data
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.job import PretrainingJob
from absl import flags

FIXTURE = pathlib.Path(os.environ.get("FIX", "../shared/fixtures/official_trajectory"))
VOCAB = os.environ.get("VOCAB", "../shared/data/vocab/bert_uncased_vocab.txt")
REFERENCE_ORDER = os.environ.get("REFERENCE_DRAWS", "")  # replay_official.py's records

flags.DEFINE_integer("seed", None, "our job's seed (masks, samples, dropout)")
flags.DEFINE_string("out", None, "output folder")
flags.DEFINE_integer("steps", 200, "training steps")
flags.DEFINE_float("dropout", 0.1, "hidden and attention dropout")
flags.DEFINE_bool("pipeline", False,
                  "(context) feed our own training pipeline's batches instead "
                  "(get_dataset via job._pipeline(True, 32), seed --seed): our normal run")
flags.DEFINE_string("masks_from", None,
                    "official run dir whose draws.npz masks replace ours (bisection)")
flags.mark_flags_as_required(["seed", "out"])
flags.FLAGS(sys.argv)
args = flags.FLAGS

B = 32
hparams = json.loads((FIXTURE / "hparams.json").read_text())
hparams["model_hparam_overrides"] = dict(hparams["model_hparam_overrides"],
                                         hidden_dropout_prob=args.dropout,
                                         attention_probs_dropout_prob=args.dropout)
os.makedirs(args.out, exist_ok=True)
config = PretrainingConfig.create(
    {**hparams, "seed": args.seed, "log_every": 1, "save_checkpoints_steps": 10 ** 6,
     "iterations_per_loop": 1},
    pretrain_tfrecords=str(FIXTURE / "data" / "pretrain_data.tfrecord*"),
    vocab_file=VOCAB, model_dir=os.path.join(args.out, "model_dir"))
S, N = config.max_seq_length, config.max_predictions_per_seq
assert (S, N, config.train_batch_size) == (128, 19, B), (S, N, config.train_batch_size)
assert config.seed == args.seed

# ---- records in file order (as official_replay.read_records)
files = sorted(glob.glob(str(FIXTURE / "data" / "pretrain_data.tfrecord*")))
n_records = args.steps * B
raw = tf.data.TFRecordDataset(files).take(n_records).map(
    lambda r: pretrain_data.decode_record(r, S)).batch(n_records)
records = {k: v.numpy() for k, v in next(iter(raw)).items()}
assert records["input_ids"].shape == (n_records, S)
if REFERENCE_ORDER:  # $REFERENCE_DRAWS: a replay_official.py draws.npz, read in the same order
  ref = np.load(REFERENCE_ORDER)
  for k in ("input_ids", "input_mask", "segment_ids"):
    assert np.array_equal(records[k].reshape(-1, B, S)[:ref[k].shape[0]],
                          ref[k][:args.steps]), k
  print(f"records: {n_records} in file order, equal to {REFERENCE_ORDER}", flush=True)


class SameOrderJob(PretrainingJob):
  """Records the discriminator labels the model used (fake_frac)."""

  def __init__(self, config):
    super().__init__(config, tf.distribute.get_strategy())
    self.seen_labels = tf.Variable(tf.zeros([B, S], tf.int32), trainable=False)

  def _replica_outputs(self, batch, first_counter, training, part=None):
    outputs = super()._replica_outputs(batch, first_counter, training, part)
    self.seen_labels.assign(outputs["disc_labels"])
    return outputs


job = SameOrderJob(config)
assert job.trainer.seed == args.seed, job.trainer.seed
model, optimizer = job.model, job.optimizer
checkpoints.restore_from_checkpoint(model, str(FIXTURE / "model.ckpt"), allow_unused=False)

# ---- our masking, seeded as get_dataset's `mask` (single pipeline, training stream)
special = job.special_ids
num_streams, stream = 2, 1


def mask(index, example):
  example_seed = tf.stack([tf.constant(args.seed, tf.int64), index * num_streams + stream])
  masked = pretrain_data.mask_batch({k: v[tf.newaxis] for k, v in example.items()},
                                    max_predictions_per_seq=N, mask_prob=config.mask_prob,
                                    special=special, seed=example_seed)
  return {k: v[0] for k, v in masked.items()}


ours = (tf.data.Dataset.from_tensor_slices(records).enumerate()
        .map(mask, num_parallel_calls=tf.data.AUTOTUNE).batch(B, drop_remainder=True))
# contract: the same element spec as the job's own training pipeline
expected = job._pipeline(True, B).element_spec  # pylint: disable=protected-access
got = ours.element_spec
assert set(expected) == set(got), (set(expected), set(got))
for k in expected:
  assert expected[k].dtype == got[k].dtype and expected[k].shape == got[k].shape, \
      (k, expected[k], got[k])
print("mask contract: " + ", ".join(f"{k} {got[k].dtype.name}{got[k].shape.as_list()}"
                                    for k in sorted(got)), flush=True)
batches = list(ours.as_numpy_iterator())
assert len(batches) == args.steps
if args.pipeline:
  batches = list(job._pipeline(True, B).take(args.steps).as_numpy_iterator())  # pylint: disable=protected-access
  print("batches: our own training pipeline's (its order and masks)", flush=True)

if args.masks_from:
  od = np.load(os.path.join(args.masks_from, "draws.npz"))
  assert np.array_equal(od["input_ids"][:args.steps], ref["input_ids"][:args.steps])
  batches = [{"input_ids": od["masked_input_ids"][i], "input_mask": od["input_mask"][i],
              "segment_ids": od["segment_ids"][i],
              "masked_lm_positions": od["masked_lm_positions"][i],
              "masked_lm_ids": od["masked_lm_ids"][i],
              "masked_lm_weights": od["masked_lm_weights"][i]} for i in range(args.steps)]
  print(f"masks: replaced by {args.masks_from}", flush=True)

# the count of used slots is a function of input_mask alone: equal to the official's
ref_w = our_w = 0
if not args.pipeline:
  ref_w = ref["masked_lm_weights"][:args.steps].sum(axis=(1, 2))
  our_w = np.array([b["masked_lm_weights"].sum() for b in batches])
assert np.array_equal(ref_w, our_w), np.nonzero(ref_w != our_w)
our_mask_frac = np.mean([(b["input_ids"] == special.mask_id).sum() / b["input_mask"].sum()
                         for b in batches])
ref_mask_frac = np.mean((ref["masked_input_ids"][:args.steps] == special.mask_id).sum((1, 2))
                        / ref["input_mask"][:args.steps].sum((1, 2)))
print(f"used slots per step equal the official's; [MASK] fraction of real tokens "
      f"ours {our_mask_frac:.4f} vs official seed-1234 run {ref_mask_frac:.4f}", flush=True)


replica_gradients = job.trainer.replica_gradients(job.loss, compile_xla=False)  # as replay_ours


@tf.function(autograph=False)
def train_step(batch):
  return job.trainer.train_step(job.loss, batch, job.replica_sums_fn, replica_gradients)


steps = []
t0 = time.time()
for step in range(1, args.steps + 1):
  b = batches[step - 1]
  batch = {k: tf.constant(v) for k, v in b.items()}
  logged, finite = train_step(batch)
  assert bool(finite)
  labels = job.seen_labels.numpy()
  row = {"step": step, "mlm_loss": float(logged["mlm_loss"]),
         "disc_loss": float(logged["disc_loss"]), "loss": float(logged["loss"]),
         "lr": float(optimization.base_optimizer(optimizer).current_learning_rate()),
         "fake_frac": float((labels * b["input_mask"]).sum() / b["input_mask"].sum()),
         "n_masked": float(b["masked_lm_weights"].sum())}
  steps.append(row)
  if step % 20 == 0 or step <= 2:
    print(f"step {step} mlm {row['mlm_loss']:.4f} disc {row['disc_loss']:.4f} "
          f"lr {row['lr']:.3e} fake {row['fake_frac']:.4f} ({time.time() - t0:.0f}s)",
          flush=True)

json.dump({"what": "ours, fixed record order, own randomness " + os.path.abspath(__file__),
           "args": {f.name: f.value for f in args.get_key_flags_for_module(sys.argv[0])}, "files": files, "steps": steps, "seconds": time.time() - t0},
          open(os.path.join(args.out, "curves.json"), "w"))
print("done", time.time() - t0)
