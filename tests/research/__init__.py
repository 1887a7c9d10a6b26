"""The research tools' tests (tools/research/)."""
