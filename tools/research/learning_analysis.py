"""The learning study's comparisons, recomputed from its results.json files.

    python -m tools.research.learning_analysis --study_dir=docs/learning_study            # check
    python -m tools.research.learning_analysis --study_dir=docs/learning_study --write    # update

For every fine-tuning setting of every committed study (the runs under
`finetuning*` in each results.json), this computes:
  - each start's mean and sample standard deviation over its fine-tuning seeds;
  - a family of comparisons: every pre-trained start against random
    initialisation, ELECTRA against the masked LM at equal FLOPs, and (large
    corpus) each probe against the main run's checkpoint it varies; for each,
    the difference of means with its 95% Welch interval, Welch's t, degrees of
    freedom and two-sided p, the paired t and p over the fine-tuning seeds both
    ran (the same seed: the same data order, head initialisation and dropout),
    on how many of them the start scored higher, and Holm's adjusted p over the
    setting's whole family (every task);
  - trivial baselines on the same training sample the models fine-tuned on
    (the first N training examples): each word's most frequent chunk tag in
    it (unseen words: the sample's most frequent tag), scored with the
    project's chunk scorer; a multinomial Naive Bayes over lower-cased
    whitespace tokens (add-one smoothing) and the majority class for the
    sentence tasks (accuracy for SST-2, MCC x 100 for CoLA), the Naive Bayes
    both over token counts and over token presence (binary: each token once a
    sentence);
  - the pre-training FLOPs per step of both objectives, counted as the
    official script does (embedding lookups charged as one-hot matrix
    products) and without those lookups (a lookup is a copy).
With the pre-training seeds of `large_corpus_seeds/seed*/results.json`, it
also compares the objectives with the pre-training run as the unit: each run's
mean over its fine-tuning seeds, then Welch over the runs. With the
full-training-set study of `full_labels/results.json` (tools/research/full_label_study.py),
it compares the objectives the same way, each run scored at the learning rate
its selection set chose (analyse_full_labels).

--write stores the analysis as `analysis` (and `pretraining_runs` where a
results.json lacks them) in each results.json and rewrites the tables between
`<!-- analysis:NAME -->` and `<!-- /analysis -->` in --doc (DOC_TABLES must be
there; any other table may be), and once the decisive experiment's endpoints are
in, draws them (decisive/decisive.png, decisive_figure); without it, the tool
exits 1 if any stored analysis or table differs from the recomputed one.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import pathlib
import re
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from absl import flags

from electra_tf import cli
from electra_tf.errors import DataError
from tools.research import study_samples

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
SHARED = REPO.parent / "shared" / "data"

FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module beside other tools)."""
  flags.DEFINE_string("study_dir", str(REPO / "docs" / "learning_study"),
                      "Folder of the studies' results.json files.")
  flags.DEFINE_string("doc", str(REPO / "docs" / "learning.md"),
                      "Markdown file whose analysis tables are checked / rewritten.")
  flags.DEFINE_string("finetuning_data_dir", str(SHARED / "finetuning_data"),
                      "Folder with <task>/ fine-tuning data (for the baselines).")
  flags.DEFINE_boolean("write", False, "Store the analysis and rewrite the tables.")


ALPHA = 0.05
BASELINE_NAMES = "most frequent tag; Naive Bayes, counts / presence (majority class)"
TASK_TITLE = {"chunk": "chunking F1", "sst": "SST-2 accuracy", "cola": "CoLA MCC x 100"}
# The key of each task's score in run_finetuning.py's metrics.
TASK_METRIC_KEY = {"chunk": "f1", "sst": "accuracy", "cola": "mcc"}


@dataclasses.dataclass(frozen=True)
class Study:
  """One committed study: its results.json (relative to the study folder) and,
  for the large corpus, the probes whose checkpoint joins its family."""
  name: str
  path: str
  probes: Tuple[Tuple[str, str], ...] = ()  # (start name, results.json)
  probe_reference: str = ""  # the main run's start the probes vary


STUDIES = (
    Study("budget_400_steps", "results.json"),
    Study("budget_6000_steps", "budget_6000_steps/results.json"),
    Study("in_domain_text", "in_domain_text/results.json"),
    Study("large_corpus", "large_corpus/results.json",
          probes=(("disc_weight_10_2000", "large_corpus/probe_disc_weight_10/results.json"),
                  ("generator_half_2000", "large_corpus/probe_generator_half/results.json")),
          probe_reference="electra_2000"),
)
SEEDS_STUDY = "large_corpus_seeds"


# ------------------------------------------------------------------ statistics
def mean_sd(values: Sequence[float]) -> Tuple[float, float]:
  """Mean and sample standard deviation (0 for a single value)."""
  n = len(values)
  centre = sum(values) / n
  return centre, math.sqrt(sum((v - centre) ** 2 for v in values) / max(1, n - 1))


def welch(a: Sequence[float], b: Sequence[float]) -> Dict:
  """mean(a) - mean(b) with Welch's t, its Satterthwaite degrees of freedom,
  the two-sided p and the 95% interval of the difference; t, df, p and the
  interval are None when a side has one value or neither side any spread."""
  from scipy import stats  # pylint: disable=g-import-not-at-top
  (ma, sa), (mb, sb) = mean_sd(a), mean_sd(b)
  out = {"difference": ma - mb, "n": [len(a), len(b)], "welch_t": None, "df": None,
         "p": None, "ci95": None}
  va, vb = sa ** 2 / len(a), sb ** 2 / len(b)
  if len(a) < 2 or len(b) < 2 or va + vb == 0:
    return out
  se = math.sqrt(va + vb)
  df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
  t = out["difference"] / se
  half = float(stats.t.ppf(0.975, df)) * se
  out.update(welch_t=t, df=df, p=float(2 * stats.t.sf(abs(t), df)),
             ci95=[out["difference"] - half, out["difference"] + half])
  return out


def subset_sums(values):
  """{size: sums of every subset of `values` of that size} (numpy arrays; 2^len(values) in all)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  sums, sizes = np.zeros(1), np.zeros(1, dtype=np.int64)
  for value in values:
    sums, sizes = np.concatenate([sums, sums + value]), np.concatenate([sizes, sizes + 1])
  return {size: sums[sizes == size] for size in range(len(values) + 1)}


def permutation_p(a: Sequence[float], b: Sequence[float]) -> Optional[float]:
  """The exact two-sided permutation p of mean(a) - mean(b): over every way of
  splitting the pooled values into groups of len(a) and len(b), twice the
  smaller share of splits whose difference is at most / at least the
  observed one, capped at 1, as scipy.stats.permutation_test
  (permutation_type="independent") computes it exactly. Differences within
  1e-9 of the data's scale of the observed one count as ties (scores such as
  accuracies tie exactly; float sums must not break them). No distributional
  assumption: with 3 runs a side its smallest value is 2/20 = 0.10. None
  when a side is empty. Each split's group sum is a subset sum of the pooled
  values' first half plus one of their second half, so 12 runs against 12
  (2.7M splits) take 4,096-subset tables and their outer sums."""
  if not a or not b:
    return None
  import numpy as np  # pylint: disable=g-import-not-at-top
  pooled = np.asarray(list(a) + list(b), dtype=np.float64)
  observed = float(np.mean(a) - np.mean(b))
  tolerance = 1e-9 * float(np.max(np.abs(pooled)) or 1.0)
  half = len(pooled) // 2
  first, second = subset_sums(pooled[:half]), subset_sums(pooled[half:])
  at_most = at_least = total = 0
  for taken in range(len(a) + 1):  # of group a's values, how many from the first half
    if taken not in first or len(a) - taken not in second:
      continue
    sums = (first[taken][:, None] + second[len(a) - taken][None, :]).ravel()
    null = sums / len(a) - (pooled.sum() - sums) / len(b)
    at_most += np.count_nonzero(null <= observed + tolerance)
    at_least += np.count_nonzero(null >= observed - tolerance)
    total += len(null)
  return min(1.0, 2 * min(at_most, at_least) / total)


def runs_compared(a: Sequence[float], b: Sequence[float]) -> Dict:
  """welch(a, b) and the exact permutation_p beside it: a comparison with
  the pre-training run (or an initialisation seed) as the unit."""
  return dict(welch(a, b), p_permutation=permutation_p(a, b))


def holm_both(comparisons: List[Dict]) -> None:
  """Holm's adjustment of a family's Welch p (p_holm) and, where the
  comparisons have them, of its permutation p (p_permutation_holm)."""
  for comparison, adjusted in zip(comparisons, holm([c["p"] for c in comparisons])):
    comparison["p_holm"] = adjusted
  if comparisons and "p_permutation" in comparisons[0]:
    for comparison, adjusted in zip(comparisons,
                                    holm([c["p_permutation"] for c in comparisons])):
      comparison["p_permutation_holm"] = adjusted


def paired(a: Dict[str, float], b: Dict[str, float]) -> Dict:
  """The paired comparison over the seeds both ran: t, two-sided p, and on how
  many of them a scored higher (t and p None with fewer than 2 seeds or no
  spread in the differences)."""
  from scipy import stats  # pylint: disable=g-import-not-at-top
  common = sorted(set(a) & set(b), key=int)
  differences = [a[s] - b[s] for s in common]
  out = {"common_seeds": len(common), "higher_on_seeds": sum(d > 0 for d in differences),
         "paired_t": None, "paired_p": None}
  if len(common) > 1:
    centre, sd = mean_sd(differences)
    if sd > 0:
      t = centre / (sd / math.sqrt(len(common)))
      out.update(paired_t=t, paired_p=float(2 * stats.t.sf(abs(t), len(common) - 1)))
  return out


def holm(pvalues: Sequence[Optional[float]]) -> List[Optional[float]]:
  """Holm's step-down adjusted p values (None stays None and does not count
  in the family)."""
  order = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
  m = len(order)
  adjusted: List[Optional[float]] = [None] * len(pvalues)
  running = 0.0
  for rank, (p, index) in enumerate(order):
    running = max(running, min(1.0, (m - rank) * p))
    adjusted[index] = running
  return adjusted


def detectable_difference(sd_a: float, sd_b: float, runs: int, alpha: float,
                          power: float = 0.8) -> float:
  """The smallest difference of two arms' means (`runs` each, sds sd_a and
  sd_b) that a two-sided t-test at `alpha` finds with `power`: the standard
  error sqrt((sd_a² + sd_b²) / runs), 2 runs - 2 degrees of freedom, the
  noncentral t's power solved for its noncentrality."""
  from scipy import optimize, stats  # pylint: disable=g-import-not-at-top
  se = math.sqrt((sd_a ** 2 + sd_b ** 2) / runs)
  df = 2 * runs - 2
  critical = float(stats.t.ppf(1 - alpha / 2, df))

  def shortfall(noncentrality: float) -> float:
    wrong_side = float(stats.nct.cdf(-critical, df, noncentrality))  # nan once it underflows
    return float(stats.nct.sf(critical, df, noncentrality)) + (
        0.0 if math.isnan(wrong_side) else wrong_side) - power
  return se * optimize.brentq(shortfall, 0.0, critical + 6.0)


