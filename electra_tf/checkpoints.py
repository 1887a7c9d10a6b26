"""Reading and writing model weights in the project and official layouts.

Every model variable is named after its official TF1 variable, so one rule,
`official_name`, maps both ways.  Two formats are read: official TF1
name-based checkpoints (Google's released models; optimizer state ignored)
and project `tf.train.Checkpoint`s whose `model` entry (`MODEL_KEY`) is the
`ElectraPretrainer` (pre-training, `convert`), found through the names its
object graph records.  `restore_from_checkpoint` is strict (docs/
faithfulness.md, "Model, Google checkpoints and export").
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from typing import (Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple,
                    Union)

import tensorflow as tf
import tf_keras as keras
from tensorflow.core.protobuf import trackable_object_graph_pb2

from electra_tf import fileio
from electra_tf import stop_points
from electra_tf import vocabulary
from electra_tf.errors import CheckpointError, ConfigError, DataError, error_message

MODEL_KEY = "model"  # the pre-trainer's key in a project tf.train.Checkpoint
# The encoder's word embedding table, [vocab_size, embedding_size].
WORD_EMBEDDINGS = "electra/embeddings/word_embeddings"
CHECKPOINT_NAME = "model.ckpt"  # file prefix of the checkpoints convert writes
# File prefix of the training jobs' checkpoints: <dir>/ckpt-<step>.*
TRAINING_CHECKPOINT_NAME = "ckpt"
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v")  # official AdamWeightDecayOptimizer

Target = Union[keras.layers.Layer, Iterable[tf.Variable]]


class CheckpointEntry(NamedTuple):
  key: str  # the checkpoint key holding the value
  shape: List[int]


def official_name(variable: tf.Variable) -> str:
  """The official TF1 name of a model variable: its name without ':0'."""
  name = variable.name
  return name[:name.rindex(":")] if ":" in name else name


def named_variables(target: Target) -> Dict[str, tf.Variable]:
  """Official name -> variable for a Keras layer/model or a list of variables."""
  variables = target.variables if isinstance(target, keras.layers.Layer) else target
  named: Dict[str, tf.Variable] = {}
  for variable in variables:
    name = official_name(variable)
    if name in named and named[name] is not variable:
      raise CheckpointError(f"two model variables are both named {name}; build "
                            "each model eagerly and outside other name scopes")
    named[name] = variable
  return named


def resolve_checkpoint(path: str) -> str:
  """A checkpoint prefix, or a directory's latest checkpoint -> the prefix,
  read whole first (`damage`): a damaged one is a CheckpointError naming the
  newest intact one of its directory."""
  if os.path.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise CheckpointError(f"checkpoint {path}: directory holds no checkpoint "
                            "(no 'checkpoint' state file)")
  elif not tf.io.gfile.exists(path + ".index"):
    raise CheckpointError(f"checkpoint {path}: not found (no {path}.index and not "
                          "a directory)")
  else:
    latest = path
  why = damage(latest)
  if why:
    intact, _ = newest_intact(os.path.dirname(latest))
    raise CheckpointError(
        f"checkpoint {latest} is damaged ({why}); " + (
            f"the newest intact one is {intact} (name it where a checkpoint is asked for; "
            "a training rerun resumes from it and sets the damaged one aside)"
            if intact else "no intact checkpoint is beside it"))
  return latest


# What reading a damaged checkpoint raises: TensorFlow's op errors (a
# checksum mismatch, a missing file) and, for a data file cut short, the
# IndexError of its reader ("Read less bytes than requested").
_DAMAGE_ERRORS = (tf.errors.OpError, IndexError, ValueError)


def damage(prefix: str) -> Optional[str]:
  """Why the checkpoint `prefix` cannot be read whole (one line), or None:
  every tensor is read, its checksum verified."""
  try:
    reader = tf.train.load_checkpoint(prefix)
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  except _DAMAGE_ERRORS as e:
    return error_message(e)
  return None


def newest_intact(directory: str) -> Tuple[Optional[str], List[Tuple[str, str]]]:
  """(the newest checkpoint of directory's state file that reads whole or
  None, [(each newer, damaged prefix, why)])."""
  state = tf.train.get_checkpoint_state(directory)
  if state is None:
    return None, []
  prefixes = [p for p in state.all_model_checkpoint_paths if p != state.model_checkpoint_path]
  damaged = []
  for prefix in reversed(prefixes + [state.model_checkpoint_path]):
    why = damage(prefix)
    if why is None:
      return prefix, damaged
    damaged.append((prefix, why))
  return None, damaged


DAMAGED_SUFFIX = ".damaged"


def set_aside_damaged(directory: str) -> Tuple[Optional[str], List[Tuple[str, str]]]:
  """Makes the newest intact checkpoint of directory its latest: the newer,
  damaged ones' files are renamed `<file>.damaged` (kept for a look, never
  read again) and the state file rewritten without them.  Returns
  `newest_intact`'s answer; a directory of damaged checkpoints only is a
  CheckpointError."""
  intact, damaged = newest_intact(directory)
  if damaged and intact is None:
    prefix, why = damaged[0]
    raise CheckpointError(f"checkpoint {prefix} is damaged ({why}), and so is every "
                          f"older one in {directory}: move them out of it to start anew")
  if damaged:
    state = tf.train.get_checkpoint_state(directory)
    bad = {prefix for prefix, _ in damaged}
    kept = [(path, time) for path, time in zip(state.all_model_checkpoint_paths,
                                               state.all_model_checkpoint_timestamps)
            if path not in bad]
    # The state first (written atomically): a kill between the two leaves a
    # damaged file under its name, not a state naming a missing checkpoint.
    tf.compat.v1.train.update_checkpoint_state(
        directory, intact, all_model_checkpoint_paths=[path for path, _ in kept],
        all_model_checkpoint_timestamps=[time for _, time in kept],
        last_preserved_timestamp=state.last_preserved_timestamp)
    for prefix in bad:
      for path in tf.io.gfile.glob(prefix + ".*"):
        if not path.endswith(DAMAGED_SUFFIX):
          tf.io.gfile.rename(path, path + DAMAGED_SUFFIX, overwrite=True)
  return intact, damaged


def _is_optimizer_state(name: str) -> bool:
  return name == "global_step" or name.endswith(_OPTIMIZER_SUFFIXES)


def is_project_checkpoint(prefix: str) -> bool:
  """True for an object-based (tf.train.Checkpoint) checkpoint."""
  return _OBJECT_GRAPH_KEY in tf.train.load_checkpoint(prefix).get_variable_to_shape_map()


def checkpoint_entries(prefix: str) -> Dict[str, CheckpointEntry]:
  """Official name -> where its value is, for a resolved checkpoint prefix."""
  reader = tf.train.load_checkpoint(prefix)
  shapes = reader.get_variable_to_shape_map()
  if _OBJECT_GRAPH_KEY not in shapes:
    return {name: CheckpointEntry(name, list(shape))
            for name, shape in shapes.items() if not _is_optimizer_state(name)}
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
  roots = [child.node_id for child in graph.nodes[0].children
           if child.local_name == MODEL_KEY]
  if not roots:
    raise CheckpointError(f"checkpoint {prefix}: object-based checkpoint without a "
                          f"'{MODEL_KEY}' entry (expected tf.train.Checkpoint("
                          f"{MODEL_KEY}=<ElectraPretrainer>, ...))")
  entries: Dict[str, CheckpointEntry] = {}
  seen, stack = set(roots), list(roots)
  while stack:
    node = graph.nodes[stack.pop()]
    for attribute in node.attributes:
      if attribute.name != "VARIABLE_VALUE":
        continue
      previous = entries.get(attribute.full_name)
      if previous is not None and previous.key != attribute.checkpoint_key:
        raise CheckpointError(f"checkpoint {prefix}: two variables are both named "
                              f"{attribute.full_name}")
      entries[attribute.full_name] = CheckpointEntry(
          attribute.checkpoint_key, list(shapes[attribute.checkpoint_key]))
    for child in node.children:
      if child.node_id not in seen:
        seen.add(child.node_id)
        stack.append(child.node_id)
  return entries


def check_vocab(vocab_file: str, checkpoint: str, flag: str) -> None:
  """DataError unless `vocab_file` (given as `flag`) has as many entries as
  the checkpoint's word embedding table has rows (the vocab recorded beside
  it is compared token for token by the config: `config.check_same_vocab`).
  Reads only the vocab and the checkpoint's index."""
  tokens = list(vocabulary.load_vocab(vocab_file))
  prefix = resolve_checkpoint(checkpoint)
  table = checkpoint_entries(prefix).get(WORD_EMBEDDINGS)
  if table is not None and table.shape[0] != len(tokens):
    raise DataError(f"{flag} {vocab_file}: {len(tokens):,} entries, but the word embedding "
                    f"table of {prefix} ({WORD_EMBEDDINGS}) has {table.shape[0]:,} rows, "
                    "one per entry of the vocab it was trained with")


