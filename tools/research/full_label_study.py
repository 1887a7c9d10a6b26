"""Full training sets, the paper's setting (issue 33, item 3): random
initialisation against ELECTRA against the masked LM at equal FLOPs,
fine-tuned on all of GLUE SST-2 and CoLA and CoNLL-2000 chunking.

    python -m tools.research.full_label_study --work_dir=full_labels \\
        --study_dirs=runs/seed1,runs/seed2,runs/seed3 \\
        [--max_seq_length=sst:64,cola:64,chunk:128] \\
        [--num_train_epochs=sst:3,cola:3,chunk:3] \\
        [--starts=official_step0=CHECKPOINT] \\
        [--finetuning_hparams='{"layerwise_lr_decay": 1.0}'] [--epoch_metrics]

Starts:
  - random_init_seed<S> for each --random_init_seeds S: the study model's
    encoder initialised with seed S, saved as a checkpoint, so that every
    start is a checkpoint fine-tuned in the same way;
  - <objective>_seed<S> for each pre-training run of the --study_dirs
    (tools/research/learning_study.py work dirs: results.json's pretraining_runs), its
    checkpoint where its schedule ends; the masked LM's schedule spends
    ELECTRA's pre-training FLOPs;
  - NAME for each --starts NAME=CHECKPOINT: any other checkpoint of the same
    encoder (e.g. the official code's step-0 weights: a check that a start
    loads and trains as the random ones do).
The study dirs must share their model and vocab (results.json settings);
without study dirs, the model is tools/research/learning_study.py's default (the
official trajectory fixture's shape) with the BERT uncased vocab.

The rule, the same for every start and task:
  - --selection_examples training examples (chunking: sentences), drawn at
    random with --selection_seed, are held out as the selection set; the
    starts fine-tune on the rest;
  - each start fine-tunes once per --learning_rates value (fine-tuning seed
    --seed) with the official fine-tuning hparams otherwise (layer-wise decay
    0.8, warm-up 0.1, batch 32: electra_tf/finetune/config.py) for the
    task's --num_train_epochs (official: 3) at its --max_seq_length, then the
    trained model is scored on the selection set and on the dev set;
  - its chosen learning rate is the one with the best selection score (ties:
    the smaller rate), and its result that run's dev score. The other runs'
    dev scores are kept but choose nothing.
Scores: SST-2 accuracy, CoLA MCC x 100, chunking F1, as run_finetuning.py
reports them. --finetuning_hparams overrides other official fine-tuning
hparams for every run (e.g. layerwise_lr_decay); --epoch_metrics records each
run's curve: its dev score, mean training loss and weight norms before the
first step and after every epoch (the hparam epoch_metrics), kept in
results.json as the run's `epochs`.

Each run is a run_finetuning.py model_dir, work_dir/runs/<task>/<start>/lr<LR>:
it trains on data/selection/ (whose dev set is the selection set) and is then
evaluated, without training, on data/dev/ (the real dev set); with
--epoch_metrics the other way round, so that the curve is the dev set's (the
two folders train on the same examples, and fine-tuning is deterministic, so
the scores are the same); each score is kept beside it as
selection_metrics.json and dev_metrics.json. Rerunning the
same command skips the finished runs (a start that has run them all needs its
checkpoint no more: a study dir may be restored from its results.json); more
--study_dirs or --random_init_seeds add starts; more --learning_rates (the
recorded ones and others) add runs to every start, whose choice is then made
again over all its rates (until they have run, a start has none); other
settings are refused.

work_dir/results.json: settings (the rule and its values), pretraining_runs
(objective, seed, steps, absolute checkpoint, study_dir), named_starts (the
--starts: {name: absolute checkpoint}), finetuning
{task: {start: {runs: {lr: {selection, dev}}, chosen_lr, dev}}} and analysis
(tools/research/learning_analysis.analyse_full_labels: the pre-training run as the
unit, trivial baselines on the same training examples). Its tables go to
docs/learning.md through tools/research/learning_analysis.py once the results.json is
committed as docs/learning_study/full_labels/results.json.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import time
from typing import Dict, List, Sequence

from absl import flags

from electra_tf import cli
from electra_tf import fileio
from electra_tf.errors import CheckpointError, ConfigError, DataError
from electra_tf.pretrain.config import PretrainingConfig
from tools.research import learning_analysis
from tools.research import learning_study
from tools.research import study_samples

FLAGS = flags.FLAGS

TASK_FILES = study_samples.TASK_FILES
# Fine-tuning hparams the study sets per run from its own flags.
STUDY_HPARAMS = ("learning_rate", "max_seq_length", "num_train_epochs", "seed",
                 "preprocessed_data_dir", "epoch_metrics")
RULE = ("per task, selection_examples training examples drawn at random (selection_seed) are "
        "the selection set and the starts fine-tune on the rest; one run per learning rate "
        "(fine-tuning seed `seed`), scored on the selection set and the dev set; a start's "
        "chosen_lr is the best selection score's (ties: the smaller rate) and its result that "
        "run's dev score")


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module)."""
  flags.DEFINE_string("work_dir", None, "Where everything goes (resumable).")
  flags.DEFINE_list("study_dirs", [],
                    "tools/research/learning_study.py work dirs whose pre-training runs are "
                    "starts "
                    "(none: the study tool's default model and vocab).")
  flags.DEFINE_string("finetuning_data_dir", str(learning_study.SHARED / "finetuning_data"),
                      "Folder with <task>/ fine-tuning data.")
  flags.DEFINE_list("tasks", ["sst", "cola", "chunk"], "Fine-tuning tasks.")
  flags.DEFINE_integer("selection_examples", 2000,
                       "Training examples (chunking: sentences) held out, drawn at random "
                       "from each training file, to choose the learning rate on.")
  flags.DEFINE_integer("selection_seed", 1, "Seed of the selection set's draw.")
  flags.DEFINE_list("learning_rates", ["1e-4", "3e-4", "1e-3"],
                    "Fine-tuning learning rates each start tries.")
  flags.DEFINE_integer("seed", 1, "Fine-tuning seed (heads, dropout, data order).")
  flags.DEFINE_list("random_init_seeds", ["1", "2", "3"],
                    "Seeds of the randomly initialised encoders.")
  flags.DEFINE_list("max_seq_length", ["sst:64", "cola:64", "chunk:128"],
                    "Fine-tuning sequence length of each task (task:length): SST-2 and CoLA "
                    "fit in 64 word pieces; chunking's pieces and word slots, but for 0.6% "
                    "of its sentences, in 128, the length the encoders were pre-trained at.")
  flags.DEFINE_list("num_train_epochs", ["sst:3", "cola:3", "chunk:3"],
                    "Fine-tuning epochs of each task (task:epochs; official: 3).")
  flags.DEFINE_list("starts", [], "More starts, NAME=CHECKPOINT (a checkpoint prefix of "
                    "the study dirs' encoder, in either format).")
  flags.DEFINE_string("finetuning_hparams", "{}",
                      "JSON of official fine-tuning hparams for every run (not those the "
                      "study sets: learning_rate, max_seq_length, num_train_epochs).")
  flags.DEFINE_boolean("epoch_metrics", False,
                       "Record each run's dev score, training loss and weight norms "
                       "before the first step and after every epoch.")
  flags.mark_flags_as_required(["work_dir"])


