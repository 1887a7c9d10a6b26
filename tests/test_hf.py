"""Hugging Face interop (electra_tf/hf.py, python -m electra_tf.convert --to_hf /
--from_hf): transformers' names and shapes, bit-exact round trips, logit parity
with transformers' own outputs (a committed fixture, tests/data/hf_official_debug,
made by its make_fixture.py), strict imports, continued pre-training.

The optional last test loads the export in transformers itself; it runs where
torch and transformers import (neither is a requirement) and skips otherwise.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import checkpoint_conversion, checkpoints, errors, hf
from electra_tf.errors import DataError
from electra_tf.modeling.encoder import build_discriminator_encoder
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.model import build_model
from tests.conftest import make_pretraining_data_dir, run_command, run_script

REPO = pathlib.Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "data" / "hf_official_debug"
TINY = {"model_size": "small", "vocab_size": 30522, "embedding_size": 16,
        "model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 1,
                                   "num_attention_heads": 2},
        "generator_hidden_size": 0.5, "max_seq_length": 32}


def _hparams(official_debug_fixture):
  return json.loads((official_debug_fixture / "config.json").read_text())["hparams"]


def _values(model):
  return {name: v.numpy() for name, v in checkpoints.named_variables(model).items()}


@pytest.fixture(scope="module")
def exported(tmp_path_factory, official_debug_fixture, bert_vocab):
  """official_debug exported to transformers' layout."""
  out = tmp_path_factory.mktemp("hf") / "export"
  config = PretrainingConfig.create(_hparams(official_debug_fixture))
  written = checkpoint_conversion.project_to_hf(str(official_debug_fixture / "model.ckpt"), config,
                                             str(bert_vocab), True, str(out), command="make it")
  assert written == [str(out / "discriminator"), str(out / "generator")]
  return out, config


def test_exported_names_and_shapes_are_transformers(exported):
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
  out, _ = exported
  names = json.loads((FIXTURE / "names.json").read_text())
  for folder, model in (("discriminator", "ElectraForPreTraining"),
                        ("generator", "ElectraForMaskedLM")):
    tensors = load_file(str(out / folder / "model.safetensors"))
    assert {k: list(v.shape) for k, v in tensors.items()} == names[model]
    assert all(v.dtype == np.float32 for v in tensors.values())
    config = json.loads((out / folder / "config.json").read_text())
    assert config["architectures"] == [model] and config["hidden_act"] == "gelu"
    assert config["layer_norm_eps"] == 1e-12 and config["embedding_size"] == 16
  disc = load_file(str(out / "discriminator" / "model.safetensors"))
  gen = load_file(str(out / "generator" / "model.safetensors"))
  # The shared embedding table is written into both; the generator's output
  # layer is that table.
  for key in ("electra.embeddings.word_embeddings.weight",
              "electra.embeddings.position_embeddings.weight"):
    np.testing.assert_array_equal(disc[key], gen[key])
  np.testing.assert_array_equal(gen["generator_lm_head.weight"],
                                gen["electra.embeddings.word_embeddings.weight"])


def test_tokenizer_files_and_model_card(exported, bert_vocab):
  out, _ = exported
  for folder in ("discriminator", "generator"):
    assert (out / folder / "vocab.txt").read_bytes() == bert_vocab.read_bytes()
    tok = json.loads((out / folder / "tokenizer_config.json").read_text())
    assert tok["do_lower_case"] is True and tok["tokenizer_class"] == "ElectraTokenizer"
    special = json.loads((out / folder / "special_tokens_map.json").read_text())
    assert special == {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                       "cls_token": "[CLS]", "mask_token": "[MASK]"}

  # The official debug checkpoint is in the official TF1 layout, as Google's
  # release: no training record, so the card states only what it shows.
  for folder, architecture in (
      ("discriminator", "2 layers, hidden 64, heads 4, feed-forward 256, embeddings 16, "
                        "positions 512"),
      ("generator", "2 layers, hidden 32, heads 1, feed-forward 128, embeddings 16, "
                    "positions 512")):
    card = (out / folder / "README.md").read_text()
    assert card.startswith(f"# ELECTRA {folder} (Electra")
    assert "which has no training record beside it" in card
    assert f"- architecture: {architecture}\n" in card
    assert ("- vocab: 30522 WordPiece entries, lower-cased (vocab.txt), as the conversion "
            "was told\n") in card
    assert card.endswith("```bash\nmake it\n```\n")
    for unknown in ("electra-tf (a TensorFlow", "pre-trained with", "train_batch_size",
                    "num_train_steps", "learning_rate", "pretrain_tfrecords", "checkpoint: step",
                    "Hyperparameters", "evaluation"):
      assert unknown not in card, unknown


