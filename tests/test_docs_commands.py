"""Every fenced block of README.md and docs/*.md: run as a user runs it,
compared with what its command prints, or marked with the reason why not.

Each page's fenced blocks are taken in page order (parsed with Sybil):
  ```bash, ```python  run, each in a fresh process (`bash -e` for bash,
                      `python -c` for Python; a bash block's commands are
                      processes of their own, as a user's shell starts them);
  ```console          a transcript: each `$ ` command runs, and its output is
                      compared with the quoted one (COMPARISONS);
  ```text             the output of the command block just before it,
                      compared with what that block printed (COMPARISONS).
A block of another kind, or one that cannot run or be compared here, is marked
in its page, just before it, as `<!-- skip: next "reason" -->` (Sybil's
directive), and no page holds an indented code block, which the harness would
not see.  The summary at the end of the test run says how many commands ran
and outputs were compared, and which blocks were marked, with their reasons.

The commands run in a user's clone: a work directory that holds the
checkout's scripts and package (symlinked) and the user's own data
(`new_clone`), from the environment the README's install made (`pip install
-r requirements.txt`, which `.ci/run` runs): `python` is the interpreter
running these tests, and nothing else is put on PYTHONPATH.  A bash block's
`python` commands start as processes forked from one that has imported
TensorFlow as the commands do (tests/zygote.py), without the interpreter's
and TensorFlow's start; a ```python block starts the interpreter itself, as
a user's own code imports TensorFlow.  Each page starts
in a clone of its own, so its commands must chain by themselves, except the
pages of FOLLOW_README: as each says, they go on in the clone where the
README's commands ran (and the one before them), as a user who follows the
README and then them does; a folder one of them writes again is a collision
there as it would be for that user.

What a command cannot do here is changed by SUBSTITUTIONS only: sizes, steps,
data and paths; every substitution is listed below with its reason.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import resource
import types
import unittest
from typing import Dict, List, Tuple

import pytest
from sybil import Document
from sybil.evaluators.skip import Skipper
from sybil.parsers.markdown import SkipParser
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

from tests.conftest import REPO_ROOT, SHARED_DIR, zygote

PAGES = ["README.md", "docs/huggingface.md", "docs/serving.md", "docs/pretraining.md",
         "docs/finetuning.md", "docs/faithfulness.md", "docs/big_batches.md",
         "docs/performance.md", "docs/operations.md", "docs/electric.md", "docs/learning.md",
         "docs/layout.md", "docs/python_api.md"]
# The pages that go on, in this order, in the clone where the README's
# commands ran: they use its models and data, as each page says.
FOLLOW_README = ["docs/huggingface.md", "docs/serving.md", "docs/python_api.md"]
# The reason of a marked block that the README holds as well (checked).
RUN_IN_README = "the README runs this same block"
# What the work directory links to in the checkout: what a user's clone has.
CHECKOUT_ENTRIES = ["run_pretraining.py", "run_finetuning.py", "data_prep", "electra_tf",
                    "tools", "tests", "requirements.txt", "pyproject.toml", "pytest.ini"]
RUN = ("bash", "python")  # the blocks that run

TINY_MODEL = '"model_hparam_overrides": {"hidden_size": 128, "num_hidden_layers": 2}'
TINY_TRAINING = ('"num_train_steps": 20, "num_warmup_steps": 2, "train_batch_size": 8, '
                 + TINY_MODEL)
TINY_EVAL = '"num_eval_steps": 2, "eval_batch_size": 8'
OFFICIAL_DEBUG = SHARED_DIR / "fixtures" / "official_debug"
BERT_VOCAB = SHARED_DIR / "data" / "vocab" / "bert_uncased_vocab.txt"
HF_SAVED = REPO_ROOT / "tests" / "data" / "hf_transformers_saved"  # saved by transformers 5.24
# The architecture of Google's TF1 code's tiny checkpoint (fixtures/official_debug).
DEBUG_ARCHITECTURE = ('{"model_size": "small", "vocab_size": 30522, "embedding_size": 16, '
                      '"generator_hidden_size": 0.5, "model_hparam_overrides": '
                      '{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}}')
# Base's records and step: 1 step of 8 sequences of 64 tokens (micro-batches of 1).
BASE_SEQ_LENGTH = 64
# (page or "*", text in a block, replacement, why): applied in this order.
SUBSTITUTIONS = [
    ("docs/python_api.md",
     'load_tokenizer("electra_base/electra_base", hparams={"model_size": "base"})',
     f'load_tokenizer("{OFFICIAL_DEBUG}/model.ckpt", hparams={DEBUG_ARCHITECTURE}, '
     f'vocab_file="{BERT_VOCAB}")',
     "Google's TF1 code's tiny checkpoint (official_debug fixture) for ELECTRA-Base, its "
     "architecture, and its vocab (BERT's uncased; Google's release has it beside the checkpoint)"),
    ("docs/python_api.md", '"electra_base/electra_base", hparams={"model_size": "base"}',
     f'"{OFFICIAL_DEBUG}/model.ckpt", hparams={DEBUG_ARCHITECTURE}', "the same, for the encoder"),
    ("docs/python_api.md", '("electra-small-discriminator", "electra-small-generator")',
     f'("{HF_SAVED}/discriminator", "{HF_SAVED}/generator")',
     "a pair saved by transformers 5.24 itself (random weights, committed) for the Hub's"),
    ("docs/pretraining.md", "--corpus_dir=../shared/data/corpus ", "--corpus_dir=shared_corpus ",
     "the shared corpus's two folders with a smaller file each (its shortest book, WikiText-2's "
     "first 300 lines; the work directory's shared_corpus/) instead of 3.9 MB: the same "
     "recursive read of a tree, a fifteenth of the text"),
    ("*", "../shared/", f"{SHARED_DIR}/", "the shared data beside the checkout"),
    ("README.md", "pip install -r requirements.txt && ", "",
     "the tests run in the environment this install made (.ci/run runs it)"),
    ("README.md", "python -m pytest -q tests ", "python -m pytest -q tests/test_measure_record.py ",
     "the suite cannot run itself from inside itself: one test file (a quick one: the "
     "command's pytest.ini, workers and conftest are what it shows), by the same command"),
    ("README.md", '-m "not slow" tests ', '-m "not slow" tests/test_measure_record.py ',
     "the fast tier, on one test file for the same reason"),
    ("*", "--vocab_size=30522", "--vocab_size=3000", "a vocab the small corpus fills"),
    ("*", '"num_train_steps": 100000, "num_warmup_steps": 10000, "train_batch_size": 128',
     TINY_TRAINING, "20 steps of batch 8 of a 2-layer, 128-wide model instead of 100,000 "
     "steps of 128 of ELECTRA-Small"),
    ("*", "--model_name=mine --model_size=small --do_eval",
     f"--model_name=mine --model_size=small --do_eval --hparams='{{{TINY_EVAL}}}'",
     "2 eval batches of 8 instead of 100 of 128"),
    ("README.md", "python run_pretraining.py\n",
     f"python run_pretraining.py --hparams='{{{TINY_TRAINING}, {TINY_EVAL}, "
     '"eval_every_steps": 10, "log_every": 5}\'\n', "the embedded default, 2 layers for 20 "
     "steps (evaluated every 10, logged every 5) instead of 4 for 400"),
    ("*", "--official_checkpoint=electra_base/electra_base \\\n"
     "    --hparams='{\"model_size\": \"base\"}'",
     f"--official_checkpoint={OFFICIAL_DEBUG}/model.ckpt \\\n    --hparams='{DEBUG_ARCHITECTURE}'",
     "Google's TF1 code's tiny checkpoint (the official_debug fixture) and the hparams that "
     "describe it, for Google's ELECTRA-Base, which needs a download"),
    ("*", "--vocab_file=vocab.txt ", f"--vocab_file={BERT_VOCAB} ",
     "Google's vocab: BERT's uncased, from the shared data"),
    ("README.md", "--from_hf=hub/electra-small-discriminator,hub/electra-small-generator",
     "--from_hf=hf/mine/discriminator,hf/mine/generator",
     "for the Hub's pair, the pair the command above wrote in the same layout (config.json, "
     "model.safetensors, vocab.txt); tests/test_hf.py imports a pair transformers saved"),
    ("README.md", '"num_train_steps": 20000, "num_warmup_steps": 2000',
     '"num_train_steps": 20, "num_warmup_steps": 2, "train_batch_size": 8',
     "20 steps of batch 8 of continued pre-training instead of 20,000 of 128"),
    ("README.md", "--output_dir=data/tfrecords_512 --max_seq_length=512",
     f"--output_dir=data/tfrecords_512 --max_seq_length={BASE_SEQ_LENGTH}",
     f"Base's records of {BASE_SEQ_LENGTH} tokens instead of 512"),
    ("README.md", '"gradient_accumulation_steps": 8, "recompute_layers": true}',
     f'"gradient_accumulation_steps": 8, "recompute_layers": true, "max_seq_length": '
     f'{BASE_SEQ_LENGTH}, "train_batch_size": 8, "num_train_steps": 1}}',
     f"Base for one step of 8 sequences of {BASE_SEQ_LENGTH} (micro-batches of 1) instead of "
     "766,000 of 256 x 512"),
    ("*", "--seq_lengths=512 --batch_sizes=1,8",
     f"--seq_lengths={BASE_SEQ_LENGTH} --batch_sizes=1",
     f"Base's step measured at batch 1 of {BASE_SEQ_LENGTH} tokens instead of batches of 1 "
     "and 8 of 512"),
    ("docs/pretraining.md", "python run_pretraining.py --model_size=small --data_dir=data \\",
     "python run_pretraining.py --model_size=small --data_dir=data "
     f"--hparams='{{{TINY_TRAINING}}}' \\",
     "20 steps of batch 8 of a 2-layer model instead of the official 1,000,000 of 128"),
    ("docs/pretraining.md", '"num_train_steps": 100000, "train_batch_size": 256',
     TINY_TRAINING, "20 steps of batch 8 of a 2-layer model instead of 100,000 of 256"),
    ("docs/pretraining.md", '"embedding_size": 64, "num_train_steps": 20}',
     '"embedding_size": 64, "num_train_steps": 20, "train_batch_size": 8}',
     "the narrow model's 20 steps at batch 8 instead of the default 128"),
    ("docs/serving.md", "--batch_size=32 --seq_length=128 \\\n    --steps=10 --latency_calls=100",
     "--batch_size=2 --seq_length=32 \\\n    --steps=1 --latency_calls=2",
     "2 sequences of 32 once, 2 latency calls"),
    ("docs/huggingface.md", "--from_hf=electra-small-discriminator ",
     "--from_hf=hf/mine_latest/discriminator ",
     "for the Hub's discriminator, the one the page's first command wrote in the same layout"),
    ("docs/performance.md", "--batch_size=32 --seq_length=128 \\\n    --steps=5 --pairs=3",
     f"--batch_size=2 --seq_length=32 \\\n    --steps=1 --pairs=1 --hparams='{{{TINY_MODEL}}}'",
     "one pair of steps of 2 sequences of 32, of a 2-layer, 128-wide model"),
]


# ------------------------------------------------ outputs the pages quote
NUMBER = r"\d+(?:[.,]\d+)*"


def _but_numbers(line: str) -> str:
  """A regular expression of `line` in which every number stands for any."""
  parts = re.split(f"({NUMBER})", line.strip())
  return "".join(NUMBER if i % 2 else re.escape(part) for i, part in enumerate(parts))


def same_lines_but_numbers(quoted: str, output: str) -> None:
  """The quoted lines are consecutive lines of the output, as quoted but for
  their numbers."""
  patterns = [_but_numbers(line) for line in quoted.strip().splitlines()]
  lines = [line.strip() for line in output.splitlines()]
  for start in range(len(lines) - len(patterns) + 1):
    if all(re.fullmatch(p, line) for p, line in zip(patterns, lines[start:])):
      return
  raise AssertionError(f"the output has no lines of the form\n{quoted}\n--- output\n"
                       f"{output[-3000:]}")


def masking_report(quoted: str, output: str) -> None:
  """An example printed as `example 0: [CLS] ... [SEP]`, and the JSON report
  with the quoted one's keys."""
  report = json.loads(quoted.strip().splitlines()[-1])
  lines = output.splitlines()
  assert any(re.fullmatch(r"example 0: \[CLS\] .* \[SEP\]", line) for line in lines), output
  printed = [json.loads(line) for line in lines if line.startswith("{")]
  assert printed and sorted(printed[-1]) == sorted(report), (printed, report)


