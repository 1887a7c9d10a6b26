"""The benchmark-style check of `ner`: CoNLL-2000 chunking written as
NER-style files, fine-tuned as `ner` and as `chunk` from the same checkpoint
with the same hparams and seeds; both F1s side by side, as JSON.

    python -m tools.research.ner_vs_chunk \
        --init_checkpoint=../shared/fixtures/official_debug/model.ckpt \
        --hparams='{"model_hparam_overrides": {"hidden_size": 64, "num_hidden_layers": 2,
                    "num_attention_heads": 4}, "embedding_size": 16}' \
        --seeds=0,1 --output=docs/ner_vs_chunk.json

The NER-style files are CoNLL-2000's `chunk/{train,dev}.txt` (dev is the
CoNLL-2000 test set) with a `-DOCSTART-` line and the chunk tags rewritten in
`--scheme` (IOB1 by default, the original CoNLL-2003 form).  Both tasks read
the same words and the same chunks, and both models predict BIOES tags;
they differ in what each task does with them: chunk keeps the official quirks
(segment ids 1, its own way of cutting long sentences, label order, chunk
spans read by the official rule, under which only O, B- and S- end a chunk),
ner reads entities by conlleval's rule and scores them as seqeval's default
mode.  On well-formed tags the two rules read the same spans, so the F1s of
trained models should differ by no more than the seeds do.  To tell the rule
from the training apart, each run also scores its own predicted BIOES tags
(the last dev evaluation, before they are turned into the file's scheme)
under both rules: `f1_by_chunk_rule` and `f1_by_conlleval_rule`.  Work files go to --work_dir (a temporary directory by
default); the JSON records the settings, each run's metrics, the per-seed
differences and the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time
from typing import Dict

from absl import app
from absl import flags

FLAGS = flags.FLAGS
REPO = pathlib.Path(__file__).resolve().parent.parent


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module beside other tools)."""
  flags.DEFINE_string("finetuning_data_dir", str(REPO.parent / "shared" / "data" / "finetuning_data"),
                      "Folder holding chunk/{train,dev}.txt (CoNLL-2000).")
  flags.DEFINE_string("vocab_file", str(REPO.parent / "shared" / "data" / "vocab" /
                                        "bert_uncased_vocab.txt"),
                      "The checkpoint's vocab (uncased: both tasks lower-case).")
  flags.DEFINE_string("init_checkpoint", "none", "The checkpoint both tasks start from.")
  flags.DEFINE_string("hparams", "{}", "Fine-tuning hparams (JSON) both tasks share.")
  flags.DEFINE_list("seeds", ["0", "1"], "Seeds; each runs both tasks.")
  flags.DEFINE_enum("scheme", "IOB1", ["IOB1", "IOB2", "BIOES"], "Scheme of the NER-style files.")
  flags.DEFINE_integer("max_sentences", 0, "Keep the first N training sentences (0: all).")
  flags.DEFINE_string("work_dir", None, "Where data and models go (default: a temporary dir).")
  flags.DEFINE_string("output", None, "Where the JSON goes (default: stdout only).")


def write_data(work_dir: pathlib.Path, scheme: str, max_sentences: int) -> pathlib.Path:
  """data_dir/finetuning_data/{chunk,ner}/{train,dev}.txt and vocab.txt."""
  from electra_tf.finetune import readers  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune.tagging import spans  # pylint: disable=g-import-not-at-top
  data_dir = work_dir / "data"
  for split in ("train", "dev"):
    source = pathlib.Path(FLAGS.finetuning_data_dir) / "chunk" / f"{split}.txt"
    sentences = readers.read_conll_sentences(str(source))
    if split == "train" and max_sentences:
      sentences = sentences[:max_sentences]
    chunk_lines, ner_lines = [], ["-DOCSTART- -X- -X- O", ""]
    for sentence in sentences:
      tags = spans.convert(sentence.tags, scheme)
      chunk_lines += [f"{w} {t}" for w, t in zip(sentence.words, sentence.tags)] + [""]
      ner_lines += [f"{w} -X- {t}" for w, t in zip(sentence.words, tags)] + [""]
    for task, lines in (("chunk", chunk_lines), ("ner", ner_lines)):
      path = data_dir / "finetuning_data" / task / f"{split}.txt"
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  (data_dir / "vocab.txt").write_bytes(pathlib.Path(FLAGS.vocab_file).read_bytes())
  return data_dir


