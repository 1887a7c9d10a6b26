"""The ELECTRA / BERT Transformer encoder (official `modeling.BertModel`).

Every variable carries its official TF1 name (`electra/encoder/layer_0/
attention/self/query/kernel`, ...); an encoder builds its variables when
constructed, so construct it eagerly and outside any name scope.  Attention
softmax and LayerNorm statistics are float32 under any dtype policy.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, Optional

import tensorflow as tf
import tf_keras as keras

from electra_tf.config import LAYER_NORM_EPSILON, ModelConfig
from electra_tf.errors import ConfigError
from electra_tf.modeling import dropout

# Added to attention scores of masked-out keys (official value, not -inf).
ATTENTION_MASK_ADDER = -10000.0


@tf.custom_gradient
def gelu(x: tf.Tensor):
  """Exact Gaussian error linear unit, x * Phi(x) (the erf form, not tanh),
  with its gradient Phi(x) + x * phi(x) written out (docs/performance.md)."""
  cdf = 0.5 * (1.0 + tf.math.erf(x / tf.cast(tf.sqrt(2.0), x.dtype)))

  def grad(upstream: tf.Tensor) -> tf.Tensor:
    pdf = tf.exp(-0.5 * tf.square(x)) * tf.cast(1.0 / math.sqrt(2.0 * math.pi), x.dtype)
    return upstream * (cdf + x * pdf)

  return x * cdf, grad


_ACTIVATIONS: Dict[str, Optional[Callable[[tf.Tensor], tf.Tensor]]] = {
    "gelu": gelu, "relu": tf.nn.relu, "tanh": tf.tanh, "linear": None}


def get_activation(name: str) -> Optional[Callable[[tf.Tensor], tf.Tensor]]:
  """The activation named by `hidden_act` (official `get_activation`)."""
  key = (name or "linear").lower()
  if key not in _ACTIVATIONS:
    raise ConfigError(f"hparam model_hparam_overrides: hidden_act {name!r} is not "
                      f"one of {', '.join(_ACTIVATIONS)}")
  return _ACTIVATIONS[key]


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
  """Official `create_initializer`: normal(0, stddev) truncated at 2 stddev;
  a fresh instance per variable (an unseeded instance repeats its values)."""
  return keras.initializers.TruncatedNormal(stddev=stddev)


@tf.custom_gradient
def _layer_norm_last_axis(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor,
                          epsilon: tf.Tensor):
  """LayerNorm of x [..., D] over D; gamma and beta [D]; float32 scalar epsilon.

  Forward op for op the official one (bit-identical); gradient in closed
  form, dx = inv_std * (g - mean(g) - x_hat * mean(g * x_hat)), g = dy * gamma."""
  mean, variance = tf.nn.moments(x, [-1], keepdims=True)  # [..., 1] each
  output = tf.nn.batch_normalization(x, mean, variance, beta, gamma, epsilon)

  def grad(upstream: tf.Tensor):
    inv_std = tf.math.rsqrt(variance + epsilon)
    normalized = (x - mean) * inv_std  # x_hat
    scaled = upstream * gamma  # g
    dx = inv_std * (scaled - tf.reduce_mean(scaled, -1, keepdims=True)
                    - normalized * tf.reduce_mean(scaled * normalized, -1, keepdims=True))
    batch_axes = list(range(x.shape.rank - 1))
    return (dx, tf.reduce_sum(upstream * normalized, batch_axes),
            tf.reduce_sum(upstream, batch_axes), None)

  return output, grad


def _from_model_config(cls: type, config: Dict[str, Any]) -> keras.layers.Layer:
  """`cls` rebuilt from a `get_config` whose "config" is a ModelConfig dict."""
  config = dict(config)
  return cls(ModelConfig.from_dict(config.pop("config")), **config)


@keras.utils.register_keras_serializable(package="electra_tf")
class LayerNorm(keras.layers.LayerNormalization):
  """Official LayerNorm over the last axis (epsilon 1e-12, gamma and beta):
  Keras' layer computing `_layer_norm_last_axis` (Keras' fused kernel needs
  epsilon >= 1.001e-5)."""

  def __init__(self, name: str = "LayerNorm", **kwargs: Any):
    kwargs.setdefault("epsilon", LAYER_NORM_EPSILON)
    super().__init__(name=name, **kwargs)

  def build(self, input_shape: Any) -> None:
    super().build(input_shape)
    if self.axis != [len(input_shape) - 1]:
      raise ValueError(f"{self.name}: normalizes the last axis only, not {self.axis}")

  def call(self, inputs: tf.Tensor) -> tf.Tensor:
    inputs = tf.cast(inputs, self.compute_dtype)
    output = _layer_norm_last_axis(tf.cast(inputs, tf.float32),
                                   tf.cast(self.gamma, tf.float32),
                                   tf.cast(self.beta, tf.float32),
                                   tf.constant(self.epsilon, tf.float32))
    return tf.cast(output, inputs.dtype)


@keras.utils.register_keras_serializable(package="electra_tf")
class EmbeddingLayer(keras.layers.Layer):
  """Word + token-type + position embeddings and their LayerNorm (official
  `<scope>/embeddings`); a generator and discriminator share one instance."""

  def __init__(self, vocab_size: int, embedding_size: int, type_vocab_size: int,
               max_position_embeddings: int, initializer_range: float,
               name: str = "embeddings", **kwargs: Any):
    super().__init__(name=name, **kwargs)
    self.vocab_size = vocab_size
    self.embedding_size = embedding_size
    self.type_vocab_size = type_vocab_size
    self.max_position_embeddings = max_position_embeddings
    self.initializer_range = initializer_range
    self.layer_norm = LayerNorm()

  def build(self, input_shape: Any) -> None:
    self.word_embeddings = self.add_weight(
        "word_embeddings", shape=[self.vocab_size, self.embedding_size],
        initializer=truncated_normal(self.initializer_range))
    self.token_type_embeddings = self.add_weight(
        "token_type_embeddings", shape=[self.type_vocab_size, self.embedding_size],
        initializer=truncated_normal(self.initializer_range))
    self.position_embeddings = self.add_weight(
        "position_embeddings",
        shape=[self.max_position_embeddings, self.embedding_size],
        initializer=truncated_normal(self.initializer_range))
    super().build(input_shape)

  def get_config(self) -> Dict[str, Any]:
    return {**super().get_config(), "vocab_size": self.vocab_size,
            "embedding_size": self.embedding_size,
            "type_vocab_size": self.type_vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "initializer_range": self.initializer_range}

  def call(self, input_ids: Optional[tf.Tensor], segment_ids: tf.Tensor,
           word_embeddings: Optional[tf.Tensor] = None) -> tf.Tensor:
    """[B, S] ids -> [B, S, E] LayerNorm(word + token type + position).

    `word_embeddings` [B, S, E] replaces the lookup of `input_ids` (official
    BertModel `input_embeddings`); the other embeddings are still added.
    """
    seq_length = tf.shape(segment_ids)[1]
    if word_embeddings is None:
      output = tf.gather(self.word_embeddings, input_ids)
    else:
      output = tf.cast(word_embeddings, self.compute_dtype)
    # Token types by a one-hot matmul, as official (for any device): the
    # table's gradient is then a dense tensor, as in the official graph.  A
    # gather's gradient is an IndexedSlices with one row per token, whose
    # duplicate rows a global-norm clip would not sum (see
    # optimization.clip_by_global_norm, which densifies what is left).
    token_types = tf.one_hot(segment_ids, self.type_vocab_size, dtype=output.dtype)
    output += tf.einsum("bst,te->bse", token_types,
                        tf.cast(self.token_type_embeddings, output.dtype))
    # A slice: its gradient is dense, as the official tf.slice's.
    output += self.position_embeddings[tf.newaxis, :seq_length]
    return self.layer_norm(output)


@keras.utils.register_keras_serializable(package="electra_tf")
class TransformerLayer(keras.layers.Layer):
  """One post-LayerNorm Transformer block (official `transformer_model` body).

  Variables, under this layer's name `layer_<i>`:
    attention/self/{query,key,value}/{kernel,bias}
    attention/output/dense/{kernel,bias}, attention/output/LayerNorm/{gamma,beta}
    intermediate/dense/{kernel,bias}
    output/dense/{kernel,bias}, output/LayerNorm/{gamma,beta}
  """

  def __init__(self, config: ModelConfig, name: str, **kwargs: Any):
    super().__init__(name=name, **kwargs)
    self.config = config
    self.num_heads = config.num_attention_heads
    self.head_size = config.hidden_size // config.num_attention_heads
    hidden = config.hidden_size

    def dense(units: int, name: str, activation=None) -> keras.layers.Dense:
      return keras.layers.Dense(
          units, activation=activation, name=name,
          kernel_initializer=truncated_normal(config.initializer_range))

    self.query = dense(hidden, "query")
    self.key = dense(hidden, "key")
    self.value = dense(hidden, "value")
    self.attention_dropout = dropout.Dropout(config.attention_probs_dropout_prob)
    self.attention_output = dense(hidden, "dense")
    self.attention_layer_norm = LayerNorm()
    self.intermediate = dense(config.intermediate_size, "dense",
                              get_activation(config.hidden_act))
    self.output_dense = dense(hidden, "dense")
    self.output_layer_norm = LayerNorm()
    self.hidden_dropout = dropout.Dropout(config.hidden_dropout_prob)

  def get_config(self) -> Dict[str, Any]:
    return {**super().get_config(), "config": self.config.to_dict()}

  @classmethod
  def from_config(cls, config: Dict[str, Any]):
    return _from_model_config(cls, config)

  def _split_heads(self, x: tf.Tensor) -> tf.Tensor:
    """[B, S, H] -> [B, heads, S, head_size]."""
    batch, seq = tf.shape(x)[0], tf.shape(x)[1]
    x = tf.reshape(x, [batch, seq, self.num_heads, self.head_size])
    return tf.transpose(x, [0, 2, 1, 3])

  def call(self, hidden: tf.Tensor, attention_adder: tf.Tensor,
           training: Optional[bool] = None):
    """hidden [B, S, H], attention_adder [B, 1, 1, S] or, for a causal
    encoder, [B, 1, S, S] (0 or -10000; query positions along axis 2).

    Returns (layer output [B, S, H], attention probabilities [B, heads, S, S]).
    """
    # The name scopes give the variables their official names.
    with tf.name_scope("attention"):
      with tf.name_scope("self"):
        query = self._split_heads(self.query(hidden))
        key = self._split_heads(self.key(hidden))
        value = self._split_heads(self.value(hidden))
      scores = tf.matmul(query, key, transpose_b=True)
      scores = tf.cast(scores, tf.float32) * (1.0 / math.sqrt(float(self.head_size)))
      probs = tf.nn.softmax(scores + attention_adder)
      dropped = self.attention_dropout(tf.cast(probs, value.dtype), training=training)
      context = tf.transpose(tf.matmul(dropped, value), [0, 2, 1, 3])
      context = tf.reshape(context, tf.shape(hidden))
      with tf.name_scope("output"):
        attention_output = self.attention_output(context)
        attention_output = self.attention_layer_norm(
            self.hidden_dropout(attention_output, training=training) + hidden)
    with tf.name_scope("intermediate"):
      intermediate = self.intermediate(attention_output)
    with tf.name_scope("output"):
      output = self.output_dense(intermediate)
      output = self.output_layer_norm(
          self.hidden_dropout(output, training=training) + attention_output)
    return output, probs


@keras.utils.register_keras_serializable(package="electra_tf")
class TransformerEncoder(keras.layers.Layer):
  """Official `BertModel`: embeddings, optional projection, Transformer stack.

  Args:
    config: the model's `ModelConfig`.
    embedding_size: width E of its embedding tables (hidden size when None);
      ignored when `embeddings` is given.
    embeddings: an `EmbeddingLayer` shared with another encoder.
    name: the variable scope (`electra`, `generator`, `generator_ltr`, ...).
    ltr, rtl: causal self-attention to the positions before (ltr) or after
      (rtl) each one; at most one.

  `encoder(input_ids, input_mask, segment_ids, training=..., input_embeddings=
  None, input_reprs=None)`, int32 [B, S].  `input_embeddings` [B, S, E]
  replaces the word lookup, `input_reprs` [B, S, E or H] the whole embedding
  block.  Returns embeddings [B, S, E], embedding_output [B, S, H],
  encoder_outputs and attention_probs (per layer [B, S, H] / [B, heads, S,
  S]), sequence_output [B, S, H], pooled_output [B, H] (the [CLS] vector)."""

  def __init__(self, config: ModelConfig, embedding_size: Optional[int] = None,
               embeddings: Optional[EmbeddingLayer] = None, name: str = "electra",
               ltr: bool = False, rtl: bool = False, **kwargs: Any):
    super().__init__(name=name, **kwargs)
    if ltr and rtl:
      raise ValueError("TransformerEncoder: at most one of ltr / rtl")
    self.config = config
    self.ltr = ltr
    self.rtl = rtl
    if embeddings is None:
      embeddings = EmbeddingLayer(
          config.vocab_size, embedding_size or config.hidden_size,
          config.type_vocab_size, config.max_position_embeddings,
          config.initializer_range)
    self.embeddings = embeddings
    self.embedding_dropout = dropout.Dropout(config.hidden_dropout_prob)
    # Official rule: a projection exists exactly when the widths differ; it
    # is a plain tf.layers.dense, hence Glorot-uniform initialised.
    self.embeddings_project = (
        keras.layers.Dense(config.hidden_size, name="embeddings_project")
        if embeddings.embedding_size != config.hidden_size else None)
    self.transformer_layers = [TransformerLayer(config, name=f"layer_{i}")
                               for i in range(config.num_hidden_layers)]
    self.recompute = False  # set by `recompute_layers`
    # Build now, at the top of the name-scope stack, so that the variables get
    # their official names whoever calls the encoder first.
    ids = tf.zeros([1, 1], tf.int32)
    self(ids, tf.ones_like(ids), ids)

  def get_config(self) -> Dict[str, Any]:
    """A shared `embeddings` layer is recorded by its width only: an encoder
    rebuilt from this config owns its embedding tables."""
    return {**super().get_config(), "config": self.config.to_dict(),
            "embedding_size": self.embeddings.embedding_size,
            "ltr": self.ltr, "rtl": self.rtl}

  @classmethod
  def from_config(cls, config: Dict[str, Any]):
    return _from_model_config(cls, config)

  @property
  def embedding_table(self) -> tf.Variable:
    """The word-embedding table [V, E] (the MLM output projection uses it)."""
    return self.embeddings.word_embeddings

  def call(self, input_ids: Optional[tf.Tensor], input_mask: tf.Tensor,
           segment_ids: tf.Tensor, training: Optional[bool] = None,
           input_embeddings: Optional[tf.Tensor] = None,
           input_reprs: Optional[tf.Tensor] = None) -> Dict[str, Any]:
    if input_reprs is None:
      embedded = self.embeddings(input_ids, segment_ids, input_embeddings)
      hidden = self.embedding_dropout(embedded, training=training)
    else:
      embedded = hidden = tf.cast(input_reprs, self.compute_dtype)
    # Official rule, per input: project what is not already H wide.
    if self.embeddings_project is not None and hidden.shape[-1] != self.config.hidden_size:
      hidden = self.embeddings_project(hidden)
    embedding_output = hidden
    # Keys where input_mask is 0 get -10000 before the softmax; every query
    # position attends (official create_attention_mask_from_input_mask).
    if self.ltr or self.rtl:
      # Official causal masking: the input mask times a triangular [S, S]
      # mask (lower for ltr, upper for rtl), then the same adder.
      seq_length = tf.shape(input_mask)[1]
      causal = tf.linalg.band_part(tf.ones([seq_length, seq_length]),
                                   -1 if self.ltr else 0, 0 if self.ltr else -1)
      allowed = tf.cast(input_mask, tf.float32)[:, tf.newaxis, tf.newaxis, :] * causal
      attention_adder = (1.0 - allowed) * ATTENTION_MASK_ADDER
    else:
      attention_adder = (1.0 - tf.cast(input_mask, tf.float32)) * ATTENTION_MASK_ADDER
      attention_adder = attention_adder[:, tf.newaxis, tf.newaxis, :]
    encoder_outputs, attention_probs = [], []
    with tf.name_scope("encoder"):
      for layer in self.transformer_layers:
        if self.recompute and training:
          hidden, probs = _recomputed(layer, hidden, attention_adder)
        else:
          hidden, probs = layer(hidden, attention_adder, training=training)
        encoder_outputs.append(hidden)
        attention_probs.append(probs)
    return {
        "embeddings": embedded,
        "embedding_output": embedding_output,
        "encoder_outputs": encoder_outputs,
        "attention_probs": attention_probs,
        "sequence_output": hidden,
        "pooled_output": hidden[:, 0],
    }


def _recomputed(layer: TransformerLayer, hidden: tf.Tensor, attention_adder: tf.Tensor):
  """`layer` in training under tf.recompute_grad: (hidden [B, S, H], probs);
  the backward pass runs the layer again with the same dropout masks."""
  forward = dropout.replayable(
      lambda x, adder: tuple(layer(x, adder, training=True)))
  return tf.recompute_grad(forward)(hidden, attention_adder)


def recompute_layers(model: keras.layers.Layer) -> None:
  """Recomputes, in training, every TransformerLayer of every encoder in
  `model` (the `recompute_layers` hparam); the outputs and gradients are
  the plain ones (tests/test_big_batches.py)."""
  for layer in [model] + list(model.submodules):
    if isinstance(layer, TransformerEncoder):
      layer.recompute = True


def build_discriminator_encoder(model_config: ModelConfig,
                                embedding_size: Optional[int] = None
                                ) -> TransformerEncoder:
  """The discriminator encoder alone (scope `electra`), for fine-tuning and
  export, from a job config's `encoder_config()` and
  `effective_embedding_size`."""
  return TransformerEncoder(model_config, embedding_size=embedding_size,
                            name="electra")