def runs_needed(sd_a: float, sd_b: float, difference: float, alpha: float,
                minimum: int, maximum: int, power: float = 0.8) -> int:
  """The fewest runs an arm, from `minimum` to `maximum`, whose
  detectable_difference is at most `difference` (`maximum` if none is)."""
  for runs in range(minimum, maximum + 1):
    if detectable_difference(sd_a, sd_b, runs, alpha, power) <= difference:
      return runs
  return maximum


# ------------------------------------------------------------------ baselines
def chunk_sentences(text: str) -> List[Tuple[List[str], List[str]]]:
  """(words, IOB2 tags) per sentence of CoNLL-2000 text."""
  sentences = []
  for block in text.strip("\n").split("\n\n"):
    rows = [line.split() for line in block.splitlines() if line.strip()]
    rows = [row for row in rows if row[0] != "-DOCSTART-"]
    if rows:
      sentences.append(([row[0] for row in rows], [row[-1] for row in rows]))
  return sentences


def most_frequent_tag_f1(train: Sequence[Tuple[Sequence[str], Sequence[str]]],
                         dev: Sequence[Tuple[Sequence[str], Sequence[str]]]) -> float:
  """Chunk F1 x 100 (the project's span scorer) of tagging each dev word with
  its most frequent tag in `train` (ties: the tag seen first; unseen words:
  the most frequent tag overall)."""
  from electra_tf.finetune.tagging import tagging_metrics  # pylint: disable=g-import-not-at-top
  by_word: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  overall: collections.Counter = collections.Counter()
  for words, tags in train:
    for word, tag in zip(words, tags):
      by_word[word][tag] += 1
      overall[tag] += 1
  fallback = overall.most_common(1)[0][0]
  predicted = [[by_word[w].most_common(1)[0][0] if w in by_word else fallback for w in words]
               for words, _ in dev]
  return 100.0 * tagging_metrics.span_precision_recall_f1([tags for _, tags in dev], predicted)[2]


def sentence_examples(text: str, task: str) -> List[Tuple[List[str], str]]:
  """(lower-cased whitespace tokens, label) of a GLUE SST-2 or CoLA file."""
  lines = text.splitlines()
  if task == "sst":
    rows = [line.split("\t") for line in lines[1:] if line.strip()]
    return [(row[0].lower().split(), row[1].strip()) for row in rows]
  rows = [line.split("\t") for line in lines if line.strip()]  # cola: no header
  return [(row[3].lower().split(), row[1].strip()) for row in rows]


def naive_bayes_predictions(train: Sequence[Tuple[Sequence[str], str]],
                            dev: Sequence[Sequence[str]], alpha: float = 1.0) -> List[str]:
  """Multinomial Naive Bayes over bags of tokens with add-alpha smoothing over
  the training vocabulary; dev tokens unseen in training are ignored."""
  counts: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  documents = collections.Counter(label for _, label in train)
  for tokens, label in train:
    counts[label].update(tokens)
  vocabulary = set(t for c in counts.values() for t in c)
  labels = sorted(documents)
  totals = {label: sum(counts[label].values()) for label in labels}
  predictions = []
  for tokens in dev:
    scores = {}
    for label in labels:
      score = math.log(documents[label] / len(train))
      denominator = totals[label] + alpha * len(vocabulary)
      score += sum(math.log((counts[label][t] + alpha) / denominator)
                   for t in tokens if t in vocabulary)
      scores[label] = score
    predictions.append(max(labels, key=lambda label: (scores[label], label)))
  return predictions


def sentence_score(task: str, gold: Sequence[str], predicted: Sequence[str]) -> float:
  from electra_tf.finetune import metrics  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune.classification import (  # pylint: disable=g-import-not-at-top
      classification_metrics)
  if task == "cola":
    return 100.0 * classification_metrics.matthews_corrcoef(gold, predicted)
  return 100.0 * metrics.accuracy(gold, predicted)


def trivial_baselines(task: str, train_examples: int, data_dir: pathlib.Path) -> Dict:
  """The baselines of `task` on its first `train_examples` training examples
  (the study's cut, study_samples.head_examples), scored on the whole dev set."""
  return baselines_on(task, study_samples.head_examples(
      study_samples.training_text(task, data_dir), task, train_examples), data_dir)


def baselines_on(task: str, train_text: str, data_dir: pathlib.Path) -> Dict:
  """The trivial baselines fitted on `train_text` (a training file's text),
  scored on the whole dev set of data_dir/<task>/."""
  folder = pathlib.Path(data_dir) / task
  if task == "chunk":
    dev = chunk_sentences((folder / "dev.txt").read_text(encoding="utf-8"))
    return {"most_frequent_tag": most_frequent_tag_f1(chunk_sentences(train_text), dev)}
  train = sentence_examples(train_text, task)
  dev = sentence_examples((folder / "dev.tsv").read_text(encoding="utf-8"), task)
  gold = [label for _, label in dev]
  majority = collections.Counter(label for _, label in train).most_common(1)[0][0]
  binary = [(sorted(set(tokens)), label) for tokens, label in train]
  return {"naive_bayes": sentence_score(task, gold, naive_bayes_predictions(
              train, [tokens for tokens, _ in dev])),
          "naive_bayes_binary": sentence_score(task, gold, naive_bayes_predictions(
              binary, [sorted(set(tokens)) for tokens, _ in dev])),
          "majority_class": sentence_score(task, gold, [majority] * len(dev))}


# ------------------------------------------------------------------ FLOPs
def flops_both_ways(model: Dict, vocab_size: int) -> Dict:
  """Training FLOPs per step of ELECTRA and of the masked LM of `model` (the
  study's settings.model), counted officially and without the embedding
  lookups' one-hot products; the ratios ELECTRA / masked LM."""
  from electra_tf import flops  # pylint: disable=g-import-not-at-top
  from electra_tf.pretrain.config import PretrainingConfig  # pylint: disable=g-import-not-at-top
  out = {}
  for name, electra_objective in (("electra", True), ("masked_lm", False)):
    config = PretrainingConfig.create(dict(model, vocab_size=vocab_size,
                                           electra_objective=electra_objective))
    official = flops.flops_per_seq(config)
    lookups = flops.lookup_flops_per_seq(config)
    out[name] = {"official": official * config.train_batch_size,
                 "without_lookups": (official - lookups) * config.train_batch_size,
                 "lookup_share": lookups / official}
  out["ratio_official"] = out["electra"]["official"] / out["masked_lm"]["official"]
  out["ratio_without_lookups"] = (out["electra"]["without_lookups"]
                                  / out["masked_lm"]["without_lookups"])
  return out


