"""A model_dir is a contract: a run's life walked as a user walks it.

Build a vocab and records, train with the architecture typed once, extend by
steps alone, evaluate, export, convert and fine-tune, each from the model_dir
alone with nothing retyped; at each step the schedule and the provenance are
asserted.  Where two artifacts meet wrongly (records of another vocab, a
changed batch on resume, a damaged checkpoint) the command stops in one line
before any work, or (a damaged newest checkpoint in training) resumes from
the newest intact one with a warning.  Every command runs in this process
(tests/conftest.py's run_command), as its entry point would.
"""

import json
import re

import numpy as np
import pytest

from electra_tf import optimization
from tests.conftest import error_line, run_command

PROGRAMS = {"pretrain": "run_pretraining.py", "finetune": "run_finetuning.py",
            "build_vocab": "build_vocab.py", "build_tfrecords": "build_tfrecords.py",
            "export": "electra_tf.export", "convert": "electra_tf.convert"}

# A tiny architecture, typed once (the first run); no max_seq_length: it
# comes from the records.
ARCHITECTURE = {"model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 1},
                "embedding_size": 16, "generator_hidden_size": 0.5}
SCHEDULE = {"train_batch_size": 4, "num_train_steps": 6, "num_warmup_steps": 2,
            "learning_rate": 1e-3, "save_checkpoints_steps": 3, "log_every": 1,
            "eval_batch_size": 4, "num_eval_steps": 2, "iterations_per_loop": 3}
LENGTH = 48


def run(name, argv):
  """The command electra_tf/commands/<name>.py, in this process."""
  return run_command(f"electra_tf.commands.{name}", argv, PROGRAMS[name])


def _ok(result):
  assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
  return result.stdout


def _snapshot(root):
  return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
          if p.is_file()}


def _logged_rates(stdout):
  """{step: lr} of the progress lines."""
  return {int(m.group(1)): float(m.group(2))
          for m in re.finditer(r"^step (\d+)/\d+ .* - lr ([0-9.e+-]+)$", stdout, re.M)}


def _runs(model_dir):
  return json.loads((model_dir / "training_runs.json").read_text())["runs"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, corpus_dir):
  """Two vocabs of the same text (A: 900 entries at most, B: 400) and
  records: A's training and held-out records, and B's training records."""
  root = tmp_path_factory.mktemp("contract")
  lines = (corpus_dir / "wikitext-2" / "wiki.valid.raw").read_text(
      encoding="utf-8").splitlines()
  for name, part in (("train", lines[:160]), ("held_out", lines[160:220])):
    (root / name).mkdir()
    (root / name / "text.txt").write_text("\n".join(part) + "\n", encoding="utf-8")
  for vocab, size in (("A", 900), ("B", 400)):
    _ok(run("build_vocab", [f"--corpus_dir={root / 'train'}",
                                    f"--vocab_size={size}",
                                    f"--output_file={root / vocab / 'vocab.txt'}"]))
  for vocab, part in (("A", "train"), ("A", "held_out"), ("B", "train")):
    _ok(run("build_tfrecords", [
        f"--corpus_dir={root / part}", f"--vocab_file={root / vocab / 'vocab.txt'}",
        f"--output_dir={root / vocab / part}", f"--max_seq_length={LENGTH}",
        "--num_out_files=1", "--seed=1"]))
  return root


@pytest.fixture(scope="module")
def trained(inputs, tmp_path_factory):
  """The first run: vocab A's records, architecture and schedule typed once."""
  model_dir = tmp_path_factory.mktemp("run") / "model"
  out = _ok(run("pretrain", [
      f"--pretrain_tfrecords={inputs / 'A' / 'train' / '*'}",
      f"--vocab_file={inputs / 'A' / 'vocab.txt'}", f"--model_dir={model_dir}",
      "--hparams=" + json.dumps({**ARCHITECTURE, **SCHEDULE,
                                 "eval_tfrecords": str(inputs / "A" / "held_out" / "*")})]))
  return model_dir, out


@pytest.mark.slow
def test_first_run_takes_the_length_from_the_records(trained):
  model_dir, out = trained
  assert f"max_seq_length: {LENGTH}, the length of the records" in out
  (run,) = _runs(model_dir)
  assert run["hparams"]["max_seq_length"] == LENGTH
  assert run["hparams"]["max_predictions_per_seq"] == int((0.15 + 0.005) * LENGTH)


