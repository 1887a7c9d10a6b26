"""Shared pytest fixtures: the repository root and the ../shared data folder.

Tests that need ../shared skip with a clear reason when it is absent, except
under CI (CI=true), where its absence is a failure.
"""

import os
import pathlib

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_DIR = pathlib.Path(os.environ.get("ELECTRA_TF_SHARED", REPO_ROOT.parent / "shared"))


def _require(path: pathlib.Path) -> pathlib.Path:
  if not path.exists():
    message = f"{path} is absent (the ../shared folder beside the checkout holds it)"
    if os.environ.get("CI", "").lower() == "true":
      pytest.fail(message + "; CI=true requires it")
    pytest.skip(message)
  return path


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
  return REPO_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
  return _require(SHARED_DIR)


@pytest.fixture(scope="session")
def bert_vocab(shared_dir) -> pathlib.Path:
  return _require(shared_dir / "data" / "vocab" / "bert_uncased_vocab.txt")


@pytest.fixture(scope="session")
def corpus_dir(shared_dir) -> pathlib.Path:
  return _require(shared_dir / "data" / "corpus")


@pytest.fixture(scope="session")
def finetuning_data_dir(shared_dir) -> pathlib.Path:
  return _require(shared_dir / "data" / "finetuning_data")


@pytest.fixture(scope="session")
def official_debug_fixture(shared_dir) -> pathlib.Path:
  return _require(shared_dir / "fixtures" / "official_debug")


@pytest.fixture(scope="session")
def official_optimizer_fixture(shared_dir) -> pathlib.Path:
  return _require(shared_dir / "fixtures" / "official_optimizer")