def _signature_tensors(listing: str, signature: str) -> List[Tuple[str, ...]]:
  """(inputs|outputs, name, dtype, shape) of a signature in saved_model_cli
  show's listing."""
  section = listing.split(f"signature_def['{signature}']:", 1)[1].split("signature_def[", 1)[0]
  return re.findall(r"(inputs|outputs)\['(\w+)'\] tensor_info:\s+dtype: (\w+)\s+shape: (\S+)",
                    section)


def signature_listing(quoted: str, output: str) -> None:
  """Each quoted signature has the output's inputs and outputs (names, dtypes,
  shapes), and the ops quoted are in the output's list of the graph's ops."""
  signatures = re.findall(r"signature_def\['(\w+)'\]:", quoted)
  assert signatures
  for signature in signatures:
    assert _signature_tensors(quoted, signature) == _signature_tensors(output, signature), (
        signature, output[-3000:])
  ops = output.split("contains the following ops:", 1)[1].splitlines()[0]
  for op in re.findall(r"'(\w+)'", quoted.split("contains the following ops:", 1)[1]):
    assert f"'{op}'" in ops, op


def _results(text: str) -> Dict[str, int]:
  """saved_model_cli run's printed results: output key -> the nesting depth
  of its value (the rank of the array)."""
  found = re.findall(r"^Result for output key (\w+):\n(\[+)", text, flags=re.M)
  return {key: len(brackets) for key, brackets in found}