def log(message: str) -> None:
  print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# -------------------------------------------------------------- the rule
def choose_lr(runs: Dict[str, Dict[str, float]]) -> str:
  """The learning rate (a key of `runs`: {lr: {"selection": score, ...}})
  with the best selection score; ties: the smaller rate. Nothing else of a
  run is read."""
  return max(runs, key=lambda lr: (runs[lr]["selection"], -float(lr)))


def per_task(flag: str, items: Sequence[str], tasks: Sequence[str], minimum: float,
             kind: type = int) -> Dict[str, float]:
  """A task:value list flag (--max_seq_length, --num_train_epochs) ->
  {task: value} for `tasks`; a one-line error naming the flag otherwise."""
  values = {}
  for item in items:
    task, _, value = item.partition(":")
    try:
      values[task] = kind(value)
    except ValueError:
      values[task] = None
    if values[task] is None or not values[task] >= minimum:  # nan too
      number = "an integer" if kind is int else "a number"
      raise ConfigError(f"--{flag}: {item!r} is not task:value ({number} >= {minimum:g})")
  missing = [t for t in tasks if t not in values]
  if missing:
    raise ConfigError(f"--{flag}: no value for {missing[0]}")
  return {t: values[t] for t in tasks}


def lr_key(value: str) -> str:
  """A learning rate as results.json keys it: 3e-4 -> '0.0003'."""
  return f"{float(value):g}"


