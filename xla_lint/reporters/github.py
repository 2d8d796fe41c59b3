"""GitHub Actions workflow commands: one ``::error``/``::warning`` line per diagnostic.

::

    ::warning file=train.py,line=2,col=1,endLine=2,endColumn=11,title=XLA004::`print` without ...

GitHub shows each as an annotation on the pull request's diff. Escaping follows the
Actions toolkit (``@actions/core`` ``command.ts``): in the message ``%``, ``\\r`` and
``\\n`` become ``%25``, ``%0D``, ``%0A``; in property values ``:`` and ``,`` also become
``%3A`` and ``%2C``. No summary line: every line is a command.
"""

from __future__ import annotations

from ..diagnostics import Severity
from . import Report


def escape_data(text: str) -> str:
    """Escape a workflow command's message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command property value (``file=``, ``title=``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(report: Report) -> str:
    lines = []
    for d in report.diagnostics:
        command = "error" if d.severity is Severity.ERROR else "warning"
        props = {
            "file": d.path,
            "line": d.line,
            "col": d.column,
            "endLine": d.end_line,
            "endColumn": d.end_column,
            "title": d.code,
        }
        joined = ",".join(f"{k}={escape_property(str(v))}" for k, v in props.items())
        lines.append(f"::{command} {joined}::{escape_data(d.message)}")
    return "\n".join(lines) + "\n" if lines else ""
