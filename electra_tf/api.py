"""ELECTRA in a user's own Keras code: the package's public Python API.

  encoder = electra_tf.load_encoder(source)        # ElectraEncoder, a tf_keras Model
  tokenizer = electra_tf.load_tokenizer(source)    # Tokenizer: texts -> its input dict
  generator = electra_tf.load_generator(source)    # ElectraGenerator (masked-LM logits)
  pretrainer = electra_tf.load_pretrainer(source)  # the whole ElectraPretrainer
  optimizer = electra_tf.create_optimizer(num_train_steps, encoder)  # official AdamW

A `source` is what the commands read: a project checkpoint (model_dir,
`convert --from_hf` output, fine-tuning trial_<n>/, prefix), an official TF1
checkpoint (with `hparams`, and `vocab_file` when no vocab.txt lies beside
it) or transformers folders.  A source that is no checkpoint, does not fit
the architecture or lacks the part asked for is one UserError line naming
it.  docs/python_api.md.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Union

import tensorflow as tf
import tf_keras as keras

from electra_tf import checkpoint_conversion
from electra_tf import checkpoints
from electra_tf import config as config_lib
from electra_tf import hf
from electra_tf import optimization
from electra_tf import text_graph
from electra_tf import tokenization
from electra_tf.config import ModelConfig
from electra_tf.errors import CheckpointError, ConfigError
from electra_tf.modeling.encoder import TransformerEncoder, build_discriminator_encoder
from electra_tf.modeling.pretrainer import ElectraPretrainer, MaskedLMHead
from electra_tf.pretrain.config import PretrainingConfig
from electra_tf.pretrain.model import build_model
from electra_tf.saved_model import INPUT_NAMES

Source = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]
Hparams = Union[None, str, Mapping[str, Any]]


# ------------------------------------------------------------------ sources
class _Source(NamedTuple):
  """What a source gives: the config of its model, where its weights are,
  and its vocab."""
  name: str  # the source, for messages
  config: PretrainingConfig
  prefix: Optional[str]  # a checkpoint's prefix; None for transformers folders
  imported: Optional[checkpoint_conversion.HfImport]  # transformers folders, read
  vocab: Optional[Union[str, List[str]]]  # a vocab file or the pieces; None: unknown


def _hf_folders(source: Source) -> Optional[List[str]]:
  """The transformers folders a source names (hf.PARTS subfolders of a
  folder that holds them), or None for a checkpoint."""
  if not isinstance(source, (str, os.PathLike)):
    return [os.fspath(folder) for folder in source]
  path = os.fspath(source)
  if os.path.isfile(os.path.join(path, "config.json")):
    return [path]
  parts = [os.path.join(path, part) for part in hf.PARTS
           if os.path.isfile(os.path.join(path, part, "config.json"))]
  return parts or None


def _resolve(source: Source, hparams: Hparams, vocab_file: Optional[str] = None,
             **overrides: Any) -> _Source:
  """The source's config (its record completed by `hparams` and `overrides`,
  as the commands' --hparams: a contradiction is an error naming both)."""
  user = config_lib.parse_hparams(hparams, "hparams") if isinstance(hparams, str) else dict(
      hparams or {})
  user.update(overrides)
  folders = _hf_folders(source)
  if folders is not None:
    imported = checkpoint_conversion.read_hf(folders)
    recorded = {key: value for key, value in imported.hparams.items()
                if key in config_lib.RECORDED_KEYS}
    given = {**{key: value for key, value in imported.hparams.items() if key not in recorded},
             **user}
    config = PretrainingConfig.create(config_lib.with_recorded(given, recorded, folders[0]))
    return _Source(folders[0], config, None, imported, imported.vocab)
  path = os.fspath(source)
  prefix = checkpoints.resolve_checkpoint(path)  # read whole: a damaged one is one line
  vocab_file = vocab_file or config_lib.recorded_vocab(path)
  config = PretrainingConfig.create(user, checkpoint=path, vocab_file=vocab_file)
  return _Source(path, config, prefix, None, vocab_file)


