"""Reliability: numerical faults, failed saves, debris of killed jobs,
determinism, and the kill -9 soak (short form).

The CLI runs use a tiny ELECTRA on TFRecords built from the first lines of
WikiText-2 with the BERT vocab.
"""

import json
import os
import pathlib
import resource
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import checkpoints, errors, fileio, optimization, train_loop
from tests import test_training
from tests.conftest import command_python, make_pretraining_data_dir, sigterm_stop

REPO = pathlib.Path(__file__).resolve().parent.parent
# The tiny model of the training tests, checkpointing every 2 of 4 steps.
TINY_HPARAMS = {**test_training.TINY_HPARAMS, "num_train_steps": 4,
                "save_checkpoints_steps": 2}


def _env():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1",
             PYTHONDONTWRITEBYTECODE="1")
  env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
  return env


def _pretrain(data_dir, model_dir, preexec_fn=None, **hparams):
  # preexec_fn acts on the process it starts: the interpreter's own.
  python = sys.executable if preexec_fn else command_python()
  args = [python, "run_pretraining.py", f"--data_dir={data_dir}",
          f"--model_dir={model_dir}", "--strategy=one_device",
          "--hparams=" + json.dumps({**TINY_HPARAMS, **hparams})]
  return subprocess.run(args, cwd=REPO, env=_env(), text=True, capture_output=True,
                        timeout=300, preexec_fn=preexec_fn)


def _last_line(text):
  return [line for line in text.splitlines() if line.strip()][-1]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, corpus_dir, bert_vocab):
  return make_pretraining_data_dir(tmp_path_factory.mktemp("reliability_data"), corpus_dir,
                                   bert_vocab, num_lines=300, num_out_files=2)


def _state(model_dir):
  return tf.train.latest_checkpoint(str(model_dir))


def _exporting_run_args(data_dir, model_dir):
  """The command of a run of TINY_HPARAMS that exports to model_dir/export."""
  return [command_python(), "run_pretraining.py", f"--data_dir={data_dir}",
          f"--model_dir={model_dir}", f"--export_dir={model_dir / 'export'}",
          "--hparams=" + json.dumps(TINY_HPARAMS)]


@pytest.fixture(scope="module")
def finished_run(data_dir, tmp_path_factory):
  """The model_dir of a finished run of TINY_HPARAMS (ckpt-2, ckpt-4, an
  export in model_dir/export).  The tests that go on from a finished run
  copy it (`_copy_of`): one process for them all instead of one each."""
  model_dir = tmp_path_factory.mktemp("finished_run") / "model"
  run = subprocess.run(_exporting_run_args(data_dir, model_dir), cwd=REPO, env=_env(),
                       text=True, capture_output=True, timeout=300)
  assert run.returncode == 0, run.stderr[-2000:]
  assert _state(model_dir).endswith("ckpt-4")
  assert (model_dir / "export" / "saved_model.pb").is_file()
  return model_dir


def _copy_of(finished_run, model_dir):
  """A copy of the finished run at `model_dir` (its checkpoint state file
  names the checkpoints relative to its folder)."""
  shutil.copytree(finished_run, model_dir)
  assert _state(model_dir) == str(model_dir / "ckpt-4")
  return model_dir


# ------------------------------------------------------------ numerical faults
def _toy_job(tmp_path, fault_step, fault):
  """A one-variable model whose step `fault_step` has a NaN loss or Inf grads."""
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  with strategy.scope():
    weight = tf.Variable([1.0, -2.0])
    optimizer = optimization.create_optimizer(1e-2, 10, 0, weight_decay_rate=0.0)
    optimizer.build([weight])

  def step_fn(batch):
    faulty = tf.equal(optimizer.iterations + 1, fault_step)
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(tf.square(weight * batch))
      if fault == "loss":
        loss = tf.where(faulty, tf.constant(np.nan), loss)
    grads = tape.gradient(loss, [weight])
    if fault == "gradients":  # finite loss, overflowing gradients
      grads = [tf.where(faulty, tf.constant([np.inf, 0.0]), grads[0])]
    finite = train_loop.all_finite(loss, grads, loss_scaling=False)
    optimizer.apply_gradients(zip(grads, [weight]))
    return {"loss": loss}, finite

  dataset = tf.data.Dataset.from_tensors(tf.constant([1.0, 1.0])).repeat()
  manager = checkpoints.training_checkpoint_manager(
      tf.train.Checkpoint(weight=weight, optimizer=optimizer), str(tmp_path), 5,
      optimizer.iterations)
  loop = train_loop.make_step_loop(strategy, step_fn, ["loss"], optimizer.iterations)
  schedule = train_loop.Schedule(total_steps=10, log_every=5, save_every=2,
                                 steps_per_loop=100, batch_size=1)
  return loop, iter(dataset), optimizer, manager, schedule


