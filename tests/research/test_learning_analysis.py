"""tools/research/learning_analysis.py: its statistics and baselines on hand-checked
values, and the committed write-up against the committed results.json files."""

import json
import math
import pathlib
import re

import numpy as np
import pytest
from scipy import stats

from tools.research import learning_analysis as la

STUDY_DIR = pathlib.Path(__file__).resolve().parent.parent.parent / "docs" / "learning_study"
LEARNING_MD = STUDY_DIR.parent / "learning.md"
README = STUDY_DIR.parent.parent / "README.md"


def _read(path: pathlib.Path) -> str:
  return path.read_text(encoding="utf-8")


def _readme_section() -> str:
  """The README's "Does it learn?" section."""
  return _read(README).split("## Does it learn?")[1].split("\n## ")[0]


def _summary() -> str:
  """learning.md's introduction and its "In short" section."""
  return _read(LEARNING_MD).split("\n## The decisive experiment")[0]


def test_the_write_up_stays_a_page_a_reader_finishes():
  """Issue 52's bounds: learning.md at most 400 lines, the README's section at
  most 15 under its heading."""
  assert len(_read(LEARNING_MD).splitlines()) <= 400
  assert len(_readme_section().strip().splitlines()) <= 15


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
  assert la.DECISIVE_DIFFERENCES == {"full_labels": round(figures[("full", 0.025)], 2),
                                     "labels100": round(figures[("labels100", 0.025)], 2)}
  assert (f"a difference of {figures[('full', 0.025)]:.2f} F1 at full labels and "
          f"{figures[('labels100', 0.025)]:.2f} F1 at 100 labels at 0.025 (Holm's first step), "
          f"{figures[('full', 0.05)]:.2f} and {figures[('labels100', 0.05)]:.2f} at 0.05") in text


DECISIVE_LABELS = {"full_labels": "full labels", "labels100": "100 labels"}
# Where the README and the summary begin quoting ELECTRA against the arm.
ARM_QUOTED = "against the masked LM matched on arithmetic"


def test_decisive_figures_quoted_are_the_committed_ones():
  """The README and learning.md's summary quote the decisive experiment as its
  analysis.json holds it: the runs done until every run is in (and no
  difference), then each endpoint's difference, interval and Holm p (the
  summary with Welch's p and the permutation p beside); the same for the arm
  matched on arithmetic, its differences after ARM_QUOTED."""
  stored = json.loads((STUDY_DIR / la.DECISIVE_STUDY / "analysis.json").read_text())["analysis"]
  summary, section = _flat(_summary()), _flat(_readme_section())
  if not stored["endpoints"]:
    done = min(n for arms in stored["runs_done"].values() for n in arms.values())
    assert f"({done} of {la.DECISIVE_RUNS} runs a side done)" in section
    return
  for c in stored["endpoints"]:
    label, cell = DECISIVE_LABELS[c["endpoint"]], _cell(c)
    assert f"{label} {cell} F1 (Holm {la.fmt_p(c['p_holm'])})" in section
    assert (f"{label} {cell} F1 (Welch p {la.fmt_p(c['p'])}, Holm {la.fmt_p(c['p_holm'])}; "
            f"exact permutation p {la.fmt_p(c['p_permutation'])})") in summary
  arm = [arms.get(la.ARITHMETIC_ARM, 0) for arms in stored["runs_done"].values()]
  if any(arm) and not stored.get("arithmetic_endpoints"):
    for text in (section, summary):
      assert f"({min(arm)} of {la.DECISIVE_RUNS} runs in)" in text
  if stored.get("arithmetic_endpoints"):
    assert "runs in)" not in section + summary
    section_arm, summary_arm = (text.split(ARM_QUOTED, 1)[1] for text in (section, summary))
    for c in stored["arithmetic_endpoints"]:
      label, cell = DECISIVE_LABELS[c["endpoint"]], _cell(c)
      assert f"{label} {cell} F1 (Holm {la.fmt_p(c['p_holm'])})" in section_arm
      assert (f"{label} {cell} F1 (Welch p {la.fmt_p(c['p'])}, Holm {la.fmt_p(c['p_holm'])}; "
              f"exact permutation p {la.fmt_p(c['p_permutation'])})") in summary_arm


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


