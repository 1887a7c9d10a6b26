"""The public Python API (electra_tf/api.py): loading from every source, the
tokenizer against the fine-tuning featurizer, model.fit, saving and loading
back, equality with the SavedModel export and with transformers' outputs,
and the one-line errors."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

import electra_tf
from electra_tf import checkpoint_conversion
from electra_tf import checkpoints
from electra_tf import config as config_lib
from electra_tf import optimization
from electra_tf import tokenization
from electra_tf import train_loop
from electra_tf.errors import UserError
from electra_tf.finetune import task_builder
from electra_tf.finetune.config import FinetuningConfig
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.model import build_model
from electra_tf.saved_model import export_saved_model
from tests.test_hf import SAVED, SAVED_ATOL

ELECTRIC = SAVED.parent / "official_electric"  # Electric's tiny official checkpoint

TEXTS = ["The cat sat on the mat.", "Électra replaces tokens; the discriminator spots them!"]
# The official debug checkpoint's sequence outputs against the official
# code's (fixture.npz): 2.4e-6 apart (measured 2026-11-27, 2-core Intel Xeon).
OFFICIAL_ATOL = 1e-5


@pytest.fixture(scope="module")
def official(official_debug_fixture):
  """(prefix, hparams) of Google's TF1 code's tiny checkpoint, which records
  nothing beside it."""
  hparams = json.loads((official_debug_fixture / "config.json").read_text())["hparams"]
  return str(official_debug_fixture / "model.ckpt"), hparams


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, official, bert_vocab):
  """A project model_dir as pre-training leaves it (a checkpoint, the
  architecture record electra_config.json, vocab.txt), of the official
  debug checkpoint's weights."""
  prefix, hparams = official
  model_dir = tmp_path_factory.mktemp("api") / "model_dir"
  config = PretrainingConfig.create(hparams)
  checkpoint_conversion.official_to_project(prefix, config, str(model_dir))
  train_loop.write_run_record(str(model_dir), config_lib.ARCHITECTURE_RECORD,
                              config.architecture())
  train_loop.keep_vocab_beside(str(model_dir), str(bert_vocab))
  return model_dir


@pytest.fixture(scope="module")
def encoder(model_dir):
  return electra_tf.load_encoder(str(model_dir))


@pytest.fixture(scope="module")
def tokenizer(model_dir):
  return electra_tf.load_tokenizer(str(model_dir), max_seq_length=32)


def test_import_is_lazy_and_the_surface_small():
  assert sorted(electra_tf.__all__) == [
      "ElectraEncoder", "ElectraGenerator", "Tokenizer", "create_optimizer", "load_encoder",
      "load_generator", "load_pretrainer", "load_tokenizer"]
  assert set(electra_tf.__all__) <= set(dir(electra_tf))
  with pytest.raises(AttributeError, match="has no attribute 'load_model'"):
    electra_tf.load_model  # pylint: disable=pointless-statement


def test_encoder_of_an_official_checkpoint_gives_the_official_outputs(
    official, official_debug_fixture, encoder):
  prefix, hparams = official
  official_encoder = electra_tf.load_encoder(prefix, hparams)
  a = np.load(official_debug_fixture / "fixture.npz")
  inputs = {"input_ids": a["discriminator_input_ids"], "input_mask": a["input_mask"],
            "segment_ids": a["segment_ids"]}
  outputs = official_encoder(inputs)
  assert sorted(outputs) == ["pooled_output", "sequence_output"]
  np.testing.assert_allclose(outputs["sequence_output"], a["disc_sequence_output"],
                             rtol=0, atol=OFFICIAL_ATOL)
  np.testing.assert_array_equal(outputs["pooled_output"], outputs["sequence_output"][:, 0])
  # The model_dir's record gives the same architecture, its checkpoint the
  # same weights: the same outputs, with no hparams given.
  for key, value in encoder(inputs).items():
    np.testing.assert_array_equal(value, outputs[key], err_msg=key)
  names = [v.name for v in encoder.trainable_variables]
  assert len(names) == 39 and names[0] == "electra/embeddings/word_embeddings:0"
  assert encoder.config.num_hidden_layers == 2 and encoder.config.hidden_size == 64


