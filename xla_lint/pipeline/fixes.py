"""Applying fixes: text edits, imports added with LibCST's codemod helpers, atomic writes.

A fix is applied only if the whole file still parses afterwards; fixes whose edits
overlap one already taken wait for the next round, and rounds repeat until no safe fix
is left, so a second ``--fix`` run changes nothing.

Safety, as in Ruff: a rule marks a fix unsafe when applying it can change what the program
computes (the user must check the result); ``--fix`` applies unsafe fixes only with
``--unsafe-fixes``. Configuration re-marks fixes by code (:meth:`Settings.fix_safety`).
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from dataclasses import dataclass, replace

from ..config import Settings
from ..diagnostics import Diagnostic, Edit, Fix
from ..sources.text import (
    call_with_deep_stack,
    line_starts,
    nesting_error,
    read_source,
    split_lines,
)

MAX_ROUNDS = 10


def _span(edit: Edit, starts: list[int]) -> tuple[int, int]:
    return starts[edit.line - 1] + edit.column - 1, starts[edit.end_line - 1] + edit.end_column - 1


def with_fix_policy(d: Diagnostic, settings: Settings) -> Diagnostic:
    """``d`` with its fix as this run treats it: dropped for an ``unfixable`` code, re-marked
    safe or unsafe by ``extend-safe-fixes``/``extend-unsafe-fixes``, else unchanged."""
    if d.fix is None:
        return d
    safety = settings.fix_safety(d.code, d.fix.safe)
    if safety is None:
        return replace(d, fix=None)
    return d if safety == d.fix.safe else replace(d, fix=replace(d.fix, safe=safety))


def applies(d: Diagnostic, unsafe: bool) -> bool:
    """True when ``--fix`` applies ``d``'s fix: it has one, and it is safe or ``unsafe`` is on."""
    return d.fix is not None and bool(d.fix.edits) and (d.fix.safe or unsafe)


def hidden_unsafe(diagnostics: list[Diagnostic], unsafe: bool) -> list[Diagnostic]:
    """The diagnostics with an unsafe fix that ``--fix`` leaves out (none when ``unsafe``)."""
    return [] if unsafe else [d for d in diagnostics if applies(d, True) and not applies(d, False)]


def parses(text: str | None) -> bool:
    """True when LibCST parses ``text`` (and it nests no deeper than CPython accepts); None never parses."""
    if text is None or nesting_error(text) is not None:
        return False
    try:
        import libcst as cst  # only --fix needs the parse check

        call_with_deep_stack(cst.parse_module, text)
    except Exception:
        return False
    return True


def add_imports(text: str, imports: list[tuple[str, str | None]]) -> str | None:
    """``text`` with each ``(module, name)`` imported once (``name`` None: ``import module``).

    LibCST's ``AddImportsVisitor`` decides which lines to add or merge, and only those
    lines are carried into ``text``: LibCST does not reproduce every file byte for byte
    (it drops a form feed before a statement and a lone-CR file's final ``\r``), so its
    code generation of the whole module is never written. Returns None when an import
    would have to change a line LibCST did not reproduce exactly (the fix is then dropped).
    """
    if not imports:
        return text
    # Imported here: libcst.codemod pulls in libcst.matchers (~0.3 s), needed only by --fix.
    import libcst as cst
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor

    def run() -> tuple[str, str]:
        tree = cst.parse_module(text)
        context = CodemodContext()
        for module, name in imports:
            AddImportsVisitor.add_needed_import(context, module, name)
        return tree.code, tree.visit(AddImportsVisitor(context)).code

    before, after = call_with_deep_stack(run)
    if before == text:
        return after
    return _carry_changes(text, before, after)


def _carry_changes(text: str, before: str, after: str) -> str | None:
    """Apply the line changes from ``before`` to ``after`` onto ``text``.

    ``before`` is LibCST's rendition of ``text``: the same lines, some not byte-identical.
    Unchanged lines are taken from ``text``; a changed line must be identical in ``text``
    and ``before``, else None.
    """
    original, old, new = split_lines(text), split_lines(before), split_lines(after)
    if len(original) != len(old):
        return None
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.extend(original[i1:i2])
            continue
        if original[i1:i2] != old[i1:i2]:
            return None
        out.extend(new[j1:j2])
    return "".join(out)


