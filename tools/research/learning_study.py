"""Does pre-training learn?  ELECTRA against a masked LM at equal FLOPs and
against no pre-training, on a CPU.

    python -m tools.research.learning_study --work_dir=study                  # defaults
    python -m tools.research.learning_study --work_dir=study --steps=4000 \\
        --eval_at=250,500,1000,2000,4000 --finetune_at=1000,4000 \\
        --tasks=chunk,sst --train_examples=2000 --seeds=1,2,3

Stages (rerun the same command to resume; finished work is kept):
  1. data: the pre-training corpus (--corpus_dir, default ../shared/data/corpus)
     minus one held-out file (--heldout_file), TFRecords of both (seq 128)
     with the BERT uncased vocab (or, with --vocab_file='', a vocab of
     --vocab_size learned from the training text); --task_text adds the
     training texts of fine-tuning tasks to the training corpus, labels dropped;
  2. pre-training: ELECTRA (the --hparams model) with a --steps step schedule,
     and a masked LM of the same discriminator (electra_objective false) with
     the schedule that spends the same pre-training FLOPs (official FLOPs
     count, electra_tf/flops.py); both train to the last --eval_at point of
     their schedule and are evaluated on the held-out records at each
     --eval_at step of ELECTRA (and the FLOPs-equal steps of the masked LM;
     --nomasked_lm leaves the masked LM out; --arithmetic_masked_lm adds a
     masked LM whose steps cost ELECTRA's with the embedding lookups not
     counted, mlm_arithmetic);
     then, for each evaluated checkpoint and for a random initialisation, how
     spread out the encoder's final token vectors are on the held-out records
     (effective rank and mean cosine, pretrain/metrics.RepresentationStats);
  3. fine-tuning: each --tasks task on its first --train_examples training
     examples (the whole dev set), from the ELECTRA and masked-LM checkpoints
     at --finetune_at and from random initialisation, one run per --seeds seed;
     --finetuning_name=NAME keeps a second setting (other --train_examples or
     --finetuning_hparams) beside the first, over the same checkpoints;
  4. work_dir/results.json (for each start: its runs, their mean and standard
     deviation, and against random initialisation, and for ELECTRA against the
     FLOPs-equal masked LM, the difference, the seeds on which it scored
     higher and Welch's t), and the figures
     work_dir/pretraining.png (eval metrics against steps and against FLOPs)
     and work_dir/downstream.png (dev metric, mean and standard deviation over
     seeds; downstream_NAME.png for a --finetuning_name).

The same learning rate, warm-up, batch and sequence length serve both
objectives; only the objective (and so the steps a FLOPs budget buys) differs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

from absl import flags

from electra_tf import cli
from electra_tf import fileio
from electra_tf.errors import ConfigError
from electra_tf.pretrain.config import PretrainingConfig
from tools.research import study_samples

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
SHARED = REPO.parent / "shared" / "data"
# The study's model: the official trajectory fixture's shape (ELECTRA-Small
# narrowed to hidden 128, 4 layers), which learns within a few hundred steps.
MODEL = {"model_size": "small", "embedding_size": 64,
         "model_hparam_overrides": {"hidden_size": 128, "num_hidden_layers": 4,
                                    "num_attention_heads": 2, "intermediate_size": 512},
         "generator_hidden_size": 0.25, "max_seq_length": 128, "train_batch_size": 32,
         "eval_batch_size": 32, "learning_rate": 2e-4, "num_warmup_steps": 100,
         "num_eval_steps": 40, "log_every": 50, "iterations_per_loop": 50}
TASK_METRIC = {"chunk": "f1", "sst": "accuracy", "cola": "mcc", "rte": "accuracy",
               "mrpc": "f1", "sts": "pearson", "qnli": "accuracy"}
EVAL_KEYS = ("masked_lm_accuracy", "masked_lm_loss", "sampled_masked_lm_accuracy",
             "disc_accuracy", "disc_always_real_accuracy", "disc_auc_real_tokens",
             "disc_precision", "disc_recall", "disc_loss")

FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module beside other tools)."""
  flags.DEFINE_string("work_dir", None, "Where everything goes (resumable).")
  flags.DEFINE_string("corpus_dir", str(SHARED / "corpus"), "Pre-training text.")
  flags.DEFINE_string("heldout_file", "gutenberg/jnglb10.txt",
                      "File under --corpus_dir kept out of training, for evaluation (or "
                      "a file elsewhere, e.g. make_package_corpus's heldout/heldout.txt).")
  flags.DEFINE_string("vocab_file", str(SHARED / "vocab" / "bert_uncased_vocab.txt"),
                      "The WordPiece vocab; empty: learn one of --vocab_size from the "
                      "training text.")
  flags.DEFINE_integer("vocab_size", 8000, "Size of the vocab learned when --vocab_file is empty.")
  flags.DEFINE_string("finetuning_data_dir", str(SHARED / "finetuning_data"),
                      "Folder with <task>/ fine-tuning data.")
  flags.DEFINE_list("task_text", [],
                    "Fine-tuning tasks whose training text (all of it, labels dropped) "
                    "joins the pre-training corpus: in-domain unlabelled text, as in "
                    "semi-supervised learning. Their dev sets stay unseen.")
  flags.DEFINE_string("hparams", None, "Pre-training hparams over the study's model (JSON).")
  flags.DEFINE_integer("steps", 2000, "ELECTRA pre-training steps.")
  flags.DEFINE_list("eval_at", ["100", "250", "500", "1000", "2000"],
                    "ELECTRA steps at which both models are evaluated.")
  flags.DEFINE_list("finetune_at", ["500", "2000"], "ELECTRA steps fine-tuned from.")
  flags.DEFINE_list("tasks", ["chunk", "sst"], "Fine-tuning tasks.")
  flags.DEFINE_integer("train_examples", 2000, "Training examples per task.")
  flags.DEFINE_list("seeds", ["1", "2", "3"], "Fine-tuning seeds.")
  flags.DEFINE_string("finetuning_hparams", '{"learning_rate": 3e-4, "num_train_epochs": 3.0}',
                      "Fine-tuning hparams (JSON) over the model's.")
  flags.DEFINE_string("finetuning_name", "",
                      "Name of this fine-tuning setting (--train_examples and "
                      "--finetuning_hparams), so that several settings share one work_dir's "
                      "checkpoints: its runs go to work_dir/finetuning_NAME, its results to "
                      "results.json's finetuning_NAME, its figure to downstream_NAME.png "
                      "(empty: finetuning, downstream.png). A setting's runs are only "
                      "resumed with the --train_examples and --finetuning_hparams they began with.")
  flags.DEFINE_boolean("masked_lm", True,
                       "Also pre-train the FLOPs-equal masked LM and fine-tune from it "
                       "(--nomasked_lm: ELECTRA against random initialisation only).")
  flags.DEFINE_boolean("arithmetic_masked_lm", False,
                       "Also pre-train a masked LM whose steps cost what ELECTRA's do with "
                       "the embedding lookups left out of the FLOPs count (table reads, not "
                       "arithmetic), and fine-tune from it (starts mlm_arithmetic_<step>); "
                       "a work_dir that has it keeps it on later runs.")
  flags.DEFINE_boolean("random_init", True,
                       "Also fine-tune from a random initialisation (--norandom_init: only "
                       "the checkpoints, e.g. for a further pre-training seed whose random "
                       "initialisation runs another work_dir already holds: those do not "
                       "depend on the pre-training seed).")
  flags.DEFINE_integer("stats_batches", 10,
                       "Held-out batches over which the encoders' token vectors are measured.")
  flags.DEFINE_boolean("plots_only", False,
                       "Recompute the fine-tuning summaries and redraw the figures from "
                       "results.json.")
  flags.mark_flag_as_required("work_dir")