def run_results(quoted: str, output: str) -> None:
  """The quoted output keys, each an array of the quoted rank."""
  assert _results(quoted) and _results(output) == _results(quoted), output[-3000:]


# (page, text in the block, compare(quoted, output), why): how a quoted
# output (a ```text block, or the output of a ```console transcript's command)
# is compared with what the command printed here.
COMPARISONS = [
    ("docs/pretraining.md", "Wrote 11610 examples", same_lines_but_numbers,
     "the builder's summary: its lines, with the counts of the smaller corpus"),
    ("docs/pretraining.md", "example 0: [CLS]", masking_report,
     "an example's form and the report's keys (the smaller corpus's example and shares)"),
    ("docs/serving.md", "saved_model_cli show", signature_listing,
     "the text signature's inputs and outputs (names, dtypes, shapes) and its ops"),
    ("docs/serving.md", "saved_model_cli import main", run_results,
     "the output keys and each array's rank (the values are another export's)"),
]


# ------------------------------------------------ what blocks leave behind
def check_embedded_default(work: pathlib.Path, output: str) -> None:
  """The Quickstart's first command: what it says it makes, it makes."""
  demo = work / "electra_demo"
  vocab = (demo / "vocab.txt").read_text(encoding="utf-8").splitlines()
  assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(vocab) > 1000
  assert list((demo / "pretrain_tfrecords").glob("pretrain_data.tfrecord-*-of-4"))
  mlm_losses = [float(line.split("mlm_loss ")[1].split(" ")[0])
                for line in output.splitlines() if line.startswith("step ")]
  assert len(mlm_losses) == 4 and mlm_losses[-1] < mlm_losses[0], mlm_losses
  model_dir = demo / "models" / "electra_demo"
  results = json.loads((model_dir / "results" / "unsup_results.json").read_text())
  assert results["global_step"] == 20 and results["masked_lm_loss"] > 0
  assert (model_dir / "export" / "saved_model.pb").exists()
  # Evaluated during training too, so the eval panels are curves.
  from electra_tf import curves  # pylint: disable=g-import-not-at-top
  assert sorted(curves.read_scalars(str(model_dir / "eval"))["disc_auc_real_tokens"]) == [10, 20]
  assert "of electra_demo/eval_tfrecords/pretrain_data.tfrecord*" in output
  assert "TRAINING records" not in output
  # What it says: the vocab it wrote, the loss's parts, a held-out example in
  # docs/pretraining.md's notation, where the curves are; no CUDA probe error
  # on a machine without a GPU.
  assert f"Wrote {len(vocab):,} entries" in output
  assert "loss = 1 x mlm_loss + 50 x disc_loss" in output
  assert re.search(r"^\[CLS\]\*? .*\[\S+->\S+\]\*? .*\[SEP\]\*?$", output, flags=re.M), output
  assert "Drew the curves in electra_demo/models/electra_demo/results/curves.png" in output
  assert "cuInit" not in output


