"""``path:line:col: CODE message`` lines and a one-line summary (formats ``text`` and ``concise``);
a diagnostic in a notebook cell is ``nb.ipynb:cell 5:3:1: CODE message``.

Styles (``color``) are click's ANSI styles: path bold, code red for errors and yellow
for warnings; without color the output is plain text.
"""

from __future__ import annotations

import click

from ..diagnostics import Diagnostic, Severity
from ..pipeline.fixes import applies, hidden_unsafe
from . import Report


def style(text: str, color: bool, **styles) -> str:
    """``text`` with click ANSI ``styles`` when ``color`` is on, else unchanged."""
    return click.style(text, **styles) if color else text


def code_style(d: Diagnostic, color: bool) -> str:
    return style(d.code, color, fg="red" if d.severity is Severity.ERROR else "yellow", bold=True)


def location(d: Diagnostic, color: bool) -> str:
    """``path:line:col:`` with the path bold; in a notebook cell ``path:cell N:line:col:``, the
    line and column in the cell as written (as Ruff names them; cells counted from 1 over all
    cells, markdown ones too)."""
    if d.cell is not None:
        return f"{style(d.path, color, bold=True)}:cell {d.cell}:{d.cell_line}:{d.cell_column}:"
    return f"{style(d.path, color, bold=True)}:{d.line}:{d.column}:"


def line(d: Diagnostic, color: bool = False) -> str:
    """One diagnostic as ``path:line:col: CODE message`` (line breaks in the message become spaces)."""
    message = " ".join(d.message.splitlines())
    return f"{location(d, color)} {code_style(d, color)} {message}"


def summary(report: Report) -> str:
    """``Found 3 diagnostics in 2 files (1 fixable with --fix).`` or ``All checks passed (N files).``

    Unsafe fixes that ``--fix`` leaves out are counted apart: ``(1 fixable with --fix, 2 more
    with --fix --unsafe-fixes)``.
    """
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
    fixable_count = sum(1 for d in report.diagnostics if applies(d, report.unsafe_fixes))
    hidden = len(hidden_unsafe(report.diagnostics, report.unsafe_fixes))
    files = len({d.path for d in report.diagnostics})
    counts = [f"{fixable_count} fixable with --fix"] if fixable_count else []
    if hidden:
        counts.append(f"{hidden} {'more with' if counts else 'fixable with'} --fix --unsafe-fixes")
    tail = f" ({', '.join(counts)})" if counts else ""
    return (
        f"Found {n} {'diagnostic' if n == 1 else 'diagnostics'} in {files} "
        f"{'file' if files == 1 else 'files'}{tail}.{fixed}"
    )


def fixes_section(report: Report) -> list[str]:
    """The ``--show-fixes`` lines: the fixes ``--fix`` applied, or would apply."""
    hidden = hidden_unsafe(report.diagnostics, report.unsafe_fixes)
    if report.applied is not None:
        items, heading = report.applied, "Applied fixes"
    else:
        items = [d for d in report.diagnostics if applies(d, report.unsafe_fixes)]
        heading = "Fixes --fix would apply"
    out = []
    if items:
        out.append(style(f"{heading} ({len(items)}):", report.color, bold=True))
        out += [_fix_line(d, report.color) for d in items]
    elif not hidden:
        return ["No fixes applied." if report.applied is not None else "No fixes available."]
    if hidden and report.applied is None:
        out.append(
            style(
                f"Unsafe fixes, applied only with --unsafe-fixes ({len(hidden)}):",
                report.color,
                bold=True,
            )
        )
        out += [_fix_line(d, report.color) for d in hidden]
    return out


def _fix_line(d: Diagnostic, color: bool) -> str:
    """``  path:line:col: CODE description`` (``[unsafe]`` before an unsafe fix's description)."""
    assert d.fix is not None
    mark = "" if d.fix.safe else "[unsafe] "
    return f"  {location(d, color)} {code_style(d, color)} {mark}{d.fix.description}"


def render(report: Report) -> str:
    lines = [line(d, report.color) for d in report.diagnostics]
    if report.show_fixes:
        lines += fixes_section(report)
    if not report.quiet:
        lines.append(summary(report))
    return "\n".join(lines) + "\n" if lines else ""
