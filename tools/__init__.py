"""Command-line tools beside the library: run each as `python -m tools.NAME` from the repository root."""
