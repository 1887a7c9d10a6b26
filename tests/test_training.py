"""The pre-training job: strategies, resume after kill -9, eval results, demo.

The command's train, eval and resume runs happen in this process, through
its entry point (tests/conftest.run_script); the strategies' runs in
subprocesses (logical CPU devices must be configured before TensorFlow
starts, and several workers need several processes).  Everything uses a
tiny ELECTRA on TFRecords built once from real text with the BERT vocab.
"""

import json
import os
import pathlib
import subprocess
import textwrap

import numpy as np
import pytest
from tensorflow.python.autograph.impl import api as autograph_api

from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.job import eval_first_counter, start_warnings
from tests.conftest import command_python, make_pretraining_data_dir, run_script

REPO = pathlib.Path(__file__).resolve().parent.parent

TINY_HPARAMS = {
    "model_size": "small", "vocab_size": 30522, "embedding_size": 16,
    "model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 1},
    "generator_hidden_size": 0.5, "max_seq_length": 32, "train_batch_size": 8,
    "eval_batch_size": 8, "num_train_steps": 6, "num_warmup_steps": 2,
    "save_checkpoints_steps": 3, "num_eval_steps": 3, "log_every": 1,
}


def _env():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
  env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
  return env


def _run(args, timeout=300, python=None, **kwargs):
  """`python ARGS` in the checkout; python: the zygote's shim unless given."""
  return subprocess.run([python or command_python(), *args], cwd=REPO, env=_env(), text=True,
                        capture_output=True, timeout=timeout, **kwargs)


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory, corpus_dir, bert_vocab):
  """TFRecords (max_seq_length 32) from the first part of WikiText-2 valid."""
  return make_pretraining_data_dir(tmp_path_factory.mktemp("tiny_data"), corpus_dir,
                                   bert_vocab, num_lines=400, num_out_files=2)


def _pretrain_args(data_dir, model_dir, hparams=None, extra=()):
  return ["run_pretraining.py", f"--data_dir={data_dir}", f"--model_dir={model_dir}",
          "--hparams=" + json.dumps({**TINY_HPARAMS, **(hparams or {})}), *extra]


def _autograph_conversions(monkeypatch):
  """The electra_tf functions autograph converts from now on (names)."""
  converted = []
  convert = autograph_api._convert_actual  # pylint: disable=protected-access

  def spy(entity, program_ctx):
    if (getattr(entity, "__module__", None) or "").startswith("electra_tf"):
      converted.append(entity.__qualname__)
    return convert(entity, program_ctx)

  monkeypatch.setattr(autograph_api, "_convert_actual", spy)
  return converted


@pytest.mark.slow
def test_train_eval_resume_and_results(tiny_data, tmp_path, monkeypatch):
  model_dir = tmp_path / "model"
  converted = _autograph_conversions(monkeypatch)
  run = run_script(_pretrain_args(tiny_data, model_dir, extra=["--do_train", "--do_eval"]))
  assert run.returncode == 0, run.stderr[-3000:]
  # The input pipeline, the step loop and the eval step are plain graph code:
  # autograph converts none of the library's functions (it cost 3 of a tiny
  # run's 11 CPU-s).
  assert converted == []
  log = run.stdout
  assert "step 6/6 = 100.0%" in log and "steps/s" in log and "seq/s" in log and "ETA" in log
  assert "lr" in log and "mlm_loss" in log and "disc_loss" in log
  results = json.loads((model_dir / "results" / "unsup_results.json").read_text())
  assert results["global_step"] == 6
  for key in ("masked_lm_accuracy", "masked_lm_loss", "sampled_masked_lm_accuracy",
              "disc_loss", "disc_auc", "disc_accuracy", "disc_precision", "disc_recall"):
    assert np.isfinite(results[key]), key
  assert 0.0 <= results["disc_auc"] <= 1.0
  # The official eval `loss`: the batches' mean total loss, mlm + 50 x disc
  # (the metrics' own means weight batches a little differently).
  assert results["loss"] == pytest.approx(
      results["masked_lm_loss"] + 50 * results["disc_loss"], rel=0.05)
  # An untrained MLM over 30522 words: loss near log(30522) = 10.3.
  assert 8.0 < results["masked_lm_loss"] < 12.0
  txt = (model_dir / "results" / "unsup_results.txt").read_text()
  assert "global_step = 6" in txt
  assert sorted(p.name for p in model_dir.glob("ckpt-*.index")) == ["ckpt-3.index", "ckpt-6.index"]
  assert list((model_dir / "train").glob("events.out.tfevents.*"))
  # The same command again resumes at the final step and trains nothing more.
  rerun = run_script(_pretrain_args(tiny_data, model_dir, extra=["--do_train"]))
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert "Resumed from" in rerun.stdout and "ckpt-6" in rerun.stdout
  # Resuming from step 3 (weights, slots, data stream, sampling seeds and
  # dropout masks, all functions of the step) ends with exactly the weights
  # of the uninterrupted run, dropout included.
  import shutil
  import tensorflow as tf
  resumed_dir = tmp_path / "resumed"
  shutil.copytree(model_dir, resumed_dir)
  for path in resumed_dir.glob("ckpt-6.*"):
    path.unlink()
  (resumed_dir / "checkpoint").write_text(
      'model_checkpoint_path: "ckpt-3"\nall_model_checkpoint_paths: "ckpt-3"\n')
  resumed = run_script(_pretrain_args(tiny_data, resumed_dir))
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "Resumed from" in resumed.stdout and "at step 3" in resumed.stdout
  full = tf.train.load_checkpoint(str(model_dir / "ckpt-6"))
  again = tf.train.load_checkpoint(str(resumed_dir / "ckpt-6"))
  # (The saved input position holds tf.data's read-ahead buffers, which
  # differ with timing; the batches they lead to are compared in
  # tests/test_resume_input.py.)
  assert "Restored the input position of step 3" in resumed.stdout
  keys = [k for k in full.get_variable_to_shape_map()
          if "/.ATTRIBUTES/" in k and not k.startswith("train_input/")]
  assert len(keys) > 40
  for key in keys:
    np.testing.assert_array_equal(full.get_tensor(key), again.get_tensor(key), err_msg=key)


