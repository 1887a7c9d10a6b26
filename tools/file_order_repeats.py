"""Rows a pre-training batch holds twice, by the number of TFRecord files.

    python -m tools.file_order_repeats --vocab_file=../shared/data/vocab/bert_uncased_vocab.txt \\
        --work_dir=/tmp/file_order [--num_files=1,2,3,4,5,8,16,64] [--seeds=0,1,2] \\
        [--json_output=FILE]

For each file count, writes files of `--per_file` numbered records (record i
holds word 1000 + i), reads training batches of 32 through `get_dataset` (two
passes over the records, at most `--max_batches`) for each seed and counts the
rows that repeat one already in their batch.  Prints one JSON line: per file
count, the share of rows that are repeats (mean and per seed) and the share
of batches holding one.  It measures whichever electra_tf is imported, so
PYTHONPATH=<a checkout of another commit> measures that commit's input.
"""

from __future__ import annotations

import json
import pathlib
import shutil
from typing import Any, Dict, List

from absl import flags
import numpy as np

from electra_tf import cli
from electra_tf.errors import ConfigError
from electra_tf.measure import record

FLAGS = flags.FLAGS
BATCH, LENGTH = 32, 8


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module beside other tools)."""
  flags.DEFINE_string("vocab_file", None, "WordPiece vocab (for the special ids).")
  flags.DEFINE_string("work_dir", None, "New folder for the records (removed when done).")
  flags.DEFINE_list("num_files", ["1", "2", "3", "4", "5", "8", "16", "64"], "File counts.")
  flags.DEFINE_list("seeds", ["0", "1", "2"], "Pipeline seeds of each file count.")
  flags.DEFINE_integer("per_file", 1000, "Records per file.")
  flags.DEFINE_integer("max_batches", 1500, "Batches read at most per seed.")
  flags.DEFINE_string("json_output", None,
                      "Also write the JSON object, with the command line, date, machine and "
                      "git commit (electra_tf/measure/record.py), to this file.")
  flags.mark_flags_as_required(["vocab_file", "work_dir"])


def write_numbered_files(directory: pathlib.Path, special, num_files: int,
                         per_file: int) -> None:
  """Files of `per_file` records of LENGTH ids; record i holds word 1000 + i."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  directory.mkdir(parents=True, exist_ok=True)
  for f in range(num_files):
    with tf.io.TFRecordWriter(str(directory / f"pretrain_data.tfrecord-{f}-of-{num_files}")) as w:
      for r in range(per_file):
        features = {"input_ids": [special.cls_id, 1000 + f * per_file + r, special.sep_id]
                                 + [0] * (LENGTH - 3),
                    "input_mask": [1] * 3 + [0] * (LENGTH - 3), "segment_ids": [0] * LENGTH}
        w.write(tf.train.Example(features=tf.train.Features(feature={
            k: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
            for k, v in features.items()})).SerializeToString())


def repeats(directory: pathlib.Path, special, seed: int, num_batches: int) -> List[int]:
  """Per batch, the rows that repeat an earlier row of the batch."""
  from electra_tf.pretrain import data  # pylint: disable=g-import-not-at-top
  dataset = data.get_dataset(str(directory / "pretrain_data.tfrecord*"), batch_size=BATCH,
                             max_seq_length=LENGTH, max_predictions_per_seq=1, mask_prob=0.15,
                             special=special, is_training=True, seed=seed)
  return [BATCH - len(set(unmasked_ids(batch)[:, 1].tolist()))
          for batch in dataset.take(num_batches).as_numpy_iterator()]


def unmasked_ids(batch: Dict[str, np.ndarray]) -> np.ndarray:
  """A masked batch's input_ids [B, S] with the masked-out ids written back."""
  ids = batch["input_ids"].copy()
  rows, slots = np.nonzero(batch["masked_lm_weights"])
  ids[rows, batch["masked_lm_positions"][rows, slots]] = batch["masked_lm_ids"][rows, slots]
  return ids


def main() -> int:
  from electra_tf import tokenization  # pylint: disable=g-import-not-at-top
  started = record.utc_now()
  work = pathlib.Path(FLAGS.work_dir)
  if work.exists():
    raise ConfigError(f"--work_dir: {work} exists; name a new folder")
  special = tokenization.special_ids(tokenization.load_vocab(FLAGS.vocab_file), FLAGS.vocab_file)
  result: Dict[str, Any] = {"batch_size": BATCH, "per_file": FLAGS.per_file, "by_num_files": {}}
  try:
    for num_files in map(int, FLAGS.num_files):
      directory = work / str(num_files)
      write_numbered_files(directory, special, num_files, FLAGS.per_file)
      num_batches = min(2 * num_files * FLAGS.per_file // BATCH, FLAGS.max_batches)
      per_seed = [repeats(directory, special, int(seed), num_batches) for seed in FLAGS.seeds]
      result["by_num_files"][str(num_files)] = {
          "batches_per_seed": num_batches,
          "repeated_row_share": float(np.mean(per_seed)) / BATCH,
          "repeated_row_share_per_seed": [float(np.mean(c)) / BATCH for c in per_seed],
          "batches_with_a_repeat": float(np.mean(np.array(per_seed) > 0))}
      print(num_files, json.dumps(result["by_num_files"][str(num_files)]), flush=True)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  print(json.dumps(result))
  if FLAGS.json_output:
    record.write_record(FLAGS.json_output, result, started)
  return 0


if __name__ == "__main__":
  define_flags()
  cli.run(main, "file_order_repeats.py")
