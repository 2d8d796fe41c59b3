"""``--statistics``: how many diagnostics of each code, most frequent first.

Text::

       3  XLA004  [*] print-without-flush
       1  XLA001  [ ] hybrid-mesh-positional-args

(``[*]``: every one of them has a fix ``--fix`` applies). With ``--output-format json``, a
list of ``{"code", "name", "count", "fixable"}`` objects in the same order.
"""

from __future__ import annotations

import json
from collections import Counter

from ..pipeline.fixes import applies
from . import Report
from .text import style


def counts(report: Report) -> list[dict]:
    """One entry per code: code, name, count, fixable (all its diagnostics fixable); most frequent first, then by code."""
    by_code = Counter(d.code for d in report.diagnostics)
    names = {d.code: d.name for d in report.diagnostics}
    fix_all = {
        code: all(applies(d, report.unsafe_fixes) for d in report.diagnostics if d.code == code)
        for code in by_code
    }
    return [
        {"code": c, "name": names[c], "count": n, "fixable": fix_all[c]}
        for c, n in sorted(by_code.items(), key=lambda item: (-item[1], item[0]))
    ]


def render(report: Report, as_json: bool = False) -> str:
    rows = counts(report)
    if as_json:
        return json.dumps(rows, indent=2) + "\n"
    if not rows:
        return "" if report.quiet else "No diagnostics.\n"
    width = max(len(str(r["count"])) for r in rows)
    lines = [
        f"{r['count']:>{width}}  {style(r['code'], report.color, bold=True)}  "
        f"{'[*]' if r['fixable'] else '[ ]'} {r['name']}"
        for r in rows
    ]
    return "\n".join(lines) + "\n"