def test_encoder_of_a_finetuning_trial(tmp_path):
  """A fine-tuning model_dir's trial_<n>/: the architecture from the job's
  record (finetuning_config.json), the encoder's weights from the trial's
  checkpoint (of an earlier version, tests/data/checkpoints_809aba9)."""
  compat = SAVED.parent / "checkpoints_809aba9" / "finetuning"
  shutil.copytree(compat / "trial_1", tmp_path / "trial_1")
  record = {**json.loads((compat / "hparams.json").read_text()), "task_names": ["rte", "sts"]}
  (tmp_path / config_lib.FINETUNING_RECORD).write_text(json.dumps(record))
  encoder = electra_tf.load_encoder(str(tmp_path / "trial_1"))
  assert (encoder.config.hidden_size, encoder.config.vocab_size) == (16, 64)
  prefix = checkpoints.resolve_checkpoint(str(tmp_path / "trial_1"))
  entries = checkpoints.checkpoint_entries(prefix)
  reader = tf.train.load_checkpoint(prefix)
  for name, variable in checkpoints.named_variables(encoder).items():
    np.testing.assert_array_equal(variable, reader.get_tensor(entries[name].key), err_msg=name)


def test_tokenizer_gives_the_featurizers_ids(tokenizer, finetuning_data_dir, bert_vocab):
  """Single texts (SST-2) and pairs (MRPC), cut to 16 pieces: the ids of the
  fine-tuning featurizer, eagerly and in tf.data (graph mode): texts one at
  a time, pairs in batches."""
  assert (tokenizer.do_lower_case, tokenizer.max_seq_length) == (True, 32)
  assert tokenizer.vocab_size == 30522
  short = electra_tf.Tokenizer(str(bert_vocab), max_seq_length=16)
  full = tokenization.FullTokenizer(str(bert_vocab))
  for name, rows in (("sst", 40), ("mrpc", 24)):
    config = FinetuningConfig.create({"max_seq_length": 16}, task_names=[name],
                                     data_dir=str(finetuning_data_dir.parent))
    task = task_builder.get_task(name, config, full)
    examples = task.get_examples("dev")[:rows]
    expected = task.featurize(examples, is_training=False).arrays
    assert any(len(full.tokenize(" ".join(filter(None, (e.text_a, e.text_b))))) > 16
               for e in examples)  # truncation happens
    texts = [[example.text_a for example in examples]]
    if name == "mrpc":
      texts.append([example.text_b for example in examples])
      graph = tf.data.Dataset.from_tensor_slices(tuple(texts)).batch(rows).map(short)
    else:
      graph = tf.data.Dataset.from_tensor_slices(texts[0]).map(short).batch(rows)
    for got in (short(*texts), next(iter(graph))):
      for key in ("input_ids", "input_mask", "segment_ids"):
        assert got[key].dtype == tf.int32 and got[key].shape == (rows, 16)
        np.testing.assert_array_equal(got[key], expected[key], err_msg=f"{name} {key}")
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="text_b: batch size differs from the batch size of text_a"):
    short(TEXTS, TEXTS[:1])


