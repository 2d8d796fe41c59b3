"""The code cells of Jupyter notebooks (``.ipynb``), as code blocks placed in the notebook file.

TPU work often starts in a Kaggle or Colab notebook. A notebook is nbformat JSON; each
code cell becomes one :class:`NotebookCell` and the cells are linted like a Markdown
page's blocks (one program, names shared between cells, no fixes), except that a cell
that does not parse is reported (XLA000): unlike a documentation snippet, it is code
that runs.

Positions are lines and columns of the ``.ipynb`` file itself. Jupyter, Colab, Kaggle and
nbformat write a cell's source as a JSON list with one string per line, each on its own
line of the file: a cell's line *k* is the file line holding its *k*-th string, and a
column is where that character stands in the file (escapes such as ``\\"`` or ``\\u00e9``
counted as written). A cell stored otherwise (``"source"`` as one string, or JSON without
line breaks) is reported at the file line where its source starts, column 1, and the
message names the line of the cell.

IPython syntax is masked line for line, so the rest of a cell still parses: a line
magic (``%time x``), shell escape (``!pip install``) or help request (``?x``, ``x?``)
becomes ``pass``, the right-hand side of ``files = !ls`` or ``env = %env`` becomes
``None``; a cell magic whose body is Python (``%%time``, ``%%writefile train.py``, ...)
loses only its first line; cells of other cell magics (``%%bash``) are not Python and
are left out.

A notebook whose kernel runs another language (R, Julia, Scala: ``language_info`` or
``kernelspec`` names it) holds no Python: :func:`notebook_blocks` raises :class:`NotPython`
and the file is skipped, as Ruff skips it, not reported. Only nbformat 4 is read (the
format Jupyter has written since 2015); an older notebook is a :class:`SourceError` (XLA000)
naming the version and the command that upgrades it.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass

from .blocks import CodeBlock
from .text import SourceError, split_lines


class NotPython(Exception):
    """The notebook's kernel runs another language: nothing in it is linted. ``reason`` is
    what ``--verbose`` prints for the skipped file: ``not a Python notebook (kernel: R)``."""

    def __init__(self, language: str) -> None:
        self.language = language
        self.reason = f"not a Python notebook (kernel: {language})"
        super().__init__(self.reason)


#: Kernel languages whose cells are Python (IPython's own kernel says ``python``).
PYTHON_LANGUAGES = frozenset(
    {"", "python", "python2", "python3", "ipython", "ipython2", "ipython3"}
)


def _other_language(cell: dict) -> bool:
    """True for a code cell VS Code marks as another language (``"metadata": {"vscode":
    {"languageId": "shellscript"}}``) in a Python notebook: it is not Python."""
    metadata = cell.get("metadata")
    vscode = metadata.get("vscode") if isinstance(metadata, dict) else None
    language = vscode.get("languageId") if isinstance(vscode, dict) else None
    return isinstance(language, str) and language.lower() not in ("python", "")


#: Cell magics whose body is Python code.
PYTHON_CELL_MAGICS = frozenset(
    {
        "time",
        "timeit",
        "capture",
        "writefile",
        "file",
        "prun",
        "debug",
        "python",
        "python3",
        "pypy",
        "tensorflow_version",
    }
)

_SHELL_OR_MAGIC = re.compile(r"^(?P<indent>[ \t]*)(?:%|!|\?)")
_ASSIGNED_SHELL = re.compile(
    r"^(?P<target>[ \t]*[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*)[!%]"
)
_HELP = re.compile(r"^(?P<indent>[ \t]*)[A-Za-z_][\w.]*[ \t]*\?\??[ \t]*$")


@dataclass(frozen=True)
class NotebookCell(CodeBlock):
    """One code cell: ``code`` is its source with IPython syntax masked (``line_offset`` and
    ``indent`` are 0: positions go through :meth:`place`).

    ``number`` counts every cell from 1; ``rows`` holds, for each line of the cell, the file
    line number (1-based), that line's text and the index in it where the JSON string's
    value starts; empty when the cell cannot be placed line by line, and then every
    position is ``anchor``, column 1.
    """

    number: int = 0
    rows: tuple[tuple[int, str, int], ...] = ()
    anchor: int = 1

    def place(self, line: int, column: int) -> tuple[int, int]:
        """The file's (line, column) for the cell's (line, column); all 1-based."""
        if not self.rows:
            return self.anchor, 1
        row = self.rows[min(max(line, 1), len(self.rows)) - 1]
        file_line, raw, start = row
        return file_line, _raw_index(raw, start, column - 1) + 1

    def where(self, line: int) -> str:
        """``" (cell 3, line 2)"`` for a cell placed at its anchor, else ``""``."""
        return "" if self.rows else f" (cell {self.number}, line {line})"


def notebook_blocks(text: str) -> list[NotebookCell]:
    """The code cells of the notebook JSON ``text``, each with IPython syntax masked.

    Raises :class:`NotPython` for a notebook whose kernel is not Python, and
    :class:`SourceError` (1-based line and column) when ``text`` is not nbformat 4 JSON.
    """
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(
            f"not a notebook: invalid JSON ({exc.msg})", exc.lineno, exc.colno
        ) from None
    except RecursionError:
        raise SourceError("not a notebook: JSON nested too deeply") from None
    if isinstance(notebook, dict):
        _check_version(notebook, text)
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise SourceError("not a notebook: no list of `cells` (nbformat 4)")
    language = _language(notebook)
    if language.lower() not in PYTHON_LANGUAGES:
        raise NotPython(language)
    strings = _source_strings(text)
    where: dict[str, list[int]] = {}  # string value -> its indexes in ``strings``, ascending
    for index, item in enumerate(strings):
        where.setdefault(item[2], []).append(index)
    blocks: list[NotebookCell] = []
    after = 0  # index in ``strings`` past the last cell placed
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code" or _other_language(cell):
            continue
        source = cell.get("source", "")
        pieces = source if isinstance(source, list) else [source]
        if not all(isinstance(p, str) for p in pieces):
            # Jupyter refuses such a file too (nbformat validation): name it, do not skip quietly.
            raise SourceError(
                f"not a notebook: the `source` of cell {number} is not text "
                "(nbformat 4: a string or a list of strings)"
            )
        code = _mask("".join(pieces))
        if code is None or not code.strip():
            continue
        found = _find(strings, where, pieces, after)
        rows: tuple[tuple[int, str, int], ...] = ()
        anchor = 1  # not found in the text (JSON without line breaks): the top of the file
        if found is not None:
            index, exact = found
            anchor = strings[index][0]
            after = index + (len(pieces) if exact else 1)
            if exact:
                rows = tuple(
                    (line, raw, start)
                    for line, start, _, raw in strings[index : index + len(pieces)]
                )
        blocks.append(
            NotebookCell(code if code.endswith("\n") else code + "\n", 0, 0, number, rows, anchor)
        )
    return blocks


def _raw_index(raw: str, start: int, count: int) -> int:
    """Index in ``raw`` of the ``count``-th character (0-based) of the JSON string value that
    starts at ``raw[start]``: each escape (``\\"``, ``\\n``, ``\\u00e9``, a surrogate pair)
    stands for one character."""
    at = start
    for _ in range(count):
        if at >= len(raw):
            return at + 1
        if raw[at] == "\\":
            if raw[at + 1 : at + 2] == "u":
                high = raw[at + 2 : at + 6]
                at += 6
                if (
                    high[:1].lower() == "d" and high[1:2].lower() in "89ab"
                ):  # a high surrogate: a pair
                    if raw[at : at + 2] == "\\u":
                        at += 6
            else:
                at += 2
        else:
            at += 1
    return at


_VERSION_KEY = re.compile(r'"nbformat"\s*:\s*')


def _check_version(notebook: dict, text: str) -> None:
    """Raise :class:`SourceError` for a notebook of another nbformat than 4, at its
    ``"nbformat"`` key; nbformat 3 keeps its cells in ``worksheets`` and their code in
    ``input``. A notebook without the key is read as nbformat 4."""
    version = notebook.get("nbformat")
    if version is None and "worksheets" in notebook:
        version = 3
    if version == 4 or not isinstance(version, int) or isinstance(version, bool):
        return
    line = column = 1
    for m in _VERSION_KEY.finditer(text):
        if text[m.end() : m.end() + len(str(version)) + 1].rstrip(",} \r\n") == str(version):
            line = text.count("\n", 0, m.start()) + 1
            column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            break
    raise SourceError(
        f"nbformat {version} is not read, only nbformat 4 "
        f"(`jupyter nbconvert --to notebook --inplace FILE` upgrades it)",
        line,
        column,
    )


def _language(notebook: dict) -> str:
    """The notebook's language as written (``language_info.name``, else
    ``kernelspec.language``); ``""`` when it names none."""
    metadata = notebook.get("metadata")
    if not isinstance(metadata, dict):
        return ""
    for key, field in (("language_info", "name"), ("kernelspec", "language")):
        info = metadata.get(key)
        if isinstance(info, dict) and isinstance(info.get(field), str):
            return info[field].strip()
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
    for line, starts_statement in zip(lines, _statement_starts(lines), strict=True):
        if not starts_statement:  # `% x` continuing a bracket, `!` inside a string: Python, kept
            out.append(line)
            continue
        end = line[len(line.rstrip("\r\n")) :]
        m = _SHELL_OR_MAGIC.match(line) or _HELP.match(line)
        if m:
            line = f"{m.group('indent')}pass{end}"
        else:
            m = _ASSIGNED_SHELL.match(line)
            if m:
                line = f"{m.group('target')}None{end}"
        out.append(line)
    return "".join(out)


def _statement_starts(lines: list[str]) -> list[bool]:
    """For each line, whether it starts a logical line: not inside brackets, inside a string
    spanning lines, or after a backslash continuation. A small scanner (the IPython syntax
    being masked does not tokenize), which is all the masking needs."""
    out = []
    depth = 0
    quote = (
        ""  # the quote of the string open at the end of the line (only triple quotes span lines)
    )
    continued = False
    for line in lines:
        out.append(depth == 0 and not quote and not continued)
        continued = False
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if quote:
                if c == "\\":
                    i += 2
                elif line.startswith(quote, i):
                    i += len(quote)
                    quote = ""
                else:
                    i += 1
                continue
            if c == "#":
                break
            if c in "'\"":
                quote = line[i : i + 3] if line[i : i + 3] in ('"""', "'''") else c
                i += len(quote)
                continue
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(0, depth - 1)
            elif c == "\\" and not line[i + 1 :].strip("\r\n"):
                continued = True
            i += 1
        if len(quote) == 1:  # an unclosed one-line string ends with its line
            quote = ""
    return out


