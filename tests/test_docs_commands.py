"""Every fenced command of README.md and docs/*.md, run as a user runs it.

Each page's ```bash and ```python blocks run in page order, each in a fresh
process (`bash -e` for bash, `python -c` for Python), in one work directory
that holds the checkout's scripts and package (symlinked), from the
environment the README's install made (`pip install -r requirements.txt`,
which `.ci/run` runs): `python` is the interpreter running these tests, and
nothing else is put on PYTHONPATH.  Each page starts in a work directory of
its own, so its commands must chain by themselves.

What a command cannot do here is changed by SUBSTITUTIONS only: corpus,
data, step counts, sizes and paths; every substitution is listed below with
its reason.  A block that cannot run here at all is marked in its page, just
before it, as `<!-- skip: next "reason" -->` (Sybil's directive), and counted:
the summary at the end of the test run lists how many commands ran and which
blocks were marked, with their reasons.  The blocks are parsed with Sybil.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import unittest

import pytest
from sybil import Document
from sybil.parsers.markdown import CodeBlockParser, SkipParser

from tests.conftest import REPO_ROOT, SHARED_DIR

PAGES = ["README.md", "docs/pretraining.md", "docs/finetuning.md", "docs/serving.md",
         "docs/huggingface.md", "docs/faithfulness.md", "docs/big_batches.md",
         "docs/performance.md", "docs/operations.md", "docs/electric.md", "docs/learning.md",
         "docs/layout.md", "docs/python_api.md"]
# What the work directory links to in the checkout: what a user's clone has.
CHECKOUT_ENTRIES = ["run_pretraining.py", "run_finetuning.py", "data_prep", "electra_tf",
                    "tools", "tests", "requirements.txt", "pyproject.toml", "pytest.ini"]

TINY_TRAINING = ('"num_train_steps": 20, "num_warmup_steps": 2, "train_batch_size": 8, '
                 '"model_hparam_overrides": {"hidden_size": 128, "num_hidden_layers": 2}')
TINY_EVAL = '"num_eval_steps": 2, "eval_batch_size": 8'
# The README's Quickstart as run here: the embedded default, 2 layers for 20
# steps (evaluated every 10, logged every 5) instead of 4 for 400.
QUICKSTART = (f"python run_pretraining.py --hparams='{{{TINY_TRAINING}, {TINY_EVAL}, "
              '"eval_every_steps": 10, "log_every": 5}\'\n')
OFFICIAL_DEBUG = SHARED_DIR / "fixtures" / "official_debug"
BERT_VOCAB = SHARED_DIR / "data" / "vocab" / "bert_uncased_vocab.txt"
# Google's TF1 code's tiny checkpoint (fixtures/official_debug): its hparams
# for the jobs that take pre-training hparams, and for fine-tuning.
DEBUG_SHAPE = ('"vocab_size": 30522, "model_hparam_overrides": {"hidden_size": 64, '
               '"num_hidden_layers": 2, "num_attention_heads": 4}, "embedding_size": 16, '
               '"max_seq_length": 32')
DEBUG_PRETRAINING = f'"model_size": "small", {DEBUG_SHAPE}, "generator_hidden_size": 0.5'
DEBUG_FINETUNING = f'"model_size": "small", {DEBUG_SHAPE}'
HF_FIXTURE = "tests/data/hf_transformers_saved"
# What a page's commands start from that an earlier page made: (page,
# commands, why), run in the page's work directory before its blocks.
PAGE_SETUP = {
    "docs/huggingface.md": (
        "python data_prep/build_vocab.py --corpus_dir=my_corpus/ --vocab_size=3000 "
        "--output_file=data/vocab.txt\n"
        "python data_prep/build_tfrecords.py --corpus_dir=my_corpus/ --vocab_file=data/vocab.txt "
        "--output_dir=data/pretrain_tfrecords --num_out_files=2 --seed=1\n"
        "python run_pretraining.py --data_dir=data --model_name=mine --model_size=small "
        f"--hparams='{{{TINY_TRAINING}}}'\n",
        "the README's data/ and data/models/mine, by its commands (shrunk as there)"),
    "docs/python_api.md": (
        QUICKSTART, "the README's Quickstart model, electra_demo/models/electra_demo, by its "
        "command (shrunk as there)"),
}
# What a page's block made that PAGE_SETUP would otherwise make again: (page,
# a text of the block, paths, the page whose setup they are).  Once the
# block has run, the paths are copied aside for the session (its workers
# share the base temp dir); a page whose setup they are copies them in
# instead of running its setup, and runs its setup when they are not there
# (its page not run yet, or on another worker that has not got there).
MADE_FOR_SETUP = [
    ("README.md", "--model_name=mine --model_size=small",
     ["data/vocab.txt", "data/pretrain_tfrecords", "data/models/mine"], "docs/huggingface.md"),
    ("README.md", "python run_pretraining.py\n", ["electra_demo/models/electra_demo"],
     "docs/python_api.md"),
]
# (page or "*", text in a block, replacement, why): applied in this order.
SUBSTITUTIONS = [
    ("docs/pretraining.md", "--corpus_dir=../shared/data/corpus ", "--corpus_dir=shared_corpus ",
     "the shared corpus's two folders with a smaller file each (its shortest book, WikiText-2's "
     "first 300 lines; the work directory's shared_corpus/) instead of 3.9 MB: the same "
     "recursive read of a tree, a fifteenth of the text"),
    ("*", "../shared/", f"{SHARED_DIR}/", "the shared data beside the checkout"),
    ("README.md", "pip install -r requirements.txt && ", "",
     "the tests run in the environment this install made (.ci/run runs it)"),
    ("README.md", "python -m pytest -q tests", "python -m pytest -q tests/test_bench_record.py",
     "the suite cannot run itself from inside itself: one test file (a quick one: the "
     "command's pytest.ini, workers and conftest are what it shows), by the same command"),
    ("README.md", '-m "not slow" tests', '-m "not slow" tests/test_bench_record.py',
     "the fast tier, on one test file for the same reason"),
    ("*", "--vocab_size=30522", "--vocab_size=3000", "a vocab the small corpus fills"),
    ("*", '"num_train_steps": 100000, "num_warmup_steps": 10000, "train_batch_size": 128',
     TINY_TRAINING, "20 steps of batch 8 of a 2-layer, 128-wide model instead of 100,000 "
     "steps of 128 of ELECTRA-Small"),
    ("*", "--model_name=mine --model_size=small --do_eval",
     f"--model_name=mine --model_size=small --do_eval --hparams='{{{TINY_EVAL}}}'",
     "2 eval batches of 8 instead of 100 of 128"),
    ("README.md", "python run_pretraining.py\n", QUICKSTART, "the embedded default, 2 layers "
     "for 20 steps (evaluated every 10, logged every 5) instead of 4 for 400"),
    ("README.md", "hub/electra-small-discriminator,hub/electra-small-generator",
     "tests/data/hf_transformers_saved/discriminator,tests/data/hf_transformers_saved/generator",
     "a pair saved by transformers 5.24 itself (random weights, committed) for the Hub's"),
    ("README.md", "--output_dir=data/from_hub_tfrecords",
     "--output_dir=data/from_hub_tfrecords --max_seq_length=32",
     "that pair has 32 positions: sequences of 32"),
    ("README.md", '"num_train_steps": 20000, "num_warmup_steps": 2000',
     '"num_train_steps": 20, "num_warmup_steps": 2, "train_batch_size": 8, '
     '"max_seq_length": 32',
     "20 steps of batch 8 of continued pre-training (sequences of 32) instead of 20,000 of 128"),
    ("README.md", "--model_size=base \\\n    --hparams='{\"gradient_accumulation_steps\": 8, "
     '"recompute_layers": true}\'',
     "--model_size=small \\\n    --hparams='{\"gradient_accumulation_steps\": 8, "
     '"recompute_layers": true, "max_seq_length": 512, "train_batch_size": 8, '
     '"num_train_steps": 1, "model_hparam_overrides": {"hidden_size": 128, '
     '"num_hidden_layers": 2}}\'',
     "a 2-layer, 128-wide model, one step of 8 (micro-batches of 1) instead of Base, "
     "766,000 of 256"),
    ("docs/pretraining.md", "python run_pretraining.py --model_size=small --data_dir=data \\",
     f"python run_pretraining.py --model_size=small --data_dir=data --hparams='{{{TINY_TRAINING}}}' \\",
     "20 steps of batch 8 of a 2-layer model instead of the official 1,000,000 of 128"),
    ("docs/pretraining.md", '"num_train_steps": 100000, "train_batch_size": 256',
     TINY_TRAINING, "20 steps of batch 8 of a 2-layer model instead of 100,000 of 256"),
    ("docs/serving.md", "--checkpoint=models/electra_base", f"--checkpoint={OFFICIAL_DEBUG}/model.ckpt",
     "Google's TF1 code's tiny checkpoint (official_debug fixture) for ELECTRA-Base"),
    ("docs/serving.md", "--init_checkpoint=models/electra_base",
     f"--init_checkpoint={OFFICIAL_DEBUG}/model.ckpt", "the same"),
    ("docs/serving.md", "--vocab_file=vocab.txt", f"--vocab_file={BERT_VOCAB}",
     "its vocab (BERT's uncased)"),
    ("docs/serving.md", "--hparams='{\"model_size\": \"base\"}' --export_dir=export/electra_base",
     f"--hparams='{{{DEBUG_PRETRAINING}}}' --export_dir=export/electra_base",
     "its architecture, for the export"),
    ("docs/serving.md", '"model_size": "base"', DEBUG_FINETUNING,
     "its architecture, for fine-tuning (sequences of 32)"),
    ("docs/serving.md", "--batch_size=32 --seq_length=128 \\\n    --steps=10 --latency_calls=100",
     "--batch_size=2 --seq_length=32 \\\n    --steps=1 --latency_calls=2",
     "2 sequences of 32 once, 2 latency calls"),
    ("docs/python_api.md",
     'load_tokenizer("electra_base/electra_base", hparams={"model_size": "base"})',
     f'load_tokenizer("{OFFICIAL_DEBUG}/model.ckpt", hparams={{{DEBUG_PRETRAINING}}}, '
     f'vocab_file="{BERT_VOCAB}")',
     "Google's TF1 code's tiny checkpoint (official_debug fixture) for ELECTRA-Base, its "
     "architecture, and its vocab (BERT's uncased; Google's release has it beside the checkpoint)"),
    ("docs/python_api.md", '"electra_base/electra_base", hparams={"model_size": "base"}',
     f'"{OFFICIAL_DEBUG}/model.ckpt", hparams={{{DEBUG_PRETRAINING}}}', "the same, for the encoder"),
    ("docs/python_api.md", '("electra-small-discriminator", "electra-small-generator")',
     f'("{HF_FIXTURE}/discriminator", "{HF_FIXTURE}/generator")',
     "a pair saved by transformers 5.24 itself (random weights, committed) for the Hub's"),
    ("docs/huggingface.md", "--from_hf=electra-small-discriminator ",
     f"--from_hf={HF_FIXTURE}/discriminator ",
     "a discriminator saved by transformers 5.24 itself (random weights, committed)"),
    ("docs/huggingface.md", "--init_checkpoint=models/disc \\\n    --model_dir=models/disc_rte",
     "--init_checkpoint=models/disc \\\n    --model_dir=models/disc_rte "
     "--hparams='{\"max_seq_length\": 32}'", "that discriminator has 32 positions"),
    ("docs/performance.md", "--batch_size=32 --seq_length=128 \\\n    --steps=5 --pairs=3",
     "--batch_size=2 --seq_length=32 \\\n    --steps=1 --pairs=1 --hparams='{\"model_hparam_overrides\": "
     "{\"hidden_size\": 128, \"num_hidden_layers\": 2}}'",
     "one pair of steps of 2 sequences of 32, of a 2-layer, 128-wide model"),
    ("*", "--model_sizes=base --seq_lengths=512 --batch_sizes=1,8",
     "--model_sizes=small --seq_lengths=32 --batch_sizes=1 --recompute=off "
     "--hparams='{\"model_hparam_overrides\": {\"hidden_size\": 128, "
     "\"num_hidden_layers\": 2}}'", "one measurement of a 2-layer, 128-wide model"),
]




def check_embedded_default(work: pathlib.Path, stdout: str, stderr: str) -> None:
  """The Quickstart's first command: what it says it makes, it makes."""
  demo = work / "electra_demo"
  vocab = (demo / "vocab.txt").read_text(encoding="utf-8").splitlines()
  assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(vocab) > 1000
  assert list((demo / "pretrain_tfrecords").glob("pretrain_data.tfrecord-*-of-4"))
  mlm_losses = [float(line.split("mlm_loss ")[1].split(" ")[0])
                for line in stdout.splitlines() if line.startswith("step ")]
  assert len(mlm_losses) == 4 and mlm_losses[-1] < mlm_losses[0], mlm_losses
  model_dir = demo / "models" / "electra_demo"
  results = json.loads((model_dir / "results" / "unsup_results.json").read_text())
  assert results["global_step"] == 20 and results["masked_lm_loss"] > 0
  assert 0.0 <= results["disc_auc_real_tokens"] <= 1.0
  assert (model_dir / "results" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  # A held-out example with the generator's replacements and the verdicts.
  example = stdout.split("The discriminator on an eval example")[1].splitlines()[1]
  assert example.startswith("[CLS]") and "->" in example and example.endswith("[SEP]")
  assert (model_dir / "export" / "saved_model.pb").exists()
  # Evaluated during training too, so the eval panels are curves.
  from electra_tf import curves  # pylint: disable=g-import-not-at-top
  assert sorted(curves.read_scalars(str(model_dir / "eval"))["disc_auc_real_tokens"]) == [10, 20]
  assert "of electra_demo/eval_tfrecords/pretrain_data.tfrecord*" in stdout
  assert "TRAINING records" not in stdout
  # What it says: the vocab it wrote, the loss's parts, where the curves are;
  # no CUDA probe error on a machine without a GPU.
  assert f"Wrote {len(vocab):,} entries" in stdout
  assert "loss = 1 x mlm_loss + 50 x disc_loss" in stdout
  assert "Drew the curves in electra_demo/models/electra_demo/results/curves.png" in stdout
  assert "cuInit" not in stderr


# (page, a block as the page has it, check(work_dir, stdout, stderr)): what a
# block's outputs must be, beyond its exit status 0.
BLOCK_CHECKS = [
    ("README.md", "pip install -r requirements.txt && python run_pretraining.py\n",
     check_embedded_default),
]


def substituted(page: str, text: str) -> str:
  for where, old, new, _ in SUBSTITUTIONS:
    if where in ("*", page):
      text = text.replace(old, new)
  return text


def _bash(example) -> None:
  example.document.namespace["run"](example, "bash", example.parsed)


def _python(example) -> None:
  example.document.namespace["run"](example, "python", example.parsed)


def page_examples(page: str):
  """The page's blocks and skip directives, in order (Sybil)."""
  document = Document.parse(str(REPO_ROOT / page),
                            CodeBlockParser("bash", _bash), CodeBlockParser("python", _python),
                            SkipParser())
  return document, list(document.examples())


@pytest.fixture
def work_dir(tmp_path_factory):
  """A user's clone (the checkout's entries, linked) with their own data:
  my_corpus/ (one Gutenberg book), shared_corpus/ (a small copy of the shared
  corpus's tree) and DATA/finetuning_data/{rte,sst} (64 examples each)."""
  if not SHARED_DIR.exists():
    if os.environ.get("CI", "").lower() == "true":
      pytest.fail(f"{SHARED_DIR} is absent; CI=true requires it")
    pytest.skip(f"{SHARED_DIR} is absent (the ../shared folder beside the checkout)")
  work = tmp_path_factory.mktemp("user")
  for entry in CHECKOUT_ENTRIES:
    (work / entry).symlink_to(REPO_ROOT / entry)
  (work / "my_corpus").mkdir()
  shutil.copy(SHARED_DIR / "data" / "corpus" / "gutenberg" / "31251-0.txt", work / "my_corpus")
  # shared_corpus/: ../shared/data/corpus's tree (gutenberg/, wikitext-2/),
  # a smaller file in each.
  (work / "shared_corpus" / "gutenberg").mkdir(parents=True)
  shutil.copy(SHARED_DIR / "data" / "corpus" / "gutenberg" / "31251-0.txt",
              work / "shared_corpus" / "gutenberg")
  (work / "shared_corpus" / "wikitext-2").mkdir()
  wiki = (SHARED_DIR / "data" / "corpus" / "wikitext-2" / "wiki.valid.raw").read_text(
      encoding="utf-8").splitlines(keepends=True)
  (work / "shared_corpus" / "wikitext-2" / "wiki.valid.raw").write_text(
      "".join(wiki[:300]), encoding="utf-8")
  for task in ("rte", "sst"):
    target = work / "DATA" / "finetuning_data" / task
    target.mkdir(parents=True)
    for split in ("train", "dev"):
      lines = (SHARED_DIR / "data" / "finetuning_data" / task / f"{split}.tsv").read_text(
          encoding="utf-8").splitlines()
      (target / f"{split}.tsv").write_text("\n".join(lines[:65]) + "\n", encoding="utf-8")
  # ner: CoNLL-format files; ../shared has no NER data, so the first 64
  # sentences of CoNLL-2000 chunking, its chunks read as entities.
  target = work / "DATA" / "finetuning_data" / "ner"
  target.mkdir(parents=True)
  for split in ("train", "dev"):
    sentences = (SHARED_DIR / "data" / "finetuning_data" / "chunk" / f"{split}.txt").read_text(
        encoding="utf-8").strip().split("\n\n")
    (target / f"{split}.txt").write_text("\n\n".join(sentences[:64]) + "\n",
                                         encoding="utf-8")
  return work


def _environment() -> dict:
  # As a user's shell has it: no PYTHONPATH, TensorFlow's log level unset,
  # no TF_USE_LEGACY_KERAS (the commands set it themselves).
  env = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "TF_USE_LEGACY_KERAS")}
  # `python` is the interpreter running the tests (a venv need not be active).
  env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
  env["PYTHONUNBUFFERED"] = "1"
  return env


