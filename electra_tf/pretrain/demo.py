"""The embedded default: pre-training that needs no download.

`python run_pretraining.py` without data flags learns a vocab, builds
TFRecords, pre-trains a narrow ELECTRA-Small for a few CPU minutes,
evaluates and exports under ./electra_demo/, on the English text CPython
ships.  docs/pretraining.md.
"""

from __future__ import annotations

import ast
import os
import re
import sysconfig
from typing import Any, Dict, List, Mapping, Optional, Tuple

from electra_tf import config as config_lib
from electra_tf import fileio
from electra_tf.pretrain.config import PretrainingConfig

DEMO_DIR = "electra_demo"
# The WordPiece learner's target; on this corpus it stops at about 10,200
# entries (every piece it finds).  An 8,000-entry vocab made the generator
# reach unigram level sooner, and the discriminator then fell back to the
# base rate (README "Does it learn?").
DEMO_VOCAB_SIZE = 30000
HELD_OUT_EVERY = 10  # one document in ten is evaluation data
_MIN_DOCSTRING = 80  # characters; shorter docstrings are mostly signatures
_SKIPPED_LIBRARY_DIRS = ("site-packages", "dist-packages", "test", "tests", "idle_test",
                         "__pycache__", "lib2to3")

# The official trajectory fixture's model and schedule (ELECTRA-Small narrowed
# to hidden 128 and 4 layers, generator 1/4; lr 2e-4 with 100 warm-up steps,
# 400 steps of batch 32 at seq 128): there the official code's discriminator
# learns within 400 steps, and at lr 5e-4 to 1e-3 it falls back to the base
# rate, here as there.  --hparams entries override these.
DEMO_HPARAMS: Dict[str, Any] = {
    "model_size": "small",
    "model_hparam_overrides": {"hidden_size": 128, "num_hidden_layers": 4},
    "embedding_size": 64,
    "generator_hidden_size": 0.25,
    "max_seq_length": 128,
    "train_batch_size": 32,
    "eval_batch_size": 32,
    "learning_rate": 2e-4,
    "num_train_steps": 400,
    "num_warmup_steps": 100,
    "save_checkpoints_steps": 200,
    "num_eval_steps": 30,
    "eval_every_steps": 100,
    "log_every": 25,
    "iterations_per_loop": 25,
}


def _paragraphs(text: str) -> List[str]:
  """Blank-line separated paragraphs, each on one line."""
  paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
  return [p for p in paragraphs if p]


def corpus_documents() -> List[str]:
  """Documents (paragraphs as lines): the pydoc topics, then every standard
  library docstring of at least 80 characters, in a fixed order."""
  from pydoc_data import topics  # pylint: disable=g-import-not-at-top
  documents = ["\n".join(_paragraphs(topics.topics[name])) for name in sorted(topics.topics)]
  library = sysconfig.get_paths()["stdlib"]
  for root, dirs, names in os.walk(library):
    dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_LIBRARY_DIRS)
    for name in sorted(n for n in names if n.endswith(".py")):
      try:
        with open(os.path.join(root, name), encoding="utf-8") as f:
          tree = ast.parse(f.read())
      except (SyntaxError, UnicodeDecodeError, ValueError):
        continue
      for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)):
          docstring = ast.get_docstring(node)
          if docstring and len(docstring) >= _MIN_DOCSTRING:
            documents.append("\n".join(_paragraphs(docstring)))
  return [d for d in documents if d]


def split_documents(documents: List[str]) -> Tuple[List[str], List[str]]:
  """(training, held-out): every HELD_OUT_EVERY-th document is held out."""
  held_out = documents[HELD_OUT_EVERY - 1::HELD_OUT_EVERY]
  training = [d for i, d in enumerate(documents) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1]
  return training, held_out


def prepare(hparams_text: Optional[str], overrides: Mapping[str, Any],
            model_name: Optional[str] = None, data_dir: str = DEMO_DIR,
            ) -> PretrainingConfig:
  """Builds the demo corpus, vocab and TFRecords (once) and returns the config."""
  user = config_lib.parse_hparams(hparams_text)
  hparams = dict(DEMO_HPARAMS)
  hparams.update(user)
  flags = {k: v for k, v in overrides.items() if v is not None}
  records_dirs = {"train": os.path.join(data_dir, "pretrain_tfrecords"),
                  "held_out": os.path.join(data_dir, "eval_tfrecords")}

  def config() -> PretrainingConfig:
    """The demo's config (vocab_size: the vocab file's entry count)."""
    return PretrainingConfig.create(
        {**hparams, **flags,
         "eval_tfrecords": os.path.join(records_dirs["held_out"], "pretrain_data.tfrecord*")},
        data_dir=data_dir, model_name=model_name or "electra_demo")

  config()  # bad hparams or flags stop here, before data_dir is written
  # TensorFlow-heavy, so imported once the hparams are known to be valid.
  from electra_tf.pretrain import tfrecords  # pylint: disable=g-import-not-at-top
  from electra_tf.pretrain import vocab_builder  # pylint: disable=g-import-not-at-top
  corpus_files = {part: os.path.join(data_dir, "corpus", part, "documents.txt")
                  for part in records_dirs}
  if not all(os.path.exists(path) for path in corpus_files.values()):
    print("Collecting the demo corpus: Python's documentation topics and standard "
          "library docstrings", flush=True)
    for part, documents in zip(("train", "held_out"), split_documents(corpus_documents())):
      os.makedirs(os.path.dirname(corpus_files[part]), exist_ok=True)
      fileio.atomic_write_text(corpus_files[part], "\n\n".join(documents) + "\n")
  vocab_file = os.path.join(data_dir, "vocab.txt")
  if not os.path.exists(vocab_file):
    print(f"Learning a WordPiece vocab (at most {DEMO_VOCAB_SIZE:,} entries) from the "
          "training documents", flush=True)
    texts = vocab_builder.read_corpus_texts([corpus_files["train"]], "corpus")
    vocab = vocab_builder.build_vocab(texts, vocab_size=DEMO_VOCAB_SIZE, do_lower_case=True)
    fileio.atomic_write_text(vocab_file, "".join(token + "\n" for token in vocab))
    print(f"Wrote {len(vocab):,} entries (every piece the learner found) to {vocab_file}",
          flush=True)
  max_seq_length = hparams["max_seq_length"]
  for part, records_dir in records_dirs.items():
    marker = os.path.join(records_dir, f".complete-seq{max_seq_length}")
    if not os.path.exists(marker):
      tfrecords.forget_finished_build(records_dir)  # another max_seq_length's
      tfrecords.build_tfrecords(
          [corpus_files[part]], vocab_file, records_dir, max_seq_length=max_seq_length,
          num_out_files=4 if part == "train" else 1, num_processes=1,
          do_lower_case=True, blanks_separate_docs=True, seed=0)
      fileio.atomic_write_text(marker, "")
  return config()


def export_dir(config: PretrainingConfig) -> str:
  return os.path.join(config.model_dir, "export")
