"""Checkpoint conversions: Google's official TF1 layout, the project's, and
transformers' ELECTRA folders (the command, `python -m electra_tf.convert`:
electra_tf/commands/convert.py)."""

from __future__ import annotations

import json
import os
from typing import Callable, Dict, List, NamedTuple, Optional

import numpy as np

from electra_tf import checkpoints
from electra_tf import config as config_lib
from electra_tf import hf
from electra_tf import train_loop
from electra_tf import vocabulary
from electra_tf.errors import CheckpointError, ConfigError, DataError
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.modeling.pretrainer import ElectraPretrainer
from electra_tf.pretrain.model import build_model


def _write_checkpoint_dir(output_dir: str, save: Callable[[str], object]) -> str:
  """save(directory) into a fresh output_dir (written under a temporary name:
  its checkpoint `model.ckpt` and what goes beside it), then the `checkpoint`
  state file; returns the checkpoint's prefix."""
  with checkpoints.atomic_output_dir(output_dir, "--output_dir") as tmp_dir:
    save(tmp_dir)
    checkpoints.write_checkpoint_state(tmp_dir)
  return os.path.join(output_dir, checkpoints.CHECKPOINT_NAME)


def official_to_project(official_checkpoint: str, config: PretrainingConfig,
                        output_dir: str, vocab_file: Optional[str] = None) -> str:
  """Official TF1 checkpoint -> project checkpoint; returns its prefix.

  Beside it go the architecture record a pre-training model_dir has
  (electra_config.json: `config`'s architecture and casing) and, given
  `vocab_file`, the vocab as vocab.txt, so that the commands that read the
  checkpoint (export, fine-tuning, conversion) need neither again.
  """
  prefix = checkpoints.resolve_checkpoint(official_checkpoint)
  if checkpoints.is_project_checkpoint(prefix):
    raise CheckpointError(f"--official_checkpoint: {prefix} is already a project "
                          "checkpoint (object-based); nothing to convert")
  if vocab_file:
    from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
    vocab = tokenization.load_vocab(vocab_file)
    tokenization.check_vocab_size(vocab, config.vocab_size, vocab_file)
    tokenization.special_ids(vocab, vocab_file)
    tokenization.check_vocab_casing(vocab, config.do_lower_case, vocab_file,
                                    "--do_lower_case")
  pretrainer = build_model(config)
  checkpoints.restore_from_checkpoint(pretrainer, prefix, allow_unused=False)

  def save(directory: str) -> None:
    checkpoints.save_project_checkpoint(
        pretrainer, os.path.join(directory, checkpoints.CHECKPOINT_NAME))
    train_loop.write_run_record(directory, config_lib.ARCHITECTURE_RECORD,
                                config.architecture())
    if vocab_file:
      train_loop.keep_vocab_beside(directory, vocab_file)

  return _write_checkpoint_dir(output_dir, save)


def project_to_official(checkpoint: str, config: PretrainingConfig,
                        output_dir: str) -> str:
  """Project checkpoint -> official TF1 checkpoint; returns its prefix."""
  prefix = checkpoints.resolve_checkpoint(checkpoint)
  pretrainer = build_model(config)
  checkpoints.restore_from_checkpoint(pretrainer, prefix)
  return _write_checkpoint_dir(
      output_dir, lambda directory: checkpoints.save_official_checkpoint(
          pretrainer, os.path.join(directory, checkpoints.CHECKPOINT_NAME)))


def _model_values(model) -> Dict[str, np.ndarray]:
  return {name: variable.numpy()
          for name, variable in checkpoints.named_variables(model).items()}


def project_to_hf(checkpoint: str, config: PretrainingConfig, vocab_file: str,
                  do_lower_case: bool, output_dir: str, encoder_only: bool = False,
                  command: str = "") -> List[str]:
  """Project (or official) checkpoint -> transformers folders under output_dir
  (discriminator + generator, or the encoder alone); returns their paths."""
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  from electra_tf.modeling.encoder import build_discriminator_encoder  # pylint: disable=g-import-not-at-top
  if not encoder_only:
    hf.check_exportable(config, "--to_hf")
  tokenization.check_vocab_size(tokenization.load_vocab(vocab_file), config.vocab_size,
                                vocab_file)
  prefix = checkpoints.resolve_checkpoint(checkpoint)
  provenance = checkpoint_provenance(prefix, command)
  trained = provenance.runs[-1]["hparams"].get("do_lower_case") if provenance.runs else None
  if trained is not None and trained != do_lower_case:
    raise ConfigError(
        f"--do_lower_case: {prefix} was pre-trained with do_lower_case "
        f"{str(trained).lower()} "
        f"({os.path.join(os.path.dirname(prefix), config_lib.TRAINING_RECORD)}); pass "
        f"--{'' if trained else 'no'}do_lower_case")
  embedding_size = config.effective_embedding_size
  if encoder_only:
    model = build_discriminator_encoder(config.encoder_config(), embedding_size)
    checkpoints.restore_from_checkpoint(model, prefix, allow_unused=True)
    parts = {"encoder": config.encoder_config()}
  else:
    model = build_model(config)
    checkpoints.restore_from_checkpoint(model, prefix)
    parts = {"discriminator": config.encoder_config(), "generator": config.generator_config()}
  return hf.export_model(_model_values(model), parts, embedding_size, vocab_file,
                         do_lower_case, output_dir, provenance)


