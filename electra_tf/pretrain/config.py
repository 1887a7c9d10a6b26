"""The single source of every pre-training hyperparameter.

`PretrainingConfig` carries the official `configure_pretraining` names and
defaults, so an official `--hparams` JSON loads unchanged; built once at an
entry point (`create` / `from_flags`, in `config.JobConfig`'s order) and
passed down as a value.  The generator's `ModelConfig` is derived as the
official `get_generator_config`; `max_predictions_per_seq = int((mask_prob +
0.005) * max_seq_length)` is derived, not settable, as official.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, ClassVar, Dict, Optional, Tuple

from electra_tf.config import (DISC_WEIGHT, IMPORTED_HPARAMS, MASK_PROB, MODEL_SIZE_TABLE,
                               TRAINING_RECORD, JobConfig, ModelConfig, RerunNotes,
                               read_json_object, training_runs)
from electra_tf.errors import ConfigError

def max_predictions_per_seq(mask_prob: float, max_seq_length: int) -> int:
  """Masked slots per sequence: the official formula, its + 0.005 included
  (derived after the paper's settings, which change both; the commented
  official block derives it before, leaving the 128-token value)."""
  return int((mask_prob + 0.005) * max_seq_length)


_DEBUG_SETTINGS = {"train_batch_size": 8, "num_train_steps": 20,
                   "eval_batch_size": 4, "iterations_per_loop": 1,
                   "num_eval_steps": 2}


@dataclasses.dataclass
class PretrainingConfig(JobConfig):
  """Pre-training hyperparameters under their official names and defaults."""
  do_eval: bool = False

  # loss functions
  electra_objective: bool = True  # False: plain masked LM (BERT, no NSP)
  electric_objective: bool = False  # Electric: noise-contrastive cloze discriminator
  gen_weight: float = 1.0
  disc_weight: float = DISC_WEIGHT
  mask_prob: float = MASK_PROB

  # optimization
  learning_rate: float = 5e-4
  lr_decay_power: float = 1.0
  num_warmup_steps: int = 10000

  # training settings
  iterations_per_loop: int = 200
  save_checkpoints_steps: int = 1000
  num_train_steps: int = 1000000
  num_eval_steps: int = 100
  keep_checkpoint_max: int = 5

  # generator settings
  uniform_generator: bool = False
  two_tower_generator: bool = False  # generator is a two-tower cloze model
  untied_generator_embeddings: bool = False
  untied_generator: bool = True
  generator_layers: float = 1.0
  generator_hidden_size: float = 0.25
  disallow_correct: bool = False
  temperature: float = 1.0

  # batch sizes
  train_batch_size: int = 128
  eval_batch_size: int = 128

  # locations (official conventions under data_dir)
  pretrain_tfrecords: str = ""

  # electra-tf additions
  paper_hparams: bool = True  # base/large take the paper's Table 6 settings
  eval_tfrecords: str = ""  # held-out TFRecords for --do_eval (default: pretrain_tfrecords)
  # With do_eval, also evaluate during training every this many steps (0: at
  # the end only), so that curves.png's eval panels are curves.
  eval_every_steps: int = 0
  # Clip each replica's gradient of its own loss (per-replica means) by its
  # own global norm, then sum: the official TPU recipe (CrossShardOptimizer
  # after clip_by_global_norm) of the released models.  Default: the global
  # batch's gradient, clipped once (the official single-device path).
  clip_per_replica: bool = False

  # derived (not settable)
  max_predictions_per_seq: int = dataclasses.field(default=0, init=False)

  POSITIVE: ClassVar[Tuple[str, ...]] = JobConfig.POSITIVE + (
      "train_batch_size", "eval_batch_size", "num_train_steps", "save_checkpoints_steps",
      "keep_checkpoint_max", "num_eval_steps", "iterations_per_loop")

  # ---------------------------------------------------------------- creation
  def _checkpoint_dirs(self) -> list:
    """model_dir: a rerun or an evaluation reads its architecture record."""
    return [self.model_dir]

  def _run_record(self) -> Optional[Tuple[Dict[str, Any], str]]:
    """The last run of model_dir's training record, else the hparams a
    `convert --from_hf` import records (its max_seq_length included)."""
    runs = training_runs(self.model_dir)
    if runs:
      return dict(runs[-1]["hparams"]), os.path.join(self.model_dir, TRAINING_RECORD)
    imported = os.path.join(self.model_dir, IMPORTED_HPARAMS)
    return (read_json_object(imported), imported) if os.path.isfile(imported) else None

  def _placed_by(self, data_dir: str) -> set:
    return {"pretrain_tfrecords", "vocab_file"} if data_dir else set()

  def _from_inputs(self) -> Dict[str, Any]:
    """max_seq_length: the records' (their build record's, or their first
    record's length)."""
    from electra_tf.pretrain import records_info  # pylint: disable=g-import-not-at-top
    length = records_info.example_length(self.pretrain_tfrecords)
    return {} if length is None else {"max_seq_length": length}

  def _check_rerun(self, rerun: RerunNotes) -> None:
    """A resumed run keeps what its input position and masks depend on."""
    resuming = self.do_train and os.path.isfile(os.path.join(self.model_dir, "checkpoint"))
    for key in RESUME_KEYS:
      if resuming and key in rerun.changed:
        was, now = rerun.changed[key]
        raise ConfigError(
            f"hparam {key}: {now!r}, but the run in model_dir {self.model_dir} was trained "
            f"with {was!r} ({rerun.source}) and a resumed run keeps it ({RESUME_KEYS[key]}); "
            f"leave it out to go on, or start a new --model_dir with "
            f"--init_checkpoint={self.model_dir} (its weights, a new schedule)")

  def _apply_job_defaults(self) -> None:
    if self.debug:
      self.update(_DEBUG_SETTINGS)
    size = MODEL_SIZE_TABLE.get(self.model_size, {})  # unknown: validate says so
    if "embedding_size" in size:
      self.embedding_size = size["embedding_size"]
    if self.paper_hparams:
      self.update(size.get("paper_pretraining", {}))
    if self.electric_objective:
      self.two_tower_generator = True  # official: Electric requires it

  def _derive(self) -> None:
    # Derived last so that it sees the final mask_prob / max_seq_length; on the
    # official code paths (small, debug) this equals the official value.
    self.max_predictions_per_seq = max_predictions_per_seq(self.mask_prob, self.max_seq_length)
    if not self.pretrain_tfrecords and self.data_dir:
      self.pretrain_tfrecords = os.path.join(
          self.data_dir, "pretrain_tfrecords", "pretrain_data.tfrecord*")
    if not self.vocab_file and self.data_dir:
      self.vocab_file = os.path.join(self.data_dir, "vocab.txt")
    if not self.model_dir:
      self.model_dir = os.path.join(self.data_dir or ".", "models", self.model_name)
    results_dir = os.path.join(self.model_dir, "results")
    if not self.results_txt:
      self.results_txt = os.path.join(results_dir, "unsup_results.txt")
    if not self.results_pkl:
      self.results_pkl = os.path.join(results_dir, "unsup_results.pkl")

  @property
  def has_discriminator(self) -> bool:
    """As official: ELECTRA and Electric both train a discriminator."""
    return self.electra_objective or self.electric_objective

  @property
  def eval_files(self) -> str:
    """The TFRecords evaluation reads: eval_tfrecords, else (as official) the
    training ones."""
    return self.eval_tfrecords or self.pretrain_tfrecords

  @property
  def results_json(self) -> str:
    return os.path.splitext(self.results_txt)[0] + ".json"

  def validate(self) -> None:
    super().validate()
    if not 0.0 < self.mask_prob < 1.0:
      raise ConfigError(f"hparam mask_prob: {self.mask_prob} is outside (0, 1)")
    if self.electric_objective and not self.two_tower_generator:
      raise ConfigError("hparam two_tower_generator=false: electric_objective "
                        "needs the two-tower generator (official: it sets it)")
    if self.two_tower_generator and not (
        self.has_discriminator and self.untied_generator and not self.uniform_generator):
      # The official code builds no cloze output then and fails on it.
      raise ConfigError("hparam two_tower_generator=true needs electra_objective or "
                        "electric_objective, untied_generator=true and "
                        "uniform_generator=false")
    if self.temperature <= 0:
      raise ConfigError(f"hparam temperature: {self.temperature} must be > 0")
    if self.eval_every_steps < 0:
      raise ConfigError(f"hparam eval_every_steps: {self.eval_every_steps} must be >= 0")
    if self.num_warmup_steps < 0:
      raise ConfigError(f"hparam num_warmup_steps: {self.num_warmup_steps} must be >= 0")
    if self.max_predictions_per_seq < 1:
      raise ConfigError(
          f"max_predictions_per_seq = int((mask_prob + 0.005) * max_seq_length) = "
          f"{self.max_predictions_per_seq}; raise mask_prob or max_seq_length")
    if self.has_discriminator and self.untied_generator:
      gen = self.generator_config()
      if gen.hidden_size < 1 or gen.num_hidden_layers < 1:
        raise ConfigError(
            "hparams generator_hidden_size / generator_layers give an empty "
            f"generator (hidden {gen.hidden_size}, layers {gen.num_hidden_layers})")
    if not self.untied_generator and self.untied_generator_embeddings:
      raise ConfigError("hparam untied_generator_embeddings=true needs "
                        "untied_generator=true (a tied generator is the discriminator)")
    if self.uniform_generator and not self.electra_objective:
      raise ConfigError("hparams uniform_generator=true with electra_objective=false "
                        "leave nothing to train")

  # ------------------------------------------------------- derived configs
  def generator_config(self) -> ModelConfig:
    """Official get_generator_config: a fraction of the discriminator."""
    disc = self.encoder_config()
    hidden = int(round(disc.hidden_size * self.generator_hidden_size))
    return dataclasses.replace(
        disc, hidden_size=hidden,
        num_hidden_layers=int(round(disc.num_hidden_layers * self.generator_layers)),
        intermediate_size=4 * hidden, num_attention_heads=max(1, hidden // 64))

  def architecture(self) -> Dict[str, Any]:
    """What a model_dir's checkpoints depend on (recorded in electra_config.json)."""
    record = {key: getattr(self, key) for key in ARCHITECTURE_KEYS}
    record["discriminator"] = self.encoder_config().to_dict()
    # Recorded only when not the default, so that the records of earlier runs
    # still match.
    for key in ("electric_objective", "two_tower_generator"):
      if getattr(self, key):
        record[key] = True
    if not self.do_lower_case:
      record["do_lower_case"] = False
    return record


# What a resumed run cannot change, and why.
RESUME_KEYS = {
    "train_batch_size": "the input position counts examples of this batch",
    "max_seq_length": "the records and the input position are of this length",
    "mask_prob": "the masks of the data stream depend on it",
    "seed": "the data order, masks and sampling noise depend on it",
}

ARCHITECTURE_KEYS = ("model_size", "vocab_size", "embedding_size", "electra_objective",
                     "untied_generator", "untied_generator_embeddings",
                     "uniform_generator", "generator_hidden_size", "generator_layers")
