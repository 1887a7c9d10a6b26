"""Throughput of the full ELECTRA pre-training step on synthetic batches, or
the serving cost of an exported SavedModel.

    python -m electra_tf.benchmark --model_size=small --batch_size=32 \
        --seq_length=128 --steps=10 [--mixed_precision=bfloat16|float16] \
        [--jit_compile] [--hparams=JSON] [--baseline=model_garden] [--pairs=3] --json

Times the pre-training job's train loop (generator, sampling, discriminator,
losses, gradients, optimizer update; masking excluded) on one fixed
synthetic batch after `--warmup_steps` untimed steps (at least one: tracing
is never timed), `--pairs` times, and reports the median.  The batch: random
ids [B, S], a full input_mask, distinct random masked positions [B, N]
(never position 0) holding [MASK] with their original ids as labels.
`--baseline=model_garden` times tf-models-official's
`ElectraPretrainer` of the same generator/discriminator sizes, with Model
Garden's electra-task loss and Keras AdamW, on the same batch in the same
process, alternating with ours (`--pairs` pairs).  The last line printed is
one JSON object:

  seq_per_sec, step_ms, flops_per_seq (official train FLOPs, electra_tf.flops),
  achieved_tflops, device, peak_memory_mb, pairs
  precision (ours: float32, bfloat16 or float16)
  [, baseline_precision (the compute dtype of Model Garden's encoders),
     baseline_seq_per_sec, pair_speedups, speedup (their median)]
  [, profile_top_ops: [[op type, ms per step], ...] with --profile_dir]

peak_memory_mb is the GPU allocator's peak on a GPU, else the process's peak
resident set size (measured after our warm-up, before the baseline is built).

    python -m electra_tf.benchmark --input_only --pretrain_tfrecords=GLOB \
        [--seq_length=128] [--batch_size=32] [--steps=200] [--vocab_file=V] --json

times the pre-training input pipeline alone (pretrain/data.py get_dataset:
read with checksums, decode, mask, batch, prefetch) over `--steps` batches
(200 unless given) after `--warmup_steps` (20 unless given): the JSON line
holds seq_per_sec, seq_per_sec_per_core (over the cores the process may run
on: `taskset -c 0` measures one), cores, batch_size, seq_length.

    python -m electra_tf.benchmark --export_dir=DIR [--batch_size=32] \
        [--seq_length=128] [--steps=10] [--latency_calls=100] --json

times the `text` and the ids (`serving_default`) signatures of a pre-training
or classification export (electra_tf.export, run_finetuning.py
--export_dir) on the same inputs: texts of seq_length - 2 random whole-word
vocab entries (one piece each, so every row is [CLS] words [SEP] of exactly
seq_length pieces; seq_length must not exceed the export's max_seq_length)
and their ids.  Calls of the two alternate, after `--warmup_steps` untimed
calls of each.  The JSON line: text_/ids_ latency_ms_p50 and latency_ms_p99
over `--latency_calls` calls at batch 1, text_/ids_seq_per_sec over
`--steps` calls at `--batch_size`, text_extra_cost (the text signature's
time per batch over the ids one's, minus 1), device, batch_size,
seq_length.
"""

from __future__ import annotations

import json
import os
import resource
import time
from typing import Any, Callable, Dict, List, Tuple

from absl import flags
import numpy as np

from electra_tf import cli
from electra_tf import config as config_lib
from electra_tf.pretrain.config import PretrainingConfig

FLAGS = flags.FLAGS