@pytest.mark.slow  # the analyses fixture: about 30 s
def test_stored_analysis_is_the_recomputed_one(analyses):
  paths = {name: STUDY_DIR / path for name, path in la.analysis_paths().items()}
  for name, analysis in analyses.items():
    stored = json.loads(paths[name].read_text())
    assert la._close(stored["analysis"], analysis), f"{paths[name]}: rerun --write"  # pylint: disable=protected-access
  large = json.loads((STUDY_DIR / "large_corpus" / "results.json").read_text())
  assert [(r["objective"], r["seed"], r["steps"]) for r in large["pretraining_runs"]] == [
      ("electra", 0, 6000), ("masked_lm", 0, 9841)]


@pytest.mark.slow  # the analyses fixture: about 30 s
def test_learning_md_tables_are_the_recomputed_ones(analyses):
  documented = la.doc_tables(_read(LEARNING_MD))
  tables = la.all_tables(analyses)
  assert set(la.DOC_TABLES) <= set(documented)
  for name, table in documented.items():
    assert table == tables[name], f"learning.md: table {name}"


def _flat(text: str) -> str:
  """`text` on one line, bold marks dropped (quotes may wrap anywhere)."""
  return " ".join(text.replace("**", "").split())


def _cell(c: dict) -> str:
  return f"{c['difference']:+.1f} [{c['ci95'][0]:+.1f}, {c['ci95'][1]:+.1f}]"


@pytest.mark.slow  # the analyses fixture: about 30 s
def test_hundred_label_figures_quoted_are_the_committed_ones(analyses):
  """README and learning.md's summary: the three-run comparison (random
  initialisation over all 10 of its seeds), the single run's +3.3 named as
  one run, the baselines with the presence-based Naive Bayes."""
  seeds = {(c["task"], c["start"], c["against"]): c
           for c in analyses[la.SEEDS_STUDY]["comparisons"]}
  assert analyses[la.SEEDS_STUDY]["tasks"]["sst"]["random_init"]["n"] == 10
  single = {(c["task"], c["start"], c["against"]): c
            for c in analyses["large_corpus"]["finetuning_labels100"]["comparisons"]}
  lead = single[("sst", "electra_2000", "mlm_3280")]
  assert f"{lead['difference']:+.1f}" == "+3.3" and lead["p_holm"] < 0.001
  baselines = analyses["large_corpus"]["finetuning_labels100"]["baselines"]
  summary, section = _flat(_summary()), _flat(_readme_section())
  sst, chunk = seeds[("sst", "electra", "masked_lm")], seeds[("chunk", "electra", "masked_lm")]
  gains = [seeds[("chunk", g, "random_init")] for g in ("electra", "masked_lm")]
  for text in (summary, section):
    assert f"SST-2 {sst['difference']:+.1f} [" in text or f"{_cell(sst)} SST-2" in text
    assert _cell(sst) in text and f"chunking {chunk['difference']:+.1f}" in text or (
        f"{chunk['difference']:+.1f} chunking F1" in text)
    assert f"{gains[0]['difference']:+.1f} and {gains[1]['difference']:+.1f} F1" in text
    assert f"{baselines['chunk']['most_frequent_tag']:.1f}" in text
    presence = f"{baselines['sst']['naive_bayes_binary']:.1f}%"
    assert (f"Naive Bayes over token presence ({presence})" in text
            or f"presence-based Naive Bayes on SST-2 ({presence})" in text)
    assert "+3.3" in text and "collapse" not in text.lower()
  assert (f"each). ELECTRA minus the masked LM is {chunk['difference']:+.1f} chunking F1 and "
          f"{_cell(sst)} SST-2 points (Holm {chunk['p_holm']:.2f} and "
          f"{sst['p_holm']:.2f})") in summary
  assert all(g["p_permutation"] == pytest.approx(0.007, abs=0.0005) for g in gains)
  assert (f"exact permutation p {gains[0]['p_permutation']:.3f}, Holm "
          f"{gains[0]['p_permutation_holm']:.2f} each") in summary
  random_sst = seeds[("sst", "electra", "random_init")]
  assert (f"fine-tuning seeds, is {_cell(random_sst)} (p {random_sst['p']:.2f}, Holm "
          f"{random_sst['p_holm']:.2f}): not shown") in summary
  assert "a different condition" in summary and "one pre-training run per objective" in summary
  for name in re.findall(r"<!-- analysis:(\S+) -->", _readme_section()):
    pytest.fail(f"README: an analysis table ({name}) belongs in learning.md")