def _scope(name: str) -> str:
  return name.split("/", 1)[0]


def _first_and_count(names: Sequence[str]) -> str:
  more = f" (and {len(names) - 1} more)" if len(names) > 1 else ""
  return f"{names[0]}{more}"


def check_restorable(target: Target, path: str, allow_unused: bool = True
                     ) -> List[str]:
  """Checks from the checkpoint's index alone that
  `restore_from_checkpoint(target, path)` would succeed (same arguments,
  return value and errors)."""
  return _matched_entries(target, path, allow_unused)[3]


def _matched_entries(
    target: Target, path: str, allow_unused: bool
) -> Tuple[str, Dict[str, tf.Variable], Dict[str, CheckpointEntry], List[str]]:
  """(prefix, target variables and checkpoint entries by official name,
  unused names) once `check_restorable`'s checks pass."""
  prefix = resolve_checkpoint(path)
  variables = named_variables(target)
  entries = checkpoint_entries(prefix)
  for name, variable in variables.items():
    entry = entries.get(name)
    if entry is not None and entry.shape != variable.shape.as_list():
      raise CheckpointError(
          f"checkpoint {prefix}: variable {name} has shape {entry.shape} there but "
          f"the model expects {variable.shape.as_list()} (another architecture or "
          "other hparams?)")
  missing = sorted(set(variables) - set(entries))
  if missing:
    raise CheckpointError(f"checkpoint {prefix}: lacks model variable "
                          f"{_first_and_count(missing)}")
  scopes = {_scope(name) for name in variables}
  unmapped = sorted(name for name in entries
                    if name not in variables and _scope(name) in scopes)
  if unmapped:
    raise CheckpointError(f"checkpoint {prefix}: variable {_first_and_count(unmapped)} "
                          "has no counterpart in the model (another architecture "
                          "or other hparams?)")
  unused = sorted(name for name in entries if _scope(name) not in scopes)
  if unused and not allow_unused:
    raise CheckpointError(f"checkpoint {prefix}: variable {_first_and_count(unused)} "
                          "is not part of the model (other hparams?)")
  return prefix, variables, entries, unused


