"""Output formats: one small module per format, each a function from a finished run to text.

A reporter takes a :class:`Report` and returns the text to print on standard output.
Formats: ``text`` (default; the same as ``concise``), ``concise``, ``full`` (source line,
caret and fix diff), ``json``, ``json-lines`` (one JSON object a line), ``sarif`` (SARIF
2.1.0), ``github`` (GitHub Actions workflow commands), ``gitlab`` (GitLab Code Quality),
``junit`` (JUnit XML) and ``pylint`` (``path:line: [CODE] message``); the names are
Ruff's. :func:`rule_to_json` is the one description of a rule as data: the ``rule
--output-format json`` catalogue and the SARIF rule table are both made from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..diagnostics import Diagnostic


@dataclass
class Report:
    """What a reporter gets.

    ``diagnostics``: the diagnostics to show, sorted by path and position. ``files``: how
    many files were linted; ``fixed``: how many fixes ``--fix`` applied. ``color``: use ANSI
    styles. ``sources``: path -> text, for formats that quote lines (``full``). ``quiet``:
    diagnostics only, no summary. ``show_fixes``: list the fixes (``applied`` holds the
    diagnostics whose fixes ``--fix`` applied; None when not fixing). ``unsafe_fixes``:
    ``--fix`` applies unsafe fixes too, so they count as fixable.
    """

    diagnostics: list[Diagnostic]
    files: int = 0
    fixed: int = 0
    color: bool = False
    sources: dict[str, str] = field(default_factory=dict)
    quiet: bool = False
    show_fixes: bool = False
    applied: list[Diagnostic] | None = None
    unsafe_fixes: bool = False


Reporter = Callable[[Report], str]


# Format name -> the module of its reporter, imported when a report of that format is made (the
# JUnit reporter's XML library alone costs a run 5 ms of start-up).
_MODULES = {
    "text": "text",
    "concise": "text",
    "full": "full",
    "json": "json_format",
    "sarif": "sarif",
    "github": "github",
    "gitlab": "gitlab",
    "junit": "junit",
    "json-lines": "json_lines",
    "pylint": "pylint",
}


def _render(module: str) -> Reporter:
    """The ``render`` of ``xla_lint.reporters.<module>``, imported on the first call."""

    def render(report: Report) -> str:
        import importlib

        return importlib.import_module(f"{__name__}.{module}").render(report)

    return render


def reporters() -> dict[str, Reporter]:
    """Format name -> reporter."""
    return {name: _render(module) for name, module in _MODULES.items()}


_SECTION = re.compile(r"^## What it does\n(?P<body>.*?)(?=^## |\Z)", re.S | re.M)


def rule_description(explanation: str) -> str:
    """The ``## What it does`` section of a rule's explanation, as one paragraph of text."""
    m = _SECTION.search(explanation)
    body = m.group("body") if m else explanation
    return " ".join(body.split())


def rule_to_json(rule) -> dict:
    """A rule as data: the one source ``xla-lint rule --output-format json`` and the SARIF rule table are made from.

    Keys: code, name, summary (one line), description (the "What it does" section),
    message, severity (``error``/``warning``), fixable, default_enabled, preview (on only with ``--preview``),
    explanation (Markdown).
    """
    return {
        "code": rule.code,
        "name": rule.name,
        "summary": rule.summary,
        "description": rule_description(rule.explanation),
        "message": rule.message,
        "severity": rule.severity.value,
        "fixable": rule.fixable,
        "default_enabled": rule.default_enabled,
        "preview": rule.preview,
        "explanation": rule.explanation,
    }