@pytest.mark.slow  # the analyses fixture: about 30 s
def test_probe_figures_quoted_are_the_committed_ones(analyses):
  """learning.md's summary quotes the final-layer chunking probe (ELECTRA
  against the masked LM, three runs each) with its Welch and its exact
  permutation p, which three runs a side cannot take below 0.10."""
  probe = {(c["task"], c["start"], c["against"]): c
           for c in analyses[la.REPRESENTATION_STUDY]["comparisons"]}
  chunk = probe[("chunk", "electra", "masked_lm")]
  assert chunk["p_holm"] < 0.05 and chunk["p_permutation_holm"] > 0.05
  assert (f"({_cell(chunk)} F1, Welch Holm p {chunk['p_holm']:.3f}; exact permutation p "
          f"{chunk['p_permutation']:.2f} over three runs each, Holm "
          f"{chunk['p_permutation_holm']:.2f})") in _flat(_summary())
  assert "already at layer 0" not in _flat(_read(LEARNING_MD))


@pytest.mark.slow  # the analyses fixture: about 30 s
def test_full_label_figures_quoted_are_the_committed_ones(analyses):
  """learning.md's summary and the README quote the full-label results as
  the committed table gives them: CoLA's floor with its permutation p, the
  run not chosen, chunking's lead with its rate and the 1e-3 level, SST-2."""
  full = analyses[la.FULL_LABELS_STUDY]
  results = json.loads((STUDY_DIR / "full_labels" / "results.json").read_text())
  assert full["family_size"] == 9 and not full["pending"]
  summary, section = _flat(_summary()), _flat(_readme_section())
  cola = full["tasks"]["cola"]["groups"]
  versus = {(c["task"], c["start"], c["against"]): c for c in full["comparisons"]}
  floor = versus[("cola", "electra", "random_init")]
  assert floor["p_permutation"] == pytest.approx(0.1)
  assert (f"({cola['electra']['mean']:.1f} ± {cola['electra']['sd']:.1f} MCC, against random "
          f"initialisation's {cola['random_init']['mean']:.1f} ± "
          f"{cola['random_init']['sd']:.1f}; "
          f"Welch p {floor['p']:.3f}, but with one arm at the floor the exact permutation p is "
          f"{floor['p_permutation']:.2f}, the smallest three against three can give, Holm "
          f"{floor['p_permutation_holm']:.2f})") in summary
  unchosen = results["finetuning"]["cola"]["electra_seed1"]["runs"]["0.0003"]["dev"]
  assert f"(seed 1 at 3e-4) reached {unchosen:.1f}" in summary
  assert (f"CoLA MCC {cola['random_init']['mean']:.1f} against ELECTRA's "
          f"{cola['electra']['mean']:.1f}, exact permutation p "
          f"{floor['p_permutation']:.2f}") in section
  chunk = full["tasks"]["chunk"]
  for group, label in (("random_init", "random initialisation"), ("electra", "ELECTRA"),
                       ("masked_lm", "the masked LM")):
    g = chunk["groups"][group]
    assert f"{label} {g['mean']:.1f} ± {g['sd']:.1f}" in summary
  assert f"most frequent tag {chunk['baselines']['most_frequent_tag']:.1f}" in summary
  lead = versus[("chunk", "electra", "masked_lm")]
  at_1e3 = {g: sum(r["runs"]["0.001"]["dev"] for s, r in results["finetuning"]["chunk"].items()
                   if s.startswith(g)) / 3 for g in ("electra", "masked_lm")}
  assert (f"ELECTRA's {lead['difference']:+.1f} over the masked LM holds at 3e-3, the rate every "
          f"start chose (at 1e-3 they are level, {at_1e3['electra']:.2f} and "
          f"{at_1e3['masked_lm']:.2f})") in summary
  assert all(lr == 0.003 for g in chunk["groups"].values() for lr in g["chosen_lr"].values())
  # Only CoLA's floor passes Welch's Holm; no exact test passes Holm.
  assert [k for k, c in versus.items() if c["p_holm"] < 0.05] == [
      ("cola", "electra", "random_init")]
  assert all(c["p_permutation_holm"] > 0.05 for c in full["comparisons"])
  assert "No difference survives the exact test with Holm's correction." in summary
  sst = full["tasks"]["sst"]
  means = sorted(g["mean"] for g in sst["groups"].values())
  assert (f"all three level ({means[0]:.1f}-{means[-1]:.1f}%) and barely above a Naive Bayes "
          f"({sst['baselines']['naive_bayes']:.1f}%)") in summary
  assert (f"chunking {chunk['groups']['random_init']['mean']:.1f} F1, ELECTRA "
          f"{chunk['groups']['electra']['mean']:.1f}, masked LM "
          f"{chunk['groups']['masked_lm']['mean']:.1f}") in section
  assert "The paper's setting" not in summary


