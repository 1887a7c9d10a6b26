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
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import checkpoints, convert, hf
from electra_tf.errors import DataError
from electra_tf.modeling.encoder import build_discriminator_encoder
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.model import build_model
from tests.conftest import make_pretraining_data_dir

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
  written = convert.project_to_hf(str(official_debug_fixture / "model.ckpt"), config,
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
    card = (out / folder / "README.md").read_text()
    assert "30522 WordPiece entries, lower-cased" in card and "make it" in card
    assert '"generator_hidden_size": 0.5' in card


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
  convert.project_to_hf(str(tmp_path / "ckpt"), config, str(vocab), True, str(tmp_path / "hf"))
  prefix = convert.hf_to_project([str(tmp_path / "hf" / "discriminator"),
                                  str(tmp_path / "hf" / "generator")], str(tmp_path / "back"))
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
  prefix = convert.hf_to_project([str(out / "discriminator")], str(tmp_path / "disc"))
  encoder = build_discriminator_encoder(config.encoder_config(), config.effective_embedding_size)
  checkpoints.restore_from_checkpoint(encoder, prefix)  # strict: every encoder variable
  original = build_model(config)
  checkpoints.restore_from_checkpoint(original, str(official_debug_fixture / "model.ckpt"))
  ours = _values(original)
  for name, value in _values(encoder).items():
    np.testing.assert_array_equal(value, ours[name], err_msg=name)
  with pytest.raises(checkpoints.CheckpointError, match=r"lacks model variable generator"):
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
      convert.hf_to_project([str(tmp_path / name), str(out / "generator")],
                            str(tmp_path / f"out_{name}"))
    assert not (tmp_path / f"out_{name}").exists()
  torch_only = tmp_path / "torch_only"
  torch_only.mkdir()
  (torch_only / "config.json").write_text((disc / "config.json").read_text())
  (torch_only / "pytorch_model.bin").write_bytes(b"not read")
  with pytest.raises(DataError, match="holds pytorch_model.bin, which only torch can read; "
                                      "convert it once"):
    convert.hf_to_project([str(torch_only)], str(tmp_path / "out_torch"))
  assert not (tmp_path / "out_torch").exists()


@pytest.mark.slow
def test_commands_export_import_and_continue_pretraining(
    official_debug_fixture, bert_vocab, corpus_dir, tmp_path):
  """The convert command both ways, then run_pretraining.py --init_checkpoint
  from the imported pair for 2 steps."""
  env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
  hparams = json.dumps(_hparams(official_debug_fixture))
  run = subprocess.run(
      [sys.executable, "-m", "electra_tf.convert", f"--to_hf={tmp_path / 'hf'}",
       f"--checkpoint={official_debug_fixture / 'model.ckpt'}", f"--hparams={hparams}",
       f"--vocab_file={bert_vocab}"], cwd=REPO, env=env, capture_output=True, text=True)
  assert run.returncode == 0, run.stderr[-2000:]
  run = subprocess.run(
      [sys.executable, "-m", "electra_tf.convert",
       f"--from_hf={tmp_path / 'hf' / 'discriminator'},{tmp_path / 'hf' / 'generator'}",
       f"--output_dir={tmp_path / 'imported'}"], cwd=REPO, env=env, capture_output=True,
      text=True)
  assert run.returncode == 0, run.stderr[-2000:]
  data_dir = make_pretraining_data_dir(tmp_path / "data", corpus_dir, bert_vocab,
                                       num_lines=60, num_out_files=1)
  hparams = json.loads((tmp_path / "imported" / "hparams.json").read_text())
  hparams.update(max_seq_length=32, train_batch_size=4, num_train_steps=2,
                 num_warmup_steps=1, save_checkpoints_steps=2, num_eval_steps=2,
                 eval_batch_size=4)
  run = subprocess.run(
      [sys.executable, "run_pretraining.py", f"--data_dir={data_dir}",
       f"--model_dir={tmp_path / 'model'}", f"--init_checkpoint={tmp_path / 'imported'}",
       f"--hparams={json.dumps(hparams)}", "--do_train", "--do_eval",
       f"--export_hf={tmp_path / 'hf2'}"],
      cwd=REPO, env=env, capture_output=True, text=True)
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