def test_transformers_folders_give_transformers_outputs(tmp_path):
  """The pair transformers saved (tests/data/hf_transformers_saved): the
  generator's logits and the pre-trainer's discriminator logits are
  transformers' own (reference.npz) within the bound of tests/test_hf.py,
  the encoder is that discriminator's, the tokenizer gives transformers'
  ids; a cased tokenizer's folder gives the cased ids."""
  ref = np.load(SAVED / "reference.npz")
  inputs = {key: ref[key] for key in ("input_ids", "input_mask", "segment_ids")}
  generator = electra_tf.load_generator(str(SAVED))
  np.testing.assert_allclose(generator(inputs)["logits"], ref["gen_logits"], rtol=0,
                             atol=SAVED_ATOL)
  pretrainer = electra_tf.load_pretrainer(
      [str(SAVED / "discriminator"), str(SAVED / "generator")])
  disc_logits = pretrainer.discriminator_logits(*inputs.values(), training=False)
  np.testing.assert_allclose(disc_logits, ref["disc_logits"], rtol=0, atol=SAVED_ATOL)
  encoder = electra_tf.load_encoder(str(SAVED / "discriminator"))
  np.testing.assert_array_equal(
      encoder(inputs)["sequence_output"],
      pretrainer.discriminator(*inputs.values(), training=False)["sequence_output"])
  # The same pair converted (`convert --from_hf`): its hparams.json is the
  # record (of 32 positions: shorter sequences than the default 128, as for
  # the commands).
  checkpoint_conversion.hf_to_project([str(SAVED / "discriminator"), str(SAVED / "generator")],
                                      str(tmp_path / "converted"))
  converted = electra_tf.load_generator(str(tmp_path / "converted"), {"max_seq_length": 32})
  np.testing.assert_array_equal(converted(inputs)["logits"], generator(inputs)["logits"])
  reference = json.loads((SAVED / "reference.json").read_text(encoding="utf-8"))
  cased = tmp_path / "cased"
  shutil.copytree(SAVED / "discriminator", cased)
  for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copyfile(SAVED / "cased_tokenizer" / name, cased / name)
  for source, key in ((SAVED, "uncased_ids"), (cased, "cased_ids")):
    tokenizer = electra_tf.load_tokenizer(str(source))
    assert tokenizer.max_seq_length == 32 and tokenizer.do_lower_case == (key == "uncased_ids")
    got = tokenizer(reference["texts"])
    for row, ids in enumerate(reference[key]):
      assert got["input_ids"][row].numpy().tolist() == ids + [0] * (32 - len(ids))


@pytest.fixture(scope="module")
def sst(finetuning_data_dir):
  """(texts, labels) of the first 64 SST-2 dev sentences."""
  rows = (finetuning_data_dir / "sst" / "dev.tsv").read_text(encoding="utf-8").splitlines()
  split = [row.split("\t") for row in rows[1:65]]
  return [text for text, _ in split], np.array([int(label) for _, label in split])


def classifier_on(encoder):
  """A two-class head on the encoder's [CLS] vector, a functional model."""
  pooled = encoder(encoder.input)["pooled_output"]
  logits = keras.layers.Dense(2, name="classifier")(keras.layers.Dropout(0.1)(pooled))
  return keras.Model(encoder.input, logits)


@pytest.fixture(scope="module")
def trained(model_dir, tokenizer, sst):
  """(the encoder, the classifier on it after model.fit on SST-2 rows with
  the official optimizer, its inputs, its loss on them before and after
  (dropout off))."""
  texts, labels = sst
  keras.utils.set_random_seed(0)  # the head's initial values, dropout
  encoder = electra_tf.load_encoder(str(model_dir))  # trained in place
  model = classifier_on(encoder)
  loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  model.compile(optimizer=electra_tf.create_optimizer(24, encoder, learning_rate=1e-3),
                loss=loss)
  inputs = tokenizer(texts)
  before = float(loss(labels, model(inputs)))
  model.fit(inputs, labels, batch_size=16, epochs=6, verbose=0)
  return encoder, model, inputs, before, float(loss(labels, model(inputs)))