@pytest.mark.parametrize("fault", ["loss", "gradients"])
def test_nan_or_inf_stops_at_its_step_and_keeps_the_last_good_checkpoint(tmp_path, fault):
  loop, iterator, optimizer, manager, schedule = _toy_job(tmp_path, 5, fault)
  with pytest.raises(errors.TrainingError) as error:
    train_loop.train_to_end(loop, iterator, optimizer, manager, schedule,
                            tf.summary.create_noop_writer())
  message = str(error.value)
  assert "NaN or Inf in the loss or gradients at step 5" in message
  assert "ckpt-4 stays the latest" in message and "\n" not in message
  # The loop stopped at the faulty step; nothing newer than ckpt-4 exists.
  assert int(optimizer.iterations.numpy()) == 5
  assert _state(tmp_path).endswith("ckpt-4")
  assert sorted(p.name for p in tmp_path.glob("ckpt-*.index")) == [
      "ckpt-2.index", "ckpt-4.index"]


def test_overflowing_float16_gradients_are_not_a_fault():
  inf_grads = [tf.constant([np.inf, 1.0])]
  assert not bool(train_loop.all_finite(tf.constant(1.0), inf_grads, loss_scaling=False))
  # With dynamic loss scaling the optimizer skips such a step and halves the scale.
  assert bool(train_loop.all_finite(tf.constant(1.0), inf_grads, loss_scaling=True))
  assert not bool(train_loop.all_finite(tf.constant(np.nan), inf_grads, loss_scaling=True))


@pytest.mark.slow
def test_pretraining_divergence_names_the_step(data_dir, tmp_path):
  # A learning rate of 1e30 sends the weights to Inf after the first update.
  run = _pretrain(data_dir, tmp_path / "model", learning_rate=1e30,
                  num_warmup_steps=0, save_checkpoints_steps=1)
  assert run.returncode == 2
  line = _last_line(run.stderr)
  assert line.startswith("run_pretraining.py: error: NaN or Inf in the loss or gradients at step 2")
  assert line.endswith("ckpt-1 stays the latest") and "Traceback" not in run.stderr
  assert _state(tmp_path / "model").endswith("ckpt-1")
  assert [p.name for p in (tmp_path / "model").glob("ckpt-*.index")] == ["ckpt-1.index"]


# ------------------------------------------------------------ failed saves
def _file_size_limit(limit_bytes):
  def apply():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
  return apply


def _assert_save_failure_keeps(run, model_dir, kept_step):
  assert run.returncode == 2, run.stderr[-2000:]
  line = _last_line(run.stderr)
  assert line.startswith("run_pretraining.py: error: could not save the step "), line
  assert str(model_dir) in line and f"ckpt-{kept_step} is intact and stays the latest" in line
  assert "Traceback" not in run.stderr
  assert _state(model_dir).endswith(f"ckpt-{kept_step}")
  reader = tf.train.load_checkpoint(_state(model_dir))  # restores completely
  for key in reader.get_variable_to_shape_map():
    reader.get_tensor(key)
  leftovers = [p.name for p in model_dir.iterdir()
               if p.name.endswith("_temp") or ".tmp" in p.name]
  assert not leftovers
  newer = [p.name for p in model_dir.glob("ckpt-*.index")
           if int(p.name[5:-6]) > kept_step]
  assert not newer


