"""Throughput of the full ELECTRA pre-training step on synthetic batches.

    python -m electra_tf.benchmark --model_size=small --batch_size=32 \
        --seq_length=128 --steps=10 [--mixed_precision=bfloat16|float16] \
        [--jit_compile] [--hparams=JSON] [--baseline=model_garden] --json

Times the pre-training job's train loop (generator, sampling, discriminator,
losses, gradients, optimizer update; masking excluded) on one fixed
synthetic batch after `--warmup_steps` untimed steps (tracing included
there).  The batch: random ids [B, S], a full input_mask, distinct random
masked positions [B, N] (never position 0) holding [MASK] with their
original ids as labels.  `--baseline=model_garden` times tf-models-official's
`ElectraPretrainer` of the same generator/discriminator sizes, with Model
Garden's electra-task loss and Keras AdamW, on the same batch in the same
process.  The last line printed is one JSON object:

  seq_per_sec, step_ms, flops_per_seq (official train FLOPs, electra_tf.flops),
  achieved_tflops, device, peak_memory_mb [, baseline_seq_per_sec, speedup]

peak_memory_mb is the GPU allocator's peak on a GPU, else the process's peak
resident set size (measured before the baseline runs).
"""

from __future__ import annotations

import json
import os
import resource
import time
from typing import Callable, Dict, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags  # noqa: E402
import numpy as np  # noqa: E402

from electra_tf import cli  # noqa: E402
from electra_tf import config as config_lib  # noqa: E402
from electra_tf.pretrain.config import PretrainingConfig  # noqa: E402

FLAGS = flags.FLAGS


def _define_flags() -> None:
  """The command's flags (defined only when run, not when imported)."""
  flags.DEFINE_enum("model_size", "small", list(config_lib.MODEL_SIZES), "Model size.")
  flags.DEFINE_integer("batch_size", 32, "Sequences per step.")
  flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
  flags.DEFINE_integer("steps", 10, "Timed steps.")
  flags.DEFINE_integer("warmup_steps", 2, "Untimed steps before timing (tracing, caches).")
  flags.DEFINE_enum("mixed_precision", None, ["bfloat16", "float16"],
                    "Mixed-precision policy (default float32).")
  flags.DEFINE_boolean("jit_compile", False, "XLA-compile the train step.")
  flags.DEFINE_string("hparams", None, "JSON object or .json file of extra hparams.")
  flags.DEFINE_enum("baseline", None, ["model_garden"],
                    "Also time Model Garden's ElectraPretrainer on the same batch.")
  flags.DEFINE_boolean("json", False, "Print only the JSON line (no human-readable lines).")

MASK_ID = 103  # [MASK] in the BERT uncased vocab; any id < vocab_size works


def synthetic_batch(batch_size: int, seq_length: int, max_predictions: int,
                    vocab_size: int, seed: int = 0) -> Dict[str, np.ndarray]:
  """A masked pre-training batch of random tokens (project key names)."""
  rng = np.random.default_rng(seed)
  original = rng.integers(0, vocab_size, size=[batch_size, seq_length], dtype=np.int32)
  positions = np.stack([np.sort(rng.choice(np.arange(1, seq_length), max_predictions,
                                           replace=False))
                        for _ in range(batch_size)]).astype(np.int32)
  input_ids = original.copy()
  np.put_along_axis(input_ids, positions, MASK_ID % vocab_size, axis=1)
  return {
      "input_ids": input_ids,
      "input_mask": np.ones([batch_size, seq_length], np.int32),
      "segment_ids": np.zeros([batch_size, seq_length], np.int32),
      "masked_lm_positions": positions,
      "masked_lm_ids": np.take_along_axis(original, positions, axis=1),
      "masked_lm_weights": np.ones([batch_size, max_predictions], np.float32),
  }


def time_per_step(run_steps: Callable[[int], None], steps: int,
                  warmup_steps: int) -> float:
  """Seconds per step of `run_steps(n)` (which must block until done)."""
  if warmup_steps > 0:
    run_steps(warmup_steps)
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
    losses, _ = step_loop(iterator, tf.constant(n))
    float(losses["loss"].numpy())

  return run_steps


