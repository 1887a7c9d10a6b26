"""SavedModel export: official numbers through a fresh, project-free process."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import checkpoints, export
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.modeling.encoder import build_discriminator_encoder
from electra_tf.pretrain.model import build_model

TOL = dict(atol=1e-4, rtol=1e-4)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _export_cli(*argv):
  return subprocess.run([sys.executable, "-m", "electra_tf.export", *argv], cwd=REPO,
                        capture_output=True, text=True, timeout=300)

# Runs in a fresh interpreter, outside the repository, without electra_tf.
LOADER = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf
    export_dir, inputs_npz, outputs_npz = sys.argv[1:]
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    inputs = np.load(inputs_npz)
    results = {}
    for batch, seq in [(4, 32), (1, 7)]:
      feed = {k: tf.constant(inputs[k][:batch, :seq])
              for k in ("input_ids", "input_mask", "segment_ids")}
      for key, value in serve(**feed).items():
        results[f"{key}_{batch}x{seq}"] = value.numpy()
    assert "electra_tf" not in sys.modules
    np.savez(outputs_npz, **results)
""")


@pytest.mark.slow
def test_export_matches_official_and_in_memory_model(
    official_debug_fixture, tmp_path):
  hparams = (official_debug_fixture / "config.json").read_text()
  hparams = json.dumps(json.loads(hparams)["hparams"])
  export_dir = tmp_path / "saved_model"
  run = _export_cli(f"--checkpoint={official_debug_fixture / 'model.ckpt'}",
                    f"--hparams={hparams}", f"--export_dir={export_dir}")
  assert run.returncode == 0, run.stderr[-2000:]
  assert run.stdout.strip() == f"wrote {export_dir}"
  assert sorted(os.listdir(tmp_path)) == ["saved_model"]

  a = np.load(official_debug_fixture / "fixture.npz")
  np.savez(tmp_path / "inputs.npz", input_ids=a["discriminator_input_ids"],
           input_mask=a["input_mask"], segment_ids=a["segment_ids"])
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  subprocess.run([sys.executable, "-c", LOADER, str(export_dir),
                  str(tmp_path / "inputs.npz"), str(tmp_path / "outputs.npz")],
                 cwd=tmp_path, env=env, check=True, timeout=300)
  out = np.load(tmp_path / "outputs.npz")

  np.testing.assert_allclose(out["discriminator_logits_4x32"], a["disc_logits"], **TOL)
  np.testing.assert_allclose(out["discriminator_probs_4x32"], a["disc_probs"], **TOL)
  np.testing.assert_allclose(out["sequence_output_4x32"], a["disc_sequence_output"], **TOL)
  np.testing.assert_allclose(out["pooled_output_4x32"], a["disc_sequence_output"][:, 0],
                             **TOL)
  assert out["sequence_output_1x7"].shape == (1, 7, 64)

  model = build_model(PretrainingConfig.create(json.loads(hparams)))
  checkpoints.restore_from_checkpoint(model, str(official_debug_fixture / "model.ckpt"))
  ids, mask, segments = (a[k][:1, :7] for k in
                         ("discriminator_input_ids", "input_mask", "segment_ids"))
  in_memory = model.discriminator(ids, mask, segments, training=False)
  np.testing.assert_allclose(out["sequence_output_1x7"], in_memory["sequence_output"],
                             atol=1e-5)
  np.testing.assert_allclose(out["pooled_output_1x7"], in_memory["pooled_output"],
                             atol=1e-5)
  np.testing.assert_allclose(
      out["discriminator_logits_1x7"],
      model.discriminator_logits(ids, mask, segments, training=False), atol=1e-5)


@pytest.mark.slow
def test_encoder_export_overwrite_and_length_check(tmp_path):
  config = PretrainingConfig.create({
      "vocab_size": 30, "embedding_size": 8, "max_seq_length": 8,
      "model_hparam_overrides": {"hidden_size": 16, "num_hidden_layers": 1,
                                 "num_attention_heads": 2,
                                 "max_position_embeddings": 10}})
  encoder = build_discriminator_encoder(config.encoder_config(),
                                        config.effective_embedding_size)
  export_dir = tmp_path / "encoder"
  export.export_saved_model(encoder, str(export_dir))
  with pytest.raises(ValueError, match="--export_dir: .* already exists and is not empty"):
    export.export_saved_model(encoder, str(export_dir))
  export.export_saved_model(encoder, str(export_dir), overwrite=True)
  assert sorted(os.listdir(tmp_path)) == ["encoder"]

  serve = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
  assert set(serve.structured_outputs) == {"sequence_output", "pooled_output"}
  ids = tf.constant([[3, 4, 5, 6, 0, 0]])
  out = serve(input_ids=ids, input_mask=tf.cast(ids > 0, tf.int32),
              segment_ids=tf.zeros_like(ids))
  expected = encoder(ids, tf.cast(ids > 0, tf.int32), tf.zeros_like(ids), training=False)
  np.testing.assert_allclose(out["sequence_output"], expected["sequence_output"], atol=1e-6)
  too_long = tf.ones([1, 11], tf.int32)
  with pytest.raises(tf.errors.InvalidArgumentError, match="max_position_embeddings 10"):
    serve(input_ids=too_long, input_mask=too_long, segment_ids=too_long)


@pytest.mark.slow
def test_export_cli_errors_are_one_line(tmp_path):
  run = _export_cli(f"--checkpoint={tmp_path / 'missing'}", f"--export_dir={tmp_path / 'x'}")
  assert run.returncode == 2 and "Traceback" not in run.stderr
  assert run.stderr.strip().splitlines()[-1] == (
      f"electra_tf.export: error: checkpoint {tmp_path / 'missing'}: not found "
      f"(no {tmp_path / 'missing'}.index and not a directory)")
  assert os.listdir(tmp_path) == []