def log(message: str) -> None:
  print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ------------------------------------------------------------------ data
def prepare_data(work_dir: pathlib.Path) -> Dict[str, str]:
  """Vocab and TFRecords of the training corpus and of the held-out file."""
  from electra_tf.pretrain import corpus as corpus_lib  # pylint: disable=g-import-not-at-top
  from electra_tf.pretrain import tfrecords  # pylint: disable=g-import-not-at-top
  from electra_tf.pretrain import vocab_builder  # pylint: disable=g-import-not-at-top
  data = work_dir / "data"
  heldout = os.path.join(FLAGS.corpus_dir, FLAGS.heldout_file)
  files = corpus_lib.list_corpus_files(FLAGS.corpus_dir)
  if heldout not in files and not os.path.isfile(heldout):
    raise ConfigError(f"--heldout_file: {FLAGS.heldout_file} is not a file of {FLAGS.corpus_dir}")
  train_files = [f for f in files if f != heldout] + [
      write_task_text(task, FLAGS.finetuning_data_dir, data / "task_text")
      for task in FLAGS.task_text]
  vocab_file = pathlib.Path(FLAGS.vocab_file) if FLAGS.vocab_file else data / "vocab.txt"
  if not vocab_file.exists():
    log(f"learning a {FLAGS.vocab_size}-piece vocab from {len(train_files)} files")
    vocab = vocab_builder.build_vocab(vocab_builder.read_corpus_texts(train_files, "--corpus_dir"),
                                          FLAGS.vocab_size)
    data.mkdir(parents=True, exist_ok=True)
    fileio.atomic_write_text(str(vocab_file), "".join(t + "\n" for t in vocab))
  for name, corpus, num_files in (("train", train_files, 8), ("heldout", [heldout], 1)):
    out = data / f"{name}_tfrecords"
    if not (out / ".complete").exists():
      log(f"building the {name} TFRecords")
      tfrecords.build_tfrecords(corpus, str(vocab_file), str(out), max_seq_length=128,
                                num_out_files=num_files, seed=1)
      fileio.atomic_write_text(str(out / ".complete"), "")
  return {"vocab_file": str(vocab_file),
          "train": str(data / "train_tfrecords" / "pretrain_data.tfrecord*"),
          "heldout": str(data / "heldout_tfrecords" / "pretrain_data.tfrecord*")}