def _source_strings(text: str) -> list[tuple[int, int, str, str]]:
    """``(line, start, value, line text)`` of each JSON string that stands alone on a line
    inside a ``"source": [...]`` list, or is the value of a one-line ``"source": "..."``
    (outputs and metadata are left out: an output may repeat a cell's code). ``line`` is
    1-based; ``start`` is the index in the line where the value's text begins (after its
    opening quote)."""
    out = []
    in_source = False
    for number, raw in enumerate(split_lines(text), start=1):
        line = raw.rstrip("\r\n")
        stripped = line.strip()
        if in_source:
            if stripped in ("]", "],"):
                in_source = False
                continue
            start = len(line) - len(line.lstrip())
        elif stripped.startswith('"source":'):
            rest = stripped[len('"source":') :].lstrip()
            if rest == "[":
                in_source = True
                continue
            start = line.index('"source":') + len('"source":')
            start += len(line[start:]) - len(line[start:].lstrip())
        else:
            continue
        body = line[start:].rstrip().removesuffix(",")
        if len(body) < 2 or body[0] != '"' or body[-1] != '"':
            continue
        try:
            value = json.loads(body)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(value, str):
            out.append((number, start + 1, value, line))
    return out


def _find(
    strings: list[tuple[int, int, str, str]],
    where: dict[str, list[int]],
    pieces: list[str],
    after: int,
) -> tuple[int, bool] | None:
    """Where in ``strings`` (at or after index ``after``) the cell ``pieces`` start: the index,
    and whether they stand there one per line (see :func:`_one_per_line`); the first such
    place, else the first string equal to the first piece; None when there is none.
    ``where`` maps each string value to its indexes in ``strings``."""
    indexes = where.get(pieces[0], [])
    candidates = indexes[bisect.bisect_left(indexes, after) :]
    for index in candidates:
        if _one_per_line(strings, index, pieces):
            return index, True
    return (candidates[0], False) if candidates else None


def _one_per_line(strings: list[tuple[int, int, str, str]], index: int, pieces: list[str]) -> bool:
    """True when ``pieces`` are the lines of the cell, one per line of the file on consecutive
    lines from ``strings[index]`` on, at one indentation: then the cell's line *k* is the
    file's line ``strings[index + k - 1]``."""
    if index + len(pieces) > len(strings):
        return False
    line, column = strings[index][0], strings[index][1]
    last = len(pieces) - 1
    for k, piece in enumerate(pieces):
        at_line, at_column, value, _ = strings[index + k]
        if value != piece or at_line != line + k or at_column != column:
            return False
        inner = (
            piece[:-2]
            if piece.endswith("\r\n")
            else piece[:-1]
            if piece.endswith(("\n", "\r"))
            else piece
        )
        if "\n" in inner or "\r" in inner or (k < last and inner == piece):
            return False
    return True
