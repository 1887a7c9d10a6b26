"""electra-tf: ELECTRA pre-training and fine-tuning in TensorFlow 2 / tf_keras.

Importing the package keeps TensorFlow's C++ start-up messages quiet unless
TF_CPP_MIN_LOG_LEVEL is already set: 2 (errors only) on a machine with an
NVIDIA device, 3 on one without, where the only error TensorFlow logs is its
failed probe for CUDA (`failed call to cuInit`), which is none.
"""

import glob
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2" if glob.glob("/dev/nvidia[0-9]*") else "3")
