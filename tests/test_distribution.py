"""Strategies from flags and the official TPU hparams, for both jobs."""

import pytest

from electra_tf import distribution
from electra_tf.finetune.config import FinetuningConfig
from electra_tf.pretrain.config import PretrainingConfig

CONFIGS = [lambda h: FinetuningConfig.create(h, task_names=["rte"], data_dir="/nonexistent"),
           lambda h: PretrainingConfig.create(h, data_dir="/nonexistent")]


@pytest.mark.parametrize("make_config", CONFIGS, ids=["finetuning", "pretraining"])
@pytest.mark.parametrize("hparams, strategy, message", [
    ({"tpu_zone": "us-central1-a"}, "auto", "hparam tpu_zone: not supported"),
    ({"gcp_project": "p"}, "auto", "hparam gcp_project: not supported"),
    ({"use_tpu": True}, "one_device", "use_tpu=true contradicts --strategy=one_device"),
    ({"use_tpu": True}, "auto", "--strategy=tpu needs --tpu"),
])
def test_tpu_hparams_map_onto_the_strategy_or_fail_clearly(make_config, hparams, strategy,
                                                           message):
  with pytest.raises(ValueError, match=message):
    distribution.create_job_strategy(make_config(hparams), strategy, None)


def test_without_tpu_hparams_the_flag_decides():
  strategy = distribution.create_job_strategy(CONFIGS[1]({}), "one_device", None)
  assert strategy.num_replicas_in_sync == 1
  with pytest.raises(ValueError, match="--strategy: 'gpu' is not one of"):
    distribution.create_strategy("gpu")


def test_cpu_devices_switch_refuses_a_bad_value(monkeypatch):
  monkeypatch.setenv(distribution.CPU_DEVICES_ENV, "two")
  with pytest.raises(ValueError, match="ELECTRA_TF_CPU_DEVICES='two': expected a number"):
    distribution.create_strategy("mirrored")


def test_lost_worker_error_is_only_for_multi_worker_clusters():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  one_device = distribution.create_strategy("one_device")
  unavailable = tf.errors.UnavailableError(None, None, "Collective ops is aborted by: peer down")
  assert distribution.lost_worker_error(unavailable, one_device) is None


def test_lost_worker_error_names_the_unhealthy_task(monkeypatch):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  class FakeMultiWorker:  # a MultiWorkerMirroredStrategy needs a cluster
    pass

  monkeypatch.setattr(distribution.tf.distribute, "MultiWorkerMirroredStrategy", FakeMultiWorker)
  error = tf.errors.UnavailableError(None, None, (
      "Collective ops is aborted by: Error reported from /job:worker/task:1: The following "
      "tasks are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1\n"
      "The tasks have crashed."))
  assert str(distribution.lost_worker_error(error, FakeMultiWorker())) == (
      "another worker of the cluster stopped or cannot be reached (Collective ops is aborted "
      "by: Error reported from /job:worker/task:1: The following tasks are unhealthy (stopped "
      "sending heartbeats): /job:worker/replica:0/task:1); stopped without saving: start every "
      "worker's command again to resume from the last checkpoint")
  assert distribution.lost_worker_error(tf.errors.InternalError(None, None, "x"),
                                        FakeMultiWorker()) is None


@pytest.mark.parametrize("tpu", ["local", "my-tpu", "grpc://10.0.0.2:8470"])
def test_tpu_start_up_follows_tensorflows_order(monkeypatch, tpu):
  """No TPU here: the calls are recorded. TensorFlow's TPU guide: resolve the
  TPU ("local" for a TPU VM's own chips, else its name or address), connect to
  the cluster, initialize the TPU system, then create the strategy."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  calls = []

  class Resolver:
    def __init__(self, tpu):
      calls.append(("resolver", tpu))

  monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", Resolver)
  monkeypatch.setattr(tf.config, "experimental_connect_to_cluster",
                      lambda resolver: calls.append(("connect", type(resolver))))
  monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system",
                      lambda resolver: calls.append(("initialize", type(resolver))))
  monkeypatch.setattr(tf.distribute, "TPUStrategy",
                      lambda resolver: calls.append(("strategy", type(resolver))) or "tpu")
  assert distribution.create_strategy("tpu", tpu) == "tpu"
  assert calls == [("resolver", tpu), ("connect", Resolver), ("initialize", Resolver),
                   ("strategy", Resolver)]
