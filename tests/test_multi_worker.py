"""Pre-training on several workers and replicas, started as a user starts it.

* The README's several-hosts command, on two local workers (TF_CONFIG with
  free localhost ports), ends with the weights of one process running the
  same global batch; only the chief (worker 0) writes to model_dir.
* A worker killed with kill -9 (at a named stop point, not after a delay)
  makes the other exit non-zero with one line instead of hanging, and
  starting both commands again resumes from the last checkpoint and ends
  exactly where the uninterrupted two-worker run ended.
* `--strategy=mirrored` over two logical CPU devices (the test-only switch
  distribution.CPU_DEVICES_ENV), killed and rerun, resumes and ends with the
  one-process weights.
* Fine-tuning is single-host: `--strategy=multi_worker_mirrored` is refused.

Dropout is off, so every run's weights are comparable; the tolerance is that
of float32 sums taken in another order (tests/test_strategies.py).
"""

import json
import os
import pathlib
import re
import shlex
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

from electra_tf import stop_points
from tests.conftest import command_python, make_pretraining_data_dir, run_script
from tests.test_strategies import FLOAT32_TOLERANCE, NO_DROPOUT

REPO = pathlib.Path(__file__).resolve().parent.parent
HPARAMS = {
    "vocab_size": 30522, "embedding_size": 16, "model_hparam_overrides": NO_DROPOUT,
    "generator_hidden_size": 0.5, "max_seq_length": 32, "train_batch_size": 8,
    "num_train_steps": 4, "num_warmup_steps": 0, "learning_rate": 1e-3,
    "save_checkpoints_steps": 2, "log_every": 1}
TIMEOUT_S = 4 * 3600  # guards against a hung child only; no outcome depends on it


