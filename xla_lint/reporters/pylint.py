"""``--output-format pylint``: ``path:line: [CODE] message``, one line per diagnostic.

The format flake8 and Ruff call ``pylint`` (flake8's ``%(path)s:%(row)d: [%(code)s]
%(text)s``), read by editors and CI tools that parse Pylint's parseable output. No
column, no summary line; a line break in a message becomes a space.
"""

from __future__ import annotations

from . import Report


def render(report: Report) -> str:
    return "".join(
        f"{d.path}:{d.line}: [{d.code}] {' '.join(d.message.splitlines())}\n"
        for d in report.diagnostics
    )
