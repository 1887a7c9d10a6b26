"""--signatures=ids: SavedModels that load with TensorFlow alone.

The ids-only exports (the pre-trained model through `python -m
electra_tf.export`, a fine-tuning task through the job's exporter) are loaded
in a fresh interpreter that imports only TensorFlow; their outputs equal the
ids signature of the default export. No op of their graphs comes from
tensorflow-text (every op type is registered in a TensorFlow-only process),
and the default export, which has the text signature, does not load there
(the error a user sees without `import tensorflow_text`).
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from electra_tf import cli
from electra_tf.errors import ConfigError
from tests.test_export import _export_cli, _project_free_env, graph_ops
from tests.test_finetune_run import TINY

# A fresh interpreter, outside the repository: TensorFlow alone, no
# tensorflow-text, no electra_tf. Loads export_dir, runs serving_default on the
# arrays of inputs_npz, saves the outputs.
TF_ONLY_LOADER = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf
    export_dir, inputs_npz, outputs_npz = sys.argv[1:]
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    inputs = np.load(inputs_npz)
    outputs = serve(**{k: tf.constant(inputs[k]) for k in inputs.files})
    assert "tensorflow_text" not in sys.modules and "electra_tf" not in sys.modules
    np.savez(outputs_npz, **{k: v.numpy() for k, v in outputs.items()})
""")
# The op types of each graph that a TensorFlow-only process has no kernel for.
UNREGISTERED_OPS = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    from tensorflow.python.framework import op_def_registry
    print(json.dumps([sorted(op for op in ops if op_def_registry.get(op) is None)
                      for ops in json.loads(sys.argv[1])]))
