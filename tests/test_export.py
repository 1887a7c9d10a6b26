"""SavedModel export: official numbers through a fresh, project-free process."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from electra_tf import checkpoints, saved_model, tokenization
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.modeling.encoder import build_discriminator_encoder
from electra_tf.pretrain.model import build_model
from tests.conftest import run_command

TOL = dict(atol=1e-4, rtol=1e-4)


def _export_cli(*argv):
  """python -m electra_tf.export ARGV, in this process (run_command)."""
  return run_command("electra_tf.commands.export", argv, "electra_tf.export")


@pytest.fixture(scope="module")
def official_export(tmp_path_factory, official_debug_fixture, bert_vocab):
  """The official debug checkpoint exported by the command with a copy of
  the BERT vocab, then moved elsewhere, that vocab deleted."""
  root = tmp_path_factory.mktemp("official_export")
  vocab = root / "vocab.txt"
  shutil.copy(bert_vocab, vocab)
  hparams = (official_debug_fixture / "config.json").read_text()
  hparams = json.dumps(json.loads(hparams)["hparams"])
  export_dir = root / "saved_model"
  run = _export_cli(f"--checkpoint={official_debug_fixture / 'model.ckpt'}",
                    f"--hparams={hparams}", f"--vocab_file={vocab}",
                    f"--export_dir={export_dir}")
  assert run.returncode == 0, run.stderr[-2000:]
  assert run.stdout.strip() == f"wrote {export_dir}"
  assert sorted(os.listdir(root)) == ["saved_model", "vocab.txt"]
  moved = root / "elsewhere" / "model"
  shutil.copytree(export_dir, moved)
  shutil.rmtree(export_dir)
  os.remove(vocab)
  return moved, hparams


# Runs in a fresh interpreter, outside the repository, without electra_tf.
LOADER = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # registers the ops of the text signature
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


def _project_free_env():
  # A user's own process: nothing of the project's, nor the commands' settings.
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TF_USE_LEGACY_KERAS")}
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  return env


@pytest.mark.slow
def test_export_matches_official_and_in_memory_model(
    official_debug_fixture, official_export, tmp_path):
  export_dir, hparams = official_export
  a = np.load(official_debug_fixture / "fixture.npz")
  np.savez(tmp_path / "inputs.npz", input_ids=a["discriminator_input_ids"],
           input_mask=a["input_mask"], segment_ids=a["segment_ids"])
  subprocess.run([sys.executable, "-c", LOADER, str(export_dir),
                  str(tmp_path / "inputs.npz"), str(tmp_path / "outputs.npz")],
                 cwd=tmp_path, env=_project_free_env(), check=True, timeout=300)
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
  saved_model.export_saved_model(encoder, str(export_dir))
  with pytest.raises(ValueError, match="--export_dir: .* already exists and is not empty"):
    saved_model.export_saved_model(encoder, str(export_dir))
  saved_model.export_saved_model(encoder, str(export_dir), overwrite=True)
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


# The part of a fresh-process loader both export tests share: the text
# signature on texts and the ids signature on the Python featurization.
TEXT_LOADER_HEAD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # registers the ops of the text signature
    export_dir, inputs_json, outputs_npz = sys.argv[1:4]
    signatures = tf.saved_model.load(export_dir).signatures
    inputs = json.load(open(inputs_json))
    text_out = signatures["text"](text=tf.constant(inputs["texts"]))
    ids_out = signatures["serving_default"](
        **{k: tf.constant(inputs[k], tf.int32) for k in ("input_ids", "input_mask", "segment_ids")})
    results = {f"text_{k}": v.numpy() for k, v in text_out.items()}
    results.update({f"ids_{k}": v.numpy() for k, v in ids_out.items()})
""")
TEXT_LOADER = TEXT_LOADER_HEAD + textwrap.dedent("""
    assert "electra_tf" not in sys.modules
    np.savez(outputs_npz, **results)
""")


@pytest.mark.slow
def test_text_signature_tokenizes_in_the_graph_without_the_project(
    official_export, bert_vocab, tmp_path):
  """Moved away from its vocab and loaded in a fresh process: the pieces of
  FullTokenizer, cut to max_seq_length (32), padded to the longest row; the
  logits of the ids signature on the Python featurization."""
  export_dir, _ = official_export
  texts = ["The quick brown fox jumps over the lazy dog.",
           "Crème Brûlée, ΟΔΟΣ and İstanbul: naïve café!", "",
           "a very long text " * 40, "中文 x\u00a0y"]
  tokenizer = tokenization.FullTokenizer(str(bert_vocab))
  tokens = [["[CLS]"] + tokenizer.tokenize(t)[:30] + ["[SEP]"] for t in texts]
  ids = [tokenizer.convert_tokens_to_ids(row) + [0] * (32 - len(row)) for row in tokens]
  (tmp_path / "inputs.json").write_text(json.dumps({
      "texts": texts, "input_ids": ids, "input_mask": [[int(i > 0) for i in row] for row in ids],
      "segment_ids": [[0] * 32 for _ in ids]}))
  subprocess.run([sys.executable, "-c", TEXT_LOADER, str(export_dir),
                  str(tmp_path / "inputs.json"), str(tmp_path / "out.npz")],
                 cwd=tmp_path, env=_project_free_env(), check=True, timeout=300)
  out = np.load(tmp_path / "out.npz", allow_pickle=True)  # strings: object arrays
  assert out["text_tokens"].shape == (5, 32)  # the long text fills max_seq_length
  assert [[t.decode() for t in row if t] for row in out["text_tokens"]] == tokens
  np.testing.assert_array_equal(out["text_input_mask"],
                                [[int(i > 0) for i in row] for row in ids])
  for key in ("discriminator_logits", "discriminator_probs", "sequence_output",
              "pooled_output"):
    np.testing.assert_allclose(out[f"text_{key}"], out[f"ids_{key}"], atol=1e-5)


