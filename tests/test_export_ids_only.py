"""--signatures=ids: SavedModels that load with TensorFlow alone.

The ids-only exports (the pre-trained model through `python -m
electra_tf.export`, a fine-tuning task through the job's exporter) are loaded
in one fresh interpreter that imports only TensorFlow; their outputs equal the
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

# One fresh interpreter for the file, outside the repository: TensorFlow
# alone, no tensorflow-text, no electra_tf.  argv[1] (JSON): "serve", triples
# (export_dir, inputs_npz, outputs_npz): serving_default of export_dir on the
# arrays of inputs_npz, its outputs saved to outputs_npz; "ops", op type lists:
# printed, the op types of each that the process has no kernel for; "fails",
# an export with the text signature loaded last, as a user would without
# `import tensorflow_text`: the process ends with that error.
TF_ONLY_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.framework import op_def_registry
    jobs = json.loads(sys.argv[1])
    for export_dir, inputs_npz, outputs_npz in jobs["serve"]:
      serve = tf.saved_model.load(export_dir).signatures["serving_default"]
      inputs = np.load(inputs_npz)
      outputs = serve(**{k: tf.constant(inputs[k]) for k in inputs.files})
      np.savez(outputs_npz, **{k: v.numpy() for k, v in outputs.items()})
    print(json.dumps([sorted(op for op in ops if op_def_registry.get(op) is None)
                      for ops in jobs["ops"]]), flush=True)
    assert "tensorflow_text" not in sys.modules and "electra_tf" not in sys.modules
    tf.saved_model.load(jobs["fails"])
""")


def _serve_in_process(export_dir, inputs):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  serve = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
  return {k: v.numpy() for k, v in serve(**{k: tf.constant(v) for k, v in inputs.items()}).items()}


@pytest.fixture(scope="module")
def pretrained_exports(tmp_path_factory, official_debug_fixture, bert_vocab):
  """The official debug checkpoint exported by the command: ids/ with
  --signatures=ids and no vocab (the ids signature needs none), both/ by
  default; and the fixture's inputs (inputs.npz)."""
  root = tmp_path_factory.mktemp("pretrained")
  hparams = json.dumps(json.loads((official_debug_fixture / "config.json").read_text())["hparams"])
  checkpoint = f"--checkpoint={official_debug_fixture / 'model.ckpt'}"
  run = _export_cli(checkpoint, f"--hparams={hparams}", "--signatures=ids",
                    f"--export_dir={root / 'ids'}")
  assert run.returncode == 0, run.stderr[-2000:]
  run = _export_cli(checkpoint, f"--hparams={hparams}", f"--vocab_file={bert_vocab}",
                    f"--export_dir={root / 'both'}")
  assert run.returncode == 0, run.stderr[-2000:]
  a = np.load(official_debug_fixture / "fixture.npz")
  np.savez(root / "inputs.npz", input_ids=a["discriminator_input_ids"],
           input_mask=a["input_mask"], segment_ids=a["segment_ids"])
  return root


@pytest.fixture(scope="module")
def finetuned_exports(tmp_path_factory, shared_dir):
  """A tiny random-init RTE model exported by the job's exporter: ids/
  without the text signature, both/ with it; and random ids (inputs.npz)."""
  from electra_tf.finetune import task_saved_model  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune import job as finetune_job  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune import task_builder  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune.config import FinetuningConfig  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune.model import FinetuningModel  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("finetuned")
  data_dir = root / "data"
  (data_dir / "finetuning_data").mkdir(parents=True)
  shutil.copytree(shared_dir / "data" / "finetuning_data" / "rte",
                  data_dir / "finetuning_data" / "rte")
  shutil.copy(shared_dir / "data" / "vocab" / "bert_uncased_vocab.txt", data_dir / "vocab.txt")
  config = FinetuningConfig.create(dict(TINY, init_checkpoint="none"), task_names=["rte"],
                                   data_dir=str(data_dir), model_dir=str(root / "model"))
  tasks = task_builder.get_tasks(config, finetune_job.load_tokenizer(config))
  model = FinetuningModel(config, tasks)
  task_saved_model.export_task_model(model, tasks[0], str(root / "ids"), text=False)
  task_saved_model.export_task_model(model, tasks[0], str(root / "both"))
  rng = np.random.default_rng(0)
  np.savez(root / "inputs.npz", input_ids=rng.integers(5, 30522, (3, 20)).astype(np.int32),
           input_mask=np.ones((3, 20), np.int32),
           segment_ids=np.repeat([[0] * 10 + [1] * 10], 3, axis=0).astype(np.int32))
  return root


