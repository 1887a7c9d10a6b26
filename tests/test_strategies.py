"""The documented strategy x precision x XLA combinations, from the command line.

Both jobs (`run_pretraining.py`, `run_finetuning.py`), strategy one_device or
mirrored over two logical CPU devices (distribution.CPU_DEVICES_ENV), float32
or bfloat16, XLA (`--jit_compile`) off or on: 16 combinations, each training
a tiny model for 3 steps without dropout, each compared with the one-device
float32 run without XLA after step 2 (the last step of the schedule has a
learning rate of 0).

To keep the suite's time down, each job's eight combinations run in ONE
subprocess that imports TensorFlow once and runs the command's own `main()`
once per combination, with that combination's flags (`_RUNNER`); the first
combination is a mirrored one, so the process starts as the command does
(logical devices, then the strategy, before any other TensorFlow op).  Every
combination writes its own log, exit status and checkpoints, and has its own
test, so a failure names the combination.

What "equal" means here.  All runs start from the same weights (the same
seed) and read the same examples, masks and sampling noise.  The difference
of a run's weights after step 2 from the reference's, as a fraction of the
size of one reference update (the norm of ckpt-2 minus ckpt-1 over all
model weights), must stay under
  * FLOAT32_TOLERANCE for float32 runs: two replicas sum the batch's
    gradient in two halves, and XLA fuses and reorders the float32 sums, so
    the runs differ by rounding alone (measured below 1e-5);
  * BFLOAT16_TOLERANCE for bfloat16 runs: activations and matmuls carry 8
    significant bits (relative rounding 2^-9), which shifts the gradients by
    about a percent, and Adam's update divides each gradient element by its
    own size, so elements whose gradient is mostly cancellation move by up
    to a whole update (measured 0.06-0.07 in pre-training on an AVX2 CPU
    that emulates bfloat16; 0.2 leaves room for other CPUs' kernels); the
    first step's losses must agree to 2% (measured 7e-5).  A step that
    normalised by the wrong denominators would change the losses by a
    factor of the replica count, far outside both.
"""

import itertools
import json
import os
import pathlib
import subprocess
import textwrap

import numpy as np
import pytest

from tests.conftest import command_python, make_pretraining_data_dir

REPO = pathlib.Path(__file__).resolve().parent.parent

# Only stops a hung child: eight combinations took 30 minutes at a load
# average of 20 on 2 cores (about 2.5 minutes of CPU time).
HANG_GUARD_S = 4 * 3600
FLOAT32_TOLERANCE = 1e-4
BFLOAT16_TOLERANCE = 0.2
BFLOAT16_LOSS_TOLERANCE = 0.02

STRATEGIES = ("mirrored", "one_device")  # mirrored first: see the module docstring
PRECISIONS = ("float32", "bfloat16")
XLA = (False, True)
COMBINATIONS = list(itertools.product(STRATEGIES, PRECISIONS, XLA))
REFERENCE = ("one_device", "float32", False)

NO_DROPOUT = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
              "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
PRETRAINING_HPARAMS = {
    "model_size": "small", "vocab_size": 30522, "embedding_size": 16,
    "model_hparam_overrides": NO_DROPOUT, "generator_hidden_size": 0.5,
    "max_seq_length": 32, "train_batch_size": 8, "num_train_steps": 3,
    "num_warmup_steps": 0, "learning_rate": 1e-3, "save_checkpoints_steps": 1,
    "log_every": 1}
# chunk: a tagging head without dropout of its own; 40 sentences in batches
# of 20 are 2 steps an epoch, 1.5 epochs 3 steps; no warm-up (its first step
# would have a learning rate of 0).
FINETUNING_HPARAMS = {
    "model_hparam_overrides": NO_DROPOUT, "embedding_size": 16, "max_seq_length": 64,
    "train_batch_size": 20, "num_train_epochs": 1.5, "warmup_proportion": 0.0,
    "learning_rate": 1e-3,
    "save_checkpoints_steps": 1, "log_every": 1, "do_eval": False,
    "use_tfrecords_if_existing": False}

_RUNNER = textwrap.dedent("""
    import contextlib, json, os, sys, traceback
    from absl import flags
    from electra_tf import cli
    program, module_name, runs, out_dir = sys.argv[1:5]
    command = __import__("electra_tf.commands." + module_name, fromlist=["main"])
    command.define_flags()
    for name, argv in json.loads(runs):
      directory = os.path.join(out_dir, name)
      os.makedirs(directory)
      with open(os.path.join(directory, "log.txt"), "w") as log, \\
          contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        try:
          flags.FLAGS.unparse_flags()
          flags.FLAGS([program] + argv)
          with cli.one_line_errors(program):
            status = command.main() or 0
        except SystemExit as e:
          status = e.code
        except BaseException:  # reported in the combination's own test
          traceback.print_exc()
          status = "traceback"
      with open(os.path.join(directory, "status.json"), "w") as f:
        json.dump(status, f)
      # Free the combination's models and traced functions before the next.
      import gc, tf_keras
      tf_keras.backend.clear_session()
      gc.collect()
""")


def combination_name(strategy: str, precision: str, xla: bool) -> str:
  return f"{strategy}-{precision}-{'xla' if xla else 'no_xla'}"


