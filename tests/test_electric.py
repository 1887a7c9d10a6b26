"""Electric (electric_objective, two_tower_generator) and the official
BertModel options it uses, against the official code and NumPy.

tests/data/official_electric holds a checkpoint and values written by the
official run_pretraining.py / modeling.py (see its README): variable names,
towers, cloze logits and losses, Electric's discriminator, and BertModel's
input_embeddings / input_reprs options.
"""

import json
import pathlib

import numpy as np
import pytest
import scipy.special
import tensorflow as tf

from electra_tf import checkpoint_conversion, checkpoints, flops, tokenization
from electra_tf.errors import ConfigError
from electra_tf.modeling import pretrainer as pt
from electra_tf.modeling.encoder import build_discriminator_encoder
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.model import build_model
from tests.conftest import run_command, run_script
from tests.test_training import TINY_HPARAMS, _pretrain_args
from tests.test_training import tiny_data  # noqa: F401  (a fixture)

DATA = pathlib.Path(__file__).resolve().parent / "data" / "official_electric"
TOL = dict(atol=1e-5, rtol=1e-5)
META = json.loads((DATA / "variables.json").read_text())
SPECIAL = tokenization.SpecialIds(pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
TINY = {"vocab_size": 60, "embedding_size": 4, "generator_hidden_size": 0.5,
        "max_seq_length": 12, "electric_objective": True, "mask_prob": 0.2,
        "model_hparam_overrides": {"hidden_size": 16, "num_hidden_layers": 1,
                                   "num_attention_heads": 2}}


def official_model():
  special = tokenization.special_ids(tokenization.load_vocab(DATA / "vocab.txt"),
                                     str(DATA / "vocab.txt"))
  model = build_model(PretrainingConfig.create(META["hparams"]), special)
  checkpoints.restore_from_checkpoint(model, str(DATA / "model.ckpt"), allow_unused=False)
  return model


@pytest.fixture(scope="module")
def official():
  return official_model(), dict(np.load(DATA / "fixture.npz"))


def masked_batch(a):
  return {"input_ids": a["masked_input_ids"], "input_mask": a["input_mask"],
          "segment_ids": a["segment_ids"], "masked_lm_positions": a["masked_lm_positions"],
          "masked_lm_ids": a["masked_lm_ids"], "masked_lm_weights": a["masked_lm_weights"]}


def tiny_batch():
  """B=2, S=12, N=2 with [CLS]=2 / [SEP]=3, padding and an unused slot."""
  rng = np.random.RandomState(0)
  ids = rng.randint(5, 60, size=(2, 12)).astype(np.int32)
  ids[:, 0], ids[0, 11], ids[1, 7] = 2, 3, 3
  mask = np.ones_like(ids)
  ids[1, 8:], mask[1, 8:] = 0, 0
  positions = np.array([[3, 6], [2, 0]], np.int32)
  weights = np.array([[1, 1], [1, 0]], np.float32)
  original = np.take_along_axis(ids, positions, 1) * weights.astype(np.int32)
  masked = ids.copy()
  masked[0, 3] = masked[1, 2] = 4
  return ids, {"input_ids": masked, "input_mask": mask, "segment_ids": np.zeros_like(ids),
               "masked_lm_positions": positions, "masked_lm_ids": original,
               "masked_lm_weights": weights}


# ------------------------------------------------------------- official names
@pytest.mark.parametrize("variant", ["variables", "untied_generator_embeddings"])
def test_variable_names_and_shapes_are_the_official_ones(variant):
  extra = {"untied_generator_embeddings": True} if variant != "variables" else {}
  model = build_model(PretrainingConfig.create({**META["hparams"], **extra}))
  ours = {checkpoints.official_name(v): v.shape.as_list() for v in model.variables}
  assert ours == {name: shape for name, shape in META[variant]}


def test_convert_round_trip_gives_back_the_official_checkpoint(tmp_path):
  config = PretrainingConfig.create(META["hparams"])
  project = checkpoint_conversion.official_to_project(str(DATA / "model.ckpt"), config,
                                                   str(tmp_path / "project"))
  back = checkpoint_conversion.project_to_official(project, config, str(tmp_path / "official"))
  original, again = tf.train.load_checkpoint(str(DATA / "model.ckpt")), \
      tf.train.load_checkpoint(back)
  names = original.get_variable_to_shape_map()
  assert names == again.get_variable_to_shape_map() and len(names) == 116
  for name in names:
    np.testing.assert_array_equal(original.get_tensor(name), again.get_tensor(name),
                                  err_msg=name)


def test_discriminator_alone_loads_from_an_electric_checkpoint(official):
  """Fine-tuning reads the `electra` encoder; the towers are left out."""
  model, _ = official
  config = PretrainingConfig.create(META["hparams"])
  encoder = build_discriminator_encoder(config.encoder_config(),
                                        config.effective_embedding_size)
  unused = checkpoints.restore_from_checkpoint(encoder, str(DATA / "model.ckpt"))
  assert {name.split("/")[0] for name in unused} == {
      "generator_ltr", "generator_rtl", "cloze_predictions", "discriminator_predictions"}
  for ours, theirs in zip(encoder.variables, model.discriminator.variables):
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


# --------------------------------------------------- official values, Electric
def test_towers_and_cloze_outputs_match_official(official):
  model, a = official
  ids, mask, segments = a["input_ids"], a["input_mask"], a["segment_ids"]
  for tower, encoder in (("ltr", model.generator_ltr), ("rtl", model.generator_rtl)):
    outputs = encoder(ids, mask, segments, training=False)
    np.testing.assert_allclose(outputs["sequence_output"], a[f"{tower}_sequence_output"],
                               **TOL)
    np.testing.assert_allclose(np.stack(outputs["attention_probs"]),
                               a[f"{tower}_attention_probs"], **TOL)
  cloze = model.cloze_logits(ids, mask, segments, training=False)
  np.testing.assert_allclose(cloze, a["cloze_logits"], **TOL)
  np.testing.assert_array_equal(model.cloze_weights(ids, mask), a["cloze_weights"])
  loss, per_position, _ = pt.masked_lm_loss(cloze, ids, a["cloze_weights"])
  np.testing.assert_allclose(per_position, a["cloze_per_example_loss"], **TOL)
  np.testing.assert_allclose(loss, a["cloze_loss"], rtol=1e-6)
  batch = masked_batch(a)
  mlm_logits = model.mlm_logits(batch, training=False)
  np.testing.assert_allclose(mlm_logits, a["mlm_logits"], **TOL)
  mlm_loss, mlm_per_slot, preds = pt.masked_lm_loss(
      mlm_logits, a["masked_lm_ids"], a["masked_lm_weights"])
  np.testing.assert_allclose(mlm_per_slot, a["mlm_per_example_loss"], **TOL)
  np.testing.assert_allclose(mlm_loss, a["mlm_loss"], rtol=1e-6)
  np.testing.assert_array_equal(preds, a["mlm_preds"])
  out = model(batch, training=False, sample_seed=tf.constant([1, 2]))
  np.testing.assert_allclose(out["cloze_loss"], a["cloze_loss"], rtol=1e-6)
  np.testing.assert_allclose(out["mlm_loss"], a["mlm_loss"], rtol=1e-6)


def test_electric_discriminator_matches_official(official):
  model, a = official
  corrupted, labels = pt.corrupt_inputs(
      a["masked_input_ids"], a["masked_lm_positions"], a["masked_lm_ids"],
      a["sampled_ids"], electric=True)
  np.testing.assert_array_equal(corrupted, a["discriminator_input_ids"])
  np.testing.assert_array_equal(labels, a["discriminator_labels"])
  head = model.discriminator_logits(corrupted, a["input_mask"], a["segment_ids"],
                                    training=False)
  cloze = model.cloze_logits(a["input_ids"], a["input_mask"], a["segment_ids"],
                             training=False)
  logits = pt.electric_logits(head, cloze, corrupted, META["hparams"]["mask_prob"])
  np.testing.assert_allclose(logits, a["disc_logits"], **TOL)
  disc = pt.discriminator_loss(logits, labels, a["input_mask"])
  np.testing.assert_allclose(disc["probs"], a["disc_probs"], **TOL)
  np.testing.assert_array_equal(disc["preds"], a["disc_preds"])
  np.testing.assert_allclose(disc["per_example_loss"], a["disc_loss"], **TOL)
  cloze_loss = pt.masked_lm_loss(cloze, a["input_ids"], a["cloze_weights"])[0]
  np.testing.assert_allclose(cloze_loss + 50.0 * disc["loss"], a["total_loss"], rtol=1e-6)


# ----------------------------------------------- official BertModel options
def test_encoder_input_embeddings_and_input_reprs_match_official(official):
  model, a = official
  encoder = model.discriminator
  args = (None, a["input_mask"], a["segment_ids"])
  for name, kwargs in (("input_embeddings", {"input_embeddings": a["input_embeddings"]}),
                       ("input_reprs_e", {"input_reprs": a["input_reprs_e"]}),
                       ("input_reprs_h", {"input_reprs": a["input_reprs_h"]})):
    outputs = encoder(*args, training=False, **kwargs)
    np.testing.assert_allclose(outputs["sequence_output"], a[f"{name}_sequence_output"],
                               **TOL, err_msg=name)
  # NumPy: input_reprs of width E go through embeddings_project, width H not.
  project = encoder.embeddings_project
  outputs = encoder(*args, training=False, input_reprs=a["input_reprs_e"])
  np.testing.assert_allclose(
      outputs["embedding_output"],
      a["input_reprs_e"] @ project.kernel.numpy() + project.bias.numpy(), **TOL)
  outputs = encoder(*args, training=False, input_reprs=a["input_reprs_h"])
  np.testing.assert_array_equal(outputs["embedding_output"], a["input_reprs_h"])
  # NumPy: input_embeddings replace the word lookup only.
  table = encoder.embeddings
  summed = (a["input_embeddings"] + table.token_type_embeddings.numpy()[a["segment_ids"]]
            + table.position_embeddings.numpy()[:16])
  mean, var = summed.mean(-1, keepdims=True), summed.var(-1, keepdims=True)
  expected = ((summed - mean) / np.sqrt(var + 1e-12) * table.layer_norm.gamma.numpy()
              + table.layer_norm.beta.numpy())
  outputs = encoder(*args, training=False, input_embeddings=a["input_embeddings"])
  np.testing.assert_allclose(outputs["embeddings"], expected, atol=1e-5)


def test_causal_attention_against_numpy(official):
  model, a = official
  mask = a["input_mask"].astype(np.float32)
  lower = np.tril(np.ones((16, 16), np.float32))
  for encoder, band in ((model.generator_ltr, lower), (model.generator_rtl, lower.T)):
    probs = np.stack(encoder(a["input_ids"], a["input_mask"], a["segment_ids"],
                             training=False)["attention_probs"])  # [L, B, heads, S, S]
    allowed = np.broadcast_to((mask[:, None, None, :] * band)[None], probs.shape)
    # Where a query may attend somewhere, the other keys get nothing (a query
    # with no allowed key, e.g. rtl at padding, spreads over all, as official).
    some = allowed.any(-1, keepdims=True)
    assert probs[(allowed == 0) & some].max() < 1e-30
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
  # An ltr tower's position t does not depend on the tokens after t.
  ids = a["input_ids"].copy()
  ids[:, 9:] = np.where(a["input_mask"][:, 9:] > 0, 104, 0)
  before = model.generator_ltr(a["input_ids"], a["input_mask"], a["segment_ids"],
                               training=False)["sequence_output"]
  after = model.generator_ltr(ids, a["input_mask"], a["segment_ids"],
                              training=False)["sequence_output"]
  np.testing.assert_allclose(before[:, :9], after[:, :9], atol=1e-6)
  with pytest.raises(ValueError, match="at most one of ltr / rtl"):
    type(model.discriminator)(model.discriminator.config, ltr=True, rtl=True)


# ------------------------------------------------- losses against NumPy
def test_electric_losses_against_numpy():
  model = build_model(PretrainingConfig.create({**TINY, "gen_weight": 2.0,
                                                "disc_weight": 30.0}), SPECIAL)
  original, batch = tiny_batch()
  out = {k: v.numpy() for k, v in
         model(batch, training=False, sample_seed=tf.constant([5, 6])).items()}
  cloze = model.cloze_logits(original, batch["input_mask"], batch["segment_ids"]).numpy()
  # Cloze loss over the real tokens other than [CLS] / [SEP].
  weights = ((batch["input_mask"] > 0) & (original > 4)).astype(np.float64)
  log_probs = scipy.special.log_softmax(cloze.astype(np.float64), axis=-1)
  ce = -np.take_along_axis(log_probs, original[..., None], -1)[..., 0]
  cloze_loss = (weights * ce).sum() / (weights.sum() + 1e-6)
  np.testing.assert_allclose(out["cloze_loss"], cloze_loss, rtol=1e-5)
  np.testing.assert_allclose(out["mlm_logits"],
                             np.take_along_axis(cloze, batch["masked_lm_positions"][..., None], 1),
                             atol=1e-6)
  # Every sampled (used) position is labelled fake.
  labels = np.zeros_like(original)
  labels[0, [3, 6]] = labels[1, 2] = 1
  np.testing.assert_array_equal(out["disc_labels"], labels)
  corrupted = out["corrupted_ids"]
  head = model.discriminator_logits(corrupted, batch["input_mask"],
                                    batch["segment_ids"]).numpy()
  log_q = np.take_along_axis(log_probs, corrupted[..., None], -1)[..., 0]
  x = head + log_q + np.log(0.2 / 0.8)
  np.testing.assert_allclose(out["disc_logits"], x, atol=1e-5)
  mask = batch["input_mask"].astype(np.float64)
  losses = (np.maximum(x, 0) - x * labels + np.log1p(np.exp(-np.abs(x)))) * mask
  disc_loss = losses.sum() / (mask.sum() + 1e-6)
  np.testing.assert_allclose(out["disc_loss"], disc_loss, rtol=1e-5)
  np.testing.assert_allclose(out["disc_per_example_loss"],
                             losses.sum(1) / (mask.sum(1) + 1e-6), rtol=1e-5)
  np.testing.assert_allclose(out["total_loss"], 2.0 * cloze_loss + 30.0 * disc_loss,
                             rtol=1e-5)
  # Global denominators: [masked_lm_weights, input_mask, cloze weights].
  sums = model.loss_weight_sums(batch).numpy()
  np.testing.assert_array_equal(sums, [3.0, 20.0, weights.sum()])
  scaled = model(batch, training=False, sample_seed=tf.constant([5, 6]),
                 loss_denominators=sums * 2)
  np.testing.assert_allclose(scaled["cloze_loss"], cloze_loss / 2, rtol=1e-5)


def test_log_q_carries_no_gradient_to_the_generator():
  model = build_model(PretrainingConfig.create(TINY), SPECIAL)
  _, batch = tiny_batch()
  with tf.GradientTape(persistent=True) as tape:
    out = model(batch, training=True, sample_seed=tf.constant([1, 1]))
  # The towers' and the cloze head's own variables (not the shared embeddings).
  towers = [v for v in model.trainable_variables
            if v.name.startswith(("generator_ltr/", "generator_rtl/", "cloze_predictions/"))]
  assert len(towers) == 2 * 18 + 5
  assert all(g is None for g in tape.gradient(out["disc_loss"], towers))
  assert all(g is not None for g in tape.gradient(out["cloze_loss"], towers))


def test_two_tower_generator_with_the_electra_objective():
  model = build_model(PretrainingConfig.create(
      {**TINY, "electric_objective": False, "two_tower_generator": True,
       "temperature": 0.01}), SPECIAL)
  original, batch = tiny_batch()
  out = model(batch, training=False, sample_seed=tf.constant([3, 3]))
  # ELECTRA's rule: a sample equal to the original is real; raw head logits.
  used = batch["masked_lm_weights"] > 0
  expected = np.zeros_like(original)
  for b, n in zip(*np.nonzero(used)):
    position = batch["masked_lm_positions"][b, n]
    expected[b, position] = int(out["sampled_ids"].numpy()[b, n] != original[b, position])
  np.testing.assert_array_equal(out["disc_labels"], expected)
  head = model.discriminator_logits(out["corrupted_ids"], batch["input_mask"],
                                    batch["segment_ids"])
  np.testing.assert_allclose(out["disc_logits"], head, atol=1e-6)
  np.testing.assert_allclose(out["total_loss"], out["cloze_loss"] + 50 * out["disc_loss"],
                             rtol=1e-6)
  with pytest.raises(ValueError, match="cloze loss needs special_ids"):
    build_model(PretrainingConfig.create(TINY))(batch)


# ------------------------------------------------------- config and FLOPs
def test_config_follows_the_official_resolution():
  config = PretrainingConfig.create({"electric_objective": True})
  assert config.two_tower_generator and config.has_discriminator
  assert config.architecture()["two_tower_generator"] is True
  assert "two_tower_generator" not in PretrainingConfig.create().architecture()
  with pytest.raises(ConfigError, match="two_tower_generator=false"):
    PretrainingConfig.create({"electric_objective": True, "two_tower_generator": False})


def test_flops_of_electric():
  config = PretrainingConfig.create({"electric_objective": True})
  tower, discriminator = flops.model_sizes(config)
  assert (tower.hidden_size, tower.e, discriminator.hidden_size) == (64, 128, 256)
  t = flops.TransformerSize(2, 1, 3, vocab_size=5, embedding_size=2)
  # Cloze head per token, input 2h=4 -> e=2: dense 16 + bias 2 + gelu 16 +
  # layer norm 10, logits 20, softmax 25, target pick 10 = 99, at all 3 tokens.
  assert flops.mlm_head_flops(t, 1.0, input_size=4) == 99 * 3
  expected = (2 * (2 * (12 * flops.block_flops(tower) + flops.input_embedding_flops(tower))
                   + flops.mlm_head_flops(tower, 1.0, input_size=128))
              + flops.encoder_train_flops(discriminator, False) + 2 * 2 * 128)
  assert flops.flops_per_seq(config) == pytest.approx(expected, rel=1e-12)
  electra = flops.flops_per_seq(PretrainingConfig.create({}))
  assert electra < flops.flops_per_seq(config) < 2 * electra


# ------------------------------------------------------------- end to end
@pytest.mark.slow
def test_electric_pretrains_evaluates_and_converts(tiny_data, tmp_path):
  """A few steps of run_pretraining.py with electric_objective, its eval
  metrics, then `convert --to_official` and back into a fresh model."""
  model_dir = tmp_path / "model"
  hparams = {**TINY_HPARAMS, "electric_objective": True, "num_train_steps": 4,
             "save_checkpoints_steps": 4, "num_eval_steps": 2}
  # The commands in this process, through their entry points.
  run = run_script(_pretrain_args(tiny_data, model_dir, hparams, ["--do_train", "--do_eval"]))
  assert run.returncode == 0, run.stderr[-3000:]
  steps = [line for line in run.stdout.splitlines() if line.startswith("step ")]
  assert len(steps) == 4 and all("cloze_loss" in line and "disc_loss" in line
                                 for line in steps)
  results = json.loads((model_dir / "results" / "unsup_results.json").read_text())
  assert results["global_step"] == 4
  for key in ("masked_lm_accuracy", "masked_lm_loss", "sampled_masked_lm_accuracy",
              "disc_loss", "disc_auc", "disc_accuracy", "disc_precision", "disc_recall"):
    assert np.isfinite(results[key]), key
  # An untrained cloze model over 30522 words: loss near log(30522) = 10.3.
  assert 8.0 < results["masked_lm_loss"] < 12.0
  record = json.loads((model_dir / "electra_config.json").read_text())
  assert record["electric_objective"] and record["two_tower_generator"]

  official_dir = tmp_path / "official"
  conversion = run_command("electra_tf.commands.convert", [
      "--to_official", f"--checkpoint={model_dir}", "--hparams=" + json.dumps(hparams),
      f"--output_dir={official_dir}"], "electra_tf.convert")
  assert conversion.returncode == 0, conversion.stderr[-3000:]
  config = PretrainingConfig.create(hparams)
  names = set(tf.train.load_checkpoint(str(official_dir / "model.ckpt"))
              .get_variable_to_shape_map())
  assert {name.split("/")[0] for name in names} == {
      "electra", "generator_ltr", "generator_rtl", "cloze_predictions",
      "discriminator_predictions"}
  fresh = build_model(config)
  checkpoints.restore_from_checkpoint(fresh, str(official_dir), allow_unused=False)
  trained = build_model(config)
  checkpoints.restore_from_checkpoint(trained, str(model_dir))
  for ours, theirs in zip(trained.variables, fresh.variables):
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.name)
