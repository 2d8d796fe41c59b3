"""The ``full`` format: each diagnostic with its source line, a caret under the reported
columns and its fix as a diff, then the summary::

    train.py:2:1: XLA004 `print` without `flush=True` ...
      |
    2 | print("x")
      | ^^^^^^^^^^ XLA004
      |
      = fix: add `flush=True`
      - print("x")
      + print("x", flush=True)

Lines come from ``Report.sources``; a diagnostic whose file text is not there (unreadable)
is shown as its one line.
"""

from __future__ import annotations

from ..diagnostics import Diagnostic, Fix
from ..sources.text import line_starts
from . import Report
from .text import fixes_section, line, style, summary


def apply_one(lines: list[str], fix: Fix) -> tuple[int, list[str], list[str]] | None:
    """The lines a fix changes: ``(first line number, old lines, new lines)``, whether or not
    the fix is safe. ``lines`` are the source's lines with their line ends. Only the lines the
    edits span are looked at, so showing every fix of a large file stays linear. None when
    an edit lies outside the source."""
    if not fix.edits:
        return None
    lo = min(e.line for e in fix.edits)
    hi = max(e.end_line for e in fix.edits)
    if lo < 1 or hi > len(lines):
        return None
    segment = lines[lo - 1 : hi]
    starts = line_starts(segment)
    text = "".join(segment)
    spans = sorted(
        (
            (
                starts[e.line - lo] + e.column - 1,
                starts[e.end_line - lo] + e.end_column - 1,
                e.content,
            )
            for e in fix.edits
        ),
        key=lambda s: s[0],
        reverse=True,
    )
    for a, b, content in spans:
        text = text[:a] + content + text[b:]
    return lo, "".join(segment).splitlines(), text.splitlines()


def _snippet(d: Diagnostic, lines: list[str], color: bool) -> list[str]:
    if not 1 <= d.line <= len(lines):
        return []
    src = lines[d.line - 1].rstrip("\r\n")
    width = len(str(d.line))
    gutter = " " * width + " |"
    start = max(d.column - 1, 0)
    end = d.end_column - 1 if d.end_line == d.line else len(src)
    end = max(min(end, len(src)), start + 1)
    # Keep tabs in the caret's indentation so it lines up with the source line.
    pad = "".join(ch if ch == "\t" else " " for ch in src[:start])
    caret = style(
        "^" * (end - start) + " " + d.code,
        color,
        fg="red" if d.severity.value == "error" else "yellow",
        bold=True,
    )
    return [
        style(gutter, color, fg="blue"),
        f"{style(str(d.line) + ' |', color, fg='blue')} {src}",
        f"{style(gutter, color, fg='blue')} {pad}{caret}",
        style(gutter, color, fg="blue"),
    ]


def _fix_lines(d: Diagnostic, lines: list[str] | None, color: bool, unsafe: bool) -> list[str]:
    fix = d.fix
    if fix is None:
        return []
    if fix.safe:
        note = ""
    elif unsafe:
        note = " (unsafe: --unsafe-fixes applies it; check the result)"
    else:
        note = " (unsafe: shown only; --fix applies it with --unsafe-fixes)"
    out = [f"  = {style('fix', color, bold=True)}: {fix.description}{note}"]
    change = apply_one(lines, fix) if lines is not None else None
    if change is not None:
        _, old, new = change
        out += ["  " + style(f"- {row}", color, fg="red") for row in old]
        out += ["  " + style(f"+ {row}", color, fg="green") for row in new]
    for module, name in fix.add_imports:
        statement = f"import {module}" if name is None else f"from {module} import {name}"
        out.append("  " + style(f"+ {statement}", color, fg="green") + " (added with the imports)")
    return out


def render(report: Report) -> str:
    blocks: list[str] = []
    split: dict[str, list[str]] = {}
    for d in report.diagnostics:
        text = report.sources.get(d.path)
        if text is not None and d.path not in split:
            split[d.path] = text.splitlines(keepends=True)
        lines = split.get(d.path)
        rows = [line(d, report.color)]
        if lines is not None:
            rows += _snippet(d, lines, report.color)
        rows += _fix_lines(d, lines, report.color, report.unsafe_fixes)
        blocks.append("\n".join(rows))
    tail = []
    if report.show_fixes:
        tail += fixes_section(report)
    if not report.quiet:
        tail.append(summary(report))
    parts = blocks + (["\n".join(tail)] if tail else [])
    return "\n\n".join(parts) + "\n" if parts else ""
