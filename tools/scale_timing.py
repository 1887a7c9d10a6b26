"""Time to the first training step and time to resume at a late step, on a
(large, synthetic) corpus: both should not grow with the corpus or the step.

    python -m tools.make_synthetic_corpus --output_dir=/tmp/synth_1e7 --num_records=10000000
    python -m tools.scale_timing --pretrain_tfrecords='/tmp/synth_1e7/*' \\
        --vocab_file=../shared/data/vocab/bert_uncased_vocab.txt --work_dir=/tmp/scale \\
        --consumed=1000000 --repeats=3 [--fallback] [--json_output=FILE]

Measures, as a user would see them, seconds from launching `run_pretraining.py`
to its log line of the first step it trains:

  first_step  a fresh model_dir;
  resume      a model_dir whose checkpoint is at the step after `--consumed`
              examples (global batch 128), holding the input position (made
              here once: the pipeline reads up to there and one batch, and
              the checkpoint is written with the step set accordingly);
  fallback    (--fallback) the same checkpoint without the input position,
              as an older version wrote: the run reads the consumed examples
              again (`get_dataset`'s skip_examples).

The model is a tiny ELECTRA (hidden 32, 1 layer; seq 128, batch 128) so that
the figures are the input's costs plus TensorFlow's fixed ones (import,
tracing) rather than a large model's tracing.  Prints one JSON line: the
median and every run of each.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

from absl import flags

from electra_tf import cli
from electra_tf.errors import ConfigError
from electra_tf.measure import record

REPO = pathlib.Path(__file__).resolve().parent.parent
FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module beside other tools)."""
  flags.DEFINE_string("pretrain_tfrecords", None, "TFRecords (glob) of the corpus.")
  flags.DEFINE_string("vocab_file", None, "WordPiece vocab.")
  flags.DEFINE_string("work_dir", None, "New folder for the runs (removed when done).")
  flags.DEFINE_integer("consumed", 1000000, "Examples read before the late checkpoint.")
  flags.DEFINE_integer("repeats", 3, "Runs of each measurement (the median is reported).")
  flags.DEFINE_boolean("fallback", False, "Also time a checkpoint without the input position.")
  flags.DEFINE_string("json_output", None,
                      "Also write the JSON object, with the command line, date, machine and "
                      "git commit (electra_tf/measure/record.py), to this file.")
  flags.mark_flags_as_required(["pretrain_tfrecords", "vocab_file", "work_dir"])


BATCH = 128
HPARAMS = {"model_size": "small", "vocab_size": 30522, "embedding_size": 16,
           "model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 1},
           "generator_hidden_size": 0.5, "max_seq_length": 128,
           "train_batch_size": BATCH, "log_every": 1, "save_checkpoints_steps": 1000000}


def _env():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
  env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
  return env


def time_to_step(args, model_dir: pathlib.Path, step: int) -> float:
  """Seconds from launch to the log line of `step` (the process is then stopped)."""
  hparams = dict(HPARAMS, num_train_steps=step, num_warmup_steps=0)
  command = [sys.executable, str(REPO / "run_pretraining.py"),
             f"--pretrain_tfrecords={args.pretrain_tfrecords}",
             f"--vocab_file={args.vocab_file}", f"--model_dir={model_dir}",
             "--strategy=one_device", "--hparams=" + json.dumps(hparams)]
  start = time.perf_counter()
  process = subprocess.Popen(command, cwd=REPO, env=_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
  lines = []
  try:
    for line in process.stdout:
      lines.append(line)
      if line.startswith(f"step {step}/"):
        return time.perf_counter() - start
    raise RuntimeError("run_pretraining.py ended before the step:\n" + "".join(lines[-20:]))
  finally:
    process.kill()
    process.wait()


def make_late_checkpoint(args, model_dir: pathlib.Path, with_position: bool) -> int:
  """A checkpoint after `--consumed` examples (+ one batch); returns its step."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from electra_tf import checkpoints, train_loop
  from electra_tf.pretrain import data as pretrain_data
  from electra_tf.pretrain import job as job_lib
  from electra_tf.pretrain.config import PretrainingConfig
  skip_steps = args.consumed // BATCH
  step = skip_steps + 1
  config = PretrainingConfig.create(dict(
      HPARAMS, num_train_steps=step + 1, num_warmup_steps=0, model_dir=str(model_dir),
      pretrain_tfrecords=args.pretrain_tfrecords, vocab_file=args.vocab_file))
  job = job_lib.PretrainingJob(config, tf.distribute.OneDeviceStrategy("/cpu:0"))
  tracked = {"model": job.model, "optimizer": job.optimizer}
  start = time.perf_counter()
  if with_position:
    iterator = iter(job._pipeline(True, BATCH, skip_steps * BATCH))  # pylint: disable=protected-access
    next(iterator)  # reads up to the position
    tracked[train_loop.INPUT_KEY] = pretrain_data.InputPosition(iterator)
  job.optimizer.iterations.assign(step)
  model_dir.mkdir(parents=True, exist_ok=True)
  checkpoints.save_checkpoint(checkpoints.training_checkpoint_manager(
      tf.train.Checkpoint(**tracked), str(model_dir), 1, job.optimizer.iterations), step)
  print(f"checkpoint at step {step} written in {time.perf_counter() - start:.1f}s",
        file=sys.stderr, flush=True)
  return step


def main() -> int:
  args = FLAGS
  started = record.utc_now()
  if FLAGS.consumed < BATCH or FLAGS.repeats <= 0:
    raise ConfigError(f"--consumed must be >= {BATCH} and --repeats > 0")
  work = pathlib.Path(args.work_dir)
  if work.exists():  # the command removes its work_dir when done
    raise ConfigError(f"--work_dir: {work} exists; name a new folder")
  runs = {"first_step": [], "resume": []}
  for i in range(args.repeats):
    runs["first_step"].append(time_to_step(args, work / f"fresh_{i}", 1))
  late = work / "late"
  step = make_late_checkpoint(args, late, with_position=True)
  for i in range(args.repeats):
    model_dir = work / f"resume_{i}"
    shutil.copytree(late, model_dir)
    runs["resume"].append(time_to_step(args, model_dir, step + 1))
  if args.fallback:
    runs["fallback"] = []
    old = work / "late_without_position"
    make_late_checkpoint(args, old, with_position=False)
    for i in range(args.repeats):
      model_dir = work / f"fallback_{i}"
      shutil.copytree(old, model_dir)
      runs["fallback"].append(time_to_step(args, model_dir, step + 1))
  result = {"pretrain_tfrecords": args.pretrain_tfrecords, "resume_step": step,
            "examples_consumed": step * BATCH}
  for name, seconds in runs.items():
    result[f"{name}_s"] = round(statistics.median(seconds), 2)
    result[f"{name}_runs_s"] = [round(s, 2) for s in seconds]
  print(json.dumps(result), flush=True)
  if args.json_output:
    record.write_record(args.json_output, result, started)
  shutil.rmtree(work, ignore_errors=True)
  return 0


if __name__ == "__main__":
  define_flags()
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  cli.run(main, "scale_timing.py")
