"""What both jobs' configs share: the encoder's config and the hparam machinery.

`ModelConfig` is the official `modeling.BertConfig` (`encoder_config`: the
official `get_bert_config`).  `JobConfig`, the base of PretrainingConfig and
FinetuningConfig, holds the hparams both official configs share and
`create`, which resolves values in the official order: defaults, the user's
hparams (and flags of the same name), the job's defaults, the user's values
again, derived values, `validate`.  The architecture recorded beside a
checkpoint (`recorded_hparams`) and a rerun's recorded hparams fill what the
user did not give; a contradiction, an unknown hparam, a wrong type or a
value out of range is a one-line ConfigError.  docs/pretraining.md.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Tuple

from electra_tf.errors import ConfigError
from electra_tf.vocabulary import load_vocab, vocab_difference

# Official values that more than one module uses (each fact once).
BERT_VOCAB_SIZE = 30522  # BERT's uncased WordPiece vocab: the official vocab_size
BERT_MASK_ID = 103  # [MASK] in that vocab
INITIALIZER_RANGE = 0.02  # stddev of the truncated-normal weight initializer
LAYER_NORM_EPSILON = 1e-12  # tf.contrib.layers.layer_norm's, as official
DISC_WEIGHT = 50.0  # the discriminator loss's weight in the joint loss
MASK_PROB = 0.15  # share of the tokens masked

# The model sizes, as data: the encoder (official get_bert_config), the
# embedding width where it is not the hidden size (official: small's 128),
# the paper's Table 6 pre-training settings (`paper_hparams`; the official
# configure_pretraining.py carries them commented out) and the official
# fine-tuning defaults that depend on the size.  mask_prob and max_seq_length
# change max_predictions_per_seq, which is derived after them.
MODEL_SIZE_TABLE: Dict[str, Dict[str, Any]] = {
    "small": {"encoder": {"hidden_size": 256, "num_hidden_layers": 12},
              "embedding_size": 128, "paper_pretraining": {}, "finetuning": {}},
    "base": {"encoder": {"hidden_size": 768, "num_hidden_layers": 12},
             "paper_pretraining": {"max_seq_length": 512, "learning_rate": 2e-4,
                                   "embedding_size": 768, "generator_hidden_size": 0.33333,
                                   "train_batch_size": 256, "num_train_steps": 766000},
             "finetuning": {}},
    "large": {"encoder": {"hidden_size": 1024, "num_hidden_layers": 24},
              "paper_pretraining": {"max_seq_length": 512, "learning_rate": 2e-4,
                                    "embedding_size": 1024, "mask_prob": 0.25,
                                    "train_batch_size": 2048, "num_train_steps": 400000},
              "finetuning": {"learning_rate": 5e-5, "layerwise_lr_decay": 0.9}},
}
MODEL_SIZES = tuple(MODEL_SIZE_TABLE)


def size_of_hidden(hidden_size: int) -> Optional[str]:
  """The model size whose encoder has this hidden size, or None."""
  return next((name for name, size in MODEL_SIZE_TABLE.items()
               if size["encoder"]["hidden_size"] == hidden_size), None)
# --strategy values (distribution.create_strategy); fine-tuning runs on one host.
STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker_mirrored", "tpu")
FINETUNING_STRATEGIES = ("auto", "one_device", "mirrored", "tpu")
# None is float32; the others are tf_keras "mixed_<name>" dtype policies.
MIXED_PRECISIONS = (None, "bfloat16", "float16")
# The `optimizer` hparam: the official AdamWeightDecay, or LAMB (optimization.Lamb).
OPTIMIZERS = ("adamw", "lamb")

# What a checkpoint's directory records about its model: a pre-training
# model_dir's architecture record, the hparams `convert --from_hf` writes, and
# a fine-tuning model_dir's run record (its checkpoints are in trial_<n>/).
ARCHITECTURE_RECORD = "electra_config.json"
IMPORTED_HPARAMS = "hparams.json"
FINETUNING_RECORD = "finetuning_config.json"
VOCAB_NAME = "vocab.txt"  # the model's vocab, beside its checkpoints
# What a pre-training model_dir's checkpoints were trained with: each run's
# hparams and command, from the step it started at.
TRAINING_RECORD = "training_runs.json"
# The hparams such a record fixes: the architecture and the casing.
RECORDED_KEYS = ("model_size", "vocab_size", "embedding_size", "model_hparam_overrides",
                 "do_lower_case", "electra_objective", "electric_objective",
                 "two_tower_generator", "untied_generator", "untied_generator_embeddings",
                 "uniform_generator", "generator_hidden_size", "generator_layers")
# The ModelConfig fields that shape the weights (a recorded value wins over
# the defaults; a user's different value contradicts the checkpoint).
SHAPE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads",
              "intermediate_size", "hidden_act", "max_position_embeddings",
              "type_vocab_size")

# The official debug-mode shrink (run_pretraining.PretrainingModel and
# run_finetuning.FinetuningModel).
_DEBUG_ARCH = {"num_hidden_layers": 3, "hidden_size": 144, "intermediate_size": 144 * 4,
               "num_attention_heads": 4}


@dataclasses.dataclass
class ModelConfig:
  """Transformer hyperparameters (the official `modeling.BertConfig`)."""
  vocab_size: int = BERT_VOCAB_SIZE
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  initializer_range: float = INITIALIZER_RANGE

  def __post_init__(self) -> None:
    if self.num_attention_heads < 1 or self.hidden_size % self.num_attention_heads:
      raise ConfigError(
          f"hparam model_hparam_overrides: hidden_size {self.hidden_size} is not "
          f"a multiple of num_attention_heads {self.num_attention_heads}")

  @classmethod
  def from_dict(cls, values: Mapping[str, Any]) -> "ModelConfig":
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
      raise ConfigError(
          f"model_hparam_overrides: unknown key(s) {unknown}; known: {sorted(names)}")
    return cls(**dict(values))

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


def encoder_config(model_size: str, vocab_size: int,
                   overrides: Mapping[str, Any], debug: bool = False) -> ModelConfig:
  """The encoder of a model size (official `get_bert_config`): heads hidden //
  64 and feed-forward 4 x hidden unless overridden; `debug`: the official shrink."""
  args: Dict[str, Any] = dict(MODEL_SIZE_TABLE[model_size]["encoder"])
  args["vocab_size"] = vocab_size
  args.update(overrides)
  args["num_attention_heads"] = max(1, args["hidden_size"] // 64)
  args["intermediate_size"] = 4 * args["hidden_size"]
  args.update(overrides)
  if debug:
    args.update(_DEBUG_ARCH)
  return ModelConfig.from_dict(args)


@dataclasses.dataclass
class JobConfig:
  """The hparams both official configs share (same names, same defaults)."""
  model_name: str = "electra"
  debug: bool = False
  do_train: bool = True

  # model settings
  model_size: str = "small"
  model_hparam_overrides: Dict[str, Any] = dataclasses.field(default_factory=dict)
  embedding_size: Optional[int] = None  # the hidden size when None
  vocab_size: int = BERT_VOCAB_SIZE
  do_lower_case: bool = True
  max_seq_length: int = 128
  weight_decay_rate: float = 0.01

  # TPU settings (official names): use_tpu / tpu_name / num_tpu_cores pick
  # and check the TPU strategy (distribution.create_job_strategy)
  use_tpu: bool = False
  num_tpu_cores: int = 1
  tpu_job_name: Optional[str] = None
  tpu_name: Optional[str] = None
  tpu_zone: Optional[str] = None
  gcp_project: Optional[str] = None

  # locations (official conventions under data_dir)
  data_dir: str = ""
  vocab_file: str = ""
  model_dir: str = ""
  results_txt: str = ""
  results_pkl: str = ""

  # electra-tf additions
  seed: int = 0  # initialisation, data order, masking, dropout
  log_every: int = 10  # steps between progress lines / TensorBoard scalars
  mixed_precision: Optional[str] = None  # None (float32), "bfloat16" or "float16"
  jit_compile: bool = False  # XLA-compile the per-replica train step
  # Big batches (docs/big_batches.md): each replica's batch of a step runs
  # as this many micro-batches whose gradients are summed into one update.
  gradient_accumulation_steps: int = 1
  recompute_layers: bool = False  # recompute each Transformer layer in the backward pass
  optimizer: str = "adamw"  # "adamw" (the official AdamWeightDecay) or "lamb"

  # Names a subclass lists: hparams that must be > 0, and names the official
  # config computes (not settable).
  POSITIVE: ClassVar[Tuple[str, ...]] = ("vocab_size", "max_seq_length", "log_every",
                                         "gradient_accumulation_steps")
  DERIVED: ClassVar[Tuple[str, ...]] = ()
  # Set by `create` (not hparams): the run record a rerun read (None: a
  # first run), and the values taken from the job's inputs.
  rerun: ClassVar[Optional["RerunNotes"]] = None
  inferred: ClassVar[Dict[str, Any]] = {}

  # ---------------------------------------------------------------- creation
  @classmethod
  def create(cls, hparams: Optional[Mapping[str, Any]] = None, *, data_dir: str = "",
             model_name: str = "electra", checkpoint: Optional[str] = None, **flags: Any):
    """Resolves defaults, hparams and flags in the official order (module doc);
    the recorded architecture comes from `checkpoint` when given, else from
    the job's own places (`_checkpoint_dirs`)."""
    user = dict(hparams or {})
    user.update({key: value for key, value in flags.items() if value is not None})
    cls.check_hparams(user)
    given = set(user)
    config = cls._resolve(user, data_dir, model_name)
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    for directory in [checkpoint] if checkpoint else config._checkpoint_dirs():
      found = recorded_hparams(directory)
      if found:
        recorded, source = found
        user = with_recorded(user, {k: v for k, v in recorded.items() if k in fields}, source)
        config = cls._resolve(user, data_dir, model_name)
    rerun = None
    found = config._run_record()
    if found:  # a rerun: the run's hparams are the defaults
      recorded, source = found
      recorded = {k: v for k, v in recorded.items() if k in fields
                  and k not in NOT_FROM_RUN_RECORD and k not in cls.DERIVED}
      placed = config._placed_by(data_dir)
      rerun = RerunNotes(source, {k: (recorded[k], user[k]) for k in sorted(given)
                                  if k in recorded and _json(recorded[k]) != _json(user[k])})
      user = {**{k: v for k, v in recorded.items() if k not in placed}, **user}
      config = cls._resolve(user, data_dir, model_name)
    sources = config._checkpoint_dirs() + ([checkpoint] if checkpoint else [])
    beside = [(path, source) for source in sources for path in [recorded_vocab(source)] if path]
    placed_vocab = "vocab_file" in config._placed_by(data_dir) and os.path.isfile(
        config.vocab_file)
    if "vocab_file" not in user and beside and not placed_vocab:
      user["vocab_file"] = beside[0][0]  # the vocab the checkpoint was trained with
      config = cls._resolve(user, data_dir, model_name)
    inferred = {k: v for k, v in config._from_inputs().items() if k not in user}
    if inferred:
      user.update(inferred)
      config = cls._resolve(user, data_dir, model_name)
    if "vocab_size" not in user and os.path.isfile(config.vocab_file):
      config.vocab_size = len(load_vocab(config.vocab_file))
    for path, source in beside:
      check_same_vocab(config.vocab_file, path, source)
    config.validate()
    if rerun is not None:
      config._check_rerun(rerun)
    config.rerun = rerun
    config.inferred = inferred
    return config

  @classmethod
  def _resolve(cls, user: Mapping[str, Any], data_dir: str, model_name: str):
    config = cls(model_name=model_name, data_dir=data_dir)
    config.update(user)
    config._apply_job_defaults()
    config.update(user)
    config._derive()
    return config

  @classmethod
  def from_flags(cls, hparams_text: Optional[str], flags: Mapping[str, Any], *,
                 data_dir: Optional[str] = None, model_name: Optional[str] = None,
                 checkpoint: Optional[str] = None):
    """`--hparams` plus the flags that share an hparam's name (flags win)."""
    return cls.create(parse_hparams(hparams_text), data_dir=data_dir or "",
                      model_name=model_name or "electra", checkpoint=checkpoint, **flags)

  def _checkpoint_dirs(self) -> list:
    """Where this job's own checkpoints may already be (a rerun, an
    evaluation): their records count as the user's architecture."""
    return []

  def _run_record(self) -> Optional[Tuple[Dict[str, Any], str]]:
    """(hparams, path) of the run model_dir already holds, or None: a rerun
    takes them as its defaults."""
    return None

  def _placed_by(self, data_dir: str) -> set:
    """The hparams `data_dir` sets when given (paths under it): a rerun
    that gives data_dir does not take the recorded ones, and its vocab
    (when there) is used, checked against the checkpoint's."""
    del data_dir
    return set()

  def _from_inputs(self) -> Dict[str, Any]:
    """Values the job's inputs dictate (e.g. the records' length), used
    where neither the user nor a record gives them."""
    return {}

  def _check_rerun(self, rerun: "RerunNotes") -> None:
    """Raises ConfigError for a change the rerun cannot honour."""

  def update(self, values: Mapping[str, Any]) -> None:
    for key, value in values.items():
      setattr(self, key, list(value) if isinstance(value, (list, tuple)) else value)

  def _apply_job_defaults(self) -> None:
    """The job's debug / size / task defaults (between the two user passes)."""

  def _derive(self) -> None:
    """Derived values and default paths (after the user's values)."""

  @classmethod
  def check_hparams(cls, hparams: Mapping[str, Any]) -> None:
    types = {f.name: f.type for f in dataclasses.fields(cls) if f.init}
    for key, value in hparams.items():
      if key in cls.DERIVED:
        raise ConfigError(f"hparam {key}: derived from data_dir, not settable")
      if key not in types:
        raise ConfigError(f"Unknown hparam {key!r}{_unknown_hparam_hint(key, types)}")
      _check_value(key, types[key], value)

  # -------------------------------------------------------------- checks
  def validate(self) -> None:
    """Raises ConfigError naming the hparam and what is wrong."""
    if self.model_size not in MODEL_SIZES:
      raise ConfigError(f"hparam model_size: {self.model_size!r} is not one of "
                        f"{', '.join(MODEL_SIZES)}")
    if self.mixed_precision not in MIXED_PRECISIONS:
      raise ConfigError(f"hparam mixed_precision: {self.mixed_precision!r} is not "
                        f"one of {', '.join(map(str, MIXED_PRECISIONS))}")
    if self.optimizer not in OPTIMIZERS:
      raise ConfigError(f"hparam optimizer: {self.optimizer!r} is not one of "
                        f"{', '.join(OPTIMIZERS)}")
    for name in self.POSITIVE:
      if getattr(self, name) <= 0:
        raise ConfigError(f"hparam {name}: {getattr(self, name)} must be > 0")
    # Both jobs' configs have train_batch_size.
    batch = getattr(self, "train_batch_size")
    if batch % self.gradient_accumulation_steps:
      raise ConfigError(
          f"hparam gradient_accumulation_steps: {self.gradient_accumulation_steps} "
          f"does not divide train_batch_size {batch}")
    encoder = self.encoder_config()
    if self.max_seq_length > encoder.max_position_embeddings:
      raise ConfigError(
          f"hparam max_seq_length: {self.max_seq_length} exceeds "
          f"max_position_embeddings {encoder.max_position_embeddings}")

  # ------------------------------------------------------- derived values
  def encoder_config(self) -> ModelConfig:
    """The encoder (pre-training: the discriminator), with the debug shrink."""
    return encoder_config(self.model_size, self.vocab_size,
                          self.model_hparam_overrides, self.debug)

  @property
  def effective_embedding_size(self) -> int:
    """Width of the embedding tables (the hidden size when unset)."""
    if self.embedding_size is None:
      return self.encoder_config().hidden_size
    return int(self.embedding_size)

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


