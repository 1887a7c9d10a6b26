"""ELECTRA's optimizer: Adam without bias correction plus decoupled weight decay.

The official `model/optimization.py` as a Keras 2 optimizer.  Per variable w
with gradient g (the replicas' sum, clipped to global norm 1.0):

  m = beta_1 * m + (1 - beta_1) * g
  v = beta_2 * v + (1 - beta_2) * g^2
  update = m / (sqrt(v) + epsilon) [+ weight_decay_rate * w]
  w = w - lr * multiplier(w) * update

beta_1 0.9, beta_2 0.999, epsilon 1e-6, no bias correction; no decay for
names containing `LayerNorm`, `layer_norm` or `bias`; `multiplier(w)`: the
layer-wise decay.  docs/faithfulness.md.
"""

import contextlib
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence

import tensorflow as tf
import tf_keras as keras

from electra_tf.errors import ConfigError

BETA_1 = 0.9
BETA_2 = 0.999
EPSILON = 1e-6
CLIP_NORM = 1.0
EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


def dense_gradients(gradients: Sequence[Optional[Any]]) -> List[Optional[tf.Tensor]]:
  """The gradients with every tf.IndexedSlices summed into its dense tensor
  (a token looked up twice gives two rows for one table row)."""
  return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
          for g in gradients]


def clip_by_global_norm(gradients: Sequence[Optional[Any]],
                        clip_norm: float = CLIP_NORM) -> List[Optional[tf.Tensor]]:
  """Official `tf.clip_by_global_norm(grads, 1.0)` with the norm of the dense
  gradients (`dense_gradients`), as the official graph."""
  dense = dense_gradients(gradients)
  return tf.clip_by_global_norm(dense, clip_norm)[0]


def learning_rate_at(global_step, learning_rate: float, num_train_steps: int,
                     num_warmup_steps: float, lr_decay_power: float = 1.0
                     ) -> tf.Tensor:
  """Official learning rate at `global_step` (scalar float32 tensor):
  polynomial decay to 0 at `num_train_steps`, times min(1, global_step /
  num_warmup_steps) (official quirk: the peak is below `learning_rate`)."""
  step = tf.cast(global_step, tf.float32)
  decay_steps = tf.cast(num_train_steps, tf.float32)
  fraction_done = tf.minimum(step, decay_steps) / decay_steps
  decayed = learning_rate * tf.pow(1.0 - fraction_done, lr_decay_power)
  if not num_warmup_steps:
    # The official division by zero gives min(1, inf) = 1 for every step the
    # optimizer uses (>= 1); step 0 is never used (see ElectraLearningRate).
    return decayed
  warmup = tf.minimum(1.0, step / tf.cast(num_warmup_steps, tf.float32))
  return decayed * warmup


@keras.utils.register_keras_serializable(package="electra_tf")
class ElectraLearningRate(keras.optimizers.schedules.LearningRateSchedule):
  """Rate of the next update: `learning_rate_at(iterations + 1)`, since in the
  official graph the k-th update reads lr(k)."""

  def __init__(self, learning_rate: float, num_train_steps: int,
               num_warmup_steps: float, lr_decay_power: float = 1.0):
    super().__init__()
    self.learning_rate = learning_rate
    self.num_train_steps = num_train_steps
    self.num_warmup_steps = num_warmup_steps
    self.lr_decay_power = lr_decay_power

  def __call__(self, iterations):
    return learning_rate_at(iterations + 1, self.learning_rate,
                            self.num_train_steps, self.num_warmup_steps,
                            self.lr_decay_power)

  def get_config(self) -> Dict[str, Any]:
    return {"learning_rate": self.learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "lr_decay_power": self.lr_decay_power}


def layer_depths(n_layers: int) -> Dict[str, int]:
  """Official `_get_layer_lrs`: substring of a name -> depth.  Embeddings 0,
  layer i i+1, the head n_layers + 2; none n_layers + 1, so the top layer
  gets decay^2 (official quirk)."""
  depths = {"/embeddings/": 0, "/embeddings_project/": 0,
            "task_specific/": n_layers + 2}
  for layer in range(n_layers):
    depths[f"encoder/layer_{layer}/"] = layer + 1
  return depths