# ------------------------------------------------------------------ models
def _model_inputs() -> Dict[str, tf.Tensor]:
  """Keras inputs of the model's input dict: int32 [batch, seq] each."""
  return {name: keras.Input(shape=(None,), dtype=tf.int32, name=name) for name in INPUT_NAMES}


@keras.utils.register_keras_serializable(package="electra_tf")
class ElectraEncoder(keras.Model):
  """The discriminator encoder (official `BertModel`, scope `electra`) as a
  Keras model of the input dict.

  `encoder(inputs, training=...)`: {"input_ids", "input_mask",
  "segment_ids"} int32 [B, S] -> {"sequence_output": float32 [B, S, H],
  "pooled_output": [B, H] (the [CLS] vector, no pooler, as official)}.
  `encoder.input`: that dict of Keras inputs; `encoder.config`: ModelConfig."""

  def __init__(self, encoder: TransformerEncoder, name: str = "electra_encoder",
               **kwargs: Any):
    inputs = _model_inputs()
    outputs = encoder(*(inputs[key] for key in INPUT_NAMES))
    super().__init__(inputs=inputs, outputs={key: outputs[key] for key in (
        "sequence_output", "pooled_output")}, name=name, **kwargs)
    self.encoder = encoder

  @property
  def config(self) -> ModelConfig:
    return self.encoder.config

  def get_config(self) -> Dict[str, Any]:
    return {"name": self.name, "trainable": self.trainable,
            "encoder": keras.layers.serialize(self.encoder)}

  @classmethod
  def from_config(cls, config: Dict[str, Any], custom_objects=None):
    config = dict(config)
    return cls(keras.layers.deserialize(config.pop("encoder"), custom_objects), **config)


@keras.utils.register_keras_serializable(package="electra_tf")
class ElectraGenerator(keras.Model):
  """The generator (encoder and tied `generator_predictions` head) as a Keras
  model: `generator(inputs)` -> {"sequence_output": float32 [B, S, Hg],
  "logits": float32 [B, S, V]}."""

  def __init__(self, encoder: TransformerEncoder, head: MaskedLMHead,
               name: str = "electra_generator", **kwargs: Any):
    inputs = _model_inputs()
    sequence_output = encoder(*(inputs[key] for key in INPUT_NAMES))["sequence_output"]
    super().__init__(inputs=inputs, outputs={"sequence_output": sequence_output,
                                             "logits": head(sequence_output)},
                     name=name, **kwargs)
    self.encoder = encoder
    self.head = head

  @property
  def config(self) -> ModelConfig:
    return self.encoder.config

  def get_config(self) -> Dict[str, Any]:
    """The head is recorded by its settings: rebuilt, it shares the rebuilt
    encoder's embeddings, as here."""
    return {"name": self.name, "trainable": self.trainable,
            "encoder": keras.layers.serialize(self.encoder),
            "hidden_act": self.head.hidden_act,
            "initializer_range": self.head.initializer_range}

  @classmethod
  def from_config(cls, config: Dict[str, Any], custom_objects=None):
    config = dict(config)
    encoder = keras.layers.deserialize(config.pop("encoder"), custom_objects)
    head = MaskedLMHead(encoder.embeddings, config.pop("hidden_act"),
                        config.pop("initializer_range"))
    return cls(encoder, head, **config)


def load_encoder(source: Source, hparams: Hparams = None) -> ElectraEncoder:
  """The discriminator encoder of `source`, with its weights; `hparams`: a
  dict, JSON object or .json file of official hparams, as --hparams."""
  resolved = _resolve(source, hparams)
  if resolved.imported is not None:
    return ElectraEncoder(resolved.imported.model.discriminator)
  config = resolved.config
  encoder = build_discriminator_encoder(config.encoder_config(),
                                        config.effective_embedding_size)
  checkpoints.restore_from_checkpoint(encoder, resolved.prefix)
  return ElectraEncoder(encoder)


