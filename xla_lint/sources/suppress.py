"""Suppression comments: ``# noqa``, ``# noqa: XLA001,XLA004`` and ``# xla-lint: disable-file=XLA004``.

Comments are found with :mod:`tokenize`, so ``"# noqa"`` inside a string does not count.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field, fields, replace

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.I)
_DISABLE_FILE = re.compile(
    r"#\s*xla-lint:\s*disable-file(?:\s*=\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?",
    re.I,
)
_CODE = re.compile(r"[A-Za-z]+[0-9]+")


@dataclass(frozen=True)
class NoqaComment:
    """A ``# noqa`` on ``line``; ``codes`` None for a bare ``# noqa``. ``column``/``end_column``
    (1-based, end exclusive) span the directive within the line.

    What removing it takes (used by XLA900 unused-noqa): ``code_spans`` holds each code as
    written, upper-cased, with its 1-based column span; deleting the whole directive replaces
    ``remove_column``..``remove_end_column`` (which takes the blanks before a comment that is
    only the directive) with ``replacement`` (``"#"`` when comment text follows it).
    """

    line: int
    column: int
    end_column: int
    codes: frozenset[str] | None
    code_spans: tuple[tuple[str, int, int], ...] = ()
    remove_column: int = 0
    remove_end_column: int = 0
    replacement: str = ""

    def moved(self, line_offset: int, column_offset: int) -> NoqaComment:
        """The same comment at a position moved by a code block's offsets."""
        return NoqaComment(
            self.line + line_offset,
            self.column + column_offset,
            self.end_column + column_offset,
            self.codes,
            tuple((c, a + column_offset, b + column_offset) for c, a, b in self.code_spans),
            self.remove_column + column_offset,
            self.remove_end_column + column_offset,
            self.replacement,
        )


@dataclass
class Suppressions:
    """The suppression comments of one source, by line (1-based, in the source's own numbering)."""

    noqa: dict[int, NoqaComment] = field(default_factory=dict)
    disabled_codes: frozenset[str] = frozenset()
    disable_all: bool = False
    # Lines inside a multi-line string, each -> the string's last line, where a comment can go:
    # as in Ruff, a noqa comment after a multi-line string covers every line of the string.
    string_ends: dict[int, int] = field(default_factory=dict)

    def shift(self, line_offset: int, column_offset: int) -> Suppressions:
        """The same comments, with positions moved by a code block's offsets."""
        return Suppressions(
            {
                line + line_offset: c.moved(line_offset, column_offset)
                for line, c in self.noqa.items()
            },
            self.disabled_codes,
            self.disable_all,
            {a + line_offset: b + line_offset for a, b in self.string_ends.items()},
        )

    def merge(self, other: Suppressions) -> None:
        self.noqa.update(other.noqa)
        self.disabled_codes |= other.disabled_codes
        self.disable_all = self.disable_all or other.disable_all
        self.string_ends.update(other.string_ends)

    def comment_line(self, line: int) -> int:
        """The line whose ``# noqa`` covers ``line``: the last line of the multi-line string
        ``line`` is in, else ``line`` itself."""
        return self.string_ends.get(line, line)

    def suppresses(self, code: str, line: int) -> NoqaComment | bool | None:
        """The comment silencing ``code`` on ``line``: a NoqaComment, True for a file-wide
        directive, or None when nothing silences it. XLA000 is never silenced by noqa."""
        if code == "XLA000":
            return None
        if self.disable_all or code in self.disabled_codes:
            return True
        comment = self.noqa.get(self.comment_line(line))
        if comment is not None and (comment.codes is None or code in comment.codes):
            return comment
        return None

    def to_json(self) -> dict:
        """The comments as JSON data (for the result cache): every field of every
        :class:`NoqaComment`, sets and tuples tagged so :meth:`from_json` restores them."""
        return {
            "noqa": [
                {f.name: _encode(getattr(c, f.name)) for f in fields(NoqaComment)}
                for c in self.noqa.values()
            ],
            "disabled_codes": sorted(self.disabled_codes),
            "disable_all": self.disable_all,
            "string_ends": sorted(self.string_ends.items()),
        }

    @classmethod
    def from_json(cls, data: dict) -> Suppressions:
        """Inverse of :meth:`to_json`; raises KeyError/TypeError/ValueError on a malformed object
        (including one written by a version whose :class:`NoqaComment` had other fields, or a
        value of the wrong type: checked, never converted)."""
        noqa = {}
        for item in data["noqa"]:
            comment = NoqaComment(**{f.name: _decode(item[f.name]) for f in fields(NoqaComment)})
            if not _well_typed(comment):
                raise TypeError("malformed noqa comment")
            noqa[comment.line] = comment
        disabled, disable_all = data["disabled_codes"], data["disable_all"]
        if type(disable_all) is not bool or not all(isinstance(c, str) for c in disabled):
            raise TypeError("malformed file-wide suppression")
        ends = data["string_ends"]
        if not isinstance(ends, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and all(type(n) is int for n in pair)
            for pair in ends
        ):
            raise TypeError("malformed string lines")
        return cls(noqa, frozenset(disabled), disable_all, {a: b for a, b in ends})