def documented_eval_metrics() -> List[str]:
  """The metrics docs/pretraining.md's "Evaluation" paragraph names."""
  text = (REPO_ROOT / "docs" / "pretraining.md").read_text(encoding="utf-8")
  paragraph = text.split("**Evaluation.**", 1)[1].split("They are printed", 1)[0]
  return sorted(set(re.findall(r"`([a-z_]+)`", paragraph)) - {"num_eval_steps"})


def check_eval_results(work: pathlib.Path, output: str) -> None:
  """The README's --do_eval writes the metrics docs/pretraining.md names, the
  step, and what it read (hf.EVALUATION_KEYS): the training records, as the
  README says of a run without eval_tfrecords."""
  del output
  from electra_tf import hf  # pylint: disable=g-import-not-at-top
  results = json.loads((work / "data" / "models" / "mine" / "results" /
                        "unsup_results.json").read_text(encoding="utf-8"))
  assert sorted(results) == sorted(documented_eval_metrics() + ["global_step"] +
                                   list(hf.EVALUATION_KEYS)), results
  assert results["checkpoint"].endswith("ckpt-20") and results["held_out"] is False, results


def check_log_lines(work: pathlib.Path, output: str) -> None:
  """docs/pretraining.md's "Logs" line is the form of the job's lines."""
  del work
  text = (REPO_ROOT / "docs" / "pretraining.md").read_text(encoding="utf-8")
  quoted = re.search(r"`(step \d+/\d+ = [^`]+)`", text.split("**Logs.**", 1)[1]).group(1)
  same_lines_but_numbers(quoted, output)


