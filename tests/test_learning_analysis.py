"""tools/learning_analysis.py: its statistics and baselines on hand-checked
values, and the committed write-up against the committed results.json files."""

import json
import math
import pathlib
import re

import numpy as np
import pytest
from scipy import stats

from tools import learning_analysis as la

STUDY_DIR = pathlib.Path(__file__).resolve().parent.parent / "docs" / "learning_study"
LEARNING_MD = STUDY_DIR.parent / "learning.md"
README = STUDY_DIR.parent.parent / "README.md"


def _read(path: pathlib.Path) -> str:
  return path.read_text(encoding="utf-8")


def _readme_section() -> str:
  """The README's "Does it learn?" section."""
  return _read(README).split("## Does it learn?")[1].split("\n## ")[0]


def _summary() -> str:
  """learning.md before its first section: the introduction and "In short"."""
  return _read(LEARNING_MD).split("\n## ")[0]


def test_welch_matches_scipy_and_its_interval_holds_the_difference():
  a, b = [60.0, 61.5, 58.0, 62.5], [56.0, 57.0, 55.5]
  result = la.welch(a, b)
  reference = stats.ttest_ind(a, b, equal_var=False)
  assert result["difference"] == pytest.approx(60.5 - 56.166666666666664)
  assert result["welch_t"] == pytest.approx(reference.statistic)
  assert result["p"] == pytest.approx(reference.pvalue)
  # Satterthwaite df by hand: va = 3.8333 / 4, vb = 0.58333 / 3.
  va, vb = (23 / 6) / 4, (7 / 12) / 3
  assert result["df"] == pytest.approx((va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 2))
  half = stats.t.ppf(0.975, result["df"]) * math.sqrt(va + vb)
  assert result["ci95"] == pytest.approx([result["difference"] - half,
                                          result["difference"] + half])
  # One value a side, or no spread: a difference but no test.
  assert la.welch([1.0], [2.0, 3.0])["p"] is None
  assert la.welch([1.0, 1.0], [2.0, 2.0])["welch_t"] is None


def test_permutation_p_is_scipys_exact_permutation_test():
  def scipy_p(a, b):
    return stats.permutation_test(
        (a, b), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
        permutation_type="independent", vectorized=True, n_resamples=np.inf,
        alternative="two-sided").pvalue
  rng = np.random.default_rng(3)
  for a, b in (([0.0, 0.0, 1.2], [7.1, 9.5, 9.3]),  # CoLA: an arm at the floor
               ([65.3, 65.7, 64.1], [62.9, 63.4, 61.8]),
               (list(rng.normal(size=5)), list(rng.normal(0.5, size=4))),
               ([1.0, 2.0, 2.0], [2.0, 2.0, 3.0]),  # ties
               (list(rng.normal(size=10)), list(rng.normal(size=10)))):
    assert la.permutation_p(a, b) == pytest.approx(scipy_p(a, b), abs=1e-12), (a, b)
  # Three against three: 20 splits, the observed one and its mirror the
  # most extreme, so 2/20 is the smallest p there is.
  assert la.permutation_p([0.0, 0.0, 1.2], [7.1, 9.5, 9.3]) == pytest.approx(0.1)
  assert la.permutation_p([1.0], []) is None


def test_paired_uses_the_common_seeds_only():
  a = {"1": 10.0, "2": 12.0, "3": 11.0, "4": 50.0}
  b = {"1": 9.0, "2": 10.5, "3": 11.5}
  result = la.paired(a, b)
  reference = stats.ttest_rel([10.0, 12.0, 11.0], [9.0, 10.5, 11.5])
  assert result["common_seeds"] == 3 and result["higher_on_seeds"] == 2
  assert result["paired_t"] == pytest.approx(reference.statistic)
  assert result["paired_p"] == pytest.approx(reference.pvalue)


def test_holm_steps_down_and_stays_monotone():
  # Sorted 0.01, 0.02, 0.03, 0.2 -> 0.04, 0.06, 0.06 (monotone), 0.2.
  assert la.holm([0.03, 0.2, 0.01, None, 0.02]) == pytest.approx(
      [0.06, 0.2, 0.04, None, 0.06])
  assert la.holm([0.9, 0.8]) == [1.0, 1.0]


