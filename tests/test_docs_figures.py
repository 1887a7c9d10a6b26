"""Every measured figure of the docs has its results file, and agrees with it.

docs/results/*.json are the records the benchmark commands write
(`--json_output`, electra_tf/measure/record.py).  The tables that restate them
are generated (tools/docs_results.py) and must equal what their files give;
the figures quoted in prose are compared here one by one.  Relative links
between the pages must land on a file and a heading.
"""

import json
import math
import re

import pytest

from electra_tf import flops
from electra_tf.pretrain.config import PretrainingConfig
from tools import docs_results

REPO = docs_results.REPO
RESULTS = docs_results.RESULTS


def page(name: str) -> str:
  return (REPO / name).read_text(encoding="utf-8")


def result(name: str):
  return docs_results.load(name)["result"]


def test_every_results_file_says_what_measured_it_where_and_when():
  files = sorted(RESULTS.glob("*.json"))
  assert files
  pages_text = "".join(p.read_text(encoding="utf-8") for p in docs_results.pages())
  for path in files:
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["command"].startswith("python "), path.name
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["date"]), path.name
    assert record["started"] <= record["date"], path.name
    assert record["machine"]["cpu"] and record["machine"]["cores"] >= 1, path.name
    assert re.fullmatch(r"[0-9a-f]{40}(\+changes)?", record["commit"]), path.name
    docs_results.kind(record["result"])  # a result a table can show
    assert path.name in pages_text, f"{path.name}: no page cites it"


def test_generated_tables_equal_their_results_files():
  count = 0
  for path in docs_results.pages():
    for names, now, want in docs_results.blocks(path.read_text(encoding="utf-8")):
      assert now == want, (f"{path.name}: the table of {' '.join(names)} differs from the "
                           "file; python -m tools.docs_results --write")
      count += 1
  assert count >= 2


def _speedup(name: str) -> str:
  return f"{result(name)['speedup']:.2f}x"


def test_readme_speed_figures_are_the_results_files():
  readme = page("README.md")
  speed = readme.split("- **Speed**", 1)[1].split("\n\n", 1)[0]
  speed = " ".join(speed.split())
  record = docs_results.load("step_small_float32.json")
  pairs = record["result"]["pair_speedups"]
  assert f"runs {_speedup('step_small_float32.json')} Model Garden's" in speed
  assert f"{record['date'][:10]}, shared at a load average of " \
         f"{record['machine']['load_average'][0]:.0f}, pairs {min(pairs):.2f}-{max(pairs):.2f}: " \
         "`docs/results/step_small_float32.json`" in speed
  assert (record["result"]["precision"], record["result"]["baseline_precision"]) == (
      "float32", "float32")


def test_input_pipeline_and_h100_projection_follow_the_results():
  text = page("docs/performance.md").split("## Input pipeline throughput", 1)[1]
  text = text.split("\n## ", 1)[0]
  per_core = {}
  for name in ("input_pipeline_seq128.json", "input_pipeline_seq512.json"):
    r = result(name)
    per_core[r["seq_length"]] = r["seq_per_sec_per_core"]
  rows = re.findall(r"^\| ELECTRA-(Small|Base) \| (\d+) \| ([\d.]+) G \| ([\d,]+) \| (\d+) \|$",
                    text, flags=re.M)
  assert len(rows) == 4
  for size, seq, gflops, seq_per_sec, cores in rows:
    config = PretrainingConfig.create({"model_size": size.lower(),
                                       "max_seq_length": int(seq)})
    per_seq = flops.flops_per_seq(config)
    assert f"{per_seq / 1e9:.1f}" == gflops, (size, seq)
    at_40 = 0.4 * 989e12 / per_seq
    assert round(at_40, -2) == float(seq_per_sec.replace(",", "")), (size, seq)
    assert math.ceil(round(at_40, -2) / per_core[int(seq)]) == int(cores), (size, seq)


def _anchor(heading: str) -> str:
  """GitHub's anchor of a heading."""
  text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
  return text.replace(" ", "-")


