"""Bad-input catalogue: each case runs a user-facing entry point on one bad
input and checks that it stops with a one-line `<program>: error: ...` naming
the file, flag or hparam and what is wrong, a non-zero exit status, no
traceback, and no output written or overwritten.

Sentinel outputs (a model_dir, an output_dir, an output_file that already
exist) must come out byte-identical with no new file in them; outputs that did
not exist must still not exist.  The SavedModel cases load the exports
in-process and check the serving function's InvalidArgumentError.
"""

import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from tests.test_training import REPO, TINY_HPARAMS, _env, _pretrain_args, _run
from tests.test_training import tiny_data  # noqa: F401  (fixture)

SPECIAL = ("[PAD]", "[CLS]", "[SEP]", "[MASK]")


def _error_line(result, program):
  """The one-line error of a failed command (the last non-empty stderr line)."""
  assert result.returncode != 0, result.stdout[-2000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  lines = [line for line in result.stderr.splitlines() if line.strip()]
  assert lines and lines[-1].startswith(f"{program}: error: "), result.stderr[-3000:]
  return lines[-1]


def _snapshot(root):
  """{relative path: bytes (None for a directory)} of everything under root."""
  root = pathlib.Path(root)
  if not root.exists():
    return None
  return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
          for p in root.rglob("*")}


def _sentinel_dir(path):
  """An existing output directory holding one file, to prove nothing is written."""
  path.mkdir(parents=True)
  (path / "sentinel.txt").write_text("an earlier run's output\n")
  return path


def _check(result, program, *parts, untouched=()):
  """The error line holds every part; each path in `untouched` is unchanged."""
  line = _error_line(result, program)
  for part in parts:
    assert str(part) in line, line
  for path, before in untouched:
    assert _snapshot(path) == before, f"{path} was written"
  return line


# ------------------------------------------------------------ pre-training
def _records(data):
  return f"--pretrain_tfrecords={data / 'pretrain_tfrecords' / 'pretrain_data.tfrecord*'}"


def _vocab_without_specials(data, tmp_path):
  path = tmp_path / "vocab.txt"
  lines = (data / "vocab.txt").read_text(encoding="utf-8").splitlines()
  path.write_text("".join(t + "\n" for t in lines if t not in SPECIAL), encoding="utf-8")
  return path, len(lines) - len(SPECIAL)


def _write_records(path, features):
  import tensorflow as tf
  with tf.io.TFRecordWriter(str(path)) as writer:
    example = tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        for name, values in features.items()}))
    writer.write(example.SerializeToString())