def _json_file(path: str) -> Optional[Dict]:
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def checkpoint_provenance(prefix: str, command: str) -> hf.Provenance:
  """What the checkpoint's directory tells of its training: the pre-training
  job's training record, the step, and the evaluation of that step; for a
  fine-tuned checkpoint (MODEL_DIR/trial_<n>/), the fine-tuning job's record,
  its dev metrics, and the training record of its initial checkpoint."""
  directory = os.path.dirname(prefix)
  finetuning = None
  record_dir = config_lib.record_directory(prefix)
  record = _json_file(os.path.join(record_dir, config_lib.FINETUNING_RECORD))
  if record is not None:
    results = {task: _json_file(os.path.join(record_dir, "results",
                                             f"{task}_dev_metrics.json")) or {}
               for task in record.get("task_names", [])}
    finetuning = {"hparams": record, "results": results}
    init = record.get("init_checkpoint") or ""
    directory = config_lib.checkpoint_directory(init) if os.path.exists(init) else ""
  results = _json_file(os.path.join(directory, "results", "unsup_results.json")) \
      if record is None else None
  runs = config_lib.training_runs(directory) if directory else []
  return hf.Provenance(runs, checkpoints.training_step(prefix), results, command, prefix,
                       finetuning)


def _hparams_from_hf(disc: config_lib.ModelConfig, embedding_size: int,
                     gen: Optional[config_lib.ModelConfig]) -> Dict:
  """Official hparams that build these encoders (the generator a fraction of
  the discriminator, as the official get_generator_config)."""
  hparams = {"model_size": config_lib.size_of_hidden(disc.hidden_size) or "small",
             "vocab_size": disc.vocab_size, "embedding_size": embedding_size,
             "model_hparam_overrides": {
                 key: getattr(disc, key) for key in (
                     "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size")},
             "max_seq_length": min(128, disc.max_position_embeddings)}
  if gen is not None:
    hparams.update(generator_hidden_size=gen.hidden_size / disc.hidden_size,
                   generator_layers=gen.num_hidden_layers / disc.num_hidden_layers)
  return hparams


class HfImport(NamedTuple):
  """transformers folders read into this project's model (`read_hf`)."""
  hparams: Dict  # the official hparams that build the model (do_lower_case included)
  vocab: List[str]  # the WordPiece vocab, in id order
  model: ElectraPretrainer  # with the folders' weights (a discriminator alone: its own)
  loaded: List[str]  # the official names of the variables the folders gave


def _check_given_tokenizer(tokenizer: hf.Tokenizer, vocab_file: Optional[str],
                           do_lower_case: Optional[bool]) -> None:
  """DataError when the user's --vocab_file or --do_lower_case is not the
  transformers folder's own tokenizer (`tokenizer`), which --from_hf takes."""
  if vocab_file:
    difference = vocabulary.vocab_difference(list(vocabulary.load_vocab(vocab_file)),
                                             tokenizer.vocab)
    if difference:
      raise DataError(f"--vocab_file {vocab_file}: not the vocab of the model, "
                      f"{tokenizer.files[0]} ({difference}); leave --vocab_file out: "
                      "--from_hf takes the folder's own")
  if do_lower_case is not None and do_lower_case != tokenizer.do_lower_case:
    raise DataError(f"--{'' if do_lower_case else 'no'}do_lower_case: the model's tokenizer "
                    f"({', '.join(tokenizer.files)}) "
                    f"{'lower-cases' if tokenizer.do_lower_case else 'keeps the case'}; leave "
                    "the flag out: --from_hf takes the folder's own casing")