def _well_typed(comment: NoqaComment) -> bool:
    """Every field of ``comment`` holds a value of its declared type."""
    return (
        all(
            type(v) is int
            for v in (
                comment.line,
                comment.column,
                comment.end_column,
                comment.remove_column,
                comment.remove_end_column,
            )
        )
        and isinstance(comment.replacement, str)
        and (
            comment.codes is None
            or (type(comment.codes) is frozenset and all(isinstance(c, str) for c in comment.codes))
        )
        and type(comment.code_spans) is tuple
        and all(
            type(span) is tuple
            and len(span) == 3
            and isinstance(span[0], str)
            and type(span[1]) is int
            and type(span[2]) is int
            for span in comment.code_spans
        )
    )


def _encode(value):
    if isinstance(value, frozenset):
        return {"set": sorted(_encode(v) for v in value)}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if value is None or isinstance(value, (str, int, bool)):
        return value
    raise TypeError(f"cannot store a {type(value).__name__} in the cache")


def _decode(value):
    if isinstance(value, dict):
        if set(value) == {"set"}:
            return frozenset(_decode(v) for v in value["set"])
        if set(value) == {"tuple"}:
            return tuple(_decode(v) for v in value["tuple"])
        raise ValueError("unknown tagged value")
    if isinstance(value, list):
        raise ValueError("untagged list")
    return value


def _codes(text: str | None) -> frozenset[str] | None:
    if not text:
        return None
    return frozenset(c.upper() for c in _CODE.findall(text))


_LONE_CR = re.compile(r"\r(?!\n)")


# Python 3.12+ tokenizes an f-string into FSTRING_START ... FSTRING_END (3.11: one STRING).
FSTRING_START = getattr(tokenize, "FSTRING_START", -1)
FSTRING_END = getattr(tokenize, "FSTRING_END", -1)


def _string_ends(tokens: list[tokenize.TokenInfo]) -> dict[int, int]:
    """Each line inside a multi-line string of ``tokens`` but its last -> that last line."""
    ends: dict[int, int] = {}
    fstring_starts: list[int] = []
    for tok in tokens:
        if tok.type == FSTRING_START:
            fstring_starts.append(tok.start[0])
        elif tok.type == tokenize.STRING or (tok.type == FSTRING_END and fstring_starts):
            first = fstring_starts.pop() if tok.type == FSTRING_END else tok.start[0]
            if tok.type == tokenize.STRING and fstring_starts:
                continue  # a string inside an f-string's braces: the f-string's lines count
            if not fstring_starts:
                for line in range(first, tok.end[0]):
                    ends.setdefault(line, tok.end[0])
    return ends


def string_ends(text: str) -> dict[int, int]:
    """Each line of ``text`` inside a multi-line string but its last -> that last line, where
    a comment can go; empty when ``text`` does not tokenize."""
    try:
        return _string_ends(list(tokenize.generate_tokens(io.StringIO(text).readline)))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return {}