def restore_from_checkpoint(target: Target, path: str, allow_unused: bool = True
                            ) -> List[str]:
  """Loads every variable of `target` from a project or official checkpoint.

  Args:
    target: a Keras layer/model or a list of variables, named by their
      official names.
    path: a checkpoint prefix or a directory with a `checkpoint` state file.
    allow_unused: whether checkpoint variables under scopes the target does
      not have are allowed.

  Returns:
    The sorted official names of checkpoint variables left unused.

  Raises:
    CheckpointError: missing checkpoint, a target variable absent or of
      another shape, a variable under the target's scopes without a
      counterpart, or (unless allow_unused) one outside them."""
  prefix, variables, entries, unused = _matched_entries(target, path, allow_unused)
  reader = tf.train.load_checkpoint(prefix)
  for name, variable in variables.items():
    variable.assign(tf.cast(reader.get_tensor(entries[name].key), variable.dtype))
  return unused


def save_project_checkpoint(model: keras.Model, prefix: str) -> str:
  """Writes `tf.train.Checkpoint(model=model)` at `prefix`; returns the prefix."""
  return tf.train.Checkpoint(**{MODEL_KEY: model}).write(prefix)


def save_official_checkpoint(target: Target, prefix: str) -> str:
  """Writes the variables under their official names in the TF1 layout."""
  variables = named_variables(target)
  names = sorted(variables)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                    shape_and_slices=[""] * len(names),
                    tensors=[variables[name].read_value() for name in names])
  return prefix