@pytest.fixture(scope="module")
def tf_only(pretrained_exports, finetuned_exports):
  """TF_ONLY_SCRIPT on both ids/ exports (outputs to ids_out.npz beside
  them) and the op types of the three graphs (pretrained ids/ and both/,
  fine-tuned ids/), the pretrained both/ loaded last: the finished process and
  its unregistered op types by graph."""
  roots = (pretrained_exports, finetuned_exports)
  jobs = {"serve": [[str(root / name) for name in ("ids", "inputs.npz", "ids_out.npz")]
                    for root in roots],
          "ops": [sorted(graph_ops(root)) for root in (
              pretrained_exports / "ids", pretrained_exports / "both",
              finetuned_exports / "ids")],
          "fails": str(pretrained_exports / "both")}
  run = subprocess.run([sys.executable, "-c", TF_ONLY_SCRIPT, json.dumps(jobs)],
                       cwd=pretrained_exports, env=_project_free_env(), capture_output=True,
                       text=True, timeout=300)
  assert run.stdout, run.stderr[-2000:]  # the exports served and the op types printed
  pretrained_ids, pretrained_both, finetuned_ids = json.loads(run.stdout.splitlines()[-1])
  return run, {"pretrained_ids": pretrained_ids, "pretrained_both": pretrained_both,
               "finetuned_ids": finetuned_ids}


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
    official_debug_fixture, pretrained_exports, tf_only):
  assert os.listdir(pretrained_exports / "ids" / "assets") == []  # no vocab asset
  a = np.load(official_debug_fixture / "fixture.npz")
  ids_only = np.load(pretrained_exports / "ids_out.npz")
  both = _serve_in_process(pretrained_exports / "both", dict(np.load(
      pretrained_exports / "inputs.npz")))
  assert sorted(ids_only.files) == sorted(both) == [
      "discriminator_logits", "discriminator_probs", "pooled_output", "sequence_output"]
  for key in both:
    np.testing.assert_allclose(ids_only[key], both[key], atol=1e-6)
  np.testing.assert_allclose(ids_only["discriminator_logits"], a["disc_logits"], atol=1e-4)

  # Every op of the ids-only graph is plain TensorFlow; the default export holds
  # tensorflow-text's, and so does not load without it (loaded last, after the
  # ids-only exports served).
  run, unregistered = tf_only
  assert unregistered["pretrained_ids"] == [] and "NormalizeUTF8" in unregistered[
      "pretrained_both"]
  assert run.returncode != 0
  assert "RuntimeError: Op type not registered 'NormalizeUTF8'" in run.stderr, (  # serving.md
      run.stderr[-2000:])


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
def test_finetuned_ids_only_export_loads_with_tensorflow_alone(finetuned_exports, tf_only):
  ids_only = np.load(finetuned_exports / "ids_out.npz")
  both = _serve_in_process(finetuned_exports / "both", dict(np.load(
      finetuned_exports / "inputs.npz")))
  assert sorted(ids_only.files) == sorted(both) and "logits" in both
  for key in both:
    np.testing.assert_allclose(ids_only[key], both[key], atol=1e-6)
  assert tf_only[1]["finetuned_ids"] == []