def test_statistics_rederived_independently_with_scipy():
  """A standalone re-derivation over the committed JSON, with scipy's own
  tests and none of learning_analysis: every run-as-unit comparison's
  difference, Welch p and exact permutation p, and the seeds' random side."""
  results = json.loads((STUDY_DIR / "full_labels" / "results.json").read_text())
  stored = {(c["task"], c["start"], c["against"]): c for c in results["analysis"]["comparisons"]}
  for (task, start, against), c in stored.items():
    a, b = ([r["dev"] for s, r in sorted(results["finetuning"][task].items())
             if s.rsplit("_seed", 1)[0] == group] for group in (start, against))
    assert c["difference"] == pytest.approx(np.mean(a) - np.mean(b))
    assert c["p"] == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue)
    assert c["p_permutation"] == pytest.approx(_permutation(a, b))
  main = json.loads((STUDY_DIR / "large_corpus" / "results.json").read_text())
  seeds = json.loads((STUDY_DIR / la.SEEDS_STUDY / "analysis.json").read_text())["analysis"]
  for c in seeds["comparisons"]:
    means = []
    for group in (c["start"], c["against"]):
      if group == "random_init":
        means.append(list(main["finetuning_labels100"][c["task"]]["random_init"]["runs"].values()))
        continue
      runs = []
      for seed in (1, 2, 3):
        run = json.loads((STUDY_DIR / la.SEEDS_STUDY / f"seed{seed}" / "results.json").read_text())
        start = {"electra": "electra_2000", "masked_lm": "mlm_3280"}[group]
        scores = run["finetuning_labels100"][c["task"]][start]["runs"]
        runs.append(np.mean([scores[str(f)] for f in range(1, 6)]))
      means.append(runs)
    assert c["difference"] == pytest.approx(np.mean(means[0]) - np.mean(means[1]))
    assert c["p"] == pytest.approx(stats.ttest_ind(*means, equal_var=False).pvalue)
    assert c["p_permutation"] == pytest.approx(_permutation(*means))
  _rederive_decisive(STUDY_DIR / la.DECISIVE_STUDY)


def _permutation(a, b, n_resamples=np.inf):
  """scipy's two-sided permutation p of mean(a) - mean(b): exact, or over
  n_resamples random splits (seeded)."""
  return stats.permutation_test(
      (a, b), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
      permutation_type="independent", vectorized=True, n_resamples=n_resamples,
      random_state=0).pvalue


def _rederive_decisive(decisive):
  """The decisive experiment's stored analysis against each arm's runs read
  from the raw files: runs done, the interim's sd over the first 6 an arm, and
  once in, each endpoint's test (scipy) and Holm over the two by hand."""
  stored = json.loads((decisive / "analysis.json").read_text())["analysis"]
  arms = {"electra": "electra_2000", "masked_lm": "mlm_3280",
          "masked_lm_arithmetic": "mlm_arithmetic_2168"}
  scores = {"labels100": {}, "full_labels": {}}
  for path in decisive.glob("seed*/results.json"):
    run = json.loads(path.read_text())
    for arm, start in arms.items():
      by_seed = run["finetuning_labels100"]["chunk"].get(start, {}).get("runs", {})
      if len(by_seed) == 10:
        scores["labels100"].setdefault(arm, {})[int(path.parent.name[4:])] = np.mean(
            list(by_seed.values()))
  full = json.loads((decisive / "full_labels" / "results.json").read_text())
  for start, record in full["finetuning"]["chunk"].items():
    if "dev" in record:
      arm, seed = start.rsplit("_seed", 1)
      scores["full_labels"].setdefault(arm, {})[int(seed)] = record["dev"]
  for endpoint, by_arm in scores.items():
    assert stored["runs_done"][endpoint] == {arm: len(runs) for arm, runs in by_arm.items()}
    assert stored["scores"][endpoint] == {arm: pytest.approx({str(s): v for s, v in runs.items()})
                                          for arm, runs in by_arm.items()}
    first = [[by_arm[arm][s] for s in sorted(by_arm[arm])[:6]]
             for arm in ("electra", "masked_lm")]
    assert stored["interim"]["endpoints"][endpoint]["pooled_sd"] == pytest.approx(
        math.sqrt((np.var(first[0], ddof=1) + np.var(first[1], ddof=1)) / 2))
  planned = stored["interim"]["runs_an_arm"]
  for key, against in (("endpoints", "masked_lm"),
                       ("arithmetic_endpoints", "masked_lm_arithmetic")):
    if not stored.get(key):
      continue
    ps = []
    for c in stored[key]:
      by_arm = scores[c["endpoint"]]
      a, b = ([by_arm[arm][s] for s in sorted(by_arm[arm])[:planned]]
              for arm in ("electra", against))
      welch = stats.ttest_ind(a, b, equal_var=False)
      assert c["difference"] == pytest.approx(np.mean(a) - np.mean(b))
      assert c["p"] == pytest.approx(welch.pvalue)
      assert c["ci95"] == pytest.approx(list(welch.confidence_interval(0.95)))
      # 12 against 12 has 2.7M splits; scipy's exact count takes about 30 s, so
      # its Monte Carlo estimate over 100,000 of them (sd at most 0.0016) stands in.
      assert c["p_permutation"] == pytest.approx(_permutation(a, b, 100_000), abs=0.01)
      ps.append(c["p"])
    holm = [min(1.0, 2 * min(ps)), 1.0]
    holm[1] = max(holm[0], max(ps))
    assert sorted(c["p_holm"] for c in stored[key]) == pytest.approx(holm)


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