def layer_lr_multipliers(variable_names: Iterable[str], decay: float,
                         n_layers: int, unmatched_as_head: bool = False
                         ) -> Dict[str, float]:
  """Layer-wise learning-rate multiplier decay^(n_layers + 2 - depth) per name.

  A name matching no key, or several, raises ValueError; with
  `unmatched_as_head` a name no key matches is the head's (multiplier 1)."""
  depths = layer_depths(n_layers)
  multipliers = {}
  for name in variable_names:
    keys = [key for key in depths if key in name]
    if len(keys) == 1:
      depth = depths[keys[0]]
    elif not keys and unmatched_as_head:
      depth = depths["task_specific/"]
    else:
      found = f"keys {keys}" if keys else "no key"
      raise ConfigError(
          f"layerwise_lr_decay: variable {name!r} contains {found} of "
          f"{list(depths)}; each variable must contain exactly one")
    multipliers[name] = decay ** (n_layers + 2 - depth)
  return multipliers


def uses_weight_decay(variable_name: str) -> bool:
  """Whether decoupled weight decay applies (official exclusion by substring)."""
  return not any(key in variable_name for key in EXCLUDE_FROM_WEIGHT_DECAY)


@keras.utils.register_keras_serializable(package="electra_tf")
class AdamWeightDecay(keras.optimizers.Optimizer):
  """The official AdamWeightDecayOptimizer as a Keras 2 optimizer.

  `apply_gradients` (replica context) sums the replicas' gradients, clips the
  sum to global norm 1.0, then updates each variable (module docstring);
  `clip_per_replica`: each replica's gradients are clipped, then summed."""

  def __init__(self, learning_rate: ElectraLearningRate,
               weight_decay_rate: float = 0.0,
               layerwise_lr_decay: Optional[float] = None,
               n_transformer_layers: Optional[int] = None,
               clip_per_replica: bool = False, unmatched_as_head: bool = False,
               name: str = "AdamWeightDecay", **kwargs):
    # Keras's own weight decay (applied before the update, in another order)
    # is off; the official decay is part of `update_step`.  XLA is off so that
    # the update is the same elementwise float32 arithmetic as the official
    # graph on every device.
    kwargs.update(weight_decay=None, global_clipnorm=CLIP_NORM,
                  jit_compile=False)
    super().__init__(name=name, **kwargs)
    self._learning_rate = self._build_learning_rate(learning_rate)
    self.weight_decay_rate = weight_decay_rate
    self.layerwise_lr_decay = layerwise_lr_decay
    self.n_transformer_layers = n_transformer_layers
    self.clip_per_replica = clip_per_replica
    self.unmatched_as_head = unmatched_as_head

  def build(self, var_list):
    super().build(var_list)
    if getattr(self, "_built", False):
      return
    self._built = True
    names = [var.name for var in var_list]
    if self.layerwise_lr_decay:
      by_name = layer_lr_multipliers(names, self.layerwise_lr_decay,
                                     self.n_transformer_layers, self.unmatched_as_head)
      self._lr_multipliers = [by_name[name] for name in names]
    else:
      self._lr_multipliers = [1.0] * len(names)
    self._decays = [self.weight_decay_rate > 0 and uses_weight_decay(name)
                    for name in names]
    self._adam_m = [self.add_variable_from_reference(var, "adam_m")
                    for var in var_list]
    self._adam_v = [self.add_variable_from_reference(var, "adam_v")
                    for var in var_list]

  def update_step(self, gradient, variable):
    index = self._index_dict[self._var_key(variable)]
    m, v = self._adam_m[index], self._adam_v[index]
    # Same operation order as the official graph, all in float32.
    next_m = BETA_1 * m + (1.0 - BETA_1) * gradient
    next_v = BETA_2 * v + (1.0 - BETA_2) * tf.square(gradient)
    update = next_m / (tf.sqrt(next_v) + EPSILON)
    if self._decays[index]:
      update += self.weight_decay_rate * variable
    # float32 rate times a Python multiplier, as the official per-key rates.
    learning_rate = self.learning_rate * self._lr_multipliers[index]
    variable.assign(variable - learning_rate * update)
    m.assign(next_m)
    v.assign(next_v)

  def aggregate_gradients(self, grads_and_vars):
    """Sums the replicas' gradients; with clip_per_replica clips each
    replica's list first (official TPU: clip, then CrossShardOptimizer)."""
    if self.clip_per_replica:
      grads, variables = zip(*grads_and_vars)
      grads_and_vars = list(zip(clip_by_global_norm(grads, self.global_clipnorm),
                                variables))
    return super().aggregate_gradients(grads_and_vars)

  def _clip_gradients(self, grads):
    """Keras' global_clipnorm hook: the official clip with the true norm
    (none with clip_per_replica: the summed gradients are applied as they are)."""
    if self.clip_per_replica:
      return grads
    return clip_by_global_norm(grads, self.global_clipnorm)

  def current_learning_rate(self) -> tf.Tensor:
    """The base rate (before layer-wise multipliers) the latest update used;
    0 before the first."""
    schedule = self._learning_rate
    return learning_rate_at(self.iterations, schedule.learning_rate,
                            schedule.num_train_steps, schedule.num_warmup_steps,
                            schedule.lr_decay_power)

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    for key in ("weight_decay", "global_clipnorm", "jit_compile", "clipnorm",
                "clipvalue"):
      config.pop(key, None)
    config.update(learning_rate=self._serialize_hyperparameter(self._learning_rate),
                  weight_decay_rate=self.weight_decay_rate,
                  layerwise_lr_decay=self.layerwise_lr_decay,
                  n_transformer_layers=self.n_transformer_layers,
                  clip_per_replica=self.clip_per_replica,
                  unmatched_as_head=self.unmatched_as_head)
    return config

  @classmethod
  def from_config(cls, config: Mapping[str, Any], custom_objects=None):
    config = dict(config)
    schedule = config.pop("learning_rate")
    if isinstance(schedule, dict):
      schedule = ElectraLearningRate(**schedule["config"])
    return cls(learning_rate=schedule, **config)


