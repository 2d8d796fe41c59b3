"""Between xla-lint's records and LSP's: positions, diagnostics, text edits, hover text.

xla-lint counts 1-based lines and 1-based columns in characters (code points), lines cut
only at ``\\n``, ``\\r\\n`` and ``\\r`` (:func:`xla_lint.sources.text.split_lines`), as LSP cuts them;
LSP counts 0-based lines and columns in the code units the client and server agreed on
(UTF-16 unless the client offers another), which ``codec`` counts.
"""

from __future__ import annotations

import bisect
import difflib

from lsprotocol import types as lsp
from pygls.workspace.position_codec import PositionCodec

from ..diagnostics import Diagnostic, Severity
from ..reporters.sarif import INFORMATION_URI
from ..sources.text import line_starts, split_lines
from .incremental import common_prefix

SOURCE = "xla-lint"
RULES_PAGE = f"{INFORMATION_URI}/blob/main/docs/rules.md"
UNUSED_NOQA = "XLA900"


class Text:
    """A document's text, cut into lines once, with the client's position encoding."""

    def __init__(self, text: str, codec: PositionCodec) -> None:
        self.text = text
        self.lines = split_lines(text)
        self.starts = line_starts(self.lines)
        self.codec = codec

    def position(self, line: int, column: int) -> lsp.Position:
        """The LSP position of 1-based ``line`` and ``column`` (clamped to the line's text)."""
        if line > len(self.lines):
            return self.at(len(self.text))
        body = self.lines[line - 1].rstrip("\r\n")
        return lsp.Position(line - 1, self.codec.client_num_units(body[: max(0, column - 1)]))

    def at(self, offset: int) -> lsp.Position:
        """The LSP position of a character offset into the text."""
        index = max(0, bisect.bisect_right(self.starts, offset) - 1)
        if index >= len(self.lines):  # the end of the text
            if not self.lines or self.lines[-1].endswith(("\n", "\r")):
                return lsp.Position(len(self.lines), 0)
            index = len(self.lines) - 1
        start = self.starts[index]
        return lsp.Position(index, self.codec.client_num_units(self.text[start:offset]))

    def place(self, position: lsp.Position) -> tuple[int, int]:
        """The 1-based line and column (in characters) of an LSP position."""
        if position.line >= len(self.lines):
            return len(self.lines) + 1, 1
        body = self.lines[position.line].rstrip("\r\n")
        units = 0
        for index, char in enumerate(body):
            if units >= position.character:
                return position.line + 1, index + 1
            units += self.codec.client_num_units(char)
        return position.line + 1, len(body) + 1

    def edits_to(self, new: str) -> list[lsp.TextEdit]:
        """The text edits that turn this text into ``new``: one per run of changed lines, each
        trimmed to the characters that differ."""
        old_lines, new_lines = self.lines, split_lines(new)
        edits = []
        matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            old, replacement = "".join(old_lines[i1:i2]), "".join(new_lines[j1:j2])
            head = common_prefix(old, replacement)
            tail = common_prefix(old[head:][::-1], replacement[head:][::-1])
            start, end = self.starts[i1] + head, self.starts[i2] - tail
            edits.append(
                lsp.TextEdit(
                    lsp.Range(self.at(start), self.at(end)),
                    replacement[head : len(replacement) - tail],
                )
            )
        return edits


def rule_url(code: str) -> str | None:
    """The address of rule ``code``'s section of ``docs/rules.md``, None for an unknown code."""
    from ..docs import _anchor  # the rule classes: the server has them loaded to lint anyway
    from ..rules import rule_by_code

    rule = rule_by_code(code)
    return None if rule is None else f"{RULES_PAGE}#{_anchor(rule)}"


def to_lsp(d: Diagnostic, text: Text) -> lsp.Diagnostic:
    """An xla-lint diagnostic as LSP shows it: the rule code with a link to its explanation;
    an unused ``# noqa`` (XLA900) is marked unnecessary (editors fade it)."""
    url = rule_url(d.code)
    return lsp.Diagnostic(
        range=lsp.Range(text.position(d.line, d.column), text.position(d.end_line, d.end_column)),
        message=d.message,
        severity=(
            lsp.DiagnosticSeverity.Error
            if d.severity is Severity.ERROR
            else lsp.DiagnosticSeverity.Warning
        ),
        code=d.code,
        code_description=lsp.CodeDescription(href=url) if url else None,
        source=SOURCE,
        tags=[lsp.DiagnosticTag.Unnecessary] if d.code == UNUSED_NOQA else None,
    )


def hover_text(code: str) -> str | None:
    """Markdown for rule ``code``: its code, name, severity, summary and a link to the
    explanation in ``docs/rules.md``; None for an unknown code."""
    from ..rules import rule_by_code

    rule = rule_by_code(code)
    if rule is None:
        return None
    preview = " (preview)" if rule.preview else ""
    return (
        f"**{rule.code}** `{rule.name}` ({rule.severity.value}{preview})\n\n{rule.summary}\n\n"
        f"[Explanation]({rule_url(code)}) · `xla-lint rule {rule.code}`"
    )
