"""Parsing an edited document again from the top-level statements the edit touched.

LibCST parses a whole module at a time (~0.2 s for 1,000 lines here, about half of a lint),
and an edit usually changes one function. :func:`reparse` cuts the new text where the old
module's top-level statements were (each statement's code, its leading blank lines and
comments included, is a slice of the text), parses only the slice from the statement before
the edit to the statement after it, and puts the new statements in place of the old ones
(LibCST's nodes are immutable, so the others are shared). It gives up, and the caller parses
the whole text, whenever the result could differ from a full parse: an edit in the module's
header or footer comments, a slice that does not parse or parses to something that does not
print back to the slice exactly, trailing comments after the slice's last statement, another
indentation or line ending than the module's.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import libcst as cst

from ..sources.text import nesting_error


@dataclass(frozen=True)
class Parsed:
    """A text and its module; ``starts[k]`` is the offset of top-level statement ``k``'s code,
    and ``starts[-1]`` the end of the last one (where the footer begins)."""

    text: str
    module: cst.Module
    starts: tuple[int, ...]


def parsed(text: str, module: cst.Module) -> Parsed | None:
    """``module`` (the parse of ``text``) with its statements' offsets; None when its pieces do
    not print back to ``text`` (a byte-order mark, no final line break: parsed whole)."""
    if not module.has_trailing_newline or not module.body:
        return None
    header = len(module.with_changes(body=[], footer=[]).code) if module.header else 0
    starts = [header]
    for statement in module.body:
        code = module.code_for_node(statement)
        if text[starts[-1] : starts[-1] + len(code)] != code:
            return None
        starts.append(starts[-1] + len(code))
    footer = len(module.with_changes(body=[], header=[]).code) if module.footer else 0
    if starts[-1] + footer != len(text):
        return None
    return Parsed(text, module, tuple(starts))


def reparse(old: Parsed, text: str) -> Parsed | None:
    """The parse of ``text``, an edit of ``old.text``, from the statements around the edit;
    None when only a parse of the whole text can tell (see the module's docstring). Call it
    on a deep stack (:func:`xla_lint.sources.text.call_with_deep_stack`), as LibCST needs."""
    if text == old.text:
        return old
    start = common_prefix(old.text, text)
    room = min(len(old.text), len(text)) - start
    end = len(old.text) - common_prefix(old.text[::-1][:room], text[::-1][:room])
    starts, body = old.starts, old.module.body
    if start < starts[0] or end > starts[-1]:
        return None  # the header or footer changed
    first = min(bisect.bisect_right(starts, start) - 1, len(body) - 1)
    last = max(first, bisect.bisect_left(starts, end) - 1)
    first, last = max(0, first - 1), min(len(body) - 1, last + 1)
    delta = len(text) - len(old.text)
    piece = text[starts[first] : starts[last + 1] + delta]
    if nesting_error(piece) is not None:
        return None
    try:
        region = cst.parse_module(piece)
    except Exception:  # a syntax error (the full parse places it), or a parser panic
        return None
    module = old.module
    if (
        not region.body
        or region.footer
        or (region.header and first == 0)
        or not region.has_trailing_newline
        or region.default_indent != module.default_indent
        or region.default_newline != module.default_newline
    ):
        return None
    statements = list(region.body)
    if region.header:
        head = statements[0]
        statements[0] = head.with_changes(leading_lines=[*region.header, *head.leading_lines])
    module = module.with_changes(body=[*body[:first], *statements, *body[last + 1 :]])
    new_starts = list(starts[: first + 1])
    for statement in statements:
        new_starts.append(new_starts[-1] + len(module.code_for_node(statement)))
    if text[starts[first] : new_starts[-1]] != piece:
        return None
    new_starts += [offset + delta for offset in starts[last + 2 :]]
    return Parsed(text, module, tuple(new_starts))


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (binary search on slices)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
