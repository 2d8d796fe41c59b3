"""``--output-format json-lines``: one compact JSON object per line, the same objects as ``json``.

Each line is :meth:`Diagnostic.to_json` (keys ``code``, ``name``, ``message``, ``severity``,
``path``, ``line``, ``column``, ``end_line``, ``end_column``, ``fix``), written without
spaces as Ruff's ``json-lines`` is. A run with no diagnostics prints nothing. Non-ASCII
text is ``\\u`` escaped, so every line is ASCII and a line break in a message stays inside
its string.
"""

from __future__ import annotations

import json

from . import Report


def render(report: Report) -> str:
    return "".join(
        json.dumps(d.to_json(), separators=(",", ":")) + "\n" for d in report.diagnostics
    )
