"""tools/research/representation_probe.py: the spread statistics, the probe against
scikit-learn's logistic regression, and the tool end to end on the official
debug checkpoint."""

import json
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

from tests.conftest import command_python, make_pretraining_data_dir
from tools.research import representation_probe as probe_lib

DEBUG_MODEL = {"model_size": "small", "embedding_size": 16, "generator_hidden_size": 0.5,
               "max_seq_length": 32, "model_hparam_overrides": {
                   "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}}


def test_spread_statistics_of_an_offset_cloud():
  # Isotropic noise in 8 of 16 dimensions plus a common offset of norm 3:
  # uncentered vectors share the offset's direction, centered ones do not.
  rng = np.random.default_rng(0)
  noise = np.zeros((20000, 16))
  noise[:, :8] = rng.normal(size=(20000, 8))
  offset = np.zeros(16)
  offset[10] = 3.0
  stats = probe_lib.spread_statistics(noise + offset)
  assert stats["mean_share"] == pytest.approx(9 / (9 + 8), abs=0.01)
  # cos(x, y) for x, y = offset + noise: about 9 / (9 + 8) once norms concentrate.
  assert stats["uncentered_mean_cosine"] == pytest.approx(9 / 17, abs=0.03)
  assert abs(stats["centered_mean_cosine"]) < 0.01
  assert stats["effective_rank"] == pytest.approx(8, abs=0.1)
  assert stats["top_direction_share"] == pytest.approx(1 / 8, abs=0.01)
  # One line: rank 1, every centered vector parallel or antiparallel.
  line = np.outer(rng.normal(size=500), rng.normal(size=4))
  assert probe_lib.spread_statistics(line)["effective_rank"] == pytest.approx(1, abs=1e-6)
  assert probe_lib.spread_statistics(line)["top_direction_share"] == pytest.approx(1)


def test_softmax_regression_matches_scikit_learn():
  linear_model = pytest.importorskip("sklearn.linear_model", reason="scikit-learn (test extra)")
  rng = np.random.default_rng(1)
  features = rng.normal(size=(300, 5))
  labels = np.argmax(features[:, :3] @ rng.normal(size=(3, 3)) + rng.normal(size=(300, 3)), 1)
  l2 = 0.05
  weights, bias = probe_lib.fit_softmax_regression(features, labels, 3, l2)
  reference = linear_model.LogisticRegression(C=1 / (len(features) * l2), tol=1e-10,
                                              max_iter=10000).fit(features, labels)
  ours = np.exp(features @ weights + bias)
  ours /= ours.sum(1, keepdims=True)
  np.testing.assert_allclose(ours, reference.predict_proba(features), atol=1e-5)
  np.testing.assert_allclose(weights.T, reference.coef_, atol=1e-4)


def test_probe_penalty_is_chosen_on_held_out_training_examples_only():
  rng = np.random.default_rng(2)
  train = rng.normal(size=(400, 6))
  labels = (train[:, 0] + 0.5 * rng.normal(size=400) > 0).astype(int)
  dev = rng.normal(size=(200, 6))
  accuracy = lambda gold, predicted: float(np.mean(np.asarray(gold) == predicted))
  first = probe_lib.linear_probe(train, labels, dev, 2, accuracy)
  # Another dev set (its labels are never given) changes nothing in the choice.
  second = probe_lib.linear_probe(train, labels, -dev, 2, accuracy)
  assert first["l2"] == second["l2"] and first["selection"] == second["selection"]
  assert set(first["selection"]) == {str(l2) for l2 in probe_lib.PROBE_L2}
  best = max(first["selection"].values())
  assert first["selection"][str(first["l2"])] == best
  assert not [l2 for l2 in probe_lib.PROBE_L2
              if l2 > first["l2"] and first["selection"][str(l2)] == best]
  # The probe reads the informative feature: dev predictions follow its sign.
  assert np.mean(first["predictions"] == (dev[:, 0] > 0)) > 0.9


def test_analysis_takes_the_pretraining_run_as_the_unit(finetuning_data_dir):
  from scipy import stats  # pylint: disable=g-import-not-at-top
  from tools.research import learning_analysis as la  # pylint: disable=g-import-not-at-top
  sst = {"random_init": [55.0, 56.0], "electra": [60.0, 58.0, 59.0], "masked_lm": [57.0, 57.5]}

  def start(objective, score):
    stats_ = dict.fromkeys(la.REPRESENTATION_STATS, 0.5)
    layer = {"probe": {"sst": {"dev": score}, "cola": {"dev": 1.0}, "chunk": {"dev": 30.0}},
             "statistics": {"heldout": stats_}}
    return {"objective": objective, "layers": {"0": layer, "1": layer}}
  results = {"settings": {"probe_train_examples": 100}, "starts": {
      f"{objective}_seed{i}": start(objective, score)
      for objective, scores in sst.items() for i, score in enumerate(scores)}}
  analysis = la.analyse_representations(results, finetuning_data_dir)
  assert analysis["probe"]["1"]["sst"]["electra"] == {"mean": 59.0, "sd": 1.0, "n": 3}
  against = {(c["task"], c["start"], c["against"]): c for c in analysis["comparisons"]}
  assert against[("sst", "electra", "random_init")]["welch_t"] == pytest.approx(
      stats.ttest_ind(sst["electra"], sst["random_init"], equal_var=False).statistic)
  # cola and chunk have no spread: no test, so the family is sst's 3 comparisons.
  assert analysis["family_size"] == 3
  assert la.holm([c["p"] for c in analysis["comparisons"]]) == [
      c["p_holm"] for c in analysis["comparisons"]]
  assert analysis["baselines"]["sst"] == la.trivial_baselines("sst", 100, finetuning_data_dir)
  table = la.representation_tables(analysis)
  assert "| 1 | 55.5 ± 0.7 | 59.0 ± 1.0 | 57.2 ± 0.4 |" in table
  assert "| held-out text, ELECTRA | 0.50 ± 0.00 | 0.50 ± 0.00 | 0.50 ± 0.00 | 0.5 ± 0.0 |" in table


def _tiny_task_data(source: pathlib.Path, target: pathlib.Path) -> None:
  for task, suffix in (("sst", "tsv"), ("cola", "tsv"), ("chunk", "txt")):
    (target / task).mkdir(parents=True)
    for split, count in (("train", 40), ("dev", 24)):
      text = (source / task / f"{split}.{suffix}").read_text(encoding="utf-8")
      if task == "chunk":
        text = "\n\n".join(text.strip("\n").split("\n\n")[:count]) + "\n\n"
      else:
        lines = text.splitlines(keepends=True)
        text = "".join(lines[:count + (task == "sst")])
      (target / task / f"{split}.{suffix}").write_text(text, encoding="utf-8")


def _run(repo_root, *argv):
  return subprocess.run([command_python(), "-m", "tools.research.representation_probe", *argv],
                        cwd=repo_root, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_probe_tool_end_to_end_resumes_and_refuses_bad_input(
    repo_root, tmp_path, official_debug_fixture, bert_vocab, corpus_dir, finetuning_data_dir):
  study = tmp_path / "study"
  data = make_pretraining_data_dir(tmp_path / "records", corpus_dir, bert_vocab, 60, 1)
  (study / "data").mkdir(parents=True)
  shutil.copytree(data / "pretrain_tfrecords", study / "data" / "heldout_tfrecords")
  checkpoint = str(official_debug_fixture / "model.ckpt")
  (study / "results.json").write_text(json.dumps({
      "settings": {"model": DEBUG_MODEL, "vocab_file": str(bert_vocab), "vocab_size": 30522},
      "pretraining_runs": [{"objective": "electra", "seed": 0, "steps": 0,
                            "checkpoint": checkpoint}]}))
  _tiny_task_data(finetuning_data_dir, tmp_path / "tasks")
  argv = [f"--output_dir={tmp_path / 'out'}", f"--study_dirs={study}",
          "--random_init_seeds=1,2", f"--finetuning_data_dir={tmp_path / 'tasks'}",
          "--probe_train_examples=40", "--max_tokens=500"]
  run = _run(repo_root, *argv)
  assert run.returncode == 0, run.stderr[-3000:]
  results = json.loads((tmp_path / "out" / "results.json").read_text())
  # The tool records resolved paths (../shared may be a symlink).
  assert results["pretraining_runs"] == [{
      "objective": "electra", "seed": 0, "steps": 0,
      "checkpoint": str(pathlib.Path(checkpoint).resolve()), "study_dir": str(study.resolve())}]
  assert sorted(results["starts"]) == ["electra_seed0", "random_init_seed1", "random_init_seed2"]
  for start in results["starts"].values():
    assert sorted(start["layers"]) == ["0", "1", "2"]  # embeddings, 2 transformer layers
    for entry in start["layers"].values():
      assert sorted(entry["statistics"]) == ["chunk_dev", "cola_dev", "heldout", "sst_dev"]
      for stats in entry["statistics"].values():
        assert -1 <= stats["uncentered_mean_cosine"] <= 1
        assert 1 <= stats["effective_rank"] <= 64
      assert 0 <= entry["probe"]["sst"]["dev"] <= 100
      assert -100 <= entry["probe"]["cola"]["dev"] <= 100
      assert 0 <= entry["probe"]["chunk"]["dev"] <= 100
  # Two random initialisations differ; the official checkpoint is not one of them.
  layers = {name: s["layers"]["2"]["statistics"]["heldout"]["effective_rank"]
            for name, s in results["starts"].items()}
  assert len(set(layers.values())) == 3
  # One ELECTRA run: differences against random initialisation, no tests.
  assert results["analysis"]["family_size"] == 0
  assert {(c["task"], c["start"], c["p"]) for c in results["analysis"]["comparisons"]} == {
      (task, "electra", None) for task in ("sst", "cola", "chunk")}
  assert results["analysis"]["probe"]["2"]["sst"]["random_init"]["n"] == 2
  assert (tmp_path / "out" / "probe.png").stat().st_size > 10000
  # A rerun measures nothing again.
  before = (tmp_path / "out" / "results.json").read_text()
  rerun = _run(repo_root, *argv)
  assert rerun.returncode == 0 and "final layer probes" not in rerun.stdout
  assert json.loads((tmp_path / "out" / "results.json").read_text())["starts"] == json.loads(
      before)["starts"]
  # Bad input: one line naming the flag, nothing written.
  for bad, message in (([f"--study_dirs={tmp_path}"], "results.json does not exist"),
                       (["--probe_train_examples=20"], "measured with other settings")):
    failed = _run(repo_root, *argv, *bad)
    assert failed.returncode != 0
    assert message in failed.stderr and len(failed.stderr.strip().splitlines()) == 1, failed.stderr
  missing = json.loads((study / "results.json").read_text())
  missing["pretraining_runs"].append({"objective": "masked_lm", "seed": 0, "steps": 5,
                                      "checkpoint": "pretraining/mlm/ckpt-5"})
  (study / "results.json").write_text(json.dumps(missing))
  failed = _run(repo_root, *argv)
  assert failed.returncode != 0 and "ckpt-5 does not exist" in failed.stderr
  assert _run(repo_root, *argv, "--skip_missing").returncode == 0