def test_logits_match_transformers_fixture(exported, official_debug_fixture):
  """Our model on the official inputs against transformers on our export."""
  _, config = exported
  model = build_model(config)
  checkpoints.restore_from_checkpoint(model, str(official_debug_fixture / "model.ckpt"))
  a = np.load(official_debug_fixture / "fixture.npz")
  theirs = np.load(FIXTURE / "fixture.npz")
  ours_disc = model.discriminator_logits(a["discriminator_input_ids"], a["input_mask"],
                                         a["segment_ids"], training=False).numpy()
  np.testing.assert_allclose(ours_disc, theirs["disc_logits"], atol=2e-5)
  batch = {k: tf.constant(a[k]) for k in ("input_mask", "segment_ids", "masked_lm_positions")}
  batch["input_ids"] = tf.constant(a["generator_input_ids"])
  ours_gen = model.mlm_logits(batch, training=False).numpy()  # [4, 4, V]
  np.testing.assert_allclose(ours_gen[..., :1024], theirs["gen_logits_head"], atol=2e-5)
  lse = tf.reduce_logsumexp(ours_gen, axis=-1).numpy()
  np.testing.assert_allclose(lse, theirs["gen_logsumexp"], atol=2e-5)


def _round_trip(tmp_path, model, config, vocab):
  checkpoints.save_project_checkpoint(model, str(tmp_path / "ckpt"))
  checkpoint_conversion.project_to_hf(str(tmp_path / "ckpt"), config, str(vocab), True,
                                      str(tmp_path / "hf"))
  prefix = checkpoint_conversion.hf_to_project(
      [str(tmp_path / "hf" / "discriminator"), str(tmp_path / "hf" / "generator")],
      str(tmp_path / "back"))
  hparams = json.loads((tmp_path / "back" / "hparams.json").read_text())
  again = build_model(PretrainingConfig.create(hparams))
  checkpoints.restore_from_checkpoint(again, prefix)
  return _values(again)


def test_round_trip_is_bit_exact_official_debug(official_debug_fixture, bert_vocab, tmp_path):
  config = PretrainingConfig.create(_hparams(official_debug_fixture))
  model = build_model(config)
  checkpoints.restore_from_checkpoint(model, str(official_debug_fixture / "model.ckpt"))
  before = _values(model)
  after = _round_trip(tmp_path, model, config, bert_vocab)
  assert sorted(after) == sorted(before)
  for name in before:
    np.testing.assert_array_equal(after[name], before[name], err_msg=name)
  assert (tmp_path / "back" / "vocab.txt").read_bytes() == bert_vocab.read_bytes()


def test_round_trip_is_bit_exact_tiny(bert_vocab, tmp_path):
  tf.random.set_seed(3)
  config = PretrainingConfig.create(TINY)
  model = build_model(config)
  before = _values(model)
  after = _round_trip(tmp_path, model, config, bert_vocab)
  for name in before:
    np.testing.assert_array_equal(after[name], before[name], err_msg=name)


def test_discriminator_alone_is_a_finetuning_start_not_a_pretraining_one(
    exported, official_debug_fixture, tmp_path):
  out, config = exported
  prefix = checkpoint_conversion.hf_to_project([str(out / "discriminator")],
                                               str(tmp_path / "disc"))
  encoder = build_discriminator_encoder(config.encoder_config(), config.effective_embedding_size)
  checkpoints.restore_from_checkpoint(encoder, prefix)  # strict: every encoder variable
  original = build_model(config)
  checkpoints.restore_from_checkpoint(original, str(official_debug_fixture / "model.ckpt"))
  ours = _values(original)
  for name, value in _values(encoder).items():
    np.testing.assert_array_equal(value, ours[name], err_msg=name)
  with pytest.raises(errors.CheckpointError, match=r"lacks model variable generator"):
    checkpoints.check_restorable(build_model(config), prefix, allow_unused=False)


def _copy_folder(src, dst, **changes):
  from safetensors.numpy import load_file, save_file  # pylint: disable=g-import-not-at-top
  dst.mkdir(parents=True)
  for name in os.listdir(src):
    if name != "model.safetensors":
      (dst / name).write_bytes((src / name).read_bytes())
  tensors = load_file(str(src / "model.safetensors"))
  for key, value in changes.items():
    if value is None:
      del tensors[key]
    else:
      tensors[key] = value
  save_file(tensors, str(dst / "model.safetensors"))