def test_detectable_difference_and_runs_needed():
  # Many runs: the normal approximation, (z_0.975 + z_0.8) x the standard error.
  se = math.sqrt((1.0 + 0.25) / 400)
  assert la.detectable_difference(1.0, 0.5, 400, 0.05) == pytest.approx(
      (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * se, rel=0.005)
  # At the difference found, a two-sided t-test on 22 df has 80% power
  # (checked by simulation: t statistics drawn at that noncentrality).
  found = la.detectable_difference(0.83, 0.84, 12, 0.025)
  critical = stats.t.ppf(1 - 0.0125, 22)
  draws = stats.nct.rvs(22, found / math.sqrt((0.83 ** 2 + 0.84 ** 2) / 12), size=200_000,
                        random_state=1)
  assert float(np.mean(np.abs(draws) > critical)) == pytest.approx(0.8, abs=0.005)
  assert la.runs_needed(0.83, 0.84, 1.12, 0.025, 12, 20) == 12
  assert la.runs_needed(0.83, 0.84, 1.1, 0.025, 12, 20) == 13
  assert la.runs_needed(3.0, 3.0, 1.1, 0.025, 12, 20) == 20


def test_decisive_power_figures_are_the_committed_sds():
  """learning.md's pre-registration quotes what 12 runs an arm detect, from
  the three-run sds of the committed full-label and 100-label chunking."""
  full = json.loads((STUDY_DIR / "full_labels" / "results.json").read_text())["analysis"]
  seeds = json.loads((STUDY_DIR / la.SEEDS_STUDY / "analysis.json").read_text())["analysis"]
  sds = {"full": [full["tasks"]["chunk"]["groups"][g]["sd"] for g in ("electra", "masked_lm")],
         "labels100": [seeds["tasks"]["chunk"]["objectives"][g]["sd"]
                       for g in ("electra", "masked_lm")]}
  text = " ".join(_read(LEARNING_MD).split())
  figures = {(name, alpha): la.detectable_difference(*sds[name], 12, alpha)
             for name in sds for alpha in (0.025, 0.05)}
  assert (f"a difference of {figures[('full', 0.025)]:.2f} F1 at full labels and "
          f"{figures[('labels100', 0.025)]:.2f} F1 at 100 labels at 0.025 (Holm's first step), "
          f"{figures[('full', 0.05)]:.2f} and {figures[('labels100', 0.05)]:.2f} at 0.05") in text


def test_most_frequent_tag_baseline_on_a_hand_made_sample():
  train = [(["the", "dog", "runs"], ["B-NP", "I-NP", "B-VP"]),
           (["the", "cat"], ["B-NP", "I-NP"]),
           (["runs"], ["B-NP"])]  # runs: B-VP once, B-NP once: the tag seen first
  dev = [(["the", "bird", "runs"], ["B-NP", "I-NP", "B-VP"])]
  # the -> B-NP, bird (unseen) -> the commonest tag B-NP, runs -> B-VP:
  # predicted chunks NP[0], NP[1], VP[2] against gold NP[0-1], VP[2]:
  # precision 1/3, recall 1/2, F1 0.4.
  assert la.most_frequent_tag_f1(train, dev) == pytest.approx(40.0)


def test_naive_bayes_counts_and_presence():
  train = [(["good", "good", "fun"], "1"), (["bad", "dull"], "0"), (["bad", "fun"], "0")]
  # Vocabulary of 4, add-one: "good fun": class 1 log(1/3) + log(3/7) + log(2/7)
  # = -3.20, class 0 log(2/3) + log(1/8) + log(2/8) = -3.87; "bad": class 1
  # log(1/3) + log(1/7) = -3.04, class 0 log(2/3) + log(3/8) = -1.39; a sentence
  # of unseen tokens: the prior, class 0.
  assert la.naive_bayes_predictions(train, [["good", "fun"], ["bad"], ["unseen"]]) == [
      "1", "0", "0"]


def test_baselines_on_the_studies_training_samples(finetuning_data_dir):
  # The 100 and 1,000 first training examples, as the study fine-tunes on them.
  chunk100 = la.trivial_baselines("chunk", 100, finetuning_data_dir)
  chunk1000 = la.trivial_baselines("chunk", 1000, finetuning_data_dir)
  sst100 = la.trivial_baselines("sst", 100, finetuning_data_dir)
  assert chunk100["most_frequent_tag"] == pytest.approx(42.1, abs=0.05)
  assert chunk1000["most_frequent_tag"] == pytest.approx(53.0, abs=0.05)
  # 51 negative of the first 100: the majority class scores the dev set's negatives.
  assert sst100["majority_class"] == pytest.approx(100 * 428 / 872)
  assert sst100["naive_bayes"] == pytest.approx(58.3, abs=0.05)
  assert sst100["naive_bayes_binary"] == pytest.approx(60.2, abs=0.05)


def test_flops_both_ways_for_the_study_model():
  results = json.loads((STUDY_DIR / "large_corpus" / "results.json").read_text())
  counted = la.flops_both_ways(results["settings"]["model"], 30522)
  assert counted["ratio_official"] == pytest.approx(results["settings"]["flops_ratio"])
  assert counted["electra"]["lookup_share"] == pytest.approx(0.74, abs=0.005)
  assert counted["ratio_without_lookups"] == pytest.approx(1.084, abs=0.001)


@pytest.fixture(scope="module")
def analyses(finetuning_data_dir):
  return la.analyse_all(STUDY_DIR, finetuning_data_dir)


def test_stored_analysis_is_the_recomputed_one(analyses):
  paths = {name: STUDY_DIR / path for name, path in la.analysis_paths().items()}
  for name, analysis in analyses.items():
    stored = json.loads(paths[name].read_text())
    assert la._close(stored["analysis"], analysis), f"{paths[name]}: rerun --write"  # pylint: disable=protected-access
  large = json.loads((STUDY_DIR / "large_corpus" / "results.json").read_text())
  assert [(r["objective"], r["seed"], r["steps"]) for r in large["pretraining_runs"]] == [
      ("electra", 0, 6000), ("masked_lm", 0, 9841)]


def test_learning_md_tables_are_the_recomputed_ones(analyses):
  doc = _read(LEARNING_MD)
  documented = la.doc_tables(doc)
  for name, table in la.all_tables(analyses).items():
    assert documented.get(name) == table, f"learning.md: table {name}"


def test_large_corpus_headline_figures(analyses):
  """The figures the README and learning.md's summary quote (100 labels, large corpus)."""
  comparisons = {(c["task"], c["start"], c["against"]): c
                 for c in analyses["large_corpus"]["finetuning_labels100"]["comparisons"]}
  sst = comparisons[("sst", "electra_2000", "mlm_3280")]
  assert f"{sst['difference']:+.1f}" == "+3.3" and sst["p_holm"] < 0.001
  late_sst = comparisons[("sst", "electra_6000", "mlm_9841")]
  late_chunk = comparisons[("chunk", "electra_6000", "mlm_9841")]
  assert late_sst["p"] < 0.06 and late_sst["p_holm"] == pytest.approx(0.30, abs=0.01)
  assert late_chunk["p"] < 0.05 and late_chunk["p_holm"] == pytest.approx(0.30, abs=0.01)
  # The masked LM beats random initialisation on chunking on every seed too.
  for start in ("mlm_3280", "mlm_9841"):
    assert comparisons[("chunk", start, "random_init")]["higher_on_seeds"] == 10
  # One pre-training run per objective: its checkpoints differ more than the
  # fine-tuning seeds' standard error, and with the checkpoint as the unit the
  # SST-2 lead is not significant.
  between = analyses["large_corpus"]["finetuning_labels100"]["between_checkpoints"]["sst"]
  assert between["electra_checkpoint_sd"] == pytest.approx(1.2, abs=0.05)
  assert between["standard_error_of_a_start"] == pytest.approx(0.4, abs=0.05)
  assert between["main_run_first_against_last"]["difference"] == pytest.approx(2.05, abs=0.01)
  assert between["main_run_first_against_last"]["p"] < 0.005
  assert between["checkpoint_as_unit"]["difference"] == pytest.approx(1.53, abs=0.01)
  assert between["checkpoint_as_unit"]["p"] == pytest.approx(0.084, abs=0.001)
  section = _readme_section()
  summary = _summary()
  baselines = analyses["large_corpus"]["finetuning_labels100"]["baselines"]
  assert f"{sst['difference']:+.1f} [{sst['ci95'][0]:+.1f}, {sst['ci95'][1]:+.1f}]" in summary
  # Both quote the replication over three pre-training runs an objective.
  seeds = {(c["task"], c["start"], c["against"]): c
           for c in analyses[la.SEEDS_STUDY]["comparisons"]}
  replicated = seeds[("sst", "electra", "masked_lm")]
  for text in (section, summary):
    assert f"{sst['difference']:+.1f}" in text
    assert (f"{replicated['difference']:+.1f} [{replicated['ci95'][0]:+.1f}, "
            f"{replicated['ci95'][1]:+.1f}]") in text or (
                f"{replicated['difference']:+.1f} SST-2 points") in text
    assert f"{baselines['chunk']['most_frequent_tag']:.1f}" in text
    assert f"{baselines['sst']['naive_bayes']:.1f}" in text
    assert "collapse" not in text.lower()
  for name in re.findall(r"<!-- analysis:(\S+) -->", section):
    pytest.fail(f"README: an analysis table ({name}) belongs in learning.md")


def test_probe_figures_quoted_are_the_committed_ones(analyses):
  """README and learning.md's summary quote the final-layer chunking probe
  (ELECTRA against the masked LM, three runs each) and the replicated
  fine-tuning difference on chunking as the committed tables give them."""
  probe = {(c["task"], c["start"], c["against"]): c
           for c in analyses[la.REPRESENTATION_STUDY]["comparisons"]}
  chunk = probe[("chunk", "electra", "masked_lm")]
  assert chunk["p_holm"] < 0.05 and chunk["ci95"][1] < 0
  # Against random vectors, neither objective's gain survives the correction.
  assert all(probe[("chunk", g, "random_init")]["p_holm"] > 0.05 for g in ("electra", "masked_lm"))
  seeds = {(c["task"], c["start"], c["against"]): c
           for c in analyses[la.SEEDS_STUDY]["comparisons"]}
  finetuned = seeds[("chunk", "electra", "masked_lm")]
  section = _readme_section()
  summary = _summary()
  for text in (section, summary):
    assert f"{chunk['difference']:+.1f} F1, Holm p {chunk['p_holm']:.3f}" in " ".join(
        text.replace("**", "").replace(f"[{chunk['ci95'][0]:+.1f}, {chunk['ci95'][1]:+.1f}] ",
                                       "").split())
    assert f"chunking {finetuned['difference']:+.1f}" in text or (
        f"{finetuned['difference']:+.1f} chunking F1") in text


def test_full_label_figures_quoted_are_the_committed_ones(analyses):
  """learning.md's summary and the README quote the full-label results of the
  three tasks (CoLA's ELECTRA against random initialisation with the family
  Holm's correction ran over, every group's mean, the trivial baselines,
  chunking's and SST-2's Holm ranges) as the widened grid's committed table
  gives them, and the first pass's beside them."""
  full = analyses[la.FULL_LABELS_STUDY]
  groups = full["tasks"]["cola"]["groups"]
  versus = {(c["start"], c["against"]): c for c in full["comparisons"] if c["task"] == "cola"}
  random = versus[("electra", "random_init")]
  summary = " ".join(_summary().replace("**", "").split())
  quoted = (f"{random['difference']:+.1f} [{random['ci95'][0]:+.1f}, {random['ci95'][1]:+.1f}] "
            f"for ELECTRA, Holm {random['p_holm']:.2f} over the {full['family_size']} "
            "comparisons of the three tasks")
  assert full["family_size"] == 9 and not full["pending"]
  assert quoted in summary
  for group in ("electra", "random_init", "masked_lm"):
    assert f"{groups[group]['mean']:.1f} ± {groups[group]['sd']:.1f}" in summary
  assert f"on the same examples {full['tasks']['cola']['baselines']['naive_bayes']:.1f}" in summary
  chunk = full["tasks"]["chunk"]["groups"]
  for group in ("electra", "random_init", "masked_lm"):
    assert f"{chunk[group]['mean']:.1f} ± {chunk[group]['sd']:.1f}" in summary
  assert f"most frequent tag {full['tasks']['chunk']['baselines']['most_frequent_tag']:.1f}" in (
      summary)
  chunk_versus = {(c["start"], c["against"]): c for c in full["comparisons"]
                  if c["task"] == "chunk"}
  lead = chunk_versus[("electra", "masked_lm")]
  assert (f"{lead['difference']:+.1f} [{lead['ci95'][0]:+.1f}, {lead['ci95'][1]:+.1f}]"
          in summary)
  holm = sorted(f"{c['p_holm']:.2f}" for c in chunk_versus.values())
  assert all(c["p_holm"] > 0.05 for c in chunk_versus.values())
  assert f"significant after Holm ({holm[0]}-{holm[-1]})" in summary
  sst = full["tasks"]["sst"]
  assert (f"random initialisation {sst['groups']['random_init']['mean']:.1f} ± "
          f"{sst['groups']['random_init']['sd']:.1f}% on dev") in summary
  for group in ("electra", "masked_lm"):
    assert f"{sst['groups'][group]['mean']:.1f} ± {sst['groups'][group]['sd']:.1f}" in summary
  assert (f"Naive Bayes {sst['baselines']['naive_bayes']:.1f}, majority class "
          f"{sst['baselines']['majority_class']:.1f}") in summary
  sst_holm = sorted(c["p_holm"] for c in full["comparisons"] if c["task"] == "sst")
  assert sst_holm[0] > 0.05
  assert f"(Holm {sst_holm[0]:.2f}-{sst_holm[-1]:.2f})" in summary
  best = max(g["mean"] for g in sst["groups"].values())
  assert f"no group is more than {best - sst['baselines']['naive_bayes']:.1f} points" in summary
  first = analyses[la.FULL_LABELS_FIRST_GRID]
  first_random = next(c for c in first["comparisons"]
                      if (c["task"], c["start"], c["against"]) == ("cola", "electra", "random_init"))
  electra = first["tasks"]["cola"]["groups"]["electra"]
  assert (f"(ELECTRA {electra['mean']:.1f} ± {electra['sd']:.1f}, "
          f"{first_random['difference']:+.1f}, Holm {first_random['p_holm']:.2f})") in summary
  section = " ".join(_readme_section().split())
  assert (f"random initialisation {groups['random_init']['mean']:.1f}, "
          f"Holm {random['p_holm']:.2f}") in section
  sst_means = sorted(g["mean"] for g in sst["groups"].values())
  assert (f"on SST-2 all are level ({sst_means[0]:.1f}-{sst_means[-1]:.1f}%, Naive Bayes "
          f"{sst['baselines']['naive_bayes']:.1f}%)") in section


def test_seeds_take_the_pretraining_run_as_the_unit(tmp_path):
  """Three pre-training runs an objective, each the mean of the fine-tuning
  seeds every run has; random initialisation from the main study's runs."""
  electra = {1: {"1": 60.0, "2": 62.0, "3": 70.0}, 2: {"1": 58.0, "2": 60.0},
             3: {"1": 57.0, "2": 59.0}}
  masked = {1: {"1": 56.0, "2": 58.0}, 2: {"1": 57.0, "2": 57.0}, 3: {"1": 55.0, "2": 57.0}}
  for seed in (1, 2, 3):
    results = {"settings": {"model": {"seed": seed}, "steps": 2000,
                            "mlm_steps": {"2000": 3280}},
               "pretraining_runs": [{"objective": "electra", "seed": seed, "steps": 2000}],
               "pretraining": {"electra": {"evals": {
                   "1000": {"disc_auc_real_tokens": 0.7},
                   "2000": {"disc_auc_real_tokens": 0.5 + seed / 100}}}},
               "finetuning_labels100": {"sst": {
                   "electra_2000": {"runs": electra[seed]},
                   "mlm_3280": {"runs": masked[seed]}}}}
    path = tmp_path / la.SEEDS_STUDY / f"seed{seed}" / "results.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(results))
  main = {"finetuning_labels100": {"sst": {"random_init": {"runs": {
      "1": 55.0, "2": 56.0, "3": 99.0}}}}}
  seeds = la.analyse_seeds(tmp_path, main)
  sst = seeds["tasks"]["sst"]
  # Seed "3" of the first ELECTRA run is left out: not every run has it.
  assert sst["finetuning_seeds"] == ["1", "2"]
  assert sst["objectives"]["electra"]["run_means"] == {"1": 61.0, "2": 59.0, "3": 58.0}
  assert sst["objectives"]["masked_lm"]["run_means"] == {"1": 57.0, "2": 57.0, "3": 56.0}
  # Random initialisation: every fine-tuning seed it ran (no pre-training seed to match).
  assert sst["random_init"]["mean"] == 70.0
  against = {(c["start"], c["against"]): c for c in seeds["comparisons"]}
  assert against[("electra", "masked_lm")]["difference"] == pytest.approx(178 / 3 - 170 / 3)
  assert against[("electra", "masked_lm")]["welch_t"] == pytest.approx(
      stats.ttest_ind([61.0, 59.0, 58.0], [57.0, 57.0, 56.0], equal_var=False).statistic)
  assert against[("electra", "random_init")]["n"] == [3, 3]
  assert against[("electra", "masked_lm")]["p_permutation"] == pytest.approx(0.1)
  assert seeds["family_size"] == 3
  assert la.holm([c["p"] for c in seeds["comparisons"]]) == [
      c["p_holm"] for c in seeds["comparisons"]]
  assert la.holm([c["p_permutation"] for c in seeds["comparisons"]]) == [
      c["p_permutation_holm"] for c in seeds["comparisons"]]
  assert [r["seed"] for r in seeds["pretraining_runs"]] == [1, 2, 3]
  # Each run's held-out evaluation where its schedule ends (step 2,000), not before.
  assert [(e["seed"], e["disc_auc_real_tokens"]) for e in seeds["pretraining_evals"]] == [
      (1, 0.51), (2, 0.52), (3, 0.53)]
  table = la.seeds_pretraining_table(seeds["pretraining_evals"]).splitlines()
  assert table[2] == "| ELECTRA, seed 1 | 2,000 | - | 0.510 | - | - | - | - |"


def test_official_trajectory_figures_are_the_committed_run():
  """learning.md's table against the official learning curve, its eval line
  and the README's figure restate `official_trajectory.json` (the tool's
  --json summary), window by window."""
  run = json.loads((STUDY_DIR / "official_trajectory.json").read_text(encoding="utf-8"))
  text = _read(LEARNING_MD)
  windows = run["windows"]
  for window in windows["mlm_loss"]:
    cells = [window]
    for loss in ("mlm_loss", "disc_loss"):
      w = windows[loss][window]
      cells += [f"{w['official_mean']:.3f} ({w['official_min']:.3f}-{w['official_max']:.3f})",
                " / ".join(f"{x:.3f}" for x in w["ours"])]
    assert "| " + " | ".join(cells) + " |" in text, window
  recall = run["eval"]["disc_recall"]
  assert ("`disc_recall` " + ", ".join(f"{x:.2f}" for x in recall["official"]) + " / "
          + ", ".join(f"{x:.2f}" for x in recall["ours"])) in text
  last = windows["mlm_loss"]["301-400"]
  readme = " ".join(_read(README).split())
  assert (f"steps 301-400 is {min(last['ours']):.2f}-{max(last['ours']):.2f} against the "
          f"official seeds' {last['official_min']:.2f}-{last['official_max']:.2f}") in readme
  gaps = [windows["mlm_loss"][w]["gap"] for w in windows["mlm_loss"]]
  assert f"generator {min(gaps):.2f}-{max(gaps):.2f} nats behind" in " ".join(text.split())


def test_embedded_default_figures_are_the_committed_run():
  """The default's row in learning.md and the README's AUC restate
  `embedded_default.json` (the command's own results file)."""
  ev = json.loads((STUDY_DIR / "embedded_default.json").read_text(encoding="utf-8"))["eval"]
  row = (f"| **{ev['disc_auc_real_tokens']:.3f}** | **{ev['disc_precision']:.2f}** | "
         f"**{ev['disc_recall']:.2f}** | {ev['disc_accuracy']:.3f} "
         f"({ev['disc_always_real_accuracy']:.3f}) | {ev['masked_lm_accuracy']:.3f} |")
  assert row in _read(LEARNING_MD)
  readme = " ".join(_read(README).split())
  assert f"(AUC over real tokens {ev['disc_auc_real_tokens']:.3f} after 400 steps)" in readme


def test_same_machine_rerun_quoted_is_the_committed_one():
  """learning.md's "bit for bit" for ELECTRA's rerun restates
  recreated_checkpoints.json: no tensor differs and the evaluation is the
  re-created run's."""
  recreated = json.loads((STUDY_DIR / "full_labels" / "recreated_checkpoints.json").read_text(
      encoding="utf-8"))
  rerun = recreated["same_machine_rerun"]
  assert rerun["numeric_tensors_differing"] == 0 and rerun["largest_abs_difference"] == 0.0
  run = next(r for r in recreated["runs"]
             if (r["objective"], r["seed"]) == (rerun["objective"], rerun["seed"]))
  assert rerun["evaluation"] == run["recreated"]
  text = " ".join(_read(LEARNING_MD).split())
  assert (f"bit for bit, all {rerun['numeric_tensors']} numeric tensors and every held-out "
          "figure") in text
