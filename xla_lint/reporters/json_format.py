"""A JSON list of diagnostic objects: the schema documented in the README."""

from __future__ import annotations

import json

from . import Report


def render(report: Report) -> str:
    return json.dumps([d.to_json() for d in report.diagnostics], indent=2) + "\n"