TASK_TEXT_DOCUMENT_LINES = 50  # lines per document of a task's text


def write_task_text(task: str, finetuning_data_dir: str, directory: pathlib.Path) -> str:
  """The training texts of `task` (read from `finetuning_data_dir/<task>/`)
  as a corpus file in `directory`: one text per line (a sentence pair on one
  line), a blank line every TASK_TEXT_DOCUMENT_LINES lines; returns its path."""
  from electra_tf.finetune import task_builder  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune.config import FinetuningConfig  # pylint: disable=g-import-not-at-top
  path = directory / f"{task}.txt"
  if not path.exists():
    config = FinetuningConfig.create(
        {}, data_dir=str(pathlib.Path(finetuning_data_dir).parent), task_names=[task])
    task_object = task_builder.get_task(task, config, tokenizer=None)
    lines = [task_object.example_text(example)
             for example in task_object.get_examples("train")]
    documents = ["\n".join(lines[i:i + TASK_TEXT_DOCUMENT_LINES])
                 for i in range(0, len(lines), TASK_TEXT_DOCUMENT_LINES)]
    directory.mkdir(parents=True, exist_ok=True)
    fileio.atomic_write_text(str(path), "\n\n".join(documents) + "\n")
    log(f"{task}: {len(lines)} training texts added to the pre-training corpus")
  return str(path)


# ----------------------------------------------------------- pre-training
def study_model() -> Dict:
  """MODEL with the --hparams overrides: pre-training and fine-tuning use it."""
  from electra_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  return dict(MODEL, **config_lib.parse_hparams(FLAGS.hparams))