# ------------------------------------------------------------------ analysis
def start_label(start: str) -> str:
  if start == "random_init":
    return "random initialisation"
  name, step = start.rsplit("_", 1)
  title = {"electra": "ELECTRA", "mlm": "masked LM",
           "disc_weight_10": "ELECTRA `disc_weight` 10 (2,000-step schedule)",
           "generator_half": "ELECTRA `generator_hidden_size` 0.5 (2,000-step schedule)"}[name]
  return f"{title}, step {int(step):,}"


def setting_comparisons(starts: Dict[str, Dict[str, Dict[str, float]]],
                        mlm_steps: Dict[str, int], probes: Sequence[str],
                        probe_reference: str) -> List[Tuple[str, str, str]]:
  """(task, start, against) of a setting's family, in a fixed order."""
  family = []
  for task in sorted(starts):
    names = [s for s in starts[task] if s != "random_init"]
    names.sort(key=lambda s: (s in probes, int(s.rsplit("_", 1)[1]), s))
    family += [(task, s, "random_init") for s in names if "random_init" in starts[task]]
    for step, mlm_step in sorted(mlm_steps.items(), key=lambda item: int(item[0])):
      if f"electra_{step}" in starts[task] and f"mlm_{mlm_step}" in starts[task]:
        family.append((task, f"electra_{step}", f"mlm_{mlm_step}"))
    family += [(task, p, probe_reference) for p in probes if p in starts[task]]
  return family


def analyse_setting(starts: Dict[str, Dict[str, Dict[str, float]]], mlm_steps: Dict[str, int],
                    train_examples: int, data_dir: pathlib.Path, probes: Sequence[str] = (),
                    probe_reference: str = "") -> Dict:
  """The analysis of one fine-tuning setting: starts {task: {start: {seed: metric}}}."""
  levels = {task: {start: dict(zip(("mean", "sd"), mean_sd(list(runs.values()))),
                               n=len(runs))
                   for start, runs in by_start.items()}
            for task, by_start in starts.items()}
  comparisons = []
  for task, start, against in setting_comparisons(starts, mlm_steps, probes, probe_reference):
    a, b = starts[task][start], starts[task][against]
    comparisons.append({"task": task, "start": start, "against": against,
                        **welch(list(a.values()), list(b.values())), **paired(a, b)})
  for comparison, adjusted in zip(comparisons, holm([c["p"] for c in comparisons])):
    comparison["p_holm"] = adjusted
  return {"train_examples": train_examples, "family_size": sum(
              c["p"] is not None for c in comparisons),
          "starts": levels, "comparisons": comparisons,
          "baselines": {task: trivial_baselines(task, train_examples, data_dir)
                        for task in sorted(starts)}}