""")


def _tf_only(code, *args, cwd):
  return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd,
                        env=_project_free_env(), capture_output=True, text=True,
                        timeout=300)


def _unregistered(cwd, *graphs):
  """For each of `graphs` (op type sets), the sorted op types without a kernel
  in a TensorFlow-only process (one process for all)."""
  run = _tf_only(UNREGISTERED_OPS, json.dumps([sorted(ops) for ops in graphs]), cwd=cwd)
  assert run.returncode == 0, run.stderr[-2000:]
  return json.loads(run.stdout)


def _serve_in_process(export_dir, inputs):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  serve = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
  return {k: v.numpy() for k, v in serve(**{k: tf.constant(v) for k, v in inputs.items()}).items()}


def _serve_both(tmp_path, inputs):
  """Outputs of tmp_path/ids in a TensorFlow-only process and of tmp_path/both's
  ids signature in this one, on `inputs` (saved as tmp_path/inputs.npz)."""
  np.savez(tmp_path / "inputs.npz", **inputs)
  run = _tf_only(TF_ONLY_LOADER, tmp_path / "ids", tmp_path / "inputs.npz",
                 tmp_path / "out.npz", cwd=tmp_path)
  assert run.returncode == 0, run.stderr[-2000:]
  return np.load(tmp_path / "out.npz"), _serve_in_process(tmp_path / "both", inputs)


def test_signatures_flag_values():
  assert cli.export_text_signature("ids,text") is True
  assert cli.export_text_signature("text, ids") is True
  assert cli.export_text_signature("ids") is False
  with pytest.raises(ConfigError, match=r"^--signatures: ids is required"):
    cli.export_text_signature("text")
  with pytest.raises(ConfigError, match=r"^--signatures: unknown grpc, json \(choose from "
                                        r"ids, text\)$"):
    cli.export_text_signature("ids,json,grpc")


@pytest.mark.slow
def test_pretrained_ids_only_export_loads_with_tensorflow_alone(
    official_debug_fixture, bert_vocab, tmp_path):
  hparams = json.dumps(json.loads((official_debug_fixture / "config.json").read_text())["hparams"])
  checkpoint = f"--checkpoint={official_debug_fixture / 'model.ckpt'}"
  # No vocab: the ids signature needs none.
  run = _export_cli(checkpoint, f"--hparams={hparams}", "--signatures=ids",
                    f"--export_dir={tmp_path / 'ids'}")
  assert run.returncode == 0, run.stderr[-2000:]
  run = _export_cli(checkpoint, f"--hparams={hparams}", f"--vocab_file={bert_vocab}",
                    f"--export_dir={tmp_path / 'both'}")
  assert run.returncode == 0, run.stderr[-2000:]
  assert os.listdir(tmp_path / "ids" / "assets") == []  # no vocab asset

  a = np.load(official_debug_fixture / "fixture.npz")
  inputs = {"input_ids": a["discriminator_input_ids"], "input_mask": a["input_mask"],
            "segment_ids": a["segment_ids"]}
  ids_only, both = _serve_both(tmp_path, inputs)
  assert sorted(ids_only.files) == sorted(both) == [
      "discriminator_logits", "discriminator_probs", "pooled_output", "sequence_output"]
  for key in both:
    np.testing.assert_allclose(ids_only[key], both[key], atol=1e-6)
  np.testing.assert_allclose(ids_only["discriminator_logits"], a["disc_logits"], atol=1e-4)

  # Every op of the ids-only graph is plain TensorFlow; the default export holds
  # tensorflow-text's, and so does not load without it.
  ids_unregistered, both_unregistered = _unregistered(
      tmp_path, graph_ops(tmp_path / "ids"), graph_ops(tmp_path / "both"))
  assert ids_unregistered == [] and "NormalizeUTF8" in both_unregistered
  run = _tf_only(TF_ONLY_LOADER, tmp_path / "both", tmp_path / "inputs.npz",
                 tmp_path / "out2.npz", cwd=tmp_path)
  assert run.returncode != 0
  assert "RuntimeError: Op type not registered 'NormalizeUTF8'" in run.stderr  # docs/serving.md


@pytest.mark.slow
def test_export_cli_signature_errors(official_debug_fixture, tmp_path):
  hparams = json.dumps(json.loads((official_debug_fixture / "config.json").read_text())["hparams"])
  checkpoint = f"--checkpoint={official_debug_fixture / 'model.ckpt'}"
  run = _export_cli(checkpoint, f"--hparams={hparams}", f"--export_dir={tmp_path / 'x'}")
  assert run.returncode == 2
  assert run.stderr.strip().splitlines()[-1] == (
      "electra_tf.export: error: --vocab_file is required for the text signature: there is "
      f"no vocab.txt beside {official_debug_fixture / 'model.ckpt'} "
      "(or export the ids signature alone: --signatures=ids)")
  run = _export_cli(checkpoint, f"--hparams={hparams}", "--signatures=text",
                    f"--export_dir={tmp_path / 'x'}")
  assert run.returncode == 2
  assert run.stderr.strip().splitlines()[-1].startswith(
      "electra_tf.export: error: --signatures: ids is required")
  assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_finetuned_ids_only_export_loads_with_tensorflow_alone(shared_dir, tmp_path):
  from electra_tf.finetune import task_saved_model  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune import job as finetune_job  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune import task_builder  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune.config import FinetuningConfig  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune.model import FinetuningModel  # pylint: disable=g-import-not-at-top
  data_dir = tmp_path / "data"
  (data_dir / "finetuning_data").mkdir(parents=True)
  shutil.copytree(shared_dir / "data" / "finetuning_data" / "rte",
                  data_dir / "finetuning_data" / "rte")
  shutil.copy(shared_dir / "data" / "vocab" / "bert_uncased_vocab.txt", data_dir / "vocab.txt")
  config = FinetuningConfig.create(dict(TINY, init_checkpoint="none"), task_names=["rte"],
                                   data_dir=str(data_dir), model_dir=str(tmp_path / "model"))
  tasks = task_builder.get_tasks(config, finetune_job.load_tokenizer(config))
  model = FinetuningModel(config, tasks)
  task_saved_model.export_task_model(model, tasks[0], str(tmp_path / "ids"), text=False)
  task_saved_model.export_task_model(model, tasks[0], str(tmp_path / "both"))

  rng = np.random.default_rng(0)
  inputs = {"input_ids": rng.integers(5, 30522, (3, 20)).astype(np.int32),
            "input_mask": np.ones((3, 20), np.int32),
            "segment_ids": np.repeat([[0] * 10 + [1] * 10], 3, axis=0).astype(np.int32)}
  ids_only, both = _serve_both(tmp_path, inputs)
  assert sorted(ids_only.files) == sorted(both) and "logits" in both
  for key in both:
    np.testing.assert_allclose(ids_only[key], both[key], atol=1e-6)
  assert _unregistered(tmp_path, graph_ops(tmp_path / "ids")) == [[]]