@keras.utils.register_keras_serializable(package="electra_tf")
class Lamb(AdamWeightDecay):
  """LAMB (You et al. 2020) in place of Adam, all else AdamWeightDecay's.

  Model Garden's `lamb.LAMB` update, k the update's 1-based number:

    m = beta_1 * m + (1 - beta_1) * g;  v = beta_2 * v + (1 - beta_2) * g^2
    update = (m / (1 - beta_1^k)) / (sqrt(v / (1 - beta_2^k)) + epsilon)
             [+ weight_decay_rate * w]
    ratio = ||w|| / ||update|| (1 when either norm is 0)
    w = w - lr * multiplier(w) * ratio * update

  Decay term and trust ratio skip the official exclusions; docs/big_batches.md."""

  def __init__(self, learning_rate: ElectraLearningRate, name: str = "LAMB", **kwargs):
    super().__init__(learning_rate, name=name, **kwargs)

  def update_step(self, gradient, variable):
    index = self._index_dict[self._var_key(variable)]
    m, v = self._adam_m[index], self._adam_v[index]
    next_m = BETA_1 * m + (1.0 - BETA_1) * gradient
    next_v = BETA_2 * v + (1.0 - BETA_2) * tf.square(gradient)
    k = tf.cast(self.iterations + 1, tf.float32)
    corrected_m = next_m / (1.0 - tf.pow(BETA_1, k))
    corrected_v = next_v / (1.0 - tf.pow(BETA_2, k))
    update = corrected_m / (tf.sqrt(corrected_v) + EPSILON)
    learning_rate = self.learning_rate * self._lr_multipliers[index]
    if uses_weight_decay(variable.name):
      update += self.weight_decay_rate * variable
      w_norm, u_norm = tf.norm(variable), tf.norm(update)
      learning_rate *= tf.where(w_norm > 0, tf.where(u_norm > 0, w_norm / u_norm, 1.0), 1.0)
    variable.assign(variable - learning_rate * update)
    m.assign(next_m)
    v.assign(next_v)


