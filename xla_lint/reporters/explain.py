"""``xla-lint rule CODE`` for a terminal: the rule's header, summary and explanation.

Without color the explanation is printed as its Markdown source. With color, ``## ``
headings become bold underlined titles, fenced code blocks are indented and shown in
cyan without their fences, and inline ``code`` is cyan without its backticks.
"""

from __future__ import annotations

import re

from .text import style

_INLINE = re.compile(r"`([^`\n]+)`")


def render_markdown(text: str, color: bool) -> str:
    """Markdown ``text`` (headings, fenced code, inline code) for a terminal."""
    if not color:
        return text.rstrip()
    out: list[str] = []
    in_code = False
    for row in text.rstrip().splitlines():
        if row.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            out.append(style("    " + row, True, fg="cyan"))
        elif row.startswith("#"):
            out.append(style(row.lstrip("#").strip(), True, bold=True, underline=True))
        else:
            out.append(_INLINE.sub(lambda m: style(m.group(1), True, fg="cyan"), row))
    return "\n".join(out)


def render_rule(rule, color: bool = False) -> str:
    """The text ``xla-lint rule CODE`` prints: ``CODE name (severity, fixable, ...)``, summary, explanation."""
    flags = (
        [rule.severity.value]
        + (["fixable"] if rule.fixable else [])
        + (["preview: on with --preview"] if rule.preview else [])
        + ([] if rule.default_enabled else ["off by default"])
    )
    head = f"{style(rule.code, color, bold=True)} {rule.name} ({', '.join(flags)})"
    return f"{head}\n\n{rule.summary}\n\n{render_markdown(rule.explanation, color)}\n"