def _decisive_runs(root, scores, arithmetic=None):
  """A decisive/ folder with the given {seed: (electra, masked LM)} scores on
  both endpoints (100 labels: 10 fine-tuning seeds around the score), and
  the masked LM matched on arithmetic's {seed: score}."""
  full = {}
  for seed, (electra, masked) in scores.items():
    starts = [("electra_2000", electra), ("mlm_3280", masked)]
    settings = {"model": {"seed": seed}, "steps": 2000, "mlm_steps": {"2000": 3280}}
    if seed in (arithmetic or {}):
      starts.append(("mlm_arithmetic_2168", arithmetic[seed]))
      settings["arithmetic_mlm_steps"] = {"2000": 2168}
      full[f"masked_lm_arithmetic_seed{seed}"] = {"dev": arithmetic[seed] + 20}
    by_start = {start: {"runs": {str(f): score + (f - 5.5) / 10 for f in range(1, 11)}}
                for start, score in starts}
    path = root / la.DECISIVE_STUDY / f"seed{seed}" / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"settings": settings,
                                "finetuning_labels100": {"chunk": by_start}}))
    full[f"electra_seed{seed}"] = {"dev": electra + 20}
    full[f"masked_lm_seed{seed}"] = {"dev": masked + 20}
  path = root / la.DECISIVE_STUDY / "full_labels" / "results.json"
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps({"finetuning": {"chunk": full}}))


