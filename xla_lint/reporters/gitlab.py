"""``--output-format gitlab``: a GitLab Code Quality report (a JSON list, ``[]`` when clean).

Each diagnostic becomes one issue, shaped as Ruff's ``gitlab`` format::

    {"check_name": "XLA004",
     "description": "XLA004: `print` without `flush=True` ...",
     "severity": "minor",
     "fingerprint": "808a935b8321d1bdf658eba99036fab8",
     "location": {"path": "train.py",
                  "positions": {"begin": {"line": 5, "column": 1}, "end": {"line": 5, "column": 20}}}}

``description`` starts with the code because GitLab's merge request widget shows the
description only. ``severity``: ``major`` for errors, ``minor`` for warnings (GitLab's
scale is info, minor, major, critical, blocker). ``location.path`` is relative to
``$CI_PROJECT_DIR`` when set (GitLab links issues to files by it), else to the current
folder; a file outside that folder keeps the path it was reported with.

``fingerprint`` is how GitLab tells a new finding from one already on the target branch,
so it must not change when unrelated lines move. It is the first 32 hex digits of the
SHA-256 of the code, the path, the message and the occurrence number of that same
(code, path, message) in the file (0 for the first, 1 for the second, ...): no line or
column, so adding lines above a finding keeps its fingerprint, and two identical findings
in one file still get different ones. Ruff hashes the rule name, the path and a counter
the same way (with Rust's ``DefaultHasher``, which is not stable across platforms; SHA-256
is). Changing a finding's message, or moving it to another file, gives a new fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter

from ..diagnostics import Diagnostic, Severity
from . import Report

SEVERITY = {Severity.ERROR: "major", Severity.WARNING: "minor"}


def project_path(path: str, root: str | None = None) -> str:
    """``path`` relative to ``root`` (default ``$CI_PROJECT_DIR``, else the current folder),
    with ``/`` separators; unchanged (but for separators) when it lies outside ``root`` or is ``-``."""
    if path == "-":
        return path
    root = root or os.environ.get("CI_PROJECT_DIR") or os.getcwd()
    try:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    except ValueError:  # another drive (Windows)
        rel = path
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        rel = path
    return rel.replace(os.sep, "/")


def fingerprint(code: str, path: str, message: str, occurrence: int) -> str:
    """32 hex digits of SHA-256 over code, path, message and occurrence number (no position)."""
    data = "\0".join((code, path, message, str(occurrence))).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:32]


def issues(diagnostics: list[Diagnostic]) -> list[dict]:
    """The Code Quality issues of ``diagnostics``, in order."""
    seen: Counter[tuple[str, str, str]] = Counter()
    out = []
    for d in diagnostics:
        path = project_path(d.path)
        key = (d.code, path, d.message)
        out.append(
            {
                "check_name": d.code,
                "description": f"{d.code}: {d.message}",
                "severity": SEVERITY[d.severity],
                "fingerprint": fingerprint(*key, seen[key]),
                "location": {
                    "path": path,
                    "positions": {
                        "begin": {"line": d.line, "column": d.column},
                        "end": {"line": d.end_line, "column": d.end_column},
                    },
                },
            }
        )
        seen[key] += 1
    return out


def render(report: Report) -> str:
    return json.dumps(issues(report.diagnostics), indent=2) + "\n"
