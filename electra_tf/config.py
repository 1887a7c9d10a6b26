"""The single source of every pre-training hyperparameter.

`PretrainingConfig` carries the official `configure_pretraining.PretrainingConfig`
names and defaults, so an official `--hparams` JSON loads unchanged.  It is
built once at an entry point (`PretrainingConfig.create`) and passed down as a
value.  `ModelConfig` is the official `modeling.BertConfig`; the discriminator
and generator configs are derived from a `PretrainingConfig` exactly as the
official `training_utils.get_bert_config` and `run_pretraining.get_generator_config`
derive them.

Resolution order (as official):
  1. defaults below;
  2. the user's hparams;
  3. `debug` overrides (batch 8, 20 steps, ...);
  4. model-size defaults (small: embedding_size 128; base/large: the paper's
     Table 6 settings, see `paper_hparams`);
  5. the user's hparams again, so that they win over 3 and 4;
  6. derived `max_predictions_per_seq = int((mask_prob + 0.005) * max_seq_length)`
     (not settable, as official).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, Mapping, Optional

MODEL_SIZES = ("small", "base", "large")
# None is float32; the others are tf_keras "mixed_<name>" dtype policies.
MIXED_PRECISIONS = (None, "bfloat16", "float16")

# hidden size and number of layers per model size (official get_bert_config).
_SIZE_ARCH = {
    "small": {"hidden_size": 256, "num_hidden_layers": 12},
    "base": {"hidden_size": 768, "num_hidden_layers": 12},
    "large": {"hidden_size": 1024, "num_hidden_layers": 24},
}

# The paper's Table 6 pre-training settings for base and large.  The official
# configure_pretraining.py carries them as a commented-out block; here they
# apply when model_size is base/large and `paper_hparams` is true (default).
# mask_prob and max_seq_length change max_predictions_per_seq, which is
# therefore derived after this block (the commented official block derives it
# before, which would leave it at the 128-token value).
_PAPER_SETTINGS = {
    "base": {"max_seq_length": 512, "learning_rate": 2e-4,
             "embedding_size": 768, "generator_hidden_size": 0.33333,
             "train_batch_size": 256, "num_train_steps": 766000},
    "large": {"max_seq_length": 512, "learning_rate": 2e-4,
              "embedding_size": 1024, "mask_prob": 0.25,
              "train_batch_size": 2048, "num_train_steps": 400000},
}

_DEBUG_SETTINGS = {"train_batch_size": 8, "num_train_steps": 20,
                   "eval_batch_size": 4, "iterations_per_loop": 1,
                   "num_eval_steps": 2}

# Keys of the official config that the TF1 TPUEstimator needed; accepted so an
# official hparams JSON loads, and mapped onto tf.distribute where they mean
# something (tpu_name -> the TPU address).
_TPU_KEYS = ("use_tpu", "num_tpu_cores", "tpu_job_name", "tpu_name", "tpu_zone",
             "gcp_project")


class ConfigError(ValueError):
  """A hyperparameter is unknown, ill-typed or out of range (one-line message)."""


@dataclasses.dataclass
class ModelConfig:
  """Transformer hyperparameters (the official `modeling.BertConfig`)."""
  vocab_size: int = 30522
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  initializer_range: float = 0.02

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


@dataclasses.dataclass
class PretrainingConfig:
  """Pre-training hyperparameters under their official names and defaults."""
  model_name: str = "electra"
  debug: bool = False
  do_train: bool = True
  do_eval: bool = False

  # loss functions
  electra_objective: bool = True  # False: plain masked LM (BERT, no NSP)
  electric_objective: bool = False  # Electric (cloze); not supported here
  gen_weight: float = 1.0
  disc_weight: float = 50.0
  mask_prob: float = 0.15

  # optimization
  learning_rate: float = 5e-4
  lr_decay_power: float = 1.0
  weight_decay_rate: float = 0.01
  num_warmup_steps: int = 10000

  # training settings
  iterations_per_loop: int = 200
  save_checkpoints_steps: int = 1000
  num_train_steps: int = 1000000
  num_eval_steps: int = 100
  keep_checkpoint_max: int = 5

  # model settings
  model_size: str = "small"
  model_hparam_overrides: Dict[str, Any] = dataclasses.field(default_factory=dict)
  embedding_size: Optional[int] = None  # discriminator hidden size when None
  vocab_size: int = 30522
  do_lower_case: bool = True

  # generator settings
  uniform_generator: bool = False
  two_tower_generator: bool = False  # Electric only; not supported here
  untied_generator_embeddings: bool = False
  untied_generator: bool = True
  generator_layers: float = 1.0
  generator_hidden_size: float = 0.25
  disallow_correct: bool = False
  temperature: float = 1.0

  # batch sizes
  max_seq_length: int = 128
  train_batch_size: int = 128
  eval_batch_size: int = 128

  # TPU settings (official names)
  use_tpu: bool = False
  num_tpu_cores: int = 1
  tpu_job_name: Optional[str] = None
  tpu_name: Optional[str] = None
  tpu_zone: Optional[str] = None
  gcp_project: Optional[str] = None

  # locations (official conventions under data_dir)
  data_dir: str = ""
  pretrain_tfrecords: str = ""
  vocab_file: str = ""
  model_dir: str = ""
  results_txt: str = ""
  results_pkl: str = ""

  # electra-tf additions
  paper_hparams: bool = True  # base/large take the paper's Table 6 settings
  seed: int = 0  # masking, shuffling and initialisation seed
  log_every: int = 10  # training log / TensorBoard interval in steps
  mixed_precision: Optional[str] = None  # None (float32), "bfloat16" or "float16"
  jit_compile: bool = False  # XLA-compile the per-replica train step

  # derived (not settable)
  max_predictions_per_seq: int = dataclasses.field(default=0, init=False)

  # ---------------------------------------------------------------- creation
  @classmethod
  def create(cls, hparams: Optional[Mapping[str, Any]] = None,
             data_dir: str = "", model_name: str = "electra",
             ) -> "PretrainingConfig":
    """Resolves defaults + hparams in the official order (module docstring)."""
    hparams = dict(hparams or {})
    _check_hparams(cls, hparams)
    config = cls(model_name=model_name, data_dir=data_dir)
    config._apply(hparams)
    if config.debug:
      config._apply(_DEBUG_SETTINGS)
    if config.model_size == "small":
      config.embedding_size = 128
    elif config.paper_hparams and config.model_size in _PAPER_SETTINGS:
      config._apply(_PAPER_SETTINGS[config.model_size])
    config._apply(hparams)
    # Derived last so that it sees the final mask_prob / max_seq_length; on the
    # official code paths (small, debug) this equals the official value.
    config.max_predictions_per_seq = int(
        (config.mask_prob + 0.005) * config.max_seq_length)
    config._fill_paths()
    config.validate()
    return config

  def _apply(self, values: Mapping[str, Any]) -> None:
    for key, value in values.items():
      setattr(self, key, value)

  def _fill_paths(self) -> None:
    data_dir = self.data_dir
    if not self.pretrain_tfrecords and data_dir:
      self.pretrain_tfrecords = os.path.join(
          data_dir, "pretrain_tfrecords", "pretrain_data.tfrecord*")
    if not self.vocab_file and data_dir:
      self.vocab_file = os.path.join(data_dir, "vocab.txt")
    if not self.model_dir:
      self.model_dir = os.path.join(data_dir or ".", "models", self.model_name)
    results_dir = os.path.join(self.model_dir, "results")
    if not self.results_txt:
      self.results_txt = os.path.join(results_dir, "unsup_results.txt")
    if not self.results_pkl:
      self.results_pkl = os.path.join(results_dir, "unsup_results.pkl")

  @property
  def results_json(self) -> str:
    return os.path.splitext(self.results_txt)[0] + ".json"

  def validate(self) -> None:
    """Raises ConfigError naming the hparam and what is wrong."""
    if self.model_size not in MODEL_SIZES:
      raise ConfigError(f"hparam model_size: {self.model_size!r} is not one of "
                        f"{', '.join(MODEL_SIZES)}")
    if not 0.0 < self.mask_prob < 1.0:
      raise ConfigError(f"hparam mask_prob: {self.mask_prob} is outside (0, 1)")
    if self.electric_objective or self.two_tower_generator:
      raise ConfigError("hparams electric_objective / two_tower_generator: the "
                        "Electric objective is not implemented in electra-tf")
    if self.mixed_precision not in MIXED_PRECISIONS:
      raise ConfigError(f"hparam mixed_precision: {self.mixed_precision!r} is not "
                        f"one of {', '.join(map(str, MIXED_PRECISIONS))}")
    if self.temperature <= 0:
      raise ConfigError(f"hparam temperature: {self.temperature} must be > 0")
    for name in ("max_seq_length", "train_batch_size", "eval_batch_size",
                 "num_train_steps", "vocab_size", "save_checkpoints_steps",
                 "keep_checkpoint_max", "num_eval_steps", "log_every"):
      if getattr(self, name) <= 0:
        raise ConfigError(f"hparam {name}: {getattr(self, name)} must be > 0")
    if self.num_warmup_steps < 0:
      raise ConfigError(f"hparam num_warmup_steps: {self.num_warmup_steps} must be >= 0")
    if self.max_predictions_per_seq < 1:
      raise ConfigError(
          f"max_predictions_per_seq = int((mask_prob + 0.005) * max_seq_length) = "
          f"{self.max_predictions_per_seq}; raise mask_prob or max_seq_length")
    disc = self.discriminator_config()
    if self.max_seq_length > disc.max_position_embeddings:
      raise ConfigError(
          f"hparam max_seq_length: {self.max_seq_length} exceeds "
          f"max_position_embeddings {disc.max_position_embeddings}")
    if disc.hidden_size % disc.num_attention_heads:
      raise ConfigError(
          f"hparam model_hparam_overrides: hidden_size {disc.hidden_size} is not "
          f"a multiple of num_attention_heads {disc.num_attention_heads}")
    if self.electra_objective and self.untied_generator:
      gen = self.generator_config()
      if gen.hidden_size < 1 or gen.num_hidden_layers < 1:
        raise ConfigError(
            "hparams generator_hidden_size / generator_layers give an empty "
            f"generator (hidden {gen.hidden_size}, layers {gen.num_hidden_layers})")
    if not self.untied_generator and self.untied_generator_embeddings:
      raise ConfigError("hparam untied_generator_embeddings=true needs "
                        "untied_generator=true (a tied generator is the discriminator)")

  # ------------------------------------------------------- derived configs
  def discriminator_config(self) -> ModelConfig:
    """Official get_bert_config, plus the debug-mode shrink of PretrainingModel."""
    args: Dict[str, Any] = dict(_SIZE_ARCH[self.model_size])
    args["vocab_size"] = self.vocab_size
    args.update(self.model_hparam_overrides)
    # By default heads and feed-forward size follow the hidden size.
    args["num_attention_heads"] = max(1, args["hidden_size"] // 64)
    args["intermediate_size"] = 4 * args["hidden_size"]
    args.update(self.model_hparam_overrides)
    if self.debug:
      args.update(num_hidden_layers=3, hidden_size=144,
                  intermediate_size=144 * 4, num_attention_heads=4)
    return ModelConfig.from_dict(args)

  def generator_config(self) -> ModelConfig:
    """Official get_generator_config: a fraction of the discriminator."""
    gen = self.discriminator_config()
    gen.hidden_size = int(round(gen.hidden_size * self.generator_hidden_size))
    gen.num_hidden_layers = int(round(gen.num_hidden_layers * self.generator_layers))
    gen.intermediate_size = 4 * gen.hidden_size
    gen.num_attention_heads = max(1, gen.hidden_size // 64)
    return gen

  @property
  def effective_embedding_size(self) -> int:
    """Width of the shared embedding tables (hidden size when unset)."""
    if self.embedding_size is None:
      return self.discriminator_config().hidden_size
    return int(self.embedding_size)

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# ---------------------------------------------------------------- hparams I/O
def _field_types(cls) -> Dict[str, str]:
  return {f.name: f.type for f in dataclasses.fields(cls) if f.init}


def _check_value(key: str, type_name: str, value: Any) -> None:
  """Checks a JSON value against a dataclass field's annotation."""
  optional = type_name.startswith("Optional[")
  base = type_name[len("Optional["):-1] if optional else type_name
  if value is None:
    if optional:
      return
    raise ConfigError(f"hparam {key}: null is not allowed (expected {base})")
  ok = {
      "bool": lambda v: isinstance(v, bool),
      "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
      "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
      "str": lambda v: isinstance(v, str),
  }.get(base.split("[")[0], lambda v: isinstance(v, dict))(value)
  if not ok:
    raise ConfigError(f"hparam {key}: expected {base}, got {type(value).__name__} "
                      f"{value!r}")


def _check_hparams(cls, hparams: Mapping[str, Any]) -> None:
  types = _field_types(cls)
  for key, value in hparams.items():
    if key not in types:
      raise ConfigError(f"Unknown hparam {key!r}")
    _check_value(key, types[key], value)


def from_flags(hparams_text: Optional[str], overrides: Mapping[str, Any], *,
               data_dir: Optional[str] = None, model_name: Optional[str] = None,
               ) -> PretrainingConfig:
  """`--hparams` plus the flags that share an hparam's name (flags win)."""
  hparams = parse_hparams(hparams_text)
  hparams.update({k: v for k, v in overrides.items() if v is not None})
  return PretrainingConfig.create(hparams, data_dir=data_dir or "",
                                  model_name=model_name or "electra")


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
