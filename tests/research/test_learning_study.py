"""tools/research/learning_study.py end to end at toy size: results, figures, resume."""

import json
import os
import signal
import subprocess

import pytest

from electra_tf import stop_points
from tests.conftest import command_python, run_command, sigterm_stop
from tools.research import learning_analysis
from tools.research import learning_study

TINY_MODEL = {"embedding_size": 16, "train_batch_size": 8, "eval_batch_size": 8,
              "num_eval_steps": 2, "num_warmup_steps": 1, "iterations_per_loop": 2,
              "log_every": 2, "model_hparam_overrides": {
                  "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 1,
                  "intermediate_size": 32}}


def _study(*argv):
  """python -m tools.research.learning_study ARGV, run in this process (run_command):
  for the runs that stop before any TensorFlow work."""
  return run_command("tools.research.learning_study", argv, "learning_study.py")


def _study_process(repo_root, *argv):
  """python -m tools.research.learning_study ARGV in a process of its own: for the
  runs that pre-train (in this process, a tf.data iterator they leave
  behind hung its exit)."""
  return subprocess.run([command_python(), "-m", "tools.research.learning_study", *argv],
                        cwd=repo_root,
                        capture_output=True, text=True,
                        env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))


def _corpus(tmp_path, corpus_dir, train_lines, end_line):
  """tmp_path/corpus: train.txt (the first `train_lines` lines of WikiText-2's
  valid split) and heldout.txt (the lines after them up to `end_line`)."""
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  lines = (corpus_dir / "wikitext-2" / "wiki.valid.raw").read_text(
      encoding="utf-8").splitlines()
  (corpus / "train.txt").write_text("\n".join(lines[:train_lines]) + "\n", encoding="utf-8")
  (corpus / "heldout.txt").write_text("\n".join(lines[train_lines:end_line]) + "\n",
                                      encoding="utf-8")
  return corpus


def test_eval_point_beyond_the_schedule_is_a_one_line_error(tmp_path):
  run = _study(f"--work_dir={tmp_path / 'study'}", "--steps=10",
               "--eval_at=5,20", "--finetune_at=5")
  assert run.returncode != 0
  assert "--eval_at/--finetune_at: 20 is beyond --steps 10" in run.stderr.strip().splitlines()[-1]
  assert not (tmp_path / "study" / "results.json").exists()