# ------------------------------------------------------- recorded hparams
# What a rerun never takes from its run record: what this command does, and
# where (model_dir holds the record; the vocab beside it is the default).
NOT_FROM_RUN_RECORD = ("do_train", "do_eval", "model_dir", "model_name", "data_dir",
                       "results_txt", "results_pkl", "vocab_file")


class RerunNotes:
  """A rerun's record (`source`) and the values the command changed:
  {hparam: (recorded, now)}."""

  def __init__(self, source: str, changed: Mapping[str, Tuple[Any, Any]]):
    self.source = source
    self.changed = dict(changed)

  def lines(self) -> list:
    """What a job prints at start."""
    lines = [f"Continuing the run recorded in {self.source}: every hparam not set here "
             "is the recorded one"]
    lines += [f"  {key}: {_json(now)} (recorded: {_json(was)})"
              for key, (was, now) in self.changed.items()]
    return lines


def _json(value: Any) -> str:
  """A value as JSON gives it back (so 1 == 1.0, tuples == lists)."""
  return json.dumps(value, sort_keys=True, default=str)


def check_same_vocab(vocab_file: str, recorded: str, source: str) -> None:
  """ConfigError unless vocab_file holds, token for token, the vocab
  `recorded` beside the checkpoint `source` was trained with."""
  if not os.path.isfile(vocab_file) or os.path.abspath(vocab_file) == os.path.abspath(recorded):
    return
  difference = vocab_difference(list(load_vocab(vocab_file)), list(load_vocab(recorded)))
  if difference:
    raise ConfigError(f"--vocab_file {vocab_file}: not the vocab {source} was trained with, "
                      f"{recorded} ({difference}); leave --vocab_file out to use that one")


