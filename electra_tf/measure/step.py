"""Throughput of the pre-training train step (ours, optionally against Model
Garden's ElectraPretrainer) on one synthetic masked batch.

The command is `python -m electra_tf.benchmark` (its docstring lists the
JSON fields); `electra_tf.bench_memory` reuses the batch and our runner.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Dict, List, Tuple

import numpy as np

from electra_tf import config as config_lib
from electra_tf.errors import TrainingError
from electra_tf.measure.device import device_and_peak_memory_mb
from electra_tf.pretrain.config import PretrainingConfig



def synthetic_batch(batch_size: int, seq_length: int, max_predictions: int,
                    vocab_size: int, seed: int = 0) -> Dict[str, np.ndarray]:
  """A masked pre-training batch of random tokens (project key names)."""
  rng = np.random.default_rng(seed)
  original = rng.integers(0, vocab_size, size=[batch_size, seq_length], dtype=np.int32)
  positions = np.stack([np.sort(rng.choice(np.arange(1, seq_length), max_predictions,
                                           replace=False))
                        for _ in range(batch_size)]).astype(np.int32)
  input_ids = original.copy()
  np.put_along_axis(input_ids, positions, config_lib.BERT_MASK_ID % vocab_size, axis=1)
  return {
      "input_ids": input_ids,
      "input_mask": np.ones([batch_size, seq_length], np.int32),
      "segment_ids": np.zeros([batch_size, seq_length], np.int32),
      "masked_lm_positions": positions,
      "masked_lm_ids": np.take_along_axis(original, positions, axis=1),
      "masked_lm_weights": np.ones([batch_size, max_predictions], np.float32),
  }


def time_per_step(run_steps: Callable[[int], None], steps: int) -> float:
  """Seconds per step of `run_steps(n)` (which must block until done)."""
  start = time.perf_counter()
  run_steps(steps)
  return (time.perf_counter() - start) / steps


def electra_step_runner(config: PretrainingConfig,
                        batch: Dict[str, np.ndarray]) -> Callable[[int], None]:
  """run_steps(n): n steps of this project's train loop on `batch`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from electra_tf import distribution  # pylint: disable=g-import-not-at-top
  from electra_tf.pretrain import job as job_lib  # pylint: disable=g-import-not-at-top

  strategy = distribution.create_strategy("auto")
  job = job_lib.PretrainingJob(config, strategy)
  dataset = tf.data.Dataset.from_tensors(batch).repeat()
  iterator = iter(strategy.experimental_distribute_dataset(dataset))
  step_loop = job.make_step_loop()

  def run_steps(n: int) -> None:
    losses, _, _ = step_loop(iterator, tf.constant(n), tf.constant(False))
    float(losses["loss"].numpy())

  return run_steps