def pretraining_config(objective: str, steps: int, data: Dict[str, str],
                       model_dir: pathlib.Path) -> PretrainingConfig:
  with open(data["vocab_file"], encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  hparams = study_model()
  hparams.update(vocab_size=vocab_size, num_train_steps=steps,
                 electra_objective=objective == "electra", save_checkpoints_steps=steps,
                 keep_checkpoint_max=1000, pretrain_tfrecords=data["train"],
                 eval_tfrecords=data["heldout"], vocab_file=data["vocab_file"],
                 model_dir=str(model_dir), do_eval=True)
  return PretrainingConfig.create(hparams)


@dataclasses.dataclass(frozen=True)
class Arm:
  """One pre-training run of the study. name: its record in results.json's
  pretraining, its folder under work_dir/pretraining and its starts' prefix
  (<name>_<step>); objective: its name in pretraining_runs; steps: ELECTRA's
  step -> this run's step that costs the same; flops_ratio: ELECTRA's cost of
  a step over this run's."""
  name: str
  objective: str
  config: PretrainingConfig
  steps: Dict[int, int]
  flops_ratio: float = 1.0


def masked_lm_arm(name: str, objective: str, electra: PretrainingConfig, data: Dict[str, str],
                  work_dir: pathlib.Path, points: List[int], with_lookups: bool) -> Arm:
  """The masked LM whose steps cost what ELECTRA's `points` do: by the official
  FLOPs count (with_lookups), or without the embedding lookups."""
  probe = pretraining_config("mlm", 1, data, work_dir)
  ratio = flops_per_step(electra, with_lookups) / flops_per_step(probe, with_lookups)
  steps = {step: int(round(step * ratio)) for step in points}
  return Arm(name, objective, pretraining_config("mlm", steps[FLAGS.steps], data,
                                                 work_dir / "pretraining" / name), steps, ratio)


def pretraining_runs(arms: List[Arm], work_dir: pathlib.Path) -> List[Dict]:
  """One object per pre-training run of the study, for a reader's script:
  objective, seed, steps (where its learning-rate schedule ends), the
  checkpoint at that step and the checkpoints fine-tuned from (paths relative
  to work_dir)."""
  runs = []
  for arm in arms:
    directory = pathlib.Path(arm.config.model_dir).relative_to(work_dir)
    steps = arm.steps[FLAGS.steps]
    runs.append({"objective": arm.objective, "seed": arm.config.seed, "steps": steps,
                 "checkpoint": str(directory / f"ckpt-{steps}"),
                 "finetuned_checkpoints": [str(directory / f"ckpt-{s}") for s in
                                           sorted(arm.steps[int(s)] for s in FLAGS.finetune_at)]})
  return runs


def flops_per_step(config: PretrainingConfig, with_lookups: bool = True) -> float:
  """Training FLOPs of a step: the official count, or without the embedding lookups."""
  from electra_tf import flops  # pylint: disable=g-import-not-at-top
  lookups = 0.0 if with_lookups else flops.lookup_flops_per_seq(config)
  return (flops.flops_per_seq(config) - lookups) * config.train_batch_size


def pretrain(arm: Arm, eval_at: List[int], results: Dict, save) -> None:
  """Trains `arm` in stages that end at its steps for ELECTRA's `eval_at`,
  evaluating each (resumable)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from electra_tf import train_loop  # pylint: disable=g-import-not-at-top
  from electra_tf.pretrain import job as job_lib  # pylint: disable=g-import-not-at-top
  name, config = arm.name, arm.config
  record = results.setdefault("pretraining", {}).setdefault(name, {
      "flops_per_step": flops_per_step(config), "evals": {}, "seconds": 0.0})
  todo = [arm.steps[step] for step in eval_at if str(arm.steps[step]) not in record["evals"]]
  if not todo:
    return
  train_loop.check_run_record(config.model_dir, job_lib.RUN_RECORD, config.architecture())
  train_loop.write_run_record(config.model_dir, job_lib.RUN_RECORD, config.architecture())
  job = job_lib.PretrainingJob(config, tf.distribute.OneDeviceStrategy("/cpu:0"))
  for step in todo:
    start = time.time()
    job.train(until_step=step)
    metrics = job.evaluate()
    record["seconds"] += time.time() - start
    record["evals"][str(step)] = {key: float(metrics[key]) for key in EVAL_KEYS
                                  if key in metrics}
    log(f"{name} step {step}: " + ", ".join(
        f"{k} {v:.4f}" for k, v in record["evals"][str(step)].items()))
    save()


def study_encoder(config: PretrainingConfig, checkpoint: Optional[str] = None):
  """The discriminator encoder of `config` initialised with config.seed and,
  given a checkpoint, restored from it (the tools that measure or fine-tune
  the study's encoders build it here)."""
  import tf_keras as keras  # pylint: disable=g-import-not-at-top
  from electra_tf import checkpoints  # pylint: disable=g-import-not-at-top
  from electra_tf.modeling import encoder as encoder_lib  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(config.seed)
  encoder = encoder_lib.build_discriminator_encoder(config.encoder_config(),
                                                    config.effective_embedding_size)
  if checkpoint:  # the encoder's variables exist once it is constructed
    checkpoints.restore_from_checkpoint(encoder, checkpoint)
  return encoder


def encoder_stats(config: PretrainingConfig, checkpoint: Optional[str],
                  heldout: str) -> Dict[str, float]:
  """RepresentationStats of the fine-tuned encoder's final token vectors
  (the discriminator, or the masked LM's encoder) over --stats_batches
  batches of the held-out records; checkpoint None: a random initialisation."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from electra_tf.pretrain import data as data_lib  # pylint: disable=g-import-not-at-top
  from electra_tf.pretrain import metrics as metrics_lib  # pylint: disable=g-import-not-at-top
  encoder = study_encoder(config, checkpoint)
  stats = metrics_lib.RepresentationStats(config.encoder_config().hidden_size)
  records = tf.data.TFRecordDataset(data_lib.find_tfrecords(heldout)).map(
      lambda record: data_lib.decode_record(record, config.max_seq_length))
  for batch in records.batch(config.eval_batch_size).take(FLAGS.stats_batches):
    outputs = encoder(batch["input_ids"], batch["input_mask"], batch["segment_ids"],
                      training=False)
    stats.update(outputs["sequence_output"].numpy(), batch["input_mask"].numpy())
  return stats.result()


def add_encoder_stats(arm: Arm, heldout: str, results: Dict, save) -> None:
  """encoder_effective_rank / encoder_mean_cosine for every evaluated step
  of `arm`'s run that lacks them (resumable)."""
  name, config = arm.name, arm.config
  for step, evals in sorted(results["pretraining"][name]["evals"].items(),
                            key=lambda item: int(item[0])):
    if "encoder_effective_rank" not in evals:
      stats = encoder_stats(config, os.path.join(config.model_dir, f"ckpt-{step}"), heldout)
      evals.update(encoder_effective_rank=stats["effective_rank"],
                   encoder_mean_cosine=stats["mean_cosine"])
      log(f"{name} step {step}: encoder effective rank {stats['effective_rank']:.1f}, "
          f"mean cosine {stats['mean_cosine']:.3f}")
      save()


# ------------------------------------------------------------ fine-tuning
def finetuning_key() -> str:
  """The fine-tuning setting's folder under work_dir and key in results.json."""
  return f"finetuning_{FLAGS.finetuning_name}" if FLAGS.finetuning_name else "finetuning"


def finetuning_settings(results: Dict) -> Dict[str, Dict]:
  """results.json's fine-tuning settings: key -> {train_examples, finetuning_hparams}."""
  from electra_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  settings = dict(results.get("finetuning_settings", {}))
  if "finetuning" in results and "finetuning" not in settings:
    # A work_dir from before the settings were recorded per name.
    settings["finetuning"] = {"train_examples": results["settings"]["train_examples"],
                              "finetuning_hparams": config_lib.parse_hparams(
                                  results["settings"]["finetuning_hparams"])}
  return settings


def check_finetuning_setting(results: Dict, key: str) -> Dict:
  """This setting as the flags give it; a one-line error if they differ from
  the setting its runs began with (those would be reused silently)."""
  from electra_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  if not re.fullmatch(r"[A-Za-z0-9_.-]*", FLAGS.finetuning_name):
    raise ConfigError(f"--finetuning_name: {FLAGS.finetuning_name!r} is not a folder name "
                      "(letters, digits, _ . -)")
  setting = {"train_examples": FLAGS.train_examples,
             "finetuning_hparams": config_lib.parse_hparams(FLAGS.finetuning_hparams)}
  recorded = finetuning_settings(results).get(key)
  if recorded is not None and recorded != setting:
    raise ConfigError(
        f"--train_examples/--finetuning_hparams: the runs in {key}/ began with "
        f"--train_examples={recorded['train_examples']} and --finetuning_hparams="
        f"'{json.dumps(recorded['finetuning_hparams'])}'; give this setting its own "
        "--finetuning_name")
  return setting


def finetuning_data(setting_dir: pathlib.Path) -> pathlib.Path:
  """Each task's first --train_examples training examples and its dev set,
  under setting_dir (work_dir/<the setting's key>)."""
  root = setting_dir / "data"
  for task in FLAGS.tasks:
    source = pathlib.Path(FLAGS.finetuning_data_dir) / task
    target = root / "finetuning_data" / task
    if (target / ".complete").exists():
      continue
    target.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
      if path.name.startswith("train"):
        fileio.atomic_write_text(str(target / path.name), _head(path, task))
      else:
        shutil.copyfile(path, target / path.name)
    fileio.atomic_write_text(str(target / ".complete"), "")
  return root


def _head(path: pathlib.Path, task: str) -> str:
  """The first --train_examples examples of a training file (a header stays)."""
  return study_samples.head_examples(path.read_text(encoding="utf-8"), task,
                                     FLAGS.train_examples)


def finetune(setting_dir: pathlib.Path, data_root: pathlib.Path, vocab_file: str,
             init: str, checkpoint: Optional[str], task: str, seed: int,
             vocab_size: int) -> Dict[str, float]:
  """One fine-tuning run (run_finetuning.py; resumes); its dev metrics."""
  from electra_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  model_dir = setting_dir / "runs" / f"{task}_{init}_seed{seed}"
  metrics_file = model_dir / "results" / f"{task}_dev_metrics.json"
  if not metrics_file.exists():
    hparams = finetuning_hparams(study_model(), vocab_size, max_seq_length=128, seed=seed,
                                 use_tfrecords_if_existing=False,
                                 **config_lib.parse_hparams(FLAGS.finetuning_hparams))
    run_finetuning(data_root, task, model_dir, vocab_file, hparams, checkpoint)
  return json.loads(metrics_file.read_text())


def finetuning_hparams(model: Dict, vocab_size: int, **overrides) -> Dict:
  """Fine-tuning hparams for the encoder of a study's `model` (its
  settings.model): its model_size, embedding_size and model_hparam_overrides,
  the vocab size, then `overrides`."""
  hparams = {key: model[key] for key in ("model_size", "embedding_size",
                                         "model_hparam_overrides")}
  hparams.update(vocab_size=vocab_size, **overrides)
  return hparams


def run_finetuning(data_root: pathlib.Path, task: str, model_dir: pathlib.Path,
                   vocab_file: str, hparams: Dict, checkpoint: Optional[str],
                   *extra_flags: str) -> None:
  """run_finetuning.py on `task` of data_root/finetuning_data in a subprocess
  (it resumes), from `checkpoint` (None: random initialisation), its results
  under model_dir/results/; RuntimeError with its last error line if it fails."""
  command = [sys.executable, str(REPO / "run_finetuning.py"), f"--data_dir={data_root}",
             f"--task_names={task}", f"--model_dir={model_dir}",
             f"--vocab_file={vocab_file}", "--hparams=" + json.dumps(hparams),
             f"--init_checkpoint={checkpoint or 'none'}", "--strategy=one_device",
             *extra_flags]
  run = subprocess.run(command, capture_output=True, text=True)
  if run.returncode:
    raise RuntimeError(f"fine-tuning {model_dir.name} failed: "
                       f"{run.stderr.strip().splitlines()[-1:]}")


# ----------------------------------------------------------------- figures
def mean_std(values: List[float]) -> Tuple[float, float]:
  """Mean and sample standard deviation (n - 1 in the denominator; 0 for one value)."""
  centre = sum(values) / len(values)
  return centre, (sum((v - centre) ** 2 for v in values) / max(1, len(values) - 1)) ** 0.5


def compare_runs(runs: Dict[str, float], baseline: Dict[str, float]) -> Dict:
  """How one start's fine-tuning runs compare with the baseline's.

  runs, baseline: {seed: dev metric}. Returns difference (mean of runs minus
  mean of baseline), higher_on_seeds and common_seeds (the seeds both ran, and
  on how many of them runs scored higher: the same seed means the same data
  order, head initialisation and dropout), and welch_t (the difference over
  sqrt(std_runs^2 / n_runs + std_baseline^2 / n_baseline); None with fewer
  than 2 runs a side or no spread at all).
  """
  (ours, ours_std), (theirs, theirs_std) = mean_std(list(runs.values())), mean_std(
      list(baseline.values()))
  common = sorted(set(runs) & set(baseline))
  comparison = {"difference": ours - theirs, "common_seeds": len(common),
                "higher_on_seeds": sum(runs[s] > baseline[s] for s in common), "welch_t": None}
  spread = (ours_std ** 2 / len(runs) + theirs_std ** 2 / len(baseline)) ** 0.5
  if len(runs) > 1 and len(baseline) > 1 and spread > 0:
    comparison["welch_t"] = comparison["difference"] / spread
  return comparison


def summarise_starts(starts: Dict[str, Dict], flops_equal: Dict[str, str]) -> None:
  """Fills each start's summary in place from its runs: mean, std (mean_std);
  for every start but random_init, against_random_init; and for an ELECTRA
  start whose FLOPs-equal masked-LM start ran too, against_masked_lm
  (compare_runs).

  starts: {start: {"runs": {seed: metric}, ...}}, one task of one setting.
  flops_equal: {"electra_<step>": "mlm_<step>"}, the pairs that cost the same.
  """
  baseline = starts.get("random_init", {}).get("runs")
  for name, summary in starts.items():
    if not summary["runs"]:
      continue
    summary["mean"], summary["std"] = mean_std(list(summary["runs"].values()))
    if name != "random_init" and baseline:
      summary["against_random_init"] = compare_runs(summary["runs"], baseline)
    masked_lm = starts.get(flops_equal.get(name), {}).get("runs")
    if masked_lm:
      summary["against_masked_lm"] = compare_runs(summary["runs"], masked_lm)


def plot(results: Dict, work_dir: pathlib.Path) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  runs = results.get("pretraining", {})
  panels = [("generator / masked LM accuracy", ["masked_lm_accuracy"]),
            ("discriminator: accuracy and AUC over real tokens",
             ["disc_accuracy", "disc_always_real_accuracy", "disc_auc_real_tokens"]),
            ("discriminator: replaced tokens", ["disc_precision", "disc_recall"]),
            ("encoder: effective rank of its token vectors\n(dotted: random initialisation)",
             ["encoder_effective_rank"]),
            ("encoder: mean cosine between its token vectors\n(dotted: random initialisation)",
             ["encoder_mean_cosine"])]
  # Panels with nothing to show (a results.json from before the encoder statistics) are left out.
  panels = [(title, keys) for title, keys in panels
            if any(key in evals for run in runs.values() for evals in run["evals"].values()
                   for key in keys)]
  colors = {"electra": "#3b75af", "mlm": "#e07b39", "mlm_arithmetic": "#59a14f"}
  styles = ["o-", "s--", "^:"]
  figure, axes = pyplot.subplots(2, len(panels), figsize=(5 * len(panels), 7.5))
  for row, against_flops in enumerate((False, True)):
    for axis, (title, keys) in zip(axes[row], panels):
      for name, run in runs.items():
        steps = sorted(int(s) for s in run["evals"])
        xs = [s * run["flops_per_step"] if against_flops else s for s in steps]
        for style, key in zip(styles, keys):
          ys = [run["evals"][str(s)].get(key) for s in steps]
          if any(y is not None for y in ys):
            axis.plot(xs, ys, style, markersize=4, color=colors.get(name),
                      alpha=0.6 if "always_real" in key else 1.0, label=f"{name}: {key}")
      if keys[0] in results.get("random_init_encoder", {}):
        axis.axhline(results["random_init_encoder"][keys[0]],
                     color="#999999", linestyle=":", label="random init")
      if against_flops:
        axis.set_xscale("log")
        axis.set_xlabel("pre-training FLOPs")
      else:
        axis.set_xlabel("step")
      axis.set_title(title, fontsize=10)
      axis.grid(alpha=0.3)
      axis.legend(fontsize=7)
  figure.suptitle("Pre-training, evaluated on held-out text (ELECTRA vs masked LM)")
  figure.tight_layout()
  figure.savefig(work_dir / "pretraining.png", dpi=80)
  pyplot.close(figure)

  for key in finetuning_settings(results):
    plot_downstream(results.get(key, {}), downstream_figure(work_dir, key))


def downstream_figure(work_dir: pathlib.Path, key: str) -> pathlib.Path:
  """downstream.png for the setting `finetuning`, downstream_NAME.png for `finetuning_NAME`."""
  return work_dir / (key.replace("finetuning", "downstream", 1) + ".png")


def plot_downstream(downstream: Dict, path: pathlib.Path) -> None:
  """Bars of each task's dev metric per start (mean ± std over the seeds), each
  seed's run as a dot, random initialisation's mean as a dotted line, to path."""
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  tasks = sorted(downstream)
  if not tasks:
    return
  figure, axes = pyplot.subplots(1, len(tasks), figsize=(6 * len(tasks), 4.2), squeeze=False)
  for axis, task in zip(axes[0], tasks):
    labels, means, stds, runs = [], [], [], []
    # Random initialisation first, then the checkpoints (<objective>_<step>) by step.
    for init, summary in sorted(downstream[task].items(), key=lambda item: (
        -1 if item[0] == "random_init" else int(item[0].rsplit("_", 1)[1]))):
      labels.append(init.replace("_", "\n"))
      means.append(summary["mean"])
      stds.append(summary["std"])
      runs.append(list(summary["runs"].values()))
    axis.bar(range(len(labels)), means, yerr=stds, capsize=4,
             color=["#999999" if "random" in l else "#3b75af" if "electra" in l
                    else "#59a14f" if "arithmetic" in l else "#e07b39" for l in labels])
    for position, values in enumerate(runs):
      spread = [0.25 * (i / max(1, len(values) - 1) - 0.5) for i in range(len(values))]
      axis.plot([position + dx for dx in spread], values, ".", color="black", markersize=4,
                alpha=0.6)
    if "random_init" in downstream[task]:
      axis.axhline(downstream[task]["random_init"]["mean"], color="#555555", linestyle=":",
                   linewidth=1)
    axis.set_xticks(range(len(labels)))
    axis.set_xticklabels(labels, fontsize=8)
    seeds = max(len(summary["runs"]) for summary in downstream[task].values())
    axis.set_title(f"{task}: dev {TASK_METRIC.get(task, '')} (mean ± std, dots: "
                   f"{seeds} seeds; dotted: random init)", fontsize=10)
    axis.grid(axis="y", alpha=0.3)
    low = min(min(m - s for m, s in zip(means, stds)), min(map(min, runs)))
    high = max(max(m + s for m, s in zip(means, stds)), max(map(max, runs)))
    # A metric that goes below 0 (CoLA's MCC) keeps its negative bars in view.
    axis.set_ylim(low - 2 if low < 0 else max(0.0, low - 5), high + 2)
    if low < 0:
      axis.axhline(0.0, color="black", linewidth=0.8)
  figure.tight_layout()
  figure.savefig(path, dpi=80)
  pyplot.close(figure)


# -------------------------------------------------------------------- main
def main() -> int:
  """The study; SIGTERM / SIGINT during pre-training save a checkpoint and
  exit with the signal's status (rerun the same command to resume)."""
  from electra_tf import train_loop  # pylint: disable=g-import-not-at-top
  try:
    return run_study()
  except train_loop.Preempted as stop:
    return stop.report("learning_study.py")


def run_study() -> int:
  work_dir = pathlib.Path(FLAGS.work_dir).resolve()
  work_dir.mkdir(parents=True, exist_ok=True)
  results_path = work_dir / "results.json"
  results = json.loads(results_path.read_text()) if results_path.exists() else {}

  def save() -> None:
    flops_equal = {f"electra_{step}": f"mlm_{mlm_step}" for step, mlm_step in
                   results.get("settings", {}).get("mlm_steps", {}).items()}
    for key in finetuning_settings(results):
      for starts in results.get(key, {}).values():
        summarise_starts(starts, flops_equal)
    fileio.atomic_write_text(str(results_path), json.dumps(results, indent=1, sort_keys=True))
    plot(results, work_dir)

  if FLAGS.plots_only:
    save()
    return 0
  eval_at = sorted({int(s) for s in FLAGS.eval_at + FLAGS.finetune_at})
  if eval_at[-1] > FLAGS.steps:
    raise ConfigError(f"--eval_at/--finetune_at: {eval_at[-1]} is beyond --steps {FLAGS.steps}")
  from electra_tf.finetune import config as finetune_config  # pylint: disable=g-import-not-at-top
  text_tasks = [t for t in finetune_config.TASK_NAMES
                if finetune_config.task_class(t).sentence_examples]
  without_text = sorted(set(FLAGS.task_text) - set(text_tasks))
  if without_text:
    raise ConfigError(f"--task_text: {without_text[0]} is not a classification or tagging task "
                      f"({', '.join(text_tasks)})")
  key = finetuning_key()
  results["finetuning_settings"] = {**finetuning_settings(results),
                                    key: check_finetuning_setting(results, key)}
  data = prepare_data(work_dir)
  electra = pretraining_config("electra", FLAGS.steps, data, work_dir / "pretraining" / "electra")
  points = eval_at + [FLAGS.steps]
  mlm = masked_lm_arm("mlm", "masked_lm", electra, data, work_dir, points, True)
  arithmetic = masked_lm_arm("mlm_arithmetic", "masked_lm_arithmetic", electra, data, work_dir,
                             points, False)
  with_arithmetic = (FLAGS.arithmetic_masked_lm
                     or "arithmetic_mlm_steps" in results.get("settings", {}))
  arms = ([Arm("electra", "electra", electra, {step: step for step in points})]
          + ([mlm] if FLAGS.masked_lm else []) + ([arithmetic] if with_arithmetic else []))
  results["settings"] = {"model": study_model(), "steps": FLAGS.steps, "eval_at": eval_at,
                         "masked_lm": FLAGS.masked_lm,
                         "mlm_steps": mlm.steps, "vocab_file": data["vocab_file"],
                         "flops_ratio": mlm.flops_ratio, "vocab_size": electra.vocab_size,
                         "task_text": FLAGS.task_text}
  if with_arithmetic:
    results["settings"].update(arithmetic_mlm_steps=arithmetic.steps,
                               arithmetic_flops_ratio=arithmetic.flops_ratio)
  results["pretraining_runs"] = pretraining_runs(arms, work_dir)
  for arm in arms:
    pretrain(arm, eval_at, results, save)
  if "random_init_encoder" not in results:
    stats = encoder_stats(electra, None, data["heldout"])
    results["random_init_encoder"] = {"encoder_effective_rank": stats["effective_rank"],
                                      "encoder_mean_cosine": stats["mean_cosine"]}
    log(f"random initialisation: encoder effective rank {stats['effective_rank']:.1f}")
  for arm in arms:
    add_encoder_stats(arm, data["heldout"], results, save)

  data_root = finetuning_data(work_dir / key)
  inits = {"random_init": None} if FLAGS.random_init else {}
  for step in sorted(int(s) for s in FLAGS.finetune_at):
    for arm in arms:
      inits[f"{arm.name}_{arm.steps[step]}"] = os.path.join(arm.config.model_dir,
                                                            f"ckpt-{arm.steps[step]}")
  for task in FLAGS.tasks:
    metric = TASK_METRIC[task]
    for init, checkpoint in inits.items():
      summary = results.setdefault(key, {}).setdefault(task, {}).setdefault(
          init, {"runs": {}})
      for seed in FLAGS.seeds:
        if seed in summary["runs"]:
          continue
        start = time.time()
        metrics = finetune(work_dir / key, data_root, data["vocab_file"], init, checkpoint, task,
                           int(seed), electra.vocab_size)
        summary["runs"][seed] = metrics[metric]
        summary["metric"] = metric
        log(f"{task} from {init}, seed {seed}: {metric} {metrics[metric]:.2f} "
            f"({time.time() - start:.0f} s)")
        save()
  save()
  log(f"done: {results_path}, {work_dir / 'pretraining.png'}, "
      f"{downstream_figure(work_dir, key)}")
  return 0


if __name__ == "__main__":
  define_flags()
  cli.run(main, "learning_study.py")