def summary(runs, hparams) -> dict:
  """The JSON of the runs so far (module docstring)."""
  seeds = [int(s) for s in FLAGS.seeds
           if f"chunk_seed{s}" in runs and f"ner_seed{s}" in runs]
  chunk_f1 = [runs[f"chunk_seed{s}"]["f1"] for s in seeds]
  ner_f1 = [runs[f"ner_seed{s}"]["f1"] for s in seeds]
  return {
      "what": "CoNLL-2000 chunking fine-tuned as chunk and as ner (NER-style files), "
              "same checkpoint, hparams and seeds; dev = the CoNLL-2000 test set",
      "settings": {"init_checkpoint": FLAGS.init_checkpoint, "hparams": hparams,
                   "seeds": [int(s) for s in FLAGS.seeds], "scheme": FLAGS.scheme,
                   "max_sentences": FLAGS.max_sentences},
      "runs": runs,
      "seeds_done": seeds,
      "chunk_f1_mean": statistics.fmean(chunk_f1) if seeds else None,
      "ner_f1_mean": statistics.fmean(ner_f1) if seeds else None,
      "ner_minus_chunk_per_seed": [n - c for n, c in zip(ner_f1, chunk_f1)],
      "chunk_seed_spread": max(chunk_f1) - min(chunk_f1) if len(seeds) > 1 else None,
      "ner_seed_spread": max(ner_f1) - min(ner_f1) if len(seeds) > 1 else None,
      "machine": {"platform": platform.platform(), "processor": platform.processor(),
                  "cpus": os.cpu_count(), "python": sys.version.split()[0]},
      "date": time.strftime("%Y-%m-%d", time.gmtime()),
  }


@contextlib.contextmanager
def scored_under_both_rules(runs_metrics: Dict[str, float]):
  """While active, each tagging evaluation's predicted and gold BIOES tags
  are also scored under the chunk rule and conlleval's; the last
  evaluation's F1s go into `runs_metrics`."""
  from electra_tf.finetune.tagging import (  # pylint: disable=g-import-not-at-top
      spans, tagging_metrics, tagging_tasks as tagging)
  originals = {cls: cls.score for cls in (tagging.ChunkingTask, tagging.NER)}

  def scoring(original):
    def score(task, sentences, loss_sum, labeled):
      if labeled:
        gold = [s.gold for s in sentences]
        predicted = [s.predicted for s in sentences]
        for name, spans_of in (("chunk_rule", spans.chunk_spans),
                               ("conlleval_rule", spans.entity_spans)):
          counts = tagging_metrics.total(tagging_metrics.span_counts(gold, predicted, spans_of))
          runs_metrics[f"f1_by_{name}"] = 100.0 * counts.precision_recall_f1()[2]
      return original(task, sentences, loss_sum, labeled)
    return score

  for cls, original in originals.items():
    cls.score = scoring(original)
  try:
    yield
  finally:
    for cls, original in originals.items():
      cls.score = original


def main(argv) -> int:
  del argv
  from electra_tf import config as config_lib  # pylint: disable=g-import-not-at-top
  from electra_tf import fileio  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune import job  # pylint: disable=g-import-not-at-top
  from electra_tf.finetune.config import FinetuningConfig  # pylint: disable=g-import-not-at-top
  hparams = dict({"max_seq_length": 128, "do_lower_case": True},
                 **config_lib.parse_hparams(FLAGS.hparams))
  runs = {}
  with tempfile.TemporaryDirectory(prefix="ner_vs_chunk_") as scratch:
    work_dir = pathlib.Path(FLAGS.work_dir or scratch)
    data_dir = write_data(work_dir, FLAGS.scheme, FLAGS.max_sentences)
    for seed in map(int, FLAGS.seeds):
      for task in ("chunk", "ner"):
        # The same values for both: they override ner's single-task default
        # (cased) and chunk's (max_seq_length 256).
        values = dict(hparams, seed=seed, init_checkpoint=FLAGS.init_checkpoint,
                      tagging_scheme=FLAGS.scheme)
        config = FinetuningConfig.create(values, task_names=[task], data_dir=str(data_dir),
                                         model_dir=str(work_dir / "models" / f"{task}_{seed}"))
        started = time.time()
        by_rule: Dict[str, float] = {}
        with scored_under_both_rules(by_rule):
          metrics = job.run(config, strategy_name="one_device")[-1][task]
        runs[f"{task}_seed{seed}"] = dict(metrics, **by_rule,
                                          seconds=round(time.time() - started, 1))
        if FLAGS.output:  # after each run, so that finished runs survive
          fileio.atomic_write_text(FLAGS.output, json.dumps(
              summary(runs, hparams), indent=1, sort_keys=True) + "\n")
  print(json.dumps(summary(runs, hparams), indent=1, sort_keys=True))
  return 0


if __name__ == "__main__":
  define_flags()
  app.run(main)
