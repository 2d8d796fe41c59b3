"""``--add-noqa``: write ``# noqa: CODE`` on every line that has a diagnostic, so an existing
codebase can adopt xla-lint and fail only on new findings (Ruff's ``--add-noqa``).

A code is added to the comment on the line where its diagnostic starts, or, for a line inside
a string that spans lines, after that string (a ``# noqa`` there covers every line of the
string, as in Ruff), which is where :meth:`xla_lint.sources.suppress.Suppressions.suppresses` looks. An existing ``# noqa: CODES`` on
the line gets the new codes merged in (``# noqa: XLA004, E501``); a bare ``# noqa`` already
silences everything; another comment (``# type: ignore``) is kept and the directive goes
after it. Lines a comment cannot end (continued with a backslash) are left alone and counted as skipped. Comments are found with the tokenizer, so
a ``"# noqa"`` inside a string is not taken for one.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

from ..sources.suppress import find_suppressions, string_ends
from ..sources.text import split_lines


@dataclass(frozen=True)
class NoqaEdit:
    """What :func:`add_noqa` did to one text: the new text, lines changed, lines it could not change."""

    text: str
    added: int
    skipped: tuple[int, ...]


def add_noqa(text: str, wanted: dict[int, set[str]]) -> NoqaEdit:
    """``text`` with the codes of ``wanted`` (1-based line -> codes) in a ``# noqa`` on each line.

    Line ends and every other byte are kept. Idempotent: codes already in the line's
    directive (or a bare ``# noqa``) add nothing. Raises ValueError or SyntaxError for text
    the tokenizer rejects (the caller skips such a file).
    """
    lines = split_lines(text)
    closed = _lines_a_comment_may_end(text)
    existing = find_suppressions(text).noqa
    ends = string_ends(text)  # a line inside a multi-line string: the comment goes after it
    by_line: dict[int, set[str]] = {}
    for number, wanted_codes in wanted.items():
        by_line.setdefault(ends.get(number, number), set()).update(wanted_codes)
    added = 0
    skipped = []
    for number in sorted(by_line):
        if not 1 <= number <= len(lines):
            continue
        if number not in closed:
            skipped.append(number)
            continue
        line = lines[number - 1]
        body = line.rstrip("\r\n")
        end = line[len(body) :]
        comment = existing.get(number)
        if comment is not None and comment.codes is None:
            continue  # a bare noqa comment silences every code already
        have = set(comment.codes or ()) if comment is not None else set()
        new = sorted(by_line[number] - have)
        if not new:
            continue
        if comment is not None and comment.code_spans:
            first, last = comment.code_spans[0][1], comment.code_spans[-1][2]
            codes = [c for c, _, _ in comment.code_spans] + new
            body = body[: first - 1] + ", ".join(dict.fromkeys(codes)) + body[last - 1 :]
        else:
            body = body.rstrip() + "  # noqa: " + ", ".join(new)
        lines[number - 1] = body + end
        added += 1
    return NoqaEdit("".join(lines), added, tuple(skipped))


def _lines_a_comment_may_end(text: str) -> set[int]:
    """1-based lines whose end is outside a string and not continued by a backslash."""
    lines = split_lines(text)
    may = set(range(1, len(lines) + 1))
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                may -= set(
                    range(tok.start[0], tok.end[0])
                )  # every line the string spans but its last
    except tokenize.TokenError as exc:
        raise ValueError(f"cannot tokenize: {exc.args[0]}") from None
    for number, line in enumerate(lines, 1):
        if line.rstrip("\r\n").endswith("\\"):
            may.discard(number)
    return may