@pytest.mark.slow
def test_failed_save_is_one_line_and_keeps_the_previous_checkpoint(
    data_dir, finished_run, tmp_path):
  model_dir = _copy_of(finished_run, tmp_path / "model")  # 4 steps done
  # Continue to step 8 with files capped at 256 KiB (a checkpoint is ~6 MB):
  # the write of ckpt-6 fails with EFBIG, as on a full disk.
  run = _pretrain(data_dir, model_dir, preexec_fn=_file_size_limit(256 * 1024),
                  num_train_steps=8)
  assert "could not save the step 6 checkpoint" in run.stderr
  _assert_save_failure_keeps(run, model_dir, kept_step=4)


def _mount_tmpfs(path, size):
  path.mkdir()
  result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
  if result.returncode != 0:
    pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip() or 'not root'}); "
                "the RLIMIT_FSIZE test covers the failed save")


@pytest.mark.slow
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root; the "
                    "RLIMIT_FSIZE test covers the failed save")
def test_full_disk_and_read_only_model_dir_on_a_real_tmpfs(data_dir, tmp_path):
  mount_point = tmp_path / "small_disk"
  _mount_tmpfs(mount_point, "9m")  # room for one ~6 MB checkpoint, not two
  try:
    model_dir = mount_point / "model"
    run = _pretrain(data_dir, model_dir)
    assert "No space left on device" in _last_line(run.stderr)
    _assert_save_failure_keeps(run, model_dir, kept_step=2)
    subprocess.run(["mount", "-o", "remount,ro", str(mount_point)], check=True)
    before = sorted(p.name for p in model_dir.iterdir())
    run = _pretrain(data_dir, model_dir)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    line = _last_line(run.stderr)
    assert line == (f"run_pretraining.py: error: model_dir {model_dir}: not writable "
                    "(Read-only file system)")
    assert sorted(p.name for p in model_dir.iterdir()) == before
    assert _state(model_dir).endswith("ckpt-2")
  finally:
    subprocess.run(["umount", str(mount_point)], check=False)


# ------------------------------------------------------------ debris of kills
def test_debris_of_killed_writes_is_removed_and_checkpoints_are_kept(tmp_path):
  weight = tf.Variable([1.0, 2.0])
  step = tf.Variable(0, dtype=tf.int64)
  manager = checkpoints.training_checkpoint_manager(
      tf.train.Checkpoint(weight=weight), str(tmp_path), 5, step)
  for n in (2, 4):
    step.assign(n)
    checkpoints.save_checkpoint(manager, n)
  dead_pid = 2 ** 22 + 1  # above the default pid_max: no such process
  (tmp_path / "ckpt-6_temp").mkdir()  # killed during SaveV2
  (tmp_path / "ckpt-6_temp" / "part-00000-of-00001.index").write_bytes(b"x")
  (tmp_path / "ckpt-6.index").write_bytes(b"half")  # killed during the merge
  (tmp_path / "ckpt-6.data-00000-of-00001").write_bytes(b"half")
  (tmp_path / "checkpoint.tmp0123456789abcdef0123456789abcdef").write_text("x")
  (tmp_path / "results").mkdir()
  (tmp_path / "results" / f"unsup_results.json.tmp-{dead_pid}").write_text("{")
  (tmp_path / f"export.tmp-{dead_pid}").mkdir()
  (tmp_path / f"mine.tmp-{os.getpid()}").write_text("in progress")  # alive: kept
  (tmp_path / "notes.txt").write_text("kept")
  removed = checkpoints.remove_interrupted_writes(str(tmp_path))
  assert sorted(os.path.relpath(p, tmp_path) for p in removed) == sorted([
      "ckpt-6_temp", "ckpt-6.index", "ckpt-6.data-00000-of-00001",
      "checkpoint.tmp0123456789abcdef0123456789abcdef",
      f"results/unsup_results.json.tmp-{dead_pid}", f"export.tmp-{dead_pid}"])
  assert sorted(p.name for p in tmp_path.iterdir()) == sorted([
      "checkpoint", "ckpt-2.index", "ckpt-2.data-00000-of-00001", "ckpt-4.index",
      "ckpt-4.data-00000-of-00001", "results", f"mine.tmp-{os.getpid()}", "notes.txt"])
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-4")
  assert fileio.is_stale_temporary(f"x.old-{dead_pid}")
  assert not fileio.is_stale_temporary("x.tmp-abc")


