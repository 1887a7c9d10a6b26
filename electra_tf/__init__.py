"""electra-tf: ELECTRA pre-training and fine-tuning in TensorFlow 2 / tf_keras.

The public Python API (api.py, docs/python_api.md) loads on first use, so
`import electra_tf` alone imports no TensorFlow.  TF_CPP_MIN_LOG_LEVEL
defaults to 2 with an NVIDIA device, 3 without (TensorFlow's only error
there is its failed CUDA probe).
"""

import glob
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2" if glob.glob("/dev/nvidia[0-9]*") else "3")

__all__ = ["load_encoder", "load_generator", "load_pretrainer", "load_tokenizer",
           "create_optimizer", "Tokenizer", "ElectraEncoder", "ElectraGenerator"]


def __getattr__(name: str):
  """The API's names, from electra_tf.api on first use."""
  if name in __all__:
    from electra_tf import api  # pylint: disable=g-import-not-at-top
    return getattr(api, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(__all__))
