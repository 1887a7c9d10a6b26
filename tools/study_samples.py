"""The training samples of the learning study's fine-tuning settings.

Both tools/learning_study.py (which fine-tunes on them) and
tools/learning_analysis.py (which fits the trivial baselines on them) cut a
task's training file here, so that the two see the same examples.
"""


def head_examples(text: str, task: str, count: int) -> str:
  """The first `count` examples of a task's training file text (a header stays):
  chunking's sentences end at a blank line; SST-2 and the other GLUE files have
  a header line, CoLA's has none."""
  if task == "chunk":
    sentences = text.strip("\n").split("\n\n")
    return "\n\n".join(sentences[:count]) + "\n\n"
  lines = text.splitlines(keepends=True)
  header = 0 if task == "cola" else 1
  return "".join(lines[:header + count])