def write_checkpoint_state(directory: str, prefix_name: str = CHECKPOINT_NAME) -> None:
  """Writes the `checkpoint` state file so `directory` resolves to `prefix_name`.

  The text-proto file tf.train.latest_checkpoint (and TF1 tools) read; the
  relative path keeps the directory movable.
  """
  with open(os.path.join(directory, "checkpoint"), "w", encoding="utf-8") as f:
    f.write(f'model_checkpoint_path: "{prefix_name}"\n'
            f'all_model_checkpoint_paths: "{prefix_name}"\n')


def holds_saved_model(directory: str) -> bool:
  """True when `directory` is a complete SavedModel (has saved_model.pb)."""
  return os.path.isfile(os.path.join(directory, "saved_model.pb"))


def check_output_dir(final_dir: str, flag: str, overwrite: bool = False) -> None:
  """Raises unless `final_dir` is absent, empty, or (`overwrite`) replaceable."""
  if os.path.exists(final_dir) and not os.path.isdir(final_dir):
    raise ConfigError(f"{flag}: {final_dir} exists and is not a directory")
  if os.path.isdir(final_dir) and os.listdir(final_dir) and not overwrite:
    raise ConfigError(f"{flag}: {final_dir} already exists and is not empty")


@contextlib.contextmanager
def atomic_output_dir(final_dir: str, flag: str, overwrite: bool = False
                      ) -> Iterator[str]:
  """Yields a temporary directory that is renamed to `final_dir` on success.

  `final_dir` may be absent or an empty directory; a non-empty one is an
  error naming `flag`, unless `overwrite` (then it is replaced only once the
  new content is complete).  On failure nothing is left under either name;
  temporaries of killed earlier writers of `final_dir` are removed first.
  """
  final_dir = os.path.abspath(final_dir)
  check_output_dir(final_dir, flag, overwrite)
  parent = os.path.dirname(final_dir)
  base = os.path.basename(final_dir)
  if os.path.isdir(parent):
    for name in os.listdir(parent):
      if name.startswith(base + ".") and fileio.is_stale_temporary(name):
        fileio.remove_path(os.path.join(parent, name))
  tmp_dir = fileio.temporary_path(final_dir)
  shutil.rmtree(tmp_dir, ignore_errors=True)
  os.makedirs(tmp_dir)
  try:
    yield tmp_dir
    if os.path.isdir(final_dir):
      old_dir = f"{final_dir}.old-{os.getpid()}"
      os.rename(final_dir, old_dir)
      os.rename(tmp_dir, final_dir)
      shutil.rmtree(old_dir)
    else:
      os.rename(tmp_dir, final_dir)
  finally:
    shutil.rmtree(tmp_dir, ignore_errors=True)


