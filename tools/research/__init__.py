"""The learning study's research tools (docs/learning.md), apart from the product: run each
as `python -m tools.research.NAME` from the repository root."""
