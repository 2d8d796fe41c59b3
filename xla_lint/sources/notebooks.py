"""The code cells of Jupyter notebooks (``.ipynb``), as code blocks placed in the notebook file.

TPU work often starts in a Kaggle or Colab notebook. A notebook is nbformat JSON; each
code cell that runs Python becomes one :class:`NotebookCell`, its source as IPython runs it
(:func:`transform_cell`, a line-for-line reimplementation of IPython's input transformation;
IPython itself is never imported). The linter joins the kernel's cells into one program, run
in order in one process (:func:`xla_lint.linter._lint_notebook`); a cell that does not parse
is reported (XLA000): unlike a documentation snippet, it is code that runs.

Positions are lines and columns of the ``.ipynb`` file itself. Jupyter, Colab, Kaggle and
nbformat write a cell's source as a JSON list with one string per line, each on its own
line of the file: a cell's line *k* is the file line holding its *k*-th string, and a
column is where that character stands in the file (escapes such as ``\\"`` or ``\\u00e9``
counted as written). A cell stored otherwise (``"source"`` as one string, or JSON without
line breaks) is reported at the file line where its source starts, column 1; the
diagnostic's ``cell_line`` names the line of the cell.

The transformation keeps the cell's lines: a ``!cmd`` continued over three lines becomes its
``get_ipython().system(...)`` call and two blank lines, and each line records the columns
IPython's dedent took from it (:attr:`NotebookCell.shifts`), so a position in the result is a
position in the cell. A ``%%time``/``%%capture`` cell's body is transformed and run in the
kernel; a ``%%writefile x.py``/``%%python`` body is a script run outside it (``kind``
``"script"``); other cell magics (``%%bash``) hold no Python and are left out.

A notebook whose kernel runs another language (R, Julia, Scala: ``language_info`` or
``kernelspec`` names it) holds no Python: :func:`notebook_blocks` raises :class:`NotPython`
and the file is skipped, as Ruff skips it, not reported. Only nbformat 4 is read (the
format Jupyter has written since 2015); an older notebook is a :class:`SourceError` (XLA000)
naming the version and the command that upgrades it.
"""

from __future__ import annotations

import ast
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


@dataclass(frozen=True)
class NotebookCell(CodeBlock):
    """One code cell: ``code`` is its source as IPython runs it (:func:`transform_cell`), one
    line for each line of the cell (``line_offset`` and ``indent`` are 0: positions go
    through :meth:`place`).

    ``number`` counts every cell from 1 (markdown cells too, as Jupyter shows them and Ruff
    names them); ``rows`` holds, for each line of the cell, the file line number (1-based),
    that line's text and the index in it where the JSON string's value starts; empty when
    the cell cannot be placed line by line, and then every position is ``anchor``, column 1.
    ``shifts``: the columns IPython's dedent took from each line of the cell. ``kind``:
    ``"kernel"`` for a cell the kernel runs, ``"script"`` for a ``%%writefile x.py`` or
    ``%%python`` body (Python that runs outside the kernel). ``source``: the cell as written.
    """

    number: int = 0
    rows: tuple[tuple[int, str, int], ...] = ()
    anchor: int = 1
    shifts: tuple[int, ...] = ()
    kind: str = "kernel"
    source: str = ""

    def cell_column(self, line: int, column: int) -> int:
        """The cell's column (1-based) for a column of ``code`` on the cell's ``line``."""
        if 1 <= line <= len(self.shifts):
            return column + self.shifts[line - 1]
        return column

    def place(self, line: int, column: int) -> tuple[int, int]:
        """The file's (line, column) for the (line, column) of ``code``; all 1-based."""
        if not self.rows:
            return self.anchor, 1
        line = min(max(line, 1), len(self.rows))
        file_line, raw, start = self.rows[line - 1]
        return file_line, _raw_index(raw, start, self.cell_column(line, column) - 1) + 1