def model_garden_step_runner(config: PretrainingConfig, batch: Dict[str, np.ndarray],
                             precision: str = "float32"
                             ) -> Tuple[Callable[[int], None], str]:
  """(run_steps(n): n steps of Model Garden's ELECTRA pre-training on `batch`,
  the compute dtype its encoders run in): BertEncoders of the config's sizes
  sharing the embedding layer, the task's loss, Keras AdamW clipped to norm
  1; precision "bfloat16": the encoders under mixed_bfloat16, the rest
  float32.  docs/performance.md."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras as keras  # pylint: disable=g-import-not-at-top
  from official.nlp.configs import encoders  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import models  # pylint: disable=g-import-not-at-top
  from electra_tf import optimization  # pylint: disable=g-import-not-at-top

  def encoder_config(model_config: config_lib.ModelConfig) -> encoders.EncoderConfig:
    return encoders.EncoderConfig(type="bert", bert=encoders.BertEncoderConfig(
        vocab_size=model_config.vocab_size, hidden_size=model_config.hidden_size,
        num_layers=model_config.num_hidden_layers,
        num_attention_heads=model_config.num_attention_heads,
        intermediate_size=model_config.intermediate_size,
        max_position_embeddings=model_config.max_position_embeddings,
        type_vocab_size=model_config.type_vocab_size,
        embedding_size=config.effective_embedding_size))

  disc_config = config.encoder_config()
  gen_config = config.generator_config()
  with optimization.dtype_policy(None if precision == "float32" else precision):
    discriminator = encoders.build_encoder(encoder_config(disc_config))
    generator = encoders.build_encoder(encoder_config(gen_config),
                                       embedding_layer=discriminator.get_embedding_layer())
  model = models.ElectraPretrainer(
      generator_network=generator, discriminator_network=discriminator,
      vocab_size=disc_config.vocab_size, num_classes=2,
      num_token_predictions=config.max_predictions_per_seq,
      mlm_activation="gelu",
      mlm_initializer=keras.initializers.TruncatedNormal(stddev=config_lib.INITIALIZER_RANGE))
  optimizer = keras.optimizers.AdamW(learning_rate=config.learning_rate,
                                     weight_decay=config.weight_decay_rate,
                                     epsilon=1e-6, global_clipnorm=1.0)
  inputs = {"input_word_ids": batch["input_ids"], "input_mask": batch["input_mask"],
            "input_type_ids": batch["segment_ids"],
            "masked_lm_positions": batch["masked_lm_positions"],
            "masked_lm_ids": batch["masked_lm_ids"],
            "masked_lm_weights": batch["masked_lm_weights"]}
  inputs = {k: tf.constant(v) for k, v in inputs.items()}

  def loss_fn(outputs) -> tf.Tensor:
    # Model Garden's ElectraPretrainTask.build_losses (no NSP labels).
    lm_losses = keras.losses.sparse_categorical_crossentropy(
        inputs["masked_lm_ids"], tf.cast(outputs["lm_outputs"], tf.float32),
        from_logits=True)
    weights = inputs["masked_lm_weights"]
    mlm_loss = tf.math.divide_no_nan(tf.reduce_sum(lm_losses * weights),
                                     tf.reduce_sum(weights))
    input_mask = tf.cast(inputs["input_mask"], tf.float32)
    rtd = tf.nn.sigmoid_cross_entropy_with_logits(
        logits=outputs["disc_logits"], labels=tf.cast(outputs["disc_label"], tf.float32))
    rtd_loss = tf.math.divide_no_nan(tf.reduce_sum(input_mask * rtd),
                                     tf.reduce_sum(input_mask))
    return mlm_loss + config.disc_weight * rtd_loss

  @tf.function
  def train_loop(n):
    loss = tf.constant(0.0)
    for _ in tf.range(n):
      with tf.GradientTape() as tape:
        loss = loss_fn(model(inputs, training=True))
      variables = model.trainable_variables
      grads = tape.gradient(loss, variables)
      # The unused NSP head and pooler get no gradient (as in Model Garden).
      optimizer.apply_gradients([(g, v) for g, v in zip(grads, variables)
                                 if g is not None])
    return loss

  def run_steps(n: int) -> None:
    float(train_loop(tf.constant(n)).numpy())

  return run_steps, discriminator.dtype_policy.compute_dtype


def op_seconds_by_type(profile_dir: str) -> Dict[str, float]:
  """Seconds spent in each TensorFlow op type (MatMul, Mul, ...) in the
  newest tf.profiler trace under `profile_dir`, summed over the threads that
  run ops (so on several cores the total exceeds the wall time)."""
  import glob  # pylint: disable=g-import-not-at-top
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-import-not-at-top
  paths = sorted(glob.glob(os.path.join(profile_dir, "**", "*.xplane.pb"), recursive=True),
                 key=os.path.getmtime)
  if not paths:
    raise TrainingError(f"--profile_dir: no tf.profiler trace under {profile_dir}")
  space = xplane_pb2.XSpace()
  with open(paths[-1], "rb") as f:
    space.ParseFromString(f.read())
  seconds: Dict[str, float] = {}
  for plane in space.planes:
    for line in plane.lines:
      # Op executions are the events of the executor's compute threads,
      # named "<op name>:<op type>".
      if not line.name.startswith("tf_Compute"):
        continue
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        if ":" in name and "::" not in name:  # not the executor's own events
          op_type = name.rsplit(":", 1)[1]
          seconds[op_type] = seconds.get(op_type, 0.0) + event.duration_ps * 1e-12
  return seconds


def profile_steps(run_steps: Callable[[int], None], steps: int,
                  profile_dir: str, top: int = 12) -> List[Tuple[str, float]]:
  """Traces `run_steps(steps)` into `profile_dir`; the `top` op types by
  time as (type, ms per step) pairs, largest first."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.profiler.experimental.start(profile_dir)
  try:
    run_steps(steps)
  finally:
    tf.profiler.experimental.stop()
  seconds = op_seconds_by_type(profile_dir)
  ranked = sorted(seconds.items(), key=lambda item: -item[1])[:top]
  return [(op_type, 1000.0 * total / steps) for op_type, total in ranked]


def run_benchmark(config: PretrainingConfig, steps: int, warmup_steps: int,
                  baseline: str = None, pairs: int = 1,
                  profile_dir: str = None,
                  baseline_precision: str = "float32") -> Dict[str, object]:
  """The JSON figures for `config` (train_batch_size x max_seq_length).

  Our step is timed `pairs` times (`steps` steps each, after `warmup_steps`
  untimed ones), the median reported; a baseline is timed alternately in
  this process, `speedup` the median of per-pair ratios.  With
  `profile_dir`, `steps` more steps are traced and `profile_top_ops` lists
  the costliest op types (ms per step)."""
  from electra_tf import flops  # pylint: disable=g-import-not-at-top
  batch = synthetic_batch(config.train_batch_size, config.max_seq_length,
                          config.max_predictions_per_seq, config.vocab_size, config.seed)
  runners = [electra_step_runner(config, batch)]
  runners[0](max(warmup_steps, 1))  # at least one: tracing is not timed
  device, peak_memory_mb = device_and_peak_memory_mb()
  if baseline == "model_garden":
    baseline_runner, baseline_compute_dtype = model_garden_step_runner(
        config, batch, baseline_precision)
    runners.append(baseline_runner)
    runners[1](max(warmup_steps, 1))
  seconds = [[time_per_step(run, steps) for run in runners] for _ in range(pairs)]
  ours = float(np.median([pair[0] for pair in seconds]))
  seq_per_sec = config.train_batch_size / ours
  flops_per_seq = flops.flops_per_seq(config)
  result = {"seq_per_sec": seq_per_sec, "step_ms": 1000.0 * ours,
            "flops_per_seq": flops_per_seq,
            "achieved_tflops": flops_per_seq * seq_per_sec / 1e12,
            "device": device, "peak_memory_mb": peak_memory_mb, "pairs": pairs,
            "precision": config.mixed_precision or "float32"}
  if baseline == "model_garden":
    result["baseline_precision"] = baseline_compute_dtype
    baseline_seconds = float(np.median([pair[1] for pair in seconds]))
    result["baseline_seq_per_sec"] = config.train_batch_size / baseline_seconds
    result["pair_speedups"] = [pair[1] / pair[0] for pair in seconds]
    result["speedup"] = float(np.median(result["pair_speedups"]))
  if profile_dir:
    result["profile_top_ops"] = profile_steps(runners[0], steps, profile_dir)
  return result
