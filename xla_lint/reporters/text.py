"""``path:line:col: CODE message`` lines and a one-line summary (formats ``text`` and ``concise``).

Styles (``color``) are click's ANSI styles: path bold, code red for errors and yellow
for warnings; without color the output is plain text.
"""

from __future__ import annotations

import click

from ..diagnostics import Diagnostic, Severity
from . import Report


def style(text: str, color: bool, **styles) -> str:
    """``text`` with click ANSI ``styles`` when ``color`` is on, else unchanged."""
    return click.style(text, **styles) if color else text


def fixable(d: Diagnostic) -> bool:
    """True when ``--fix`` applies this diagnostic's fix."""
    return d.fix is not None and d.fix.safe


def code_style(d: Diagnostic, color: bool) -> str:
    return style(d.code, color, fg="red" if d.severity is Severity.ERROR else "yellow", bold=True)


def location(d: Diagnostic, color: bool) -> str:
    """``path:line:col:`` with the path bold."""
    return f"{style(d.path, color, bold=True)}:{d.line}:{d.column}:"


def line(d: Diagnostic, color: bool = False) -> str:
    """One diagnostic as ``path:line:col: CODE message`` (line breaks in the message become spaces)."""
    message = " ".join(d.message.splitlines())
    return f"{location(d, color)} {code_style(d, color)} {message}"


def summary(report: Report) -> str:
    """``Found 3 diagnostics in 2 files (1 fixable with --fix).`` or ``All checks passed (N files).``"""
    n = len(report.diagnostics)
    fixed = (
        f" Fixed {report.fixed} {'diagnostic' if report.fixed == 1 else 'diagnostics'}."
        if report.fixed
        else ""
    )
    if n == 0:
        return (
            f"All checks passed ({report.files} {'file' if report.files == 1 else 'files'}).{fixed}"
        )
    fixable_count = sum(1 for d in report.diagnostics if fixable(d))
    files = len({d.path for d in report.diagnostics})
    tail = f" ({fixable_count} fixable with --fix)" if fixable_count else ""
    return (
        f"Found {n} {'diagnostic' if n == 1 else 'diagnostics'} in {files} "
        f"{'file' if files == 1 else 'files'}{tail}.{fixed}"
    )


def fixes_section(report: Report) -> list[str]:
    """The ``--show-fixes`` lines: the fixes ``--fix`` applied, or would apply."""
    if report.applied is not None:
        items, heading = report.applied, "Applied fixes"
    else:
        items, heading = [d for d in report.diagnostics if fixable(d)], "Fixes --fix would apply"
    if not items:
        return ["No fixes applied." if report.applied is not None else "No fixes available."]
    out = [style(f"{heading} ({len(items)}):", report.color, bold=True)]
    out += [
        f"  {location(d, report.color)} {code_style(d, report.color)} {d.fix.description}"
        for d in items
    ]
    return out


def render(report: Report) -> str:
    lines = [line(d, report.color) for d in report.diagnostics]
    if report.show_fixes:
        lines += fixes_section(report)
    if not report.quiet:
        lines.append(summary(report))
    return "\n".join(lines) + "\n" if lines else ""
