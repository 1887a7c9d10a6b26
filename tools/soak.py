"""Kill -9 soak test: the jobs survive SIGKILL anywhere and lose nothing.

    python -m tools.soak --work_dir=/tmp/soak                   # defaults: 10 kills of 200 steps
    python -m tools.soak --work_dir=/tmp/soak --kills=40 --num_train_steps=600 \\
        --tfrecords_kills=10 --finetuning_kills=15               # long form

For each job — `data_prep/build_tfrecords.py`, `run_pretraining.py` (train,
eval, export), `run_finetuning.py` (train, eval, export) — the soak:

  1. runs the command once, uninterrupted: the reference;
  2. runs the same command in a fresh directory and sends SIGKILL at chosen
     moments, rerunning the same command after each kill, until the planned
     kills are spent and a last rerun exits 0.  Moments: random times since
     start (TensorFlow import, tracing, training), and named moments the
     job is made to freeze at (`electra_tf.stop_points`), so that those
     kills land in the act however fast the machine is: a checkpoint whose
     files are written and not yet recorded as the latest, TFRecords
     half-written under their temporary names or partly joined, an evaluation under way, a
     SavedModel complete in its temporary directory;
  3. after every kill checks that the checkpoints the `checkpoint` state file
     lists (the latest among them) read back completely and that every file
     under a final name is complete (TFRecords read to the end, JSON parses);
  4. at the end checks that the run reached exactly its last step, that no
     temporary or orphaned file is left anywhere, and that the outputs equal
     the reference: the final checkpoints (weights, Adam slots, step counter)
     and the logged losses bit for bit, the evaluation results, the
     TFRecords byte for byte.

Prints one line per attempt and a summary; writes the summary as JSON to
--report; exits 1 when a check fails.  Needs the BERT vocab, a text corpus
and GLUE RTE (defaults: ../shared/data beside the checkout).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import types
from typing import Callable, Dict, List, Optional, Sequence

from absl import flags

from electra_tf import cli
from electra_tf import stop_points
from electra_tf.errors import ConfigError

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"

# What a finished job must not leave anywhere under its output directory.
DEBRIS = re.compile(r"(_temp$|\.tempstate\d+$|^checkpoint\.tmp[0-9a-f]{32}$|"
                    r"\.tmp-\d+$|\.old-\d+$|\.partial$)")
STEP_LOSS = re.compile(r"^step (\d+)/\d+ = .*? - loss ([-+0-9.eE]+|nan|inf)")

# A tiny ELECTRA-Small; fine-tuning starts from the pre-trained reference.
TINY_MODEL = {
    "model_size": "small", "vocab_size": 30522, "embedding_size": 16,
    "model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 2,
                               "num_attention_heads": 2, "intermediate_size": 64},
}
PRETRAIN_HPARAMS = dict(
    TINY_MODEL, generator_hidden_size=0.5, max_seq_length=32, train_batch_size=8,
    eval_batch_size=8, num_warmup_steps=10, save_checkpoints_steps=10,
    keep_checkpoint_max=3, num_eval_steps=20, log_every=1, seed=7)
FINETUNE_HPARAMS = dict(
    TINY_MODEL, max_seq_length=64, train_batch_size=8, eval_batch_size=16,
    num_train_epochs=8.0, save_checkpoints_steps=8, iterations_per_loop=4, seed=3)


class SoakFailure(AssertionError):
  pass


def check(condition: bool, message: str) -> None:
  if not condition:
    raise SoakFailure(message)


# ------------------------------------------------------------ processes
class Attempt:
  """One run of a job's command, with its log lines and their times."""

  def __init__(self, command: Sequence[str], log_path: pathlib.Path,
               extra_env: Optional[Dict[str, str]] = None):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra_env or {}))
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    self.start = time.time()
    self.lines: List[tuple] = []  # (seconds since start, line)
    self._log = open(log_path, "w", encoding="utf-8")
    self.process = subprocess.Popen([sys.executable, *command], cwd=REPO, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace")
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()

  def _read(self) -> None:
    for line in self.process.stdout:
      self.lines.append((time.time() - self.start, line.rstrip("\n")))
      self._log.write(line)
    self._log.close()

  def running(self) -> bool:
    return self.process.poll() is None

  def seen(self, pattern: str) -> Optional[float]:
    for when, line in list(self.lines):
      if pattern in line:
        return when
    return None

  def kill(self) -> bool:
    """SIGKILL; True if the process was still running."""
    if not self.running():
      return False
    os.kill(self.process.pid, signal.SIGKILL)
    return True

  def wait(self, timeout: float = 900) -> int:
    code = self.process.wait(timeout=timeout)
    self._reader.join(timeout=30)
    return code

  def text(self) -> str:
    return "\n".join(line for _, line in self.lines)


@dataclasses.dataclass
class Moment:
  """When to kill: at a random time, or frozen at a named stop point."""
  label: str  # "random", or what the job is doing at `point`
  point: str = ""  # an electra_tf.stop_points name; "" for a random time
  count: int = 1  # stop at the count-th time the job reaches `point`
  fraction: float = 0.0  # random: where in the attempt's expected life to kill
  delay: float = 0.0  # random: seconds since start (set per attempt)

  def environment(self) -> Dict[str, str]:
    return stop_points.environment(self.point, self.count) if self.point else {}

  def wait_and_kill(self, attempt: Attempt) -> Dict:
    """Waits for the moment (or the end of the run) and kills; returns a record."""
    if self.point:
      hit = stop_points.wait_until_stopped(attempt.process)
    else:
      while attempt.running() and time.time() - attempt.start < self.delay:
        time.sleep(0.005)
      hit = attempt.running()
    killed = attempt.kill()
    code = attempt.wait()
    return {"moment": self.label, "at_s": round(time.time() - attempt.start, 3),
            "killed": killed, "hit": hit and killed, "exit": code}


# ------------------------------------------------------------ checks
def debris(root: pathlib.Path) -> List[str]:
  found = []
  for directory, dirs, files in os.walk(root):
    found += [os.path.join(directory, n) for n in dirs + files if DEBRIS.search(n)]
  return sorted(found)


def read_checkpoint(prefix: str) -> Dict[str, object]:
  """Every tensor of a checkpoint (reading them all detects truncation)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(prefix)
  return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()}


def listed_checkpoints(directory: pathlib.Path) -> List[str]:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  state = tf.train.get_checkpoint_state(str(directory))
  if state is None:
    return []
  paths = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
  return [p if os.path.isabs(p) else str(directory / p) for p in paths]


def check_checkpoint_dirs(root: pathlib.Path) -> int:
  """Every checkpoint any state file under `root` lists reads back; count."""
  count = 0
  for state_file in root.rglob("checkpoint"):
    if not state_file.is_file():
      continue
    for prefix in listed_checkpoints(state_file.parent):
      try:
        read_checkpoint(prefix)
      except Exception as e:  # pylint: disable=broad-except
        raise SoakFailure(f"listed checkpoint {prefix} does not restore: "
                          f"{type(e).__name__}: {str(e).splitlines()[0]}") from e
      count += 1
  return count


def check_final_files(root: pathlib.Path) -> None:
  """Files under final names are complete: JSON parses, TFRecords and
  TensorBoard event files read through, SavedModel variables restore."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for path in root.rglob("*.json"):
    if not DEBRIS.search(path.name):
      try:
        json.loads(path.read_text(encoding="utf-8"))
      except ValueError as e:
        raise SoakFailure(f"{path} is not complete JSON: {e}") from e
  for path in root.rglob("pretrain_data.tfrecord-*"):
    try:
      for _ in tf.data.TFRecordDataset(str(path)):
        pass
    except tf.errors.OpError as e:
      raise SoakFailure(f"{path} is truncated: {e.message.splitlines()[0]}") from e
  for events in root.rglob("events.out.tfevents.*"):
    try:
      for _ in tf.compat.v1.train.summary_iterator(str(events)):
        pass
    except tf.errors.OpError as e:
      raise SoakFailure(f"{events} is truncated: {e.message.splitlines()[0]}") from e
  for saved_model in root.rglob("saved_model.pb"):
    index = saved_model.parent / "variables" / "variables.index"
    check(index.is_file(), f"{saved_model.parent} lacks its variables")
    read_checkpoint(str(index)[:-len(".index")])


def logged_losses(texts: Sequence[str]) -> Dict[int, str]:
  """step -> logged loss (as printed) over the logs of all attempts."""
  losses: Dict[int, str] = {}
  for text in texts:
    for line in text.splitlines():
      match = STEP_LOSS.match(line)
      if match:
        step, loss = int(match.group(1)), match.group(2)
        check(losses.get(step, loss) == loss,
              f"step {step} logged loss {loss} after a resume, {losses.get(step)} before")
        losses[step] = loss
  return losses


def compare_checkpoints(reference: str, soaked: str) -> int:
  """Bit-exact equality of every saved value; returns how many were compared."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  want, got = read_checkpoint(reference), read_checkpoint(soaked)
  values = [k for k in want if k.endswith("VARIABLE_VALUE")]
  check(sorted(values) == sorted(k for k in got if k.endswith("VARIABLE_VALUE")),
        f"{soaked} holds other variables than {reference}")
  for key in values:
    check(np.array_equal(want[key], got[key]),
          f"{key} differs between {reference} and {soaked}")
  return len(values)


# ------------------------------------------------------------ the jobs
@dataclasses.dataclass
class Job:
  name: str
  command: Callable[[pathlib.Path], List[str]]  # output dir -> argv
  moments: Callable[[], List[Moment]]  # the kill plan
  verify: Callable[[pathlib.Path, pathlib.Path, List[str]], Dict]  # ref, soaked, logs
  done: Callable[[pathlib.Path, Attempt], float] = lambda _dir, _ref: 0.0  # work done


def soak(job: Job, work_dir: pathlib.Path, rng: random.Random,
         log: Callable[[str], None]) -> Dict:
  """The reference run, the killed runs, the checks; returns the job's summary."""
  reference_dir, soaked_dir = work_dir / f"{job.name}_reference", work_dir / f"{job.name}_soak"
  for directory in (reference_dir, soaked_dir):
    shutil.rmtree(directory, ignore_errors=True)
  logs_dir = work_dir / "logs"
  logs_dir.mkdir(parents=True, exist_ok=True)
  reference = Attempt(job.command(reference_dir), logs_dir / f"{job.name}_reference.log")
  code = reference.wait()
  check(code == 0, f"{job.name}: the reference run failed (exit {code}); see "
        f"{logs_dir / (job.name + '_reference.log')}")
  duration = time.time() - reference.start
  log(f"[{job.name}] reference run: {duration:.1f} s")
  plan = job.moments()
  rng.shuffle(plan)
  # Saves need training left to do, eval and export come after it: kill
  # during saves first, at random moments next, in eval and export last. A
  # build killed while it joins its files still has them to join.
  order = {"save": 0, "write": 0, "note": 0, "finish": 0.5, "eval": 2, "export": 3}
  plan.sort(key=lambda m: order.get(m.label, 1))
  records: List[Dict] = []
  texts: List[str] = []
  checked, attempt_index = 0, 0
  startup = min([when for when, line in reference.lines if STEP_LOSS.match(line)] or [0.0])
  # A planned moment the run outlived (it finished first) is replaced by a
  # random one, so the job is killed as many times as planned.
  while True:
    attempt_index += 1
    kills = sum(r["killed"] for r in records)
    if attempt_index <= len(plan):
      moment = plan[attempt_index - 1]
    elif kills < len(plan) and attempt_index <= 3 * len(plan):
      moment = random_moments(1, rng)[0]
    else:
      moment = None
    if moment is not None and not moment.point:
      # Uniform over this attempt's expected life: start-up, then what is left.
      remaining = (duration - startup) * (1.0 - job.done(soaked_dir, reference))
      moment = dataclasses.replace(moment, delay=moment.fraction * (startup + remaining))
    attempt = Attempt(job.command(soaked_dir),
                      logs_dir / f"{job.name}_attempt{attempt_index:02d}.log",
                      moment.environment() if moment else None)
    if moment is None:
      code = attempt.wait()
      texts.append(attempt.text())
      check(code == 0, f"{job.name}: the last rerun failed (exit {code}): "
            f"{attempt.text()[-2000:]}")
      log(f"[{job.name}] final rerun: exit 0 after {time.time() - attempt.start:.1f} s")
      break
    record = moment.wait_and_kill(attempt)
    texts.append(attempt.text())
    check(record["killed"] or record["exit"] == 0,
          f"{job.name}: attempt {attempt_index} failed by itself (exit "
          f"{record['exit']}): {attempt.text()[-2000:]}")
    checked += check_checkpoint_dirs(soaked_dir)
    check_final_files(soaked_dir)
    records.append(record)
    log(f"[{job.name}] attempt {attempt_index}: {record['moment']} -> "
        f"{'killed' if record['killed'] else 'finished first'} at {record['at_s']} s"
        f"{' (in the act)' if record['hit'] else ''}")
  leftovers = debris(soaked_dir)
  check(not leftovers, f"{job.name}: debris left: {leftovers[:5]}")
  check_final_files(soaked_dir)
  summary = {"job": job.name, "kills": sum(r["killed"] for r in records),
             "kills_in_the_act": {label: sum(r["hit"] for r in records if r["moment"] == label)
                                  for label in sorted({r["moment"] for r in records})},
             "attempts": records, "checkpoint_reads_after_kills": checked,
             "reference_seconds": round(duration, 1)}
  summary.update(job.verify(reference_dir, soaked_dir, texts + [reference.text()]))
  return summary


def random_moments(count: int, rng: random.Random) -> List[Moment]:
  return [Moment("random", fraction=rng.uniform(0.05, 1.0)) for _ in range(count)]


def checkpoint_progress(directory: pathlib.Path, total_steps: int) -> float:
  """Fraction of the steps the latest checkpoint under `directory` holds."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  latest = tf.train.latest_checkpoint(str(directory))
  return int(latest.rsplit("-", 1)[1]) / total_steps if latest else 0.0


def tfrecords_job(args, rng: random.Random) -> Job:
  def command(out: pathlib.Path) -> List[str]:
    return ["data_prep/build_tfrecords.py", f"--corpus_dir={args.corpus_dir}",
            f"--vocab_file={args.vocab_file}", f"--output_dir={out}",
            "--max_seq_length=32", "--num_out_files=4", "--seed=11"]

  def moments() -> List[Moment]:
    # A random moment the rerun outlives finishes the build, and a finished
    # build cannot be killed again: the first kills are named moments.
    named = [Moment("write", "tfrecords_writing"), Moment("finish", "tfrecords_finishing"),
             Moment("note", "tfrecords_checkpoint")][:args.tfrecords_kills]
    named += [Moment("write", "tfrecords_writing")] * max(0, args.tfrecords_kills // 3 - 1)
    return named + random_moments(args.tfrecords_kills - len(named), rng)

  def verify(reference_dir, soaked_dir, _texts) -> Dict:
    names = sorted(p.name for p in reference_dir.glob("pretrain_data.tfrecord-*"))
    check(names == sorted(p.name for p in soaked_dir.glob("pretrain_data.tfrecord-*")),
          "tfrecords: other output files than the reference")
    for name in names:
      check((reference_dir / name).read_bytes() == (soaked_dir / name).read_bytes(),
            f"tfrecords: {name} differs from the reference")
    return {"files_identical": len(names)}

  return Job("tfrecords", command, moments, verify)


def final_step_checks(reference_dir: pathlib.Path, soaked_dir: pathlib.Path,
                      total_steps: int, texts: Sequence[str]) -> Dict:
  """Exact last step, identical final checkpoint and logged losses."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  latest = tf.train.latest_checkpoint(str(soaked_dir))
  check(latest is not None and latest.endswith(f"ckpt-{total_steps}"),
        f"{soaked_dir}: latest checkpoint {latest}, expected ckpt-{total_steps}")
  iterations = [v for k, v in read_checkpoint(latest).items()
                if k.startswith("optimizer/") and "/_iterations/" in k]
  check(iterations and int(iterations[0]) == total_steps,
        f"{latest}: optimizer step {iterations}, expected {total_steps}")
  compared = compare_checkpoints(tf.train.latest_checkpoint(str(reference_dir)), latest)
  reference_losses = logged_losses(texts[-1:])
  soaked_losses = logged_losses(texts[:-1])
  check(soaked_losses == reference_losses,
        "logged losses differ from the reference at steps "
        f"{sorted(s for s in reference_losses if soaked_losses.get(s) != reference_losses[s])[:10]}")
  return {"final_step": total_steps, "values_identical": compared,
          "logged_steps_identical": len(reference_losses)}


def comparable_evaluation(model_dir: pathlib.Path) -> Dict:
  """results/unsup_results.json as two runs must agree on it: the metrics and
  what was read, the checkpoint relative to `model_dir`, without the time."""
  results = json.loads((model_dir / "results" / "unsup_results.json").read_text())
  results.pop("evaluated_at")
  results["checkpoint"] = os.path.relpath(results["checkpoint"], model_dir)
  return results


def pretraining_job(args, data_dir: pathlib.Path, rng: random.Random) -> Job:
  hparams = dict(PRETRAIN_HPARAMS, num_train_steps=args.num_train_steps)

  def command(out: pathlib.Path) -> List[str]:
    return ["run_pretraining.py", f"--data_dir={data_dir}", f"--model_dir={out}",
            f"--hparams={json.dumps(hparams)}", "--do_train", "--do_eval",
            f"--export_dir={out / 'export'}", "--strategy=one_device"]

  def moments() -> List[Moment]:
    n_save = max(2, args.kills // 4)
    # The k-th save of an attempt, k in 1..3: the run has at least 3 left.
    return ([Moment("save", "checkpoint_written", rng.randint(1, 3)) for _ in range(n_save)] +
            [Moment("eval", "eval_batch"), Moment("export", "export_written")] +
            random_moments(args.kills - n_save - 2, rng))

  def verify(reference_dir, soaked_dir, texts) -> Dict:
    result = final_step_checks(reference_dir, soaked_dir, args.num_train_steps, texts)
    want = comparable_evaluation(reference_dir)
    got = comparable_evaluation(soaked_dir)
    check(want == got, f"pretraining: eval results differ: {want} vs {got}")
    check((soaked_dir / "export" / "saved_model.pb").is_file(), "pretraining: no export")
    result["eval_results_identical"] = True
    return result

  return Job("pretraining", command, moments, verify,
             done=lambda out, _: checkpoint_progress(out, args.num_train_steps))


def finetuning_job(args, data_dir: pathlib.Path, init_dir: pathlib.Path,
                   rng: random.Random) -> Job:
  def command(out: pathlib.Path) -> List[str]:
    return ["run_finetuning.py", f"--data_dir={data_dir}", f"--model_dir={out}",
            "--task_names=rte", f"--init_checkpoint={init_dir}",
            f"--hparams={json.dumps(FINETUNE_HPARAMS)}", "--strategy=one_device",
            f"--export_dir={out / 'export'}"]

  def moments() -> List[Moment]:
    n_save = max(1, args.finetuning_kills // 3)
    plan = [Moment("save", "checkpoint_written", rng.randint(1, 2)) for _ in range(n_save)]
    plan += [Moment("eval", "eval_batch"), Moment("export", "export_written")]
    return plan + random_moments(args.finetuning_kills - len(plan), rng)

  def verify(reference_dir, soaked_dir, texts) -> Dict:
    steps = int(re.search(r"Training for (\d+) steps", texts[-1]).group(1))
    result = final_step_checks(reference_dir / "trial_1", soaked_dir / "trial_1",
                               steps, texts)
    want = (reference_dir / "results" / "rte_dev_metrics.json")
    got = (soaked_dir / "results" / "rte_dev_metrics.json")
    if want.is_file():
      check(json.loads(want.read_text()) == json.loads(got.read_text()),
            "finetuning: dev metrics differ from the reference")
    check((soaked_dir / "export" / "rte" / "saved_model.pb").is_file(), "finetuning: no export")
    return result

  def done(out: pathlib.Path, reference: Attempt) -> float:
    total = int(re.search(r"Training for (\d+) steps", reference.text()).group(1))
    return checkpoint_progress(out / "trial_1", total)

  return Job("finetuning", command, moments, verify, done)


def finetuning_data(work_dir: pathlib.Path, vocab_file: str, glue_dir: str) -> pathlib.Path:
  root = work_dir / "finetuning_data_dir"
  task_dir = root / "finetuning_data" / "rte"
  task_dir.mkdir(parents=True, exist_ok=True)
  for split in ("train", "dev"):
    shutil.copyfile(os.path.join(glue_dir, "rte", f"{split}.tsv"), task_dir / f"{split}.tsv")
  shutil.copyfile(vocab_file, root / "vocab.txt")
  return root


FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module beside other tools)."""
  flags.DEFINE_string("work_dir", None, "Scratch folder (replaced).")
  flags.DEFINE_integer("kills", 10, "Kills of the pre-training job.")
  flags.DEFINE_integer("tfrecords_kills", 3, "Kills of the TFRecord build.")
  flags.DEFINE_integer("finetuning_kills", 4, "Kills of the fine-tuning job (at least 3).")
  flags.DEFINE_integer("num_train_steps", 200, "Pre-training steps.")
  flags.DEFINE_integer("seed", 0, "Seed of the kill moments.")
  flags.DEFINE_list("jobs", ["tfrecords", "pretraining", "finetuning"], "Jobs to soak.")
  flags.DEFINE_string("vocab_file", str(SHARED_DATA / "vocab" / "bert_uncased_vocab.txt"),
                      "WordPiece vocab.")
  flags.DEFINE_string("corpus_file",
                      str(SHARED_DATA / "corpus" / "wikitext-2" / "wiki.valid.raw"),
                      "Text to pre-train on.")
  flags.DEFINE_integer("corpus_lines", 3000, "Lines of --corpus_file to pre-train on.")
  flags.DEFINE_string("glue_dir", str(SHARED_DATA / "finetuning_data"),
                      "Folder with rte/{train,dev}.tsv.")
  flags.DEFINE_string("report", None, "JSON summary (default: work_dir/soak.json).")
  flags.mark_flag_as_required("work_dir")


def main() -> int:
  for flag in ("vocab_file", "corpus_file"):
    if not os.path.isfile(FLAGS[flag].value):
      raise ConfigError(f"--{flag}: {FLAGS[flag].value} is not a file")
  if not os.path.isfile(os.path.join(FLAGS.glue_dir, "rte", "train.tsv")):
    raise ConfigError(f"--glue_dir: {FLAGS.glue_dir} has no rte/train.tsv")
  if FLAGS.finetuning_kills < 3:
    raise ConfigError(f"--finetuning_kills: {FLAGS.finetuning_kills} is below 3 "
                      "(a save, the evaluation and the export)")
  args = types.SimpleNamespace(**{name: FLAGS[name].value for name in (
      "work_dir", "kills", "tfrecords_kills", "finetuning_kills", "num_train_steps",
      "seed", "jobs", "vocab_file", "corpus_file", "corpus_lines", "glue_dir", "report")})
  work_dir = pathlib.Path(args.work_dir).resolve()
  shutil.rmtree(work_dir, ignore_errors=True)
  corpus_dir = work_dir / "corpus"
  corpus_dir.mkdir(parents=True)
  with open(args.corpus_file, encoding="utf-8") as f:
    lines = [next(f, "") for _ in range(args.corpus_lines)]
  (corpus_dir / "corpus.txt").write_text("".join(lines), encoding="utf-8")
  args.corpus_dir = str(corpus_dir)
  rng = random.Random(args.seed)
  started = time.time()

  def log(message: str) -> None:
    print(f"{time.time() - started:7.1f}s {message}", flush=True)

  summaries, failure = [], None
  jobs = args.jobs
  try:
    tfrecords = tfrecords_job(args, rng)
    # Pre-training reads the reference TFRecords; fine-tuning starts from the
    # reference pre-trained model: each job's reference is the next one's input.
    summaries.append(soak(tfrecords, work_dir, rng, log) if "tfrecords" in jobs else None)
    if "tfrecords" not in jobs:
      Attempt(tfrecords.command(work_dir / "tfrecords_reference"),
              work_dir / "tfrecords_reference.log").wait()
    data_dir = work_dir / "pretrain_data_dir"
    (data_dir / "pretrain_tfrecords").mkdir(parents=True)
    for path in (work_dir / "tfrecords_reference").glob("pretrain_data.tfrecord-*"):
      shutil.copyfile(path, data_dir / "pretrain_tfrecords" / path.name)
    shutil.copyfile(args.vocab_file, data_dir / "vocab.txt")
    if "pretraining" in jobs or "finetuning" in jobs:
      summaries.append(soak(pretraining_job(args, data_dir, rng), work_dir, rng, log))
    if "finetuning" in jobs:
      summaries.append(soak(finetuning_job(
          args, finetuning_data(work_dir, args.vocab_file, args.glue_dir),
          work_dir / "pretraining_reference", rng), work_dir, rng, log))
  except SoakFailure as e:
    failure = str(e)
  report = {"ok": failure is None, "failure": failure,
            "seconds": round(time.time() - started, 1),
            "jobs": [s for s in summaries if s]}
  report_path = args.report or str(work_dir / "soak.json")
  with open(report_path, "w", encoding="utf-8") as f:
    json.dump(report, f, indent=2)
  for summary in report["jobs"]:
    log(f"[{summary['job']}] {summary['kills']} kills survived "
        f"(in the act: {summary['kills_in_the_act']}); "
        + ", ".join(f"{k} {v}" for k, v in summary.items()
                    if k not in ("job", "kills", "kills_in_the_act", "attempts")))
  if failure:
    print(f"soak: FAILED: {failure}", file=sys.stderr, flush=True)
    return 1
  log(f"soak: OK; report in {report_path}")
  return 0


if __name__ == "__main__":
  define_flags()
  cli.run(main, "soak.py")