@pytest.mark.slow
def test_rerun_after_completion_replaces_its_own_export(data_dir, finished_run, tmp_path):
  # A finished run of this command (exported to model_dir/export), at this model_dir.
  model_dir = _copy_of(finished_run, tmp_path / "model")
  export_dir = model_dir / "export"
  exported_first = (export_dir / "saved_model.pb").stat().st_mtime_ns
  again = subprocess.run(_exporting_run_args(data_dir, model_dir), cwd=REPO, env=_env(),
                         text=True, capture_output=True, timeout=300)
  assert again.returncode == 0, again.stderr[-2000:]
  assert "Resumed from" in again.stdout and "Exported the SavedModel" in again.stdout
  assert (export_dir / "saved_model.pb").is_file()
  assert (export_dir / "saved_model.pb").stat().st_mtime_ns != exported_first  # replaced
  assert not [p for p in model_dir.iterdir() if ".tmp-" in p.name or ".old-" in p.name]
  # A non-empty folder that is not a SavedModel is refused before training.
  other = tmp_path / "other"
  other.mkdir()
  (other / "keep.txt").write_text("mine")
  refused = subprocess.run(
      [command_python(), "run_pretraining.py", f"--data_dir={data_dir}",
       f"--model_dir={tmp_path / 'model2'}", f"--export_dir={other}",
       "--hparams=" + json.dumps(TINY_HPARAMS)], cwd=REPO, env=_env(), text=True,
      capture_output=True, timeout=300)
  assert refused.returncode == 2
  assert _last_line(refused.stderr) == (
      f"run_pretraining.py: error: --export_dir: {other} already exists and is not empty")
  assert not (tmp_path / "model2").exists() and (other / "keep.txt").read_text() == "mine"


# ------------------------------------------------------------ determinism
def _assert_same_training_state(checkpoint, reference):
  """Bit for bit: the weights, Adam slots and step of two checkpoints
  (save_counter counts saves, not training state)."""
  got, want = (tf.train.load_checkpoint(str(path)) for path in (checkpoint, reference))
  keys = [k for k in want.get_variable_to_shape_map()
          if "VARIABLE_VALUE" in k and not k.startswith("save_counter")]
  assert len(keys) > 40
  for key in keys:
    np.testing.assert_array_equal(got.get_tensor(key), want.get_tensor(key), key)