def apply_fixes(text: str, fixes: list[Fix], unsafe: bool = False) -> tuple[str, int]:
    """Apply the non-overlapping ``fixes`` whose result parses; return the text and how many applied.

    Unsafe fixes are skipped unless ``unsafe``.
    """
    starts = line_starts(split_lines(text))
    taken: list[tuple[int, int]] = []
    chosen: list[tuple[Fix, list[tuple[int, int, str]]]] = []
    for fix in fixes:
        if not (fix.safe or unsafe) or not fix.edits:
            continue
        spans = [(*_span(e, starts), e.content) for e in fix.edits]
        if any(a < tb and ta < b or (a == b == ta) for a, b, _ in spans for ta, tb in taken):
            continue
        chosen.append((fix, spans))
        taken.extend((a, b) for a, b, _ in spans)

    def build(selection) -> str | None:
        edits = sorted(
            (s for _, spans in selection for s in spans), key=lambda s: s[0], reverse=True
        )
        out = text
        for a, b, content in edits:
            out = out[:a] + content + out[b:]
        needed = [imp for fix, _ in selection for imp in fix.add_imports]
        return add_imports(out, needed) if needed and parses(out) else out

    if not chosen:
        return text, 0
    candidate = build(chosen)
    if candidate is not None and parses(candidate):
        return candidate, len(chosen)
    # Some fix breaks the file: keep only those that parse one by one, together.
    good = [c for c in chosen if parses(build([c]))]
    candidate = build(good)
    if good and candidate is not None and parses(candidate):
        return candidate, len(good)
    return text, 0


def unified_diff(old: str, new: str, path: str, encoding: str = "utf-8") -> bytes:
    """A unified diff from ``a/path`` to ``b/path`` that ``patch -p1`` and ``git apply`` turn
    the file (text ``old``, stored as ``encoding``) into ``new``.

    Returned as bytes: the ``---``/``+++`` lines name ``path`` in the file system's encoding
    (``os.fsencode``), the hunks are in the file's own ``encoding``. Lines are cut at ``\\n``
    only, as line-based tools cut them (a form feed, ``\\u2028`` or a lone ``\\r`` stays inside
    its line), a last line without ``\\n`` is followed by ``\\ No newline at end of file``, and
    a UTF-8 BOM stays on the first line.
    """
    if encoding == "utf-8-sig":
        old, new, encoding = "\ufeff" + old, "\ufeff" + new, "utf-8"
    lines = difflib.unified_diff(_cut_at_newlines(old), _cut_at_newlines(new))
    if next(lines, None) is None:  # no change
        return b""
    next(lines)  # difflib's "+++" line: the header is written here, in the file system's encoding
    out = [b"--- a/" + os.fsencode(path) + b"\n", b"+++ b/" + os.fsencode(path) + b"\n"]
    for line in lines:
        out.append(line.encode(encoding, errors="surrogateescape"))
        if not line.endswith("\n"):
            out.append(b"\n\\ No newline at end of file\n")
    return b"".join(out)


def _cut_at_newlines(text: str) -> list[str]:
    """``text`` cut after each ``\\n`` (line ends kept)."""
    return _NEWLINE_PIECES.findall(text)


_NEWLINE_PIECES = re.compile(r"[^\n]*\n|[^\n]+\Z")


@dataclass
class FixOutcome:
    """The result of fixing one file: the new text and how many fixes went in."""

    path: str
    original: str
    fixed: str
    applied: int


def fix_loop(path: str, text: str, relint, unsafe: bool = False) -> FixOutcome:
    """Apply fixes in rounds until none is left; ``relint(text) -> list[Diagnostic]`` lints a
    version. Unsafe fixes go in only when ``unsafe``."""
    current = text
    applied = 0
    diagnostics: list[Diagnostic] = relint(current)
    for _ in range(MAX_ROUNDS):
        fixes = [d.fix for d in diagnostics if d.fix is not None and applies(d, unsafe)]
        if not fixes:
            break
        new, count = apply_fixes(current, fixes, unsafe)
        if count == 0 or new == current:
            break
        applied += count
        current = new
        diagnostics = relint(current)
    return FixOutcome(path, text, current, applied)