def test_bad_folders_are_one_line_errors_and_write_nothing(exported, tmp_path):
  out, _ = exported
  disc = out / "discriminator"
  key = "electra.encoder.layer.0.attention.self.query.weight"
  cases = {
      "missing": ({key: None}, f"missing tensor {key}"),
      "unknown": ({"electra.pooler.weight": np.zeros([2], np.float32)},
                  "unknown tensor electra.pooler.weight"),
      "shape": ({key: np.zeros([64, 63], np.float32)},
                f"tensor {key} has shape [64, 63], the config needs [64, 64]"),
  }
  for name, (changes, message) in cases.items():
    _copy_folder(disc, tmp_path / name, **changes)
    with pytest.raises(DataError, match=message.replace("[", r"\[").replace("]", r"\]")):
      checkpoint_conversion.hf_to_project([str(tmp_path / name), str(out / "generator")],
                                       str(tmp_path / f"out_{name}"))
    assert not (tmp_path / f"out_{name}").exists()
  torch_only = tmp_path / "torch_only"
  torch_only.mkdir()
  (torch_only / "config.json").write_text((disc / "config.json").read_text())
  (torch_only / "pytorch_model.bin").write_bytes(b"not read")
  with pytest.raises(DataError, match="holds pytorch_model.bin, which only torch can read; "
                                      r"convert it once .*from transformers import "
                                      "ElectraForPreTraining as M; M.from_pretrained"):
    checkpoint_conversion.hf_to_project([str(torch_only)], str(tmp_path / "out_torch"))
  assert not (tmp_path / "out_torch").exists()


def _card_hparams(text):
  return json.loads(text.split("```json\n", 1)[1].split("```", 1)[0])


@pytest.mark.slow
def test_model_card_states_the_training_run(bert_vocab, corpus_dir, tmp_path):
  """Two real pre-training runs (2 steps, then resumed to 3 with another
  num_train_steps): the card of run_pretraining's --export_hf and that of
  convert --to_hf on the model_dir both state those runs, from the job's
  training record, and not the convert command's defaults."""
  from electra_tf.pretrain import job as job_lib  # pylint: disable=g-import-not-at-top
  data_dir = make_pretraining_data_dir(tmp_path / "data", corpus_dir, bert_vocab,
                                       num_lines=40, num_out_files=1)
  trained = dict(TINY, train_batch_size=4, num_warmup_steps=1, learning_rate=1e-3,
                 save_checkpoints_steps=1, iterations_per_loop=1, log_every=1)
  configs = []
  for steps, export, command in ((2, "hf_first", "python run_pretraining.py --first"),
                                 (3, "hf_second", "python run_pretraining.py --second")):
    configs.append(PretrainingConfig.create(dict(trained, num_train_steps=steps),
                                            data_dir=str(data_dir), model_name="card"))
    job_lib.run(configs[-1], strategy_name="one_device", export_hf=str(tmp_path / export),
                command=command)
  model_dir = configs[-1].model_dir
  runs = json.loads((pathlib.Path(model_dir) / "training_runs.json").read_text())["runs"]
  assert [(r["from_step"], r["command"], r["hparams"]["num_train_steps"]) for r in runs] == [
      (0, "python run_pretraining.py --first", 2), (2, "python run_pretraining.py --second", 3)]
  # convert --to_hf as the README writes it: --hparams names the model only,
  # the batch, steps and learning rate are the command's defaults.
  checkpoint_conversion.project_to_hf(
      model_dir, PretrainingConfig.create(TINY), str(bert_vocab), True,
      str(tmp_path / "hf_convert"), command="python -m electra_tf.convert x")
  cards = {name: (tmp_path / name / "discriminator" / "README.md").read_text()
           for name in ("hf_first", "hf_second", "hf_convert")}
  first = cards["hf_first"]
  assert "- checkpoint: step 2\n" in first and "- num_train_steps: 2\n" in first
  assert "resumed" not in first and "--second" not in first
  for name in ("hf_second", "hf_convert"):
    card = cards[name]
    assert card.startswith("# ELECTRA discriminator (ElectraForPreTraining), pre-trained with "
                           "electra-tf\n"), name
    for line in ("- checkpoint: step 3", "- train_batch_size: 4", "- max_seq_length: 32",
                 "- num_train_steps: 3", "- learning_rate: 0.001", "- num_warmup_steps: 1",
                 "- mask_prob: 0.15", f"- pretrain_tfrecords: {configs[-1].pretrain_tfrecords}",
                 "- resumed at step 2 with num_train_steps 2 -> 3",
                 "- architecture: 1 layers, hidden 32, heads 2, feed-forward 128, "
                 "embeddings 16, positions 512",
                 "python run_pretraining.py --first\npython run_pretraining.py --second"):
      assert line + "\n" in card, (name, line)
    assert _card_hparams(card) == json.loads(json.dumps(hf.card_hparams(configs[-1])))
  # The same card both ways, but for the command that wrote the folders.
  assert (cards["hf_convert"].replace("python -m electra_tf.convert x\n", "")
          == cards["hf_second"])
  # A casing that contradicts the record is refused; nothing is written.
  with pytest.raises(ValueError, match=r"--do_lower_case: .*ckpt-3 was pre-trained with "
                                       r"do_lower_case true \(.*training_runs.json\); pass "
                                       "--do_lower_case"):
    checkpoint_conversion.project_to_hf(model_dir, PretrainingConfig.create(TINY),
                                        str(bert_vocab), False, str(tmp_path / "hf_cased"))
  assert not (tmp_path / "hf_cased").exists()


