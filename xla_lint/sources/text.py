"""Reading source files, and the Python code blocks inside documentation.

:func:`decode` turns a file's bytes into text as Python would (PEP 263 coding cookie,
UTF-8 BOM) and refuses what Python refuses (NUL bytes, undecodable bytes).
:func:`code_blocks` finds ```` ```python ```` fences in Markdown, ``.. code-block:: python``
blocks in reStructuredText and ``>>>`` examples in docstrings, each with the line and
column offsets that map its positions back to the document.
"""

from __future__ import annotations

import ast
import io
import os
import re
import stat
import sys
import threading
import tokenize
from types import FrameType


class SourceError(Exception):
    """The bytes are not Python source text: ``line``/``column`` (1-based) locate the problem."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the line ends Python (and LibCST) count


def split_lines(text: str) -> list[str]:
    """``text`` cut after each ``\\n``, ``\\r\\n`` or ``\\r``, line ends kept.

    Unlike :meth:`str.splitlines` it does not cut at form feeds, ``\\x1c``-``\\x1e``,
    ``\\x85`` or ``\\u2028``: Python (and LibCST's positions) count only these three
    line ends, so a fix placed with :meth:`str.splitlines` offsets would land on the wrong text.
    """
    out: list[str] = []
    start = 0
    for m in LINE_BREAK.finditer(text):
        out.append(text[start : m.end()])
        start = m.end()
    if start < len(text):
        out.append(text[start:])
    return out


def line_starts(lines: list[str]) -> list[int]:
    """Character offset at which each of ``lines`` (:func:`split_lines`' result) starts, and
    one more entry: the offset just past the last line (the text's length)."""
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    return starts


MAX_CONFIG_BYTES = (
    1 << 20
)  # a pyproject.toml or --config file larger than this is not configuration


def read_source(path: str, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path``; every file xla-lint reads goes through here
    (sources, shell launchers, documents, ``pyproject.toml`` and other configuration).

    Opened without blocking, so a FIFO, socket or device named like a Python file, a shell
    script or a configuration file is refused instead of hanging the run. ``limit``: the most
    bytes accepted (None: any size); a larger file, or one that grows past it while being
    read, is refused without reading the rest. Raises :class:`OSError` (``strerror`` says why).
    """
    return read_source_stat(path, limit)[0]


def read_source_stat(path: str, limit: int | None = None) -> tuple[bytes, os.stat_result]:
    """:func:`read_source`, with the file's status as it was opened, before it was read (what
    the run index compares a later run's ``stat`` with: a write during the read changes it)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(21, "is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise OSError(0, "not a regular file")
        too_large = OSError(0, f"larger than {limit:,} bytes") if limit is not None else None
        if too_large is not None and limit is not None and info.st_size > limit:
            raise too_large
        chunks = []
        size = 0
        while True:
            chunk = os.read(fd, max(info.st_size + 1, 1 << 16))
            if not chunk:
                break
            size += len(chunk)
            if too_large is not None and limit is not None and size > limit:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks), info
    finally:
        os.close(fd)


# CPython refuses more than 200 nested brackets and a few thousand nested expressions;
# LibCST's native parser has no such guard and overflows the C stack on deeper input
# (a segfault, not an exception), and its Python-side visitors overflow the recursion limit.
def python_syntax(text: str) -> tuple[ast.Module | None, SourceError | None]:
    """CPython's own parse of ``text`` (an :class:`ast.Module`), and a nesting error if any.

    Returns ``(module, None)`` when CPython parses ``text``; ``(None, error)`` when it nests
    deeper than CPython accepts; ``(None, None)`` for any other refusal (other syntax errors
    are left to LibCST, which knows newer grammar than the running interpreter may).
    CPython's parser guards its stack and is ~15x faster than LibCST's; its line numbers
    also place reported statements without generating code (:mod:`xla_lint.analysis.positions`).

    The nesting CPython accepts is what ``python file.py`` accepts: its AST depth limit
    follows the recursion limit (3x it, counted from the caller's depth: CPython 3.11
    ``Python/Python-ast.c``), so the parse runs under the interpreter's default limit
    above the current depth, even inside
    :func:`call_with_deep_stack` (whose raised limit let 10,000 chained ``.attr`` through,
    and LibCST's native parser then crashed the process).
    """
    old_limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(min(old_limit, PYTHON_RECURSION_LIMIT + _stack_depth()))
        tree = compile(text, "<xla-lint>", "exec", ast.PyCF_ONLY_AST)
        assert isinstance(tree, ast.Module)  # what mode "exec" compiles to
        return tree, None
    except SyntaxError as exc:
        if "too many nested" in str(exc.msg) or "too complex" in str(exc.msg):
            return None, SourceError(str(exc.msg), exc.lineno or 1, exc.offset or 1)
    except (RecursionError, MemoryError):
        return None, SourceError("nesting too deep (Python refuses it too)")
    except (ValueError, OverflowError):
        pass
    finally:
        sys.setrecursionlimit(old_limit)
    return None, None


PYTHON_RECURSION_LIMIT = 1000  # the interpreter's default sys.getrecursionlimit()


def _stack_depth() -> int:
    """Frames on this thread's Python stack."""
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


def nesting_error(text: str) -> SourceError | None:
    """A :class:`SourceError` when ``text`` nests deeper than CPython itself accepts, else None.

    See :func:`python_syntax`.
    """
    return python_syntax(text)[1]


_STACK_BYTES = 256 << 20


_RECURSION_LIMIT = 20_000


def call_with_deep_stack(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a thread with a 256 MiB stack and a recursion limit of 20,000.

    LibCST's parser and visitors recurse once or more per nesting level; the main
    thread's 8 MiB stack and Python's default limit of 1,000 frames are too small for
    input CPython accepts. Exceptions raised by ``fn`` are re-raised in the caller. Called
    from such a thread already (the language server parses, then lints), ``fn`` runs in it.
    """
    if getattr(_DEEP, "active", False):
        return fn(*args, **kwargs)
    box: dict[str, object] = {}
    errors: list[BaseException] = []

    def target() -> None:
        _DEEP.active = True
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # re-raised below, in the caller's thread
            errors.append(exc)

    with _DEEP_LOCK:
        old_size = threading.stack_size()
        old_limit = sys.getrecursionlimit()
        try:
            threading.stack_size(_STACK_BYTES)
            worker = threading.Thread(target=target, name="xla-lint-parse", daemon=True)
            threading.stack_size(old_size)
        except (ValueError, RuntimeError):  # platform refuses the size: run here
            return fn(*args, **kwargs)
        sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))
        try:
            worker.start()
            worker.join()
        finally:
            sys.setrecursionlimit(old_limit)
    if errors:
        raise errors[0]
    return box.get("value")


_DEEP_LOCK = threading.Lock()


_DEEP = threading.local()  # `active`: this thread is one call_with_deep_stack started


def decode(data: bytes) -> str:
    """Decode source bytes as the interpreter would (see :func:`decode_with_encoding`)."""
    return decode_with_encoding(data)[0]


def decode_with_encoding(data: bytes) -> tuple[str, str]:
    """Decode source bytes as the interpreter would; return the text and the encoding to write it back with.

    A UTF-8 BOM gives ``"utf-8-sig"`` (the BOM is not part of the text).
    Raises :class:`SourceError` for a NUL byte, an unknown coding cookie, or bytes
    that are invalid in the declared (or default UTF-8) encoding.
    """
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        column = nul - (data.rfind(b"\n", 0, nul) + 1) + 1
        raise SourceError("source contains a NUL byte", line, column)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if "invalid or missing" not in exc.msg:  # a cookie naming an unknown codec
            raise SourceError(f"bad encoding declaration: {exc.msg}", exc.lineno or 1, 1) from None
        # No cookie and the first lines are not UTF-8 (a Latin-1 notebook or script): say
        # which byte, as the decode below does, not "bad encoding declaration".
        encoding = "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SourceError(f"bytes are not valid {encoding}: {exc.reason}", line, column) from None
    if text.startswith("\ufeff"):
        text = text[1:]
        encoding = "utf-8-sig"
    return text, encoding


# Adjacent string literals above this count are where LibCST's parser gives up (measured: 3,000
# to 4,000 in one expression, a long prompt), although CPython compiles them.
STRING_RUN = 200


def mask_string_runs(text: str, longest: int = STRING_RUN) -> str | None:
    """``text`` with every run of more than ``longest`` adjacent string literals (``"a" "b"
    ...``, one implicit concatenation) blanked after its first literal: each character of the
    later literals but line ends becomes a space, so every other line and column is unchanged
    and the expression is still the one string's place. None when ``text`` has no such run or
    does not tokenize. What is left has no code in the blanked places, so a linter may read it
    where LibCST cannot read the original; fixes must not be computed from it."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    runs: list[list[tokenize.TokenInfo]] = []
    run: list[tokenize.TokenInfo] = []
    for tok in tokens:
        if tok.type == tokenize.STRING:
            run.append(tok)
        elif tok.type in (tokenize.NL, tokenize.COMMENT):
            continue  # inside brackets: the run goes on
        else:
            if len(run) > longest:
                runs.append(run)
            run = []
    if not runs:
        return None
    lines = split_lines(text)
    for run in runs:
        for tok in run[1:]:
            (first, start), (last, end) = tok.start, tok.end
            for number in range(first, last + 1):
                line = lines[number - 1]
                a = start if number == first else 0
                b = end if number == last else len(line.rstrip("\r\n"))
                lines[number - 1] = line[:a] + " " * (b - a) + line[b:]
    return "".join(lines)
