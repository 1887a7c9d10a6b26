"""Speed of the TFRecord builder, and of the official script beside it.

    python -m tools.benchmark_build_tfrecords --corpus_dir=../shared/data/corpus \\
        --copies=8 --vocab_file=../shared/data/vocab/bert_uncased_vocab.txt \\
        --workers=1,2 --official_dir=/path/to/google-research/electra \\
        --official_processes=1,2 --json_out=results.json

makes a corpus of --copies copies of --corpus_dir's files (hard links in one
flat folder under --work_dir, as the official script reads no subfolders), then builds TFRecords from it with `data_prep/build_tfrecords.py`
once per --workers entry (`--num_workers`; one job, as the official script
with one process) and, when --official_dir names a checkout of
google-research/electra, with its `build_pretraining_dataset.py` once per
--official_processes entry (1000 output files, as its default; ours writes
--num_out_files, 1000 by default too). Each build is a fresh process in a
fresh output folder; a build is timed from its start to its exit (imports and
start-up included).

Printed and written (--json_out) per build: wall seconds, examples/s,
tokens/s (the word pieces of the corpus, which both scripts see alike, from
our summary), the peak of the summed resident memory of the build's process
tree (sampled every 0.1 s from /proc, Linux) and the load average of the machine
when it ended (other work on the machine slows every figure). For our builds,
also the steady rate: examples/s between the first and the last progress line
(every 20 s), which leaves out the start-up (imports, workers, tracing).
"""

from __future__ import annotations

import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

from absl import flags

from electra_tf import cli

FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module beside other tools)."""
  flags.DEFINE_string("corpus_dir", None, "Text corpus to copy.")
  flags.DEFINE_integer("copies", 1, "Copies of the corpus in the benchmark corpus.")
  flags.DEFINE_string("vocab_file", None, "WordPiece vocab.")
  flags.DEFINE_list("workers", ["1", "2"], "--num_workers of each of our builds.")
  flags.DEFINE_string("official_dir", None,
                      "A checkout of google-research/electra (optional).")
  flags.DEFINE_list("official_processes", ["1", "2"],
                    "--num-processes of each official build.")
  flags.DEFINE_integer("num_out_files", 1000, "Our --num_out_files.")
  flags.DEFINE_integer("max_seq_length", 128, "Tokens per example.")
  flags.DEFINE_string("work_dir", "/tmp/benchmark_build_tfrecords",
                      "Where the corpus and the outputs go (emptied first).")
  flags.DEFINE_string("json_out", None, "Write the results here too.")
  flags.mark_flags_as_required(["corpus_dir", "vocab_file"])

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SUMMARY = re.compile(r"Wrote (\d+) examples .*tokens: (\d+)", re.S)
_PROGRESS = re.compile(r" (\d+) examples, \d+ tokens/s, elapsed (\d+)s")


def make_corpus(source: str, copies: int, target: str) -> int:
  """Hard links (copies where links fail) of every file; returns the bytes."""
  total = 0
  for copy in range(copies):
    for root, _, names in os.walk(source):
      for name in names:
        if name.startswith("."):
          continue
        path = os.path.join(root, name)
        # One flat folder: the official script lists the corpus dir, not its tree.
        dest = os.path.join(target, f"copy{copy}_" + os.path.relpath(path, source).replace(
            os.sep, "_"))
        os.makedirs(target, exist_ok=True)
        try:
          os.link(path, dest)
        except OSError:
          shutil.copyfile(path, dest)
        total += os.path.getsize(path)
  return total


def tree_rss(pid: int) -> int:
  """Resident bytes of process `pid` and all its descendants (/proc)."""
  parents, rss = {}, {}
  page = os.sysconf("SC_PAGE_SIZE")
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
      with open(f"/proc/{entry}/statm", encoding="ascii") as f:
        rss[int(entry)] = int(f.read().split()[1]) * page
      parents[int(entry)] = int(fields[1])
    except (OSError, IndexError, ValueError):
      continue  # ended meanwhile
  tree, frontier = {pid}, [pid]
  while frontier:
    parent = frontier.pop()
    for child, its_parent in parents.items():
      if its_parent == parent and child not in tree:
        tree.add(child)
        frontier.append(child)
  return sum(rss.get(p, 0) for p in tree)


def run(command, cwd, log_path) -> dict:
  """Runs a build; its wall time, peak tree memory and output."""
  start = time.time()
  with open(log_path, "w", encoding="utf-8") as log:
    process = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                               env=dict(os.environ, PYTHONPATH=REPO))
    peak = 0
    while process.poll() is None:
      peak = max(peak, tree_rss(process.pid))
      time.sleep(0.1)
  wall = time.time() - start
  with open(log_path, encoding="utf-8") as log:
    text = log.read()
  if process.returncode:
    raise SystemExit(f"{command[1]} failed ({process.returncode}):\n{text[-3000:]}")
  return {"wall_s": round(wall, 2), "peak_rss_mb": round(peak / 2**20),
          "load_average_1min": round(os.getloadavg()[0], 2), "output": text}


def count_records(pattern: str) -> int:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return sum(sum(1 for _ in tf.data.TFRecordDataset(path)) for path in glob.glob(pattern))


def main() -> int:
  shutil.rmtree(FLAGS.work_dir, ignore_errors=True)
  corpus = os.path.join(FLAGS.work_dir, "corpus")
  corpus_bytes = make_corpus(FLAGS.corpus_dir, FLAGS.copies, corpus)
  vocab = os.path.abspath(FLAGS.vocab_file)
  results = {"machine": f"{platform.processor() or platform.machine()}, "
                        f"{os.cpu_count()} cores (usable {len(os.sched_getaffinity(0))})",
             "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
             "corpus_bytes": corpus_bytes, "corpus_files": sum(
                 len(names) for _, _, names in os.walk(corpus)),
             "max_seq_length": FLAGS.max_seq_length, "builds": []}
  tokens = None
  for workers in map(int, FLAGS.workers):
    out = os.path.join(FLAGS.work_dir, f"ours_{workers}")
    result = run([sys.executable, "data_prep/build_tfrecords.py", f"--corpus_dir={corpus}",
                  f"--vocab_file={vocab}", f"--output_dir={out}", "--seed=1",
                  f"--num_out_files={FLAGS.num_out_files}", f"--num_workers={workers}",
                  f"--max_seq_length={FLAGS.max_seq_length}"], REPO, out + ".log")
    output = result.pop("output")
    examples, tokens = map(int, _SUMMARY.search(output).groups())
    progress = [(int(e), int(s)) for e, s in _PROGRESS.findall(output)]
    steady = None
    if len(progress) >= 2 and progress[-1][1] > progress[0][1]:
      steady = round((progress[-1][0] - progress[0][0]) / (progress[-1][1] - progress[0][1]))
    results["builds"].append({"script": "ours", "processes": workers, "examples": examples,
                              "tokens": tokens, "steady_examples_per_s": steady, **result})
    shutil.rmtree(out)
  if FLAGS.official_dir:
    for processes in map(int, FLAGS.official_processes):
      out = os.path.join(FLAGS.work_dir, f"official_{processes}")
      result = run([sys.executable, "build_pretraining_dataset.py",
                    f"--corpus-dir={corpus}", f"--vocab-file={vocab}",
                    f"--output-dir={out}", f"--num-processes={processes}",
                    f"--max-seq-length={FLAGS.max_seq_length}"], FLAGS.official_dir,
                   out + ".log")
      result.pop("output")
      results["builds"].append({"script": "official", "processes": processes,
                                "examples": count_records(os.path.join(out, "*")),
                                "tokens": tokens, **result})
      shutil.rmtree(out)
  print(f"{results['machine']}, {results['date']}; corpus: {results['corpus_files']} files, "
        f"{corpus_bytes / 2**20:.1f} MB")
  print("| script | processes | wall s | examples/s | tokens/s | steady examples/s | "
        "peak memory MB | load |")
  print("|---|---|---|---|---|---|---|---|")
  for build in results["builds"]:
    build["examples_per_s"] = round(build["examples"] / build["wall_s"])
    build["tokens_per_s"] = round(build["tokens"] / build["wall_s"]) if build["tokens"] else None
    print(f"| {build['script']} | {build['processes']} | {build['wall_s']:.1f} | "
          f"{build['examples_per_s']:,} | {build['tokens_per_s']:,} | "
          f"{build.get('steady_examples_per_s') or '-'} | "
          f"{build['peak_rss_mb']:,} | {build['load_average_1min']} |")
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w", encoding="utf-8") as f:
      json.dump(results, f, indent=1)
      f.write("\n")
  return 0


if __name__ == "__main__":
  define_flags()
  cli.run(main, "benchmark_build_tfrecords")
