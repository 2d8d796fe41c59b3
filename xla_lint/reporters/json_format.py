"""``--output-format json``: a JSON list of diagnostic objects (:meth:`Diagnostic.to_json`).

Each object has ``code``, ``name``, ``message``, ``severity`` (``error``/``warning``),
``path``, ``line``, ``column``, ``end_line``, ``end_column`` (1-based, end exclusive,
columns in characters) and ``fix`` (null, or ``description``, ``safe``, ``edits``
[``line``, ``column``, ``end_line``, ``end_column``, ``content``] and ``add_imports``
[``module``, ``name``]). A diagnostic in a notebook cell adds ``cell`` (counted from 1 over
all cells), ``cell_line`` and ``cell_column`` (in the cell as written); ``line`` and
``column`` stay those of the ``.ipynb`` file. The schema is in docs/cli.md.
"""

from __future__ import annotations

import json

from . import Report


def render(report: Report) -> str:
    return json.dumps([d.to_json() for d in report.diagnostics], indent=2) + "\n"