def _env(**extra):
  env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
  env.update(TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1", **extra)
  env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
  return env


def _free_ports(count: int):
  sockets = [socket.socket() for _ in range(count)]
  try:
    for s in sockets:
      s.bind(("127.0.0.1", 0))
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def readme_several_hosts_command():
  """(environment assignments, argv) of the README's several-hosts example."""
  text = (REPO / "README.md").read_text(encoding="utf-8")
  section = text.split("## Multi-GPU, TPU, several hosts", 1)[1].split("\n## ", 1)[0]
  blocks = [b for b in re.findall(r"```bash\n(.*?)```", section, flags=re.S)
            if "multi_worker_mirrored" in b]
  assert len(blocks) == 1, blocks
  words = shlex.split(re.sub(r"\\\n\s*", " ", blocks[0]))
  assignments = {}
  while "=" in words[0] and not words[0].startswith("-"):
    key, value = words.pop(0).split("=", 1)
    assignments[key] = value
  return assignments, words


def start_readme_workers(work_dir: pathlib.Path, data_dir: pathlib.Path,
                         stop_worker=None):
  """Starts the README's command for worker 0 and worker 1 on localhost
  (hosts replaced by free ports, the tiny hparams appended), in work_dir,
  whose `data` holds the tiny data_dir's vocab and TFRecords (and the
  model_dir, data/models/<model_name>); returns the two Popen."""
  assignments, argv = readme_several_hosts_command()
  assert argv[:2] == ["python", "run_pretraining.py"], argv
  assert "--strategy=multi_worker_mirrored" in argv
  if not (work_dir / "data").exists():  # its own data/models/, the shared inputs
    (work_dir / "data").mkdir(parents=True)
    for name in ("vocab.txt", "pretrain_tfrecords"):
      (work_dir / "data" / name).symlink_to(data_dir / name)
  cluster_text = assignments["TF_CONFIG"]
  for host, port in zip(("host0:12345", "host1:12345"), _free_ports(2)):
    assert host in cluster_text
    cluster_text = cluster_text.replace(host, f"127.0.0.1:{port}")
  processes = []
  for index in range(2):
    tf_config = json.loads(cluster_text)
    assert tf_config["task"] == {"type": "worker", "index": 0}
    tf_config["task"]["index"] = index  # the README: "index":1 on host 1
    extra = stop_points.environment(*stop_worker[1:]) if (
        stop_worker and stop_worker[0] == index) else {}
    with open(work_dir / f"worker_{index}.log", "w") as out, \
        open(work_dir / f"worker_{index}.err", "w") as err:
      processes.append(subprocess.Popen(
          [command_python(), str(REPO / argv[1]), *argv[2:],
           "--hparams=" + json.dumps(HPARAMS)],
          cwd=work_dir, env=_env(TF_CONFIG=json.dumps(tf_config), **extra),
          stdout=out, stderr=err))
  return processes


def _finish(processes, work_dir: pathlib.Path):
  """Waits for worker 0 and 1; returns [(exit status, stdout, stderr)]."""
  return [(p.wait(timeout=TIMEOUT_S), (work_dir / f"worker_{i}.log").read_text(),
           (work_dir / f"worker_{i}.err").read_text()) for i, p in enumerate(processes)]


def readme_model_dir(work_dir: pathlib.Path) -> pathlib.Path:
  """model_dir of the README command (data_dir/models/<model_name>)."""
  _, argv = readme_several_hosts_command()
  flags = dict(arg[2:].split("=", 1) for arg in argv if arg.startswith("--") and "=" in arg)
  return work_dir / flags["data_dir"] / "models" / flags["model_name"]


def model_weights(checkpoint: pathlib.Path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(str(checkpoint))
  return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
          if key.startswith("model/") and key.endswith("/.ATTRIBUTES/VARIABLE_VALUE")}


def relative_difference(model_dir: pathlib.Path, reference_dir: pathlib.Path) -> float:
  """|weights at ckpt-4 - the reference's| / |the reference's last update
  (ckpt-4 - ckpt-2)|."""
  weights = model_weights(model_dir / "ckpt-4")
  after, before = (model_weights(reference_dir / f"ckpt-{s}") for s in (4, 2))
  assert sorted(weights) == sorted(after) and len(weights) > 10
  update = np.sqrt(sum(np.sum((after[k] - before[k]) ** 2) for k in after))
  assert update > 0
  return float(np.sqrt(sum(np.sum((weights[k] - after[k]) ** 2) for k in after)) / update)


def files_under(directory: pathlib.Path):
  """Relative paths of the files under directory, event files' host and pid
  replaced by <name>."""
  return sorted(re.sub(r"events\.out\.tfevents\..*", "events.out.tfevents.<name>",
                       str(p.relative_to(directory)))
                for p in directory.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, corpus_dir, bert_vocab):
  return make_pretraining_data_dir(tmp_path_factory.mktemp("data"), corpus_dir, bert_vocab,
                                   num_lines=200, num_out_files=2)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, data_dir):
  """model_dir of one process on one device, global batch 8, 4 steps (the
  reference: run in the test's process)."""
  model_dir = tmp_path_factory.mktemp("one_process") / "model"
  result = run_script(
      ["run_pretraining.py", f"--data_dir={data_dir}", f"--model_dir={model_dir}",
       "--model_size=small", "--strategy=one_device", "--hparams=" + json.dumps(HPARAMS)])
  assert result.returncode == 0, result.stderr[-3000:]
  return model_dir


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory, data_dir):
  """The work dir of the README's command run uninterrupted on two workers."""
  work_dir = tmp_path_factory.mktemp("two_workers")
  outcomes = _finish(start_readme_workers(work_dir, data_dir), work_dir)
  for index, (status, log, stderr) in enumerate(outcomes):
    assert status == 0, f"worker {index}:\n{log[-2000:]}\n{stderr[-3000:]}"
  return work_dir


@pytest.mark.slow
def test_readme_several_hosts_command_trains_to_the_one_process_weights(two_workers,
                                                                          one_process):
  model_dir = readme_model_dir(two_workers)
  for index in range(2):
    log = (two_workers / f"worker_{index}.log").read_text()
    # (TensorFlow names the strategy's class CollectiveAllReduceStrategy.)
    assert "on 2 replica(s) (CollectiveAllReduceStrategy)" in log, log[-2000:]
    assert "step 4/4" in log
  assert relative_difference(model_dir, one_process) < FLOAT32_TOLERANCE