OPTIMIZER_CLASSES = {"adamw": AdamWeightDecay, "lamb": Lamb}


def create_optimizer(learning_rate: float, num_train_steps: int,
                     num_warmup_steps: float, weight_decay_rate: float,
                     lr_decay_power: float = 1.0,
                     layerwise_lr_decay: Optional[float] = None,
                     n_transformer_layers: Optional[int] = None,
                     clip_per_replica: bool = False,
                     optimizer: str = "adamw",
                     unmatched_as_head: bool = False) -> AdamWeightDecay:
  """Official `create_optimizer` settings; create it under `strategy.scope()`.

  `optimizer`: "adamw" (AdamWeightDecay) or "lamb".  `num_warmup_steps` may
  be fractional.  Layer-wise decay is on when `layerwise_lr_decay` > 0
  (official `layerwise_lr_decay_power`) and needs `n_transformer_layers`."""
  if not learning_rate > 0:
    raise ConfigError(f"learning_rate: {learning_rate} must be > 0")
  if num_train_steps <= 0:
    raise ConfigError(f"num_train_steps: {num_train_steps} must be > 0")
  if num_warmup_steps < 0:
    raise ConfigError(f"num_warmup_steps: {num_warmup_steps} must be >= 0")
  if weight_decay_rate < 0:
    raise ConfigError(f"weight_decay_rate: {weight_decay_rate} must be >= 0")
  if lr_decay_power < 0:
    raise ConfigError(f"lr_decay_power: {lr_decay_power} must be >= 0")
  if layerwise_lr_decay is not None and layerwise_lr_decay <= 0:
    # The official code treats <= 0 as "off"; None is the only "off" here.
    raise ConfigError(f"layerwise_lr_decay: {layerwise_lr_decay} must be > 0 "
                      "(or None for no layer-wise decay)")
  if layerwise_lr_decay and not (n_transformer_layers or 0) > 0:
    raise ConfigError("n_transformer_layers: layerwise_lr_decay needs the "
                      f"number of encoder layers, got {n_transformer_layers}")
  if optimizer not in OPTIMIZER_CLASSES:
    raise ConfigError(f"optimizer: {optimizer!r} is not one of {', '.join(OPTIMIZER_CLASSES)}")
  schedule = ElectraLearningRate(learning_rate, num_train_steps,
                                 num_warmup_steps, lr_decay_power)
  return OPTIMIZER_CLASSES[optimizer](schedule, weight_decay_rate=weight_decay_rate,
                                      layerwise_lr_decay=layerwise_lr_decay,
                                      n_transformer_layers=n_transformer_layers,
                                      clip_per_replica=clip_per_replica,
                                      unmatched_as_head=unmatched_as_head)


@contextlib.contextmanager
def dtype_policy(mixed_precision: Optional[str]) -> Iterator[None]:
  """Layers constructed inside get the tf_keras policy "mixed_<mixed_precision>"
  (float32 when None); the previous global policy is restored on exit."""
  previous = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(
      f"mixed_{mixed_precision}" if mixed_precision else "float32")
  try:
    yield
  finally:
    keras.mixed_precision.set_global_policy(previous)


def with_loss_scaling(optimizer: keras.optimizers.Optimizer,
                      mixed_precision: Optional[str]) -> keras.optimizers.Optimizer:
  """float16: the optimizer in a dynamic LossScaleOptimizer; else unchanged."""
  if mixed_precision == "float16":
    return keras.mixed_precision.LossScaleOptimizer(optimizer, dynamic=True)
  return optimizer


def base_optimizer(optimizer: keras.optimizers.Optimizer) -> keras.optimizers.Optimizer:
  """The optimizer inside a LossScaleOptimizer, or `optimizer` itself."""
  if isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer):
    return optimizer.inner_optimizer
  return optimizer
