"""Dropout whose masks are a function of an explicit seed.

    with dropout.seeded(seed):        # int64 [2], e.g. (run seed, step)
      outputs = model(batch, training=True)

Each `Dropout` called inside draws its mask from that seed folded with its
call index, so a resumed run drops the same units (docs/faithfulness.md);
outside `seeded` it is stateful tf.nn.dropout.  Per thread: each
MirroredStrategy replica has its own seed.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator, List, Optional

import tensorflow as tf
import tf_keras as keras

_SEED_STATE = threading.local()  # .current: [seed tensor, next call index]


@contextlib.contextmanager
def seeded(seed: tf.Tensor, first_call: int = 0) -> Iterator[List]:
  """Dropout layers called inside draw their masks from `seed` (int [2]),
  counting calls from `first_call`; yields the state [seed, next call]."""
  previous: Optional[List] = getattr(_SEED_STATE, "current", None)
  state = [tf.cast(seed, tf.int64), first_call]
  _SEED_STATE.current = state
  try:
    yield state
  finally:
    _SEED_STATE.current = previous


def replayable(fn: Callable[..., Any]) -> Callable[..., Any]:
  """`fn` whose Dropout layers draw the same masks on every call (for
  tf.recompute_grad); outside a `seeded` block `fn` itself."""
  state = getattr(_SEED_STATE, "current", None)
  if state is None:
    return fn
  seed, first_call = state

  def replayed(*args, **kwargs):
    with seeded(seed, first_call) as inner:
      outputs = fn(*args, **kwargs)
    state[1] = inner[1]
    return outputs

  return replayed


def step_seed(seed: int, step: tf.Tensor, replica_id: tf.Tensor) -> tf.Tensor:
  """The dropout seed of one replica at one step: int64 [2]."""
  base = tf.stack([tf.constant(seed, tf.int64), tf.cast(step, tf.int64)])
  return tf.random.experimental.stateless_fold_in(base, tf.cast(replica_id, tf.int64))


def draw_keep_mask(shape: tf.Tensor, seed: tf.Tensor, rate: float) -> tf.Tensor:
  """bool `shape`: True where a unit is kept; dropped when its 16 stateless
  random bits fall below round(rate * 2^16).  `seed`: int [2]."""
  units = tf.reduce_prod(shape)
  bits = tf.random.stateless_uniform([(units + 1) // 2], seed, minval=None, maxval=None,
                                     dtype=tf.uint32)
  halves = tf.reshape(tf.bitcast(bits, tf.uint16), [-1])[:units]  # [2 * ceil(units / 2)] -> [units]
  threshold = tf.constant(min(round(rate * 65536), 65535), tf.uint16)
  return tf.reshape(halves >= threshold, shape)


@keras.utils.register_keras_serializable(package="electra_tf")
class Dropout(keras.layers.Layer):
  """Inverted dropout with rate `rate`; seeded inside `seeded` (see module doc).

  Any input shape; output has the input's shape and dtype.
  """

  def __init__(self, rate: float, **kwargs):
    super().__init__(**kwargs)
    self.rate = float(rate)

  def call(self, inputs: tf.Tensor, training: Optional[bool] = None) -> tf.Tensor:
    if not training or self.rate == 0.0:
      return inputs
    state = getattr(_SEED_STATE, "current", None)
    if state is None:
      return tf.nn.dropout(inputs, rate=self.rate)
    seed = tf.random.experimental.stateless_fold_in(state[0], state[1])
    state[1] += 1
    # One multiplier: the backward pass is then one product, not the
    # gradients of a select and of a scaling.
    keep = draw_keep_mask(tf.shape(inputs), seed, self.rate)
    multiplier = tf.where(keep, tf.constant(1.0 / (1.0 - self.rate), inputs.dtype),
                          tf.zeros([], inputs.dtype))
    return inputs * multiplier

  def get_config(self):
    return {**super().get_config(), "rate": self.rate}