@pytest.mark.slow
def test_only_the_chief_writes_to_model_dir(two_workers, one_process):
  model_dir = readme_model_dir(two_workers)
  # Exactly what one process leaves: one events file (the chief's), the
  # checkpoints, the run record, curves.png; no scratch folder of worker 1.
  assert files_under(model_dir) == files_under(one_process)
  assert len(list((model_dir / "train").glob("events.out.tfevents.*"))) == 1
  assert not (model_dir / ".workers").exists()
  assert (model_dir / "ckpt-4.index").is_file() and (model_dir / "results" / "curves.png").is_file()
  # Worker 1 saved its share of each checkpoint into its scratch folder only.
  worker_log = (two_workers / "worker_1.log").read_text()
  saved = re.findall(r"Saved checkpoint (\S+)", worker_log)
  assert len(saved) == 2 and all(f"{os.sep}.workers{os.sep}worker_1{os.sep}" in s for s in saved)


@pytest.mark.slow
def test_killed_worker_stops_the_other_and_both_resume(tmp_path, data_dir, two_workers):
  # Worker 1 freezes itself once it has logged step 3 (the chief saved
  # ckpt-2 and cannot finish step 4 without it), and is killed there.
  processes = start_readme_workers(tmp_path, data_dir, stop_worker=(1, "step_logged", 3))
  chief, worker = processes
  assert stop_points.wait_until_stopped(worker, TIMEOUT_S)
  worker.kill()  # SIGKILL, as kill -9
  worker.wait()
  assert worker.returncode == -signal.SIGKILL
  status = chief.wait(timeout=TIMEOUT_S)
  stderr = (tmp_path / "worker_0.err").read_text()
  lines = stderr.strip().splitlines()
  assert status == 2, stderr[-3000:]
  assert lines[-1].startswith("run_pretraining.py: error: another worker of the cluster "
                              "stopped or cannot be reached ("), lines[-1]
  assert lines[-1].endswith("start every worker's command again to resume from the last "
                            "checkpoint"), lines[-1]
  model_dir = readme_model_dir(tmp_path)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-2")
  assert not (model_dir / "ckpt-4.index").exists()
  # Both commands again: they resume from ckpt-2 and end where the
  # uninterrupted run ended.
  outcomes = _finish(start_readme_workers(tmp_path, data_dir), tmp_path)
  for index, (status, _, stderr) in enumerate(outcomes):
    assert status == 0, f"worker {index}: {stderr[-3000:]}"
  chief_log = outcomes[0][1]
  assert re.search(r"Resumed from \S*ckpt-2 at step 2", chief_log), chief_log[-2000:]
  uninterrupted = model_weights(readme_model_dir(two_workers) / "ckpt-4")
  resumed = model_weights(model_dir / "ckpt-4")
  for key, value in uninterrupted.items():
    np.testing.assert_array_equal(resumed[key], value, err_msg=key)


@pytest.mark.slow
def test_mirrored_on_two_logical_devices_killed_and_resumed(tmp_path, data_dir, one_process):
  model_dir = tmp_path / "model"
  argv = [command_python(), str(REPO / "run_pretraining.py"), f"--data_dir={data_dir}",
          f"--model_dir={model_dir}", "--model_size=small", "--strategy=mirrored",
          "--hparams=" + json.dumps(HPARAMS)]
  env = _env(ELECTRA_TF_CPU_DEVICES="2")
  with open(tmp_path / "killed.log", "w") as out:
    process = subprocess.Popen(argv, cwd=REPO, env=dict(env, **stop_points.environment(
        "step_logged", 3)), stdout=out, stderr=subprocess.STDOUT)
  assert stop_points.wait_until_stopped(process, TIMEOUT_S)
  process.kill()
  process.wait()
  assert "on 2 replica(s) (MirroredStrategy)" in (tmp_path / "killed.log").read_text()
  rerun = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=TIMEOUT_S)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert f"Resumed from {model_dir / 'ckpt-2'} at step 2" in rerun.stdout
  assert "Restored the input position of step 2" in rerun.stdout
  assert relative_difference(model_dir, one_process) < FLOAT32_TOLERANCE


@pytest.mark.slow
def test_finetuning_refuses_several_hosts(tmp_path):
  result = subprocess.run(
      [sys.executable, str(REPO / "run_finetuning.py"), f"--data_dir={tmp_path}",
       "--task_names=rte", "--strategy=multi_worker_mirrored"],
      cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
  assert result.returncode == 2
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(
      "run_finetuning.py: error: flag --strategy=multi_worker_mirrored:"), lines
  assert os.listdir(tmp_path) == []