# ------------------------------------- folders written by transformers itself
SAVED = REPO / "tests" / "data" / "hf_transformers_saved"
SAVED_PAIR = [str(SAVED / "discriminator"), str(SAVED / "generator")]
# Max |difference| between transformers' logits (reference.npz) and ours on the
# imported pair, measured 2026-11-26 on a 2-core AMD EPYC with transformers 5.24.0
# / torch 2.13.0: discriminator 4.2e-7, generator 7.7e-7 (logits up to 1.1 and
# 2.1). The tests allow 1e-5.
SAVED_ATOL = 1e-5


def test_a_finetuned_checkpoints_card_states_its_finetuning(tmp_path):
  """convert --to_hf --encoder_only of MODEL_DIR/trial_1: the card gives the
  fine-tuning job's record and dev metrics, and the pre-training record of its
  initial checkpoint."""
  from electra_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune import job as finetune_job  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune.config import FinetuningConfig  # pylint: disable=g-import-not-at-top
  pretrained = tmp_path / "pretrained"
  pretrained.mkdir()
  (pretrained / "training_runs.json").write_text(json.dumps({"runs": [
      {"from_step": 0, "command": "python run_pretraining.py --mine",
       "hparams": {"num_train_steps": 7, "train_batch_size": 4}}]}))
  tuned = FinetuningConfig.create({"task_names": ["rte"], "init_checkpoint": str(pretrained),
                                   "vocab_size": 500})
  model_dir = tmp_path / "rte"
  (model_dir / "results").mkdir(parents=True)
  (model_dir / config_lib.FINETUNING_RECORD).write_text(
      json.dumps(finetune_job._run_record(tuned)))
  (model_dir / "results" / "rte_dev_metrics.json").write_text(
      json.dumps({"accuracy": 61.25, "loss": 0.65}))
  provenance = checkpoint_conversion.checkpoint_provenance(
      str(model_dir / "trial_1" / "ckpt-20"), "cmd")
  card = hf.model_card("encoder", tuned.encoder_config(), 128, 500, True, provenance)
  assert card.startswith("# ELECTRA encoder (ElectraModel), fine-tuned with electra-tf\n")
  for line in ("- checkpoint: step 20", "- fine-tuned on: rte",
               f"- initial checkpoint: {pretrained}", "| rte | accuracy | 61.25 |",
               "| rte | loss | 0.65 |", '"learning_rate": 0.0001,',
               "## Pre-training of the initial checkpoint", "- train_batch_size: 4",
               "- num_train_steps: 7", "python run_pretraining.py --mine\ncmd"):
    assert line + "\n" in card, line
  assert "as the conversion was told" not in card


@pytest.fixture(scope="module")
def saved_import(tmp_path_factory):
  """The pair transformers saved (make_fixture.py), imported."""
  out = tmp_path_factory.mktemp("saved") / "imported"
  assert checkpoint_conversion.hf_to_project(SAVED_PAIR, str(out)) == str(out / "model.ckpt")
  return out


def test_a_vocab_other_than_the_models_own_is_refused_before_anything_is_written(
    saved_import, tmp_path):
  """export and convert --to_hf meet the checkpoint's vocab (the vocab.txt
  beside it, here the one the import wrote), convert --from_hf the folders'
  own tokenizer: another vocab or casing is one line, exit 2, nothing
  written; a copy of the same vocab elsewhere is that vocab."""
  checkpoint = saved_import
  recorded = checkpoint / "vocab.txt"
  tokens = recorded.read_text(encoding="utf-8").splitlines()
  swapped = tmp_path / "swapped.txt"
  swapped.write_text("\n".join(tokens[:10] + [tokens[11], tokens[10]] + tokens[12:]) + "\n",
                     encoding="utf-8")
  shorter = tmp_path / "shorter.txt"
  shorter.write_text("\n".join(tokens[:-1]) + "\n", encoding="utf-8")
  swap = f"line 11 holds {tokens[11]!r} against {tokens[10]!r}"
  n = len(tokens)
  cut = f"{n - 1} entries against {n}; the first {n - 1} are the same"
  def beside(vocab, difference):
    return (f"--vocab_file {vocab}: not the vocab {checkpoint} was trained with, {recorded} "
            f"({difference}); leave --vocab_file out to use that one")
  tokenizer = pathlib.Path(SAVED_PAIR[0]) / "tokenizer.json"
  from_hf = [f"--from_hf={','.join(SAVED_PAIR)}", f"--output_dir={tmp_path / 'imported'}"]
  for module, program, argv, message in [
      ("export", "electra_tf.export", [f"--checkpoint={checkpoint}", f"--vocab_file={swapped}",
                                       f"--export_dir={tmp_path / 'export'}"],
       beside(swapped, swap)),
      ("export", "electra_tf.export", [f"--checkpoint={checkpoint}", f"--vocab_file={shorter}",
                                       f"--export_dir={tmp_path / 'export'}",
                                       "--signatures=ids"], beside(shorter, cut)),
      ("convert", "electra_tf.convert", [f"--to_hf={tmp_path / 'hf'}", f"--vocab_file={swapped}",
                                         f"--checkpoint={checkpoint}"],
       beside(swapped, swap)),
      ("convert", "electra_tf.convert", from_hf + [f"--vocab_file={swapped}"],
       f"--vocab_file {swapped}: not the vocab of the model, {tokenizer} ({swap}); leave "
       "--vocab_file out: --from_hf takes the folder's own"),
      ("convert", "electra_tf.convert", from_hf + ["--nodo_lower_case"],
       f"--nodo_lower_case: the model's tokenizer ({tokenizer}) lower-cases; leave the flag "
       "out: --from_hf takes the folder's own casing")]:
    result = run_command(f"electra_tf.commands.{module}", argv, program)
    assert (result.returncode, result.stderr) == (2, f"{program}: error: {message}\n"), argv
  assert sorted(os.listdir(tmp_path)) == ["shorter.txt", "swapped.txt"]
  copy = tmp_path / "copy.txt"
  shutil.copy(recorded, copy)
  checkpoints.check_vocab(str(copy), str(checkpoint), "--vocab_file")