@pytest.mark.slow  # trains a classifier with model.fit
def test_model_fit_trains_a_classifier_with_the_official_optimizer(trained):
  encoder, model, _, before, after = trained
  assert after < 0.5 * before, (before, after)  # measured: 0.77 -> 0.14
  optimizer = model.optimizer
  assert isinstance(optimizer, optimization.AdamWeightDecay)
  assert int(optimizer.iterations) == 24
  # Layer-wise rates (decay 0.8, 2 layers): embeddings 0.8^4, layer_0 0.8^3,
  # the top layer 0.8^2 (official quirk), the head (Keras' names) 1.
  names = [v.name for v in model.trainable_variables]
  by_name = dict(zip(names, optimizer._lr_multipliers))  # pylint: disable=protected-access
  assert by_name["electra/embeddings/word_embeddings:0"] == pytest.approx(0.8 ** 4)
  assert by_name["electra/encoder/layer_0/attention/self/query/kernel:0"] == pytest.approx(
      0.8 ** 3)
  assert by_name["electra/encoder/layer_1/output/dense/bias:0"] == pytest.approx(0.8 ** 2)
  assert by_name["classifier/kernel:0"] == 1.0
  # The encoder is the loaded one: its variables trained in place.
  assert encoder.trainable_variables[0] is model.trainable_variables[0]


def test_encoder_in_a_subclassed_model(encoder, tokenizer):
  class Classifier(keras.Model):

    def __init__(self, encoder):
      super().__init__()
      self.encoder = encoder
      self.head = keras.layers.Dense(2)

    def call(self, inputs, training=False):
      return self.head(self.encoder(inputs, training=training)["pooled_output"])

  model = Classifier(encoder)
  inputs = tokenizer(TEXTS)
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(model(inputs, training=True) ** 2)
  gradients = tape.gradient(loss, model.trainable_variables)
  assert len(model.trainable_variables) == len(encoder.trainable_variables) + 2
  assert all(g is not None for g in gradients)
  assert float(tf.linalg.global_norm(gradients[:-2])) > 0


@pytest.mark.slow  # saves and loads a model twice: about 15 s
def test_the_trained_model_saves_and_loads_back(trained, tmp_path):
  """Through Keras (.keras: the custom layers registered, rebuilt from their
  configs, the optimizer too) and through tf.saved_model."""
  _, model, inputs, _, _ = trained
  expected = model(inputs).numpy()
  model.save(tmp_path / "classifier.keras")
  loaded = keras.models.load_model(tmp_path / "classifier.keras")
  np.testing.assert_array_equal(loaded(inputs), expected)
  assert isinstance(loaded.get_layer("electra_encoder"), electra_tf.ElectraEncoder)
  assert [v.name for v in loaded.trainable_variables] == [
      v.name for v in model.trainable_variables]
  assert isinstance(loaded.optimizer, optimization.AdamWeightDecay)
  tf.saved_model.save(model, str(tmp_path / "saved_model"))
  serve = tf.saved_model.load(str(tmp_path / "saved_model")).signatures["serving_default"]
  np.testing.assert_allclose(serve(**inputs)["classifier"], expected, rtol=0, atol=1e-5)


def test_generator_saves_and_loads_back(model_dir, tokenizer, tmp_path):
  generator = electra_tf.load_generator(str(model_dir))
  inputs = tokenizer(TEXTS)
  expected = generator(inputs)
  assert expected["logits"].shape == (2, 32, 30522)
  assert expected["sequence_output"].shape == (2, 32, 32)
  generator.save(tmp_path / "generator.keras")
  loaded = keras.models.load_model(tmp_path / "generator.keras")
  for key, value in loaded(inputs).items():
    np.testing.assert_array_equal(value, expected[key], err_msg=key)
  # Still one embedding table, the encoder's and the head's.
  assert loaded.head.embeddings is loaded.encoder.embeddings


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory, model_dir):
  """`python -m electra_tf.export --checkpoint=model_dir` (its main's steps)."""
  config = PretrainingConfig.create({"max_seq_length": 32}, checkpoint=str(model_dir))
  pretrainer = build_model(config)
  checkpoints.restore_from_checkpoint(pretrainer, str(model_dir))
  vocab_file = str(model_dir / "vocab.txt")
  return export_saved_model(pretrainer, str(tmp_path_factory.mktemp("api") / "export"),
                            tokenizer=tokenization.FullTokenizer(vocab_file),
                            max_seq_length=32)