def _json_bullet(name: str) -> str:
  """docs/performance.md's bullet `name` of "The benchmark's JSON", on one line."""
  text = (REPO_ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
  bullet = text.split(f"- **{name}**", 1)[1].split("\n- ", 1)[0].split("\n\n", 1)[0]
  return " ".join(bullet.split())


def _benchmark_keys(output: str, named_in: str) -> None:
  """The benchmark's JSON line has the keys `named_in` names (`text_`/`ids_`
  `name`: both), and no other."""
  named = set(re.findall(r"`([a-z_][a-z0-9_]*)`", named_in)) - {"text_", "ids_"}
  keys = set(json.loads([line for line in output.splitlines() if line.startswith("{")][-1]))
  for key in keys:
    assert key in named or key.partition("_")[2] in named, (key, named)
  for name in named:
    assert name in keys or {f"text_{name}", f"ids_{name}"} <= keys, (name, keys)


def check_step_benchmark(work: pathlib.Path, output: str) -> None:
  """The train step's JSON: the keys named before the options' ones."""
  del work
  _benchmark_keys(output, _json_bullet("Train step").split("; with `--", 1)[0])


def check_export_benchmark(work: pathlib.Path, output: str) -> None:
  """An export's JSON: the keys named after "The JSON:"."""
  del work
  _benchmark_keys(output, _json_bullet("`--export_dir`").split("The JSON:", 1)[1])


# (page, text in the block, check(work_dir, output)): what a block leaves
# behind and prints, beyond its exit status 0.
BLOCK_CHECKS = [
    ("README.md", "pip install -r requirements.txt && python run_pretraining.py\n",
     check_embedded_default),
    ("README.md", "--model_name=mine --model_size=small --do_eval", check_eval_results),
    ("docs/pretraining.md", "--model_dir=data/models/mine", check_log_lines),
    ("docs/performance.md", "python -m electra_tf.benchmark --model_size=small",
     check_step_benchmark),
    ("docs/serving.md", "python -m electra_tf.benchmark --export_dir", check_export_benchmark),
]


# ------------------------------------------------------------ the pages
def substituted(page: str, text: str) -> str:
  for where, old, new, _ in SUBSTITUTIONS:
    if where in ("*", page):
      text = text.replace(old, new)
  return text


def _for_block(table, page: str, text: str):
  """The entries of `table` ((page, text in the block, ...)) of this block."""
  return [entry for entry in table if entry[0] == page and entry[1] in text]


class FencedBlockParser:
  """Sybil parser of every fenced block, whatever its info string: parsed as
  (info, text), evaluated by the document's namespace["evaluate"]."""

  def __init__(self):
    self.lexer = RawFencedCodeBlockLexer(
        info_pattern=re.compile(r"(?P<info>[^\n]*)$\n", re.MULTILINE))

  def __call__(self, document):
    for region in self.lexer(document):
      region.parsed = (region.lexemes["info"].strip(), str(region.lexemes["source"]))
      region.evaluator = lambda example: example.document.namespace["evaluate"](example)
      yield region


def page_examples(page: str):
  """The page's fenced blocks and skip directives, in order (Sybil)."""
  document = Document.parse(str(REPO_ROOT / page), FencedBlockParser(), SkipParser())
  return document, list(document.examples())


def page_blocks(page: str) -> List[Tuple[int, str, str, str]]:
  """(line, info, text, the reason it is marked or "") of each fenced block."""
  blocks, reason = [], ""
  for example in page_examples(page)[1]:
    if isinstance(example.region.evaluator, Skipper):
      action, argument = example.parsed
      reason = argument.strip().strip('"') if action == "next" else ""
    else:
      blocks.append((example.line, *example.parsed, reason))
      reason = ""
  return blocks


def commands_of(text: str) -> list:
  """The commands of a bash block: its lines joined at `\\`, without comments
  and blank lines, split at `&&`."""
  joined = re.sub(r"\s*\\\n\s*", " ", text)
  commands = []
  for line in joined.splitlines():
    line = line.split(" #")[0].strip() if not line.lstrip().startswith("#") else ""
    commands += [part.strip() for part in line.split("&&") if part.strip()]
  return commands


def transcript(text: str) -> List[Tuple[str, str]]:
  """(command, quoted output) of each `$ ` line of a console block; a command
  goes on over the lines that end in `\\`."""
  entries, lines = [], text.splitlines()
  while lines:
    line = lines.pop(0)
    assert line.startswith("$ "), f"a console block's output before its command: {line!r}"
    command = [line[2:]]
    while command[-1].endswith("\\") and lines:
      command.append(lines.pop(0))
    output = []
    while lines and not lines[0].startswith("$ "):
      output.append(lines.pop(0))
    entries.append(("\n".join(command), "\n".join(output)))
  return entries


def new_clone(tmp_path_factory) -> pathlib.Path:
  """A user's clone (the checkout's entries, linked) with their own data:
  my_corpus/ (one Gutenberg book), shared_corpus/ (a small copy of the shared
  corpus's tree) and DATA/finetuning_data/{rte,sst,ner} (64 examples each)."""
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
  # `python` is the interpreter running the tests (a venv need not be active),
  # a command's process forked from one that imported TensorFlow (the shim).
  env["PATH"] = os.pathsep.join([str(zygote().shim.parent), os.path.dirname(sys.executable),
                                 env.get("PATH", "")])
  env["PYTHONUNBUFFERED"] = "1"
  return env


def _children_cpu_seconds() -> float:
  """The CPU time (user and system) of the processes this one has started and
  waited for, and of those its zygote forked: a block's cost, whatever else
  the machine runs."""
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime + zygote().cpu_seconds()


def _run(where: str, kind: str, text: str, work: pathlib.Path) -> str:
  """Runs a block (or a transcript's command) as a user does; its output."""
  argv = (["bash", "-e", "-o", "pipefail", "-c", text] if kind == "bash" else
          [sys.executable, "-c", text])
  result = subprocess.run(argv, cwd=work, env=_environment(), text=True,
                          capture_output=True, timeout=1800)
  assert result.returncode == 0, (
      f"{where}: exit {result.returncode}\n{text}\n--- stdout\n{result.stdout[-3000:]}"
      f"\n--- stderr\n{result.stderr[-3000:]}")
  return result.stdout + result.stderr


def run_page(page: str, work: pathlib.Path) -> dict:
  """Runs, compares or counts as marked each fenced block of the page, in
  order, in `work`; what was done (the end-of-run summary's figures)."""
  document, examples = page_examples(page)
  report = {"ran": 0, "compared": 0, "marked": [], "cpu_seconds": []}
  before = {}  # the output of the last block that ran

  def evaluate(example) -> None:
    info, text = example.parsed
    where = f"{page}:{example.line}"
    started = _children_cpu_seconds()
    if info in RUN:
      before[page] = _run(where, info, substituted(page, text), work)
      for _, _, check in _for_block(BLOCK_CHECKS, page, text):
        check(work, before[page])
      report["ran"] += len(commands_of(text)) if info == "bash" else 1
    elif info in ("console", "text"):
      (_, _, compare, _), = _for_block(COMPARISONS, page, text)
      if info == "text":
        assert page in before, f"{where}: a quoted output with no command block before it"
        compare(text, before.pop(page))
      for command, quoted in transcript(text) if info == "console" else []:
        compare(quoted, _run(where, "bash", substituted(page, command), work))
        report["ran"] += 1
      report["compared"] += 1
    else:
      raise AssertionError(f"{where}: a ```{info} block runs nowhere: mark it with its reason")
    report["cpu_seconds"].append((round(_children_cpu_seconds() - started, 1), where))

  document.namespace["evaluate"] = evaluate
  for example in examples:
    try:
      example.evaluate()
    except unittest.SkipTest as skipped:
      report["marked"].append(f"{page}:{example.line}: {skipped}")
  return report


_CLONES: Dict[str, pathlib.Path] = {}  # page -> the clone its commands ran in (this worker)
_FAILED = set()  # the pages whose commands failed here


def first_page(page: str) -> str:
  """The page whose clone `page`'s commands start in (conftest.py keeps a
  clone's pages on one worker, in page order)."""
  return "README.md" if page in FOLLOW_README else page


def clone_for(page: str, tmp_path_factory) -> pathlib.Path:
  """A new clone, or for a page of FOLLOW_README the clone of the page before
  it, once that page's commands ran (here and now, when they have not: a page
  picked out with -k)."""
  if page not in FOLLOW_README:
    return new_clone(tmp_path_factory)
  chain = ["README.md"] + FOLLOW_README
  earlier = chain[chain.index(page) - 1]
  if earlier in _FAILED:
    pytest.fail(f"{earlier}'s commands failed, and {page} goes on in their clone")
  if earlier not in _CLONES:
    work = clone_for(earlier, tmp_path_factory)
    run_page(earlier, work)
    _CLONES[earlier] = work
  return _CLONES[earlier]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_documented_commands(page, record_property, tmp_path_factory):
  work = clone_for(page, tmp_path_factory)
  try:
    report = run_page(page, work)
  except Exception:
    _FAILED.add(page)
    raise
  _CLONES[page] = work
  record_property("documented_commands", report)


# ------------------------------------------- the harness sees every block
def indented_code(text: str) -> List[str]:
  """The lines that open an indented code block: four spaces after a blank
  line, outside fenced blocks (a list's paragraph is indented by two)."""
  found, fenced, previous = [], False, ""
  for line in text.splitlines():
    if line.lstrip().startswith("```"):
      fenced = not fenced
    elif not fenced and line.startswith("    ") and line.strip() and not previous.strip():
      found.append(line)
    previous = line
  return found


def test_every_block_is_run_compared_or_marked():
  """Every fenced block of every page runs, is compared or is marked with its
  reason; every substitution, comparison and check belongs to one block."""
  assert sorted(PAGES) == ["README.md"] + sorted(
      str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "docs").glob("*.md"))
  assert PAGES.index("README.md") == 0
  assert [page for page in PAGES if page in FOLLOW_README] == FOLLOW_README
  blocks = {page: page_blocks(page) for page in PAGES}
  used: Dict[int, List[str]] = {}
  for page, page_list in blocks.items():
    text = (REPO_ROOT / page).read_text(encoding="utf-8")
    assert not indented_code(text), (page, indented_code(text))
    for reason in re.findall(r"<!--\s*skip:\s*(.*?)-->", text):
      assert re.match(r'next\s+"[^"]{10,}"\s*$', reason), (page, reason)
    previous = None
    for line, info, block, reason in page_list:
      where = f"{page}:{line}"
      if reason:
        if reason.startswith(RUN_IN_README):
          assert any(block == other for _, _, other, mark in blocks["README.md"]
                     if not mark), (where, "not a block the README runs")
        previous = None
        continue
      assert info in RUN + ("console", "text"), f"{where}: ```{info} runs nowhere: mark it"
      for table in (COMPARISONS, BLOCK_CHECKS):
        for entry in _for_block(table, page, block):
          used.setdefault(id(entry), []).append(where)
      if info in ("console", "text"):
        assert len(_for_block(COMPARISONS, page, block)) == 1, f"{where}: how is it compared?"
      if info == "text":
        assert previous in RUN, f"{where}: quotes no command block just before it"
      previous = info
  for entry in COMPARISONS + BLOCK_CHECKS:
    assert len(used.get(id(entry), [])) == 1, (entry[:2], used.get(id(entry)))
  runnable = {page: [block for _, info, block, reason in page_list
                     if info in RUN + ("console",) and not reason]
              for page, page_list in blocks.items()}
  for where, old, _, reason in SUBSTITUTIONS:
    pages = PAGES if where == "*" else [where]
    assert any(old in block for page in pages for block in runnable[page]), (
        f"substitution {old!r} changes no block")
    assert reason