def notebook_blocks(text: str) -> list[NotebookCell]:
    """The code cells of the notebook JSON ``text`` that run Python, each as IPython runs it.

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
        written = "".join(pieces)
        transformed = run_cell(written)
        code = transformed.code
        if transformed.kind == "other" or not code.strip():
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
            NotebookCell(
                code if code.endswith("\n") else code + "\n",
                0,
                0,
                number,
                rows,
                anchor,
                transformed.shifts,
                transformed.kind,
                written,
            )
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


# -- IPython's input transformation, line for line ------------------------------------
# IPython (``IPython.core.inputtransformer2.TransformerManager.transform_cell``, 8.x and 9.x)
# turns a cell into Python before running it: leading blank lines dropped, the cell dedented
# (``textwrap.dedent``), a ``%%magic`` first line making the whole cell one call, then, one
# logical line at a time, ``x = %magic``, ``x = !cmd``, ``%magic``/``!cmd``/``!!cmd``/``?x``/
# ``,f a``/``;f a``/``/f a`` at the start of a logical line and ``x?``/``x??`` at its end, each
# with its backslash continuation lines. The functions below do the same with the lines kept:
# a transformed line's continuation lines become blank lines, and each line carries the
# number of columns the dedent took from it, so positions map back to the cell exactly.
# tests/sources/test_ipython.py holds the result against IPython on the same cells.

#: Cell magics whose body IPython runs as Python in the kernel (IPython 9.18 ``%%time``,
#: ``%%timeit``, ``%%capture``, ``%%prun``, ``%%debug``); the body is transformed too.
KERNEL_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})

#: Cell magics whose body is a Python script that runs outside the kernel: run in a child
#: interpreter (``%%python``), or written to a ``.py`` file (``%%writefile``/``%%file``).
INTERPRETER_CELL_MAGICS = frozenset({"python", "python2", "python3", "pypy"})
FILE_CELL_MAGICS = frozenset({"writefile", "file"})

_ESCAPES = frozenset("!?%,;/")
_NOT_ESCAPES = ("!=", "%=", "/=", "//")  # operators the tokenizer reads whole
_OPERATORS = (
    "**=", "//=", ">>=", "<<=", "...", "!=", "%=", "&=", "**", "*=", "+=", "-=", "->", "/=",
    "//", ":=", "<<", "<=", "==", ">=", ">>", "@=", "^=", "|=",
)  # fmt: skip
_OPERATOR_STARTS = frozenset("*/><.!%&+-:=@^|()[]{}")
_HELP_END = re.compile(
    r"""(%{0,2}
    (?!\d)[\w*]+            # Variable name
    (\.(?!\d)[\w*]+|\[-?[0-9]+\])*       # .etc.etc or [0], we only support literal integers.
    )
    (\?\??)$                # ? or ??
    """,
    re.VERBOSE,
)  # IPython 9.18 inputtransformer2._help_end_re
_CELL_HELP = re.compile(r"%%\w+\?")


@dataclass(frozen=True)
class Transformed:
    """A cell as IPython runs it, one line for each line of the cell.

    ``code``: the Python (empty when ``kind`` is ``"other"``); ``shifts``: for each line, the
    columns IPython's dedent took from its start (add them to a column of ``code`` to get
    the cell's column); ``kind``: ``"kernel"`` (the kernel runs it), ``"script"`` (Python
    run outside the kernel: a ``%%writefile x.py`` or ``%%python`` body, not transformed),
    ``"other"`` (``%%bash``, ``%%html``, ...: not Python). ``magic``: the cell magic's name.
    """

    code: str
    shifts: tuple[int, ...]
    kind: str = "kernel"
    magic: str = ""


def transform_cell(cell: str) -> Transformed:
    """``cell`` as IPython's ``TransformerManager().transform_cell`` makes it, line for line.

    Not read: ``>>>`` and ``In [1]:`` prompts pasted into a cell (IPython strips them).
    """
    lines = split_lines(cell)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    if not lines:
        return Transformed("", ())
    lines, shifts = _dedent(lines)
    first = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    if first < len(lines) and lines[first].startswith("%%") and not _CELL_HELP.match(lines[first]):
        name, _, rest = lines[first][2:].rstrip().partition(" ")
        head = ["\n"] * (first + 1)
        if name in KERNEL_CELL_MAGICS:
            body = transform_cell("".join(lines[first + 1 :]))
            return Transformed(
                "".join(head) + body.code,
                tuple(shifts[: first + 1])
                + tuple(s + b for s, b in zip(shifts[first + 1 :], body.shifts, strict=True)),
                "kernel",
                name,
            )
        words = rest.split()
        target = words[-1].strip("'\"") if words else ""
        if name in INTERPRETER_CELL_MAGICS or (name in FILE_CELL_MAGICS and target.endswith(".py")):
            return Transformed("".join(head + lines[first + 1 :]), tuple(shifts), "script", name)
        return Transformed("", tuple(shifts), "other", name)
    return Transformed("".join(_token_transforms(lines)), tuple(shifts))


#: IPython 9.18's line magics and aliases (``InteractiveShell`` defaults; ``%lsmagic``) that
#: its automagic runs without the ``%`` in a one-line cell (``pip install x``, ``ls -la``).
AUTOMAGICS = frozenset(
    """alias alias_magic autoawait autocall automagic bookmark cat cd code_wrap colors conda
    config cp debug dhist dirs doctest_mode ed edit env gui hist history killbgscripts ldir lf lk
    ll load load_ext loadpy logoff logon logstart logstate logstop ls lsmagic lx macro magic
    mamba matplotlib micromamba mkdir mv notebook page pastebin pdb pdef pdoc pfile pinfo pinfo2
    pip popd pprint precision prun psearch psource pushd pwd pycat pylab quickref recall rehashx
    reload_ext rep rerun reset reset_selective rm rmdir run save sc set_env sx system tb time
    timeit unalias unload_ext uv who who_ls whos xdel xmode""".split()
)
_LINE_SPLIT = re.compile(
    r"^(\s*)([,;/%]|!!?|\?\??)?\s*(%{0,2}[\w\.\*]*)(.*?$|$)"
)  # IPython 9.18 splitinput.line_split: indent, escape, function part, the rest


def run_cell(cell: str) -> Transformed:
    """``cell`` as a Jupyter kernel runs it: :func:`transform_cell`, then, for a cell of one
    line, the shell's automagic (``InteractiveShell.run_cell`` prefilters one-line cells:
    ``pip install x`` is ``%pip install x``, ``ls -la`` is ``%ls -la``).

    A cell that does not compile as IPython 9 reads it, but whose comment lines precede a
    ``%%magic`` line, is read as IPython 5 and 6 read it (their ``cellmagic`` transformer took
    the first line starting with ``%%``; Colab ran such cells, e.g. nbdev's ``#colab`` flag
    above ``%%bash``)."""
    transformed = transform_cell(cell)
    if transformed.kind != "kernel":
        return transformed
    lines = transformed.code.splitlines()
    if len(lines) == 1:
        # IPython 9.18 prefilter: AssignmentChecker (`ls = 1`, `ls, x = ...` stay Python), then
        # AutoMagicChecker (a magic's name, its head not a builtin or keyword).
        match = _LINE_SPLIT.match(lines[0])
        if match is not None and not match.group(2):
            function, rest = match.group(3), match.group(4).lstrip()
            if function in AUTOMAGICS and not (rest and rest[0] in "=,"):
                code = _escaped_call("%", f"{function} {rest.strip()}".rstrip()) or ""
                return Transformed(code + "\n", transformed.shifts, "kernel", function)
    if not _compiles(transformed.code):
        written = split_lines(cell)
        for i, line in enumerate(written):
            if line.startswith("%%"):
                if all(not w.strip() or w.lstrip().startswith("#") for w in written[:i]):
                    old = transform_cell("".join(written[i:]))
                    return Transformed(
                        "\n" * i + old.code, (0,) * i + old.shifts, old.kind, old.magic
                    )
                break
    return transformed


def _compiles(code: str) -> bool:
    try:
        compile(
            code,
            "<cell>",
            "exec",
            dont_inherit=True,
            flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
        )
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def _dedent(lines: list[str]) -> tuple[list[str], list[int]]:
    """``textwrap.dedent`` of the lines (IPython 9's ``leading_indent``; IPython 8 removes the
    first line's indent, the same for a cell indented as a whole): the whitespace every
    non-blank line starts with is removed; blank lines become empty. Returns the lines and
    the columns taken from each."""
    margin: str | None = None
    for line in lines:
        if not line.strip(" \t\r\n"):
            continue
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if margin is None:
            margin = indent
        else:  # the longest common prefix (a tab and spaces are different whitespace)
            common = 0
            while common < min(len(margin), len(indent)) and margin[common] == indent[common]:
                common += 1
            margin = margin[:common]
    out, shifts = [], []
    for line in lines:
        if not line.strip(" \t\r\n"):
            out.append(line[len(line.rstrip("\r\n")) :] or "\n")
            shifts.append(0)
        else:
            n = len(margin or "")
            out.append(line[n:])
            shifts.append(n)
    return out, shifts


@dataclass
class _Logical:
    """What the transformation needs to know of one logical line (0-based positions)."""

    start: int  # its first physical line
    column: int  # column of its first token
    end: int  # its last physical line
    depth: int  # tokenize's bracket count after it (below 0 after a stray closer)
    last: tuple[int, int, str] | None = None  # (line, column past it, char) of its last token
    assign: tuple[int, int] | None = None  # the `%`/`!` after its first `=` (x = %magic, x = !cmd)
    escaped: bool = False  # it starts with an IPython escape (`!`, `%`, `?`, ...)
    closed: bool = True  # False: the cell ends inside its brackets or string


def _continued_end(lines: list[str], start: int) -> int:
    """IPython's ``find_end_of_continued_line``: the last line of the backslash-continued run."""
    end = start
    while lines[end].endswith("\\\n"):
        end += 1
        if end >= len(lines):
            return end - 1
    return end


def _assemble(lines: list[str], line: int, column: int, end: int) -> str:
    """IPython's ``assemble_continued_line``: the pieces joined by spaces, backslashes dropped."""
    parts = [lines[line][column:]] + lines[line + 1 : end + 1]
    return " ".join([p.rstrip()[:-1] for p in parts[:-1]] + [parts[-1].rstrip()])


def _scan(lines: list[str], start: int, depth: int) -> _Logical:
    """The logical line that starts at ``lines[start]`` (not blank), as IPython groups the
    tokens of Python's tokenizer: brackets (counted as tokenize counts them, from ``depth``
    left by earlier lines, so a stray closer makes the next opener end its line), strings
    (one that does not close on its line is one error character, as tokenize makes it,
    unless triple-quoted), comments and backslash continuations. IPython syntax is read as
    tokens too, as IPython finds it: brackets in a ``!cmd`` extend its logical line."""
    text = lines[start]
    column = len(text) - len(text.lstrip(" \t\f"))
    logical = _Logical(start, column, start, depth)
    logical.escaped = text[column] in _ESCAPES and not text.startswith(_NOT_ESCAPES, column)
    quote, row = "", start
    level = 0  # IPython's own bracket level for the `=` of an assignment (never below 0)
    equals: int | None = None  # the line of the first `=` at level 0, until the next token
    seen_equals = False
    while row < len(lines):
        line, k = lines[row], (column if row == start else 0)
        n = len(line)
        continued = False
        while k < n:
            c = line[k]
            if quote:
                if c == "\\":
                    k += 2
                elif line.startswith(quote, k):
                    k += 3
                    quote = ""
                    logical.last = (row, k, c)
                else:
                    k += 1
                continue
            if c in " \t\f\r\n":
                k += 1
                continue
            if c == "#":
                logical.last = (row, k + 1, c)
                break
            if c == "\\" and not line[k + 1 :].strip("\r\n"):
                continued = True
                break
            if equals is not None:
                magic = c == "%" and line[k + 1 : k + 2].isidentifier()
                system = (
                    c == "!"
                    and not line.startswith("!=", k)
                    and not lines[equals].strip().startswith("=")
                )
                equals = None
                if magic or system:
                    logical.assign = (row, k)
            if c in "'\"":
                triple = line.startswith(c * 3, k)
                close = _string_end(line, k + (3 if triple else 1), c * 3 if triple else c)
                if close < 0 and triple:
                    quote, k = c * 3, n
                    continue
                k = k + 1 if close < 0 else close  # tokenize: an error token for a lone quote
                logical.last = (row, k, c)
                continue
            if c not in _OPERATOR_STARTS:  # a name, a number: no bracket, no `=`
                k += 1
                while k < n and (line[k].isalnum() or line[k] == "_"):
                    k += 1
                logical.last = (row, k, line[k - 1])
                continue
            op = next((o for o in _OPERATORS if line.startswith(o, k)), c)
            if op in "([{":
                logical.depth += 1
                level += 1
            elif op in ")]}":
                logical.depth -= 1
                level = max(0, level - 1)
            elif op == "=" and level == 0 and not seen_equals:
                seen_equals, equals = True, row
            k += len(op)
            logical.last = (row, k, op[-1])
        if not (continued or logical.depth > 0 or quote):
            break
        row += 1
    else:
        logical.closed = False
    logical.end = min(row, len(lines) - 1)
    return logical


def _string_end(line: str, k: int, quote: str) -> int:
    """The index just past ``quote`` closing a string whose text starts at ``line[k]``; -1
    when it does not close on this line."""
    while k < len(line):
        if line[k] == "\\":
            k += 2
        elif line.startswith(quote, k):
            return k + len(quote)
        else:
            k += 1
    return -1


def _help_call(target: str, escape: str) -> str:
    """IPython's ``_make_help_call``: ``x?`` is ``pinfo``, ``x??`` ``pinfo2``, ``*x*?`` ``psearch``."""
    method = "pinfo2" if escape == "??" else "psearch" if "*" in target else "pinfo"
    return f"get_ipython().run_line_magic({method!r}, {target!r})"


def _escaped_call(escape: str, content: str) -> str | None:
    """The Python of an escaped line (IPython's ``tr`` table); None where IPython raises."""
    name, _, args = content.partition(" ")
    if escape == "!":
        return f"get_ipython().system({content!r})"
    if escape == "!!":
        return f"get_ipython().getoutput({content!r})"
    if escape in ("?", "??"):
        return _help_call(content, escape) if content else "get_ipython().show_usage()"
    if escape == "%":
        return f"get_ipython().run_line_magic({name!r}, {args!r})"
    if escape == ",":
        return '{}("{}")'.format(name, '", "'.join(args.split()))
    if escape == ";":
        return f'{name}("{args}")'
    if escape == "/":
        return None if name == "" else "{}({})".format(name, ", ".join(args.split()))
    return ""


def _token_transforms(lines: list[str]) -> list[str]:
    """IPython's token transforms (``MagicAssign``, ``SystemAssign``, ``EscapedCommand``,
    ``HelpEnd``) over the logical lines in order, each replacing its lines by one line of
    Python and blank lines. IPython finds the first instance of each transform in the cell:
    a help (``x?``) or escape it cannot transform (a SyntaxError) blocks the later ones of
    its kind, and so it does here."""
    out = list(lines)
    help_stuck = escape_stuck = False
    row, depth = 0, 0
    while row < len(out):
        if not out[row].strip():
            row += 1
            continue
        logical = _scan(out, row, depth)
        start, column, last = logical.start, logical.column, logical.last
        new: tuple[int, int, str] | None = None  # (first line, last line, Python)
        help_failed = False
        if (
            not help_stuck
            and last is not None
            and last[2] == "?"
            and (last[0], last[1] - 1) != (start, column)
            # a cell ending inside brackets: tokenize's last tokens are the NL of each line
            # after the `?` line, so IPython sees no help there
            and (logical.closed or last[0] == logical.end)
        ):
            piece = "".join(out[start : last[0] + 1])
            m = _HELP_END.search(piece[column:])
            if m:
                call = _help_call(m.group(1), m.group(3))
                new = (start, last[0], piece[:column] + call + "\n")
            else:
                help_failed = True
        if new is None and logical.escaped and not escape_stuck:
            end = _continued_end(out, start)
            text = _assemble(out, start, column, end)
            escape = text[:2] if text[:2] in ("!!", "??") else text[:1]
            escaped = _escaped_call(escape, text[len(escape) :])
            if escaped is None:
                escape_stuck = True
            else:
                new = (start, end, out[start][:column] + escaped + "\n")
        if new is None and logical.assign is not None:
            at, k = logical.assign
            end = _continued_end(out, at)
            rhs = _assemble(out, at, k, end)
            if rhs.startswith("%"):
                name, _, args = rhs[1:].partition(" ")
                call = f"get_ipython().run_line_magic({name!r}, {args!r})"
            else:
                call = f"get_ipython().getoutput({rhs[1:]!r})"
            new = (at, end, out[at][:k] + call + "\n")
        if new is None:
            help_stuck = help_stuck or help_failed
            depth = logical.depth
            row = logical.end + 1
        else:  # the new line is balanced Python: tokenize goes on from the old count
            first, end, python = new
            out[first] = python
            for i in range(first + 1, end + 1):
                out[i] = "\n"
            row = start if first > start else end + 1
    return out