def model_garden_step_runner(config: PretrainingConfig,
                             batch: Dict[str, np.ndarray]) -> Callable[[int], None]:
  """run_steps(n): n steps of Model Garden's ELECTRA pre-training on `batch`.

  BertEncoder networks of the config's discriminator/generator sizes with the
  generator sharing the discriminator's embedding layer (as the electra task
  with tie_embeddings), the task's loss, Keras AdamW clipped to global norm 1.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras as keras  # pylint: disable=g-import-not-at-top
  from official.nlp.configs import encoders  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import models  # pylint: disable=g-import-not-at-top

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
  discriminator = encoders.build_encoder(encoder_config(disc_config))
  generator = encoders.build_encoder(encoder_config(gen_config),
                                     embedding_layer=discriminator.get_embedding_layer())
  model = models.ElectraPretrainer(
      generator_network=generator, discriminator_network=discriminator,
      vocab_size=disc_config.vocab_size, num_classes=2,
      num_token_predictions=config.max_predictions_per_seq,
      mlm_activation="gelu",
      mlm_initializer=keras.initializers.TruncatedNormal(stddev=0.02))
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

  return run_steps


def device_and_peak_memory_mb() -> Tuple[str, float]:
  """The device in words and the peak memory so far (GPU allocator or RSS)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  gpus = tf.config.list_physical_devices("GPU")
  if gpus:
    name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
    peak = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
    return f"{len(gpus)} x {name}", peak
  cpu = "CPU"
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    if models:
      cpu = models[0]
  except OSError:
    pass
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  # ru_maxrss is in KiB on Linux.
  return f"CPU: {cpu} ({cores} cores)", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_benchmark(config: PretrainingConfig, steps: int,
                  warmup_steps: int, baseline: str = None) -> Dict[str, object]:
  """The JSON figures for `config` (train_batch_size x max_seq_length)."""
  from electra_tf import flops  # pylint: disable=g-import-not-at-top
  batch = synthetic_batch(config.train_batch_size, config.max_seq_length,
                          config.max_predictions_per_seq, config.vocab_size, config.seed)
  seconds = time_per_step(electra_step_runner(config, batch), steps, warmup_steps)
  device, peak_memory_mb = device_and_peak_memory_mb()
  seq_per_sec = config.train_batch_size / seconds
  flops_per_seq = flops.flops_per_seq(config)
  result = {"seq_per_sec": seq_per_sec, "step_ms": 1000.0 * seconds,
            "flops_per_seq": flops_per_seq,
            "achieved_tflops": flops_per_seq * seq_per_sec / 1e12,
            "device": device, "peak_memory_mb": peak_memory_mb}
  if baseline == "model_garden":
    baseline_seconds = time_per_step(model_garden_step_runner(config, batch), steps,
                                     warmup_steps)
    result["baseline_seq_per_sec"] = config.train_batch_size / baseline_seconds
    result["speedup"] = seq_per_sec / result["baseline_seq_per_sec"]
  return result


def config_from_flags() -> PretrainingConfig:
  """Benchmark flags over --hparams (the flags win)."""
  for name in ("batch_size", "seq_length", "steps"):
    if FLAGS[name].value <= 0:
      raise ValueError(f"--{name}: {FLAGS[name].value} must be > 0")
  if FLAGS.warmup_steps < 0:
    raise ValueError(f"--warmup_steps: {FLAGS.warmup_steps} must be >= 0")
  hparams = config_lib.parse_hparams(FLAGS.hparams)
  hparams.update(model_size=FLAGS.model_size, train_batch_size=FLAGS.batch_size,
                 max_seq_length=FLAGS.seq_length, jit_compile=FLAGS.jit_compile,
                 mixed_precision=FLAGS.mixed_precision)
  return PretrainingConfig.create(hparams)


def main() -> int:
  config = config_from_flags()
  if FLAGS.baseline and not config.electra_objective:
    raise ValueError("--baseline=model_garden compares the ELECTRA objective; "
                     "drop electra_objective=false from --hparams")
  result = run_benchmark(config, FLAGS.steps, FLAGS.warmup_steps, FLAGS.baseline)
  if not FLAGS.json:
    print(f"{config.model_size}, batch {config.train_batch_size}, seq "
          f"{config.max_seq_length}, {config.mixed_precision or 'float32'}"
          f"{', XLA' if config.jit_compile else ''}: {result['seq_per_sec']:.1f} seq/s, "
          f"{result['step_ms']:.0f} ms/step", flush=True)
  print(json.dumps(result), flush=True)
  return 0


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "electra_tf.benchmark")