def test_transformers_saved_pair_has_what_the_import_must_supply():
  """What transformers 5 writes: no vocab.txt, and no tied output layer."""
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
  for folder in SAVED_PAIR:
    assert sorted(os.listdir(folder)) == ["config.json", "model.safetensors", "tokenizer.json",
                                          "tokenizer_config.json"]
  assert "generator_lm_head.weight" not in load_file(str(SAVED / "generator" /
                                                         "model.safetensors"))


def test_transformers_saved_pair_gives_transformers_logits(saved_import):
  hparams = json.loads((saved_import / "hparams.json").read_text())
  assert hparams["do_lower_case"] is True and hparams["vocab_size"] == 179
  assert hparams["embedding_size"] == 32 and hparams["generator_hidden_size"] == 0.25
  model = build_model(PretrainingConfig.create(hparams))
  checkpoints.restore_from_checkpoint(model, str(saved_import))  # strict: every variable
  ref = np.load(SAVED / "reference.npz")
  disc = model.discriminator_logits(ref["input_ids"], ref["input_mask"], ref["segment_ids"],
                                    training=False).numpy()
  np.testing.assert_allclose(disc, ref["disc_logits"], rtol=0, atol=SAVED_ATOL)
  batch, length = ref["input_ids"].shape
  gen = model.mlm_logits({
      "input_ids": tf.constant(ref["input_ids"]), "input_mask": tf.constant(ref["input_mask"]),
      "segment_ids": tf.constant(ref["segment_ids"]),
      "masked_lm_positions": tf.constant(np.tile(np.arange(length, dtype=np.int32),
                                                 [batch, 1]))}, training=False).numpy()
  # (the output layer, left out of the file, is the tied word table)
  np.testing.assert_allclose(gen, ref["gen_logits"], rtol=0, atol=SAVED_ATOL)


def test_transformers_saved_pair_comes_back_bit_for_bit(saved_import, tmp_path):
  """Imported, then exported again: every tensor transformers saved, bit for
  bit, and the tied output layer written out (transformers loads both;
  measured: its logits on the export equal reference.npz exactly)."""
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
  hparams = json.loads((saved_import / "hparams.json").read_text())
  checkpoint_conversion.project_to_hf(str(saved_import), PretrainingConfig.create(hparams),
                                   str(saved_import / "vocab.txt"), True, str(tmp_path / "hf"))
  for part in ("discriminator", "generator"):
    theirs = load_file(str(SAVED / part / "model.safetensors"))
    ours = load_file(str(tmp_path / "hf" / part / "model.safetensors"))
    extra = {"generator_lm_head.weight"} if part == "generator" else set()
    assert set(ours) == set(theirs) | extra
    for key, value in theirs.items():
      np.testing.assert_array_equal(ours[key], value, err_msg=key)
    for key in extra:
      np.testing.assert_array_equal(ours[key], theirs[hf.WORD_EMBEDDINGS])
    saved = json.loads((SAVED / part / "config.json").read_text())
    written = json.loads((tmp_path / "hf" / part / "config.json").read_text())
    assert {k: v for k, v in written.items() if k in saved} == {
        k: v for k, v in saved.items() if k in written}


def _our_ids(vocab_file, do_lower_case, texts):
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  ours = tokenization.FullTokenizer(str(vocab_file), do_lower_case)
  return [ours.convert_tokens_to_ids(["[CLS]"] + ours.tokenize(text) + ["[SEP]"])
          for text in texts]