@pytest.mark.slow  # exports a SavedModel
def test_encoder_and_tokenizer_equal_the_exported_savedmodel(export_dir, encoder, tokenizer):
  text = tf.saved_model.load(export_dir).signatures["text"]
  served = text(text=tf.constant(TEXTS))
  ours = encoder(tokenizer(TEXTS))
  mask = served["input_mask"].numpy().astype(bool)
  width = mask.shape[1]
  np.testing.assert_array_equal(tokenizer(TEXTS)["input_mask"][:, :width], mask)
  np.testing.assert_allclose(ours["sequence_output"][:, :width][mask],
                             served["sequence_output"].numpy()[mask], rtol=0, atol=1e-5)
  np.testing.assert_allclose(ours["pooled_output"], served["pooled_output"], rtol=0,
                             atol=1e-5)


def test_sources_that_are_not_or_lack_the_part_are_one_line_errors(
    tmp_path, model_dir, official, encoder, bert_vocab):
  prefix, hparams = official
  (tmp_path / "empty").mkdir()
  (tmp_path / "notes.txt").write_text("not a checkpoint\n")
  disc_only = tmp_path / "disc_only"
  disc_only.mkdir()
  checkpoints.save_official_checkpoint(encoder.encoder, str(disc_only / "model.ckpt"))
  (tmp_path / "junk").mkdir()
  (tmp_path / "junk" / "model.ckpt.index").write_text("not an index\n")
  electric_hparams = json.loads((ELECTRIC / "variables.json").read_text())["hparams"]
  no_vocab = tmp_path / "electric_no_vocab"
  no_vocab.mkdir()
  for path in ELECTRIC.glob("model.ckpt.*"):
    shutil.copy(path, no_vocab)
  assert electra_tf.load_pretrainer(str(ELECTRIC / "model.ckpt"),
                                    electric_hparams).objective.name == "electric"
  cases = [
      (lambda: electra_tf.load_encoder(str(tmp_path / "nope")),
       f"checkpoint {tmp_path}/nope: not found (no {tmp_path}/nope.index and not a directory)"),
      (lambda: electra_tf.load_encoder(str(tmp_path / "empty")),
       f"checkpoint {tmp_path}/empty: directory holds no checkpoint"),
      (lambda: electra_tf.load_tokenizer(str(tmp_path / "notes.txt")),
       f"checkpoint {tmp_path}/notes.txt: not found"),
      (lambda: electra_tf.load_encoder(str(tmp_path / "junk" / "model.ckpt")),
       f"checkpoint {tmp_path}/junk/model.ckpt is damaged ("),
      (lambda: electra_tf.load_encoder(prefix, {"model_size": "small"}),
       f"checkpoint {prefix}: variable electra/embeddings/word_embeddings has shape "
       "[30522, 16] there but the model expects [30522, 128]"),
      (lambda: electra_tf.load_encoder(str(model_dir), {"embedding_size": 32}),
       f"hparam embedding_size: 32 contradicts the 16 that {model_dir}/electra_config.json "
       "records"),
      (lambda: electra_tf.load_generator(str(disc_only / "model.ckpt"), hparams),
       f"{disc_only}/model.ckpt: holds no generator (no generator_predictions/ variables): a "
       "discriminator alone, which load_encoder reads"),
      (lambda: electra_tf.load_pretrainer(str(SAVED / "discriminator")),
       f"{SAVED}/discriminator: a discriminator alone, without the generator the "
       "pre-trainer needs"),
      (lambda: electra_tf.load_generator(str(SAVED / "generator")),
       f"--from_hf: {SAVED}/generator is a generator (ElectraForMaskedLM); give the "
       "discriminator first"),
      (lambda: electra_tf.load_generator(str(ELECTRIC / "model.ckpt"), electric_hparams),
       f"{ELECTRIC}/model.ckpt: the electric objective has no one-tower generator"),
      (lambda: electra_tf.load_pretrainer(str(no_vocab / "model.ckpt"), electric_hparams),
       "vocab_file: the electric objective needs the vocab's special ids and no vocab.txt "
       f"lies beside {no_vocab}/model.ckpt"),
      (lambda: electra_tf.load_tokenizer(prefix, hparams),
       f"vocab_file: no vocab.txt lies beside {prefix}; give the model's vocab file"),
      (lambda: electra_tf.load_tokenizer(str(model_dir), max_seq_length=1024),
       "hparam max_seq_length: 1024 exceeds max_position_embeddings 512"),
      (lambda: electra_tf.Tokenizer(str(bert_vocab), max_seq_length=2),
       "max_seq_length: 2 leaves no room for a text ([CLS] and [SEP] take 2, a pair 3)"),
      (lambda: electra_tf.create_optimizer(100),
       "create_optimizer: layerwise_lr_decay needs the encoder (its number of layers)"),
  ]
  for load, message in cases:
    with pytest.raises(UserError) as raised:
      load()
    assert message in str(raised.value) and "\n" not in str(raised.value), raised.value