@pytest.mark.slow
def test_records_of_another_vocab_are_refused_before_any_work(inputs, tmp_path):
  # B's records with A's vocab, and A's records with B's (ids beyond its table).
  for records, vocab in (("B", "A"), ("A", "B")):
    model_dir = tmp_path / f"records_{records}_vocab_{vocab}"
    result = run("pretrain", [
        f"--pretrain_tfrecords={inputs / records / 'train' / '*'}",
        f"--vocab_file={inputs / vocab / 'vocab.txt'}", f"--model_dir={model_dir}",
        "--hparams=" + json.dumps({**ARCHITECTURE, **SCHEDULE})])
    line = error_line(result)
    assert line.startswith("run_pretraining.py: error: pretrain_tfrecords ")
    assert "built with another vocab than" in line and f"{vocab}/vocab.txt" in line, line
    assert not model_dir.exists()


@pytest.mark.slow
def test_an_extension_by_steps_alone_keeps_the_schedule(trained):
  model_dir, _ = trained
  out = _ok(run("pretrain", [f"--model_dir={model_dir}", "--num_train_steps=9"]))
  assert f"Continuing the run recorded in {model_dir / 'training_runs.json'}" in out
  assert "  num_train_steps: 9 (recorded: 6)" in out
  assert "Restored the input position of step 6" in out and "Skipping" not in out
  first, second = _runs(model_dir)
  assert second["from_step"] == 6
  changed = {k for k in first["hparams"] if first["hparams"][k] != second["hparams"][k]}
  assert changed == {"num_train_steps", "vocab_file"}, changed
  assert second["hparams"]["vocab_file"] == str(model_dir / "vocab.txt")  # the kept copy
  for key in ("train_batch_size", "num_warmup_steps", "learning_rate", "max_seq_length",
              "mask_prob", "eval_tfrecords", "pretrain_tfrecords", "vocab_size"):
    assert second["hparams"][key] == first["hparams"][key], key
  # The recorded schedule's formula with the new total.
  rates = _logged_rates(out)
  assert sorted(rates) == [7, 8, 9]
  expected = [float(optimization.learning_rate_at(step, 1e-3, 9, 2)) for step in (7, 8, 9)]
  np.testing.assert_allclose([rates[s] for s in (7, 8, 9)], expected, rtol=2e-3, atol=1e-9)


@pytest.mark.slow
def test_a_resume_that_changes_the_batch_or_length_is_refused(trained):
  model_dir, _ = trained
  before = _snapshot(model_dir)
  for change, name in (({"train_batch_size": 8}, "train_batch_size"),
                       ({"seed": 3}, "seed")):
    result = run("pretrain", [f"--model_dir={model_dir}", "--num_train_steps=12",
                                      "--hparams=" + json.dumps(change)])
    line = error_line(result)
    assert line.startswith(f"run_pretraining.py: error: hparam {name}: "), line
    assert f"--init_checkpoint={model_dir}" in line
  assert _snapshot(model_dir) == before


@pytest.mark.slow
def test_an_evaluation_needs_nothing_retyped_and_says_what_it_measured(trained, inputs):
  model_dir, _ = trained
  out = _ok(run("pretrain", [f"--model_dir={model_dir}", "--do_eval"]))
  assert "TRAINING records" not in out
  results = json.loads((model_dir / "results" / "unsup_results.json").read_text())
  assert results["held_out"] is True
  assert results["eval_records"]["pattern"] == str(inputs / "A" / "held_out" / "*")
  assert results["eval_records"]["files"] == 1
  build_record = str(inputs / "A" / "held_out" / ".pretrain_data.build.json")
  assert list(results["eval_records"]["build_records"]) == [build_record]
  assert results["checkpoint"] == str(model_dir / f"ckpt-{results['global_step']}")
  assert results["eval_examples"] == 2 * 4
  # On the training records: said so, and kept beside the first in the history.
  out = _ok(run("pretrain", [
      f"--model_dir={model_dir}", "--do_eval",
      "--hparams=" + json.dumps({"eval_tfrecords": str(inputs / "A" / "train" / "*")})]))
  assert "the TRAINING records" in out
  history = json.loads((model_dir / "results" / "eval_history.json").read_text())
  assert [e["held_out"] for e in history["evaluations"]][-2:] == [True, False]
  official = (model_dir / "results" / "unsup_results.txt").read_text()
  assert f"global_step = {results['global_step']}\n" in official
  assert "eval_records" not in official  # the official file keeps its keys


