"""The project's commands, one module each (run by `run_*.py`, `data_prep/*.py`,
`python -m electra_tf.NAME`, `python -m tools.NAME` and the console scripts).

Importing this package sets TF_USE_LEGACY_KERAS=1 for the command's process
(unless the environment sets it), before TensorFlow loads: the library builds
its models with tf_keras (Keras 2), and without the variable `import
tensorflow` also loads Keras 3, a third of its start-up (about 4 of 12
CPU-seconds, 2-core AMD EPYC, 2026-11-27). Importing the library itself
leaves the variable alone, so a user's own process keeps the tf.keras it has.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