def read_hf(folders: List[str], vocab_file: Optional[str] = None,
            do_lower_case: Optional[bool] = None) -> HfImport:
  """transformers folders (discriminator[, generator]) -> the model they hold.

  Strict as `python -m electra_tf.convert --from_hf`: a folder, tensor,
  config field or tokenizer this project cannot hold exactly is a one-line
  UserError naming it.  Of a discriminator alone, the model's generator keeps
  its initial values (`loaded` says which variables the folders gave).  The
  vocab and casing are the folders' own; a `vocab_file` or `do_lower_case`
  the user gives (--vocab_file, --do_lower_case) must be those.
  """
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  if not 1 <= len(folders) <= 2 or not all(folders):
    raise ConfigError(f"--from_hf: give DISC_DIR or DISC_DIR,GEN_DIR, not "
                      f"{','.join(folders) or 'nothing'} ({len(folders)} folders)")
  disc_json, disc_tensors = hf.read_folder(folders[0])
  if hf.ARCHITECTURES["generator"] in (disc_json.get("architectures") or []):
    raise DataError(f"--from_hf: {folders[0]} is a generator (ElectraForMaskedLM); give the "
                    "discriminator first: DISC_DIR or DISC_DIR,GEN_DIR")
  disc, embedding_size = hf.model_config(disc_json, os.path.join(folders[0], "config.json"))
  tokenizer = hf.read_tokenizer(folders[0])
  gen = None
  if len(folders) == 2:
    gen_json, gen_tensors = hf.read_folder(folders[1])
    gen, gen_embedding = hf.model_config(gen_json, os.path.join(folders[1], "config.json"))
    if "ElectraForMaskedLM" not in gen_json.get("architectures", ["ElectraForMaskedLM"]):
      raise DataError(f"--from_hf: {folders[1]} is a {gen_json['architectures'][0]}, not "
                      "the generator (ElectraForMaskedLM)")
    if gen_embedding != embedding_size:
      raise DataError(f"--from_hf: the generator's embedding_size {gen_embedding} differs "
                      f"from the discriminator's {embedding_size} (they share the table)")
    if any(os.path.isfile(os.path.join(folders[1], name))
           for name in ("vocab.txt", "tokenizer.json")):
      gen_tokenizer = hf.read_tokenizer(folders[1])
      if gen_tokenizer[:2] != tokenizer[:2]:
        raise DataError(f"--from_hf: {tokenizer.files[0]} and {gen_tokenizer.files[0]} "
                        "hold different tokenizers (vocab or casing); the pair shares one")
  _check_given_tokenizer(tokenizer, vocab_file, do_lower_case)
  vocab = {token: i for i, token in enumerate(tokenizer.vocab)}
  if len(vocab) != disc.vocab_size:
    raise DataError(f"--from_hf: {os.path.join(folders[0], 'config.json')} says vocab_size "
                    f"{disc.vocab_size}, {tokenizer.files[0]} holds {len(vocab)} entries")
  tokenization.special_ids(vocab, tokenizer.files[0])
  hparams = _hparams_from_hf(disc, embedding_size, gen)
  hparams["do_lower_case"] = tokenizer.do_lower_case
  config = PretrainingConfig.create(hparams)
  if gen is not None:
    built = config.generator_config()
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
      if getattr(built, key) != getattr(gen, key):
        raise DataError(f"--from_hf: the generator's {key} {getattr(gen, key)} is not the "
                        f"official rule's {getattr(built, key)} for this discriminator "
                        "(get_generator_config), so this project cannot build it")
  model = build_model(config)
  if len(folders) == 2:
    parts = [("discriminator", disc, disc_tensors, folders[0]),
             ("generator", gen, gen_tensors, folders[1])]
  else:
    arch = disc_json.get("architectures", ["ElectraModel"])[0]
    parts = [("encoder" if arch == "ElectraModel" else "discriminator", disc, disc_tensors,
              folders[0])]
  variables = checkpoints.named_variables(model)
  shapes = {name: tuple(v.shape) for name, v in variables.items()}
  read = []
  for part, model_config, tensors, folder in parts:
    tensor_map = hf.tensor_map(part, model_config, embedding_size)
    source = os.path.join(folder, hf.WEIGHTS_NAME)
    read.append((hf.from_hf(tensors, tensor_map, shapes, source), tensor_map, source))
  values = hf.merge_parts(read)
  if len(folders) == 2:
    missing = sorted(set(variables) - set(values))
    if missing:
      raise DataError(f"--from_hf: nothing in the folders gives the model's {missing[0]}")
  for name, value in values.items():
    variables[name].assign(value)
  return HfImport(hparams, tokenizer.vocab, model, sorted(values))


def hf_to_project(folders: List[str], output_dir: str, vocab_file: Optional[str] = None,
                  do_lower_case: Optional[bool] = None) -> str:
  """transformers folders (discriminator[, generator]) -> output_dir/model.ckpt,
  hparams.json, vocab.txt (`read_hf`, which checks `vocab_file` and
  `do_lower_case`); returns the checkpoint prefix."""
  imported = read_hf(folders, vocab_file, do_lower_case)
  variables = checkpoints.named_variables(imported.model)
  with checkpoints.atomic_output_dir(output_dir, "--output_dir") as tmp_dir:
    prefix = os.path.join(tmp_dir, checkpoints.CHECKPOINT_NAME)
    if len(folders) == 2:
      checkpoints.save_project_checkpoint(imported.model, prefix)
    else:  # the discriminator's variables alone, official layout (no generator)
      checkpoints.save_official_checkpoint([variables[name] for name in imported.loaded],
                                           prefix)
    checkpoints.write_checkpoint_state(tmp_dir)
    with open(os.path.join(tmp_dir, "hparams.json"), "w", encoding="utf-8") as f:
      json.dump(imported.hparams, f, indent=1, sort_keys=True)
    with open(os.path.join(tmp_dir, "vocab.txt"), "w", encoding="utf-8") as f:
      f.writelines(token + "\n" for token in imported.vocab)
  return os.path.join(output_dir, checkpoints.CHECKPOINT_NAME)