# ------------------------------------------------------------------ data
def training_examples_left(task: str, source: pathlib.Path, selection_examples: int) -> int:
  """How many of `task`'s training examples (source/<task>/) the starts
  fine-tune on: all but the `selection_examples` held out."""
  for name in TASK_FILES[task]:
    if not (source / task / name).exists():
      raise DataError(f"--finetuning_data_dir: {source / task / name} is missing")
  total = study_samples.count_examples(
      (source / task / TASK_FILES[task][0]).read_text(encoding="utf-8"), task)
  if selection_examples >= total:
    raise ConfigError(f"--selection_examples: {selection_examples} is not below the "
                      f"{total} training examples of {task}")
  return total - selection_examples


def write_task_data(task: str, source: pathlib.Path, work_dir: pathlib.Path,
                    selection_examples: int, seed: int) -> None:
  """Two data_dirs for `task` under work_dir/data: selection/ and dev/, both
  with the training examples study_samples.split_examples keeps, whose dev
  sets are the ones it holds out (the selection set) and the real dev set.

  Chunking's label set is read from every split file present (official), so
  each folder also holds the other folder's dev set as test.txt: both get
  the label set of the whole training file and dev set."""
  train_name, dev_name = TASK_FILES[task]
  text = (source / task / train_name).read_text(encoding="utf-8")
  dev = (source / task / dev_name).read_text(encoding="utf-8")
  kept, held_out = study_samples.split_examples(text, task, selection_examples, seed)
  for folder, scored, other in (("selection", held_out, dev), ("dev", dev, held_out)):
    target = work_dir / "data" / folder / "finetuning_data" / task
    if (target / ".complete").exists():
      continue
    target.mkdir(parents=True, exist_ok=True)
    fileio.atomic_write_text(str(target / train_name), kept)
    fileio.atomic_write_text(str(target / dev_name), scored)
    if task == "chunk":
      fileio.atomic_write_text(str(target / "test.txt"), other)
    fileio.atomic_write_text(str(target / ".complete"), "")


# ---------------------------------------------------------------- starts
def finished_starts(results: Dict, tasks: Sequence[str], learning_rates: Sequence[str]
                    ) -> List[str]:
  """The starts in results.json that have run every rate on every task."""
  by_task = results.get("finetuning", {})
  names = sorted(set().union(*(by_task.get(task, {}) for task in tasks)))
  return [name for name in names if all(
      lr in by_task.get(task, {}).get(name, {}).get("runs", {})
      for task in tasks for lr in learning_rates)]