def test_decisive_experiment_shows_no_difference_before_it_is_complete(tmp_path):
  rng = np.random.default_rng(5)
  scores = {seed: (38.0 + rng.normal(0, 0.3), 38.5 + rng.normal(0, 0.3)) for seed in range(11, 23)}
  assert la.analyse_decisive(tmp_path) is None
  _decisive_runs(tmp_path, {s: scores[s] for s in range(11, 16)})
  early = la.analyse_decisive(tmp_path)
  assert early["runs_done"]["labels100"] == {"electra": 5, "masked_lm": 5}
  assert early["interim"] is None and early["endpoints"] is None
  assert "38." not in la.decisive_table(early)  # no score, no difference
  _decisive_runs(tmp_path, {s: scores[s] for s in range(11, 18)})
  interim = la.analyse_decisive(tmp_path)
  first6 = [[scores[s][arm] for s in range(11, 17)] for arm in (0, 1)]
  pooled = math.sqrt((np.var(first6[0], ddof=1) + np.var(first6[1], ddof=1)) / 2)
  assert interim["interim"]["endpoints"]["labels100"]["pooled_sd"] == pytest.approx(pooled)
  assert interim["interim"]["runs_an_arm"] == 12 and interim["endpoints"] is None
  assert "not before every run is in" in la.decisive_table(interim)
  _decisive_runs(tmp_path, scores)
  final = la.analyse_decisive(tmp_path)
  by_endpoint = {c["endpoint"]: c for c in final["endpoints"]}
  electra = [scores[s][0] for s in range(11, 23)]
  masked = [scores[s][1] for s in range(11, 23)]
  assert by_endpoint["labels100"]["p"] == pytest.approx(
      stats.ttest_ind(electra, masked, equal_var=False).pvalue)
  assert by_endpoint["full_labels"]["difference"] == pytest.approx(
      np.mean(electra) - np.mean(masked))
  assert [c["p_holm"] for c in final["endpoints"]] == la.holm([c["p"] for c in final["endpoints"]])
  assert "arithmetic" not in la.decisive_table(final) and "arithmetic_endpoints" not in final

  # The masked LM matched on arithmetic: its rows appear with its first run, its
  # comparison once it has as many runs as the others.
  matched = {seed: 38.2 + rng.normal(0, 0.3) for seed in range(11, 23)}
  _decisive_runs(tmp_path, scores, {s: matched[s] for s in range(11, 17)})
  partial = la.analyse_decisive(tmp_path)
  assert partial["runs_done"]["full_labels"][la.ARITHMETIC_ARM] == 6
  assert partial["endpoints"] == final["endpoints"] and "arithmetic_endpoints" not in partial
  rows = [row for row in la.decisive_table(partial).splitlines() if "arithmetic" in row]
  assert len(rows) == 2 and all("| 12 / 6 |" in r and "not before" in r for r in rows)
  _decisive_runs(tmp_path, scores, matched)
  both = la.analyse_decisive(tmp_path)
  against = {c["endpoint"]: c for c in both["arithmetic_endpoints"]}
  arithmetic = [matched[s] for s in range(11, 23)]
  for endpoint in ("full_labels", "labels100"):
    assert against[endpoint]["against"] == la.ARITHMETIC_ARM
    assert against[endpoint]["p"] == pytest.approx(
        stats.ttest_ind(electra, arithmetic, equal_var=False).pvalue)
    assert against[endpoint]["difference"] == pytest.approx(np.mean(electra) - np.mean(arithmetic))
  assert both["endpoints"] == final["endpoints"]
  (tmp_path / la.DECISIVE_STUDY / "analysis.json").write_text(json.dumps({"analysis": both}))
  _rederive_decisive(tmp_path / la.DECISIVE_STUDY)
  # The figure: each arm's 12 runs as dots, per endpoint (full labels: score + 20).
  drawn = la.decisive_figure(tmp_path, both, tmp_path / "decisive.png")
  for endpoint, shift in (("full_labels", 20.0), ("labels100", 0.0)):
    assert drawn[endpoint] == {
        arm: pytest.approx([v + shift for v in values]) for arm, values in (
            ("electra", electra), ("masked_lm", masked), (la.ARITHMETIC_ARM, arithmetic))}
  assert (tmp_path / "decisive.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_defect_checks_read_each_runs_curve(tmp_path):
  """A full_label_study work dir run with --epoch_metrics: its curve, row by
  row, with the layers' norms combined."""
  points = [{"epoch": float(step), "step": step, "dev": {"chunk": {"f1": f1}},
             "train_loss": loss, "weight_norms": {"embeddings": 10.0 + step, "layer_0": 3.0,
                                                  "layer_1": 4.0 + step, "heads": 1.0}}
            for step, f1, loss in ((0, 0.5, None), (1, 40.0, 0.9), (2, 60.0, 0.4))]
  results = {"settings": {"finetuning_hparams": {"layerwise_lr_decay": 1.0},
                          "num_train_epochs": {"chunk": 2.0}},
             "finetuning": {"chunk": {"official_step0": {"runs": {"0.003": {
                 "selection": 61.0, "dev": 60.0, "epochs": points}}}}}}
  path = tmp_path / la.DEFECT_STUDY / "decay10" / "results.json"
  path.parent.mkdir(parents=True)
  path.write_text(json.dumps(results))
  analysis = la.analyse_defect_checks(tmp_path)
  row = analysis["checks"]["decay10"][0]
  assert row["dev_by_epoch"] == [0.5, 40.0, 60.0] and row["train_loss_by_epoch"] == [0.9, 0.4]
  assert row["layers_norm"] == [5.0, pytest.approx(math.sqrt(9 + 25)), pytest.approx(
      math.sqrt(9 + 36))]
  assert la.defect_checks_table(analysis).splitlines()[2] == (
      "| decay10: official_step0 | 0.003, 1, 2 | 0.5, 40.0, 60.0 | 0.900, 0.400 | "
      "10.0 → 12.0; 5.0 → 6.7 |")
  # An epoch the run did not record (killed and resumed) is a gap, not skipped.
  del points[1]
  path.write_text(json.dumps(results))
  row = la.analyse_defect_checks(tmp_path)["checks"]["decay10"][0]
  assert row["dev_by_epoch"] == [0.5, None, 60.0] and row["train_loss_by_epoch"] == [None, 0.4]
  assert "| 0.5, –, 60.0 | –, 0.400 |" in la.defect_checks_table(
      la.analyse_defect_checks(tmp_path))
  assert la.analyse_defect_checks(tmp_path / "none") is None


def test_official_trajectory_figures_are_the_committed_run():
  """learning.md's table against the official learning curve (five seeds a
  side, each window's exact permutation p), its eval line, the summary's
  residue and the README's figures restate `official_trajectory.json` (the
  tool's --json summary), window by window."""
  run = json.loads((STUDY_DIR / "official_trajectory.json").read_text(encoding="utf-8"))
  text = _read(LEARNING_MD)
  windows = run["windows"]
  for window in windows["mlm_loss"]:
    cells = [window]
    for loss in ("mlm_loss", "disc_loss"):
      w = windows[loss][window]
      assert len(w["official"]) == len(w["ours"]) == 5
      assert w["p_permutation"] == pytest.approx(la.permutation_p(w["ours"], w["official"]))
      cells += [f"{w['official_mean']:.3f} ({w['official_min']:.3f}-{w['official_max']:.3f})",
                f"{np.mean(w['ours']):.3f} ({min(w['ours']):.3f}-{max(w['ours']):.3f})",
                f"{w['p_permutation']:.2f}"]
    assert "| " + " | ".join(cells) + " |" in text, window
  recall = run["eval"]["disc_recall"]
  assert ("`disc_recall` " + ", ".join(f"{x:.2f}" for x in recall["official"]) + " / "
          + ", ".join(f"{x:.2f}" for x in recall["ours"])) in text
  early, middle, late = (windows["mlm_loss"][w] for w in ("101-200", "201-300", "301-400"))
  assert min(early["ours"]) > max(early["official"])  # every seed above: the residue
  assert (f"the generator is {early['gap']:.2f} nats behind at steps 101-200 on every seed "
          f"(exact permutation p {early['p_permutation']:.3f};") in _flat(_summary())
  readme = _flat(_read(README))
  assert abs(middle["gap"]) < 0.005  # "level"
  assert (f"our mlm_loss over steps 101-200 is {early['gap']:.2f} nats above the official mean "
          f"(every seed), level with it over 201-300 (p {middle['p_permutation']:.2f}) and "
          f"{late['gap']:.2f} above over 301-400 (p {late['p_permutation']:.2f};") in readme
  assert len(run["curves"]["official"]) == len(run["curves"]["ours"]) == 5


def test_embedded_default_figures_are_the_committed_run():
  """The default's row in learning.md, the README's AUC and its time restate
  `embedded_default.json` (the command's own results file)."""
  run = json.loads((STUDY_DIR / "embedded_default.json").read_text(encoding="utf-8"))
  ev = run["eval"]
  row = (f"| **{ev['disc_auc_real_tokens']:.3f}** | **{ev['disc_precision']:.2f}** | "
         f"**{ev['disc_recall']:.2f}** | {ev['disc_accuracy']:.3f} "
         f"({ev['disc_always_real_accuracy']:.3f}) | {ev['masked_lm_accuracy']:.3f} |")
  assert row in _read(LEARNING_MD)
  readme = " ".join(_read(README).split())
  assert f"(AUC over real tokens {ev['disc_auc_real_tokens']:.3f} after 400 steps)" in readme
  # Its start and end stamps, in minutes.
  h0, m0, h1, m1 = map(int, re.search(r"(\d\d):(\d\d)-(\d\d):(\d\d) UTC", run["about"]).groups())
  machine = run["machine"].split(",")[0]
  assert (f"{(h1 * 60 + m1) - (h0 * 60 + m0)} minutes start to end on a {machine} "
          f"beside a test run, {run['date']})") in readme


def test_residue_paragraph_quotes_its_files():
  """learning.md's residue figures: dropout_off.json's gap, the 8 official runs
  against our 5 (official_trajectory.json and the official group runs), and
  same_order.json's trace: the official code on our pipeline's record order
  against the official order, and both sides on one order."""
  text = " ".join(_read(LEARNING_MD).split())
  residue = STUDY_DIR / "residue"
  runs = json.loads(_read(residue / "dropout_off.json"))["nodrop"]
  window = {side: [float(np.mean(v[100:200])) for v in runs[side].values()]
            for side in ("ours", "official")}
  gap = np.mean(window["ours"]) - np.mean(window["official"])
  assert f"stays (+{gap:.3f}" in text and min(window["ours"]) > max(window["official"])
  official = [json.loads(_read(residue / f"official_groups_seed{s}.json"))["steps"]
              for s in (1, 2, 3)]
  losses = [float(np.mean([e["mlm_loss"] for e in steps if 101 <= e["step"] <= 200]))
            for steps in official]
  curves = json.loads(_read(STUDY_DIR / "official_trajectory.json"))["windows"]["mlm_loss"][
      "101-200"]
  all_official = list(curves["official"]) + losses
  assert len(all_official) == 8 and max(all_official) > min(curves["ours"])  # ranges overlap
  gap = np.mean(curves["ours"]) - np.mean(all_official)
  assert (f"8 official runs against our 5 differ by +{gap:.3f} (exact p "
          f"{la.permutation_p(curves['ours'], all_official):.3f}") in text
  traced = json.loads(_read(residue / "same_order.json"))
  swap = {arm: [w["mlm_loss 101-200"] for w in windows]
          for arm, windows in traced["order_swap"]["windows"].items()}
  ours_order, official_order = swap["official_code_our_order"], swap["official_code_official_order"]
  assert len(ours_order) == len(official_order) == 4 and len(swap["our_code_our_order"]) == 8
  assert (f"sits as high as ours ({np.mean(swap['our_code_our_order']):.3f}, 8 seeds): "
          f"{np.mean(ours_order):.3f} at 101-200 against {np.mean(official_order):.3f} on the "
          f"official pipeline's order (+{np.mean(ours_order) - np.mean(official_order):.3f}, "
          f"exact p {la.permutation_p(ours_order, official_order):.3f}, 4 against 4's least)") in text
  assert la.permutation_p(swap["our_code_our_order"], ours_order) > 0.3  # as high as ours
  same = traced["same_order"]["runs"]
  sides = [[run["windows"]["mlm_loss"]["101-200"] for run in same[side]]
           for side in ("ours", "official")]
  assert len(sides[0]) == len(sides[1]) == 5
  assert (f"five seeds a side: +{np.mean(sides[0]) - np.mean(sides[1]):.3f} "
          f"(p {la.permutation_p(*sides):.2f})") in text


def test_replay_figures_are_replay_json():
  """The replay's quoted figures, recomputed from replay.json's per-step curves:
  fed the official draws (and the official lr) our losses are within 3e-6 of
  the official at every step, at dropout 0 and 0.1; the step-1 gradients within
  4e-7 per group; the generator's norm ratio 1.0000 in both windows; with our
  own lr, +0.001 nats over 101-200."""
  text = " ".join(_read(LEARNING_MD).split())
  replay = json.loads(_read(STUDY_DIR / "residue" / "replay.json"))
  dropout0, dropout01 = replay["curves"]["dropout 0"], replay["curves"]["dropout 0.1"]
  pairs = [(dropout0["official"], dropout0["ours, the official run's lr fed in"]),
           (dropout01["official"], next(v for k, v in dropout01.items() if k != "official"))]
  worst = 0.0
  for official, ours in pairs:
    assert ours["labels_match_official_every_step"] and ours["sampled_match_every_step"]
    assert len(ours["mlm_loss"]) == len(official["mlm_loss"]) == 200
    for loss in ("mlm_loss", "disc_loss"):
      worst = max(worst, float(np.max(np.abs(np.subtract(ours[loss], official[loss])))))
    for window in (slice(0, 100), slice(100, 200)):
      ratio = (np.mean(ours["group_norms"]["generator"][window])
               / np.mean(official["group_norms"]["generator"][window]))
      assert f"{ratio:.4f}" == "1.0000"
  assert worst < 3e-6 and "gives its losses to 3e-6" in text
  by_group = replay["comparisons"]["dropout 0"]["grads_ours"]["by_group"]
  assert max(by_group.values()) < 4e-7 and "step-1 gradients within 4e-7 in every group" in text
  own = np.mean(dropout0["ours"]["mlm_loss"][100:]) - np.mean(dropout0["official"]["mlm_loss"][100:])
  assert f"+{own:.3f} nats at 101-200" in text and "(generator norm ratio 1.0000)" in text
