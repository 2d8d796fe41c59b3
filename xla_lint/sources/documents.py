"""Which reader gives the Python blocks of a document: Markdown, reST or a notebook, by suffix."""

from __future__ import annotations

from collections.abc import Sequence

from .blocks import CodeBlock, markdown_blocks, rst_blocks


def code_blocks(path: str, text: str) -> Sequence[CodeBlock]:
    """Python blocks of a ``.md``/``.markdown`` or ``.rst`` document, or the code cells of a
    ``.ipynb`` notebook (empty for other suffixes).

    Raises :class:`SourceError` for a notebook that is not nbformat 4 JSON, and
    :class:`xla_lint.sources.notebooks.NotPython` for one whose kernel is not Python.
    """
    lower = path.lower()
    if lower.endswith(".ipynb"):
        from .notebooks import notebook_blocks

        return notebook_blocks(text)
    if lower.endswith((".md", ".markdown")):
        return markdown_blocks(text)
    if lower.endswith(".rst"):
        return rst_blocks(text)
    return []