def test_transformers_saved_tokenizer_gives_transformers_ids(saved_import):
  """vocab.txt from tokenizer.json's WordPiece model, casing from its
  normalizer: our tokenizer then gives transformers' ids."""
  ref = json.loads((SAVED / "reference.json").read_text(encoding="utf-8"))
  assert _our_ids(saved_import / "vocab.txt", True, ref["texts"]) == ref["uncased_ids"]
  # A literal special token in the text: transformers keeps it as one token,
  # BERT's tokenizer and ours split it ("[", "mask", "]"; docs/huggingface.md):
  # our ids are theirs with each such token replaced by our pieces of it.
  vocab = saved_import / "vocab.txt"
  split = {token: _our_ids(vocab, True, [token])[0][1:-1] for token in ("[MASK]", "[CLS]",
                                                                         "[SEP]")}
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  # ("[" and "]" are not in the fixture's vocab)
  assert tokenization.FullTokenizer(str(vocab)).tokenize("[MASK]") == [
      "[UNK]", "m", "##a", "##s", "##k", "[UNK]"]
  special = {"[MASK]": 4, "[CLS]": 2, "[SEP]": 3}
  for text, theirs in zip(ref["special_texts"], ref["special_uncased_ids"]):
    expected = [theirs[0]]
    for i in theirs[1:-1]:
      expected += split[next(t for t, j in special.items() if j == i)] if i in (2, 3, 4) else [i]
    assert _our_ids(vocab, True, [text])[0] == expected + [theirs[-1]], text


def test_transformers_saved_cased_tokenizer_imports_cased(tmp_path):
  folder = tmp_path / "cased"
  shutil.copytree(SAVED / "discriminator", folder)
  for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copyfile(SAVED / "cased_tokenizer" / name, folder / name)
  checkpoint_conversion.hf_to_project([str(folder)], str(tmp_path / "out"))
  assert json.loads((tmp_path / "out" / "hparams.json").read_text())["do_lower_case"] is False
  ref = json.loads((SAVED / "reference.json").read_text(encoding="utf-8"))
  assert _our_ids(tmp_path / "out" / "vocab.txt", False, ref["texts"]) == ref["cased_ids"]
  assert ref["cased_ids"] != ref["uncased_ids"]


def _edit_json(path, edit):
  content = json.loads(path.read_text(encoding="utf-8"))
  edit(content)
  path.write_text(json.dumps(content), encoding="utf-8")


def _saved_copy(tmp_path, name, part="discriminator", **changes):
  """A copy of the saved `part` folder, its tensors changed (None: removed)."""
  _copy_folder(SAVED / part, tmp_path / name, **changes)
  return tmp_path / name