def _pretrainer(resolved: _Source) -> ElectraPretrainer:
  """The pre-trainer of a resolved source, with its weights (strictly)."""
  if resolved.imported is not None:
    model = resolved.imported.model
    if len(resolved.imported.loaded) < len(checkpoints.named_variables(model)):
      raise CheckpointError(f"{resolved.name}: a discriminator alone, without the generator "
                            "the pre-trainer needs; give the (discriminator, generator) "
                            "folders, or read it with load_encoder")
    return model
  vocab = _vocab(resolved)
  special_ids = tokenization.special_ids(vocab, resolved.name) if vocab else None
  model = build_model(resolved.config, special_ids)
  if model.objective.needs_special_ids and special_ids is None:
    raise ConfigError(f"vocab_file: the {model.objective.name} objective needs the vocab's "
                      f"special ids and no vocab.txt lies beside {resolved.name}")
  head = next((layer for layer in (model.generator_predictions, model.cloze_predictions)
               if layer is not None), None)
  if head is not None and not any(name.startswith(head.name + "/") for name in
                                  checkpoints.checkpoint_entries(resolved.prefix)):
    raise CheckpointError(f"{resolved.name}: holds no generator (no {head.name}/ variables): "
                          "a discriminator alone, which load_encoder reads")
  checkpoints.restore_from_checkpoint(model, resolved.prefix)
  return model


def load_pretrainer(source: Source, hparams: Hparams = None,
                    vocab_file: Optional[str] = None) -> ElectraPretrainer:
  """The whole pre-trainer of `source` (`pretrainer(masked_batch,
  training=...)`), with its weights; vocab_file: when no vocab.txt lies
  beside the checkpoint and the objective needs its special ids."""
  return _pretrainer(_resolve(source, hparams, vocab_file))


def load_generator(source: Source, hparams: Hparams = None) -> ElectraGenerator:
  """The one-tower generator of `source` with its masked-LM head and weights
  (it shares the discriminator's embeddings, as in pre-training)."""
  resolved = _resolve(source, hparams)
  pretrainer = _pretrainer(resolved)
  if pretrainer.generator is None:
    raise ConfigError(f"{resolved.name}: the {pretrainer.objective.name} objective has no "
                      "one-tower generator (uniform_generator or a two-tower generator); "
                      "load_pretrainer reads it")
  return ElectraGenerator(pretrainer.generator, pretrainer.generator_predictions)


# --------------------------------------------------------------- tokenizer
def _vocab(resolved: _Source) -> Optional[Dict[str, int]]:
  if isinstance(resolved.vocab, list):
    return {token: i for i, token in enumerate(resolved.vocab)}
  return tokenization.load_vocab(resolved.vocab) if resolved.vocab else None


class Tokenizer(tf.Module):
  """A model's WordPiece tokenizer and packer: texts -> the model's input dict.

  `tokenizer(text_a, text_b=None)`: str, list of str or tf.string [] / [B],
  eager or traced -> {"input_ids", "input_mask", "segment_ids"} int32 [S] or
  [B, S], S = max_seq_length: the fine-tuning featurizer's ids
  (`[CLS] A [SEP] (B [SEP])`, the longer text cut first, zero-padded).

  Args:
    vocab: a vocab file (one word piece a line) or the pieces in id order.
    do_lower_case: lower-case (and strip accents), as the model was trained.
    max_seq_length: the length S of every row."""

  def __init__(self, vocab: Union[str, Sequence[str]], do_lower_case: bool = True,
               max_seq_length: int = 128):
    super().__init__(name="electra_tokenizer")
    if max_seq_length < 3:
      raise ConfigError(f"max_seq_length: {max_seq_length} leaves no room for a text "
                        "([CLS] and [SEP] take 2, a pair 3)")
    named = isinstance(vocab, (str, os.PathLike))
    pieces = (tokenization.load_vocab(vocab) if named
              else {token: i for i, token in enumerate(vocab)})
    self.do_lower_case = do_lower_case
    self.max_seq_length = max_seq_length
    self.vocab_size = len(pieces)
    full = tokenization.FullTokenizer(os.fspath(vocab) if named else "the vocab",
                                      do_lower_case, vocab=pieces)
    # The vocab file of the ids table, kept while the tokenizer lives.
    self._scratch = tempfile.TemporaryDirectory(prefix="electra_tf_vocab_")
    self._encoder = text_graph.TextEncoder(full, self._scratch.name)

  def __call__(self, text_a, text_b=None) -> Dict[str, tf.Tensor]:
    text_a = tf.convert_to_tensor(text_a, tf.string)
    text_b = None if text_b is None else tf.convert_to_tensor(text_b, tf.string)
    if text_b is not None:
      text_b = text_graph.check_same_batch(text_b, "text_b", text_a, "text_a")
    single = text_a.shape.rank == 0
    if single:
      text_a = text_a[tf.newaxis]
      text_b = None if text_b is None else text_b[tf.newaxis]
    packed = self._encoder.pack(text_a, text_b, self.max_seq_length, self.max_seq_length)
    shape = [self.max_seq_length] if single else [None, self.max_seq_length]
    return {name: tf.ensure_shape(packed[name][0] if single else packed[name], shape)
            for name in INPUT_NAMES}


