"""Writes this directory's Electric fixture by running the OFFICIAL code.

  TF_USE_LEGACY_KERAS=1 python tests/data/official_electric/make_fixture.py \
      /path/to/google-research/electra

Nothing here computes a model: the script builds the official
run_pretraining.PretrainingModel (TF1 graph, tf.compat.v1; the removed
tf.contrib.layers.layer_norm comes from tf_slim, the same implementation),
records what the official functions return, and saves the official variables
with a TF1 Saver.  See README.md for the files it writes.
"""

import json
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
# A tiny Electric: vocab of the first 128 BERT word pieces ([CLS]=101,
# [SEP]=102, [MASK]=103), generator towers of width 12 (0.75 x 16) with an
# embeddings_project from the width-8 embeddings, mask_prob 0.25 (N = 4).
HPARAMS = {"electric_objective": True, "vocab_size": 128, "embedding_size": 8,
           "model_hparam_overrides": {"hidden_size": 16, "num_hidden_layers": 2,
                                      "num_attention_heads": 2},
           "generator_hidden_size": 0.75, "max_seq_length": 16, "mask_prob": 0.25}


def main(official_dir: str) -> None:
  sys.path.insert(0, official_dir)
  import numpy as np
  import tf_slim
  contrib = types.ModuleType("tensorflow.contrib")
  contrib.layers = tf_slim.layers
  sys.modules["tensorflow.contrib"] = contrib
  sys.modules["tensorflow.contrib.layers"] = tf_slim.layers
  import tensorflow.compat.v1 as tf
  tf.disable_v2_behavior()
  # util.training_utils subclasses tf.estimator.SessionRunHook at import.
  tf.estimator = types.SimpleNamespace(SessionRunHook=object)
  import configure_pretraining
  import run_pretraining
  from model import modeling
  from pretrain import pretrain_helpers

  with open(os.path.join(HERE, "vocab.txt"), encoding="utf-8") as f:
    assert len(f.read().splitlines()) == HPARAMS["vocab_size"]

  def official_config(**extra):
    return configure_pretraining.PretrainingConfig(
        "electric_fixture", HERE, vocab_file=os.path.join(HERE, "vocab.txt"),
        **HPARAMS, **extra)

  def variables_of(**extra):
    """[name, shape] of every official variable of a config's graph."""
    with tf.Graph().as_default():
      features = {k: tf.zeros([2, 16], tf.int32) for k in
                  ("input_ids", "input_mask", "segment_ids")}
      run_pretraining.PretrainingModel(official_config(**extra), features, False)
      return [[v.name[:-2], v.shape.as_list()] for v in tf.global_variables()]

  # The recorded intermediate values: the official functions, wrapped.
  seen = {}

  def record(name, fn):
    def wrapped(*args, **kwargs):
      out = fn(*args, **kwargs)
      seen.setdefault(name, []).append(out)
      return out
    return wrapped

  run_pretraining.build_transformer = record(
      "towers", run_pretraining.build_transformer)
  run_pretraining.get_softmax_output = record(
      "softmax", run_pretraining.get_softmax_output)
  pretrain_helpers.mask = record("masked", pretrain_helpers.mask)
  fake = run_pretraining.PretrainingModel._get_fake_data
  run_pretraining.PretrainingModel._get_fake_data = (
      lambda self, *a: record("fake", fake)(self, *a))
  sigmoid_loss = tf.nn.sigmoid_cross_entropy_with_logits
  tf.nn.sigmoid_cross_entropy_with_logits = lambda **kwargs: (
      seen.setdefault("disc_logits", []).append(kwargs["logits"])
      or sigmoid_loss(**kwargs))

  rng = np.random.RandomState(13)
  ids = rng.randint(104, 128, size=(3, 16)).astype(np.int32)
  mask = np.ones_like(ids)
  segments = np.zeros_like(ids)
  ids[:, 0] = 101
  ids[0, 7], ids[0, 15], segments[0, 8:] = 102, 102, 1
  ids[1, 10], mask[1, 11:], ids[1, 11:] = 102, 0, 0
  ids[2, 15] = 102
  with tf.Graph().as_default():
    tf.set_random_seed(1)
    features = {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
                "segment_ids": tf.constant(segments)}
    config = official_config()
    model = run_pretraining.PretrainingModel(config, features, False)
    disc_config = run_pretraining.training_utils.get_bert_config(config)
    # BertModel's input_embeddings / input_reprs options on the discriminator.
    extra_rng = np.random.RandomState(5)
    input_embeddings = extra_rng.normal(size=(3, 16, 8)).astype(np.float32)
    reprs_e = extra_rng.normal(size=(3, 16, 8)).astype(np.float32)
    reprs_h = extra_rng.normal(size=(3, 16, 16)).astype(np.float32)
    with tf.variable_scope(tf.get_variable_scope(), reuse=True):
      option_models = {
          name: modeling.BertModel(
              bert_config=disc_config, is_training=False, input_ids=features["input_ids"],
              input_mask=features["input_mask"], token_type_ids=features["segment_ids"],
              use_one_hot_embeddings=False, scope="electra", embedding_size=8, **kwargs)
          for name, kwargs in (
              ("input_embeddings", {"input_embeddings": tf.constant(input_embeddings)}),
              ("input_reprs_e", {"input_reprs": tf.constant(reprs_e)}),
              ("input_reprs_h", {"input_reprs": tf.constant(reprs_h)}))}
    ltr, rtl, disc = seen["towers"]
    cloze, mlm = seen["softmax"]
    masked, = seen["masked"]
    faked, = seen["fake"]
    fetches = {
        "masked_input_ids": masked.input_ids,
        "masked_lm_positions": masked.masked_lm_positions,
        "masked_lm_ids": masked.masked_lm_ids,
        "masked_lm_weights": masked.masked_lm_weights,
        "ltr_sequence_output": ltr.get_sequence_output(),
        "rtl_sequence_output": rtl.get_sequence_output(),
        "ltr_attention_probs": tf.stack(ltr.attn_maps),
        "rtl_attention_probs": tf.stack(rtl.attn_maps),
        "cloze_logits": cloze.logits, "cloze_weights": cloze.weights,
        "cloze_loss": cloze.loss, "cloze_per_example_loss": cloze.per_example_loss,
        "mlm_logits": mlm.logits, "mlm_loss": mlm.loss,
        "mlm_per_example_loss": mlm.per_example_loss, "mlm_preds": mlm.preds,
        "sampled_ids": tf.argmax(faked.sampled_tokens, -1, output_type=tf.int32),
        "discriminator_input_ids": faked.inputs.input_ids,
        "discriminator_labels": faked.is_fake_tokens,
        "disc_sequence_output": disc.get_sequence_output(),
        "disc_logits": seen["disc_logits"][0],
        "total_loss": model.total_loss,
    }
    # metric_fn's inputs, in the official order of eval_fn_inputs.
    eval_inputs = dict(zip(
        ("input_ids", "masked_lm_preds", "mlm_loss", "masked_lm_ids",
         "masked_lm_weights", "input_mask", "disc_loss", "disc_labels",
         "disc_probs", "disc_preds", "sampled_tokids"), model.eval_metrics[1]))
    for key in ("disc_loss", "disc_probs", "disc_preds"):
      fetches[key] = eval_inputs[key]
    for name, option_model in option_models.items():
      fetches[f"{name}_sequence_output"] = option_model.get_sequence_output()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      values = sess.run(fetches)
      tf.train.Saver(tf.global_variables()).save(
          sess, os.path.join(HERE, "model.ckpt"), write_meta_graph=False,
          write_state=False)
  values.update(input_ids=ids, input_mask=mask, segment_ids=segments,
                input_embeddings=input_embeddings, input_reprs_e=reprs_e,
                input_reprs_h=reprs_h)
  np.savez_compressed(os.path.join(HERE, "fixture.npz"), **values)
  with open(os.path.join(HERE, "variables.json"), "w", encoding="utf-8") as f:
    json.dump({"hparams": HPARAMS, "variables": variables_of(),
               "untied_generator_embeddings": variables_of(
                   untied_generator_embeddings=True)}, f, indent=1)


if __name__ == "__main__":
  main(sys.argv[1])
