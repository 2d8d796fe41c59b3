"""The ``>>>`` examples in the docstrings of a Python file, found with CPython's ``ast`` and placed
on the file's lines. How they are linted (with the module's globals, without program facts) is
:func:`xla_lint.linter.lint_docstrings`.
"""

from __future__ import annotations

import ast

from .blocks import CodeBlock, doctest_blocks


def docstring_blocks(text: str) -> list[list[CodeBlock]]:
    """The ``>>>`` blocks of every module, class and function docstring, one list per docstring,
    as written (:func:`xla_lint.linter.docstring_examples` blanks the examples that do not parse).

    Returns [] when the text has no ``>>>`` or Python's own parser rejects it.
    """
    if ">>>" not in text:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = text.splitlines()
    out: list[list[CodeBlock]] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if not body or not isinstance(body[0], ast.Expr):
            continue
        value = body[0].value
        if (
            not (isinstance(value, ast.Constant) and isinstance(value.value, str))
            or ">>>" not in value.value
        ):
            continue
        # The raw source lines (not the evaluated string, whose escapes would shift lines).
        first, last = value.lineno, value.end_lineno or value.lineno
        raw = "\n".join(lines[first - 1 : last])
        blocks = doctest_blocks(raw, first - 1)
        if blocks:
            out.append(blocks)
    return out