def _session_dir(tmp_path_factory) -> pathlib.Path:
  """A directory every worker of this session sees (xdist's workers have
  base temp dirs of their own under a common one)."""
  base = tmp_path_factory.getbasetemp()
  return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _made_dir(tmp_path_factory, for_page: str) -> pathlib.Path:
  return _session_dir(tmp_path_factory) / "made_for_setup" / re.sub(r"\W", "_", for_page)


def _keep_made(tmp_path_factory, work: pathlib.Path, paths, for_page: str) -> None:
  """Copies `paths` of `work` aside for `for_page`'s setup (renamed into
  place whole, so that a page on another worker sees all or nothing)."""
  target = _made_dir(tmp_path_factory, for_page)
  if target.exists():
    return
  partial = target.with_name(f".{target.name}.{os.getpid()}")
  for path in paths:
    (partial / path).parent.mkdir(parents=True, exist_ok=True)
    if (work / path).is_dir():
      shutil.copytree(work / path, partial / path, symlinks=True)
    else:
      shutil.copy2(work / path, partial / path)
  try:
    partial.rename(target)
  except OSError:  # another worker's copy got there first
    shutil.rmtree(partial, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_documented_commands(page, work_dir, record_property, tmp_path_factory):
  document, examples = page_examples(page)
  ran, marked, seconds = [], [], []

  def run(example, kind, text):
    text = substituted(page, text)
    where = f"{page}:{example.line}"
    argv = (["bash", "-e", "-o", "pipefail", "-c", text] if kind == "bash" else
            [sys.executable, "-c", text])
    started = time.monotonic()
    result = subprocess.run(argv, cwd=work_dir, env=_environment(), text=True,
                            capture_output=True, timeout=1800)
    assert result.returncode == 0, (
        f"{where}: exit {result.returncode}\n{text}\n--- stdout\n{result.stdout[-3000:]}"
        f"\n--- stderr\n{result.stderr[-3000:]}")
    for check_page, block, check in BLOCK_CHECKS:
      if (check_page, block) == (page, example.parsed):
        check(work_dir, result.stdout, result.stderr)
    for made_page, block_text, paths, for_page in MADE_FOR_SETUP:
      if made_page == page and block_text in example.parsed:
        _keep_made(tmp_path_factory, work_dir, paths, for_page)
    ran.extend(commands_of(text) if kind == "bash" else [text])
    seconds.append((round(time.monotonic() - started, 1), where))

  document.namespace["run"] = run
  made = _made_dir(tmp_path_factory, page)
  if page in PAGE_SETUP and made.exists():
    shutil.copytree(made, work_dir, symlinks=True, dirs_exist_ok=True)
  elif page in PAGE_SETUP:
    setup = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", PAGE_SETUP[page][0]],
                           cwd=work_dir, env=_environment(), text=True, capture_output=True,
                           timeout=1800)
    assert setup.returncode == 0, f"{page}: its setup failed\n{setup.stderr[-3000:]}"
  for example in examples:
    try:
      example.evaluate()
    except unittest.SkipTest as skipped:
      marked.append(f"{page}:{example.line}: {skipped}")
  record_property("documented_commands", {"ran": len(ran), "marked": marked,
                                           "seconds": seconds})