def _bad_saved_cases(tmp_path):
  """(folders, what the one-line error must say) of bad transformers folders."""
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
  gen = load_file(str(SAVED / "generator" / "model.safetensors"))
  table = gen["electra.embeddings.word_embeddings.weight"].copy()
  table[7, 3] += 0.25
  other_table = _saved_copy(tmp_path, "other_table", "generator",
                            **{"electra.embeddings.word_embeddings.weight": table})
  no_vocab = _saved_copy(tmp_path, "no_vocab")
  for name in ("tokenizer.json", "tokenizer_config.json"):
    (no_vocab / name).unlink()
  two_vocabs = _saved_copy(tmp_path, "two_vocabs")
  (two_vocabs / "vocab.txt").write_text("[PAD]\n[UNK]\n", encoding="utf-8")
  says_cased = _saved_copy(tmp_path, "says_cased")
  _edit_json(says_cased / "tokenizer_config.json", lambda c: c.update(do_lower_case=False))
  cased_gen = _saved_copy(tmp_path, "cased_gen", "generator")
  for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copyfile(SAVED / "cased_tokenizer" / name, cased_gen / name)
  untied = _saved_copy(tmp_path, "untied", "generator")
  _edit_json(untied / "config.json", lambda c: c.update(tie_word_embeddings=False))
  bpe = _saved_copy(tmp_path, "bpe")
  _edit_json(bpe / "tokenizer.json", lambda c: c["model"].update(type="BPE"))
  (tmp_path / "a_file").write_text("not a folder\n")
  big_vocab = _saved_copy(tmp_path, "big_vocab")
  _edit_json(big_vocab / "config.json", lambda c: c.update(vocab_size=180))

  def rename_mask(spec):
    spec["model"]["vocab"]["[MASKED]"] = spec["model"]["vocab"].pop("[MASK]")
    for added in spec["added_tokens"]:
      added["content"] = "[MASKED]" if added["content"] == "[MASK]" else added["content"]
  no_mask = _saved_copy(tmp_path, "no_mask")
  _edit_json(no_mask / "tokenizer.json", rename_mask)
  torch_only = tmp_path / "torch_only"
  torch_only.mkdir()
  shutil.copyfile(SAVED / "generator" / "config.json", torch_only / "config.json")
  (torch_only / "pytorch_model.bin").write_bytes(b"not read")
  cut_short = _saved_copy(tmp_path, "cut_short")
  weights = cut_short / "model.safetensors"
  weights.write_bytes(weights.read_bytes()[:100])
  disc, gen_dir = SAVED_PAIR
  return {
      "cut_short": ([str(cut_short)], f"--from_hf: {weights}: unreadable (Error while "
                    "deserializing header"),
      "missing": ([str(tmp_path / "nope")], f"--from_hf: {tmp_path / 'nope'} does not exist"),
      "file": ([str(tmp_path / "a_file")],
               f"--from_hf: {tmp_path / 'a_file'} is a file, not a transformers model folder"),
      "generator_first": ([gen_dir], f"--from_hf: {gen_dir} is a generator "
                          "(ElectraForMaskedLM); give the discriminator first: DISC_DIR or "
                          "DISC_DIR,GEN_DIR"),
      "three": ([disc, gen_dir, gen_dir], "--from_hf: give DISC_DIR or DISC_DIR,GEN_DIR, not "
                f"{disc},{gen_dir},{gen_dir} (3 folders)"),
      "empty": ([disc, ""], f"--from_hf: give DISC_DIR or DISC_DIR,GEN_DIR, not {disc}, "
                "(2 folders)"),
      "other_table": ([disc, str(other_table)],
                      f"--from_hf: {disc}/model.safetensors and {other_table}/model.safetensors "
                      "hold different electra.embeddings.word_embeddings.weight (max |difference| "
                      "0.25); this project's discriminator and generator share one embedding "
                      "table"),
      "no_vocab": ([str(no_vocab)], f"--from_hf: {no_vocab} has no vocab.txt or tokenizer.json"),
      "two_vocabs": ([str(two_vocabs)], f"--from_hf: {two_vocabs}/vocab.txt and "
                     f"{two_vocabs}/tokenizer.json hold different vocabs"),
      "says_cased": ([str(says_cased)], f"--from_hf: {says_cased}/tokenizer_config.json says "
                     f"do_lower_case False, {says_cased}/tokenizer.json lowercasing True"),
      "cased_gen": ([disc, str(cased_gen)], f"--from_hf: {disc}/tokenizer.json and "
                    f"{cased_gen}/tokenizer.json hold different tokenizers"),
      "untied": ([disc, str(untied)], f"{untied}/model.safetensors: missing tensor "
                 "generator_lm_head.weight"),
      "bpe": ([str(bpe)], f"--from_hf: {bpe}/tokenizer.json: model 'BPE' is not a WordPiece "
              "vocab"),
      "big_vocab": ([str(big_vocab)], f"--from_hf: {big_vocab}/config.json says vocab_size 180, "
                    f"{big_vocab}/tokenizer.json holds 179 entries"),
      "no_mask": ([str(no_mask)], f"vocab file {no_mask}/tokenizer.json: missing special "
                  "token(s) [MASK]"),
      "torch_only": ([disc, str(torch_only)], f"--from_hf: {torch_only} holds pytorch_model.bin, "
                     "which only torch can read; convert it once where torch is installed, with "
                     "its head class (ElectraForPreTraining for a discriminator, "
                     "ElectraForMaskedLM for a generator): python -c \"from transformers import "
                     f"ElectraForMaskedLM as M; M.from_pretrained('{torch_only}')"
                     f".save_pretrained('{torch_only}')\""),
  }


def test_bad_transformers_folders_are_one_line_errors_and_write_nothing(tmp_path):
  cases = _bad_saved_cases(tmp_path)
  for name, (folders, message) in cases.items():
    out = tmp_path / f"out_{name}"
    with pytest.raises(ValueError) as raised:
      checkpoint_conversion.hf_to_project(folders, str(out))
    assert message in str(raised.value) and "\n" not in str(raised.value), (name, raised.value)
    assert not out.exists(), name
  page = " ".join((REPO / "docs" / "huggingface.md").read_text(encoding="utf-8").split())
  assert f"({len(cases)} bad folder cases, and a missing `--output_dir`)" in page


@pytest.mark.slow
def test_convert_command_on_bad_transformers_folders(tmp_path):
  cases = _bad_saved_cases(tmp_path)
  argvs = [[f"--from_hf={','.join(folders)}", f"--output_dir={tmp_path / ('out_' + name)}"]
           for name, (folders, _) in cases.items()]
  argvs.append([f"--from_hf={SAVED_PAIR[0]}"])
  messages = [message for _, message in cases.values()]
  messages.append("--from_hf=DISC_DIR[,GEN_DIR] needs --output_dir")
  # What `python -m electra_tf.convert` prints and exits with, in this process.
  for argv, message in zip(argvs, messages):
    run = run_command("electra_tf.commands.convert", argv, "electra_tf.convert")
    assert run.returncode == 2, (message, run.stderr)
    assert run.stderr == (f"electra_tf.convert: error: {message}"
                          + run.stderr.split(message, 1)[1])
    assert run.stderr.count("\n") == 1, run.stderr
  assert not any(name.startswith("out_") for name in os.listdir(tmp_path))


