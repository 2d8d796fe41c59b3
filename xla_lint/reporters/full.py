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

import difflib

from ..diagnostics import Diagnostic, Fix
from ..fixes import add_imports, parses
from . import Report
from .text import fixes_section, line, style, summary


def apply_one(text: str, fix: Fix) -> str:
    """``text`` with ``fix``'s edits (and imports) applied, whether or not the fix is safe."""
    starts = [0]
    for piece in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(piece))
    spans = []
    for e in fix.edits:
        if e.line > len(starts) or e.end_line > len(starts):
            return text
        spans.append((starts[e.line - 1] + e.column - 1, starts[e.end_line - 1] + e.end_column - 1, e.content))
    out = text
    for a, b, content in sorted(spans, key=lambda s: s[0], reverse=True):
        out = out[:a] + content + out[b:]
    if fix.add_imports and parses(out):
        out = add_imports(out, list(fix.add_imports))
    return out


def _snippet(d: Diagnostic, text: str, color: bool) -> list[str]:
    lines = text.splitlines()
    if not 1 <= d.line <= len(lines):
        return []
    src = lines[d.line - 1]
    width = len(str(d.line))
    gutter = " " * width + " |"
    start = max(d.column - 1, 0)
    end = d.end_column - 1 if d.end_line == d.line else len(src)
    end = max(min(end, len(src)), start + 1)
    # Keep tabs in the caret's indentation so it lines up with the source line.
    pad = "".join(ch if ch == "\t" else " " for ch in src[:start])
    caret = style("^" * (end - start) + " " + d.code, color, fg="red" if d.severity.value == "error" else "yellow",
                  bold=True)
    return [style(gutter, color, fg="blue"),
            f"{style(str(d.line) + ' |', color, fg='blue')} {src}",
            f"{style(gutter, color, fg='blue')} {pad}{caret}",
            style(gutter, color, fg="blue")]


def _fix_lines(d: Diagnostic, text: str | None, color: bool) -> list[str]:
    fix = d.fix
    if fix is None:
        return []
    note = "" if fix.safe else " (unsafe: shown only, --fix does not apply it)"
    out = [f"  = {style('fix', color, bold=True)}: {fix.description}{note}"]
    if text is None:
        return out
    after = apply_one(text, fix)
    for row in difflib.unified_diff(text.splitlines(), after.splitlines(), lineterm="", n=0):
        if row.startswith(("---", "+++", "@@")):
            continue
        out.append("  " + style(f"{row[:1]} {row[1:]}", color, fg="red" if row.startswith("-") else "green"))
    return out


def render(report: Report) -> str:
    blocks: list[str] = []
    for d in report.diagnostics:
        text = report.sources.get(d.path)
        rows = [line(d, report.color)]
        if text is not None:
            rows += _snippet(d, text, report.color)
        rows += _fix_lines(d, text, report.color)
        blocks.append("\n".join(rows))
    tail = []
    if report.show_fixes:
        tail += fixes_section(report)
    if not report.quiet:
        tail.append(summary(report))
    parts = blocks + (["\n".join(tail)] if tail else [])
    return "\n\n".join(parts) + "\n" if parts else ""

