"""The code cells of Jupyter notebooks (``.ipynb``), as code blocks placed in the notebook file.

TPU work often starts in a Kaggle or Colab notebook. A notebook is nbformat JSON; each
code cell becomes one :class:`~xla_lint.source.CodeBlock` and the cells are linted like
a Markdown page's blocks (one program, names shared between cells, no fixes).

Positions are lines of the ``.ipynb`` file itself: Jupyter, Colab, Kaggle and nbformat
write a cell's source as a JSON list with one string per line, each on its own line of
the file, so a cell's line *k* is the file line holding its *k*-th string, and columns
are the cell's columns plus that string's indentation and opening quote (a character
written escaped in the file, such as ``\\"``, moves later columns on its line to the
right). A cell stored otherwise (one string, or JSON without line breaks) has its lines
counted from the file line of its first string (from the top of the file when the text
holds no line break there), and its columns from the cell.

IPython syntax is masked line for line, so the rest of a cell still parses: a line
magic (``%time x``), shell escape (``!pip install``) or help request (``?x``) becomes
``pass``; a cell magic whose body is Python (``%%time``, ``%%writefile train.py``, ...)
loses only its first line; cells of other cell magics (``%%bash``) are not Python and
are left out.
"""

from __future__ import annotations

import bisect
import json
import re

from .source import CodeBlock, SourceError, split_lines

#: Cell magics whose body is Python code.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "writefile", "file", "prun", "debug",
                                "python", "python3", "pypy", "tensorflow_version"})

_SHELL_OR_MAGIC = re.compile(r"^(?P<indent>[ \t]*)(?:%|!|\?)")


def notebook_blocks(text: str) -> list[CodeBlock]:
    """The code cells of the notebook JSON ``text``, each with IPython syntax masked.

    Returns [] for a notebook whose kernel is not Python. Raises :class:`SourceError`
    (1-based line and column) when ``text`` is not JSON or holds no list of cells.
    """
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"not a notebook: invalid JSON ({exc.msg})", exc.lineno, exc.colno) from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise SourceError("not a notebook: no list of `cells` (nbformat 4)")
    if _language(notebook) not in ("", "python"):
        return []
    strings = _string_lines(text)
    where: dict[str, list[int]] = {}  # string value -> its indexes in ``strings``, ascending
    for index, (_, _, value) in enumerate(strings):
        where.setdefault(value, []).append(index)
    blocks: list[CodeBlock] = []
    after = 0  # index in ``strings`` past the last cell placed
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        pieces = source if isinstance(source, list) else [source]
        if not pieces or not all(isinstance(p, str) for p in pieces):
            continue
        code = _mask("".join(pieces))
        if code is None or not code.strip():
            continue
        found = _find(strings, where, pieces, after)
        line_offset = indent = 0  # not found in the text (JSON without line breaks): from the top
        if found is not None:
            index, exact = found
            line, column, _ = strings[index]
            after = index + (len(pieces) if exact else 1)
            line_offset, indent = line - 1, (column if exact else 0)
        blocks.append(CodeBlock(code if code.endswith("\n") else code + "\n", line_offset, indent))
    return blocks


def _language(notebook: dict) -> str:
    metadata = notebook.get("metadata")
    if not isinstance(metadata, dict):
        return ""
    for key in ("language_info", "kernelspec"):
        info = metadata.get(key)
        if isinstance(info, dict) and isinstance(info.get("name" if key == "language_info" else "language"), str):
            return info["name" if key == "language_info" else "language"].lower()
    return ""


def _mask(code: str) -> str | None:
    """``code`` with IPython syntax replaced line for line; None for a cell that is not Python."""
    lines = split_lines(code)
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].lstrip()[2:].split(None, 1)
        if not magic or magic[0] not in PYTHON_CELL_MAGICS:
            return None
        lines[0] = "\n"
    out = []
    for line in lines:
        m = _SHELL_OR_MAGIC.match(line)
        if m:
            end = line[len(line.rstrip("\r\n")):]
            line = f"{m.group('indent')}pass{end}"
        out.append(line)
    return "".join(out)


def _string_lines(text: str) -> list[tuple[int, int, str]]:
    """``(line, column, value)`` of each line of ``text`` that holds a JSON string value and
    nothing else but an optional ``"key":`` before it and a comma after it. ``line`` is
    1-based; ``column`` is where the value's text starts (after its opening quote)."""
    out = []
    for number, raw in enumerate(split_lines(text), start=1):
        line = raw.rstrip("\r\n")
        body = line.rstrip().removesuffix(",")
        start = len(line) - len(line.lstrip())
        if body.lstrip().startswith('"source":'):
            start = body.index(":", body.index('"source"') + 8) + 1
            start += len(body[start:]) - len(body[start:].lstrip())
        if not body.endswith('"') or body[start:start + 1] != '"':
            continue
        try:
            value = json.loads(body[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(value, str):
            out.append((number, start + 1, value))
    return out


def _find(strings: list[tuple[int, int, str]], where: dict[str, list[int]], pieces: list[str],
          after: int) -> tuple[int, bool] | None:
    """Where in ``strings`` (at or after index ``after``) the cell ``pieces`` start: the index,
    and whether they stand there one per line (see :func:`_one_per_line`); the first such
    place, else the first string equal to the first piece; None when there is none.
    ``where`` maps each string value to its indexes in ``strings``."""
    indexes = where.get(pieces[0], [])
    candidates = indexes[bisect.bisect_left(indexes, after):]
    for index in candidates:
        if _one_per_line(strings, index, pieces):
            return index, True
    return (candidates[0], False) if candidates else None


def _one_per_line(strings: list[tuple[int, int, str]], index: int, pieces: list[str]) -> bool:
    """True when ``pieces`` are the lines of the cell, one per line of the file on consecutive
    lines from ``strings[index]`` on, at one indentation: then the cell's line *k* is the
    file's line ``strings[index + k - 1]``."""
    if index + len(pieces) > len(strings):
        return False
    line, column, _ = strings[index]
    last = len(pieces) - 1
    for k, piece in enumerate(pieces):
        at_line, at_column, value = strings[index + k]
        if value != piece or at_line != line + k or at_column != column:
            return False
        inner = piece[:-2] if piece.endswith("\r\n") else piece[:-1] if piece.endswith(("\n", "\r")) else piece
        if "\n" in inner or "\r" in inner or (k < last and inner == piece):
            return False
    return True