def recorded_hparams(checkpoint: str) -> Optional[Tuple[Dict[str, Any], str]]:
  """(hparams, record path) of the model a checkpoint (prefix or directory)
  holds: the RECORDED_KEYS of its electra_config.json, hparams.json or
  finetuning_config.json; None without a record (Google's, remote paths)."""
  directory = record_directory(checkpoint)
  path = os.path.join(directory, ARCHITECTURE_RECORD)
  if os.path.isfile(path):
    return hparams_of_architecture(read_json_object(path)), path
  for name in (IMPORTED_HPARAMS, FINETUNING_RECORD):
    path = os.path.join(directory, name)
    if os.path.isfile(path):
      values = read_json_object(path)
      return {key: values[key] for key in RECORDED_KEYS if key in values}, path
  return None


def checkpoint_directory(checkpoint: str) -> str:
  """The directory of a checkpoint given as a directory or a prefix."""
  return checkpoint if os.path.isdir(checkpoint) else os.path.dirname(checkpoint)


def record_directory(checkpoint: str) -> str:
  """Where a checkpoint's records lie: its directory, or for a fine-tuning
  trial's (`MODEL_DIR/trial_<n>`) the fine-tuning model_dir."""
  directory = checkpoint_directory(checkpoint)
  parent = os.path.dirname(os.path.normpath(directory))
  if (re.fullmatch(r"trial_\d+", os.path.basename(os.path.normpath(directory)))
      and os.path.isfile(os.path.join(parent, FINETUNING_RECORD))):
    return parent
  return directory