@pytest.mark.slow
def test_commands_export_import_and_continue_pretraining(
    official_debug_fixture, bert_vocab, corpus_dir, tmp_path):
  """The convert command both ways, then run_pretraining.py --init_checkpoint
  from the imported pair for 2 steps, all three commands in this process."""
  hparams = json.dumps(_hparams(official_debug_fixture))
  # The two conversions in this process (python -m electra_tf.convert's entry point).
  run = run_command("electra_tf.commands.convert", [
      f"--to_hf={tmp_path / 'hf'}", f"--checkpoint={official_debug_fixture / 'model.ckpt'}",
      f"--hparams={hparams}", f"--vocab_file={bert_vocab}"], "electra_tf.convert")
  assert run.returncode == 0, run.stderr[-2000:]
  run = run_command("electra_tf.commands.convert", [
      f"--from_hf={tmp_path / 'hf' / 'discriminator'},{tmp_path / 'hf' / 'generator'}",
      f"--output_dir={tmp_path / 'imported'}"], "electra_tf.convert")
  assert run.returncode == 0, run.stderr[-2000:]
  data_dir = make_pretraining_data_dir(tmp_path / "data", corpus_dir, bert_vocab,
                                       num_lines=60, num_out_files=1)
  hparams = json.loads((tmp_path / "imported" / "hparams.json").read_text())
  hparams.update(max_seq_length=32, train_batch_size=4, num_train_steps=2,
                 num_warmup_steps=1, save_checkpoints_steps=2, num_eval_steps=2,
                 eval_batch_size=4)
  run = run_script(
      ["run_pretraining.py", f"--data_dir={data_dir}",
       f"--model_dir={tmp_path / 'model'}", f"--init_checkpoint={tmp_path / 'imported'}",
       f"--hparams={json.dumps(hparams)}", "--do_train", "--do_eval",
       f"--export_hf={tmp_path / 'hf2'}"])
  assert run.returncode == 0, run.stderr[-2000:]
  assert (tmp_path / "model" / "ckpt-2.index").exists()
  # --export_hf: both folders, the card with the run's eval metrics and command.
  card = (tmp_path / "hf2" / "generator" / "README.md").read_text()
  assert "| masked_lm_accuracy |" in card and "--export_hf=" in card
  assert sorted(os.listdir(tmp_path / "hf2" / "discriminator")) == [
      "README.md", "config.json", "model.safetensors", "special_tokens_map.json",
      "tokenizer_config.json", "vocab.txt"]
  # Started from the imported weights: two steps at lr <= 5e-4 moved them little.
  trained = build_model(PretrainingConfig.create(hparams))
  checkpoints.restore_from_checkpoint(trained, str(tmp_path / "model" / "ckpt-2"))
  original = tf.train.load_checkpoint(str(official_debug_fixture / "model.ckpt"))
  for name, value in _values(trained).items():
    assert np.abs(value - original.get_tensor(name)).max() < 1e-2, name


# transformers on the export, in its own process (torch and TensorFlow in one
# process can crash): ElectraTokenizerFast's ids and the discriminator's logits.
TRANSFORMERS_RUN = """
import sys, numpy as np, torch, transformers
folder, text, out = sys.argv[1:]
ids = transformers.ElectraTokenizerFast.from_pretrained(folder)(text)["input_ids"]
model = transformers.ElectraForPreTraining.from_pretrained(folder).eval()
with torch.no_grad():
  logits = model(input_ids=torch.tensor([ids])).logits.numpy()
np.savez(out, ids=np.array(ids), logits=logits)
"""


def test_transformers_loads_the_export(exported, official_debug_fixture, bert_vocab, tmp_path):
  """Optional: transformers itself on the export, on text no fixture holds."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  if not (importlib.util.find_spec("torch") and importlib.util.find_spec("transformers")):
    pytest.skip("torch and transformers are not installed (optional, not in requirements.txt)")
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  out, config = exported
  # Word-final capital sigma is left out: Python's lower() (BERT's reference
  # tokenizer, and ours) makes it "ς", transformers' fast tokenizer "σ"
  # (docs/huggingface.md); every other piece agrees.
  text = "Tokenizers disagree rarely: naïve café, 3.5 kg — Σοφία! Unbelievably, it works."
  run = subprocess.run([sys.executable, "-c", TRANSFORMERS_RUN, str(out / "discriminator"), text,
                        str(tmp_path / "hf.npz")], capture_output=True, text=True)
  assert run.returncode == 0, run.stderr[-2000:]
  theirs = np.load(tmp_path / "hf.npz")
  ours = tokenization.FullTokenizer(str(bert_vocab))
  ids = ours.convert_tokens_to_ids(["[CLS]"] + ours.tokenize(text) + ["[SEP]"])
  assert theirs["ids"].tolist() == ids
  model = build_model(config)
  checkpoints.restore_from_checkpoint(model, str(official_debug_fixture / "model.ckpt"))
  mine = model.discriminator_logits(np.array([ids]), np.ones([1, len(ids)], np.int32),
                                    np.zeros([1, len(ids)], np.int32), training=False)
  np.testing.assert_allclose(mine.numpy(), theirs["logits"], atol=2e-5)
