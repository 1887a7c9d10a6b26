"""Pre-training objectives: what each trains and how its losses add up.

An objective says which networks it needs, computes outputs and losses given
an `ElectraPretrainer` (`__call__`) and names its loss denominators
(`denominators`): masked_lm_weight, input_mask, cloze_weight sums.

  MaskedLM         electra_objective=false: BERT's MLM; gen_weight * mlm_loss
  Electra          the default; + disc_weight * disc_loss
  TwoTowerElectra  two_tower_generator: cloze_loss replaces mlm_loss
  Electric         electric_objective: two towers, noise-contrastive discriminator

`objective_class(hparams)` maps the official hparams to a class (REGISTRY,
first match wins).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar, Dict, Mapping, Optional, Tuple, Type

import tensorflow as tf

from electra_tf.config import DISC_WEIGHT, MASK_PROB
from electra_tf.modeling.pretrainer import (Generated, corrupt_inputs,
                                            discriminator_loss, electric_logits,
                                            masked_lm_loss, unmask)
from electra_tf.modeling.sampling import sample_from_softmax

Tensors = Dict[str, tf.Tensor]


@dataclasses.dataclass(frozen=True)
class Objective(abc.ABC):
  """Base of the objectives: their settings (official hparams)."""
  gen_weight: float = 1.0
  disc_weight: float = DISC_WEIGHT
  temperature: float = 1.0  # of the generator's softmax when sampling
  disallow_correct: bool = False  # never sample the original token
  mask_prob: float = MASK_PROB  # Electric's prior odds of a sampled token

  name: ClassVar[str] = "objective"
  has_discriminator: ClassVar[bool] = False  # discriminator head, sampling
  two_tower: ClassVar[bool] = False  # generator: the two-tower cloze model
  noise_contrastive: ClassVar[bool] = False  # discriminator logits + noise terms
  loss_names: ClassVar[Tuple[str, ...]] = ()  # logged besides total_loss
  denominator_names: ClassVar[Tuple[str, ...]] = ()

  @classmethod
  def from_hparams(cls, hparams: Any) -> "Objective":
    """The objective with the settings of `hparams` (official attribute names)."""
    return cls(**{field.name: getattr(hparams, field.name)
                  for field in dataclasses.fields(cls)})

  @property
  def needs_special_ids(self) -> bool:
    """The loss needs the vocab's special ids (the pretrainer's special_ids)."""
    return self.two_tower

  @abc.abstractmethod
  def denominators(self, model: Any, batch: Mapping[str, tf.Tensor]) -> Tensors:
    """name -> float32 scalar: the losses' denominators on `batch`."""

  def named(self, loss_denominators: Any) -> Optional[Tensors]:
    """`loss_denominators` as a name -> float32 dict: a mapping as it is, a
    tensor [len(denominator_names)] by position (the earlier form), None as
    None (this batch's own sums)."""
    if loss_denominators is None:
      return None
    if isinstance(loss_denominators, Mapping):
      return {name: tf.cast(loss_denominators[name], tf.float32)
              for name in self.denominator_names}
    sums = tf.unstack(tf.cast(loss_denominators, tf.float32))
    return dict(zip(self.denominator_names, sums))

  @abc.abstractmethod
  def __call__(self, model: Any, batch: Mapping[str, tf.Tensor],
               training: Optional[bool] = None, sample_seed: Optional[tf.Tensor] = None,
               denominators: Optional[Tensors] = None) -> Tensors:
    """The outputs and losses of `model` (an ElectraPretrainer) on `batch`;
    `denominators` (all of `denominator_names`) replace this batch's sums."""

  def loss_summary(self) -> Optional[str]:
    """How total_loss is made, for the start of a run (None: it is obvious)."""
    return None


@dataclasses.dataclass(frozen=True)
class MaskedLM(Objective):
  """The masked LM alone: the discriminator encoder `electra` generates."""
  name: ClassVar[str] = "masked_lm"
  loss_names: ClassVar[Tuple[str, ...]] = ("mlm_loss",)
  denominator_names: ClassVar[Tuple[str, ...]] = ("masked_lm_weight",)

  def denominators(self, model: Any, batch: Mapping[str, tf.Tensor]) -> Tensors:
    return {"masked_lm_weight": tf.reduce_sum(tf.cast(batch["masked_lm_weights"],
                                                      tf.float32))}

  def generator_outputs(self, model: Any, batch: Mapping[str, tf.Tensor],
                        generated: Generated, denominators: Tensors) -> Tensors:
    """mlm_* outputs and total_loss = gen_weight * the generator's loss."""
    mlm_loss, mlm_per_example_loss, mlm_preds = masked_lm_loss(
        generated.mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"],
        denominators.get("masked_lm_weight"))
    return {"mlm_logits": generated.mlm_logits, "mlm_loss": mlm_loss,
            "mlm_per_example_loss": mlm_per_example_loss, "mlm_preds": mlm_preds,
            "total_loss": self.gen_weight * mlm_loss}

  def __call__(self, model, batch, training=None, sample_seed=None, denominators=None):
    return self.generator_outputs(model, batch, model.generate(batch, training),
                                  denominators or {})


