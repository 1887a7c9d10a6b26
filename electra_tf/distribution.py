"""Choosing a tf.distribute strategy from a flag, and the helpers around it.

`--strategy=auto` picks TPUStrategy when a TPU address is given, else
MirroredStrategy over all local GPUs, else the one CPU device.
MultiWorkerMirroredStrategy reads the cluster from the TF_CONFIG environment
variable (see the README, "Several hosts").
"""

from __future__ import annotations

import json
import os
from typing import Optional

import tensorflow as tf

from electra_tf.config import STRATEGIES, ConfigError



def create_strategy(name: str = "auto", tpu: Optional[str] = None) -> tf.distribute.Strategy:
  """Returns the strategy named by `--strategy` (and `--tpu` for TPUs)."""
  if name not in STRATEGIES:
    raise ValueError(f"--strategy: {name!r} is not one of {', '.join(STRATEGIES)}")
  if name == "auto":
    if tpu:
      name = "tpu"
    elif tf.config.list_physical_devices("GPU"):
      name = "mirrored"
    else:
      name = "one_device"
  if name == "tpu":
    if not tpu:
      raise ValueError("--strategy=tpu needs --tpu (a TPU name, grpc:// address or 'local')")
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu="" if tpu == "local" else tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  if name == "multi_worker_mirrored":
    if "TF_CONFIG" not in os.environ:
      raise ValueError("--strategy=multi_worker_mirrored needs the TF_CONFIG "
                       "environment variable describing the cluster")
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "mirrored":
    return tf.distribute.MirroredStrategy()
  gpus = tf.config.list_logical_devices("GPU")
  return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")


def create_job_strategy(config, strategy_name: str = "auto",
                        tpu: Optional[str] = None) -> tf.distribute.Strategy:
  """The strategy of --strategy / --tpu and a job config's official TPU hparams.

  `use_tpu` asks for the TPU strategy (at --tpu, else hparam tpu_name), and
  then `num_tpu_cores` must be the TPU's core count (all are used);
  `tpu_zone`, `gcp_project` and `tpu_job_name` (TPUEstimator settings with no
  tf.distribute counterpart here) are refused: give the TPU's name or
  grpc:// address instead.
  """
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