def _anchors(text: str):
  seen, anchors = {}, set()
  for heading in re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", text, flags=re.S), flags=re.M):
    base = _anchor(heading)
    n = seen.get(base, 0)
    anchors.add(base if n == 0 else f"{base}-{n}")
    seen[base] = n + 1
  return anchors


@pytest.mark.parametrize("path", docs_results.pages(), ids=lambda p: p.name)
def test_links_between_pages_land_on_a_file_and_a_heading(path):
  text = path.read_text(encoding="utf-8")
  for target in re.findall(r"\]\(([^)\s]+)\)", text):
    if re.match(r"[a-z]+://", target):
      continue
    file_part, _, anchor = target.partition("#")
    linked = (path.parent / file_part).resolve() if file_part else path
    assert linked.exists(), f"{path.name}: {target}"
    if anchor and linked.suffix == ".md":
      assert anchor in _anchors(linked.read_text(encoding="utf-8")), f"{path.name}: {target}"


def test_gpu_projection_is_the_memory_tools_fit_of_the_measured_table():
  """docs/big_batches.md's projection (and its slopes) is what
  electra_tf.measure.peak_memory.project gives for the measured table above it."""
  from electra_tf.measure import peak_memory as memory  # pylint: disable=g-import-not-at-top
  text = page("docs/big_batches.md")
  measured = text.split("## Memory figures (measured)", 1)[1].split('"step s" is', 1)[0]
  rows = re.findall(r"^\| (small|base|large) \| (\d+) \| (\d+) \| (yes|no) \| ([\d.]+) \|",
                    measured, flags=re.M)
  assert len(rows) == 14
  fits = memory.project(
      [{"model_size": size, "seq_length": int(seq), "batch_size": int(batch),
        "recompute_layers": recompute == "yes", "peak_gb": float(peak)}
       for size, seq, batch, recompute, peak in rows], [16.0, 40.0, 80.0])
  fits = {(f["model_size"], f["seq_length"], f["recompute_layers"]): f for f in fits}
  slopes = re.findall(r"^\| (small|base|large) \| (\d+) \| ([\d.]+) \| ([\d.]+|\(not measured\)) \|",
                      text.split("Slopes (GB per", 1)[1], flags=re.M)
  assert len(slopes) == 4
  for size, seq, plain, recompute in slopes:
    for value, flag in ((plain, False), (recompute, True)):
      if value[0].isdigit():  # the table's peaks have 2 decimals, its slopes came from 3
        assert abs(fits[(size, int(seq), flag)]["per_sequence_gb"] - float(value)) <= 1.5e-3
  projection = text.split("## Projection for GPUs", 1)[1]
  rows = re.findall(r"^\| (small|base) \((\d+), (\d+)\) \| (yes|no) \| (\d+) x (\d+) \| "
                    r"(\d+) x (\d+) \| (\d+) x (\d+) \|$", projection, flags=re.M)
  assert len(rows) == 3
  for size, batch, seq, recompute, *cells in rows:
    fit = fits[(size, int(seq), recompute == "yes")]
    assert fit["official_batch"] == int(batch)
    assert [(b["micro_batch"], b["gradient_accumulation_steps"]) for b in fit["budgets"]] == [
        (int(cells[i]), int(cells[i + 1])) for i in (0, 2, 4)], (size, seq, recompute)


def test_electric_small_flops_ratio_is_flops_pys():
  text = page("docs/electric.md")
  (stated,) = re.findall(r"Electric-Small costs ([\d.]+)x ELECTRA-Small per sequence", text)
  electric = flops.flops_per_seq(PretrainingConfig.create(
      {"model_size": "small", "electric_objective": True}))
  electra = flops.flops_per_seq(PretrainingConfig.create({"model_size": "small"}))
  assert f"{electric / electra:.1f}" == stated


@pytest.mark.parametrize("name", ["build_tfrecords_benchmark.json",
                                  "build_tfrecords_benchmark_32copies.json"])