def find_suppressions(text: str) -> Suppressions:
    """Every suppression comment of ``text`` (which must tokenize; a failure yields none), and
    the lines of its multi-line strings (:attr:`Suppressions.string_ends`)."""
    result = Suppressions()
    if "noqa" not in text and "xla-lint" not in text:
        return result  # (no comment to map a string's lines to)
    # tokenize cuts lines at "\n" only; a lone "\r" ends a line for Python (and for the
    # reported positions) too. "\r" -> "\n" keeps every line number and column.
    if "\r" in text:
        text = _LONE_CR.sub("\n", text)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return result
    result.string_ends = _string_ends(tokens)
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        m = _DISABLE_FILE.search(tok.string)
        if m:
            codes = _codes(m.group("codes"))
            if codes is None:
                result.disable_all = True
            else:
                result.disabled_codes |= codes
            continue
        m = _NOQA.search(tok.string)
        if m:
            result.noqa[tok.start[0]] = _noqa_comment(tok, m)
    return result


def _noqa_comment(tok: tokenize.TokenInfo, m: re.Match) -> NoqaComment:
    """The NoqaComment for directive ``m`` found in comment token ``tok`` (positions 1-based)."""
    line, col = tok.start
    comment = tok.string
    spans: tuple[tuple[str, int, int], ...] = ()
    if m.group("codes"):
        base = col + m.start("codes") + 1
        spans = tuple(
            (c.group().upper(), base + c.start(), base + c.end())
            for c in _CODE.finditer(m.group("codes"))
        )
    before, after = comment[: m.start()].strip(), comment[m.end() :].strip()
    end = col + len(comment)
    if after:
        # Text follows the directive in the same comment: keep it as a comment.
        start, stop, replacement = col + m.start(), col + m.end(), "" if before else "#"
    elif before:
        start, stop, replacement = col + len(comment[: m.start()].rstrip()), end, ""
    else:
        start, stop, replacement = len(tok.line[:col].rstrip()), end, ""
    return NoqaComment(
        line,
        col + m.start() + 1,
        col + m.end() + 1,
        _codes(m.group("codes")),
        spans,
        start + 1,
        stop + 1,
        replacement,
    )


def find_shell_suppressions(text: str) -> Suppressions:
    """The suppression comments of a shell script: ``# noqa: XLA013`` and
    ``# xla-lint: disable-file=...`` in its comments, as bash finds them (a ``#`` that starts a
    word, outside quotes; a quote left open continues on the next lines).

    A command continued with ``\\`` (or by a quote left open) is reported at its first line, where
    no comment can go: a ``# noqa`` on its last line is taken as the first line's.
    """
    result = Suppressions()
    if "noqa" not in text and "xla-lint" not in text:
        return result
    quote = ""  # the quote open at the start of the line
    start = 0  # the first line of the command the current line continues
    for number, line in enumerate(text.splitlines(), 1):
        if not start:
            start = number
        column = None
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if quote:
                if c == "\\" and quote == '"':
                    i += 2
                    continue
                if c == quote:
                    quote = ""
            elif c == "\\":
                i += 2
                continue
            elif c in "'\"":
                quote = c
            elif c == "#" and (i == 0 or line[i - 1] in " \t;&|()"):
                column = i
                break
            i += 1
        if column is not None:
            comment = line[column:]
            token = tokenize.TokenInfo(
                tokenize.COMMENT, comment, (number, column), (number, n), line
            )
            m = _DISABLE_FILE.search(comment)
            if m:
                codes = _codes(m.group("codes"))
                if codes is None:
                    result.disable_all = True
                else:
                    result.disabled_codes |= codes
            else:
                m = _NOQA.search(comment)
                if m:  # keyed and shown at the command's first line (where it is reported)
                    result.noqa[start] = replace(_noqa_comment(token, m), line=start)
        continued = column is None and line.rstrip().endswith("\\")
        if not quote and not continued:
            start = 0
    return result
