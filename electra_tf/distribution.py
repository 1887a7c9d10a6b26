"""Choosing a tf.distribute strategy from a flag, and the helpers around it.

`--strategy=auto`: TPUStrategy with a TPU address, else MirroredStrategy over
the local GPUs, else the CPU; MultiWorkerMirroredStrategy reads TF_CONFIG.
A job creates its strategy (`create_job_strategy`) before any other
TensorFlow op, since it configures the runtime.  `lost_worker_error`: a
dead worker as one line (docs/operations.md).
"""

from __future__ import annotations

import json
import os
import re
from typing import Optional

import tensorflow as tf

from electra_tf.config import STRATEGIES
from electra_tf.errors import ConfigError, TrainingError, error_message

# Test-only switch: split the host CPU into this many logical devices, so that
# `--strategy=mirrored` runs on several replicas on a machine without GPUs.
CPU_DEVICES_ENV = "ELECTRA_TF_CPU_DEVICES"


def configure_devices() -> None:
  """Applies CPU_DEVICES_ENV (unset: nothing to do).

  Must run before TensorFlow's first op: logical devices cannot be changed
  once the runtime has started.  A second call in the same process (a job
  run twice) finds them configured and does nothing.
  """
  value = os.environ.get(CPU_DEVICES_ENV, "")
  if not value:
    return
  if not value.isdigit() or int(value) < 1:
    raise ConfigError(f"{CPU_DEVICES_ENV}={value!r}: expected a number of logical CPU "
                      "devices (1 or more)")
  cpu = tf.config.list_physical_devices("CPU")[0]
  if len(tf.config.get_logical_device_configuration(cpu) or [None]) == int(value):
    return
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * int(value))



def create_strategy(name: str = "auto", tpu: Optional[str] = None) -> tf.distribute.Strategy:
  """Returns the strategy named by `--strategy` (and `--tpu` for TPUs).

  Call it before any other TensorFlow op of the process (module docstring).
  `mirrored` mirrors over every GPU, else over every logical CPU device
  (several only with CPU_DEVICES_ENV).
  """
  if name not in STRATEGIES:
    raise ConfigError(f"--strategy: {name!r} is not one of {', '.join(STRATEGIES)}")
  configure_devices()
  if name == "auto":
    if tpu:
      name = "tpu"
    elif tf.config.list_physical_devices("GPU"):
      name = "mirrored"
    else:
      name = "one_device"
  if name == "tpu":
    if not tpu:
      raise ConfigError("--strategy=tpu needs --tpu (a TPU name, grpc:// address or 'local')")
    # "local": a TPU VM's own chips; a name or grpc:// address: over the network.
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  if name == "multi_worker_mirrored":
    if "TF_CONFIG" not in os.environ:
      raise ConfigError("--strategy=multi_worker_mirrored needs the TF_CONFIG "
                        "environment variable describing the cluster")
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "mirrored":
    if tf.config.list_physical_devices("GPU"):
      return tf.distribute.MirroredStrategy()
    return tf.distribute.MirroredStrategy(
        [device.name for device in tf.config.list_logical_devices("CPU")])
  gpus = tf.config.list_logical_devices("GPU")
  return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")


def create_job_strategy(config, strategy_name: str = "auto",
                        tpu: Optional[str] = None) -> tf.distribute.Strategy:
  """The strategy of --strategy / --tpu and a job config's official TPU hparams:
  `use_tpu` needs `num_tpu_cores` to be the TPU's core count; `tpu_zone`,
  `gcp_project` and `tpu_job_name` are refused (give the TPU's name or
  grpc:// address)."""
  for key in ("tpu_zone", "gcp_project", "tpu_job_name"):
    if getattr(config, key):
      raise ConfigError(f"hparam {key}: not supported; give the TPU's name or "
                        "grpc:// address as --tpu or hparam tpu_name")
  if config.use_tpu:
    if strategy_name not in ("auto", "tpu"):
      raise ConfigError(f"hparam use_tpu=true contradicts --strategy={strategy_name}")
    strategy_name, tpu = "tpu", tpu or config.tpu_name
  strategy = create_strategy(strategy_name, tpu)
  if config.use_tpu and strategy.num_replicas_in_sync != config.num_tpu_cores:
    raise ConfigError(f"hparam num_tpu_cores: {config.num_tpu_cores}, but the "
                      f"TPU has {strategy.num_replicas_in_sync} cores (all are used)")
  return strategy


def lost_worker_error(error: BaseException, strategy: tf.distribute.Strategy
                      ) -> Optional[TrainingError]:
  """The one-line TrainingError of a collective aborted because another
  worker of a MultiWorkerMirroredStrategy cluster died or became
  unreachable; None for any other error or strategy."""
  if not (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and
          isinstance(error, tf.errors.UnavailableError)):
    return None
  detail = error_message(error)
  # TensorFlow names the unhealthy tasks on the lines after the first.
  tasks = sorted(set(re.findall(r"/job:[^/\s]+/replica:\d+/task:\d+", error.message or "")))
  missing = [task for task in tasks if task not in detail]
  if missing:
    detail = f"{detail} {', '.join(missing)}"
  return TrainingError(
      f"another worker of the cluster stopped or cannot be reached ({detail}); stopped "
      "without saving: start every worker's command again to resume from the last checkpoint")


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  """True on the worker that writes checkpoints, logs and results."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
    return True
  task_type, task_id = resolver.task_type, resolver.task_id
  if task_type in (None, "chief"):
    return True
  has_chief = "chief" in json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
  return task_type == "worker" and task_id == 0 and not has_chief


def worker_dir(model_dir: str, strategy: tf.distribute.Strategy) -> str:
  """Where this worker writes checkpoints: model_dir for the chief.

  Under MultiWorkerMirroredStrategy every worker must take part in saving
  (the save is a collective); non-chief workers write into a private
  scratch folder under model_dir that they delete afterwards.
  """
  if is_chief(strategy):
    return model_dir
  resolver = strategy.cluster_resolver
  return os.path.join(model_dir, ".workers", f"{resolver.task_type}_{resolver.task_id}")