def test_build_tfrecords_tables_are_their_benchmark_files(name):
  """docs/performance.md's builder tables restate their benchmark files
  (tools/benchmark_build_tfrecords.py --json_out)."""
  with open(REPO / "docs" / name, encoding="utf-8") as f:
    bench = json.load(f)
  section = page("docs/performance.md").split("## Building TFRecords", 1)[1].split("\n## ", 1)[0]
  assert f"]({name})" in section
  text = section.split(f"Measured {bench['date']}", 1)[1].split("\n\n| ", 1)[1].split("\n\n", 1)[0]
  rows = re.findall(r"^\| (ours|official) \(`--num[_-]\w+`\) \| (\d+) \| (\d+) \| ([\d,]+) \| "
                    r"([\d,]+) \| ([\d,]+|-) \| ([\d,]+) MB \| ([\d.]+) \|$", "| " + text, flags=re.M)
  assert len(rows) == len(bench["builds"])
  for row, build in zip(rows, bench["builds"]):
    steady = build.get("steady_examples_per_s")
    assert row == (build["script"], str(build["processes"]), f"{build['wall_s']:.0f}",
                   f"{build['examples_per_s']:,}", f"{build['tokens_per_s']:,}",
                   f"{steady:,}" if steady else "-", f"{build['peak_rss_mb']:,}",
                   f"{build['load_average_1min']}"), row


def test_build_tfrecords_prose_figures_are_their_benchmark_files():
  """The corpora's sizes and the two-worker gains quoted beside the tables."""
  def load(name):
    with open(REPO / "docs" / name, encoding="utf-8") as f:
      return json.load(f)

  section = " ".join(page("docs/performance.md").split("## Building TFRecords", 1)[1]
                     .split("\n## ", 1)[0].split())
  eight, thirty_two = (load(f"build_tfrecords_benchmark{s}.json") for s in ("", "_32copies"))
  build = eight["builds"][0]
  assert (f"({eight['corpus_files']} files, {eight['corpus_bytes'] / 2**20:.1f} MB, "
          f"{build['tokens'] / 1e6:.2f} M word pieces, {build['examples']:,} examples "
          "of 128 tokens)") in section
  assert (f"32 copies ({thirty_two['corpus_files']} files, "
          f"{thirty_two['corpus_bytes'] / 2**20:.0f} MB)") in section
  one, two = ([b for b in thirty_two["builds"] if b["processes"] == n] for n in (1, 2))
  two_walls = {f"{b['wall_s']:.0f}" for b in two}  # the two runs took the same
  one_walls = " and ".join(f"{b['wall_s']:.0f}" for b in one)
  assert len(two_walls) == 1
  assert f"two workers finish the build in {two_walls.pop()} s where one takes {one_walls} s" in (
      section)
  gains = " and ".join(f"{a['wall_s'] / b['wall_s']:.2f}x" for a, b in zip(one, two))
  rates = [" and ".join(f"{b['examples_per_s']:,}" for b in builds) for builds in (two, one)]
  assert f"{gains} sooner (examples/s {rates[0]} against {rates[1]})" in section
  extra = {f"{(b['peak_rss_mb'] - a['peak_rss_mb']) / 1000:.1f}" for a, b in zip(one, two)}
  assert len(extra) == 1 and f"the second worker costs {extra.pop()} GB more" in section


def test_serving_transcript_ranges_are_its_probabilities():
  """docs/serving.md's reading of its "What the discriminator learned"
  transcript: the swapped words', the other words' and [CLS]/[SEP]'s ranges."""
  text = page("docs/serving.md")
  transcript = text.split("```text\nThe default value of the argument is None.", 1)[1]
  swapped, others, special = [], [], []
  for line in transcript.split("```", 1)[0].splitlines():
    if not line.startswith("  "):
      continue
    pieces = [piece.rsplit(":", 1) for piece in line.split()]
    replaced = max(range(len(pieces)), key=lambda i: float(pieces[i][1]))
    for i, (piece, probability) in enumerate(pieces):
      if piece in ("[CLS]", "[SEP]"):
        special.append(float(probability))
      elif i == replaced and float(probability) > 0.5:
        swapped.append(float(probability))
      elif not (piece.startswith("##") and pieces[replaced][0] == "ho"):
        others.append(float(probability))
  assert len(swapped) == 3
  ranges = [f"{min(v):.2f}-{max(v):.2f}" for v in (swapped, others, special)]
  assert (f"({ranges[0]} against {ranges[1]} for the other words; `[CLS]` and\n"
          f"`[SEP]` {ranges[2]})") in text