def recorded_vocab(checkpoint: Optional[str]) -> Optional[str]:
  """The vocab.txt beside a checkpoint's records (both jobs copy their vocab
  into model_dir, `convert --from_hf` writes one), or None."""
  if not checkpoint:
    return None
  path = os.path.join(record_directory(checkpoint), VOCAB_NAME)
  return path if os.path.isfile(path) else None


def hparams_of_architecture(record: Mapping[str, Any]) -> Dict[str, Any]:
  """The hparams that rebuild the model of an architecture record
  (`PretrainingConfig.architecture()`): the discriminator's shape goes in
  model_hparam_overrides."""
  hparams = {key: record[key] for key in RECORDED_KEYS if key in record}
  encoder = record.get("discriminator", {})
  hparams["model_hparam_overrides"] = {key: encoder[key] for key in SHAPE_KEYS
                                       if key in encoder}
  return hparams


def with_recorded(user: Mapping[str, Any], recorded: Mapping[str, Any],
                  source: str) -> Dict[str, Any]:
  """The user's hparams completed by a checkpoint's recorded ones; a
  contradicting user value is a ConfigError naming both."""
  merged = dict(user)
  for key, value in recorded.items():
    if key == "model_hparam_overrides":
      given = dict(user.get(key) or {})
      for name in SHAPE_KEYS:
        if name in given and name in value and given[name] != value[name]:
          raise ConfigError(f"hparam model_hparam_overrides: {name} {given[name]!r} "
                            f"contradicts the {value[name]!r} that {source} records")
      merged[key] = {**value, **given}
    elif key in user and user[key] != value:
      raise ConfigError(f"hparam {key}: {user[key]!r} contradicts the {value!r} that "
                        f"{source} records")
    else:
      merged[key] = value
  return merged