def _scalars(model_dir, tag):
  values = {}
  for path in sorted((model_dir / "train").glob("events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(str(path)):
      for value in event.summary.value:
        if value.tag == tag:
          values[event.step] = tf.make_ndarray(value.tensor).item()
  return values


@pytest.mark.slow
def test_fixed_seed_gives_identical_losses_and_weights(data_dir, finished_run, tmp_path):
  runs = [_pretrain(data_dir, tmp_path / name, num_train_steps=20,
                    save_checkpoints_steps=20, seed=5) for name in ("a", "b")]
  for run in runs:
    assert run.returncode == 0, run.stderr[-2000:]
  losses = [_scalars(tmp_path / name, "loss") for name in ("a", "b")]
  assert sorted(losses[0]) == list(range(1, 21))
  assert losses[0] == losses[1]  # exact float equality, dropout on
  assert len(set(losses[0].values())) > 15  # real, changing losses
  _assert_same_training_state(tmp_path / "a" / "ckpt-20", tmp_path / "b" / "ckpt-20")
  # Another seed gives another first loss: the finished run's, of TINY_HPARAMS'
  # (default) seed.
  from electra_tf.pretrain.config import PretrainingConfig
  assert PretrainingConfig.create({**TINY_HPARAMS, "model_dir": str(finished_run)}).seed != 5
  assert _scalars(finished_run, "loss")[1] != losses[0][1]


# ------------------------------------------------------------ the soak
@pytest.mark.slow
def test_soak_short_form_survives_kills_anywhere(shared_dir, tmp_path):
  report_path = tmp_path / "soak.json"
  run = subprocess.run(
      [command_python(), "-m", "tools.soak", f"--work_dir={tmp_path / 'soak'}",
       "--kills=4", "--num_train_steps=60", "--tfrecords_kills=2",
       "--finetuning_kills=3", "--corpus_lines=1500", f"--report={report_path}",
       f"--vocab_file={shared_dir / 'data' / 'vocab' / 'bert_uncased_vocab.txt'}",
       f"--corpus_file={shared_dir / 'data' / 'corpus' / 'wikitext-2' / 'wiki.valid.raw'}",
       f"--glue_dir={shared_dir / 'data' / 'finetuning_data'}"],
      # Only stops a hang (each of its processes has one of 900 s too): its 15
      # processes took 2,509 s at a load average of 10 (540 CPU-seconds).
      cwd=REPO, env=_env(), text=True, capture_output=True, timeout=4 * 3600)
  report = json.loads(report_path.read_text())
  assert run.returncode == 0 and report["ok"], (report["failure"], run.stdout[-3000:])
  jobs = {job["job"]: job for job in report["jobs"]}
  assert set(jobs) == {"tfrecords", "pretraining", "finetuning"}
  # The named moments are stop points: every one of them is killed in the
  # act, whatever the speed of the machine. The short form kills at the named
  # moments only: a random one lands mostly in the start-up, before the first
  # checkpoint, which test_a_second_job_on_a_model_dir_is_refused_and_a_killed_
  # job_leaves_no_lock kills at a stop point and reruns; the long form adds them.
  acts = {name: job["kills_in_the_act"] for name, job in jobs.items()}
  assert acts["tfrecords"] == {"write": 1, "finish": 1}
  assert acts["pretraining"] == {"save": 2, "eval": 1, "export": 1}
  assert acts["finetuning"] == {"save": 1, "eval": 1, "export": 1}
  assert jobs["pretraining"]["kills"] == 4 and jobs["pretraining"]["final_step"] == 60
  assert jobs["pretraining"]["values_identical"] > 40
  assert jobs["pretraining"]["logged_steps_identical"] == 60
  assert jobs["tfrecords"]["files_identical"] == 4 and jobs["tfrecords"]["kills"] == 2
  assert jobs["finetuning"]["kills"] == 3 and jobs["finetuning"]["values_identical"] > 20


def test_model_dir_of_another_configuration_is_refused_naming_the_differences(tmp_path):
  from electra_tf.pretrain import job as job_lib
  from electra_tf.errors import ConfigError
  from electra_tf.pretrain.config import PretrainingConfig
  first = PretrainingConfig.create({**TINY_HPARAMS, "model_dir": str(tmp_path)})
  assert not train_loop.check_run_record(str(tmp_path), job_lib.RUN_RECORD,
                                         first.architecture())
  train_loop.write_run_record(str(tmp_path), job_lib.RUN_RECORD, first.architecture())
  recorded = (tmp_path / "electra_config.json").read_text()
  # the same configuration: accepted
  assert train_loop.check_run_record(str(tmp_path), job_lib.RUN_RECORD, first.architecture())
  # A config for that model_dir reads its record, and a contradiction names both.
  with pytest.raises(ConfigError, match=r"hparam model_size: 'base' contradicts the 'small' "
                     rf"that {tmp_path}/electra_config.json records"):
    PretrainingConfig.create({**TINY_HPARAMS, "model_dir": str(tmp_path), "model_size": "base"})
  # The job's own check of the record, for a config made elsewhere.
  other = PretrainingConfig.create({**TINY_HPARAMS, "vocab_size": 8000, "model_size": "base"})
  with pytest.raises(errors.TrainingError) as error:
    train_loop.check_run_record(str(tmp_path), job_lib.RUN_RECORD, other.architecture())
  message = str(error.value)
  assert message.startswith(f"model_dir {tmp_path} holds a run of other hparams (")
  assert message.endswith("; use another --model_dir")
  assert "model_size: 'small' there, 'base' now" in message
  assert "vocab_size: 30522 there, 8000 now" in message
  train_loop.write_run_record(str(tmp_path), job_lib.RUN_RECORD, other.architecture())
  assert (tmp_path / "electra_config.json").read_text() == recorded  # written once


# ------------------------------------------------------------ preemption
def _pretraining_process(data_dir, model_dir, stop_at=None, python=None, **hparams):
  args = [python or command_python(), "run_pretraining.py", f"--data_dir={data_dir}",
          f"--model_dir={model_dir}", "--strategy=one_device",
          "--hparams=" + json.dumps({**TINY_HPARAMS, **hparams})]
  env = _env()
  if stop_at:
    from electra_tf import stop_points
    env.update(stop_points.environment(*stop_at))
  return subprocess.Popen(args, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)


@pytest.mark.slow
def test_sigterm_saves_the_current_step_and_the_rerun_continues_exactly(data_dir, tmp_path):
  from electra_tf import stop_points
  hparams = dict(num_train_steps=12, save_checkpoints_steps=100, log_every=1)
  # Frozen when step 5 is logged (no checkpoint since the start); the
  # SIGTERM arrives while frozen, and the loop stops at the first boundary
  # after Python's handler has run.  The signal is the process's: whichever
  # of its threads runs first after SIGCONT takes it, so that is step 5 when
  # the main thread does, a later step when a TensorFlow thread does and then
  # waits for a core (seen on CI's shared cores).
  process = _pretraining_process(data_dir, tmp_path / "model", ("step_logged", 5), **hparams)
  try:
    assert stop_points.wait_until_stopped(process), process.communicate()[1][-2000:]
    process.send_signal(signal.SIGTERM)
    process.send_signal(signal.SIGCONT)
    _, stderr = process.communicate(timeout=600)
  finally:
    process.kill()
  assert process.returncode == 143, stderr[-2000:]
  step, checkpoint = sigterm_stop(stderr, "run_pretraining.py")
  assert 5 <= step < 12 and checkpoint == str(tmp_path / "model" / f"ckpt-{step}")
  assert tf.train.latest_checkpoint(str(tmp_path / "model")).endswith(f"ckpt-{step}")
  rerun = _pretrain(data_dir, tmp_path / "model", **hparams)
  assert rerun.returncode == 0 and "Resumed from" in rerun.stdout
  assert f"at step {step}" in rerun.stdout
  straight = _pretrain(data_dir, tmp_path / "straight", **hparams)
  assert straight.returncode == 0, straight.stderr[-2000:]
  # (The resumed run saved once more.)
  _assert_same_training_state(tmp_path / "model" / "ckpt-12", tmp_path / "straight" / "ckpt-12")


@pytest.mark.slow
def test_a_second_job_on_a_model_dir_is_refused_and_a_killed_job_leaves_no_lock(
    data_dir, tmp_path):
  from electra_tf import stop_points
  model_dir = tmp_path / "model"
  # The interpreter itself: the refusal names the pid of the job it started.
  first = _pretraining_process(data_dir, model_dir, ("step_logged", 1), python=sys.executable,
                               log_every=1)
  try:
    assert stop_points.wait_until_stopped(first), first.communicate()[1][-2000:]
    second = _pretrain(data_dir, model_dir)
    assert second.returncode == 2
    line = _last_line(second.stderr)
    assert line.startswith(f"run_pretraining.py: error: model_dir {model_dir}: in use by "
                           f"another job (pid {first.pid} on "), line
    assert line.endswith("wait for it to end or use another model_dir")
  finally:
    first.kill()  # SIGKILL: the lock goes with the process
    first.communicate(timeout=120)
  third = _pretrain(data_dir, model_dir)
  assert third.returncode == 0, third.stderr[-2000:]
  assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-4")
