"""The docs' tables of measured figures, generated from their results files.

A page holds a generated table between two HTML comments:

    <!-- results: step_small_float32.json step_small_bfloat16.json -->
    (generated: a line naming machine, date and commit, then the table)
    <!-- end results -->

The names are files of docs/results/, each the record a benchmark command
writes with `--json_output` (`--output` of electra_tf.bench_memory):
{"command", "date", "machine", "commit", "result"} (electra_tf/measure/record.py).
The kind of table follows from the result: a train step (with `speedup`),
the input pipeline (`"mode": "input_only"`), an export's signatures
(`text_latency_ms_p50`), peak memory (`measurements`) or the rows a batch
repeats by file count (`by_num_files`, tools/file_order_repeats.py).

    python -m tools.docs_results            # exit 1 and name the blocks that differ
    python -m tools.docs_results --write    # rewrite the blocks from the files

tests/test_docs_figures.py fails when a block differs from its files.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys
from typing import Any, Dict, List, Sequence, Tuple

from absl import app
from absl import flags

REPO = pathlib.Path(__file__).resolve().parent.parent
RESULTS = REPO / "docs" / "results"
PAGES = ("README.md", "docs/*.md")
BLOCK = re.compile(r"(<!-- results: ([^>]+?) -->\n)(.*?)(<!-- end results -->)", re.S)


def load(name: str) -> Dict[str, Any]:
  with open(RESULTS / name, encoding="utf-8") as f:
    return json.load(f)


def pages() -> List[pathlib.Path]:
  found = []
  for pattern in PAGES:
    found += sorted(REPO.glob(pattern))
  return found


def kind(result: Dict[str, Any]) -> str:
  if "measurements" in result:
    return "memory"
  if result.get("mode") == "input_only":
    return "input"
  if "text_latency_ms_p50" in result:
    return "serving"
  if "seq_per_sec" in result and "flops_per_seq" in result:
    return "step"
  if "by_num_files" in result:
    return "file_order"
  raise ValueError(f"no table for a result with keys {sorted(result)}")


def machine_words(record: Dict[str, Any]) -> str:
  """'AMD EPYC (avx2; no GPU), 2 cores used of 2, load average 3.9 at the end'."""
  m = record["machine"]
  flags_text = ", ".join(m.get("cpu_flags") or []) or "no AVX2"
  gpus = ", ".join(m["gpus"]) if m.get("gpus") else "no GPU"
  load = m.get("load_average")
  words = f"{m['cpu']} ({flags_text}; {gpus}), {m['cores']} core{'s' if m['cores'] > 1 else ''} used"
  if m.get("cpus"):  # the machine's count (records since 2026-11-26 04:00)
    words += f" of {m['cpus']}"
  if load:
    words += f", load average {load[0]:.1f} at the end"
  return words


def caption(records: Sequence[Tuple[str, Dict[str, Any]]]) -> str:
  """Where, when and from which code: one line per distinct file."""
  lines = []
  for name, record in records:
    commit = (record.get("commit") or "no git checkout")
    commit = commit[:7] + (" + changes" if commit.endswith("+changes") else "")
    lines.append(f"`docs/results/{name}`: {machine_words(record)}, {record['date'][:10]} "
                 f"{record['started'][11:16]}-{record['date'][11:16]} UTC, commit {commit}; "
                 f"`{record['command']}`")
  return "Measured (generated from the results files, `python -m tools.docs_results --write`):\n" + \
      "\n".join(f"- {line}" for line in lines) + "\n\n"


def _fmt(x: float, digits: int = 1) -> str:
  return f"{x:,.{digits}f}"


def _rate(x: float) -> str:
  """seq/s: one decimal, two below 1."""
  return f"{x:.2f}" if x < 1 else f"{x:.1f}"


def step_table(records) -> str:
  rows = ["| ours | Model Garden | ours seq/s | Model Garden seq/s | speedup (median of the pairs) |",
          "|---|---|---|---|---|"]
  for _, record in records:
    r = record["result"]
    baseline = r.get("baseline_precision", "-")
    if baseline == "bfloat16":
      baseline = "bfloat16 encoders"
    pairs = ", ".join(f"{x:.2f}" for x in r.get("pair_speedups", []))
    rows.append(f"| {r['precision']} | {baseline} | {_rate(r['seq_per_sec'])} | "
                f"{_rate(r.get('baseline_seq_per_sec', 0))} | **{r['speedup']:.2f}x** ({pairs}) |")
  return "\n".join(rows) + "\n"


def input_table(records) -> str:
  rows = ["| seq | batch | cores | timed batches | seq/s | seq/s per core |",
          "|---|---|---|---|---|---|"]
  for _, record in records:
    r = record["result"]
    rows.append(f"| {r['seq_length']} | {r['batch_size']} | {r['cores']} | {r['batches']} | "
                f"{_fmt(r['seq_per_sec'], 0)} | {_fmt(r['seq_per_sec_per_core'], 0)} |")
  return "\n".join(rows) + "\n"


def serving_table(records) -> str:
  rows = ["| signature | latency p50, batch 1 | latency p99, batch 1 | throughput | extra cost of text |",
          "|---|---|---|---|---|"]
  for _, record in records:
    r = record["result"]
    where = f"batch {r['batch_size']}, seq {r['seq_length']}"
    rows.append(f"| `text` | {r['text_latency_ms_p50']:.1f} ms | {r['text_latency_ms_p99']:.1f} ms | "
                f"{r['text_seq_per_sec']:.1f} seq/s ({where}) | {100 * r['text_extra_cost']:+.1f}% |")
    rows.append(f"| ids (`serving_default`) | {r['ids_latency_ms_p50']:.1f} ms | "
                f"{r['ids_latency_ms_p99']:.1f} ms | {r['ids_seq_per_sec']:.1f} seq/s ({where}) | |")
  return "\n".join(rows) + "\n"


def memory_table(records) -> str:
  rows = ["| size | seq | batch | recompute | peak GB | before the step GB | step adds GB | step s |",
          "|---|---|---|---|---|---|---|---|"]
  for _, record in records:
    for m in record["result"]["measurements"]:
      if "error" in m:
        rows.append(f"| {m['model_size']} | {m['seq_length']} | {m['batch_size']} | "
                    f"{'yes' if m['recompute_layers'] else 'no'} | failed: {m['error']} | | | |")
        continue
      rows.append(f"| {m['model_size']} | {m['seq_length']} | {m['batch_size']} | "
                  f"{'yes' if m['recompute_layers'] else 'no'} | {m['peak_gb']:.2f} | "
                  f"{m['built_gb']:.2f} | {m['step_gb']:.2f} | {m['step_seconds']:.0f} |")
  return "\n".join(rows) + "\n"


def file_order_table(records) -> str:
  """Rows a batch repeats, by file count: one column per record (commit)."""
  commits = [(record.get("commit") or "no git checkout")[:7] for _, record in records]
  rows = ["| files | " + " | ".join(f"{c}: rows repeated (seeds' range); batches with one"
                                    for c in commits) + " |",
          "|---" * (len(records) + 1) + "|"]
  for files in records[0][1]["result"]["by_num_files"]:
    cells = []
    for _, record in records:
      r = record["result"]["by_num_files"][files]
      per_seed = r["repeated_row_share_per_seed"]
      cells.append(f"{100 * r['repeated_row_share']:.2f}% ({100 * min(per_seed):.2f}-"
                   f"{100 * max(per_seed):.2f}); {100 * r['batches_with_a_repeat']:.0f}%")
    rows.append(f"| {files} | " + " | ".join(cells) + " |")
  return "\n".join(rows) + "\n"


TABLES = {"file_order": file_order_table, "step": step_table, "input": input_table, "serving": serving_table,
          "memory": memory_table}


def render(names: Sequence[str]) -> str:
  records = [(name, load(name)) for name in names]
  kinds = {kind(record["result"]) for _, record in records}
  if len(kinds) != 1:
    raise ValueError(f"{' '.join(names)}: one block holds one kind of table, not {sorted(kinds)}")
  return caption(records) + TABLES[kinds.pop()](records)


def blocks(text: str):
  """(names, the block's text now, the text it should have) per block; the
  text it should have names the missing files, if any."""
  for match in BLOCK.finditer(text):
    names = match.group(2).split()
    absent = missing(names)
    yield names, match.group(3), (f"missing: {' '.join(absent)}" if absent else render(names))


def missing(names: Sequence[str]) -> List[str]:
  return [name for name in names if not (RESULTS / name).is_file()]


def rewrite(text: str) -> str:
  """The blocks rewritten (a block whose files are missing stays as it is)."""
  def block(m):
    names = m.group(2).split()
    return m.group(0) if missing(names) else m.group(1) + render(names) + m.group(4)
  return BLOCK.sub(block, text)


FLAGS = flags.FLAGS


def define_flags() -> None:
  """The command's flags, defined when it runs (tests import the module beside other tools)."""
  flags.DEFINE_boolean("write", False, "Rewrite the generated blocks (else only check them).")


def main(argv) -> int:
  del argv
  stale = []
  for page in pages():
    text = page.read_text(encoding="utf-8")
    if FLAGS.write:
      new = rewrite(text)
      if new != text:
        page.write_text(new, encoding="utf-8")
        print(f"rewrote {page.relative_to(REPO)}")
    else:
      stale += [f"{page.relative_to(REPO)}: {' '.join(names)}"
                for names, now, want in blocks(text) if now != want]
  if stale:
    print("out of date (python -m tools.docs_results --write):\n  " + "\n  ".join(stale),
          file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  define_flags()
  app.run(main)