_EQUIVALENCE_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from electra_tf.pretrain import job as job_lib
    from electra_tf.pretrain.config import PretrainingConfig
    hparams = json.loads(sys.argv[1])
    results, initial = {}, None
    for name, strategy in [
        ("one_device", tf.distribute.OneDeviceStrategy("/cpu:0")),
        ("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))]:
      config = PretrainingConfig.create(
          dict(hparams, model_dir=sys.argv[2] + "/" + name), data_dir=sys.argv[3])
      job = job_lib.PretrainingJob(config, strategy)
      # Both runs start from the same weights.
      if initial is None:
        initial = [v.numpy() for v in job.model.variables]
      else:
        for variable, value in zip(job.model.variables, initial):
          variable.assign(value)
      job.train()
      results[name] = {v.name: v.numpy() for v in job.model.trainable_variables}
    diffs = [float(np.max(np.abs(results["one_device"][k] - results["mirrored"][k])))
             for k in results["one_device"]]
    print("MAXDIFF", max(diffs), len(diffs))
""")


@pytest.mark.slow
def test_mirrored_equals_one_device(tiny_data, tmp_path):
  hparams = dict(TINY_HPARAMS, num_train_steps=5, save_checkpoints_steps=5,
                 model_hparam_overrides={"hidden_size": 32, "num_hidden_layers": 1,
                                         "hidden_dropout_prob": 0.0,
                                         "attention_probs_dropout_prob": 0.0})
  run = _run(["-c", _EQUIVALENCE_SCRIPT, json.dumps(hparams), str(tmp_path), str(tiny_data)])
  assert run.returncode == 0, run.stderr[-3000:]
  line = [l for l in run.stdout.splitlines() if l.startswith("MAXDIFF")][0]
  max_diff, count = float(line.split()[1]), int(line.split()[2])
  assert count > 20
  assert max_diff < 1e-5, line


@pytest.mark.slow
def test_multi_worker_mirrored_two_processes(tiny_data, tmp_path):
  import socket
  ports = []
  for _ in range(2):
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      ports.append(s.getsockname()[1])
  cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
  model_dir = tmp_path / "model"
  procs = []
  for index in range(2):
    env = _env()
    env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
    procs.append(subprocess.Popen(
        [command_python(), "-c", _MWMS_SCRIPT, json.dumps(dict(TINY_HPARAMS, num_train_steps=4)),
         str(model_dir), str(tiny_data), str(tmp_path / f"weights_{index}.npz")],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  outputs = [p.communicate(timeout=300)[0] for p in procs]
  for p, out in zip(procs, outputs):
    assert p.returncode == 0, out[-3000:]
  w0, w1 = np.load(tmp_path / "weights_0.npz"), np.load(tmp_path / "weights_1.npz")
  assert sorted(w0.files) == sorted(w1.files) and len(w0.files) > 20
  for key in w0.files:
    np.testing.assert_array_equal(w0[key], w1[key])
  import tensorflow as tf
  assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-4")
  assert not (model_dir / ".workers").exists()


_MWMS_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    from electra_tf import distribution
    from electra_tf.pretrain import job as job_lib
    from electra_tf.pretrain.config import PretrainingConfig
    strategy = distribution.create_strategy("multi_worker_mirrored")
    config = PretrainingConfig.create(
        dict(json.loads(sys.argv[1]), model_dir=sys.argv[2]), data_dir=sys.argv[3])
    job = job_lib.PretrainingJob(config, strategy)
    job.train()
    np.savez(sys.argv[4], **{v.name: v.numpy() for v in job.model.trainable_variables})
""")


def test_eval_batches_draw_their_own_sampling_noise():
  """Rows of different eval batches, and training rows, never share a counter."""
  batch = 4
  rows = [eval_first_counter(index, batch) + r for index in range(50) for r in range(batch)]
  assert len(set(rows)) == len(rows)
  assert max(rows) == -1  # training's counters are >= 0



def test_start_warnings_explain_the_loss_and_catch_a_warm_up_longer_than_the_run():
  short = PretrainingConfig.create({"num_train_steps": 200})  # the official 10,000 warm-up
  assert start_warnings(short) == [
      "loss = 1 x mlm_loss + 50 x disc_loss (hparams gen_weight, disc_weight): it can "
      "rise while the generator improves, as its samples get harder to tell apart",
      "WARNING: hparam num_warmup_steps 10000 covers most of the 200-step run: the "
      "learning rate peaks at 2.5e-06, not 0.0005; a warm-up of about 10% of "
      "num_train_steps (20) fits it"]
  # lr(t) = 5e-4 (1 - t/200) t/10000 peaks at t = 100 (the run's middle): 2.5e-6.
  fitting = PretrainingConfig.create({"num_train_steps": 200, "num_warmup_steps": 20})
  assert len(start_warnings(fitting)) == 1
  masked_lm = PretrainingConfig.create({"electra_objective": False, "num_warmup_steps": 0})
  assert start_warnings(masked_lm) == []