def read_studies(study_dirs: Sequence[str], finished: Sequence[str] = ()) -> Dict:
  """The model, vocab and pre-training runs of the study dirs: {model,
  vocab_file, runs: [{objective, seed, steps, checkpoint (absolute),
  study_dir}]}; no study dirs: tools/research/learning_study.py's default model and
  vocab, no runs. A run's checkpoint must be there unless its start is
  `finished` (a study dir restored from its results.json alone)."""
  if not study_dirs:
    vocab = learning_study.SHARED / "vocab" / "bert_uncased_vocab.txt"
    return {"model": learning_study.finetuning_hparams(
        learning_study.MODEL, sum(1 for _ in vocab.open(encoding="utf-8"))),
            "vocab_file": str(vocab), "runs": []}
  model, vocab, runs = None, None, []
  for directory in study_dirs:
    study_dir = pathlib.Path(directory).resolve()
    path = study_dir / "results.json"
    if not path.exists():
      raise DataError(f"--study_dirs: {study_dir} has no results.json "
                      "(a tools/research/learning_study.py work dir)")
    results = json.loads(path.read_text())
    if not results.get("pretraining_runs"):
      raise DataError(f"--study_dirs: {path} lists no pretraining_runs")
    settings = results["settings"]
    encoder = learning_study.finetuning_hparams(settings["model"], settings["vocab_size"])
    if model is not None and (encoder, settings["vocab_file"]) != (model, vocab):
      raise ConfigError(f"--study_dirs: {study_dir}'s model or vocab differs from "
                        f"{study_dirs[0]}'s")
    model, vocab = encoder, settings["vocab_file"]
    for run in results["pretraining_runs"]:
      checkpoint = study_dir / run["checkpoint"]
      if (f"{run['objective']}_seed{run['seed']}" not in finished
          and not checkpoint.with_name(checkpoint.name + ".index").exists()):
        raise CheckpointError(f"--study_dirs: {checkpoint} (the {run['objective']} run's "
                              "checkpoint) is missing")
      runs.append({"objective": run["objective"], "seed": run["seed"], "steps": run["steps"],
                   "checkpoint": str(checkpoint), "study_dir": str(study_dir)})
  names = [f"{run['objective']}_seed{run['seed']}" for run in runs]
  repeated = sorted({name for name in names if names.count(name) > 1})
  if repeated:
    raise ConfigError(f"--study_dirs: two pre-training runs are {repeated[0]}")
  return {"model": model, "vocab_file": vocab, "runs": runs}


def named_starts(items: Sequence[str], taken: Sequence[str]) -> Dict[str, str]:
  """--starts NAME=CHECKPOINT items -> {name: absolute checkpoint prefix}; a
  one-line error for a malformed item, a name `taken` or repeated, or a
  checkpoint that is not there."""
  starts: Dict[str, str] = {}
  for item in items:
    name, _, checkpoint = item.partition("=")
    if not name or not checkpoint:
      raise ConfigError(f"--starts: {item!r} is not NAME=CHECKPOINT")
    if name in starts or name in taken:
      raise ConfigError(f"--starts: {name} names another start too")
    path = pathlib.Path(checkpoint).resolve()
    if not path.with_name(path.name + ".index").exists():
      raise CheckpointError(f"--starts: {path} (start {name}) is not a checkpoint prefix")
    starts[name] = str(path)
  return starts


def override_hparams(text: str) -> Dict:
  """--finetuning_hparams: a JSON object of hparams the study does not set."""
  try:
    overrides = json.loads(text)
  except json.JSONDecodeError as e:
    raise ConfigError(f"--finetuning_hparams: not JSON ({e})") from None
  if not isinstance(overrides, dict):
    raise ConfigError("--finetuning_hparams: not a JSON object")
  fixed = sorted(set(overrides) & set(STUDY_HPARAMS))
  if fixed:
    raise ConfigError(f"--finetuning_hparams: {fixed[0]} is set by the study's own flags")
  return overrides


def random_init_checkpoint(model: Dict, seed: int, work_dir: pathlib.Path) -> str:
  """The encoder of `model` (finetuning_hparams) initialised with `seed`,
  saved once under work_dir/random_init/; its checkpoint prefix."""
  prefix = work_dir / "random_init" / f"seed{seed}" / "encoder"
  if not prefix.with_name("encoder.index").exists():
    from electra_tf import checkpoints  # pylint: disable=g-import-not-at-top
    encoder = learning_study.study_encoder(PretrainingConfig.create(dict(model, seed=seed)))
    prefix.parent.mkdir(parents=True, exist_ok=True)
    checkpoints.save_official_checkpoint(encoder, str(prefix))
  return str(prefix)