def commands_of(text: str) -> list:
  """The commands of a bash block: its lines joined at `\\`, without comments
  and blank lines, split at `&&`."""
  joined = re.sub(r"\s*\\\n\s*", " ", text)
  commands = []
  for line in joined.splitlines():
    line = line.split(" #")[0].strip() if not line.lstrip().startswith("#") else ""
    commands += [part.strip() for part in line.split("&&") if part.strip()]
  return commands


def test_substitutions_and_markers_are_what_the_pages_need():
  """Every page is run, each substitution changes some page's block, and
  every marker has a reason."""
  assert sorted(PAGES) == ["README.md"] + sorted(
      str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "docs").glob("*.md"))
  texts = {page: (REPO_ROOT / page).read_text(encoding="utf-8") for page in PAGES}
  for where, old, _, reason in SUBSTITUTIONS:
    pages = PAGES if where == "*" else [where]
    assert any(old in texts[p] for p in pages), f"substitution {old!r} matches no page"
    assert reason
  for page, block, _ in BLOCK_CHECKS:
    assert block in [example.parsed for example in page_examples(page)[1]], (page, block)
  for page, block_text, _, for_page in MADE_FOR_SETUP:
    assert for_page in PAGE_SETUP and PAGES.index(page) < PAGES.index(for_page)
    assert sum(block_text in str(example.parsed) for example in page_examples(page)[1]) == 1
  for page, text in texts.items():
    for marker in re.findall(r"<!--\s*skip:\s*(.*?)-->", text):
      assert re.match(r'next\s+"[^"]{10,}"\s*$', marker), (page, marker)
  assert commands_of("a --x \\\n  --y  # note\n# comment\nb && c\n") == ["a --x --y", "b", "c"]