def saved_model_cli(*args):
  """saved_model_cli, with tensorflow-text's ops registered (run needs them)."""
  return subprocess.run(
      [sys.executable, "-c", "import tensorflow_text; from tensorflow.python.tools."
       "saved_model_cli import main; main()", *args],
      capture_output=True, text=True, env=_project_free_env(), timeout=300)


@pytest.mark.slow
def test_saved_model_cli_lists_and_runs_the_text_signature(official_export):
  export_dir, _ = official_export
  # The tool beside the running interpreter (a venv need not be activated).
  tool = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
  show = subprocess.run([tool, "show", "--all", "--dir", str(export_dir)],
                        capture_output=True, text=True, env=_project_free_env(), timeout=300)
  assert show.returncode == 0, show.stderr[-2000:]
  assert "signature_def['serving_default']" in show.stdout
  assert "signature_def['text']" in show.stdout
  assert "inputs['text'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1)" in show.stdout
  run = saved_model_cli("run", "--dir", str(export_dir), "--tag_set", "serve",
                         "--signature_def", "text",
                         "--input_exprs", 'text=["the cat sat on the mat"]')
  assert run.returncode == 0, run.stderr[-2000:]
  assert ("Result for output key tokens:\n[[b'[CLS]' b'the' b'cat' b'sat' b'on' b'the' "
          "b'mat' b'[SEP]']]") in run.stdout
  assert "Result for output key discriminator_probs:" in run.stdout


@pytest.mark.slow
def test_exports_hold_no_python_functions(official_export):
  """Only TensorFlow and tensorflow-text ops: TensorFlow Serving can serve it."""
  ops = graph_ops(official_export[0])
  assert not ops & {"PyFunc", "PyFuncStateless", "EagerPyFunc"}
  assert {"FastWordpieceTokenizeWithOffsets", "NormalizeUTF8",
          "InitializeTableFromTextFileV2"} <= ops
  # each signature's graph traced once and stored once (not again as a saved attribute)
  traced = [function.signature.name.rsplit("_", 1)[0]
            for meta_graph in _saved_model_proto(official_export[0]).meta_graphs
            for function in meta_graph.graph_def.library.function
            if function.signature.name.startswith("__inference_serve")]
  assert sorted(traced) == ["__inference_serve", "__inference_serve_text"]


def _saved_model_proto(export_dir) -> saved_model_pb2.SavedModel:
  saved_model = saved_model_pb2.SavedModel()
  saved_model.ParseFromString((export_dir / "saved_model.pb").read_bytes())
  return saved_model


def graph_ops(export_dir) -> set:
  """The op types of every graph and function of a SavedModel."""
  ops = set()
  for meta_graph in _saved_model_proto(export_dir).meta_graphs:
    ops.update(node.op for node in meta_graph.graph_def.node)
    for function in meta_graph.graph_def.library.function:
      ops.update(node.op for node in function.node_def)
  return ops


def test_export_cli_errors_are_one_line(official_debug_fixture, bert_vocab, tmp_path):
  """In this process, as `python -m electra_tf.export` runs: a missing
  checkpoint, and a vocab whose size is not the checkpoint's embedding
  table's (the official checkpoint records no vocab beside it)."""
  run = run_command("electra_tf.commands.export", [
      f"--checkpoint={tmp_path / 'missing'}", f"--vocab_file={bert_vocab}",
      f"--export_dir={tmp_path / 'x'}"], "electra_tf.export")
  assert (run.returncode, run.stderr) == (2, (
      f"electra_tf.export: error: checkpoint {tmp_path / 'missing'}: not found "
      f"(no {tmp_path / 'missing'}.index and not a directory)\n"))
  small_vocab = tmp_path / "vocab.txt"
  small_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
  hparams = json.dumps(json.loads((official_debug_fixture / "config.json").read_text())["hparams"])
  for given in ([f"--hparams={hparams}"], []):  # vocab_size given, or from the vocab
    run = run_command("electra_tf.commands.export", [
        f"--checkpoint={official_debug_fixture / 'model.ckpt'}", *given,
        f"--vocab_file={small_vocab}", f"--export_dir={tmp_path / 'x'}"], "electra_tf.export")
    assert (run.returncode, run.stderr) == (2, (
        f"electra_tf.export: error: --vocab_file {small_vocab}: 6 entries, but the word "
        f"embedding table of {official_debug_fixture / 'model.ckpt'} "
        "(electra/embeddings/word_embeddings) has 30,522 rows, one per entry of the vocab "
        "it was trained with\n"))
  assert os.listdir(tmp_path) == ["vocab.txt"]
