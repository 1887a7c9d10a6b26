"""Issue 52 item 3: the OFFICIAL code's per-step gradient norms, by group, from the
official_trajectory fixture's step-0 weights (google-research/electra 8a46635 under
tf.compat.v1, TF 2.20).  $OFFICIAL: the directory of the fixture's driver (driver.py, kept
outside this repo, as the official code is); this script builds its graph as driver.py
does and also fetches, per step, the global norm tf.clip_by_global_norm computed, the
norms of three variable groups (shared embeddings electra/embeddings/*, generator*,
the rest: discriminator), the learning-rate tensor the update read, and lists any
gradient that reached the clip as IndexedSlices (none does).
usage: OFFICIAL=DIR python official_groups.py SEED STEPS OUT_JSON
"""
import json
import os
import sys

sys.path.insert(0, os.environ["OFFICIAL"])
import driver  # noqa: E402  (its TF 2.20 shims, the official modules, FIXTURE)

tf = driver.tf
optimization = driver.optimization
captured = {}
_clip = tf.clip_by_global_norm
_adam_init = optimization.AdamWeightDecayOptimizer.__init__


def clip(grads, clip_norm):
  captured["grads"] = list(grads)
  clipped, captured["norm"] = _clip(grads, clip_norm)
  return clipped, captured["norm"]


def adam_init(self, learning_rate, **kwargs):
  captured["lr"] = learning_rate
  _adam_init(self, learning_rate, **kwargs)


optimization.tf.clip_by_global_norm = clip
optimization.AdamWeightDecayOptimizer.__init__ = adam_init


def group(name):
  return ("shared_embeddings" if "electra/embeddings/" in name else
          "generator" if "generator" in name else "discriminator")


def main():
  seed, steps, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
  hparams = json.load(open(os.path.join(driver.FIXTURE, "hparams.json")))
  hparams.pop("eval_batch_size", None)
  config = driver.configure_pretraining.PretrainingConfig(
      "trajectory", "/tmp/official_unused", **hparams,
      pretrain_tfrecords=os.path.join(driver.FIXTURE, "data", "pretrain_data.tfrecord*"),
      vocab_file="/work/shared/data/vocab/bert_uncased_vocab.txt")
  tf.set_random_seed(seed)
  features = tf.data.make_one_shot_iterator(driver.pretrain_data.get_input_fn(config, True)(
      {"batch_size": config.train_batch_size})).get_next()
  model = driver.run_pretraining.PretrainingModel(config, features, True)
  mlm_loss = model.mlm_output.loss
  disc_loss = (model.total_loss - config.gen_weight * mlm_loss) / config.disc_weight
  train_op = optimization.create_optimizer(
      model.total_loss, config.learning_rate, config.num_train_steps,
      weight_decay_rate=config.weight_decay_rate, use_tpu=False,
      warmup_steps=config.num_warmup_steps, lr_decay_power=config.lr_decay_power)
  tvars = tf.trainable_variables()
  sparse = [v.op.name for v, g in zip(tvars, captured["grads"])
            if isinstance(g, tf.IndexedSlices)]
  groups = {}
  for v, g in zip(tvars, captured["grads"]):
    if g is not None:
      groups.setdefault(group(v.op.name), []).append(tf.convert_to_tensor(g))
  checkpoint = os.path.join(driver.FIXTURE, "model.ckpt")
  stored = {name for name, _ in tf.train.list_variables(checkpoint)}
  graph_vars = {v.op.name for v in tf.global_variables()}
  tf.train.init_from_checkpoint(checkpoint, {v: v for v in sorted(stored & graph_vars)})
  fetch = {"mlm_loss": mlm_loss, "disc_loss": disc_loss, "grad_norm": captured["norm"],
           "lr": captured["lr"],
           **{f"norm_{name}": tf.linalg.global_norm(gs) for name, gs in groups.items()}}
  rows = []
  with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    for step in range(1, steps + 1):
      _, values = session.run([train_op, fetch])
      rows.append({"step": step, **{k: float(v) for k, v in values.items()}})
  with open(out, "w") as f:
    json.dump({"seed": seed, "indexed_slices_at_clip": sparse, "steps": rows}, f)


main()