def test_the_readme_and_the_pages_that_follow_it_share_one_worker():
  """pytest-xdist's own reading of the groups conftest.py gives: the README's
  clone's pages are one unit (in page order), every other page one of its own."""
  from xdist.scheduler.loadgroup import LoadGroupScheduling  # pylint: disable=g-import-not-at-top
  from tests import conftest  # pylint: disable=g-import-not-at-top
  units: Dict[str, List[str]] = {}
  for page in PAGES:
    nodeid = f"tests/test_docs_commands.py::test_documented_commands[{page}]"
    item = types.SimpleNamespace(nodeid=nodeid, module=sys.modules[__name__],
                                 callspec=types.SimpleNamespace(params={"page": page}))
    # As an xdist worker names a grouped test: "<node id>@<group>".
    scope = LoadGroupScheduling._split_scope(None, f"{nodeid}@{conftest.scheduling_unit(item)}")  # pylint: disable=protected-access
    units.setdefault(scope, []).append(page)
  assert units.pop("tests/test_docs_commands.py::README.md") == ["README.md"] + FOLLOW_README
  assert sorted(units.values()) == sorted([page] for page in PAGES
                                          if page not in ["README.md"] + FOLLOW_README)


def test_commands_and_transcripts_are_read_as_a_shell_reads_them():
  assert commands_of("a --x \\\n  --y  # note\n# comment\nb && c\n") == ["a --x --y", "b", "c"]
  assert transcript("$ a \\\n  --b\nout 1\nout 2\n$ c\n") == [
      ("a \\\n  --b", "out 1\nout 2"), ("c", "")]
  assert indented_code("text\n\n    code\n- item\n\n    list text\n```\n\n    fenced\n```\n") == [
      "    code", "    list text"]
  assert _but_numbers("took 1.5s, 2,030 x") == r"took\ \d+(?:[.,]\d+)*s,\ \d+(?:[.,]\d+)*\ x"
  same_lines_but_numbers("a 1\nb 2.5%", "noise\na 10\nb 3.0%\n")
  with pytest.raises(AssertionError):
    same_lines_but_numbers("a 1\nb 2", "a 1\nc 2\n")
