"""Hugging Face transformers' ELECTRA layout: the name map and the files.

`tensor_map` is the one table of both directions between official names and
transformers' (dense kernels transposed to [out, in]).  Parts:
"discriminator" -> ElectraForPreTraining, "generator" -> ElectraForMaskedLM,
"encoder" -> ElectraModel.  Safetensors via its numpy API, no torch.
docs/huggingface.md.
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from electra_tf.config import INITIALIZER_RANGE, LAYER_NORM_EPSILON, SHAPE_KEYS, ModelConfig
from electra_tf.errors import ConfigError, DataError

PARTS = ("discriminator", "generator", "encoder")
ARCHITECTURES = {"discriminator": "ElectraForPreTraining", "generator": "ElectraForMaskedLM",
                 "encoder": "ElectraModel"}
WEIGHTS_NAME = "model.safetensors"
# erf gelu, as the official code: transformers' "gelu" is torch's exact erf
# form ("gelu_new" is the tanh approximation; docs/huggingface.md measures both).
HIDDEN_ACT = "gelu"


class Tensor(NamedTuple):
  official: str    # official TF1 name
  hf: str          # transformers state-dict name
  transpose: bool  # a dense kernel: [in, out] here, [out, in] there


def _dense(official: str, hf: str) -> List[Tensor]:
  return [Tensor(f"{official}/kernel", f"{hf}.weight", True),
          Tensor(f"{official}/bias", f"{hf}.bias", False)]


def _layer_norm(official: str, hf: str) -> List[Tensor]:
  return [Tensor(f"{official}/gamma", f"{hf}.weight", False),
          Tensor(f"{official}/beta", f"{hf}.bias", False)]


def _encoder(scope: str, prefix: str, num_layers: int, project: bool) -> List[Tensor]:
  """The embeddings (always the shared `electra/embeddings`) and the layers of
  the encoder under the official `scope`, as transformers' ElectraModel at
  `prefix` ("electra." in a task model, "" alone)."""
  tensors = [Tensor(f"electra/embeddings/{table}_embeddings",
                    f"{prefix}embeddings.{table}_embeddings.weight", False)
             for table in ("word", "position", "token_type")]
  tensors += _layer_norm("electra/embeddings/LayerNorm", f"{prefix}embeddings.LayerNorm")
  if project:
    tensors += _dense(f"{scope}/embeddings_project", f"{prefix}embeddings_project")
  for i in range(num_layers):
    ours, theirs = f"{scope}/encoder/layer_{i}", f"{prefix}encoder.layer.{i}"
    for proj in ("query", "key", "value"):
      tensors += _dense(f"{ours}/attention/self/{proj}", f"{theirs}.attention.self.{proj}")
    tensors += _dense(f"{ours}/attention/output/dense", f"{theirs}.attention.output.dense")
    tensors += _layer_norm(f"{ours}/attention/output/LayerNorm",
                           f"{theirs}.attention.output.LayerNorm")
    tensors += _dense(f"{ours}/intermediate/dense", f"{theirs}.intermediate.dense")
    tensors += _dense(f"{ours}/output/dense", f"{theirs}.output.dense")
    tensors += _layer_norm(f"{ours}/output/LayerNorm", f"{theirs}.output.LayerNorm")
  return tensors


def tensor_map(part: str, model: ModelConfig, embedding_size: int) -> List[Tensor]:
  """Every tensor of `part` (PARTS) for the encoder config `model` (the
  generator's config for part "generator")."""
  project = embedding_size != model.hidden_size
  if part == "encoder":
    return _encoder("electra", "", model.num_hidden_layers, project)
  if part == "discriminator":
    return (_encoder("electra", "electra.", model.num_hidden_layers, project)
            + _dense("discriminator_predictions/dense", "discriminator_predictions.dense")
            + _dense("discriminator_predictions/dense_1",
                     "discriminator_predictions.dense_prediction"))
  if part == "generator":
    return (_encoder("generator", "electra.", model.num_hidden_layers, project)
            + _dense("generator_predictions/dense", "generator_predictions.dense")
            + _layer_norm("generator_predictions/LayerNorm", "generator_predictions.LayerNorm")
            # The output layer is the (tied) word embeddings and a bias.
            + [Tensor("electra/embeddings/word_embeddings", "generator_lm_head.weight", False),
               Tensor("generator_predictions/output_bias", "generator_lm_head.bias", False)])
  raise ValueError(f"part {part!r}: one of {PARTS}")


def to_hf(values: Mapping[str, np.ndarray], tensors: List[Tensor]) -> Dict[str, np.ndarray]:
  """Official name -> value  to  transformers name -> value (contiguous float32)."""
  return {t.hf: np.ascontiguousarray(values[t.official].T if t.transpose
                                     else values[t.official], dtype=np.float32)
          for t in tensors}


def from_hf(tensors_hf: Mapping[str, np.ndarray], tensors: List[Tensor],
            shapes: Mapping[str, Tuple[int, ...]], source: str) -> Dict[str, np.ndarray]:
  """transformers name -> value  to  official name -> value, strictly: a
  missing, unknown or mis-shaped tensor is a DataError naming it. `shapes`
  are the official shapes the model expects."""
  expected = {t.hf for t in tensors}
  unknown = sorted(set(tensors_hf) - expected)
  if unknown:
    raise DataError(f"{source}: unknown tensor {unknown[0]}"
                    + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
                    + " for this config's ELECTRA")
  values: Dict[str, np.ndarray] = {}
  for t in tensors:
    if t.hf not in tensors_hf:
      raise DataError(f"{source}: missing tensor {t.hf}")
    value = np.asarray(tensors_hf[t.hf])
    value = value.T if t.transpose else value
    if tuple(value.shape) != tuple(shapes[t.official]):
      raise DataError(f"{source}: tensor {t.hf} has shape "
                      f"{list(value.T.shape if t.transpose else value.shape)}, the config "
                      f"needs {list(shapes[t.official][::-1] if t.transpose else shapes[t.official])}")
    if t.official in values and not np.array_equal(values[t.official], value):
      raise DataError(f"{source}: tensor {t.hf} differs from the word embeddings it is "
                      "tied to")
    values[t.official] = value.astype(np.float32)
  return values


# ------------------------------------------------------------------ config
def hf_config(part: str, model: ModelConfig, embedding_size: int) -> Dict:
  """transformers' ElectraConfig fields for `part` of encoder config `model`."""
  return {
      "architectures": [ARCHITECTURES[part]], "model_type": "electra",
      "vocab_size": model.vocab_size, "embedding_size": embedding_size,
      "hidden_size": model.hidden_size, "num_hidden_layers": model.num_hidden_layers,
      "num_attention_heads": model.num_attention_heads,
      "intermediate_size": model.intermediate_size, "hidden_act": HIDDEN_ACT,
      "hidden_dropout_prob": model.hidden_dropout_prob,
      "attention_probs_dropout_prob": model.attention_probs_dropout_prob,
      "max_position_embeddings": model.max_position_embeddings,
      "type_vocab_size": model.type_vocab_size, "initializer_range": model.initializer_range,
      "layer_norm_eps": LAYER_NORM_EPSILON, "pad_token_id": 0,
      "position_embedding_type": "absolute", "summary_type": "first",
      "summary_use_proj": True, "summary_activation": "gelu", "summary_last_dropout": 0.1,
  }


def model_config(hf: Mapping, source: str) -> Tuple[ModelConfig, int]:
  """An HF ElectraConfig -> (our encoder config, embedding size); a field
  this project cannot build (another activation, eps, position type) is a
  one-line error naming it."""
  if hf.get("model_type") != "electra":
    raise DataError(f"{source}: model_type {hf.get('model_type')!r} is not electra")
  checks = (("hidden_act", HIDDEN_ACT), ("position_embedding_type", "absolute"))
  for key, want in checks:
    if hf.get(key, want) != want:
      raise DataError(f"{source}: {key} {hf[key]!r}: this project builds {want!r} only")
  if abs(float(hf.get("layer_norm_eps", LAYER_NORM_EPSILON)) - LAYER_NORM_EPSILON) > 1e-15:
    raise DataError(f"{source}: layer_norm_eps {hf['layer_norm_eps']}: this project "
                    f"builds {LAYER_NORM_EPSILON} (official)")
  try:
    config = ModelConfig(
        vocab_size=int(hf["vocab_size"]), hidden_size=int(hf["hidden_size"]),
        num_hidden_layers=int(hf["num_hidden_layers"]),
        num_attention_heads=int(hf["num_attention_heads"]),
        intermediate_size=int(hf["intermediate_size"]),
        hidden_dropout_prob=float(hf.get("hidden_dropout_prob", 0.1)),
        attention_probs_dropout_prob=float(hf.get("attention_probs_dropout_prob", 0.1)),
        max_position_embeddings=int(hf.get("max_position_embeddings", 512)),
        type_vocab_size=int(hf.get("type_vocab_size", 2)),
        initializer_range=float(hf.get("initializer_range", INITIALIZER_RANGE)))
    embedding_size = int(hf.get("embedding_size", hf["hidden_size"]))
  except KeyError as e:
    raise DataError(f"{source}: config field {e.args[0]} is missing") from None
  return config, embedding_size


# ------------------------------------------------------------------ files
# transformers' generator output layer is the word table: save_pretrained
# leaves it out of model.safetensors when tie_word_embeddings (its default).
TIED_OUTPUT = "generator_lm_head.weight"
WORD_EMBEDDINGS = "electra.embeddings.word_embeddings.weight"


def _check_folder(folder: str) -> None:
  if not os.path.exists(folder):
    raise DataError(f"--from_hf: {folder} does not exist")
  if not os.path.isdir(folder):
    raise DataError(f"--from_hf: {folder} is a file, not a transformers model folder")


def read_folder(folder: str) -> Tuple[Dict, Dict[str, np.ndarray]]:
  """(config.json, the safetensors tensors) of an HF model folder; a tied
  generator output layer that the file leaves out is the word table, as
  transformers ties it."""
  from safetensors import SafetensorError  # pylint: disable=g-import-not-at-top
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
  _check_folder(folder)
  config_path = os.path.join(folder, "config.json")
  weights = os.path.join(folder, WEIGHTS_NAME)
  if not os.path.isfile(config_path):
    raise DataError(f"--from_hf: {folder} has no config.json (not a transformers model folder)")
  with open(config_path, encoding="utf-8") as f:
    try:
      config = json.load(f)
    except json.JSONDecodeError as e:
      raise DataError(f"--from_hf: {config_path}: not JSON ({e})") from None
  if not os.path.isfile(weights):
    if os.path.isfile(os.path.join(folder, "pytorch_model.bin")):
      head = next((a for a in config.get("architectures") or [] if a in ARCHITECTURES.values()),
                  None)
      raise DataError(
          f"--from_hf: {folder} holds pytorch_model.bin, which only torch can read; convert "
          "it once where torch is installed, with its head class (ElectraForPreTraining for "
          "a discriminator, ElectraForMaskedLM for a generator): python -c \"from "
          f"transformers import {head or 'ElectraForPreTraining'} as M; "
          f"M.from_pretrained('{folder}').save_pretrained('{folder}')\"")
    raise DataError(f"--from_hf: {folder} has no {WEIGHTS_NAME}")
  try:
    tensors = load_file(weights)
  except (SafetensorError, OSError) as e:
    raise DataError(f"--from_hf: {weights}: unreadable ({e})") from None
  if (ARCHITECTURES["generator"] in (config.get("architectures") or [])
      and config.get("tie_word_embeddings", True) and TIED_OUTPUT not in tensors
      and WORD_EMBEDDINGS in tensors):
    tensors[TIED_OUTPUT] = tensors[WORD_EMBEDDINGS]
  return config, tensors


def merge_parts(parts: List[Tuple[Dict[str, np.ndarray], List[Tensor], str]]
                ) -> Dict[str, np.ndarray]:
  """The official-name values of several parts (values, their tensor map,
  their file) as one model: a tensor that two parts share (the embeddings)
  must be the same in both, since this project holds one copy."""
  values: Dict[str, np.ndarray] = {}
  owner: Dict[str, str] = {}
  for part_values, tensors, source in parts:
    hf_names: Dict[str, str] = {}
    for t in tensors:
      hf_names.setdefault(t.official, t.hf)
    for name, value in part_values.items():
      if name in values and not np.array_equal(values[name], value):
        raise DataError(
            f"--from_hf: {owner[name]} and {source} hold different {hf_names[name]} (max "
            f"|difference| {float(np.max(np.abs(values[name] - value))):.3g}); this "
            "project's discriminator and generator share one embedding table, so it cannot "
            "hold this pair")
      values.setdefault(name, value)
      owner.setdefault(name, source)
  return values


class Tokenizer(NamedTuple):
  vocab: List[str]     # the WordPiece entries in id order
  do_lower_case: bool
  files: Tuple[str, ...]  # the files they were read from, the vocab's first


def _wordpiece_vocab(path: str) -> Tuple[List[str], Optional[bool]]:
  """The vocab (in id order) and lowercasing of a tokenizers tokenizer.json,
  which must be BERT's WordPiece tokenizer (this project's)."""
  with open(path, encoding="utf-8") as f:
    try:
      spec = json.load(f)
    except json.JSONDecodeError as e:
      raise DataError(f"--from_hf: {path}: not JSON ({e})") from None
  model = spec.get("model") or {}
  if (model.get("type") != "WordPiece" or model.get("continuing_subword_prefix", "##") != "##"
      or not isinstance(model.get("vocab"), dict)):
    raise DataError(f"--from_hf: {path}: model {model.get('type')!r} is not a WordPiece "
                    "vocab with ## continuations (BERT's tokenizer, this project's)")
  by_id = sorted((int(i), token) for token, i in model["vocab"].items())
  if [i for i, _ in by_id] != list(range(len(by_id))):
    raise DataError(f"--from_hf: {path}: the WordPiece ids are not 0..{len(by_id) - 1}")
  for added in spec.get("added_tokens") or []:
    if model["vocab"].get(added.get("content")) != added.get("id"):
      raise DataError(f"--from_hf: {path}: added token {added.get('content')!r} (id "
                      f"{added.get('id')}) is not in the WordPiece vocab")
  normalizer = spec.get("normalizer")
  lower = None
  if normalizer is not None:
    if normalizer.get("type") != "BertNormalizer":
      raise DataError(f"--from_hf: {path}: normalizer {normalizer.get('type')!r}: this "
                      "project's tokenizer is BERT's (BertNormalizer)")
    lower = bool(normalizer.get("lowercase", True))
    for key in ("clean_text", "handle_chinese_chars"):
      if not normalizer.get(key, True):
        raise DataError(f"--from_hf: {path}: normalizer {key} false: this project's "
                        "tokenizer always does it (BERT's)")
    _check_strip_accents(normalizer.get("strip_accents"), lower, path)
  return [token for _, token in by_id], lower


def _check_strip_accents(strip_accents, lower: bool, path: str) -> None:
  if strip_accents is not None and bool(strip_accents) != lower:
    raise DataError(f"--from_hf: {path}: strip_accents {strip_accents} with lowercasing "
                    f"{lower}: this project's tokenizer (BERT's) strips accents exactly when "
                    "it lower-cases")


def read_tokenizer(folder: str) -> Tokenizer:
  """The WordPiece vocab and casing of an HF model folder: vocab.txt, or
  tokenizer.json's WordPiece model (transformers 5 writes no vocab.txt);
  casing from tokenizer.json's normalizer, else tokenizer_config.json's
  do_lower_case, else lower-cased (transformers' default for ELECTRA's
  tokenizer). Files that disagree are a one-line error naming both."""
  paths = {name: os.path.join(folder, name)
           for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json")}
  present = {name: path for name, path in paths.items() if os.path.isfile(path)}
  vocab, lower, sources = None, None, []
  if "tokenizer.json" in present:
    vocab, lower = _wordpiece_vocab(present["tokenizer.json"])
    sources.append(present["tokenizer.json"])
  if "vocab.txt" in present:
    with open(present["vocab.txt"], encoding="utf-8") as f:
      lines = [line.rstrip("\n") for line in f]
    if vocab is not None and lines != vocab:
      raise DataError(f"--from_hf: {present['vocab.txt']} and {present['tokenizer.json']} "
                      "hold different vocabs")
    vocab = lines
    sources.insert(0, present["vocab.txt"])
  if vocab is None:
    raise DataError(f"--from_hf: {folder} has no vocab.txt or tokenizer.json (the model's "
                    "WordPiece vocab)")
  if "tokenizer_config.json" in present:
    with open(present["tokenizer_config.json"], encoding="utf-8") as f:
      try:
        tok_config = json.load(f)
      except json.JSONDecodeError as e:
        raise DataError(f"--from_hf: {present['tokenizer_config.json']}: not JSON ({e})") from None
    said = tok_config.get("do_lower_case")
    if said is not None and lower is not None and bool(said) != lower:
      raise DataError(f"--from_hf: {present['tokenizer_config.json']} says do_lower_case "
                      f"{said}, {present['tokenizer.json']} lowercasing {lower}")
    if lower is None and said is not None:
      lower = bool(said)
      sources.append(present["tokenizer_config.json"])
    _check_strip_accents(tok_config.get("strip_accents"), True if lower is None else lower,
                         present["tokenizer_config.json"])
  return Tokenizer(vocab, True if lower is None else lower, tuple(sources))


def tokenizer_files(do_lower_case: bool, max_length: int) -> Dict[str, Dict]:
  """tokenizer_config.json and special_tokens_map.json of our WordPiece."""
  special = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
             "cls_token": "[CLS]", "mask_token": "[MASK]"}
  return {"tokenizer_config.json": {"tokenizer_class": "ElectraTokenizer",
                                    "do_lower_case": do_lower_case,
                                    "strip_accents": None, "tokenize_chinese_chars": True,
                                    "model_max_length": max_length, **special},
          "special_tokens_map.json": special}


def write_folder(folder: str, part: str, model: ModelConfig, embedding_size: int,
                 tensors: Dict[str, np.ndarray], vocab_lines: List[str],
                 do_lower_case: bool, card: str) -> None:
  """One transformers model folder (config, weights, tokenizer files, card)."""
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  os.makedirs(folder)
  with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
    json.dump(hf_config(part, model, embedding_size), f, indent=2, sort_keys=True)
  save_file(tensors, os.path.join(folder, WEIGHTS_NAME), metadata={"format": "pt"})
  with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
    f.writelines(line + "\n" for line in vocab_lines)
  for name, content in tokenizer_files(do_lower_case, model.max_position_embeddings).items():
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
      json.dump(content, f, indent=2, sort_keys=True)
  with open(os.path.join(folder, "README.md"), "w", encoding="utf-8") as f:
    f.write(card)


def check_exportable(config, flag: str) -> None:
  """A ConfigError unless `config` (a PretrainingConfig) is an ELECTRA that
  transformers can hold: a one-tower generator with the discriminator's
  embeddings, and a discriminator (its objective's)."""
  from electra_tf.modeling import objectives  # pylint: disable=g-import-not-at-top
  objective = objectives.objective_class(config)
  if objective.two_tower or not objective.has_discriminator or (
      config.untied_generator_embeddings):
    raise ConfigError(f"{flag}: transformers' ELECTRA has a tied one-tower generator and a "
                      f"discriminator; this model (objective {objective.name}, "
                      f"untied_generator_embeddings {config.untied_generator_embeddings}) "
                      "has none (python -m electra_tf.convert --to_hf --encoder_only "
                      "exports its encoder)")


class Provenance(NamedTuple):
  """What an export knows of the checkpoint it converts, for the model card."""
  runs: List[Dict]  # the pre-training job's training record (none: not trained here)
  step: Optional[int]  # the checkpoint's training step, when it is a job's ckpt-<step>
  results: Optional[Mapping]  # its final evaluation (unsup_results.json), when known
  command: str  # the command that writes the folders
  checkpoint: str  # what is converted (a model_dir or a checkpoint prefix)
  # A fine-tuned checkpoint's job record (finetuning_config.json) as "hparams"
  # and its dev metrics per task as "results"; None for any other checkpoint.
  finetuning: Optional[Mapping] = None


def export_model(values: Mapping[str, np.ndarray], parts: Mapping[str, ModelConfig],
                 embedding_size: int, vocab_file: str, do_lower_case: bool, output_dir: str,
                 provenance: Provenance) -> List[str]:
  """Writes one folder per part (PARTS -> its encoder config) of the model
  whose official-name values are `values`, under a new output_dir (through a
  temporary directory); returns the folders."""
  from electra_tf import checkpoints  # pylint: disable=g-import-not-at-top
  with open(vocab_file, encoding="utf-8") as f:
    vocab_lines = [line.rstrip("\n") for line in f]
  written = []
  with checkpoints.atomic_output_dir(output_dir, "--to_hf") as tmp_dir:
    for part, model in parts.items():
      write_folder(os.path.join(tmp_dir, part), part, model, embedding_size,
                   to_hf(values, tensor_map(part, model, embedding_size)), vocab_lines,
                   do_lower_case, model_card(part, model, embedding_size, len(vocab_lines),
                                             do_lower_case, provenance))
      written.append(os.path.join(output_dir, part))
  return written


def card_hparams(config) -> Dict:
  """The scalar hyperparameters of a PretrainingConfig, for the model card,
  with model_hparam_overrides spelled out to the discriminator's whole shape
  (a resumed run's config holds the recorded shape, a first run's only what
  the user gave: both must read the same)."""
  hparams = {k: v for k, v in config.to_dict().items() if not isinstance(v, (dict, list))}
  shape = config.encoder_config().to_dict()
  hparams["model_hparam_overrides"] = {**{key: shape[key] for key in SHAPE_KEYS},
                                       **config.model_hparam_overrides}
  return hparams


# The hparams a card lists first: what a reader of a model card looks for.
CARD_KEYS = ("train_batch_size", "max_seq_length", "num_train_steps", "learning_rate",
             "num_warmup_steps", "mask_prob", "pretrain_tfrecords")


def _cell(value) -> str:
  """A metric as a card's table shows it (4 significant digits for floats)."""
  return f"{value:.4g}" if isinstance(value, float) else str(value)


# The keys of a pre-training evaluation (unsup_results.json) that say what
# was measured; the others are the official metrics and global_step.
EVALUATION_KEYS = ("checkpoint", "eval_records", "held_out", "eval_examples", "evaluated_at")


def evaluation_lines(results: Mapping) -> List[str]:
  """The heading and provenance of a pre-training evaluation
  (unsup_results.json): held-out or training records, which, when."""
  held_out = results.get("held_out")
  if held_out is None:
    return ["## Evaluation (unsup_results.json; the records it read were not recorded)"]
  records = results.get("eval_records", {})
  return [f"## Evaluation on {'held-out' if held_out else 'the training'} records "
          "(unsup_results.json)", "",
          f"{results.get('eval_examples')} examples of `{records.get('pattern')}` "
          f"({records.get('files')} files"
          + ("" if held_out else ", the records the model was trained on: not held out")
          + f"), checkpoint `{results.get('checkpoint')}`, {results.get('evaluated_at')}."]


def model_card(part: str, model: ModelConfig, embedding_size: int, vocab_size: int,
               do_lower_case: bool, provenance: Provenance) -> str:
  """README.md of an exported folder: what it is and what is known of how it
  was trained. Only a checkpoint with the pre-training job's training record
  gets its hparams and "pre-trained with electra-tf"; any other (Google's
  TF1 release, an import from transformers) gets what the checkpoint itself
  shows: its architecture, and the vocab and casing it was exported with."""
  runs, step, results = provenance.runs, provenance.step, provenance.results
  tuned = provenance.finetuning
  if tuned:
    tasks = ", ".join(tuned["hparams"].get("task_names", []))
    lines = [f"# ELECTRA {part} ({ARCHITECTURES[part]}), fine-tuned with electra-tf", "",
             f"The encoder of a model fine-tuned with electra-tf on {tasks} (the task heads "
             "are not part of this layout), converted to transformers' ELECTRA layout. The "
             "fine-tuning hparams and dev results below are the fine-tuning job's own files "
             "(finetuning_config.json and results/ in its model_dir)"
             + ("; the pre-training record is its initial checkpoint's." if runs else "."),
             ""]
  elif runs:
    lines = [f"# ELECTRA {part} ({ARCHITECTURES[part]}), pre-trained with electra-tf", "",
             "Pre-trained with electra-tf (a TensorFlow 2 reimplementation of the official "
             "google-research/electra code) and converted to transformers' ELECTRA layout. "
             "The training hparams below are the pre-training job's own record "
             "(training_runs.json in its model_dir).", ""]
  else:
    lines = [f"# ELECTRA {part} ({ARCHITECTURES[part]})", "",
             "Converted to transformers' ELECTRA layout by electra-tf from "
             f"`{provenance.checkpoint}`, which has no training record beside it "
             "(training_runs.json, written by electra-tf's pre-training): how it was "
             "trained is not known here. Google's TF1 release converted with "
             "`python -m electra_tf.convert --official_checkpoint` is such a checkpoint.", ""]
  if step is not None:
    lines.append(f"- checkpoint: step {step}")
  lines += [f"- vocab: {vocab_size} WordPiece entries, "
            f"{'lower-cased' if do_lower_case else 'cased'} (vocab.txt)"
            + ("" if runs or tuned else ", as the conversion was told"),
            f"- architecture: {model.num_hidden_layers} layers, hidden {model.hidden_size}, "
            f"heads {model.num_attention_heads}, feed-forward {model.intermediate_size}, "
            f"embeddings {embedding_size}, positions {model.max_position_embeddings}",
            f"- activation: {HIDDEN_ACT} (exact erf form, as the official code); "
            f"LayerNorm epsilon {LAYER_NORM_EPSILON}"]
  if tuned:
    lines += [f"- fine-tuned on: {tasks}",
              f"- initial checkpoint: {tuned['hparams'].get('init_checkpoint')}",
              "", "## Dev results", "", "| task | metric | value |", "|---|---|---|"]
    lines += [f"| {task} | {name} | {_cell(value)} |"
              for task, metrics in sorted(tuned["results"].items())
              for name, value in sorted(metrics.items())]
    lines += ["", "## Fine-tuning hyperparameters (official names)", "", "```json",
              json.dumps(tuned["hparams"], indent=1, sort_keys=True), "```"]
    if runs:
      lines += ["", "## Pre-training of the initial checkpoint", ""]
  if runs:
    hparams = runs[-1]["hparams"]
    lines += [f"- {key}: {hparams[key]}" for key in CARD_KEYS if key in hparams]
    for before, run in zip(runs, runs[1:]):
      changed = [f"{key} {before['hparams'].get(key)!r} -> {value!r}"
                 for key, value in sorted(run["hparams"].items())
                 if before["hparams"].get(key) != value]
      lines.append(f"- resumed at step {run['from_step']} with {'; '.join(changed)}")
    lines += ["", "## Hyperparameters (official names)", "", "```json",
              json.dumps(hparams, indent=1, sort_keys=True), "```"]
  if results and (step is None or results.get("global_step", step) == step):
    lines += ["", *evaluation_lines(results), "", "| metric | value |", "|---|---|"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in sorted(results.items())
              if k not in EVALUATION_KEYS]
  # the training commands, then the export's (the last run's own with --export_hf)
  commands = dict.fromkeys(c for c in [run.get("command") for run in runs]
                           + [provenance.command] if c)
  lines += ["", "## Made by", "", "```bash", *commands, "```", ""]
  return "\n".join(lines)
