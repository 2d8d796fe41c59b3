"""Sources: bytes to text to Python blocks, before any parse (no LibCST in this folder).

- ``text``: reading files safely (regular files only, bounded), decoding as Python does, line
  ends, CPython's own parse and nesting checks, the deep stack LibCST needs.
- ``target``: a file to lint and the suffixes that say what kind of source it is.
- ``prefilter``: the cheap text test that keeps files no rule can concern from being parsed.
- ``blocks``: Python code blocks of Markdown and reST documents and ``>>>`` sessions;
  ``notebooks``: the code cells of ``.ipynb`` notebooks; ``documents``: which reader a file takes;
  ``docstrings``: the ``>>>`` examples of a Python file's docstrings.
- ``suppress``: ``# noqa`` and file-level suppressions, read from the text.

Imports point down only: this folder imports nothing of xla_lint outside itself but the records.
"""