# ------------------------------------------------------ crash-safe saving
# What a checkpoint save killed midway leaves: TensorFlow writes
# `<prefix>_temp/` shards and `*.tempstate<n>` files, merges them into
# `<prefix>.index` / `<prefix>.data-*`, then replaces the `checkpoint` state
# file through `checkpoint.tmp<hex>`.  Only files the state names are a
# checkpoint; anything else of the managed prefix is debris.
_TF_TEMPORARY = re.compile(r"^(?:.+_temp|.+\.tempstate\d+|checkpoint\.tmp[0-9a-f]{32})$")


def training_step(prefix: str) -> Optional[int]:
  """The step of a training job's checkpoint prefix (CheckpointManager's
  <dir>/ckpt-<step>); None for another checkpoint."""
  match = re.fullmatch(rf"{TRAINING_CHECKPOINT_NAME}-(\d+)", os.path.basename(prefix))
  return int(match.group(1)) if match else None


def _checkpoint_file(checkpoint_name: str) -> "re.Pattern[str]":
  return re.compile(rf"^(?P<prefix>{re.escape(checkpoint_name)}-\d+)"
                    r"\.(?:index|data-\d{5}-of-\d{5})$")


def remove_interrupted_writes(directory: str,
                              checkpoint_name: str = TRAINING_CHECKPOINT_NAME
                              ) -> List[str]:
  """Removes what killed saves and writes left under `directory` (recursive):
  TensorFlow's checkpoint temporaries, checkpoint files the state file does
  not list, and `.tmp-<pid>` / `.old-<pid>` of dead processes.  Returns the
  removed paths."""
  removed: List[str] = []
  if not os.path.isdir(directory):
    return removed
  pattern = _checkpoint_file(checkpoint_name)
  for root, dirs, files in os.walk(directory):
    state = tf.train.get_checkpoint_state(root)
    listed = {os.path.basename(path) for path in state.all_model_checkpoint_paths
              } if state else set()
    listed |= {os.path.basename(state.model_checkpoint_path)} if state else set()
    doomed = [name for name in dirs + files
              if _TF_TEMPORARY.match(name) or fileio.is_stale_temporary(name)]
    doomed += [name for name in files if pattern.match(name)
               and pattern.match(name).group("prefix") not in listed]
    for name in sorted(set(doomed)):
      fileio.remove_path(os.path.join(root, name))
      removed.append(os.path.join(root, name))
    dirs[:] = [name for name in dirs if name not in doomed]
  return removed


def training_checkpoint_manager(checkpoint: tf.train.Checkpoint, directory: str,
                                max_to_keep: int, step_counter: tf.Variable
                                ) -> tf.train.CheckpointManager:
  """The manager of a training job's `ckpt-<step>` checkpoints."""
  return tf.train.CheckpointManager(
      checkpoint, directory, max_to_keep=max_to_keep,
      checkpoint_name=TRAINING_CHECKPOINT_NAME, step_counter=step_counter)


def save_checkpoint(manager: tf.train.CheckpointManager, step: int) -> str:
  """`manager.save(step)`; a failed write (full disk, unwritable directory)
  removes its debris and becomes a one-line CheckpointError naming the
  checkpoint that stays the latest."""
  # The callback runs once the checkpoint's files are complete, before the
  # state file names them: the moment a kill test stops the job at.
  options = tf.train.CheckpointOptions(experimental_write_callbacks=[
      lambda: stop_points.reached("checkpoint_written")])
  try:
    return manager.save(checkpoint_number=step, options=options)
  except (tf.errors.OpError, OSError) as e:
    reason = (e.message if isinstance(e, tf.errors.OpError) else str(e)).splitlines()[0]
    try:
      remove_interrupted_writes(manager.directory)
    except OSError:
      pass
    latest = tf.train.latest_checkpoint(manager.directory)
    raise CheckpointError(
        f"could not save the step {step} checkpoint in {manager.directory}: "
        f"{reason}; {latest or 'no earlier checkpoint'} "
        f"{'is intact and stays the latest' if latest else 'exists'}") from e