@pytest.mark.slow
def test_study_pretrains_both_objectives_finetunes_and_resumes(
    repo_root, tmp_path, corpus_dir, bert_vocab, finetuning_data_dir):
  corpus = _corpus(tmp_path, corpus_dir, 400, 600)
  work_dir = tmp_path / "study"
  argv = [f"--work_dir={work_dir}", f"--corpus_dir={corpus}", "--heldout_file=heldout.txt",
          f"--vocab_file={bert_vocab}", f"--finetuning_data_dir={finetuning_data_dir}",
          "--hparams=" + json.dumps(TINY_MODEL), "--steps=4", "--eval_at=2,4",
          "--finetune_at=4", "--tasks=sst", "--train_examples=16", "--seeds=1",
          '--finetuning_hparams={"num_train_epochs": 1.0, "train_batch_size": 8}']
  run = _study_process(repo_root, *argv)
  assert run.returncode == 0, run.stderr[-3000:]
  results = json.loads((work_dir / "results.json").read_text())

  settings = results["settings"]
  assert settings["model"]["model_hparam_overrides"]["hidden_size"] == 16
  # The masked LM trains the FLOPs-equal number of steps: it skips the
  # generator, so each of its steps is cheaper and it gets more of them.
  mlm_steps = {int(k): v for k, v in settings["mlm_steps"].items()}
  assert settings["flops_ratio"] > 1 and mlm_steps[4] == round(4 * settings["flops_ratio"])
  electra, mlm = results["pretraining"]["electra"], results["pretraining"]["mlm"]
  assert sorted(electra["evals"], key=int) == ["2", "4"]
  assert sorted(mlm["evals"], key=int) == [str(mlm_steps[2]), str(mlm_steps[4])]
  assert electra["flops_per_step"] == pytest.approx(settings["flops_ratio"]
                                                    * mlm["flops_per_step"])
  final = electra["evals"]["4"]
  assert 0.0 <= final["disc_auc_real_tokens"] <= 1.0 and final["masked_lm_loss"] > 0
  assert "disc_auc_real_tokens" not in mlm["evals"][str(mlm_steps[4])]
  # Every evaluated encoder, and a random one, measured on the held-out text
  # (hidden 16: an effective rank in [1, 16]).
  for evals in [results["random_init_encoder"]] + list(electra["evals"].values()) + list(
      mlm["evals"].values()):
    assert 1.0 <= evals["encoder_effective_rank"] <= 16.0
    assert -1.0 <= evals["encoder_mean_cosine"] <= 1.0
  # The pre-training runs, for a reader's script: where each schedule ends.
  assert results["pretraining_runs"] == [
      {"objective": "electra", "seed": 0, "steps": 4, "checkpoint": "pretraining/electra/ckpt-4",
       "finetuned_checkpoints": ["pretraining/electra/ckpt-4"]},
      {"objective": "masked_lm", "seed": 0, "steps": mlm_steps[4],
       "checkpoint": f"pretraining/mlm/ckpt-{mlm_steps[4]}",
       "finetuned_checkpoints": [f"pretraining/mlm/ckpt-{mlm_steps[4]}"]}]
  sst = results["finetuning"]["sst"]
  assert set(sst) == {"random_init", "electra_4", f"mlm_{mlm_steps[4]}"}
  for summary in sst.values():
    assert summary["metric"] == "accuracy" and list(summary["runs"]) == ["1"]
    assert 0.0 <= summary["runs"]["1"] <= 100.0 and summary["mean"] == summary["runs"]["1"]
  against = sst["electra_4"]["against_random_init"]
  assert against["difference"] == pytest.approx(
      sst["electra_4"]["mean"] - sst["random_init"]["mean"]) and against["common_seeds"] == 1
  assert sst["electra_4"]["against_masked_lm"]["difference"] == pytest.approx(
      sst["electra_4"]["mean"] - sst[f"mlm_{mlm_steps[4]}"]["mean"])
  # The electra run fine-tuned from the step-4 checkpoint of the study's model.
  config = json.loads((work_dir / "finetuning" / "runs" / "sst_electra_4_seed1" /
                       "finetuning_config.json").read_text())
  assert config["init_checkpoint"].endswith("pretraining/electra/ckpt-4")
  assert config["model_hparam_overrides"]["hidden_size"] == 16
  for figure in ("pretraining.png", "downstream.png"):
    assert (work_dir / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

  # A second fine-tuning setting over the same checkpoints, under its own name:
  # 8 labelled examples, the checkpoints only (--norandom_init); the first
  # setting's runs and figure are kept. It adds the masked LM matched on
  # arithmetic (the embedding lookups not counted): it pre-trains that alone.
  before = {path: path.stat().st_mtime_ns for path in work_dir.rglob("ckpt-*.index")}
  few = [a for a in argv if not a.startswith("--train_examples")] + [
      "--train_examples=8", "--finetuning_name=few", "--norandom_init"]
  run = _study_process(repo_root, *few, "--arithmetic_masked_lm")
  assert run.returncode == 0, run.stderr[-3000:]
  both = json.loads((work_dir / "results.json").read_text())
  assert both["finetuning"] == results["finetuning"]
  counted = learning_analysis.flops_both_ways(settings["model"], settings["vocab_size"])
  ratio = both["settings"]["arithmetic_flops_ratio"]
  assert ratio == pytest.approx(counted["ratio_without_lookups"]) and 1 < ratio < (
      settings["flops_ratio"])
  arithmetic = {int(k): v for k, v in both["settings"]["arithmetic_mlm_steps"].items()}
  assert arithmetic == {step: round(step * ratio) for step in (2, 4)}
  assert sorted(both["pretraining"]["mlm_arithmetic"]["evals"], key=int) == [
      str(arithmetic[2]), str(arithmetic[4])]
  assert both["pretraining_runs"] == results["pretraining_runs"] + [
      {"objective": "masked_lm_arithmetic", "seed": 0, "steps": arithmetic[4],
       "checkpoint": f"pretraining/mlm_arithmetic/ckpt-{arithmetic[4]}",
       "finetuned_checkpoints": [f"pretraining/mlm_arithmetic/ckpt-{arithmetic[4]}"]}]
  assert set(both["finetuning_few"]["sst"]) == {"electra_4", f"mlm_{mlm_steps[4]}",
                                                f"mlm_arithmetic_{arithmetic[4]}"}
  assert both["finetuning_settings"]["finetuning_few"]["train_examples"] == 8
  assert both["finetuning_settings"]["finetuning"]["train_examples"] == 16
  train = (work_dir / "finetuning_few" / "data" / "finetuning_data" / "sst" / "train.tsv")
  assert len(train.read_text(encoding="utf-8").splitlines()) == 1 + 8  # header + 8
  assert (work_dir / "finetuning_few" / "runs" / "sst_electra_4_seed1").is_dir()
  assert not (work_dir / "finetuning_few" / "runs" / "sst_random_init_seed1").exists()
  assert (work_dir / "downstream_few.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  # Nothing pre-trained again, and the first setting's runs untouched.
  after = {path: path.stat().st_mtime_ns for path in work_dir.rglob("ckpt-*.index")}
  assert {path: mtime for path, mtime in after.items() if "finetuning_few" not in path.parts
          and "mlm_arithmetic" not in path.parts} == before

  # Rerun without the flag: the work_dir keeps its arithmetic arm; everything is
  # done, so nothing trains again and the results stay.
  rerun = _study_process(repo_root, *few)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert json.loads((work_dir / "results.json").read_text()) == both
  assert {path: path.stat().st_mtime_ns for path in work_dir.rglob("ckpt-*.index")} == after


@pytest.mark.slow
def test_task_text_writes_each_training_text_once_without_labels(tmp_path, capsys):
  data = tmp_path / "finetuning_data"
  (data / "sst").mkdir(parents=True)
  (data / "sst" / "train.tsv").write_text(
      "sentence\tlabel\na gripping , funny film \t1\n"
      + "".join(f"dull scene number {i} \t0\n" for i in range(60)), encoding="utf-8")
  (data / "chunk").mkdir()
  (data / "chunk" / "train.txt").write_text(
      "He PRP B-NP\nran VBD B-VP\n. . O\n\nShe PRP B-NP\nsat VBD B-VP\n\n", encoding="utf-8")
  sst_path = learning_study.write_task_text("sst", str(data), tmp_path / "out")
  chunk_path = learning_study.write_task_text("chunk", str(data), tmp_path / "out")
  assert "sst: 61 training texts added" in capsys.readouterr().out
  documents = open(sst_path, encoding="utf-8").read().rstrip("\n").split("\n\n")
  # 61 texts, labels and header dropped, in documents of 50 lines.
  assert [len(d.split("\n")) for d in documents] == [50, 11]
  assert documents[0].split("\n")[:2] == ["a gripping , funny film", "dull scene number 0"]
  assert open(chunk_path, encoding="utf-8").read() == "He ran .\nShe sat\n"


def test_fine_tuning_summaries_compare_each_start_with_random_init():
  starts = {"random_init": {"runs": {"1": 36.0, "2": 38.5, "3": 36.5}},
            "electra_4": {"runs": {"1": 37.0, "2": 38.0, "3": 39.0}},
            "mlm_6": {"runs": {"1": 40.0}},
            "mlm_9": {"runs": {"1": 37.0, "2": 37.0, "4": 37.0}}}
  learning_study.summarise_starts(starts, {"electra_4": "mlm_9", "electra_2": "mlm_3"})
  summary = starts
  assert "against_random_init" not in summary["random_init"]
  assert summary["random_init"]["mean"] == pytest.approx(37.0)
  assert summary["random_init"]["std"] == pytest.approx(1.75 ** 0.5)  # sample variance 3.5 / 2
  electra = summary["electra_4"]
  assert electra["mean"] == pytest.approx(38.0) and electra["std"] == pytest.approx(1.0)
  # Higher on seeds 1 and 3, lower on 2; t = 1 / sqrt(1 / 3 + 1.75 / 3).
  assert electra["against_random_init"] == pytest.approx(
      {"difference": 1.0, "common_seeds": 3, "higher_on_seeds": 2,
       "welch_t": 1.0 / (2.75 / 3) ** 0.5})
  # ELECTRA against its FLOPs-equal masked LM: mean 38 against 37; seeds 1 and 2
  # paired, higher on seed 2 only (seed 1 ties at 37); t = 1 / sqrt(1 / 3 + 0 / 3).
  assert electra["against_masked_lm"] == pytest.approx(
      {"difference": 1.0, "common_seeds": 2, "higher_on_seeds": 1,
       "welch_t": 1.0 / (1.0 / 3) ** 0.5})
  assert "against_masked_lm" not in summary["mlm_9"]
  # One run: a difference and a seed count, but no t; std 0.
  single = summary["mlm_6"]
  assert single["std"] == 0.0 and single["against_random_init"] == pytest.approx(
      {"difference": 3.0, "common_seeds": 1, "higher_on_seeds": 1, "welch_t": None})
  # Only the seeds both starts ran are paired (seed 4 is this start's alone).
  assert summary["mlm_9"]["against_random_init"]["common_seeds"] == 2
  assert summary["mlm_9"]["against_random_init"]["higher_on_seeds"] == 1
  # No spread on either side: no t rather than a division by zero.
  assert learning_study.compare_runs({"1": 2.0, "2": 2.0}, {"1": 1.0, "2": 1.0}) == {
      "difference": 1.0, "common_seeds": 2, "higher_on_seeds": 2, "welch_t": None}


def test_task_text_of_a_question_answering_task_is_a_one_line_error(tmp_path):
  run = _study(f"--work_dir={tmp_path / 'study'}", "--steps=10", "--eval_at=5",
               "--finetune_at=5", "--task_text=sst,squad")
  assert run.returncode != 0
  assert ("--task_text: squad is not a classification or tagging task"
          in run.stderr.strip().splitlines()[-1])
  assert not (tmp_path / "study" / "data").exists()


@pytest.mark.parametrize("extra, message", [
    (["--train_examples=100"],
     "--train_examples/--finetuning_hparams: the runs in finetuning/ began with "
     "--train_examples=1000 and --finetuning_hparams='{\"learning_rate\": 0.0003}'; "
     "give this setting its own --finetuning_name"),
    (["--train_examples=1000", '--finetuning_hparams={"learning_rate": 1e-3}'],
     "--train_examples/--finetuning_hparams: the runs in finetuning/ began with"),
    (["--train_examples=1000", "--finetuning_name=a/b"],
     "--finetuning_name: 'a/b' is not a folder name"),
])
def test_other_finetuning_setting_in_the_same_work_dir_is_a_one_line_error(
    tmp_path, extra, message):
  # Resuming runs that began with other examples or hparams would report
  # their numbers under the new flags: refused before any work.
  work_dir = tmp_path / "study"
  work_dir.mkdir()
  recorded = {"finetuning_settings": {"finetuning": {
      "train_examples": 1000, "finetuning_hparams": {"learning_rate": 3e-4}}}}
  (work_dir / "results.json").write_text(json.dumps(recorded))
  run = _study(f"--work_dir={work_dir}", "--steps=10", "--eval_at=5",
               "--finetune_at=5", '--finetuning_hparams={"learning_rate": 3e-4}', *extra)
  assert run.returncode != 0
  assert message in run.stderr.strip().splitlines()[-1]
  assert json.loads((work_dir / "results.json").read_text()) == recorded
  assert sorted(p.name for p in work_dir.iterdir()) == ["results.json"]


def test_work_dir_from_before_named_settings_is_checked_against_its_settings(tmp_path):
  # results.json written before settings were recorded per name kept the one
  # setting in "settings": it still guards the runs in finetuning/.
  work_dir = tmp_path / "study"
  work_dir.mkdir()
  recorded = {"settings": {"train_examples": 1000,
                           "finetuning_hparams": '{"num_train_epochs": 10.0}'},
              "finetuning": {"sst": {}}}
  (work_dir / "results.json").write_text(json.dumps(recorded))
  run = _study(f"--work_dir={work_dir}", "--steps=10", "--eval_at=5",
               "--finetune_at=5", "--train_examples=1000",
               '--finetuning_hparams={"num_train_epochs": 30.0}')
  assert run.returncode != 0
  assert ("""began with --train_examples=1000 and --finetuning_hparams='{"num_train_epochs": 10.0}'"""
          in run.stderr.strip().splitlines()[-1])


@pytest.mark.slow
def test_sigterm_during_pretraining_saves_and_exits_with_one_line(
    repo_root, tmp_path, corpus_dir, bert_vocab):
  corpus = _corpus(tmp_path, corpus_dir, 200, 300)
  work_dir = tmp_path / "study"
  env = dict(os.environ, CUDA_VISIBLE_DEVICES="", **stop_points.environment("step_logged", 1))
  # Frozen when step 2 is logged; the SIGTERM arrives while frozen and is
  # seen at the first boundary after its handler has run: step 2, or 4 when a
  # TensorFlow thread took the signal and waited for a core
  # (tests/test_reliability.py).
  process = subprocess.Popen(
      [command_python(), "-m", "tools.research.learning_study", f"--work_dir={work_dir}",
       f"--corpus_dir={corpus}", "--heldout_file=heldout.txt", f"--vocab_file={bert_vocab}",
       "--hparams=" + json.dumps(TINY_MODEL), "--steps=6", "--eval_at=4,6",
       "--finetune_at=6", "--tasks=sst"],
      cwd=repo_root, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  try:
    assert stop_points.wait_until_stopped(process), process.communicate()[1][-2000:]
    process.send_signal(signal.SIGTERM)
    process.send_signal(signal.SIGCONT)
    _, stderr = process.communicate(timeout=600)  # it exits: no thread holds it
  finally:
    process.kill()
  assert process.returncode == 143, stderr[-2000:]
  step, named = sigterm_stop(stderr, "learning_study.py")
  checkpoint = work_dir / "pretraining" / "electra" / f"ckpt-{step}"
  assert step in (2, 4) and named == str(checkpoint)
  assert checkpoint.with_suffix(".index").exists()