# One fresh process (a user's: no TF_USE_LEGACY_KERAS) that
# does what the issue asks of the API, all at once.
FRESH_PROCESS = r"""
import json, os, sys
import numpy as np
import electra_tf
assert "tensorflow" not in sys.modules and "TF_USE_LEGACY_KERAS" not in os.environ
import tensorflow as tf, tf_keras as keras

model_dir, official, hparams, vocab, hf_folders, export_dir, out = sys.argv[1:]
texts = ["a gripping, funny film", "dull and far too long", "the cast is superb",
         "nothing works here"]
labels = np.array([1, 0, 1, 0])
for source, kwargs in ((official, {"hparams": json.loads(hparams)}), (hf_folders, {})):
  encoder = electra_tf.load_encoder(source, **kwargs)
  tokenizer = electra_tf.load_tokenizer(source, vocab_file=vocab if kwargs else None,
                                        **kwargs)
  assert encoder(tokenizer(texts))["pooled_output"].shape == (4, encoder.config.hidden_size)
encoder = electra_tf.load_encoder(model_dir)
tokenizer = electra_tf.load_tokenizer(model_dir, max_seq_length=32)
inputs = tokenizer(texts)
keras.utils.set_random_seed(0)
served = tf.saved_model.load(export_dir).signatures["text"](text=tf.constant(texts))
mask = served["input_mask"].numpy().astype(bool)
ours = encoder(inputs)["sequence_output"].numpy()[:, :mask.shape[1]]
pooled = encoder(encoder.input)["pooled_output"]
model = keras.Model(encoder.input, keras.layers.Dense(2)(pooled))
model.compile(optimizer=electra_tf.create_optimizer(6, encoder, learning_rate=1e-3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
history = model.fit(inputs, labels, epochs=6, verbose=0).history["loss"]
model.save("classifier.keras")
reloaded = keras.models.load_model("classifier.keras")
json.dump({"savedmodel": float(np.abs(ours[mask] - served["sequence_output"].numpy()[mask]).max()),
           "loss": history, "reloaded": float(np.abs(reloaded(inputs) - model(inputs)).max()),
           "legacy_keras": os.environ.get("TF_USE_LEGACY_KERAS")}, open(out, "w"))
"""


@pytest.mark.slow
def test_a_fresh_process_loads_trains_saves_and_matches_the_export(
    model_dir, official, bert_vocab, export_dir, tmp_path):
  prefix, hparams = official
  # (PYTHONPATH: this checkout, as conftest.py sets it, as `pip install -e` would)
  env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
  out = tmp_path / "out.json"
  subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(model_dir), prefix,
                  json.dumps(hparams), str(bert_vocab), str(SAVED), export_dir, str(out)],
                 cwd=tmp_path, env=env, check=True)
  result = json.loads(out.read_text())
  assert result["loss"][-1] < result["loss"][0], result["loss"]
  assert result["reloaded"] == 0.0 and result["savedmodel"] < 1e-5
  assert result["legacy_keras"] is None
