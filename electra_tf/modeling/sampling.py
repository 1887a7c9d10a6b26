"""Sampling the generator's replacements: a categorical draw per masked slot.

`sample_from_softmax` draws from softmax(logits) by inverting the CDF with
one uniform per sample (the official Gumbel-max's distribution,
docs/faithfulness.md), the uniforms from `hashed_uniform`.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf


def _mix32(x: tf.Tensor) -> tf.Tensor:
  """murmur3's 32-bit finaliser: a bijective avalanche mix of uint32 values."""
  for shift, factor in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, shift))
    x *= tf.constant(factor, tf.uint32)
  return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))


def _seed_keys(seed: tf.Tensor) -> tf.Tensor:
  """int seeds [..., 2] (any int64 values) -> uint32 keys [...]."""
  words = tf.bitcast(tf.cast(seed, tf.int64), tf.uint32)  # [..., 2, 2]
  key = tf.fill(tf.shape(words)[:-2], tf.constant(0x243F6A88, tf.uint32))
  for i in range(2):
    for j in range(2):
      key = _mix32(tf.bitwise.bitwise_xor(key, words[..., i, j]) +
                   tf.constant(0x9E3779B9, tf.uint32))
  return key


def hashed_uniform(shape: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
  """Stateless U[0, 1) noise (multiples of 2^-24) of `shape` [B, ...].

  `seed` int [2] keys the whole tensor, int [B, 2] each example (its noise
  independent of the batch and replicas); plain uint32 arithmetic, the same
  with and without XLA."""
  seed = tf.convert_to_tensor(seed)
  per_example = seed.shape.rank == 2
  keys = _seed_keys(seed)[..., tf.newaxis]  # [B, 1] or [1]
  count = tf.reduce_prod(shape[1:] if per_example else shape)
  counters = tf.cast(tf.range(count), tf.uint32) * tf.constant(0x9E3779B9, tf.uint32)
  bits = _mix32(tf.bitwise.bitwise_xor(_mix32(keys + counters), keys))
  uniform = tf.cast(tf.bitwise.right_shift(bits, 8), tf.float32) * (1.0 / (1 << 24))
  return tf.reshape(uniform, shape)


def _uniform_noise(shape: tf.Tensor, seed: Optional[tf.Tensor]) -> tf.Tensor:
  """U[0, 1) noise of `shape`: stateful, or `hashed_uniform` from a seed."""
  if seed is None:
    return tf.random.uniform(shape)
  return hashed_uniform(shape, seed)


SAMPLING_BLOCK = 128  # vocabulary ids per block of the two-level CDF search


def _last_positive_index(cdf: tf.Tensor) -> tf.Tensor:
  """Index of the last entry that raises a non-decreasing cdf [..., K]."""
  return tf.reduce_sum(tf.cast(cdf < cdf[..., -1:], tf.int32), axis=-1)


def _search(cdf: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
  """The i with cdf[i-1] <= target < cdf[i] for cdf [..., K], target [...].

  Never an index whose cdf step is 0 (not even when rounding puts the
  target at or past the total).
  """
  count = tf.reduce_sum(tf.cast(cdf <= target[..., tf.newaxis], tf.int32), axis=-1)
  return tf.minimum(count, _last_positive_index(cdf))


def inverse_cdf_sample(probs: tf.Tensor, uniform: tf.Tensor) -> tf.Tensor:
  """Inverse-CDF draw from probs [R, V] (unnormalised is fine), uniform [R] -> [R].

  Two levels, so that no cumulative sum runs over the whole vocabulary
  (slow on CPU): the block of SAMPLING_BLOCK ids holding u * total, then the
  id inside that block.
  """
  vocab_size = tf.shape(probs)[-1]
  num_blocks = (vocab_size + SAMPLING_BLOCK - 1) // SAMPLING_BLOCK
  padded = tf.pad(probs, [[0, 0], [0, num_blocks * SAMPLING_BLOCK - vocab_size]])
  blocks = tf.reshape(padded, [tf.shape(probs)[0], num_blocks, SAMPLING_BLOCK])
  block_sums = tf.reduce_sum(blocks, axis=-1)  # [R, blocks]
  block_cdf = tf.cumsum(block_sums, axis=-1)
  target = uniform * block_cdf[:, -1]
  block = _search(block_cdf, target)
  below = tf.gather(tf.cumsum(block_sums, axis=-1, exclusive=True), block, batch_dims=1)
  inner_cdf = tf.cumsum(tf.gather(blocks, block, batch_dims=1), axis=-1)
  return block * SAMPLING_BLOCK + _search(inner_cdf, tf.maximum(target - below, 0.0))


def sample_from_softmax(logits: tf.Tensor, seed: Optional[tf.Tensor] = None,
                        disallow: Optional[tf.Tensor] = None) -> tf.Tensor:
  """Samples from softmax(logits) [B, ..., V] -> int32 ids [B, ...].

  `disallow` ([B, ..., V], 1.0 = forbidden) subtracts 1000 from those logits,
  as official.  `seed`: int [2] for the batch or int [B, 2] per example makes
  the draw stateless; without it the global generator is used.  One uniform
  per sample by the inverse CDF (module docstring), not the official Gumbel-max.
  """
  logits = tf.cast(logits, tf.float32)
  if disallow is not None:
    logits -= 1000.0 * disallow
  uniform = _uniform_noise(tf.shape(logits)[:-1], seed)
  vocab_size = tf.shape(logits)[-1]
  ids = inverse_cdf_sample(tf.reshape(tf.nn.softmax(logits), [-1, vocab_size]),
                           tf.reshape(uniform, [-1]))
  return tf.reshape(ids, tf.shape(logits)[:-1])