def test_huggingface_figures_are_the_fixtures():
  """The gelu_new shifts (transformers' own, fixture.json) and the logits'
  ranges of the pair transformers saved (reference.npz)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  text = " ".join(page("docs/huggingface.md").split())
  with open(REPO / "tests" / "data" / "hf_official_debug" / "fixture.json",
            encoding="utf-8") as f:
    gelu_new = json.load(f)["gelu_new_max_abs_diff"]
  shifts = [f"{gelu_new[key]:.1e}".replace("e-0", "e-") for key in ("disc_logits", "gen_logits")]
  assert f"by up to {shifts[0]} and the generator's by up to {shifts[1]}" in text
  reference = np.load(REPO / "tests" / "data" / "hf_transformers_saved" / "reference.npz")
  assert (f"(discriminator, logits up to {np.abs(reference['disc_logits']).max():.1f}; "
          f"generator, all {reference['gen_logits'].shape[-1]} vocab columns, logits up to "
          f"{np.abs(reference['gen_logits']).max():.1f})") in text


def test_pretraining_page_quotes_its_results_file():
  """The builder's summary, the masking report and the log line quoted by
  docs/pretraining.md are what its commands printed (the results file), and
  its disc_auc figures are the embedded default's evaluation."""
  text = page("docs/pretraining.md")
  printed = (RESULTS / "pretraining_page_2026-11-27.txt").read_text(encoding="utf-8")
  assert "docs/results/pretraining_page_2026-11-27.txt" in text
  quoted = re.findall(r"```text\n(.*?)```", text, flags=re.S)
  assert quoted[0] in printed and quoted[1] in printed
  assert quoted[0].splitlines()[-1].startswith("  time: ")
  (line,) = re.findall(r"`(step 4/4 = [^`]+)`", text)
  assert f"\n{line}\n" in printed
  evaluation = docs_results.REPO / "docs" / "learning_study" / "embedded_default.json"
  with open(evaluation, encoding="utf-8") as f:
    metrics = json.load(f)["eval"]
  assert (f"the embedded default's 400 steps score {metrics['disc_auc']:.2f} there and "
          f"{metrics['disc_auc_real_tokens']:.2f} over real tokens") in " ".join(text.split())


def test_soak_marker_counts_the_long_forms_kills():
  text = page("docs/operations.md")
  marker, command = re.search(r'<!-- skip: next "the long form: (\d+) kills;.*?```bash\n(.*?)```',
                              text, flags=re.S).groups()
  kills = re.findall(r"--(?:tfrecords_|finetuning_)?kills=(\d+)", command)
  assert len(kills) == 3 and int(marker) == sum(map(int, kills))


def test_soak_marker_counts_the_short_forms_kills():
  """The marker's "runs the soak with N": the kills tests/test_reliability.py asks for."""
  (marker,) = re.findall(r"runs the soak with (\d+)", page("docs/operations.md"))
  soak_test = page("tests/test_reliability.py")
  kills = re.findall(r"--(?:tfrecords_|finetuning_)?kills=(\d+)", soak_test)
  assert len(kills) == 3 and int(marker) == sum(map(int, kills))


def test_xla_and_embedded_corpus_figures_are_their_results_files():
  performance = " ".join(page("docs/performance.md").split())
  rows = dict(re.findall(r"^(false|true) +([\d.]+) s", page(
      "docs/results/jit_compile_trajectory_2026-11-28.txt"), flags=re.M))
  assert (f"took {float(rows['true']):.0f} s against {float(rows['false']):.0f} s without, "
          "one run each: `docs/results/jit_compile_trajectory_2026-11-28.txt`") in performance
  pretraining = " ".join(page("docs/pretraining.md").split())
  corpus = page("docs/results/embedded_default_corpus_2026-11-27.txt")
  size = sum(map(int, re.findall(r"^(\d+)\tcorpus/", corpus, flags=re.M)))
  (entries,) = re.findall(r"vocab entries \(wc -l vocab.txt\): (\d+)", corpus)
  assert f"docstrings, {size / 1e6:.1f} MB on Python 3.11;" in pretraining
  assert (f"algorithm; {int(entries):,} entries there: "
          "`docs/results/embedded_default_corpus_2026-11-27.txt`") in pretraining