def _define_flags() -> None:
  """The command's flags (defined only when run, not when imported)."""
  flags.DEFINE_enum("model_size", "small", list(config_lib.MODEL_SIZES), "Model size.")
  flags.DEFINE_integer("batch_size", 32, "Sequences per step.")
  flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
  flags.DEFINE_integer("steps", 10, "Timed steps.")
  flags.DEFINE_integer("warmup_steps", 2, "Untimed steps before timing (tracing, caches).")
  flags.DEFINE_integer("pairs", 1, "Timings of --steps steps (alternating with the "
                       "--baseline's); the median is reported.")
  flags.DEFINE_enum("mixed_precision", None, ["bfloat16", "float16"],
                    "Mixed-precision policy (default float32).")
  flags.DEFINE_boolean("jit_compile", False, "XLA-compile the train step.")
  flags.DEFINE_string("profile_dir", None,
                      "Also trace --steps of our step with tf.profiler into this "
                      "directory (TensorBoard's Profile tab) and report the op types "
                      "that took the most time.")
  flags.DEFINE_string("hparams", None, "JSON object or .json file of extra hparams.")
  flags.DEFINE_enum("baseline_precision", "float32", ["float32", "bfloat16"],
                    "Model Garden's precision. bfloat16 builds its two encoders under the "
                    "mixed_bfloat16 policy and its ElectraPretrainer (heads, sampling) in "
                    "float32: Model Garden 2.20's ElectraPretrainer does not run under a "
                    "global mixed_bfloat16 policy (its sampling mixes float32 and bfloat16).")
  flags.DEFINE_enum("baseline", None, ["model_garden"],
                    "Also time Model Garden's ElectraPretrainer on the same batch.")
  flags.DEFINE_boolean("json", False, "Print only the JSON line (no human-readable lines).")
  flags.DEFINE_string("export_dir", None,
                      "Time this SavedModel's text and ids signatures instead of training.")
  flags.DEFINE_integer("latency_calls", 100,
                       "--export_dir: timed batch-1 calls of each signature.")
  flags.DEFINE_boolean("input_only", False,
                       "Time the pre-training input pipeline alone on --pretrain_tfrecords.")
  flags.DEFINE_string("pretrain_tfrecords", None,
                      "--input_only: TFRecords (comma-separated glob patterns).")
  flags.DEFINE_string("vocab_file", None,
                      "--input_only: vocab of the special ids (default: the BERT "
                      "uncased ids [CLS] 101, [SEP] 102, [MASK] 103).")

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
  the compute dtype its encoders run in).

  BertEncoder networks of the config's discriminator/generator sizes with the
  generator sharing the discriminator's embedding layer (as the electra task
  with tie_embeddings), the task's loss, Keras AdamW clipped to global norm 1.
  precision "bfloat16": the encoders are built under the mixed_bfloat16
  policy, the ElectraPretrainer around them (heads, sampling) in float32 (the
  setting a user can choose without editing Model Garden; under a global
  mixed_bfloat16 policy its sampling fails on mixed float32/bfloat16 inputs).
  """
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

  return run_steps, discriminator.dtype_policy.compute_dtype


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


def op_seconds_by_type(profile_dir: str) -> Dict[str, float]:
  """Seconds spent in each TensorFlow op type (MatMul, Mul, ...) in the
  newest tf.profiler trace under `profile_dir`, summed over the threads that
  run ops (so on several cores the total exceeds the wall time)."""
  import glob  # pylint: disable=g-import-not-at-top
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-import-not-at-top
  paths = sorted(glob.glob(os.path.join(profile_dir, "**", "*.xplane.pb"), recursive=True),
                 key=os.path.getmtime)
  if not paths:
    raise ValueError(f"--profile_dir: no tf.profiler trace under {profile_dir}")
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
  untimed ones) and the median is reported.  With a baseline, both are built
  in this process and timed alternately (ours, baseline, ours, ...), so that
  a machine whose speed drifts affects both alike; `speedup` is the median of
  the per-pair ratios.  `peak_memory_mb` is taken after our warm-up, before
  the baseline is built.  With `profile_dir`, `steps` more of our steps are
  traced there (after the timings) and `profile_top_ops` lists the op types
  that took the most time, in ms per step summed over the threads.
  """
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


def serving_inputs(vocab_file: str, batch_size: int, seq_length: int,
                   seed: int = 0) -> Tuple[List[str], Dict[str, np.ndarray]]:
  """`batch_size` texts of seq_length - 2 random whole-word vocab entries
  (lower-case ASCII letters: one piece each) and their featurization,
  int32 [batch_size, seq_length] input_ids ([CLS] words [SEP]), input_mask
  (ones), segment_ids (zeros)."""
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  vocab = tokenization.load_vocab(vocab_file)
  words = [token for token in vocab
           if token.isascii() and token.isalpha() and token.islower()]
  if not words:
    raise ValueError(f"{vocab_file}: no whole-word entry to build texts from")
  rows = np.random.default_rng(seed).integers(0, len(words),
                                              size=[batch_size, seq_length - 2])
  texts = [" ".join(words[i] for i in row) for row in rows]
  input_ids = np.array([[vocab["[CLS]"]] + [vocab[words[i]] for i in row] +
                        [vocab["[SEP]"]] for row in rows], np.int32)
  return texts, {"input_ids": input_ids, "input_mask": np.ones_like(input_ids),
                 "segment_ids": np.zeros_like(input_ids)}


def time_calls(functions: Dict[str, Callable[[], Any]], calls: int,
               warmup_calls: int) -> Dict[str, List[float]]:
  """Seconds of `calls` calls of each function (which must block until
  done), the functions alternating (in turn first), after `warmup_calls`
  untimed calls of each."""
  names = list(functions)
  for _ in range(warmup_calls):
    for name in names:
      functions[name]()
  seconds: Dict[str, List[float]] = {name: [] for name in names}
  for call in range(calls):
    for name in names[call % len(names):] + names[:call % len(names)]:
      start = time.perf_counter()
      functions[name]()
      seconds[name].append(time.perf_counter() - start)
  return seconds