# ------------------------------------------------------------ fine-tuning
def finetune(run_dir: pathlib.Path, work_dir: pathlib.Path, task: str, checkpoint: str,
             hparams: Dict, vocab_file: str) -> Dict[str, float]:
  """One run: trains on data/selection/ and is scored on its dev set (the
  selection set), then evaluated on data/dev/ without training; each score is
  kept in run_dir as <selection|dev>_metrics.json (a finished step is not run
  again). Returns {selection, dev} of the task's metric; with the hparam
  epoch_metrics the run trains on data/dev/ instead (its curve is the dev
  set's), and `epochs` holds that curve (finetune/job.record_epoch's points)."""
  metric = learning_study.TASK_METRIC[task]
  scores = {}
  order = ("dev", "selection") if hparams.get("epoch_metrics") else ("selection", "dev")
  for split, extra_flags in zip(order, ((), ("--nodo_train",))):
    kept = run_dir / f"{split}_metrics.json"
    if not kept.exists():
      learning_study.run_finetuning(work_dir / "data" / split, task, run_dir, vocab_file,
                                    hparams, checkpoint, *extra_flags)
      shutil.copyfile(run_dir / "results" / f"{task}_dev_metrics.json", kept)
    scores[split] = json.loads(kept.read_text())[metric]
  if hparams.get("epoch_metrics"):
    scores["epochs"] = json.loads((run_dir / "results" / "epoch_metrics.json").read_text())
  return scores


def check_settings(results: Dict, settings: Dict, work_dir: pathlib.Path) -> None:
  """A one-line error if results.json's runs began with other settings (more
  learning rates than recorded are not other settings: they add runs)."""
  recorded = results.get("settings")
  if recorded is None:
    return
  widened = set(recorded.get("learning_rates", [])) <= set(settings["learning_rates"])
  changed = sorted(k for k in set(recorded) | set(settings)
                   if recorded.get(k) != settings.get(k)
                   and not (k == "learning_rates" and widened))
  if changed:
    raise ConfigError(f"{work_dir}: its runs began with other settings ({', '.join(changed)}"
                      f" differ: {json.dumps({k: recorded.get(k) for k in changed})}); "
                      "use another --work_dir")


def settle_choice(record: Dict, learning_rates: Sequence[str]) -> None:
  """A start's choice (chosen_lr, and dev: that run's dev score) once its
  record has run at every one of `learning_rates`; none before (a grid that
  grew forgets it until the new rates have run)."""
  if set(record["runs"]) == set(learning_rates):
    record["chosen_lr"] = float(choose_lr(record["runs"]))
    record["dev"] = record["runs"][lr_key(record["chosen_lr"])]["dev"]
  else:
    record.pop("chosen_lr", None)
    record.pop("dev", None)


def settle_choices(results: Dict, learning_rates: Sequence[str]) -> None:
  """settle_choice for every start of every task in results.json."""
  for by_start in results.get("finetuning", {}).values():
    for record in by_start.values():
      settle_choice(record, learning_rates)


def merge_runs(recorded: List[Dict], runs: List[Dict]) -> List[Dict]:
  """recorded pretraining_runs plus the new ones (an objective and seed seen
  before must keep its checkpoint)."""
  merged = {(r["objective"], r["seed"]): r for r in recorded}
  for run in runs:
    known = merged.setdefault((run["objective"], run["seed"]), run)
    if known["checkpoint"] != run["checkpoint"]:
      raise ConfigError(f"--study_dirs: {run['objective']} seed {run['seed']} was "
                        f"{known['checkpoint']} in this work_dir, now {run['checkpoint']}")
  return list(merged.values())