def test_ner_vs_chunk_figures_are_its_results_file():
  """docs/finetuning.md's table and gaps restate docs/ner_vs_chunk.json."""
  with open(REPO / "docs" / "ner_vs_chunk.json", encoding="utf-8") as f:
    runs = json.load(f)["runs"]
  text = " ".join(page("docs/finetuning.md").split("python -m tools.research.ner_vs_chunk", 1)[1]
                  .split("**Malformed data.**", 1)[0].split())

  def seeds(task, key):
    return [runs[f"{task}_seed{seed}"][key] for seed in (0, 1)]

  def both(values, form=".1f"):
    return " and ".join(f"{value:{form}}" for value in values)

  def gaps(key):
    return [n - c for n, c in zip(seeds("ner", key), seeds("chunk", key))]

  def spreads(key):
    return [max(seeds(task, key)) - min(seeds(task, key)) for task in ("chunk", "ner")]

  for task in ("chunk", "ner"):
    cells = [", ".join(f"{value:.1f}" for value in seeds(task, key))
             for key in ("f1", "f1_by_chunk_rule", "f1_by_conlleval_rule")]
    assert f"| {task} | {cells[0]} | {cells[1]} | {cells[2]} |" in text, task
  assert f"({both(gaps('f1'))} points)" in text
  assert f"differ by {both(gaps('f1_by_conlleval_rule'), '+.1f')}" in text
  assert f"seed spreads under that rule ({both(spreads('f1_by_conlleval_rule'))})" in text
  assert f"lead by {both(gaps('f1_by_chunk_rule'))}" in text
  assert f"spreads under that rule ({both(spreads('f1_by_chunk_rule'))})" in text
  chunk_loss = seeds("chunk", "loss")
  assert (f"{both(chunk_loss, '.2f')} are {both([loss / 2 for loss in chunk_loss], '.2f')} "
          f"a word, against ner's {both(seeds('ner', 'loss'), '.2f')}") in text



def _suite_run(name: str):
  """(wall "M min S s", tests run, start in minutes of the day UTC) of the
  results file docs/results/NAME (tools/time_suite.sh's)."""
  text = (RESULTS / name).read_text(encoding="utf-8")
  wall = re.search(r"^suite wall: \d+ s \((\d+ min \d+ s)\)", text, re.M).group(1)
  summary = re.search(r"^(\d+ (?:passed|failed).*) in [\d.]+s \(", text, re.M).group(1)
  run = sum(int(n) for n, what in re.findall(r"(\d+) (passed|failed)", summary))
  hours, minutes = re.search(r" (\d\d):(\d\d) UTC start", text).groups()
  return wall, run, int(hours) * 60 + int(minutes)


def test_readme_suite_times_are_their_results_files():
  readme = " ".join(page("README.md").split())
  quoted = re.search(r"The suite took (\d+ min \d+ s) on (\d{4}-\d\d-\d\d) \(commit "
                     r"(\w+), 2-core Intel Xeon, (\d+) tests; 54c8c67: (\d+ min \d+ s) that "
                     r"hour;", readme)
  assert quoted, "the README's suite figure"
  wall, date, commit, tests, reference = quoted.groups()
  wall_run, tests_run, started = _suite_run(f"suite_{date}_{commit}.txt")
  assert (wall, int(tests)) == (wall_run, tests_run)
  # "That hour": the reference's run that started within an hour of this one.
  same_hour = [run[0] for run in (_suite_run(path.name) for path in
                                  sorted(RESULTS.glob(f"suite_{date}_54c8c67*.txt")))
               if abs(run[2] - started) <= 60]
  assert same_hour == [reference], same_hour
