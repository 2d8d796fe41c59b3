"""Python code blocks of documents: Markdown fences, reST directives and ``>>>`` sessions, each placed
on the lines of its file (:class:`CodeBlock`). Notebook cells are :mod:`xla_lint.sources.notebooks`;
:mod:`xla_lint.sources.documents` picks the reader for a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .text import split_lines


@dataclass(frozen=True)
class CodeBlock:
    """Python code found in a document: its first line is the document's line ``line_offset + 1``,
    and every line was indented by ``indent`` characters (or carried a ``>>> ``/``... `` prompt)."""

    code: str
    line_offset: int
    indent: int


_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")


_PY_LANGS = {"python", "py", "python3", "py3", "pycon"}


def markdown_blocks(text: str) -> list[CodeBlock]:
    """Fenced code blocks whose info string names Python."""
    lines = [line.rstrip("\r\n") for line in split_lines(text)]
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m.group("fence"), len(m.group("indent"))
        lang = (m.group("info").strip().split() or [""])[0].lower().strip("{}.")
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            close = lines[j].strip()
            if close.startswith(fence[0] * len(fence)) and set(close) <= {fence[0]}:
                break
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j].lstrip())
            j += 1
        if lang in _PY_LANGS:
            code = "\n".join(body) + "\n"
            if lang == "pycon" or code.lstrip().startswith(">>>"):
                blocks.extend(doctest_blocks(code, i + 1, indent))
            else:
                blocks.append(CodeBlock(code, i + 1, indent))
        i = j + 1
    return blocks


_RST_DIRECTIVE = re.compile(
    r"^(?P<indent>[ \t]*)\.\.\s+(code-block|code|sourcecode)::\s*(?P<lang>\S*)\s*$"
)


def rst_blocks(text: str) -> list[CodeBlock]:
    """``.. code-block:: python`` (and ``.. code::``) directive bodies."""
    lines = [line.rstrip("\r\n") for line in split_lines(text)]
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        m = _RST_DIRECTIVE.match(lines[i])
        if not m or m.group("lang").lower() not in _PY_LANGS:
            i += 1
            continue
        base = len(m.group("indent"))
        j = i + 1
        # directive options (":linenos:") and the blank line before the body
        while (
            j < len(lines)
            and (lines[j].strip() == "" or lines[j].strip().startswith(":"))
            and not _deeper(lines[j], base, body_started=False)
        ):
            j += 1
        start = j
        while j < len(lines) and (lines[j].strip() == "" or _indent(lines[j]) > base):
            j += 1
        body = lines[start:j]
        while body and not body[-1].strip():
            body.pop()
        if body:
            indent = min(_indent(b) for b in body if b.strip())
            code = "\n".join(b[indent:] for b in body) + "\n"
            if code.lstrip().startswith(">>>"):
                blocks.extend(doctest_blocks(code, start, indent))
            else:
                blocks.append(CodeBlock(code, start, indent))
        i = max(j, i + 1)
    return blocks


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _deeper(line: str, base: int, body_started: bool) -> bool:
    return bool(line.strip()) and _indent(line) > base and not line.strip().startswith(":")


_PROMPT = re.compile(r"^(?P<indent>[ \t]*)(>>>|\.\.\.)( |$)")


def doctest_blocks(text: str, line_offset: int = 0, extra_indent: int = 0) -> list[CodeBlock]:
    """Runs of ``>>>``/``...`` lines as one block each; output lines end a run.

    The prompt is replaced by blanks of the same width, so columns stay those of the document.
    """
    blocks: list[CodeBlock] = []
    current: list[str] = []
    start = 0
    indent = 0
    for number, line in enumerate(line.rstrip("\r\n") for line in split_lines(text)):
        m = _PROMPT.match(line)
        if m and (current or line.lstrip().startswith(">>>")):
            if not current:
                start = number
                indent = len(m.group("indent")) + 4
            current.append(line[indent:] if len(line) >= indent else "")
            continue
        if current:
            blocks.append(
                CodeBlock("\n".join(current) + "\n", line_offset + start, indent + extra_indent)
            )
            current = []
    if current:
        blocks.append(
            CodeBlock("\n".join(current) + "\n", line_offset + start, indent + extra_indent)
        )
    return blocks
