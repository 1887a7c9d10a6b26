"""electra-tf: ELECTRA pre-training and fine-tuning in TensorFlow 2 / tf_keras.

Importing the package keeps TensorFlow's C++ start-up messages quiet
(TF_CPP_MIN_LOG_LEVEL=2) unless the variable is already set.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
