"""The library's shape: what its files hold (docs/layout.md)."""

import ast
import pathlib

LIBRARY = pathlib.Path(__file__).resolve().parent.parent / "electra_tf"
MAX_DOCSTRING_SHARE = 0.15  # issue 51: docstrings state contracts, reasoning goes to docs/


def docstring_lines(tree: ast.Module) -> int:
  """Lines of the module's, its classes' and its functions' docstrings."""
  lines = 0
  for node in ast.walk(tree):
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
      first = node.body[0] if node.body else None
      if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
          and isinstance(first.value.value, str)):
        lines += first.end_lineno - first.lineno + 1
  return lines


def test_docstrings_are_at_most_15_percent_of_the_library():
  docstrings = total = 0
  for path in sorted(LIBRARY.rglob("*.py")):
    source = path.read_text(encoding="utf-8")
    docstrings += docstring_lines(ast.parse(source))
    total += len(source.splitlines())
  assert total > 10000  # the whole library was read
  assert docstrings / total <= MAX_DOCSTRING_SHARE, (
      f"docstrings are {docstrings} of {total} lines ({docstrings / total:.1%}): "
      "move reasoning to docs/")
