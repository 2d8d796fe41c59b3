"""Applying fixes: text edits, imports added with LibCST's codemod helpers, atomic writes.

A fix is applied only if the whole file still parses afterwards; fixes whose edits
overlap one already taken wait for the next round, and rounds repeat until no safe fix
is left, so a second ``--fix`` run changes nothing.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from .diagnostics import Diagnostic, Edit, Fix

MAX_ROUNDS = 10


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _span(edit: Edit, starts: list[int]) -> tuple[int, int]:
    return starts[edit.line - 1] + edit.column - 1, starts[edit.end_line - 1] + edit.end_column - 1


def parses(text: str) -> bool:
    """True when LibCST parses ``text``."""
    try:
        cst.parse_module(text)
    except Exception:
        return False
    return True


def add_imports(text: str, imports: list[tuple[str, str | None]]) -> str:
    """``text`` with each ``(module, name)`` imported once (``name`` None: ``import module``)."""
    if not imports:
        return text
    tree = cst.parse_module(text)
    context = CodemodContext()
    for module, name in imports:
        AddImportsVisitor.add_needed_import(context, module, name)
    return tree.visit(AddImportsVisitor(context)).code


def apply_fixes(text: str, fixes: list[Fix]) -> tuple[str, int]:
    """Apply the non-overlapping safe ``fixes`` whose result parses; return the text and how many applied."""
    starts = _offsets(text)
    taken: list[tuple[int, int]] = []
    chosen: list[tuple[Fix, list[tuple[int, int, str]]]] = []
    for fix in fixes:
        if not fix.safe or not fix.edits:
            continue
        spans = [(*_span(e, starts), e.content) for e in fix.edits]
        if any(a < tb and ta < b or (a == b == ta) for a, b, _ in spans for ta, tb in taken):
            continue
        chosen.append((fix, spans))
        taken.extend((a, b) for a, b, _ in spans)

    def build(selection) -> str:
        edits = sorted((s for _, spans in selection for s in spans), key=lambda s: s[0], reverse=True)
        out = text
        for a, b, content in edits:
            out = out[:a] + content + out[b:]
        needed = [imp for fix, _ in selection for imp in fix.add_imports]
        return add_imports(out, needed) if needed and parses(out) else out

    if not chosen:
        return text, 0
    candidate = build(chosen)
    if parses(candidate):
        return candidate, len(chosen)
    # Some fix breaks the file: keep only those that parse one by one, together.
    good = [c for c in chosen if parses(build([c]))]
    candidate = build(good)
    if good and parses(candidate):
        return candidate, len(good)
    return text, 0


@dataclass
class FixOutcome:
    """The result of fixing one file: the new text and how many fixes went in."""

    path: str
    original: str
    fixed: str
    applied: int


def fix_loop(path: str, text: str, relint) -> FixOutcome:
    """Apply fixes in rounds until none is left; ``relint(text) -> list[Diagnostic]`` lints a version."""
    current = text
    applied = 0
    diagnostics: list[Diagnostic] = relint(current)
    for _ in range(MAX_ROUNDS):
        fixes = [d.fix for d in diagnostics if d.fix is not None and d.fix.safe]
        if not fixes:
            break
        new, count = apply_fixes(current, fixes)
        if count == 0 or new == current:
            break
        applied += count
        current = new
        diagnostics = relint(current)
    return FixOutcome(path, text, current, applied)


class WriteError(Exception):
    """A fixed file could not be written; the original is untouched."""


def write_atomic(path: str, text: str, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``text``: temporary file in the same folder, fsync, rename.

    The file's permission bits are kept. Raises WriteError (original untouched) when the
    file is not writable or the folder refuses a new file.
    """
    if not os.access(path, os.W_OK):
        raise WriteError(f"{path}: not writable, left unchanged")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        fd, tmp = tempfile.mkstemp(prefix=".xla-lint-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise WriteError(f"{path}: cannot write ({exc.strerror or exc}), left unchanged") from None
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise WriteError(f"{path}: cannot write ({exc.strerror or exc}), left unchanged") from None