def between_checkpoints(starts: Dict[str, Dict[str, Dict[str, float]]],
                        probes: Sequence[str]) -> Dict:
  """How much one study's ELECTRA-family checkpoints (its electra_<step> starts
  and the probes) differ among themselves, against the fine-tuning noise the
  per-start tests assume; per task: each checkpoint's mean, their sd, the
  median standard error of one start's mean, ELECTRA's first against last
  checkpoint of the main run (Welch), and ELECTRA family against the masked
  LM's checkpoints with each checkpoint's mean as one observation (Welch)."""
  out = {}
  for task, by_start in sorted(starts.items()):
    electra = sorted((s for s in by_start if s.startswith("electra_")),
                     key=lambda s: int(s.rsplit("_", 1)[1]))
    family = electra + [p for p in probes if p in by_start]
    masked = [s for s in by_start if s.startswith("mlm_")]
    means = {s: mean_sd(list(by_start[s].values()))[0] for s in family + masked}
    errors = sorted(mean_sd(list(by_start[s].values()))[1] / math.sqrt(len(by_start[s]))
                    for s in family)
    out[task] = {"electra_checkpoint_means": {s: means[s] for s in family},
                 "electra_checkpoint_sd": mean_sd([means[s] for s in family])[1],
                 "standard_error_of_a_start": errors[len(errors) // 2],
                 "main_run_first_against_last": welch(list(by_start[electra[0]].values()),
                                                      list(by_start[electra[-1]].values())),
                 "checkpoint_as_unit": welch([means[s] for s in family],
                                             [means[s] for s in masked])}
  return out


def study_starts(study: Study, study_dir: pathlib.Path, setting: str
                 ) -> Dict[str, Dict[str, Dict[str, float]]]:
  """{task: {start: runs}} of a setting, with the probes' checkpoints joined
  under their own names (their random initialisation runs are the main run's)."""
  results = json.loads((study_dir / study.path).read_text())
  starts = {task: {start: dict(summary["runs"]) for start, summary in by_start.items()}
            for task, by_start in results[setting].items()}
  for name, path in study.probes:
    probe = json.loads((study_dir / path).read_text())
    step = name.rsplit("_", 1)[1]
    for task, by_start in probe.get(setting, {}).items():
      if by_start["random_init"]["runs"] != starts[task]["random_init"]:
        raise DataError(f"{path}: its random initialisation runs differ from the main run's")
      starts[task][name] = dict(by_start[f"electra_{step}"]["runs"])
  return starts


def train_examples_of(results: Dict, setting: str) -> int:
  recorded = results.get("finetuning_settings", {}).get(setting)
  return recorded["train_examples"] if recorded else results["settings"]["train_examples"]


def pretraining_runs_of(results: Dict, steps: Optional[int] = None) -> List[Dict]:
  """pretraining_runs for a results.json written before the tool recorded them
  (seed 0: the default of every committed run)."""
  settings = results["settings"]
  steps = steps or settings["steps"]
  finetuned = sorted({int(s.rsplit("_", 1)[1]) for key in results if key.startswith(
      "finetuning") and key != "finetuning_settings" for by_start in results[key].values()
                      for s in by_start if s.startswith("electra_")})
  mlm = settings["mlm_steps"]
  runs = [{"objective": "electra", "seed": settings["model"].get("seed", 0) if "model" in
           settings else 0, "steps": steps, "checkpoint": f"pretraining/electra/ckpt-{steps}",
           "finetuned_checkpoints": [f"pretraining/electra/ckpt-{s}" for s in finetuned]}]
  if settings.get("masked_lm", True):
    runs.append({"objective": "masked_lm", "seed": runs[0]["seed"],
                 "steps": mlm[str(steps)], "checkpoint": f"pretraining/mlm/ckpt-{mlm[str(steps)]}",
                 "finetuned_checkpoints": [f"pretraining/mlm/ckpt-{mlm[str(s)]}"
                                           for s in finetuned]})
  return runs


def analyse_study(study: Study, study_dir: pathlib.Path, data_dir: pathlib.Path) -> Dict:
  results = json.loads((study_dir / study.path).read_text())
  analysis = {}
  for setting in sorted(k for k in results if k.startswith("finetuning")
                        and k != "finetuning_settings"):
    analysis[setting] = analyse_setting(
        study_starts(study, study_dir, setting), results["settings"]["mlm_steps"],
        train_examples_of(results, setting), data_dir,
        [name for name, _ in study.probes], study.probe_reference)
    if study.probes:
      analysis[setting]["between_checkpoints"] = between_checkpoints(
          study_starts(study, study_dir, setting), [name for name, _ in study.probes])
  if "model" in results["settings"]:
    analysis["flops_per_step"] = flops_both_ways(results["settings"]["model"],
                                                 results["settings"]["vocab_size"])
  return analysis


def analyse_seeds(study_dir: pathlib.Path, main: Dict) -> Optional[Dict]:
  """The pre-training run as the unit: large_corpus_seeds/seed*/results.json
  (ELECTRA 2,000-step schedule and the FLOPs-equal masked LM, 100 labels).

  For each task and objective: each run's mean over its fine-tuning seeds
  (only the seeds every run of the task has, so that runs weigh the same),
  the mean and sd over runs; ELECTRA against the masked LM with Welch over the
  run means; each objective against random initialisation (every
  fine-tuning seed the main study ran from it: its runs do not depend on a
  pre-training seed) with Welch over run means against the random runs; an
  exact permutation p beside each Welch p; Holm over the family.
  """
  paths = sorted((study_dir / SEEDS_STUDY).glob("seed*/results.json"))
  if not paths:
    return None
  runs_by_task: Dict[str, Dict[str, Dict[int, Dict[str, float]]]] = {}
  pretraining, evals = [], []
  for path in paths:
    results = json.loads(path.read_text())
    seed = results["settings"]["model"]["seed"]
    mlm_step = results["settings"]["mlm_steps"][str(results["settings"]["steps"])]
    pretraining += [dict(run, results=str(path.relative_to(study_dir)))
                    for run in results.get("pretraining_runs", [])]
    for run in results.get("pretraining_runs", []):
      name = "electra" if run["objective"] == "electra" else "mlm"
      held_out = results.get("pretraining", {}).get(name, {}).get("evals", {}).get(
          str(run["steps"]))
      if held_out:
        evals.append({"objective": run["objective"], "seed": run["seed"],
                      "steps": run["steps"], **held_out})
    for task, by_start in results.get("finetuning_labels100", {}).items():
      for objective, start in (("electra", f"electra_{results['settings']['steps']}"),
                               ("masked_lm", f"mlm_{mlm_step}")):
        if by_start.get(start, {}).get("runs"):
          runs_by_task.setdefault(task, {}).setdefault(objective, {})[seed] = dict(
              by_start[start]["runs"])
  random = {task: by_start["random_init"]["runs"]
            for task, by_start in main["finetuning_labels100"].items()}
  out = {"pretraining_runs": pretraining, "tasks": {},
         "pretraining_evals": sorted(evals, key=lambda e: (e["objective"] != "electra",
                                                           e["seed"]))}
  comparisons = []
  for task, objectives in sorted(runs_by_task.items()):
    all_runs = [runs for by_seed in objectives.values() for runs in by_seed.values()]
    seeds = sorted(set.intersection(*(set(r) for r in all_runs)), key=int)
    if not seeds:
      continue
    entry = {"finetuning_seeds": seeds, "objectives": {}}
    means = {}
    for objective, by_seed in sorted(objectives.items()):
      means[objective] = {s: sum(r[f] for f in seeds) / len(seeds) for s, r in by_seed.items()}
      centre, sd = mean_sd(list(means[objective].values()))
      entry["objectives"][objective] = {"run_means": {str(s): m for s, m in
                                                      sorted(means[objective].items())},
                                        "mean": centre, "sd": sd, "runs": len(by_seed)}
    random_runs = [random[task][f] for f in sorted(random[task], key=int)]
    entry["random_init"] = dict(zip(("mean", "sd"), mean_sd(random_runs)), n=len(random_runs))
    out["tasks"][task] = entry
    for objective in sorted(means):
      comparisons.append({"task": task, "start": objective, "against": "random_init",
                          **runs_compared(list(means[objective].values()), random_runs)})
    if len(means) == 2:
      comparisons.append({"task": task, "start": "electra", "against": "masked_lm",
                          **runs_compared(list(means["electra"].values()),
                                          list(means["masked_lm"].values()))})
  holm_both(comparisons)
  out["comparisons"] = comparisons
  out["family_size"] = sum(c["p"] is not None for c in comparisons)
  return out


FULL_LABELS_STUDY = "full_labels"
# The full-label grid's first pass (three learning rates, the seeds' first
# checkpoints, lost with their machine): kept and tabulated as it stood.
FULL_LABELS_FIRST_GRID = "full_labels_first_grid"
FULL_LABELS_STUDIES = (FULL_LABELS_STUDY, FULL_LABELS_FIRST_GRID)
FULL_LABELS_TASKS = ("cola", "sst", "chunk")  # the paper's GLUE order, then chunking
FULL_LABELS_GROUPS = (("random_init", "random initialisation"), ("electra", "ELECTRA"),
                      ("masked_lm", "masked LM at equal FLOPs"))


def analyse_full_labels(results: Dict, data_dir: pathlib.Path) -> Dict:
  """The full-training-set study (tools/research/full_label_study.py) with the
  pre-training run as the unit (random initialisation: each init seed).

  For each task: each start's dev score at its chosen learning rate, grouped
  by objective (the start's name before `_seed`: random_init, electra,
  masked_lm), with the group's mean and sd over its starts; ELECTRA − masked
  LM, ELECTRA − random init and masked LM − random init with Welch over the
  starts, and Holm over the family (every task); the trivial baselines fitted
  on the training examples the starts fine-tuned on (all but the selection
  set, study_samples.split_examples), scored on the dev set. A task is analysed
  once every start of the study (any task's, and every pre-training run)
  has its dev score in it; until then it is listed under `pending` as
  {task: starts done} (of `starts`).
  """
  begun = results.get("finetuning", {})
  starts = set().union(*map(set, begun.values())) | {
      f"{r['objective']}_seed{r['seed']}" for r in results.get("pretraining_runs", [])}
  out = {"tasks": {}, "comparisons": [], "starts": len(starts), "pending": {}}
  for task in results["settings"].get("tasks", list(begun)):
    done = sum("dev" in record for record in begun.get(task, {}).values())
    if done < len(starts):
      out["pending"][task] = done
  tasks = [t for t in FULL_LABELS_TASKS if t in begun and t not in out["pending"]]
  for task in tasks:
    groups: Dict[str, Dict[str, float]] = {}
    lrs: Dict[str, Dict[str, float]] = {}
    for start, record in sorted(results["finetuning"][task].items()):
      if "dev" in record:
        group = start.rsplit("_seed", 1)[0]
        groups.setdefault(group, {})[start] = record["dev"]
        lrs.setdefault(group, {})[start] = record["chosen_lr"]
    out["tasks"][task] = {
        "groups": {group: {"dev": by_start, "chosen_lr": lrs[group],
                           **dict(zip(("mean", "sd"), mean_sd(list(by_start.values()))))}
                   for group, by_start in groups.items()},
        "train_examples": results["settings"]["train_examples"][task],
        "baselines": baselines_on(task, study_samples.split_examples(
            study_samples.training_text(task, data_dir), task,
            results["settings"]["selection_examples"],
            results["settings"]["selection_seed"])[0], data_dir)}
    for start, against in (("electra", "masked_lm"), ("electra", "random_init"),
                           ("masked_lm", "random_init")):
      if start in groups and against in groups:
        out["comparisons"].append({"task": task, "start": start, "against": against,
                                   **runs_compared(list(groups[start].values()),
                                                   list(groups[against].values()))})
  holm_both(out["comparisons"])
  out["family_size"] = sum(c["p"] is not None for c in out["comparisons"])
  return out


DECISIVE_STUDY = "decisive"
# Pre-registered (learning.md, "The decisive experiment"): runs an arm, the
# differences 12 runs detect with the three-run sds at Holm's first step, the
# interim after 6 runs an arm, and the cap on the runs it may call for.
DECISIVE_RUNS, DECISIVE_INTERIM, DECISIVE_MAXIMUM = 12, 6, 20
DECISIVE_DIFFERENCES = {"full_labels": 1.12, "labels100": 0.40}
DECISIVE_ALPHA = 0.025
# The arm that follows if ELECTRA does not beat the masked LM: a masked LM whose
# steps cost ELECTRA's with the embedding lookups not counted.
ARITHMETIC_ARM = "masked_lm_arithmetic"


def decisive_scores(study_dir: pathlib.Path) -> Dict[str, Dict[str, Dict[str, float]]]:
  """{endpoint: {objective: {seed: score}}} of the decisive experiment's
  committed runs: labels100, a pre-training run's mean chunking dev F1 over
  its fine-tuning seeds (decisive/seed<S>/results.json, once it has all 10);
  full_labels, its dev F1 at the rate its selection set chose
  (decisive/full_labels/results.json). Objectives: electra, masked_lm and,
  once it has a run, ARITHMETIC_ARM."""
  scores: Dict[str, Dict[str, Dict[str, float]]] = {
      "full_labels": {"electra": {}, "masked_lm": {}},
      "labels100": {"electra": {}, "masked_lm": {}}}
  for path in sorted((study_dir / DECISIVE_STUDY).glob("seed*/results.json")):
    results = json.loads(path.read_text())
    settings = results["settings"]
    seed, steps = str(settings["model"]["seed"]), str(settings["steps"])
    by_start = results.get("finetuning_labels100", {}).get("chunk", {})
    starts = {"electra": f"electra_{steps}", "masked_lm": f"mlm_{settings['mlm_steps'][steps]}"}
    if "arithmetic_mlm_steps" in settings:
      starts[ARITHMETIC_ARM] = f"mlm_arithmetic_{settings['arithmetic_mlm_steps'][steps]}"
    for objective, start in starts.items():
      runs = by_start.get(start, {}).get("runs", {})
      if len(runs) == 10:
        scores["labels100"].setdefault(objective, {})[seed] = sum(runs.values()) / len(runs)
  full = study_dir / DECISIVE_STUDY / "full_labels" / "results.json"
  if full.exists():
    for start, record in json.loads(full.read_text())["finetuning"].get("chunk", {}).items():
      objective, seed = start.rsplit("_seed", 1)
      if "dev" in record:
        scores["full_labels"].setdefault(objective, {})[seed] = record["dev"]
  return scores


def first_runs(by_seed: Dict[str, float], runs: int) -> List[float]:
  """The scores of an arm's first `runs` pre-training seeds (by seed number)."""
  return [by_seed[seed] for seed in sorted(by_seed, key=int)[:runs]]


def decisive_comparisons(scores: Dict[str, Dict[str, Dict[str, float]]], against: str,
                         runs: int) -> List[Dict]:
  """ELECTRA − `against` on each endpoint over the first `runs` seeds of each
  arm: Welch with an exact permutation p, Holm over the endpoints."""
  comparisons = []
  for endpoint, arms in scores.items():
    values = [first_runs(arms[o], runs) for o in ("electra", against)]
    comparisons.append({"endpoint": endpoint, "start": "electra", "against": against,
                        **runs_compared(*values)})
  holm_both(comparisons)
  return comparisons


def analyse_decisive(study_dir: pathlib.Path) -> Optional[Dict]:
  """The decisive experiment as pre-registered. Runs done per endpoint and
  arm, and every run's score (decisive_scores, so that one file holds them
  all); from DECISIVE_INTERIM runs an arm on every endpoint, the interim: each
  endpoint's sd within arms (the arms' variances pooled; no mean, no
  difference) and the runs an arm that give 80% power for its
  DECISIVE_DIFFERENCES at DECISIVE_ALPHA (the largest over the endpoints,
  at least DECISIVE_RUNS, at most DECISIVE_MAXIMUM); once every endpoint has
  that many runs an arm, the endpoints: ELECTRA − masked LM, Welch over run
  scores with an exact permutation p, Holm over the two; and once
  ARITHMETIC_ARM has as many, ELECTRA − that arm the same way
  (arithmetic_endpoints). None before a run."""
  scores = decisive_scores(study_dir)
  done = {endpoint: {objective: len(runs) for objective, runs in arms.items()}
          for endpoint, arms in scores.items()}
  if not any(n for arms in done.values() for n in arms.values()):
    return None
  out: Dict = {"runs_done": done, "scores": scores, "interim": None, "endpoints": None}
  primary = [done[endpoint][o] for endpoint in done for o in ("electra", "masked_lm")]
  if min(primary) >= DECISIVE_INTERIM:
    interim = {}
    for endpoint, arms in scores.items():
      first = [first_runs(arms[o], DECISIVE_INTERIM) for o in ("electra", "masked_lm")]
      pooled = math.sqrt(sum(mean_sd(values)[1] ** 2 for values in first) / 2)
      interim[endpoint] = {"pooled_sd": pooled, "runs_needed": runs_needed(
          pooled, pooled, DECISIVE_DIFFERENCES[endpoint], DECISIVE_ALPHA, DECISIVE_RUNS,
          DECISIVE_MAXIMUM)}
    out["interim"] = {"endpoints": interim, "runs_an_arm": max(
        e["runs_needed"] for e in interim.values())}
    planned = out["interim"]["runs_an_arm"]
    if min(primary) >= planned:
      out["endpoints"] = decisive_comparisons(scores, "masked_lm", planned)
      if min(arms.get(ARITHMETIC_ARM, 0) for arms in done.values()) >= planned:
        out["arithmetic_endpoints"] = decisive_comparisons(scores, ARITHMETIC_ARM, planned)
  return out


def decisive_table(analysis: Dict) -> str:
  """Where the decisive experiment stands: runs done, the interim, and the
  endpoints once complete (until then no difference is shown); once
  ARITHMETIC_ARM has a run, a row per endpoint for ELECTRA against it."""
  lines = ["| primary endpoint (chunking) | runs done: ELECTRA / masked LM | interim: sd within "
           "arms (6 runs each) | runs an arm it calls for | ELECTRA − masked LM (difference "
           "[95% CI]; Welch p, Holm over 2; exact permutation p, Holm) |", "|---|---|---|---|---|"]
  labels = (("full_labels", "full training set, 4-rate rule"),
            ("labels100", "100 labels, mean of 10 fine-tuning seeds"))
  endpoints = {c["endpoint"]: c for c in analysis["endpoints"] or []}
  for endpoint, label in labels:
    interim = (analysis["interim"] or {}).get("endpoints", {}).get(endpoint)
    lines.append(f"| {label} | {analysis['runs_done'][endpoint]['electra']} / "
                 f"{analysis['runs_done'][endpoint]['masked_lm']} | "
                 + (f"{interim['pooled_sd']:.2f} | {interim['runs_needed']}" if interim
                    else "- | -") + " | "
                 + (comparison_cell(endpoints[endpoint]) if endpoint in endpoints
                    else "not before every run is in") + " |")
  arithmetic = {c["endpoint"]: c for c in analysis.get("arithmetic_endpoints") or []}
  for endpoint, label in labels:
    done = analysis["runs_done"][endpoint]
    if ARITHMETIC_ARM in done:
      lines.append(f"| {label}: the masked LM matched on arithmetic instead | "
                   f"{done['electra']} / {done[ARITHMETIC_ARM]} | - | - | "
                   + (comparison_cell(arithmetic[endpoint]) if endpoint in arithmetic
                      else "not before every run is in") + " |")
  return "\n".join(lines)


# The decisive experiment's arms: name, pre-training steps (pre-registered), colour
# (learning_study's figures').
DECISIVE_ARMS = {"electra": ("ELECTRA", "2,000", "#3b75af"),
                 "masked_lm": ("masked LM", "3,280", "#e07b39"),
                 ARITHMETIC_ARM: ("masked LM", "2,168", "#59a14f")}


def decisive_figure(study_dir: pathlib.Path, analysis: Dict, path: pathlib.Path
                    ) -> Dict[str, Dict[str, List[float]]]:
  """Once the endpoints are in: per endpoint, each arm's run scores as dots
  with their mean and its 95% t interval, the tests in the panel's title, to
  `path` (PNG). Returns {endpoint: {arm: the dots' scores, as drawn}}."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  from scipy import stats  # pylint: disable=g-import-not-at-top
  scores = decisive_scores(study_dir)
  runs = analysis["interim"]["runs_an_arm"]
  tests = {(c["endpoint"], c["against"]): c
           for c in analysis["endpoints"] + (analysis.get("arithmetic_endpoints") or [])}
  figure, axes = pyplot.subplots(1, 2, figsize=(11, 4.2))
  drawn: Dict[str, Dict[str, List[float]]] = {}
  for axis, (endpoint, label) in zip(axes, (("full_labels", "full training set"),
                                            ("labels100", "100 labels (mean of 10 seeds)"))):
    arms = [arm for arm in DECISIVE_ARMS if len(scores[endpoint].get(arm, {})) >= runs]
    drawn[endpoint] = {}
    for x, arm in enumerate(arms):
      values = first_runs(scores[endpoint][arm], runs)
      centre, sd = mean_sd(values)
      half = float(stats.t.ppf(0.975, len(values) - 1)) * sd / math.sqrt(len(values))
      jitter = [x + 0.3 * (i / (len(values) - 1) - 0.5) for i in range(len(values))]
      dots, = axis.plot(jitter, values, "o", color=DECISIVE_ARMS[arm][2], markersize=4,
                        alpha=0.8)
      drawn[endpoint][arm] = [float(y) for y in dots.get_ydata()]
      axis.errorbar([x], [centre], yerr=[half], fmt="_", color="black", markersize=30,
                    capsize=6, linewidth=1.5)
    axis.set_xticks(range(len(arms)))
    axis.set_xticklabels([f"{DECISIVE_ARMS[arm][0]}\n{DECISIVE_ARMS[arm][1]} steps"
                          for arm in arms], fontsize=9)
    axis.set_xlim(-0.6, len(arms) - 0.4)
    axis.set_ylabel("chunking dev F1")
    axis.grid(axis="y", alpha=0.3)
    axis.set_title(f"{label}\n" + "\n".join(
        f"ELECTRA − masked LM ({DECISIVE_ARMS[against][1]}): "
        f"{fmt_diff(tests[endpoint, against])}, Holm p {fmt_p(tests[endpoint, against]['p_holm'])}"
        for against in arms[1:] if (endpoint, against) in tests), fontsize=8)
  figure.suptitle(f"The decisive experiment: {runs} pre-training runs an arm, each a dot "
                  "(bars: mean, 95% interval)", fontsize=10)
  figure.tight_layout()
  figure.savefig(path, dpi=80)
  pyplot.close(figure)
  return drawn


DEFECT_STUDY = "defect_checks"


def analyse_defect_checks(study_dir: pathlib.Path) -> Optional[Dict]:
  """The defect checks: defect_checks/<check>/results.json, each a
  tools/research/full_label_study.py work dir run with --epoch_metrics at one
  learning rate. Per check and start: the rate, layer-wise decay and epochs,
  and the run's curve: dev score, mean training loss per example and the
  weight norms of the embeddings and of the Transformer layers (the root of
  their squares summed) before the first step and after each epoch (None: an
  epoch not recorded)."""
  paths = sorted((study_dir / DEFECT_STUDY).glob("*/results.json"))
  if not paths:
    return None
  checks = {}
  for path in paths:
    results = json.loads(path.read_text())
    settings = results["settings"]
    for task, by_start in results["finetuning"].items():
      metric = TASK_METRIC_KEY[task]
      for start, record in sorted(by_start.items()):
        for lr, run in sorted(record["runs"].items()):
          points = run["epochs"]
          layers = [math.sqrt(sum(v ** 2 for k, v in p["weight_norms"].items()
                                  if k.startswith("layer_"))) for p in points]
          epochs = settings["num_train_epochs"][task]
          # None for an epoch the run did not record (killed after its
          # checkpoint, before its figures, and resumed).
          by_epoch = {round(p["epoch"]): p for p in points}
          recorded = [by_epoch.get(e) for e in range(math.ceil(epochs) + 1)]
          checks.setdefault(path.parent.name, []).append({
              "task": task, "start": start, "learning_rate": float(lr),
              "layerwise_lr_decay": settings["finetuning_hparams"].get(
                  "layerwise_lr_decay", 0.8),
              "epochs": epochs, "dev": run["dev"],
              "dev_by_epoch": [p and p["dev"][task][metric] for p in recorded],
              "train_loss_by_epoch": [p and p["train_loss"] for p in recorded[1:]],
              "embeddings_norm": [p["weight_norms"]["embeddings"] for p in points],
              "layers_norm": layers})
  return {"checks": checks}


def defect_checks_table(analysis: Dict) -> str:
  """One row per check and start: its settings and its curve, epoch by epoch."""
  lines = ["| check: start | rate, layer-wise decay, epochs | dev score before training, then "
           "after each epoch | training loss per example, each epoch | weight norm, embeddings; "
           "layers (start → end) |", "|---|---|---|---|---|"]
  for check, rows in sorted(analysis["checks"].items()):
    for row in rows:
      lines.append(
          f"| {check}: {row['start']} | {row['learning_rate']:g}, "
          f"{row['layerwise_lr_decay']:g}, {row['epochs']:g} | "
          + ", ".join("–" if v is None else f"{v:.1f}" for v in row["dev_by_epoch"]) + " | "
          + ", ".join("–" if v is None else f"{v:.3f}" for v in row["train_loss_by_epoch"])
          + " | "
          f"{row['embeddings_norm'][0]:.1f} → {row['embeddings_norm'][-1]:.1f}; "
          f"{row['layers_norm'][0]:.1f} → {row['layers_norm'][-1]:.1f} |")
  return "\n".join(lines)


REPRESENTATION_STUDY = "representation_probe"
REPRESENTATION_TASKS = ("sst", "cola", "chunk")
REPRESENTATION_STATS = ("uncentered_mean_cosine", "centered_mean_cosine", "mean_share",
                        "effective_rank", "top_direction_share")


def analyse_representations(results: Dict, data_dir: pathlib.Path) -> Dict:
  """The representation probe (tools/research/representation_probe.py) with the
  pre-training run as the unit (random initialisation: each init seed).

  probe[layer][task][group]: mean, sd, n of the linear probe's dev score over
  the group's starts (group: random_init, electra, masked_lm); statistics
  [set][group][statistic]: the same of the final layer's spread statistics;
  comparisons: the final layer's probe, ELECTRA − masked LM, ELECTRA − random
  init and masked LM − random init, Welch over starts, Holm over the family
  (every task); baselines: the trivial baselines on the probes' training
  examples.
  """
  starts = results["starts"]
  groups: Dict[str, List[Dict]] = {}
  for name in sorted(starts):
    groups.setdefault(starts[name]["objective"], []).append(starts[name])
  layers = sorted(int(layer) for layer in next(iter(starts.values()))["layers"])
  final = str(layers[-1])

  def summary(values: List[float]) -> Dict:
    return dict(zip(("mean", "sd"), mean_sd(values)), n=len(values))

  out: Dict = {"final_layer": int(final), "probe": {}, "statistics": {}, "comparisons": []}
  for layer in layers:
    out["probe"][str(layer)] = {task: {group: summary(
        [s["layers"][str(layer)]["probe"][task]["dev"] for s in members])
        for group, members in groups.items()} for task in REPRESENTATION_TASKS}
  for stat_set in next(iter(starts.values()))["layers"][final]["statistics"]:
    out["statistics"][stat_set] = {group: {key: summary(
        [s["layers"][final]["statistics"][stat_set][key] for s in members])
        for key in REPRESENTATION_STATS} for group, members in groups.items()}
  for task in REPRESENTATION_TASKS:
    scores = {group: [s["layers"][final]["probe"][task]["dev"] for s in members]
              for group, members in groups.items()}
    for start, against in (("electra", "masked_lm"), ("electra", "random_init"),
                           ("masked_lm", "random_init")):
      if start in scores and against in scores:
        out["comparisons"].append({"task": task, "start": start, "against": against,
                                   **runs_compared(scores[start], scores[against])})
  holm_both(out["comparisons"])
  out["family_size"] = sum(c["p"] is not None for c in out["comparisons"])
  out["baselines"] = {task: trivial_baselines(task, results["settings"]["probe_train_examples"],
                                              data_dir) for task in REPRESENTATION_TASKS}
  return out


def representation_tables(analysis: Dict) -> str:
  """The probe per layer (mean ± sd over runs), the final layer's spread
  statistics on held-out text and chunking dev (SST-2's and CoLA's stay in
  the results file), and the final layer's comparisons."""
  groups = [g for g in ("random_init", "electra", "masked_lm")
            if g in analysis["probe"]["0"]["sst"]]
  runs = ", ".join(f"{GROUP_NAMES[g]} {analysis['probe']['0']['sst'][g]['n']}" for g in groups)
  lines = ["| layer (linear probe on frozen vectors; mean ± sd over runs: " + runs + ") | "
           + " | ".join(f"{TASK_TITLE[t]}: {GROUP_NAMES[g]}" for t in REPRESENTATION_TASKS
                        for g in groups) + " |",
           "|---|" + "---|" * (len(REPRESENTATION_TASKS) * len(groups))]
  for layer, by_task in sorted(analysis["probe"].items(), key=lambda item: int(item[0])):
    label = "0 (embeddings)" if layer == "0" else layer
    lines.append(f"| {label} | " + " | ".join(
        f"{by_task[t][g]['mean']:.1f} ± {by_task[t][g]['sd']:.1f}"
        for t in REPRESENTATION_TASKS for g in groups) + " |")
  lines.append(f"| trivial baseline on the same examples ({BASELINE_NAMES}) | " + " | ".join(
      baseline_cell(t, analysis["baselines"][t]) if g == groups[0] else ""
      for t in REPRESENTATION_TASKS for g in groups) + " |")
  sets = {"heldout": "held-out text", "chunk_dev": "chunking dev"}
  lines += ["", f"| final layer (layer {analysis['final_layer']}), token vectors | "
            + " | ".join(REPRESENTATION_STATS) + " |",
            "|---|" + "---|" * len(REPRESENTATION_STATS)]
  for stat_set, label in sets.items():
    for group in groups if stat_set in analysis["statistics"] else ():
      values = analysis["statistics"][stat_set][group]
      lines.append(f"| {label}, {GROUP_NAMES[group]} | " + " | ".join(
          f"{values[k]['mean']:.2f} ± {values[k]['sd']:.2f}" if k != "effective_rank" else
          f"{values[k]['mean']:.1f} ± {values[k]['sd']:.1f}" for k in REPRESENTATION_STATS)
                   + " |")
  if analysis["comparisons"]:
    lines += ["", f"| final-layer probe, run as the unit (difference [95% CI]; Welch p, Holm "
                  f"over {analysis['family_size']}; exact permutation p, Holm) | "
              + " | ".join(TASK_TITLE[t] for t in REPRESENTATION_TASKS) + " |",
              "|---|" + "---|" * len(REPRESENTATION_TASKS)]
    lines += comparison_rows(analysis["comparisons"], REPRESENTATION_TASKS)
  return "\n".join(lines)


# ------------------------------------------------------------------ tables
def fmt_p(p: Optional[float]) -> str:
  if p is None:
    return "-"
  if p < 0.001:
    return "<0.001"
  return f"{p:.3f}" if p < 0.01 else f"{p:.2f}"


def fmt_diff(c: Dict) -> str:
  text = f"{c['difference']:+.1f}"
  if c["ci95"]:
    text += f" [{c['ci95'][0]:+.1f}, {c['ci95'][1]:+.1f}]"
  return text


def comparison_cell(c: Dict) -> str:
  """Difference [CI]; Welch p, Holm (and permutation p, Holm, where the
  comparison has them); bold when every Holm-adjusted p is below ALPHA."""
  cell = f"{fmt_diff(c)}; p {fmt_p(c['p'])}, Holm {fmt_p(c['p_holm'])}"
  adjusted = [c["p_holm"]]
  if "p_permutation" in c:
    cell += (f"; permutation {fmt_p(c['p_permutation'])}, "
             f"Holm {fmt_p(c['p_permutation_holm'])}")
    adjusted.append(c["p_permutation_holm"])
  if "common_seeds" in c:
    cell += f"; {c['higher_on_seeds']}/{c['common_seeds']}"
  if all(p is not None and p < ALPHA for p in adjusted):
    cell = f"**{cell}**"
  return cell


GROUP_NAMES = {"electra": "ELECTRA", "masked_lm": "masked LM", "random_init": "random init"}


def comparison_rows(comparisons: Sequence[Dict], tasks: Sequence[str]) -> List[str]:
  """One table row per (start, against) pair of `comparisons`, a cell per task."""
  rows: Dict[Tuple[str, str], Dict[str, Dict]] = {}
  for c in comparisons:
    rows.setdefault((c["start"], c["against"]), {})[c["task"]] = c
  return [f"| {GROUP_NAMES[start]} − {GROUP_NAMES[against]} | " + " | ".join(
      comparison_cell(by_task[t]) if t in by_task else "-" for t in tasks) + " |"
          for (start, against), by_task in rows.items()]


def baseline_cell(task: str, baselines: Dict) -> str:
  if task == "chunk":
    return f"{baselines['most_frequent_tag']:.1f}"
  return (f"{baselines['naive_bayes']:.1f} / {baselines['naive_bayes_binary']:.1f} "
          f"({baselines['majority_class']:.1f})")


def setting_tables(analysis: Dict) -> str:
  """Two markdown tables: each start's level beside the trivial baselines, and
  the family's comparisons."""
  tasks = sorted(analysis["starts"])
  n = max(s["n"] for by_start in analysis["starts"].values() for s in by_start.values())
  header = "| " + " | ".join(TASK_TITLE[t] for t in tasks) + " |"
  rule = "|---|" + "---|" * len(tasks)
  lines = [f"| start ({analysis['train_examples']:,} labels; mean ± sd over {n} fine-tuning "
           f"seeds) {header}", rule]
  lines.append(f"| trivial baseline on the same {analysis['train_examples']:,} examples "
               f"({BASELINE_NAMES}) | " + " | ".join(
                   baseline_cell(t, analysis["baselines"][t]) for t in tasks) + " |")
  starts = list(analysis["starts"][tasks[0]])
  starts.sort(key=lambda s: (s != "random_init", s.startswith(("disc", "generator")),
                             0 if s == "random_init" else int(s.rsplit("_", 1)[1]), s))
  for start in starts:
    cells = []
    for task in tasks:
      level = analysis["starts"][task].get(start)
      cells.append("-" if level is None else f"{level['mean']:.1f} ± {level['sd']:.1f}")
    lines.append(f"| {start_label(start)} | " + " | ".join(cells) + " |")
  lines += ["", f"| comparison (difference [95% CI]; Welch p, Holm over "
                f"{analysis['family_size']}; seeds higher) {header}", rule]
  rows: Dict[Tuple[str, str], Dict[str, Dict]] = {}
  for c in analysis["comparisons"]:
    rows.setdefault((c["start"], c["against"]), {})[c["task"]] = c
  for (start, against), by_task in rows.items():
    against_label = ("random init" if against == "random_init" else start_label(against))
    lines.append(f"| {start_label(start)} − {against_label} | " + " | ".join(
        comparison_cell(by_task[t]) if t in by_task else "-" for t in tasks) + " |")
  return "\n".join(lines)


def seeds_tables(seeds: Dict, baselines: Dict) -> str:
  tasks = sorted(seeds["tasks"])
  header = "| " + " | ".join(TASK_TITLE[t] for t in tasks) + " |"
  rule = "|---|" + "---|" * len(tasks)
  lines = ["| start (100 labels; mean ± sd over pre-training runs, each the mean of its "
           f"fine-tuning seeds) {header}", rule,
           f"| trivial baseline on the same 100 examples ({BASELINE_NAMES}) | " + " | ".join(
               baseline_cell(t, baselines[t]) for t in tasks) + " |",
           "| random initialisation (fine-tuning seeds) | " + " | ".join(
               f"{seeds['tasks'][t]['random_init']['mean']:.1f} ± "
               f"{seeds['tasks'][t]['random_init']['sd']:.1f}" for t in tasks) + " |"]
  for objective, label in (("electra", "ELECTRA, 2,000-step schedule"),
                           ("masked_lm", "masked LM, 3,280 steps (equal FLOPs)")):
    cells = []
    for t in tasks:
      o = seeds["tasks"][t]["objectives"].get(objective)
      cells.append("-" if o is None else f"{o['mean']:.1f} ± {o['sd']:.1f} ("
                   + ", ".join(f"{m:.1f}" for m in o["run_means"].values()) + ")")
    lines.append(f"| {label} | " + " | ".join(cells) + " |")
  lines.append("| fine-tuning seeds per run | " + " | ".join(
      str(len(seeds["tasks"][t]["finetuning_seeds"])) for t in tasks) + " |")
  lines += ["", f"| comparison, run as the unit (difference [95% CI]; Welch p, Holm over "
                f"{seeds['family_size']}; exact permutation p, Holm) {header}", rule]
  lines += comparison_rows(seeds["comparisons"], tasks)
  return "\n".join(lines)


def full_labels_tables(analysis: Dict) -> str:
  """Two markdown tables of analyse_full_labels: each group's dev score
  (mean ± sd over runs, then each run's) beside the trivial baselines, with
  the learning rates chosen; and the comparisons, the run as the unit; then
  the tasks not complete yet."""
  tasks = [t for t in FULL_LABELS_TASKS if t in analysis["tasks"]]
  lines = full_labels_task_tables(analysis, tasks) if tasks else []
  if analysis["pending"]:
    lines += ["", "Not complete yet (starts with a dev score, of " + str(analysis["starts"])
              + "): " + ", ".join(f"{TASK_TITLE[t].split()[0]} {done}" for t, done in sorted(
                  analysis["pending"].items(), key=lambda item: FULL_LABELS_TASKS.index(item[0])))
              + "."]
  return "\n".join(lines).strip("\n")


def full_labels_task_tables(analysis: Dict, tasks: List[str]) -> List[str]:
  """full_labels_tables' two tables for the complete `tasks` (lines)."""
  header = "| " + " | ".join(TASK_TITLE[t] for t in tasks) + " |"
  rule = "|---|" + "---|" * len(tasks)
  by_task = analysis["tasks"]
  lines = ["| start (full training set less the selection set; dev at the chosen learning "
           f"rate, mean ± sd over runs (each run)) {header}", rule,
           "| training examples | " + " | ".join(
               f"{by_task[t]['train_examples']:,}" for t in tasks) + " |",
           f"| trivial baseline on the same examples ({BASELINE_NAMES}) | " + " | ".join(
               baseline_cell(t, by_task[t]["baselines"]) for t in tasks) + " |"]
  for group, label in FULL_LABELS_GROUPS:
    cells, chosen = [], []
    for t in tasks:
      g = by_task[t]["groups"].get(group)
      cells.append("-" if g is None else f"{g['mean']:.1f} ± {g['sd']:.1f} ("
                   + ", ".join(f"{v:.1f}" for v in g["dev"].values()) + ")")
      chosen.append("-" if g is None else ", ".join(f"{lr:g}" for lr in g["chosen_lr"].values()))
    runs = max((len(by_task[t]["groups"][group]["dev"]) for t in tasks
                if group in by_task[t]["groups"]), default=0)
    lines.append(f"| {label} ({runs} run{'s' if runs != 1 else ''}) | " + " | ".join(cells)
                 + " |")
    lines.append(f"| {label}: learning rate chosen, each run | " + " | ".join(chosen) + " |")
  lines += ["", f"| comparison, run as the unit (difference [95% CI]; Welch p, Holm over "
                f"{analysis['family_size']}; exact permutation p, Holm) {header}", rule]
  lines += comparison_rows(analysis["comparisons"], tasks)
  return lines


def all_tables(analyses: Dict[str, Dict]) -> Dict[str, str]:
  """{table name: markdown}: NAME/SETTING for every study's setting,
  large_corpus_seeds when the seeds ran and full_labels (and its first grid) when they ran."""
  tables = {}
  for study, analysis in analyses.items():
    if study in (SEEDS_STUDY, REPRESENTATION_STUDY, DEFECT_STUDY,
                 DECISIVE_STUDY) + FULL_LABELS_STUDIES:
      continue
    for setting, value in analysis.items():
      if setting.startswith("finetuning"):
        tables[f"{study}/{setting}"] = setting_tables(value)
  seeds = analyses.get(SEEDS_STUDY)
  if seeds and seeds["pretraining_evals"]:
    tables[f"{SEEDS_STUDY}/pretraining"] = seeds_pretraining_table(seeds["pretraining_evals"])
  if seeds and seeds["tasks"]:
    tables[SEEDS_STUDY] = seeds_tables(
        seeds, analyses["large_corpus"]["finetuning_labels100"]["baselines"])
  for study in FULL_LABELS_STUDIES:
    if analyses.get(study):
      tables[study] = full_labels_tables(analyses[study])
  if analyses.get(REPRESENTATION_STUDY):
    tables[REPRESENTATION_STUDY] = representation_tables(analyses[REPRESENTATION_STUDY])
  if analyses.get(DEFECT_STUDY):
    tables[DEFECT_STUDY] = defect_checks_table(analyses[DEFECT_STUDY])
  if analyses.get(DECISIVE_STUDY):
    tables[DECISIVE_STUDY] = decisive_table(analyses[DECISIVE_STUDY])
  return tables


SEEDS_EVAL_KEYS = ("masked_lm_accuracy", "disc_auc_real_tokens", "disc_precision",
                   "disc_recall", "disc_accuracy", "disc_always_real_accuracy")


def seeds_pretraining_table(evals: Sequence[Dict]) -> str:
  """Each seed run's held-out evaluation where its schedule ends."""
  lines = ["| run (held-out text, end of its schedule) | step | " + " | ".join(
      SEEDS_EVAL_KEYS) + " |", "|---|---|" + "---|" * len(SEEDS_EVAL_KEYS)]
  for e in evals:
    label = "ELECTRA" if e["objective"] == "electra" else "masked LM"
    lines.append(f"| {label}, seed {e['seed']} | {e['steps']:,} | " + " | ".join(
        "-" if e.get(k) is None else f"{e[k]:.3f}" for k in SEEDS_EVAL_KEYS) + " |")
  return "\n".join(lines)


# The tables learning.md shows, one a readout (the others are in each
# results.json's analysis).
DOC_TABLES = ("large_corpus_seeds", "budget_400_steps/finetuning", FULL_LABELS_STUDY,
              DECISIVE_STUDY, REPRESENTATION_STUDY, DEFECT_STUDY)
TABLE_BLOCK = re.compile(r"<!-- analysis:(\S+) -->\n(.*?)<!-- /analysis -->", re.S)


def doc_tables(text: str) -> Dict[str, str]:
  """{name: table} of the analysis blocks of a markdown text."""
  return {m.group(1): m.group(2).rstrip("\n") for m in TABLE_BLOCK.finditer(text)}


def rewrite_doc(text: str, tables: Dict[str, str]) -> str:
  """`text` with each analysis block's table replaced by tables[name]."""
  def block(match):
    table = tables.get(match.group(1), match.group(2).rstrip("\n"))
    return f"<!-- analysis:{match.group(1)} -->\n{table}\n<!-- /analysis -->"
  return TABLE_BLOCK.sub(block, text)


def analysis_paths() -> Dict[str, str]:
  """Where each study's `analysis` is stored, relative to the studies' folder."""
  paths = {study.name: study.path for study in STUDIES}
  paths[SEEDS_STUDY] = f"{SEEDS_STUDY}/analysis.json"
  paths[DEFECT_STUDY] = f"{DEFECT_STUDY}/analysis.json"
  paths[DECISIVE_STUDY] = f"{DECISIVE_STUDY}/analysis.json"
  for study in FULL_LABELS_STUDIES + (REPRESENTATION_STUDY,):
    paths[study] = f"{study}/results.json"
  return paths


def analyse_all(study_dir: pathlib.Path, data_dir: pathlib.Path) -> Dict[str, Dict]:
  analyses = {study.name: analyse_study(study, study_dir, data_dir) for study in STUDIES}
  main = json.loads((study_dir / "large_corpus" / "results.json").read_text())
  seeds = analyse_seeds(study_dir, main)
  if seeds:
    analyses[SEEDS_STUDY] = seeds
  for study in FULL_LABELS_STUDIES:
    full_labels = study_dir / study / "results.json"
    if full_labels.exists():
      analyses[study] = analyse_full_labels(json.loads(full_labels.read_text()), data_dir)
  representations = study_dir / REPRESENTATION_STUDY / "results.json"
  if representations.exists():
    analyses[REPRESENTATION_STUDY] = analyse_representations(
        json.loads(representations.read_text()), data_dir)
  defects = analyse_defect_checks(study_dir)
  if defects:
    analyses[DEFECT_STUDY] = defects
  decisive = analyse_decisive(study_dir)
  if decisive:
    analyses[DECISIVE_STUDY] = decisive
  return analyses


def _close(a, b) -> bool:
  if isinstance(a, dict) and isinstance(b, dict):
    return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
  if isinstance(a, list) and isinstance(b, list):
    return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
  if isinstance(a, float) and isinstance(b, (int, float)):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
  return a == b


def main() -> int:
  study_dir, data_dir = pathlib.Path(FLAGS.study_dir), pathlib.Path(FLAGS.finetuning_data_dir)
  analyses = analyse_all(study_dir, data_dir)
  doc = pathlib.Path(FLAGS.doc)
  tables = all_tables(analyses)
  stale = []
  paths = analysis_paths()
  for name, analysis in analyses.items():
    path = study_dir / paths[name]
    stored = json.loads(path.read_text()) if path.exists() else {}
    if not _close(stored.get("analysis"), analysis):
      stale.append(str(path))
      if FLAGS.write:
        stored["analysis"] = analysis
        if name not in (SEEDS_STUDY, DEFECT_STUDY, DECISIVE_STUDY) and (
            "pretraining_runs" not in stored):
          stored["pretraining_runs"] = pretraining_runs_of(stored)
        path.write_text(json.dumps(stored, indent=1, sort_keys=True))
  if FLAGS.write:  # the probes' runs, for a reader's script
    for study in STUDIES:
      for _, probe_path in study.probes:
        probe = json.loads((study_dir / probe_path).read_text())
        if "pretraining_runs" not in probe:
          probe["pretraining_runs"] = pretraining_runs_of(probe)
          (study_dir / probe_path).write_text(json.dumps(probe, indent=1, sort_keys=True))
  text = doc.read_text(encoding="utf-8")
  documented = doc_tables(text)
  stale += [f"{doc}: table {name}" for name in documented
            if name in tables and documented[name] != tables[name]]
  stale += [f"{doc}: table {name} missing" for name in DOC_TABLES if name not in documented]
  if FLAGS.write:
    doc.write_text(rewrite_doc(text, tables), encoding="utf-8")
    if (analyses.get(DECISIVE_STUDY) or {}).get("endpoints"):
      decisive_figure(study_dir, analyses[DECISIVE_STUDY],
                      study_dir / DECISIVE_STUDY / "decisive.png")
    for line in stale:
      print(f"updated: {line}")
    return 0
  for line in stale:
    print(f"stale: {line}", file=sys.stderr)
  return 1 if stale else 0


if __name__ == "__main__":
  define_flags()
  cli.run(main, "learning_analysis.py")