def training_runs(directory: str, name: str = TRAINING_RECORD) -> List[Dict[str, Any]]:
  """The runs of the training record `name` in directory (none: no record)."""
  path = os.path.join(directory, name)
  if not os.path.isfile(path):
    return []
  with open(path, encoding="utf-8") as f:
    try:
      return list(json.load(f)["runs"])
    except (json.JSONDecodeError, KeyError, TypeError) as e:
      raise ConfigError(f"{path}: not a training record ({e})") from None


def read_json_object(path: str) -> Dict[str, Any]:
  try:
    with open(path, encoding="utf-8") as f:
      values = json.load(f)
  except (OSError, ValueError) as e:
    raise ConfigError(f"{path}: unreadable ({e})") from None
  if not isinstance(values, dict):
    raise ConfigError(f"{path}: expected a JSON object")
  return values


# ---------------------------------------------------------------- hparams I/O
_JSON_TYPES = {
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "List[str]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
}


def _check_value(key: str, type_name: str, value: Any) -> None:
  """Checks a JSON value against a dataclass field's annotation."""
  optional = type_name.startswith("Optional[")
  base = type_name[len("Optional["):-1] if optional else type_name
  if value is None:
    if optional:
      return
    raise ConfigError(f"hparam {key}: null is not allowed (expected {base})")
  ok = _JSON_TYPES.get(base, lambda v: isinstance(v, dict))(value)
  if not ok:
    expected = "a list of strings" if base == "List[str]" else base
    raise ConfigError(f"hparam {key}: expected {expected}, got {type(value).__name__} "
                      f"{value!r}")