def load_tokenizer(source: Source, hparams: Hparams = None, vocab_file: Optional[str] = None,
                   max_seq_length: Optional[int] = None) -> Tokenizer:
  """The tokenizer of `source`'s model (vocab and casing from its record),
  rows of max_seq_length (default: the hparam's); vocab_file: when no
  vocab.txt lies beside a checkpoint."""
  overrides = {} if max_seq_length is None else {"max_seq_length": max_seq_length}
  resolved = _resolve(source, hparams, vocab_file, **overrides)
  vocab = _vocab(resolved)
  if vocab is None:
    raise ConfigError(f"vocab_file: no vocab.txt lies beside {resolved.name}; give the "
                      "model's vocab file")
  tokenization.check_vocab_size(vocab, resolved.config.vocab_size,
                                resolved.vocab if isinstance(resolved.vocab, str)
                                else resolved.name)
  tokenization.special_ids(vocab, resolved.name)
  return Tokenizer(resolved.vocab, resolved.config.do_lower_case,
                   resolved.config.max_seq_length)


# --------------------------------------------------------------- optimizer
def create_optimizer(num_train_steps: int, encoder: Optional[ElectraEncoder] = None, *,
                     learning_rate: float = 1e-4, warmup_proportion: float = 0.1,
                     weight_decay_rate: float = 0.01,
                     layerwise_lr_decay: Optional[float] = 0.8,
                     lr_decay_power: float = 1.0) -> keras.optimizers.Optimizer:
  """The official fine-tuning optimizer (optimization.AdamWeightDecay and its
  schedule: warm-up over num_train_steps * warmup_proportion, polynomial
  decay to 0), for `model.compile` or a custom loop.  With `encoder`,
  layer-wise rates (embeddings learning_rate * decay^(L + 2), layer i
  decay^(L + 1 - i), other variables learning_rate); with
  layerwise_lr_decay None every variable learns at learning_rate."""
  if layerwise_lr_decay and encoder is None:
    raise ConfigError("create_optimizer: layerwise_lr_decay needs the encoder (its number "
                      "of layers); give encoder, or layerwise_lr_decay=None")
  if not 0.0 <= warmup_proportion <= 1.0:
    raise ConfigError(f"warmup_proportion: {warmup_proportion} is outside [0, 1]")
  return optimization.create_optimizer(
      learning_rate=learning_rate, num_train_steps=num_train_steps,
      num_warmup_steps=num_train_steps * warmup_proportion,
      weight_decay_rate=weight_decay_rate, lr_decay_power=lr_decay_power,
      layerwise_lr_decay=layerwise_lr_decay or None,
      n_transformer_layers=None if encoder is None else encoder.config.num_hidden_layers,
      unmatched_as_head=True)
