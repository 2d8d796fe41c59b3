"""Output formats: one small module per format, each a function from a finished run to text.

A reporter takes a :class:`Report` and returns the text to print on standard output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..diagnostics import Diagnostic


@dataclass
class Report:
    """What a reporter gets: the diagnostics to show (sorted), the number of files linted,
    how many fixes were applied, and display options."""

    diagnostics: list[Diagnostic]
    files: int = 0
    fixed: int = 0
    color: bool = False
    sources: dict[str, str] = field(default_factory=dict)  # path -> text, for formats that quote lines


Reporter = Callable[[Report], str]


def reporters() -> dict[str, Reporter]:
    """Format name -> reporter."""
    from . import json_format, text

    return {
        "text": text.render,
        "json": json_format.render,
    }
