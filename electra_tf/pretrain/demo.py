"""The embedded default: pre-training that needs no download.

`python run_pretraining.py` with no data flags takes the documentation topics
that every CPython install ships (`pydoc_data.topics`, about 0.5 MB of
English), learns a WordPiece vocab from them with tensorflow-text's learner,
writes TFRecords with the project's builder, and pre-trains a shortened
ELECTRA-Small for a few CPU minutes, then evaluates and exports.  Everything
lands under ./electra_demo/ (the official layout: vocab.txt,
pretrain_tfrecords/, models/<model_name>/); reruns reuse the vocab and the
TFRecords and resume training.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping, Optional

from electra_tf import config as config_lib
from electra_tf import fileio
from electra_tf.pretrain.config import PretrainingConfig

DEMO_DIR = "electra_demo"
DEMO_VOCAB_SIZE = 8000

# A shortened ELECTRA-Small that shows learning in a few minutes on 2 cores:
# the official small architecture with fewer layers, a short sequence, a
# short warm-up and schedule.  --hparams entries override these.
DEMO_HPARAMS: Dict[str, Any] = {
    "model_size": "small",
    "model_hparam_overrides": {"num_hidden_layers": 4},
    "max_seq_length": 64,
    "train_batch_size": 32,
    "eval_batch_size": 32,
    "learning_rate": 1e-3,
    "num_train_steps": 400,
    "num_warmup_steps": 40,
    "save_checkpoints_steps": 200,
    "num_eval_steps": 20,
    "log_every": 25,
}


def corpus_documents() -> List[str]:
  """The pydoc topics as documents: paragraphs as lines, blank line between topics."""
  from pydoc_data import topics  # pylint: disable=g-import-not-at-top
  documents = []
  for name in sorted(topics.topics):
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", topics.topics[name])]
    paragraphs = [p for p in paragraphs if p]
    if paragraphs:
      documents.append("\n".join(paragraphs))
  return documents


def prepare(hparams_text: Optional[str], overrides: Mapping[str, Any],
            model_name: Optional[str] = None, data_dir: str = DEMO_DIR,
            ) -> PretrainingConfig:
  """Builds the demo corpus, vocab and TFRecords (once) and returns the config."""
  user = config_lib.parse_hparams(hparams_text)
  hparams = dict(DEMO_HPARAMS)
  hparams.update(user)
  flags = {k: v for k, v in overrides.items() if v is not None}

  def config(vocab_size: int) -> PretrainingConfig:
    return PretrainingConfig.create(
        {"vocab_size": vocab_size, **hparams, **flags}, data_dir=data_dir,
        model_name=model_name or "electra_demo")

  config(DEMO_VOCAB_SIZE)  # bad hparams or flags stop here, before data_dir is written
  # TensorFlow-heavy, so imported once the hparams are known to be valid.
  from electra_tf.pretrain import tfrecords  # pylint: disable=g-import-not-at-top
  from electra_tf.pretrain import vocab as vocab_lib  # pylint: disable=g-import-not-at-top
  os.makedirs(data_dir, exist_ok=True)
  corpus_file = os.path.join(data_dir, "corpus", "pydoc_topics.txt")
  if not os.path.exists(corpus_file):
    os.makedirs(os.path.dirname(corpus_file), exist_ok=True)
    fileio.atomic_write_text(corpus_file, "\n\n".join(corpus_documents()) + "\n")
  vocab_file = os.path.join(data_dir, "vocab.txt")
  if not os.path.exists(vocab_file):
    print(f"Learning a {DEMO_VOCAB_SIZE}-entry WordPiece vocab from {corpus_file}", flush=True)
    vocab = vocab_lib.build_vocab(corpus_documents(), vocab_size=DEMO_VOCAB_SIZE,
                                  do_lower_case=True)
    fileio.atomic_write_text(vocab_file, "".join(token + "\n" for token in vocab))
  with open(vocab_file, encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  max_seq_length = hparams["max_seq_length"]
  records_dir = os.path.join(data_dir, "pretrain_tfrecords")
  marker = os.path.join(records_dir, f".complete-seq{max_seq_length}")
  if not os.path.exists(marker):
    tfrecords.build_tfrecords(
        os.path.dirname(corpus_file), vocab_file, records_dir,
        max_seq_length=max_seq_length, num_out_files=4, num_processes=1,
        do_lower_case=True, blanks_separate_docs=True, seed=0)
    fileio.atomic_write_text(marker, "")
  return config(vocab_size)


def export_dir(config: PretrainingConfig) -> str:
  return os.path.join(config.model_dir, "export")
