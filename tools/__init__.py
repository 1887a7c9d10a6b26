"""Command-line tools beside the library: run each as `python -m tools.NAME` from the repository root."""

# The commands' process settings, before any tool loads TensorFlow.
import electra_tf.commands  # noqa: F401  pylint: disable=unused-import
