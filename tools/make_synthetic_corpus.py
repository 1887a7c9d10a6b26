"""A large synthetic pre-training corpus in the official TFRecord format, fast.

    python -m tools.make_synthetic_corpus --output_dir=/tmp/synth_1e7 \\
        --num_records=10000000 --num_files=1000 --max_seq_length=128

Writes `pretrain_data.tfrecord-I-of-N` files of tf.train.Example records with
the int64 features `input_ids`, `input_mask`, `segment_ids` of length
max_seq_length, as the official build_pretraining_dataset.py writes them
(here every record is full: [CLS] A [SEP] B [SEP], A and B each about half,
random word ids in [1000, 16383]). For speed one serialized Example is made
once with protobuf and only its token bytes change from record to record:
every word id takes two bytes as a varint, so the layout is the same in every
record and NumPy fills a whole file's records at once; TensorFlow's
TFRecordWriter adds the framing and CRCs. Record i holds, as its first word
id, 1000 + i % 15384 (an id a test can read back).

Sizes on a 2-core machine (shared): 10^7 records of 128 tokens are about
6 GB and take a few minutes; 10^8 (an OpenWebText-sized corpus) are about
60 GB:

    python -m tools.make_synthetic_corpus --output_dir=/big/disk/synth_1e8 \\
        --num_records=100000000 --num_files=1000

(check `df -h` first; --processes spreads the files over processes).
Prints one JSON line: records, files, bytes, seconds.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time

from absl import flags
import numpy as np

from electra_tf import cli
from electra_tf.errors import ConfigError

FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module beside other tools)."""
  flags.DEFINE_string("output_dir", None, "New (or empty) folder for the TFRecord files.")
  flags.DEFINE_integer("num_records", None, "Records in all.")
  flags.DEFINE_integer("num_files", 1000, "Files the records are spread over.")
  flags.DEFINE_integer("max_seq_length", 128, "Tokens per record.")
  flags.DEFINE_integer("processes", os.cpu_count() or 1, "Processes writing files.")
  flags.DEFINE_integer("seed", 0, "Seed of the random word ids.")
  flags.mark_flags_as_required(["output_dir", "num_records"])

FIRST_WORD, LAST_WORD = 1000, 16383  # two-byte varints
CLS, SEP = 101, 102  # the BERT uncased vocab's


def _template(seq_length: int):
  """(serialized Example, byte offsets of its word ids' first varint byte)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  half = (seq_length - 3) // 2
  words_a, words_b = half, seq_length - 3 - half
  ids = [CLS] + [FIRST_WORD] * words_a + [SEP] + [FIRST_WORD] * words_b + [SEP]
  segments = [0] * (words_a + 2) + [1] * (words_b + 1)
  features = {
      "input_ids": ids, "input_mask": [1] * seq_length, "segment_ids": segments}
  serialized = tf.train.Example(features=tf.train.Features(feature={
      name: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
      for name, values in features.items()})).SerializeToString()
  # The packed input_ids: varint(CLS), two bytes per word, varint(SEP), ...
  word = bytes([(FIRST_WORD & 0x7F) | 0x80, FIRST_WORD >> 7])
  packed = bytes([CLS]) + word * words_a + bytes([SEP]) + word * words_b + bytes([SEP])
  start = serialized.find(packed)
  if start < 0 or serialized.find(packed, start + 1) >= 0:
    raise AssertionError("template: input_ids not found once")
  offsets = [start + 1 + 2 * i for i in range(words_a)]
  offsets += [start + 2 + 2 * words_a + 2 * i for i in range(words_b)]
  return serialized, np.array(offsets)


def write_file(args) -> int:
  path, first_record, num_records, seq_length, seed = args
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  template, offsets = _template(seq_length)
  rng = np.random.default_rng([seed, first_record])
  written = 0
  tmp = path + ".tmp"
  with tf.io.TFRecordWriter(tmp) as writer:
    for start in range(0, num_records, 65536):
      n = min(65536, num_records - start)
      words = rng.integers(FIRST_WORD, LAST_WORD + 1, size=(n, len(offsets)))
      words[:, 0] = FIRST_WORD + (first_record + start + np.arange(n)) % (
          LAST_WORD - FIRST_WORD + 1)
      records = np.frombuffer(template, np.uint8)[np.newaxis].repeat(n, axis=0)
      records[:, offsets] = (words & 0x7F) | 0x80
      records[:, offsets + 1] = words >> 7
      for row in records:
        writer.write(row.tobytes())
      written += n
  os.replace(tmp, path)
  return os.path.getsize(path)


def main() -> int:
  args = FLAGS
  for name in ("num_records", "num_files", "max_seq_length", "processes"):
    if FLAGS[name].value <= 0:
      raise ConfigError(f"--{name}: {FLAGS[name].value} must be > 0")
  if FLAGS.max_seq_length < 5:
    raise ConfigError(f"--max_seq_length: {FLAGS.max_seq_length} must be >= 5 "
                      "([CLS] A [SEP] B [SEP])")
  if os.path.isdir(args.output_dir) and os.listdir(args.output_dir):
    raise ConfigError(f"--output_dir: {args.output_dir} is not empty")
  os.makedirs(args.output_dir, exist_ok=True)
  start = time.time()
  jobs, first = [], 0
  for i in range(args.num_files):
    n = args.num_records // args.num_files + (i < args.num_records % args.num_files)
    path = os.path.join(args.output_dir, f"pretrain_data.tfrecord-{i}-of-{args.num_files}")
    jobs.append((path, first, n, args.max_seq_length, args.seed))
    first += n
  if args.processes > 1:
    with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
      sizes = pool.map(write_file, jobs, chunksize=1)
  else:
    sizes = [write_file(job) for job in jobs]
  print(json.dumps({"records": args.num_records, "files": args.num_files,
                    "bytes": int(sum(sizes)), "seconds": round(time.time() - start, 1),
                    "output_dir": args.output_dir}))
  return 0


if __name__ == "__main__":
  define_flags()
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  cli.run(main, "make_synthetic_corpus.py")