@dataclasses.dataclass(frozen=True)
class Electra(MaskedLM):
  """Replaced-token detection: the generator's samples replace the masked
  tokens; the discriminator labels a token 1 where it differs from the
  original (a sample equal to it counts as real)."""
  name: ClassVar[str] = "electra"
  has_discriminator: ClassVar[bool] = True
  loss_names: ClassVar[Tuple[str, ...]] = ("mlm_loss", "disc_loss")
  denominator_names: ClassVar[Tuple[str, ...]] = ("masked_lm_weight", "input_mask")

  def denominators(self, model, batch):
    return {**super().denominators(model, batch),
            "input_mask": tf.reduce_sum(tf.cast(batch["input_mask"], tf.float32))}

  def corrupt(self, batch: Mapping[str, tf.Tensor], sampled_ids: tf.Tensor
              ) -> Tuple[tf.Tensor, tf.Tensor]:
    """(the discriminator's input [B, S], its labels [B, S] int32)."""
    return corrupt_inputs(batch["input_ids"], batch["masked_lm_positions"],
                          batch["masked_lm_ids"], sampled_ids)

  def discriminator_logits(self, model: Any, corrupted_ids: tf.Tensor,
                           batch: Mapping[str, tf.Tensor], generated: Generated,
                           training: Optional[bool]) -> tf.Tensor:
    """The discriminator's logits [B, S] float32 on its input."""
    return model.discriminator_logits(corrupted_ids, batch["input_mask"],
                                      batch["segment_ids"], training=training)

  def __call__(self, model, batch, training=None, sample_seed=None, denominators=None):
    denominators = denominators or {}
    generated = model.generate(batch, training)
    outputs = self.generator_outputs(model, batch, generated, denominators)
    disallow = (tf.one_hot(batch["masked_lm_ids"], model.vocab_size)
                if self.disallow_correct else None)
    sampled_ids = sample_from_softmax(
        tf.stop_gradient(generated.mlm_logits) / self.temperature, seed=sample_seed,
        disallow=disallow)
    corrupted_ids, labels = self.corrupt(batch, sampled_ids)
    disc_logits = self.discriminator_logits(model, corrupted_ids, batch, generated,
                                            training)
    disc = discriminator_loss(disc_logits, labels, batch["input_mask"],
                              denominators.get("input_mask"))
    outputs.update({
        "sampled_ids": sampled_ids, "corrupted_ids": corrupted_ids,
        "disc_logits": disc_logits,
        "disc_probs": disc["probs"], "disc_preds": disc["preds"],
        "disc_labels": labels, "disc_loss": disc["loss"],
        "disc_per_example_loss": disc["per_example_loss"],
        "total_loss": outputs["total_loss"] + self.disc_weight * disc["loss"],
    })
    return outputs

  def loss_summary(self) -> Optional[str]:
    generator_loss = "cloze_loss" if self.two_tower else "mlm_loss"
    return (f"loss = {self.gen_weight:g} x {generator_loss} + {self.disc_weight:g} x "
            "disc_loss (hparams gen_weight, disc_weight): it can rise while the "
            "generator improves, as its samples get harder to tell apart")


@dataclasses.dataclass(frozen=True)
class TwoTowerElectra(Electra):
  """ELECTRA's discriminator with Electric's two-tower cloze generator, which
  trains on the cloze loss alone (as official)."""
  name: ClassVar[str] = "two_tower_electra"
  two_tower: ClassVar[bool] = True
  loss_names: ClassVar[Tuple[str, ...]] = ("mlm_loss", "cloze_loss", "disc_loss")
  denominator_names: ClassVar[Tuple[str, ...]] = (
      "masked_lm_weight", "input_mask", "cloze_weight")

  def denominators(self, model, batch):
    original_ids = unmask(batch["input_ids"], batch["masked_lm_positions"],
                          batch["masked_lm_ids"])
    return {**super().denominators(model, batch),
            "cloze_weight": tf.reduce_sum(model.cloze_weights(original_ids,
                                                              batch["input_mask"]))}

  def generator_outputs(self, model, batch, generated, denominators):
    outputs = super().generator_outputs(model, batch, generated, denominators)
    cloze_loss = masked_lm_loss(
        generated.cloze_logits, generated.original_ids,
        model.cloze_weights(generated.original_ids, batch["input_mask"]),
        denominators.get("cloze_weight"))[0]
    outputs.update(cloze_loss=cloze_loss, total_loss=self.gen_weight * cloze_loss)
    return outputs


@dataclasses.dataclass(frozen=True)
class Electric(TwoTowerElectra):
  """Electric's noise-contrastive discriminator: its logits get log q(token)
  of the cloze model (no gradient) and log(mask_prob / (1 - mask_prob)), and
  every sampled position is labelled 1, even where the sample equals the
  original token."""
  name: ClassVar[str] = "electric"
  noise_contrastive: ClassVar[bool] = True

  def corrupt(self, batch, sampled_ids):
    return corrupt_inputs(batch["input_ids"], batch["masked_lm_positions"],
                          batch["masked_lm_ids"], sampled_ids, electric=True)

  def discriminator_logits(self, model, corrupted_ids, batch, generated, training):
    logits = super().discriminator_logits(model, corrupted_ids, batch, generated,
                                          training)
    return electric_logits(logits, generated.cloze_logits, corrupted_ids,
                           self.mask_prob)


# The official hparams that select each objective (hparam -> value); the
# first entry whose hparams all match wins.  PretrainingConfig.validate
# refuses the combinations no entry fits (two_tower_generator without a
# discriminator, electric_objective without two_tower_generator).
REGISTRY: Tuple[Tuple[Dict[str, Any], Type[Objective]], ...] = (
    ({"electric_objective": True}, Electric),
    ({"two_tower_generator": True}, TwoTowerElectra),
    ({"electra_objective": False}, MaskedLM),
    ({}, Electra),
)


def objective_class(hparams: Any) -> Type[Objective]:
  """The objective class of `hparams` (e.g. a PretrainingConfig)."""
  for selected_by, cls in REGISTRY:
    if all(getattr(hparams, key) == value for key, value in selected_by.items()):
      return cls
  raise ValueError("objective_class: no objective fits these hparams")


def objective_for(hparams: Any) -> Objective:
  """The objective of `hparams`, with their settings."""
  return objective_class(hparams).from_hparams(hparams)