@pytest.mark.slow
def test_export_convert_and_finetune_read_the_model_dir(trained, inputs, tmp_path,
                                                        finetuning_data_dir):
  model_dir, _ = trained
  export_dir = tmp_path / "export"
  _ok(run("export", [f"--checkpoint={model_dir}", f"--export_dir={export_dir}"]))
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  text = tf.saved_model.load(str(export_dir)).signatures["text"]
  tokens = text(text=tf.constant([" ".join(["the"] * 200)]))["tokens"]
  assert tokens.shape[1] == LENGTH  # the run's max_seq_length, not the default 128
  # Another vocab than the checkpoint's: one line, nothing written.
  result = run("export", [f"--checkpoint={model_dir}", f"--export_dir={tmp_path / 'e2'}",
                                  f"--vocab_file={inputs / 'B' / 'vocab.txt'}"])
  assert f"not the vocab {model_dir} was trained with" in error_line(result)
  assert not (tmp_path / "e2").exists()
  hf_dir = tmp_path / "hf"
  _ok(run("convert", [f"--to_hf={hf_dir}", f"--checkpoint={model_dir}"]))
  card = (hf_dir / "discriminator" / "README.md").read_text()
  results = json.loads((model_dir / "results" / "unsup_results.json").read_text())
  place = "held-out" if results["held_out"] else "the training"
  assert f"## Evaluation on {place} records (unsup_results.json)" in card
  assert f"checkpoint `{results['checkpoint']}`" in card
  tuned = tmp_path / "tuned"
  _ok(run("finetune", [
      f"--data_dir={finetuning_data_dir.parent}", f"--init_checkpoint={model_dir}",
      f"--model_dir={tuned}", "--hparams=" + json.dumps(
          {"task_names": ["mrpc"], "max_seq_length": 32, "train_batch_size": 16,
           "num_train_epochs": 1.0, "use_tfrecords_if_existing": False})]))
  record = json.loads((tuned / "finetuning_config.json").read_text())
  assert record["model_hparam_overrides"]["hidden_size"] == 32
  assert record["embedding_size"] == 16
  assert (tuned / "vocab.txt").read_bytes() == (inputs / "A" / "vocab.txt").read_bytes()


@pytest.mark.slow
def test_a_damaged_newest_checkpoint(trained, tmp_path):
  """Read-only commands refuse it naming the newest intact one; training
  resumes from that one with a warning and keeps the damaged files."""
  import shutil  # pylint: disable=g-import-not-at-top
  model_dir = tmp_path / "model"
  shutil.copytree(trained[0], model_dir)
  state = (model_dir / "checkpoint").read_text().replace(str(trained[0]), str(model_dir))
  (model_dir / "checkpoint").write_text(state)
  newest = max(int(p.name[5:-6]) for p in model_dir.glob("ckpt-*.index"))
  older = sorted(int(p.name[5:-6]) for p in model_dir.glob("ckpt-*.index"))[-2]
  data = model_dir / f"ckpt-{newest}.data-00000-of-00001"
  data.write_bytes(data.read_bytes()[:len(data.read_bytes()) // 2])  # cut short
  result = run("export", [f"--checkpoint={model_dir}",
                                  f"--export_dir={tmp_path / 'e'}"])
  line = error_line(result)
  assert f"checkpoint {model_dir}/ckpt-{newest} is damaged" in line, line
  assert f"the newest intact one is {model_dir}/ckpt-{older}" in line, line
  out = _ok(run("pretrain", [f"--model_dir={model_dir}",
                                     f"--num_train_steps={newest + 1}"]))
  assert f"WARNING: checkpoint {model_dir}/ckpt-{newest} is damaged" in out
  assert f"Resumed from {model_dir}/ckpt-{older} at step {older}" in out
  assert (model_dir / f"ckpt-{newest}.data-00000-of-00001.damaged").exists()
  assert (model_dir / f"ckpt-{newest + 1}.index").exists()