def combination_flags(strategy: str, precision: str, xla: bool):
  flags = [f"--strategy={strategy}", "--jit_compile" if xla else "--nojit_compile"]
  if precision != "float32":
    flags.append(f"--mixed_precision={precision}")
  return flags


def run_combinations(program: str, module_name: str, out_dir: pathlib.Path,
                     job_flags) -> pathlib.Path:
  """Runs every combination (its model_dir: out_dir/<name>/model) in one
  process; returns out_dir."""
  runs = [(combination_name(*c),
           job_flags(out_dir / combination_name(*c) / "model") + combination_flags(*c))
          for c in COMBINATIONS]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1",
             ELECTRA_TF_CPU_DEVICES="2")
  env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
  result = subprocess.run(
      [command_python(), "-c", _RUNNER, program, module_name, json.dumps(runs), str(out_dir)],
      cwd=REPO, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
  assert result.returncode == 0, result.stderr[-3000:]
  return out_dir


@pytest.fixture(scope="module")
def pretraining_runs(tmp_path_factory, corpus_dir, bert_vocab):
  root = tmp_path_factory.mktemp("pretraining")
  data_dir = make_pretraining_data_dir(root / "data", corpus_dir, bert_vocab,
                                       num_lines=200, num_out_files=1)
  return run_combinations(
      "run_pretraining.py", "pretrain", root / "runs",
      lambda model_dir: [f"--data_dir={data_dir}", f"--model_dir={model_dir}",
                         "--hparams=" + json.dumps(PRETRAINING_HPARAMS)])


@pytest.fixture(scope="module")
def finetuning_runs(tmp_path_factory, shared_dir):
  from tests.test_finetune_run import make_data_dir  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("finetuning")
  data_dir = make_data_dir(root / "data", shared_dir)
  return run_combinations(
      "run_finetuning.py", "finetune", root / "runs",
      lambda model_dir: [f"--data_dir={data_dir}", f"--model_dir={model_dir}",
                         "--task_names=chunk", "--init_checkpoint=none",
                         "--hparams=" + json.dumps(FINETUNING_HPARAMS)])


def _checkpoint_dir(runs: pathlib.Path, name: str) -> pathlib.Path:
  model_dir = runs / name / "model"
  return model_dir / "trial_1" if (model_dir / "trial_1").is_dir() else model_dir


def model_weights(runs: pathlib.Path, name: str, step: int):
  """The model's variables in the step's checkpoint (name -> array)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(str(_checkpoint_dir(runs, name) / f"ckpt-{step}"))
  return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
          if key.startswith("model/") and key.endswith("/.ATTRIBUTES/VARIABLE_VALUE")}


def logged_losses(runs: pathlib.Path, name: str, step: int):
  """The losses the run wrote to TensorBoard for `step` (name -> float)."""
  from electra_tf import curves  # pylint: disable=g-import-not-at-top
  scalars = curves.read_scalars(str(_checkpoint_dir(runs, name) / "train"))
  return {key: values[step] for key, values in scalars.items() if "loss" in key}


def check_against_reference(runs: pathlib.Path, combination) -> float:
  """Asserts the combination's weights after step 2 are the reference's
  within its precision's tolerance; returns the relative difference."""
  name = combination_name(*combination)
  log = (runs / name / "log.txt").read_text()
  status = json.loads((runs / name / "status.json").read_text())
  assert status == 0, f"{name} exited with {status}:\n{log[-3000:]}"
  strategy, precision, xla = combination
  replicas = 2 if strategy == "mirrored" else 1
  assert f"{replicas} replica(s)" in log, log[-2000:]
  reference = combination_name(*REFERENCE)
  before, after = model_weights(runs, reference, 1), model_weights(runs, reference, 2)
  weights = model_weights(runs, name, 2)
  assert (_checkpoint_dir(runs, name) / "ckpt-3.index").is_file()
  assert sorted(weights) == sorted(after) and len(weights) > 10
  update = np.sqrt(sum(np.sum((after[k] - before[k]) ** 2) for k in after))
  assert update > 0
  difference = np.sqrt(sum(np.sum((weights[k] - after[k]) ** 2) for k in after))
  relative = difference / update
  tolerance = FLOAT32_TOLERANCE if precision == "float32" else BFLOAT16_TOLERANCE
  print(f"{name}: |w - w_reference| / |one update| = {relative:.3g}")
  assert relative < tolerance, (name, relative)
  losses, reference_losses = logged_losses(runs, name, 1), logged_losses(runs, reference, 1)
  assert sorted(losses) == sorted(reference_losses) and "loss" in losses
  for key, value in reference_losses.items():
    if precision == "float32":
      assert losses[key] == pytest.approx(value, rel=1e-5), key
    else:
      assert losses[key] == pytest.approx(value, rel=BFLOAT16_LOSS_TOLERANCE), key
  return relative


@pytest.mark.slow
@pytest.mark.parametrize("combination", COMBINATIONS,
                         ids=[combination_name(*c) for c in COMBINATIONS])
def test_pretraining_combination(pretraining_runs, combination):
  check_against_reference(pretraining_runs, combination)


@pytest.mark.slow
@pytest.mark.parametrize("combination", COMBINATIONS,
                         ids=[combination_name(*c) for c in COMBINATIONS])
def test_finetuning_combination(finetuning_runs, combination):
  check_against_reference(finetuning_runs, combination)
