"""SARIF 2.1.0 (OASIS Static Analysis Results Interchange Format): one run of one tool.

The driver's rule table lists every rule in the catalogue, made from
:func:`~xla_lint.reporters.rule_to_json` (the same data as ``xla-lint rule --all
--output-format json``): ``id`` (code), ``name``, ``shortDescription`` (summary),
``fullDescription`` (the "What it does" section), ``help`` (the whole explanation, text
and Markdown), ``defaultConfiguration`` (level, enabled by default). Each result carries
``ruleId``/``ruleIndex``, ``level`` (``error``/``warning`` from the severity), the message,
and a region with 1-based lines and columns counted in Unicode code points (hence
``columnKind: unicodeCodePoints``; end column exclusive, as SARIF wants). A fix made only
of text edits is attached as a SARIF ``fix``. In a notebook the region is in the ``.ipynb``
file and the location's ``properties`` add ``cell``, ``cell_line`` and ``cell_column`` (the
schema allows no other field there). Relative paths are relative to
``%SRCROOT%``, the folder xla-lint ran in, which is what GitHub code scanning expects when
run from the repository root. The output validates against the official 2.1.0 schema
(tests/data/sarif-schema-2.1.0.json).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .. import __version__
from ..diagnostics import Diagnostic, Fix
from . import Report, rule_to_json

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
INFORMATION_URI = "https://github.com/xla-lint/xla-lint"


def _uri_path(path: Path) -> str:
    """``path`` as the path part of a URI: its bytes (as the file system has them, see
    :func:`os.fsencode`) percent-encoded, so a name that is not UTF-8 (``bad\\xffname.py``,
    decoded by Python with surrogate escapes) becomes ``bad%FFname.py`` instead of an error."""
    return quote(os.fsencode(path.as_posix()))


def artifact_location(path: str) -> dict:
    """A SARIF artifactLocation for ``path``: a relative URI against %SRCROOT%, or a file: URI."""
    p = Path(path)
    if p.is_absolute():
        return {"uri": "file://" + _uri_path(p)}
    return {"uri": _uri_path(p), "uriBaseId": "%SRCROOT%"}


def rule_descriptor(rule) -> dict:
    """The SARIF reportingDescriptor of a rule, from :func:`rule_to_json`."""
    data = rule_to_json(rule)
    return {
        "id": data["code"],
        "name": data["name"],
        "shortDescription": {"text": data["summary"]},
        "fullDescription": {"text": data["description"]},
        "help": {"text": data["explanation"], "markdown": data["explanation"]},
        "defaultConfiguration": {"level": data["severity"], "enabled": data["default_enabled"]},
        "properties": {
            "fixable": data["fixable"],
            "preview": data["preview"],
            "tags": [data["severity"]] + (["preview"] if data["preview"] else []),
        },
    }


def _region(line: int, column: int, end_line: int, end_column: int) -> dict:
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}


def _fix(d: Diagnostic, fix: Fix) -> dict | None:
    if fix.add_imports or not fix.edits:
        return None  # an added import has no fixed position: not expressible as a replacement
    return {
        "description": {"text": fix.description + ("" if fix.safe else " (unsafe)")},
        "artifactChanges": [
            {
                "artifactLocation": artifact_location(d.path),
                "replacements": [
                    {
                        "deletedRegion": _region(e.line, e.column, e.end_line, e.end_column),
                        "insertedContent": {"text": e.content},
                    }
                    for e in fix.edits
                ],
            }
        ],
    }


def sarif_log(report: Report) -> dict:
    """The SARIF log of ``report`` as a dict."""
    from ..rules import all_rules  # the rule table (and LibCST): only SARIF output needs it

    rules = list(all_rules())
    index = {r.code: i for i, r in enumerate(rules)}
    results = []
    for d in report.diagnostics:
        location: dict[str, Any] = {
            "physicalLocation": {
                "artifactLocation": artifact_location(d.path),
                "region": _region(d.line, d.column, d.end_line, d.end_column),
            }
        }
        if d.cell is not None:  # SARIF has no cells: the location's property bag names it
            location["properties"] = {
                "cell": d.cell,
                "cell_line": d.cell_line,
                "cell_column": d.cell_column,
            }
        result: dict[str, Any] = {
            "ruleId": d.code,
            "level": d.severity.value,
            "message": {"text": d.message},
            "locations": [location],
        }
        if d.code in index:
            result["ruleIndex"] = index[d.code]
        if d.fix is not None and (fix := _fix(d, d.fix)) is not None:
            result["fixes"] = [fix]
        results.append(result)
    root = "file://" + _uri_path(Path(os.getcwd())).rstrip("/") + "/"
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "xla-lint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": [rule_descriptor(r) for r in rules],
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": root}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def render(report: Report) -> str:
    return json.dumps(sarif_log(report), indent=2) + "\n"
