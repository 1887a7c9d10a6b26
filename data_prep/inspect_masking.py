"""Shows the pipeline's dynamic masking of pre-training TFRecords (the command: electra_tf/commands/inspect_masking.py)."""

import os
import sys

# The checkout's own package, whether or not it is installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from electra_tf.commands import inspect_masking  # noqa: E402

if __name__ == "__main__":
  inspect_masking.run()
