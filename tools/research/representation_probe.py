"""What the pre-trained encoders' token vectors hold, layer by layer.

    python -m tools.research.representation_probe --output_dir=probe \\
        --study_dirs=seeds/seed1,seeds/seed2,seeds/seed3

For every pre-training run listed in the --study_dirs' results.json
(`pretraining_runs`: the checkpoint where its schedule ends) and for
--random_init_seeds random initialisations of the same model, and for each
layer (0: the embeddings as the first transformer layer reads them, then
every transformer layer's output):
  1. how the token vectors spread (`spread_statistics`), over every held-out
     sequence of the study (all of its TFRecords, so every part of the corpus
     mixture; at most --max_tokens tokens drawn at random) and over the
     tasks' own dev sentences (SST-2, CoLA, chunking);
  2. a linear probe: a softmax regression on the frozen vectors (sentence
     tasks: the mean of the sentence's token vectors; chunking: each word's
     first piece), trained on each task's first --probe_train_examples
     training examples; its L2 penalty chosen from PROBE_L2 on the last
     quarter of those (held-out training examples, never the dev set), then
     refitted on all of them and scored on the whole dev set (SST-2 accuracy,
     CoLA MCC, chunking F1, x 100).
output_dir/results.json holds every figure (resumable: a start already
measured is kept) and `analysis` (learning_analysis.analyse_representations:
the pre-training run as the unit, Welch over runs, Holm over the family, the
trivial baselines on the probes' training examples beside them);
output_dir/probe.png the figure.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Dict, List, Optional, Sequence, Tuple

# The probes' fits are many small matrix products: on a shared machine BLAS
# threads only wait for each other (10x slower measured at a load of 12).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from absl import flags  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top

from electra_tf import cli
from electra_tf import fileio
from electra_tf.errors import ConfigError, DataError
from tools.research import learning_analysis
from tools.research import learning_study
from tools.research import study_samples

SHARED = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "data"
TASKS = ("sst", "cola", "chunk")
PROBE_L2 = (1e-3, 1e-2, 1e-1)
STAT_SETS = ("heldout",) + tuple(f"{task}_dev" for task in TASKS)
OBJECTIVE_LABEL = {"random_init": "random initialisation", "electra": "ELECTRA",
                   "masked_lm": "masked LM"}

FLAGS = flags.FLAGS


def define_flags() -> None:
  flags.DEFINE_string("output_dir", None, "Where results.json and probe.png go (resumable).")
  flags.DEFINE_list("study_dirs", [], "learning_study work dirs whose results.json list "
                    "pretraining_runs; their held-out TFRecords are the first's data/heldout_tfrecords.")
  flags.DEFINE_list("random_init_seeds", ["1", "2", "3"], "Seeds of the random initialisations.")
  flags.DEFINE_string("finetuning_data_dir", str(SHARED / "finetuning_data"),
                      "Folder with sst/, cola/, chunk/.")
  flags.DEFINE_integer("probe_train_examples", 1000,
                       "Training examples (chunking: sentences) each probe sees, from the "
                       "head of the training file; its last quarter chooses the L2 penalty.")
  flags.DEFINE_integer("max_tokens", 50000, "Token vectors a statistic is computed over at most.")
  flags.DEFINE_boolean("skip_missing", False, "Leave out pre-training runs whose checkpoint "
                       "does not exist yet (a rerun adds them) instead of failing.")
  flags.mark_flag_as_required("output_dir")


# ------------------------------------------------------------------ the math
def spread_statistics(vectors: np.ndarray) -> Dict[str, float]:
  """How token vectors [T, H] (T >= 2) spread.

  uncentered_mean_cosine: mean cosine of two distinct vectors (near 1: they
  share a direction, "anisotropy"); centered_mean_cosine: the same after
  subtracting their mean; mean_share: |mean|^2 / mean |x|^2, the part of
  their energy in the common offset (a linear layer with a bias ignores it);
  effective_rank: exp(entropy) of the covariance's normalised eigenvalues;
  top_direction_share: the largest eigenvalue's share of the variance.
  """
  from electra_tf.pretrain import metrics  # pylint: disable=g-import-not-at-top
  vectors = np.asarray(vectors, dtype=np.float64)
  mean = vectors.mean(0)
  uncentered, centered = (metrics.RepresentationStats(vectors.shape[1]) for _ in range(2))
  mask = np.ones((1, len(vectors)))
  uncentered.update(vectors[np.newaxis], mask)
  centered.update((vectors - mean)[np.newaxis], mask)
  eigenvalues = np.clip(np.linalg.eigvalsh(np.cov(vectors.T, bias=True)), 0.0, None)
  first = uncentered.result()
  return {"uncentered_mean_cosine": first["mean_cosine"],
          "centered_mean_cosine": centered.result()["mean_cosine"],
          "mean_share": float(mean @ mean / np.mean(np.sum(vectors ** 2, axis=1))),
          "effective_rank": first["effective_rank"],
          "top_direction_share": float(eigenvalues.max() / eigenvalues.sum())}


def fit_softmax_regression(features: np.ndarray, labels: np.ndarray, num_classes: int,
                           l2: float) -> Tuple[np.ndarray, np.ndarray]:
  """Weights [H, C] and bias [C] minimising the mean cross-entropy of
  softmax(features @ W + b) plus l2 / 2 * |W|^2 (the bias is not penalised);
  L-BFGS from zeros.  (scikit-learn's LogisticRegression with
  C = 1 / (n * l2) minimises the same; tests compare the two.)"""
  from scipy import optimize  # pylint: disable=g-import-not-at-top
  features = np.asarray(features, dtype=np.float64)
  n, h = features.shape
  onehot = np.eye(num_classes)[np.asarray(labels)]

  def loss_and_gradient(theta):
    weights, bias = theta[:h * num_classes].reshape(h, num_classes), theta[h * num_classes:]
    logits = features @ weights + bias
    logits -= logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    error = (np.exp(log_probs) - onehot) / n  # d(mean cross-entropy)/d logits
    loss = -np.sum(onehot * log_probs) / n + 0.5 * l2 * np.sum(weights ** 2)
    return loss, np.concatenate([(features.T @ error + l2 * weights).ravel(), error.sum(0)])

  solution = optimize.minimize(loss_and_gradient, np.zeros(h * num_classes + num_classes),
                               jac=True, method="L-BFGS-B",
                               options={"maxiter": 500, "gtol": 1e-6})
  return (solution.x[:h * num_classes].reshape(h, num_classes),
          solution.x[h * num_classes:])


def linear_probe(train: np.ndarray, train_labels: Sequence[int], dev: np.ndarray,
                 num_classes: int, score) -> Dict:
  """A softmax-regression probe: features standardised by the training
  examples'; the L2 penalty of PROBE_L2 that scores best (`score(gold,
  predicted)`, higher is better; ties: the larger penalty) on the last
  quarter of `train` when fitted on the rest; refitted on all of `train`
  with it.  Returns {"l2", "selection": {l2: score}, "predictions": dev's}.
  The dev set plays no part in the choice."""
  train, train_labels = np.asarray(train, dtype=np.float64), np.asarray(train_labels)
  centre, scale = train.mean(0), train.std(0) + 1e-8
  train, dev = (train - centre) / scale, (np.asarray(dev, dtype=np.float64) - centre) / scale
  cut = len(train) - len(train) // 4
  selection = {}
  for l2 in PROBE_L2:
    weights, bias = fit_softmax_regression(train[:cut], train_labels[:cut], num_classes, l2)
    selection[l2] = score(train_labels[cut:], np.argmax(train[cut:] @ weights + bias, axis=1))
  chosen = max(PROBE_L2, key=lambda l2: (selection[l2], l2))
  weights, bias = fit_softmax_regression(train, train_labels, num_classes, chosen)
  return {"l2": chosen, "selection": {str(k): v for k, v in selection.items()},
          "predictions": np.argmax(dev @ weights + bias, axis=1)}


# ------------------------------------------------------------------ the data
class TaskSentences:
  """One task's examples as WordPiece ids ([CLS] pieces [SEP]) with labels:
  `ids` (lists), `labels` (sentence tasks: class ids; chunking: per word),
  `first_piece` (chunking: each word's first piece's position)."""

  def __init__(self, task: str, text: str, tokenizer, label_names: Optional[List[str]] = None):
    self.task = task
    if task == "chunk":
      sentences = learning_analysis.chunk_sentences(text)
      words_of, tags_of = [w for w, _ in sentences], [t for _, t in sentences]
      self.label_names = label_names or sorted({t for tags in tags_of for t in tags})
      self.ids, self.first_piece, self.labels = [], [], []
      for words, tags in zip(words_of, tags_of):
        pieces, firsts = ["[CLS]"], []
        for word in words:
          firsts.append(len(pieces))
          pieces.extend(tokenizer.tokenize(word) or ["[UNK]"])
        self.ids.append(tokenizer.convert_tokens_to_ids(pieces + ["[SEP]"]))
        self.first_piece.append(firsts)
        self.labels.append([self.label_names.index(t) if t in self.label_names else -1
                            for t in tags])
      self.tags = tags_of
    else:
      examples = learning_analysis.sentence_examples(text, task)
      self.label_names = label_names or sorted({label for _, label in examples})
      self.ids = [tokenizer.convert_tokens_to_ids(
          ["[CLS]"] + tokenizer.tokenize(" ".join(tokens))[:510] + ["[SEP]"])
          for tokens, _ in examples]
      self.labels = [self.label_names.index(label) for _, label in examples]
    if any(len(ids) > 512 for ids in self.ids):
      raise DataError(f"{task}: a sentence is longer than 512 pieces")

  def features(self, layer_vectors: List[List[np.ndarray]], layer: int) -> np.ndarray:
    """Probe inputs from per-example vectors [S, H] of one layer: sentence tasks
    the mean over the pieces between [CLS] and [SEP] ([N, H]); chunking each
    word's first piece ([words, H])."""
    vectors = layer_vectors[layer]
    if self.task == "chunk":
      return np.concatenate([v[firsts] for v, firsts in zip(vectors, self.first_piece)])
    return np.stack([v[1:-1].mean(0) if len(v) > 2 else v[0] for v in vectors])

  def flat_labels(self) -> np.ndarray:
    if self.task == "chunk":
      return np.array([label for labels in self.labels for label in labels])
    return np.asarray(self.labels)

  def score(self, predictions: np.ndarray) -> float:
    """The task's dev metric x 100 for predictions in flat_labels' order."""
    from electra_tf.finetune.tagging import tagging_metrics  # pylint: disable=g-import-not-at-top
    if self.task == "chunk":
      tags, start = [], 0
      for gold in self.tags:
        tags.append([self.label_names[p] for p in predictions[start:start + len(gold)]])
        start += len(gold)
      return 100.0 * tagging_metrics.span_precision_recall_f1(self.tags, tags)[2]
    return learning_analysis.sentence_score(
        self.task, [self.label_names[l] for l in self.labels],
        [self.label_names[p] for p in predictions])


def label_score(task: str, label_names: List[str]):
  """score(gold ids, predicted ids) for choosing a probe's penalty: accuracy,
  CoLA's MCC, or for chunking the token accuracy (spans need sentences)."""
  from electra_tf.finetune import metrics  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune.classification import (  # pylint: disable=g-import-not-at-top
      classification_metrics)
  if task == "cola":
    return lambda gold, predicted: classification_metrics.matthews_corrcoef(gold, predicted)
  return lambda gold, predicted: metrics.accuracy(gold, predicted)


# ----------------------------------------------------------------- the model
def layer_vectors(encoder, sequences: Sequence[Sequence[int]], batch_size: int = 64
                  ) -> List[List[np.ndarray]]:
  """Per layer (0: embedding output, then each transformer layer), per
  sequence its token vectors [S, H] (inference mode, no dropout)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  layers: List[List[np.ndarray]] = []
  for start in range(0, len(sequences), batch_size):
    batch = sequences[start:start + batch_size]
    length = max(len(ids) for ids in batch)
    ids = np.zeros((len(batch), length), np.int32)
    mask = np.zeros_like(ids)
    for row, sequence in enumerate(batch):
      ids[row, :len(sequence)], mask[row, :len(sequence)] = sequence, 1
    outputs = encoder(tf.constant(ids), tf.constant(mask), tf.zeros_like(ids), training=False)
    hidden = [outputs["embedding_output"]] + list(outputs["encoder_outputs"])
    if not layers:
      layers = [[] for _ in hidden]
    for layer, values in zip(layers, hidden):
      values = values.numpy()
      layer.extend(values[row, :len(sequence)] for row, sequence in enumerate(batch))
  return layers


def heldout_sequences(tfrecords: str, max_seq_length: int) -> List[List[int]]:
  """Every sequence of the held-out TFRecords, without padding."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from electra_tf.pretrain import data as data_lib  # pylint: disable=g-import-not-at-top
  sequences = []
  records = tf.data.TFRecordDataset(data_lib.find_tfrecords(tfrecords)).map(
      lambda record: data_lib.decode_record(record, max_seq_length)).batch(256)
  for batch in records.as_numpy_iterator():
    for ids, mask in zip(batch["input_ids"], batch["input_mask"]):
      sequences.append(ids[:int(mask.sum())].tolist())
  if not sequences:
    raise DataError(f"{tfrecords}: no held-out sequences")
  return sequences


def sample_tokens(vectors: List[np.ndarray], max_tokens: int, seed: int = 0) -> np.ndarray:
  """All token vectors [T, H] of the sequences, or max_tokens of them drawn
  uniformly without replacement (fixed seed)."""
  stacked = np.concatenate(vectors)
  if len(stacked) <= max_tokens:
    return stacked
  return stacked[np.sort(np.random.default_rng(seed).choice(len(stacked), max_tokens,
                                                            replace=False))]


# ----------------------------------------------------------------- the study
def pretraining_runs(study_dirs: Sequence[str]) -> Tuple[List[Dict], Dict]:
  """The runs the study dirs list (checkpoint made absolute) and the first
  study's settings; one-line errors for what is missing or inconsistent."""
  runs, settings = [], None
  for directory in study_dirs:
    path = pathlib.Path(directory) / "results.json"
    if not path.is_file():
      raise DataError(f"--study_dirs: {path} does not exist (run "
                      "tools.research.learning_study first)")
    results = json.loads(path.read_text(encoding="utf-8"))
    if "pretraining_runs" not in results or "settings" not in results:
      raise DataError(f"--study_dirs: {path} has no pretraining_runs / settings")
    model = {k: v for k, v in results["settings"]["model"].items() if k != "seed"}
    if settings is None:
      settings = dict(results["settings"], model=model)
    elif model != settings["model"]:
      raise ConfigError(f"--study_dirs: {path}'s model differs from {study_dirs[0]}'s")
    for run in results["pretraining_runs"]:
      runs.append(dict(run, checkpoint=str((path.parent / run["checkpoint"]).resolve()),
                       study_dir=str(pathlib.Path(directory).resolve())))
  if not runs:
    raise ConfigError("--study_dirs: no study dir given")
  return runs, settings


def checkpoint_exists(prefix: str) -> bool:
  return pathlib.Path(prefix + ".index").exists()


def build_encoder(settings: Dict, seed: int, checkpoint: Optional[str]):
  return learning_study.study_encoder(learning_study.PretrainingConfig.create(
      dict(settings["model"], vocab_size=settings["vocab_size"], seed=seed)), checkpoint)


def measure_start(encoder, data: Dict[str, Dict[str, TaskSentences]],
                  heldout: List[List[int]]) -> Dict:
  """Per layer: spread statistics over each STAT_SETS set and each task's
  probe (dev score, chosen penalty, selection scores)."""
  vectors = {"heldout": layer_vectors(encoder, heldout)}
  for task, splits in data.items():
    for split, sentences in splits.items():
      vectors[f"{task}_{split}"] = layer_vectors(encoder, sentences.ids)
  layers = {}
  for layer in range(len(vectors["heldout"])):
    entry = {"statistics": {name: spread_statistics(sample_tokens(vectors[name][layer],
                                                                  FLAGS.max_tokens))
                            for name in STAT_SETS}, "probe": {}}
    for task, splits in data.items():
      train, dev = splits["train"], splits["dev"]
      # The label set is the training examples' own: every training label is >= 0.
      probe = linear_probe(train.features(vectors[f"{task}_train"], layer),
                           train.flat_labels(), dev.features(vectors[f"{task}_dev"], layer),
                           len(train.label_names), label_score(task, train.label_names))
      entry["probe"][task] = {"dev": dev.score(probe["predictions"]), "l2": probe["l2"],
                              "selection": probe["selection"]}
    layers[str(layer)] = entry
  return {"layers": layers}


def task_data(settings: Dict) -> Dict[str, Dict[str, TaskSentences]]:
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  tokenizer = tokenization.FullTokenizer(settings["vocab_file"], do_lower_case=True)
  data = {}
  for task in TASKS:
    folder = pathlib.Path(FLAGS.finetuning_data_dir) / task
    suffix = "txt" if task == "chunk" else "tsv"
    train_text = study_samples.head_examples(
        (folder / f"train.{suffix}").read_text(encoding="utf-8"), task,
        FLAGS.probe_train_examples)
    train = TaskSentences(task, train_text, tokenizer)
    dev = TaskSentences(task, (folder / f"dev.{suffix}").read_text(encoding="utf-8"),
                        tokenizer, train.label_names)
    data[task] = {"train": train, "dev": dev}
  return data


def start_name(objective: str, seed) -> str:
  return f"{objective}_seed{seed}"


def main() -> int:
  if FLAGS.probe_train_examples < 8:
    raise ConfigError("--probe_train_examples: at least 8 (a quarter chooses the penalty)")
  runs, settings = pretraining_runs(FLAGS.study_dirs)
  missing = [run["checkpoint"] for run in runs if not checkpoint_exists(run["checkpoint"])]
  if missing and not FLAGS.skip_missing:
    raise DataError(f"--study_dirs: checkpoint {missing[0]} does not exist "
                    "(--skip_missing leaves such runs out)")
  output_dir = pathlib.Path(FLAGS.output_dir)
  output_dir.mkdir(parents=True, exist_ok=True)
  results_path = output_dir / "results.json"
  results = json.loads(results_path.read_text()) if results_path.exists() else {}
  setting = {"model": settings["model"], "vocab_file": settings["vocab_file"],
             "probe_train_examples": FLAGS.probe_train_examples,
             "max_tokens": FLAGS.max_tokens, "probe_l2": list(PROBE_L2)}
  if results.get("settings", setting) != setting:
    raise ConfigError(f"--output_dir: {results_path} was measured with other settings "
                      f"({json.dumps(results['settings'], sort_keys=True)[:200]}); "
                      "give another --output_dir")
  results["settings"] = setting
  results["pretraining_runs"] = [
      {key: run[key] for key in ("objective", "seed", "steps", "checkpoint", "study_dir")}
      for run in runs if checkpoint_exists(run["checkpoint"])]
  results.setdefault("starts", {})
  heldout_files = str(pathlib.Path(FLAGS.study_dirs[0]) / "data" / "heldout_tfrecords" / "*")
  heldout = heldout_sequences(heldout_files, settings["model"]["max_seq_length"])
  data = task_data(settings)
  starts = [("random_init", int(seed), None, 0) for seed in FLAGS.random_init_seeds]
  starts += [(run["objective"], run["seed"], run["checkpoint"], run["steps"])
             for run in results["pretraining_runs"]]
  for objective, seed, checkpoint, steps in starts:
    name = start_name(objective, seed)
    if name in results["starts"]:
      continue
    encoder = build_encoder(settings, seed, checkpoint)
    results["starts"][name] = dict(objective=objective, seed=seed, steps=steps,
                                   checkpoint=checkpoint, **measure_start(encoder, data, heldout))
    last = results["starts"][name]["layers"][str(len(results["starts"][name]["layers"]) - 1)]
    print(f"representation_probe: {name}: final layer probes " + ", ".join(
        f"{task} {value['dev']:.1f}" for task, value in last["probe"].items())
          + f"; held-out mean cosine {last['statistics']['heldout']['uncentered_mean_cosine']:.2f}"
          f" uncentered, {last['statistics']['heldout']['centered_mean_cosine']:.3f} centered",
          flush=True)
    fileio.atomic_write_text(str(results_path), json.dumps(results, indent=1, sort_keys=True))
  results["analysis"] = learning_analysis.analyse_representations(
      results, pathlib.Path(FLAGS.finetuning_data_dir))
  fileio.atomic_write_text(str(results_path), json.dumps(results, indent=1, sort_keys=True))
  plot(results, output_dir / "probe.png")
  print(f"representation_probe: {results_path}, {output_dir / 'probe.png'}", flush=True)
  return 0


# -------------------------------------------------------------------- figure
def plot(results: Dict, path: pathlib.Path) -> None:
  """Per task the probe's dev score against the layer, and the held-out mean
  cosine (uncentered, centered) against the layer: each run a thin line, each
  objective's mean a thick one."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  colors = {"random_init": "#999999", "electra": "#3b75af", "masked_lm": "#e07b39"}
  panels = [(f"probe: {learning_analysis.TASK_TITLE[task]}", task) for task in TASKS] + [
      ("held-out mean cosine (solid: uncentered, dashed: centered)", "cosine")]
  figure, axes = pyplot.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8))
  for axis, (title, key) in zip(axes, panels):
    for objective, color in colors.items():
      starts = [s for s in results["starts"].values() if s["objective"] == objective]
      if not starts:
        continue
      layers = sorted(int(l) for l in starts[0]["layers"])
      kinds = ([("uncentered_mean_cosine", "-"), ("centered_mean_cosine", "--")]
               if key == "cosine" else [(key, "-")])
      for kind, style in kinds:
        def value(start, layer, kind=kind):
          entry = start["layers"][str(layer)]
          return (entry["statistics"]["heldout"][kind] if key == "cosine"
                  else entry["probe"][kind]["dev"])
        for start in starts:
          axis.plot(layers, [value(start, l) for l in layers], style, color=color,
                    alpha=0.35, linewidth=0.8)
        axis.plot(layers, [np.mean([value(s, l) for s in starts]) for l in layers], style,
                  color=color, linewidth=2.2,
                  label=f"{OBJECTIVE_LABEL[objective]} ({len(starts)})" if style == "-" else None)
    axis.set_xticks(sorted(int(l) for l in next(iter(results["starts"].values()))["layers"]))
    axis.set_xlabel("layer (0: embeddings)")
    axis.set_title(title, fontsize=9)
    axis.grid(alpha=0.3)
  axes[0].legend(fontsize=7)
  figure.tight_layout()
  figure.savefig(path, dpi=80)
  pyplot.close(figure)


if __name__ == "__main__":
  define_flags()
  cli.run(main, "representation_probe.py")