def _truncated_copy(data, tmp_path):
  """A copy of the TFRecords whose LAST file is cut in the middle of a record."""
  copy = tmp_path / "records"
  shutil.copytree(data / "pretrain_tfrecords", copy)
  last = sorted(copy.glob("pretrain_data.tfrecord*"))[-1]
  content = last.read_bytes()
  last.write_bytes(content[:len(content) // 2 + 7])
  return copy, last


def _pretraining_case(case, data, tmp_path):
  """(flags, hparams, parts of the expected error line) of a case."""
  if case == "missing_vocab":
    vocab = tmp_path / "no_such_vocab.txt"
    return ([_records(data), f"--vocab_file={vocab}"], {},
            [f"vocab file {vocab}: does not exist"])
  if case == "empty_vocab":
    vocab = tmp_path / "empty_vocab.txt"
    vocab.write_bytes(b"")
    return ([_records(data), f"--vocab_file={vocab}"], {},
            [f"vocab file {vocab}: is empty"])
  if case == "vocab_without_specials":
    vocab, size = _vocab_without_specials(data, tmp_path)
    return ([_records(data), f"--vocab_file={vocab}"], {"vocab_size": size},
            [f"vocab file {vocab}: missing special token(s) [PAD], [CLS], [SEP], [MASK]"])
  if case == "vocab_size_mismatch":
    return ([_records(data), f"--vocab_file={data / 'vocab.txt'}"], {"vocab_size": 30000},
            ["hparam vocab_size: 30000 differs from the 30522 entries of",
             str(data / "vocab.txt")])
  if case == "other_max_seq_length":
    return ([_records(data), f"--vocab_file={data / 'vocab.txt'}"], {"max_seq_length": 64},
            ["records have length 32 but max_seq_length is 64"])
  if case == "missing_feature":
    path = tmp_path / "no_segments.tfrecord"
    _write_records(path, {"input_ids": [101] + [0] * 31, "input_mask": [1] + [0] * 31})
    return ([f"--pretrain_tfrecords={path}", f"--vocab_file={data / 'vocab.txt'}"], {},
            [f"TFRecord file {path}: missing int64 feature(s) segment_ids"])
  if case == "truncated_tfrecord":
    copy, last = _truncated_copy(data, tmp_path)
    return ([f"--pretrain_tfrecords={copy / '*'}", f"--vocab_file={data / 'vocab.txt'}"],
            {}, [f"TFRecord file {last}: truncated record at byte offset"])
  if case == "glob_matches_nothing":
    pattern = tmp_path / "nowhere" / "*.tfrecord"
    return ([f"--pretrain_tfrecords={pattern}", f"--vocab_file={data / 'vocab.txt'}"], {},
            [f"pretrain_tfrecords: pattern {pattern} matches no file"])
  raise AssertionError(case)


@pytest.mark.parametrize("case", [
    "missing_vocab",  # 1
    "empty_vocab",  # 2
    "vocab_without_specials",  # 3
    "vocab_size_mismatch",  # 4
    "other_max_seq_length",  # 8
    "missing_feature",  # 9
    "truncated_tfrecord",  # 10
    "glob_matches_nothing",  # 11
])
@pytest.mark.slow
def test_pretraining_bad_data(case, tiny_data, tmp_path):  # noqa: F811
  model_dir = _sentinel_dir(tmp_path / "model")
  export_dir = tmp_path / "export"
  flags, hparams, parts = _pretraining_case(case, tiny_data, tmp_path)
  before = _snapshot(model_dir)
  result = _run(["run_pretraining.py", f"--model_dir={model_dir}",
                 f"--export_dir={export_dir}",
                 "--hparams=" + json.dumps({**TINY_HPARAMS, **hparams}), *flags])
  _check(result, "run_pretraining.py", *parts,
         untouched=[(model_dir, before), (export_dir, None)])


@pytest.mark.slow
def test_pretraining_data_dir_without_records(tiny_data, tmp_path):  # noqa: F811
  """11: --data_dir whose pretrain_tfrecords/ glob matches nothing."""
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  shutil.copy(tiny_data / "vocab.txt", data_dir / "vocab.txt")
  before = _snapshot(data_dir)
  result = _run(["run_pretraining.py", f"--data_dir={data_dir}",
                 "--hparams=" + json.dumps(TINY_HPARAMS)])
  pattern = data_dir / "pretrain_tfrecords" / "pretrain_data.tfrecord*"
  _check(result, "run_pretraining.py", f"pattern {pattern} matches no file",
         untouched=[(data_dir, before)])


@pytest.mark.parametrize("extra, parts", [
    # 12 unknown key, 13 ill-typed value, 14 invalid JSON
    (['--hparams={"learnin_rate": 0.1}'], ["Unknown hparam 'learnin_rate'"]),
    (['--hparams={"learning_rate": "fast"}'],
     ["hparam learning_rate: expected float, got str 'fast'"]),
    (['--hparams={"learning_rate": 0.1'], ["--hparams: invalid JSON"]),
    # 15 model_size, as a flag and as an hparam
    (["--model_size=huge"], ["flag --model_size=huge: value should be one of"]),
    (['--hparams={"model_size": "huge"}'],
     ["hparam model_size: 'huge' is not one of small, base, large"]),
    # 16 mask_prob outside (0, 1)
    (['--hparams={"mask_prob": 0}'], ["hparam mask_prob: 0 is outside (0, 1)"]),
    (['--hparams={"mask_prob": 1}'], ["hparam mask_prob: 1 is outside (0, 1)"]),
    (['--hparams={"mask_prob": -0.1}'], ["hparam mask_prob: -0.1 is outside (0, 1)"]),
    (['--hparams={"mask_prob": 1.5}'], ["hparam mask_prob: 1.5 is outside (0, 1)"]),
])
def test_pretraining_bad_flags_and_hparams(extra, parts, tmp_path):
  model_dir = _sentinel_dir(tmp_path / "model")
  before = _snapshot(model_dir)
  # Refused before TensorFlow loads: the interpreter starts in 0.2 CPU-s, a
  # worker's zygote in 3 (the fast tier starts none).
  result = _run(["run_pretraining.py", f"--pretrain_tfrecords={tmp_path / '*.tfrecord'}",
                 f"--model_dir={model_dir}", *extra], python=sys.executable)
  _check(result, "run_pretraining.py", *parts, untouched=[(model_dir, before)])


def test_demo_with_bad_hparams_writes_nothing(tmp_path):
  """12/16 on the embedded default: no demo data is built for a run that fails."""
  for hparams, part in [('{"mask_prob": 2}', "hparam mask_prob: 2 is outside (0, 1)"),
                        ('{"max_seq_lenght": 64}', "Unknown hparam 'max_seq_lenght'")]:
    result = subprocess.run([sys.executable, str(REPO / "run_pretraining.py"),
                             f"--hparams={hparams}"], cwd=tmp_path, env=_env(),
                            text=True, capture_output=True, timeout=300)
    _check(result, "run_pretraining.py", part)
    assert list(tmp_path.iterdir()) == []  # no ./electra_demo


def _pretrainer_checkpoint(hparams, directory) -> str:
  """Saves a freshly initialised pre-training model of `hparams`; its prefix."""
  import tensorflow as tf
  from electra_tf.pretrain.config import PretrainingConfig
  from electra_tf.pretrain.model import build_model
  model = build_model(PretrainingConfig.create(hparams))
  return tf.train.Checkpoint(model=model).save(str(directory / "ckpt"))


@pytest.mark.slow
def test_init_checkpoint_of_another_architecture(tiny_data, tmp_path):  # noqa: F811
  """17: a hidden-size-32 checkpoint given to a hidden-size-64 run."""
  prefix = _pretrainer_checkpoint(TINY_HPARAMS, tmp_path / "other")
  model_dir = tmp_path / "model"
  wider = {"model_hparam_overrides": {"hidden_size": 64, "num_hidden_layers": 1}}
  result = _run(_pretrain_args(tiny_data, model_dir, wider,
                               extra=[f"--init_checkpoint={prefix}"]))
  _check(result, "run_pretraining.py", f"checkpoint {prefix}", "there but the model expects")
  assert not model_dir.exists()  # refused before model_dir is created


# ------------------------------------------------------- data preparation
def _corpus_case(case, tmp_path):
  """(corpus_dir, parts of the expected error line) of a case."""
  corpus = tmp_path / "corpus"
  if case == "missing":
    return corpus, [f"--corpus_dir {corpus}: does not exist"]
  corpus.mkdir()
  if case == "empty_dir":
    return corpus, [f"--corpus_dir {corpus}: contains no files"]
  if case == "only_empty_files":
    (corpus / "blank.txt").write_text("\n\n")
    return corpus, ["corpus: no text in the 1 corpus file(s)"]
  if case == "invalid_utf8":
    path = corpus / "image.png"
    path.write_bytes(b"A first line.\nA second one.\n\x89PNG\r\n\x1a\n\x00\xff\xfe\n")
    return corpus, [f"corpus file {path}: line 3 is not valid UTF-8",
                    "at byte offset 28", "--skip_invalid_utf8"]
  raise AssertionError(case)


@pytest.mark.parametrize("case, output_exists", [
    ("missing", True),  # 5
    ("empty_dir", True),  # 6
    ("only_empty_files", False),  # 6: files, but no text
    ("invalid_utf8", False),  # 7
])
@pytest.mark.slow
def test_build_tfrecords_bad_corpus(case, output_exists, bert_vocab, tmp_path):
  corpus, parts = _corpus_case(case, tmp_path)
  output_dir = tmp_path / "out"
  if output_exists:
    _sentinel_dir(output_dir)
    (output_dir / "pretrain_data.tfrecord-0-of-1").write_bytes(b"earlier records")
  before = _snapshot(output_dir)
  result = _run(["data_prep/build_tfrecords.py", f"--corpus_dir={corpus}",
                 f"--vocab_file={bert_vocab}", f"--output_dir={output_dir}",
                 "--num_out_files=2", "--max_seq_length=32"])
  _check(result, "build_tfrecords.py", *parts, untouched=[(output_dir, before)])


# ------------------------------------------------------------- fine-tuning
def _head(src, dst, n_lines):
  dst.parent.mkdir(parents=True, exist_ok=True)
  lines = src.read_text(encoding="utf-8").splitlines()[:n_lines]
  dst.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return lines


def _finetuning_case(case, data_dir, shared):
  """Writes the task's files under data_dir; returns (task, error parts)."""
  if case in ("missing_column", "unknown_label"):
    rte = data_dir / "finetuning_data" / "rte"
    dev_lines = _head(shared / "rte" / "dev.tsv", rte / "dev.tsv", 6)
    train_lines = _head(shared / "rte" / "train.tsv", rte / "train.tsv", 8)
    # a short row stops on dev (a short train row is skipped, as official)
    name, lines = (("dev.tsv", dev_lines) if case == "missing_column"
                   else ("train.tsv", train_lines))
    fields = lines[3].split("\t")
    if case == "missing_column":
      lines[3] = "\t".join(fields[:2])
      parts = [f"{rte / name}:4: expected at least", "columns, found 2"]
    else:
      lines[3] = "\t".join(fields[:-1] + ["maybe"])
      parts = [f"{rte / name}:4: label 'maybe' is not one of"]
    (rte / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return "rte", parts
  squad = data_dir / "finetuning_data" / "squadv1"
  squad.mkdir(parents=True)
  dataset = json.loads((shared / "squadv1" / "dev.json").read_text(encoding="utf-8"))
  article = dict(dataset["data"][0], paragraphs=dataset["data"][0]["paragraphs"][:1])
  small = {"data": [article], "version": "1.1"}
  (squad / "dev.json").write_text(json.dumps(small), encoding="utf-8")
  qa = article["paragraphs"][0]["qas"][1]
  answers = qa.pop("answers")
  (squad / "train.json").write_text(json.dumps(small), encoding="utf-8")
  if case == "squad_without_answers":
    return "squadv1", [f"{squad / 'train.json'}: data[0].paragraphs[0].qas[1]",
                       f"('{qa['id']}') has no answer"]
  (squad / "dev.json").write_text(json.dumps(small), encoding="utf-8")
  qa["answers"] = answers
  (squad / "train.json").write_text(json.dumps(small), encoding="utf-8")
  return "squadv1", [f"{squad / 'dev.json'}: data[0].paragraphs[0].qas[1]",
                     f"('{qa['id']}') has no 'answers' list (dev is scored against it)"]


@pytest.mark.parametrize("case", [
    "missing_column",  # 18
    "unknown_label",  # 19
    "squad_without_answers",  # 20: train
    "squad_dev_without_answers",  # 20: dev
])
@pytest.mark.slow
def test_finetuning_bad_data(case, finetuning_data_dir, bert_vocab, tmp_path):
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  shutil.copy(bert_vocab, data_dir / "vocab.txt")
  task, parts = _finetuning_case(case, data_dir, finetuning_data_dir)
  model_dir = _sentinel_dir(tmp_path / "model")
  before = {path: _snapshot(path) for path in (data_dir, model_dir)}
  hparams = {"model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 1},
             "embedding_size": 16, "max_seq_length": 64, "max_query_length": 16,
             "doc_stride": 32}
  export = ([f"--export_dir={tmp_path / 'export'}"] if task == "rte" else [])
  result = _run(["run_finetuning.py", f"--data_dir={data_dir}", f"--task_names={task}",
                 f"--model_dir={model_dir}", f"--hparams={json.dumps(hparams)}",
                 "--init_checkpoint=none", *export])
  _check(result, "run_finetuning.py", *parts,
         untouched=[*before.items(), (tmp_path / "export", None)])


@pytest.mark.slow
def test_finetuning_init_checkpoint_of_another_architecture(  # noqa: F811
    finetuning_data_dir, bert_vocab, tmp_path):
  """17 for fine-tuning: a hidden-size-32 encoder given to a hidden-size-64 run."""
  narrow = {"model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 1},
            "embedding_size": 16, "max_seq_length": 64}
  prefix = _pretrainer_checkpoint(narrow, tmp_path / "other")
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  shutil.copy(bert_vocab, data_dir / "vocab.txt")
  rte = data_dir / "finetuning_data" / "rte"
  for split in ("train", "dev"):
    _head(finetuning_data_dir / "rte" / f"{split}.tsv", rte / f"{split}.tsv", 8)
  model_dir = tmp_path / "model"
  wider = dict(narrow, model_hparam_overrides={"hidden_size": 64, "num_hidden_layers": 1})
  result = _run(["run_finetuning.py", f"--data_dir={data_dir}", "--task_names=rte",
                 f"--model_dir={model_dir}", f"--init_checkpoint={prefix}",
                 f"--hparams={json.dumps(wider)}"])
  _check(result, "run_finetuning.py", f"checkpoint {prefix}", "there but the model expects")
  assert not model_dir.exists()  # refused before model_dir is created


# ---------------------------------------------------------- SavedModels
SERVING_VOCAB = 30


@pytest.fixture(scope="module")
def serving_functions(tmp_path_factory):
  """serving_default of a pre-training export and of an RTE fine-tuning export."""
  import tensorflow as tf
  from electra_tf import saved_model
  from electra_tf import tokenization
  from electra_tf.pretrain.config import PretrainingConfig
  from electra_tf.finetune import task_saved_model
  from electra_tf.finetune import task_builder
  from electra_tf.finetune.config import FinetuningConfig
  from electra_tf.finetune.model import FinetuningModel
  from electra_tf.pretrain.model import build_model
  root = tmp_path_factory.mktemp("serving")
  vocab = list(tokenization.SPECIAL_TOKENS) + [
      f"word{i}" for i in range(SERVING_VOCAB - len(tokenization.SPECIAL_TOKENS))]
  (root / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
  arch = {"model_hparam_overrides": {"hidden_size": 16, "num_hidden_layers": 1},
          "embedding_size": 8, "vocab_size": SERVING_VOCAB, "max_seq_length": 16}
  pretrainer = build_model(PretrainingConfig.create(arch))
  saved_model.export_saved_model(pretrainer, str(root / "pretraining"))
  config = FinetuningConfig.create(arch, task_names=["rte"], data_dir=str(root),
                                   model_dir=str(root / "model"))
  tokenizer = tokenization.FullTokenizer(str(root / "vocab.txt"))
  tasks = task_builder.get_tasks(config, tokenizer)
  task_saved_model.export_task_model(FinetuningModel(config, tasks), tasks[0],
                                     str(root / "rte"))
  return {name: tf.saved_model.load(str(root / name)).signatures["serving_default"]
          for name in ("pretraining", "rte")}


@pytest.mark.parametrize("export_name", ["pretraining", "rte"])
@pytest.mark.parametrize("change, message", [
    ({"input_mask": [[1, 1, 1, 1, 1]]}, "input_mask: shape differs from the shape of input_ids"),
    ({"segment_ids": [[0, 0, 0, 1, 1, 1, 1]]},
     "segment_ids: shape differs from the shape of input_ids"),
    ({"input_ids": [[2, 5, -1, 6, 7, 3]]}, "input_ids: holds a negative id"),
    ({"input_ids": [[2, 5, SERVING_VOCAB, 6, 7, 3]]},
     f"input_ids: holds an id >= vocab_size {SERVING_VOCAB}"),
    ({"segment_ids": [[0, 0, 0, 1, 2, 1]]}, "segment_ids: holds an id >= type_vocab_size 2"),
    ({"segment_ids": [[0, 0, 0, -1, 1, 1]]}, "segment_ids: holds a negative id"),
])
@pytest.mark.slow
def test_serving_rejects_bad_inputs(serving_functions, export_name, change, message):
  """21: mismatched shapes and out-of-range ids fail the call with a clear message."""
  import tensorflow as tf
  inputs = {"input_ids": [[2, 5, 8, 6, 7, 3]], "input_mask": [[1] * 6],
            "segment_ids": [[0, 0, 0, 1, 1, 1]], **change}
  serve = serving_functions[export_name]
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    serve(**{key: tf.constant(value, tf.int32) for key, value in inputs.items()})
  assert f"assertion failed: [{message}" in error.value.message, error.value.message
