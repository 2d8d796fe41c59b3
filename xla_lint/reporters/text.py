"""``path:line:col: CODE message`` lines and a one-line summary."""

from __future__ import annotations

from . import Report


def summary(report: Report) -> str:
    """``Found 3 diagnostics in 2 files (1 fixable with --fix).`` or ``All checks passed (N files).``"""
    n = len(report.diagnostics)
    fixed = f" Fixed {report.fixed} {'diagnostic' if report.fixed == 1 else 'diagnostics'}." if report.fixed else ""
    if n == 0:
        return f"All checks passed ({report.files} {'file' if report.files == 1 else 'files'}).{fixed}"
    fixable = sum(1 for d in report.diagnostics if d.fix is not None and d.fix.safe)
    files = len({d.path for d in report.diagnostics})
    tail = f" ({fixable} fixable with --fix)" if fixable else ""
    return (f"Found {n} {'diagnostic' if n == 1 else 'diagnostics'} in {files} "
            f"{'file' if files == 1 else 'files'}{tail}.{fixed}")


def render(report: Report) -> str:
    lines = [f"{d.path}:{d.line}:{d.column}: {d.code} {d.message}" for d in report.diagnostics]
    lines.append(summary(report))
    return "\n".join(lines) + "\n"
