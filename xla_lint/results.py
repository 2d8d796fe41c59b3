"""What linting one file yields (:class:`FileResult`) and its JSON form (the result cache's), and
the XLA000 diagnostic for a file that cannot be read or parsed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .catalogue import BY_CODE
from .diagnostics import Diagnostic, Severity
from .program.facts import FileFacts
from .sources.suppress import Suppressions

# Parsing and rules live in xla_lint/linter.py (LibCST), imported when a file needs a parse.
SYNTAX_ERROR = BY_CODE["XLA000"]


@dataclass
class FileResult:
    """What one file (or document) yields before program facts are applied.

    ``facts`` is None for files skipped by the prefilter; a document's code blocks
    each contribute facts (``block_facts``), joined as one program.
    """

    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    facts: list[FileFacts] = field(default_factory=list)
    suppressions: Suppressions = field(default_factory=Suppressions)
    parsed: bool = False
    skipped_reason: str | None = None
    notes: list[str] = field(
        default_factory=list
    )  # for --verbose: doc blocks skipped (path:line:col: why)
    shell: bool = False  # a shell script (xla_lint/pipeline/shell.py): its noqa comments get no fix


def syntax_error(path: str, message: str, line: int, column: int) -> Diagnostic:
    """The XLA000 diagnostic for a file that cannot be read or parsed."""
    return Diagnostic(
        SYNTAX_ERROR.code,
        SYNTAX_ERROR.name,
        f"cannot parse: {message}",
        path,
        line,
        column,
        line,
        column + 1,
        Severity.ERROR,
    )


def result_to_json(result: FileResult) -> dict:
    """A :class:`FileResult` as JSON data (for the result cache); see :func:`result_from_json`."""
    return {
        "path": result.path,
        "diagnostics": [
            {
                **d.to_json(),
                "requires": [list(r) for r in d.requires],
                "launch": d.launch,
                "option": d.option.to_json() if d.option else None,
                "unless": list(d.unless),
                "stable_requires": [list(r) for r in d.stable_requires],
                "runs_in": list(d.runs_in),
                "reach": list(d.reach),
            }
            for d in result.diagnostics
        ],
        "facts": [f.to_json() for f in result.facts],
        "suppressions": result.suppressions.to_json(),
        "parsed": result.parsed,
        "skipped_reason": result.skipped_reason,
        "notes": result.notes,
    }


def result_from_json(data: dict) -> FileResult:
    """Inverse of :func:`result_to_json`; raises KeyError/TypeError/ValueError on malformed data."""
    path = data["path"]
    reason = data["skipped_reason"]
    notes = data["notes"]
    if (
        not isinstance(path, str)
        or not (reason is None or isinstance(reason, str))
        or not (isinstance(notes, list) and all(isinstance(n, str) for n in notes))
    ):
        raise TypeError("malformed file result")
    return FileResult(
        path,
        [Diagnostic.from_json(d) for d in data["diagnostics"]],
        [FileFacts.from_json(f) for f in data["facts"]],
        Suppressions.from_json(data["suppressions"]),
        bool(data["parsed"]),
        reason,
        notes,
    )
