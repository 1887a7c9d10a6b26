r"""Speed of the pre-training step, of the input pipeline, or of an export's signatures.

    python -m electra_tf.benchmark --model_size=small --batch_size=32 \
        --seq_length=128 --steps=10 [--mixed_precision=bfloat16|float16] \
        [--jit_compile] [--hparams=JSON] [--baseline=model_garden] \
        [--baseline_precision=float32|bfloat16] [--pairs=3] [--profile_dir=D] --json
    python -m electra_tf.benchmark --input_only --pretrain_tfrecords=GLOB \
        [--seq_length=128] [--batch_size=32] [--steps=200] [--vocab_file=V] --json
    python -m electra_tf.benchmark --export_dir=DIR [--batch_size=32] \
        [--seq_length=128] [--steps=10] [--latency_calls=100] --json

The last line printed is one JSON object; what each mode times and its
fields: docs/performance.md.  The measurements: electra_tf/measure/.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict

from absl import flags

from electra_tf import cli
from electra_tf import config as config_lib
from electra_tf import fileio
from electra_tf.errors import ConfigError
from electra_tf.measure import input_pipeline
from electra_tf.measure import record
from electra_tf.measure import signature_speed
from electra_tf.measure import step as step_bench
from electra_tf.pretrain.config import PretrainingConfig

FLAGS = flags.FLAGS


def define_flags() -> None:
  cli.define_shared_flag("model_size", "small")
  flags.DEFINE_integer("batch_size", 32, "Sequences per step.")
  flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
  flags.DEFINE_integer("steps", 10, "Timed steps.")
  flags.DEFINE_integer("warmup_steps", 2, "Untimed steps before timing (tracing, caches).")
  flags.DEFINE_integer("pairs", 1, "Timings of --steps steps (alternating with the "
                       "--baseline's); the median is reported.")
  cli.define_shared_flag("mixed_precision")
  cli.define_shared_flag("jit_compile", False)
  flags.DEFINE_string("profile_dir", None,
                      "Also trace --steps of our step with tf.profiler into this "
                      "directory (TensorBoard's Profile tab) and report the op types "
                      "that took the most time.")
  cli.define_shared_flag("hparams")
  flags.DEFINE_enum("baseline_precision", "float32", ["float32", "bfloat16"],
                    "Model Garden's precision. bfloat16 builds its two encoders under the "
                    "mixed_bfloat16 policy and its ElectraPretrainer (heads, sampling) in "
                    "float32: Model Garden 2.20's ElectraPretrainer does not run under a "
                    "global mixed_bfloat16 policy (its sampling mixes float32 and bfloat16).")
  flags.DEFINE_enum("baseline", None, ["model_garden"],
                    "Also time Model Garden's ElectraPretrainer on the same batch.")
  flags.DEFINE_boolean("json", False, "Print only the JSON line (no human-readable lines).")
  flags.DEFINE_string("json_output", None,
                      "Also write the JSON object, with the command line, date, machine and "
                      "git commit (electra_tf/measure/record.py), to this file.")
  flags.DEFINE_string("export_dir", None,
                      "Time this SavedModel's text and ids signatures instead of training.")
  flags.DEFINE_integer("latency_calls", 100,
                       "--export_dir: timed batch-1 calls of each signature.")
  flags.DEFINE_boolean("input_only", False,
                       "Time the pre-training input pipeline alone on --pretrain_tfrecords.")
  cli.define_shared_flag("pretrain_tfrecords")
  cli.define_shared_flag("vocab_file", unset="--input_only's special ids are the BERT "
                         "uncased [CLS] 101, [SEP] 102, [MASK] 103")


def _input_benchmark() -> Dict[str, Any]:
  """--input_only: the flags checked, the benchmark run."""
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  if not FLAGS.pretrain_tfrecords:
    raise ConfigError("--input_only needs --pretrain_tfrecords")
  if FLAGS.baseline or FLAGS.export_dir:
    raise ConfigError("--input_only times the input pipeline; drop --baseline / --export_dir")
  _check_counts("batch_size", "seq_length", "steps")
  config = PretrainingConfig.create(dict(config_lib.parse_hparams(FLAGS.hparams),
                                         max_seq_length=FLAGS.seq_length))
  if FLAGS.vocab_file:
    special = tokenization.special_ids(tokenization.load_vocab(FLAGS.vocab_file),
                                       FLAGS.vocab_file)
  else:
    special = tokenization.SpecialIds(pad_id=0, unk_id=100, cls_id=101, sep_id=102,
                                      mask_id=config_lib.BERT_MASK_ID)
  # --steps counts timed batches (200 unless given); --warmup_steps untimed ones.
  batches = FLAGS.steps if FLAGS["steps"].present else 200
  warmup = FLAGS.warmup_steps if FLAGS["warmup_steps"].present else 20
  return input_pipeline.run_input_benchmark(FLAGS.pretrain_tfrecords, FLAGS.batch_size, FLAGS.seq_length,
                             config.max_predictions_per_seq, config.mask_prob, special,
                             batches, warmup)


def _check_counts(*positive: str) -> None:
  """The flags `positive` must be > 0, --warmup_steps >= 0."""
  for name in positive:
    if FLAGS[name].value <= 0:
      raise ConfigError(f"--{name}: {FLAGS[name].value} must be > 0")
  if FLAGS.warmup_steps < 0:
    raise ConfigError(f"--warmup_steps: {FLAGS.warmup_steps} must be >= 0")


def config_from_flags() -> PretrainingConfig:
  """Benchmark flags over --hparams (the flags win)."""
  _check_counts("batch_size", "seq_length", "steps")
  hparams = config_lib.parse_hparams(FLAGS.hparams)
  hparams.update(model_size=FLAGS.model_size, train_batch_size=FLAGS.batch_size,
                 max_seq_length=FLAGS.seq_length, jit_compile=FLAGS.jit_compile,
                 mixed_precision=FLAGS.mixed_precision)
  return PretrainingConfig.create(hparams)


def _report(result: Dict[str, Any], started: str) -> None:
  """The last line printed; with --json_output also the record file."""
  print(json.dumps(result), flush=True)
  if FLAGS.json_output:
    record.write_record(FLAGS.json_output, result, started)


def main() -> int:
  started = record.utc_now()
  if FLAGS.json_output:
    fileio.check_writable(os.path.dirname(os.path.abspath(FLAGS.json_output)), "--json_output")
  if FLAGS.profile_dir and (FLAGS.input_only or FLAGS.export_dir):
    raise ConfigError("--profile_dir: profiles the training step; drop it with "
                      "--input_only / --export_dir")
  if FLAGS.input_only:
    result = _input_benchmark()
    if not FLAGS.json:
      print(f"input pipeline, batch {result['batch_size']}, seq {result['seq_length']}: "
            f"{result['seq_per_sec']:.0f} seq/s on {result['cores']} core(s), "
            f"{result['seq_per_sec_per_core']:.0f} per core", flush=True)
    _report(result, started)
    return 0
  if FLAGS.export_dir:
    if FLAGS.baseline:
      raise ConfigError("--baseline: times training; drop it with --export_dir")
    _check_counts("batch_size", "seq_length", "steps", "latency_calls")
    if FLAGS.seq_length < 3:
      raise ConfigError(f"--seq_length: {FLAGS.seq_length} must be >= 3 with --export_dir")
    result = signature_speed.run_serving_benchmark(
        FLAGS.export_dir, FLAGS.batch_size, FLAGS.seq_length, FLAGS.steps,
        FLAGS.latency_calls, FLAGS.warmup_steps)
    if not FLAGS.json:
      print(f"{FLAGS.export_dir}, batch {FLAGS.batch_size}, seq {FLAGS.seq_length}: text "
            f"{result['text_seq_per_sec']:.1f} seq/s, ids {result['ids_seq_per_sec']:.1f} "
            f"seq/s ({100 * result['text_extra_cost']:+.1f}%)", flush=True)
    _report(result, started)
    return 0
  config = config_from_flags()
  if FLAGS.baseline:
    from electra_tf.modeling import objectives  # pylint: disable=g-import-not-at-top
    objective = objectives.objective_class(config)
    if objective is not objectives.Electra:
      raise ConfigError("--baseline=model_garden compares the ELECTRA objective; --hparams "
                        f"selects the {objective.name} objective")
  _check_counts("pairs")
  result = step_bench.run_benchmark(config, FLAGS.steps, FLAGS.warmup_steps, FLAGS.baseline,
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
  _report(result, started)
  return 0


def run() -> None:
  """The command (console script and python -m electra_tf.benchmark)."""
  define_flags()
  cli.run(main, "electra_tf.benchmark")


if __name__ == "__main__":
  run()