def _unknown_hparam_hint(key: str, known: Mapping[str, str]) -> str:
  """The end of an unknown hparam's error: the closest `known` hparams (name
  -> type) and architecture values (the ModelConfig fields that
  model_hparam_overrides sets), as absl suggests flags for an unknown flag;
  "" when none is close."""
  architecture = sorted({field.name for field in dataclasses.fields(ModelConfig)} - set(known))
  close = difflib.get_close_matches(key, sorted(known) + architecture, n=3)
  hints = [f"{name} in model_hparam_overrides" if name in architecture else name
           for name in close]
  return f" (did you mean {' or '.join(hints)}?)" if hints else ""


def parse_hparams(text_or_path: Optional[str], flag: str = "--hparams") -> Dict[str, Any]:
  """`--hparams` value: a JSON object string, or the path of a .json file."""
  if not text_or_path:
    return {}
  text = text_or_path.strip()
  source = flag
  if not text.startswith("{"):
    if not os.path.isfile(text):
      raise ConfigError(f"{flag}: {text!r} is neither a JSON object nor an existing .json file")
    source = f"{flag} file {text}"
    with open(text, encoding="utf-8") as f:
      text = f.read()
  try:
    values = json.loads(text)
  except json.JSONDecodeError as e:
    raise ConfigError(f"{source}: invalid JSON ({e.msg} at line {e.lineno} "
                      f"column {e.colno})") from None
  if not isinstance(values, dict):
    raise ConfigError(f"{source}: expected a JSON object, got {type(values).__name__}")
  return values