class WriteError(Exception):
    """A fixed file could not be written; the original is untouched."""


def is_read_only(mode: int) -> bool:
    """True when no write bit (owner, group, other) is set in ``mode``.

    Checked on the mode bits, not with :func:`os.access`: root may write any file, but a
    file its owner made read-only is a request not to change it.
    """
    return not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def _current_bytes(path: str) -> bytes | None:
    """What ``path`` holds now (None when it cannot be read as a regular file)."""
    try:
        return read_source(path)
    except OSError:
        return None


def _write_in_place(path: str, real: str, data: bytes, expected: bytes | None) -> None:
    """Overwrite the file ``real`` (``path``, through its links) with ``data`` where it is, for a
    file with several hard links: every name keeps seeing the one file. Not atomic, as Ruff's
    writes are not; the ``expected`` check is made just before (see :func:`write_atomic`)."""
    try:
        with open(real, "r+b") as handle:
            if expected is not None and handle.read() != expected:
                raise WriteError(
                    f"{path}: changed while it was being fixed, left unchanged (run again)"
                )
            handle.seek(0)
            handle.write(data)
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise WriteError(f"{path}: cannot write ({exc.strerror or exc}), left unchanged") from None


def write_atomic(
    path: str, text: str, encoding: str = "utf-8", expected: bytes | None = None
) -> None:
    """Replace ``path`` with ``text`` encoded as ``encoding``: temporary file in the same folder, fsync, rename.

    ``encoding`` is the one the file was read with (``"utf-8-sig"`` writes the BOM back,
    ``"iso-8859-1"`` keeps a Latin-1 file Latin-1); line ends are written as they are in
    ``text``. The file's permission bits (and, where this process may set them, owner and
    group) are kept; a file with several hard links is overwritten in place, so that every
    name keeps the one file. ``expected``: the bytes the fixed text was
    made from; the file is read again just before the rename and left alone when it no longer
    holds them (an editor or another tool wrote to it meanwhile: replacing it would lose that
    change). Raises WriteError (original untouched) when the file is read-only (no write bit
    set, even for root), is not a regular file, cannot hold the text in its encoding, the
    folder refuses a new file, or the file changed since ``expected`` was read.
    """
    try:
        info = os.stat(path)
    except OSError as exc:
        raise WriteError(f"{path}: cannot write ({exc.strerror or exc}), left unchanged") from None
    if not stat.S_ISREG(info.st_mode):
        raise WriteError(f"{path}: not a regular file, left unchanged")
    if is_read_only(info.st_mode) or not os.access(path, os.W_OK):
        raise WriteError(f"{path}: read-only, left unchanged")
    try:
        data = text.encode(encoding)
    except (UnicodeEncodeError, LookupError) as exc:
        raise WriteError(
            f"{path}: the fixed text cannot be written as {encoding} ({exc}), left unchanged"
        ) from None
    import tempfile  # only --fix writes files

    # Write through a symlink to its target, so the link stays a link.
    real = os.path.realpath(path)
    if info.st_nlink > 1:  # a rename would give this name a new file and leave the others the old
        _write_in_place(path, real, data, expected)
        return
    folder = os.path.dirname(real)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".xla-lint-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise WriteError(f"{path}: cannot write ({exc.strerror or exc}), left unchanged") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(info.st_mode))
        if (info.st_uid, info.st_gid) != (os.getuid(), os.getgid()):
            try:  # root fixing another user's file: it stays theirs
                os.chown(tmp, info.st_uid, info.st_gid)
            except OSError:
                pass
        if expected is not None and _current_bytes(real) != expected:
            os.unlink(tmp)
            raise WriteError(
                f"{path}: changed while it was being fixed, left unchanged (run again)"
            )
        os.replace(tmp, real)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise WriteError(f"{path}: cannot write ({exc.strerror or exc}), left unchanged") from None