def run_serving_benchmark(export_dir: str, batch_size: int, seq_length: int,
                          steps: int, latency_calls: int,
                          warmup_calls: int) -> Dict[str, object]:
  """The JSON figures of --export_dir (module docstring)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  from electra_tf import serving  # pylint: disable=g-import-not-at-top
  from electra_tf import serving_text  # pylint: disable=g-import-not-at-top
  loaded = tf.saved_model.load(export_dir)
  ids_signature = loaded.signatures["serving_default"]
  if serving_text.TEXT_SIGNATURE not in loaded.signatures:
    raise ValueError(f"--export_dir: {export_dir} has no `text` signature")
  text_signature = loaded.signatures[serving_text.TEXT_SIGNATURE]
  text_names = sorted(text_signature.structured_input_signature[1])
  ids_names = sorted(ids_signature.structured_input_signature[1])
  if ids_names != sorted(serving.INPUT_NAMES) or text_names not in (
      ["text"], ["text_a"], ["text_a", "text_b"]):
    raise ValueError(f"--export_dir: the benchmark times pre-training and "
                     f"classification exports; this text signature takes "
                     f"{', '.join(text_names)}")
  texts, ids = serving_inputs(
      os.path.join(export_dir, "assets", serving_text.VOCAB_ASSET), batch_size, seq_length)

  def runners(rows: int) -> Dict[str, Callable[[], Any]]:
    text_inputs = {text_names[0]: tf.constant(texts[:rows])}
    if "text_b" in text_names:  # "" packs [CLS] text_a [SEP], as the ids
      text_inputs["text_b"] = tf.constant([""] * rows)
    ids_inputs = {k: tf.constant(v[:rows]) for k, v in ids.items()}

    def call(signature, inputs):
      return lambda: [t.numpy() for t in signature(**inputs).values()]

    return {"text": call(text_signature, text_inputs),
            "ids": call(ids_signature, ids_inputs)}

  latency = time_calls(runners(1), latency_calls, warmup_calls)
  throughput = time_calls(runners(batch_size), steps, warmup_calls)
  result: Dict[str, object] = {}
  for name in ("text", "ids"):
    result[f"{name}_latency_ms_p50"] = 1000.0 * float(np.percentile(latency[name], 50))
    result[f"{name}_latency_ms_p99"] = 1000.0 * float(np.percentile(latency[name], 99))
    result[f"{name}_seq_per_sec"] = batch_size * steps / float(np.sum(throughput[name]))
  result["text_extra_cost"] = result["ids_seq_per_sec"] / result["text_seq_per_sec"] - 1.0
  result.update(device=device_and_peak_memory_mb()[0], batch_size=batch_size,
                seq_length=seq_length)
  return result


def run_input_benchmark(file_patterns: str, batch_size: int, seq_length: int,
                        max_predictions_per_seq: int, mask_prob: float,
                        special, batches: int, warmup_batches: int) -> Dict[str, Any]:
  """Masked training batches per second from TFRecords (pretrain/data.py:
  read, checksum, decode, mask, batch, prefetch), after `warmup_batches`."""
  from electra_tf.pretrain import data as pretrain_data  # pylint: disable=g-import-not-at-top
  dataset = pretrain_data.get_dataset(
      file_patterns, batch_size=batch_size, max_seq_length=seq_length,
      max_predictions_per_seq=max_predictions_per_seq, mask_prob=mask_prob,
      special=special, is_training=True, seed=0)
  iterator = iter(dataset)
  for _ in range(warmup_batches):
    next(iterator)
  start = time.perf_counter()
  for _ in range(batches):
    next(iterator)
  seconds = time.perf_counter() - start
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  seq_per_sec = batches * batch_size / seconds
  return {"mode": "input_only", "seq_per_sec": seq_per_sec,
          "seq_per_sec_per_core": seq_per_sec / cores, "cores": cores,
          "batch_size": batch_size, "seq_length": seq_length, "batches": batches,
          "seconds": seconds}


def _input_benchmark() -> Dict[str, Any]:
  """--input_only: the flags checked, the benchmark run."""
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  if not FLAGS.pretrain_tfrecords:
    raise ValueError("--input_only needs --pretrain_tfrecords")
  if FLAGS.baseline or FLAGS.export_dir:
    raise ValueError("--input_only times the input pipeline; drop --baseline / --export_dir")
  _check_counts("batch_size", "seq_length", "steps")
  config = PretrainingConfig.create(dict(config_lib.parse_hparams(FLAGS.hparams),
                                         max_seq_length=FLAGS.seq_length))
  if FLAGS.vocab_file:
    special = tokenization.special_ids(tokenization.load_vocab(FLAGS.vocab_file),
                                       FLAGS.vocab_file)
  else:
    special = tokenization.SpecialIds(pad_id=0, unk_id=100, cls_id=101, sep_id=102,
                                      mask_id=103)
  # --steps counts timed batches (200 unless given); --warmup_steps untimed ones.
  batches = FLAGS.steps if FLAGS["steps"].present else 200
  warmup = FLAGS.warmup_steps if FLAGS["warmup_steps"].present else 20
  return run_input_benchmark(FLAGS.pretrain_tfrecords, FLAGS.batch_size, FLAGS.seq_length,
                             config.max_predictions_per_seq, config.mask_prob, special,
                             batches, warmup)


def _check_counts(*positive: str) -> None:
  """The flags `positive` must be > 0, --warmup_steps >= 0."""
  for name in positive:
    if FLAGS[name].value <= 0:
      raise ValueError(f"--{name}: {FLAGS[name].value} must be > 0")
  if FLAGS.warmup_steps < 0:
    raise ValueError(f"--warmup_steps: {FLAGS.warmup_steps} must be >= 0")


def config_from_flags() -> PretrainingConfig:
  """Benchmark flags over --hparams (the flags win)."""
  _check_counts("batch_size", "seq_length", "steps")
  hparams = config_lib.parse_hparams(FLAGS.hparams)
  hparams.update(model_size=FLAGS.model_size, train_batch_size=FLAGS.batch_size,
                 max_seq_length=FLAGS.seq_length, jit_compile=FLAGS.jit_compile,
                 mixed_precision=FLAGS.mixed_precision)
  return PretrainingConfig.create(hparams)


def main() -> int:
  if FLAGS.profile_dir and (FLAGS.input_only or FLAGS.export_dir):
    raise ValueError("--profile_dir: profiles the training step; drop it with "
                     "--input_only / --export_dir")
  if FLAGS.input_only:
    result = _input_benchmark()
    if not FLAGS.json:
      print(f"input pipeline, batch {result['batch_size']}, seq {result['seq_length']}: "
            f"{result['seq_per_sec']:.0f} seq/s on {result['cores']} core(s), "
            f"{result['seq_per_sec_per_core']:.0f} per core", flush=True)
    print(json.dumps(result), flush=True)
    return 0
  if FLAGS.export_dir:
    if FLAGS.baseline:
      raise ValueError("--baseline: times training; drop it with --export_dir")
    _check_counts("batch_size", "seq_length", "steps", "latency_calls")
    if FLAGS.seq_length < 3:
      raise ValueError(f"--seq_length: {FLAGS.seq_length} must be >= 3 with --export_dir")
    result = run_serving_benchmark(FLAGS.export_dir, FLAGS.batch_size, FLAGS.seq_length,
                                   FLAGS.steps, FLAGS.latency_calls, FLAGS.warmup_steps)
    if not FLAGS.json:
      print(f"{FLAGS.export_dir}, batch {FLAGS.batch_size}, seq {FLAGS.seq_length}: text "
            f"{result['text_seq_per_sec']:.1f} seq/s, ids {result['ids_seq_per_sec']:.1f} "
            f"seq/s ({100 * result['text_extra_cost']:+.1f}%)", flush=True)
    print(json.dumps(result), flush=True)
    return 0
  config = config_from_flags()
  if FLAGS.baseline and (not config.electra_objective or config.two_tower_generator):
    raise ValueError("--baseline=model_garden compares the ELECTRA objective; "
                     "drop electra_objective=false / electric_objective / "
                     "two_tower_generator from --hparams")
  _check_counts("pairs")
  result = run_benchmark(config, FLAGS.steps, FLAGS.warmup_steps, FLAGS.baseline,
                         FLAGS.pairs, FLAGS.profile_dir, FLAGS.baseline_precision)
  if not FLAGS.json:
    print(f"{config.model_size}, batch {config.train_batch_size}, seq "
          f"{config.max_seq_length}, {config.mixed_precision or 'float32'}"
          f"{', XLA' if config.jit_compile else ''}: {result['seq_per_sec']:.1f} seq/s, "
          f"{result['step_ms']:.0f} ms/step", flush=True)
    if FLAGS.baseline:
      print(f"Model Garden ({result['baseline_precision']}): "
            f"{result['baseline_seq_per_sec']:.1f} seq/s; ours {result['speedup']:.2f}x "
            f"(median of {FLAGS.pairs} pairs)", flush=True)
  print(json.dumps(result), flush=True)
  return 0


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "electra_tf.benchmark")