def main() -> int:
  work_dir = pathlib.Path(FLAGS.work_dir).resolve()
  results_path = work_dir / "results.json"
  results = json.loads(results_path.read_text()) if results_path.exists() else {}
  data_dir = pathlib.Path(FLAGS.finetuning_data_dir).resolve()
  unknown = [t for t in FLAGS.tasks if t not in TASK_FILES]
  if unknown:
    raise ConfigError(f"--tasks: {unknown[0]} is not one of {', '.join(TASK_FILES)}")
  learning_rates = [lr_key(lr) for lr in FLAGS.learning_rates]
  studies = read_studies(FLAGS.study_dirs,
                         finished_starts(results, FLAGS.tasks, learning_rates))
  lengths = per_task("max_seq_length", FLAGS.max_seq_length, FLAGS.tasks, 8)
  epochs = per_task("num_train_epochs", FLAGS.num_train_epochs, FLAGS.tasks, 0.01, float)
  hparams = dict(studies["model"], **override_hparams(FLAGS.finetuning_hparams),
                 seed=FLAGS.seed, **({"epoch_metrics": True} if FLAGS.epoch_metrics else {}))
  named = named_starts(FLAGS.starts, [f"random_init_seed{s}" for s in FLAGS.random_init_seeds]
                       + [f"{run['objective']}_seed{run['seed']}" for run in studies["runs"]])
  train_examples = {task: training_examples_left(task, data_dir, FLAGS.selection_examples)
                    for task in FLAGS.tasks}
  settings = {"rule": RULE, "tasks": FLAGS.tasks, "selection_examples": FLAGS.selection_examples,
              "selection_seed": FLAGS.selection_seed,
              "learning_rates": learning_rates, "seed": FLAGS.seed,
              "max_seq_length": lengths, "num_train_epochs": epochs,
              "finetuning_hparams": hparams,
              "vocab_file": studies["vocab_file"], "finetuning_data_dir": str(data_dir),
              "train_examples": train_examples}
  check_settings(results, settings, work_dir)
  results["settings"] = settings
  settle_choices(results, learning_rates)
  results["pretraining_runs"] = merge_runs(results.get("pretraining_runs", []), studies["runs"])
  results["named_starts"] = dict(results.get("named_starts", {}), **named)
  for task in FLAGS.tasks:
    write_task_data(task, data_dir, work_dir, FLAGS.selection_examples, FLAGS.selection_seed)

  def save(analyse: bool = False) -> None:
    """Writes results.json; its analysis only when `analyse` (the baselines
    take minutes on the full sets), else none rather than a stale one."""
    results.pop("analysis", None)
    if analyse:
      results["analysis"] = learning_analysis.analyse_full_labels(results, data_dir)
    fileio.atomic_write_text(str(results_path), json.dumps(results, indent=1, sort_keys=True))

  starts = {f"random_init_seed{s}": random_init_checkpoint(studies["model"], int(s), work_dir)
            for s in FLAGS.random_init_seeds}
  starts.update({f"{run['objective']}_seed{run['seed']}": run["checkpoint"]
                 for run in studies["runs"]})
  starts.update(named)
  for task in FLAGS.tasks:
    for start, checkpoint in starts.items():
      record = results.setdefault("finetuning", {}).setdefault(task, {}).setdefault(
          start, {"runs": {}})
      for lr in learning_rates:
        if lr in record["runs"]:
          continue
        began = time.time()
        # Featurized training data are cached per task under work_dir/featurized.
        record["runs"][lr] = finetune(
            work_dir / "runs" / task / start / f"lr{lr}", work_dir, task, checkpoint,
            dict(hparams, learning_rate=float(lr), max_seq_length=lengths[task],
                 num_train_epochs=epochs[task],
                 preprocessed_data_dir=str(work_dir / "featurized")), studies["vocab_file"])
        log(f"fine-tuned {task} from {start} at lr {lr}: selection "
            f"{record['runs'][lr]['selection']:.2f}, dev {record['runs'][lr]['dev']:.2f} "
            f"({time.time() - began:.0f} s)")
        settle_choice(record, learning_rates)
        save()
  if "analysis" not in results:
    save(analyse=True)
  log(f"done: {results_path}")
  return 0


if __name__ == "__main__":
  define_flags()
  cli.run(main, "full_label_study.py")
