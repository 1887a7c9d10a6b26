"""run_pretraining.py --export_dir from raw text: a tiny model pre-trained a
few steps by the command, its export moved away from the vocab and loaded in
a fresh process without the project; the text signature gives the pieces of
FullTokenizer and the outputs of the ids signature; bad inputs are defined."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from electra_tf import tokenization
from tests.test_export import TEXT_LOADER_HEAD, graph_ops
from tests.conftest import command_python, make_pretraining_data_dir

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HPARAMS = {  # a tiny ELECTRA (hidden 32, 1 layer), 2 steps
    "model_size": "small", "vocab_size": 30522, "embedding_size": 16,
    "model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 1},
    "generator_hidden_size": 0.5, "max_seq_length": 32, "train_batch_size": 8,
    "num_train_steps": 2, "num_warmup_steps": 1, "save_checkpoints_steps": 2,
    "log_every": 1}
PYTHON_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}


@pytest.fixture(scope="module")
def pretrained_export(tmp_path_factory, corpus_dir, bert_vocab):
  """The command's export of a 2-step tiny model, moved elsewhere, the data
  dir (and its vocab) deleted."""
  root = tmp_path_factory.mktemp("pretrain_text_export")
  data_dir = make_pretraining_data_dir(root / "data", corpus_dir, bert_vocab,
                                       num_lines=100, num_out_files=1)
  export_dir = root / "model" / "export"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONDONTWRITEBYTECODE="1")
  run = subprocess.run(
      [command_python(), "run_pretraining.py", f"--data_dir={data_dir}",
       f"--model_dir={root / 'model'}", f"--export_dir={export_dir}",
       "--hparams=" + json.dumps(HPARAMS)],
      cwd=REPO, env=env, text=True, capture_output=True, timeout=600)
  assert run.returncode == 0, run.stderr[-2000:]
  moved = root / "elsewhere" / "export"
  shutil.copytree(export_dir, moved)
  shutil.rmtree(root / "model")
  shutil.rmtree(data_dir)
  return moved


# A fresh interpreter, outside the repository, without electra_tf: the text
# signature on texts, the ids signature on the Python featurization, and the
# bad inputs, each case's outcome recorded (an error's type and message).
LOADER = TEXT_LOADER_HEAD + textwrap.dedent("""
    errors_json = sys.argv[4]
    for i, text in enumerate(inputs["texts"]):  # each row alone
      alone = signatures["text"](text=tf.constant([text]))
      results[f"alone_{i}"] = alone["discriminator_probs"].numpy()
    errors = {}
    for name, feed in (("not_utf8", [b"fine", b"caf\\xe9", b"\\xff"]),
                       ("empty_batch", [])):
      try:
        out = signatures["text"](text=tf.constant(feed, tf.string))
        errors[name] = ["ok", list(out["tokens"].shape)]
      except tf.errors.InvalidArgumentError as e:
        errors[name] = ["InvalidArgumentError", e.message]
    assert "electra_tf" not in sys.modules
    np.savez(outputs_npz, **results)
    json.dump(errors, open(errors_json, "w"))
""")


@pytest.mark.slow
def test_pretraining_export_text_signature(pretrained_export, bert_vocab, tmp_path):
  texts = ["The quick brown fox jumps over the lazy dog.", "",
           "Crème brûlée: ΟΔΟΣ, naïve café!", "word " * 20_000 + "end"]
  tokenizer = tokenization.FullTokenizer(str(bert_vocab))
  tokens = [["[CLS]"] + tokenizer.tokenize(t)[:30] + ["[SEP]"] for t in texts]
  width = max(map(len, tokens))
  ids = [tokenizer.convert_tokens_to_ids(row) + [0] * (width - len(row)) for row in tokens]
  (tmp_path / "inputs.json").write_text(json.dumps({
      "texts": texts, "input_ids": ids,
      "input_mask": [[1] * len(row) + [0] * (width - len(row)) for row in tokens],
      "segment_ids": [[0] * width for _ in ids]}))
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  subprocess.run([sys.executable, "-c", LOADER, str(pretrained_export),
                  str(tmp_path / "inputs.json"), str(tmp_path / "out.npz"),
                  str(tmp_path / "errors.json")],
                 cwd=tmp_path, env=env, check=True, timeout=600)
  out = np.load(tmp_path / "out.npz", allow_pickle=True)  # strings: object arrays
  # 100,000 characters are cut to max_seq_length (32); the batch is padded
  # to its longest row; "" is [CLS] [SEP].
  assert out["text_tokens"].shape == (4, 32)
  assert [[t.decode() for t in row if t] for row in out["text_tokens"]] == tokens
  assert tokens[1] == ["[CLS]", "[SEP]"]
  np.testing.assert_array_equal(out["text_input_mask"], out["text_tokens"] != b"")
  for key in ("discriminator_logits", "discriminator_probs", "sequence_output",
              "pooled_output"):
    np.testing.assert_allclose(out[f"text_{key}"], out[f"ids_{key}"], atol=1e-5)
  # Rows of very different lengths padded together: each as alone.
  for i, row in enumerate(tokens):
    np.testing.assert_allclose(out[f"alone_{i}"][0], out["text_discriminator_probs"][i,
                               :len(row)], atol=1e-5)
  errors = json.loads((tmp_path / "errors.json").read_text())
  assert errors["not_utf8"][0] == "InvalidArgumentError"
  assert "text: is not valid UTF-8 at rows] [1 2]" in errors["not_utf8"][1]
  assert errors["empty_batch"] == ["ok", [0, 2]]  # no rows: [CLS] [SEP] wide


@pytest.mark.slow
def test_pretraining_export_holds_the_vocab_and_no_python(pretrained_export, bert_vocab):
  assert (pretrained_export / "assets" / "vocab.txt").read_bytes() == bert_vocab.read_bytes()
  ops = graph_ops(pretrained_export)
  assert not ops & PYTHON_OPS
  assert {"FastWordpieceTokenizeWithOffsets", "InitializeTableFromTextFileV2"} <= ops
