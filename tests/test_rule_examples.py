"""Every rule's own valid and invalid examples, run through the real engine.

An invalid example must be reported on exactly its listed lines (as ``example.py`` of a
small program, with the example's extra modules beside it), and, where the example gives
the fixed source, ``--fix`` must produce exactly that. A valid example must not be reported.
"""

from __future__ import annotations

import pytest
from helpers import fix_text, lint_tree, write_tree

from xla_lint.pipeline.fixes import parses
from xla_lint.rules import all_rules

RULES = [r for r in all_rules() if r.code != "XLA000"]


def _entry(example) -> dict:
    """An example alone is a program run as `python example.py` (its modes come from its own
    code); with other modules beside it, they say which file is the entry, as a real tree would."""
    return {} if example.files else {"entry_points": {"example.py": "single"}}


def _cases(kind: str):
    for rule in RULES:
        for i, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.code}-{kind}-{i}")


def _program(tmp_path, example):
    files = {"example.py": example.code, **dict(example.files)}
    for rel in list(files):
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            files.setdefault("/".join(parts[:i]) + "/__init__.py", "")
    write_tree(tmp_path, files)


@pytest.mark.parametrize("rule,example", list(_cases("invalid")))
def test_invalid_example_is_reported(tmp_path, rule, example):
    _program(tmp_path, example)
    result, _, _ = lint_tree(
        tmp_path, select=[rule.code, *rule.examples_need], preview=rule.preview, **_entry(example)
    )
    lines = sorted(
        d.line for d in result.diagnostics if d.path == "example.py" and d.code == rule.code
    )
    assert lines == sorted(example.lines), (
        f"{rule.code} reported lines {lines} for:\n{example.code}"
    )
    if example.fixed is not None:
        fixed = fix_text(
            tmp_path,
            "example.py",
            [rule.code, *rule.examples_need],
            preview=rule.preview,
            **_entry(example),
        )
        assert fixed == example.fixed
        assert parses(fixed)
    if example.unsafe_fixed is not None:
        kw = dict(preview=rule.preview, **_entry(example))
        select = [rule.code, *rule.examples_need]
        unsafe = fix_text(tmp_path, "example.py", select, unsafe_fixes=True, **kw)
        assert unsafe == example.unsafe_fixed
        assert parses(unsafe)
        if example.fixed is None:  # --fix alone leaves an unsafe fix out
            assert fix_text(tmp_path, "example.py", select, **kw) == example.code


@pytest.mark.parametrize("rule,example", list(_cases("valid")))
def test_valid_example_is_not_reported(tmp_path, rule, example):
    _program(tmp_path, example)
    result, _, _ = lint_tree(
        tmp_path, select=[rule.code, *rule.examples_need], preview=rule.preview, **_entry(example)
    )
    found = [
        f"{d.line}: {d.message}"
        for d in result.diagnostics
        if d.path == "example.py" and d.code == rule.code
    ]
    assert found == [], f"{rule.code} wrongly reported {found} for:\n{example.code}"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_is_documented_and_proven(rule):
    assert rule.code.startswith("XLA") and len(rule.code) == 6
    assert rule.name == rule.name.lower() and " " not in rule.name
    for heading in (
        "## What it does",
        "## Why is this bad",
        "## Example",
        "## Use instead",
        "## References",
    ):
        assert heading in rule.explanation, f"{rule.code} explanation lacks {heading!r}"
    assert rule.invalid, f"{rule.code} has no invalid example"
    assert rule.valid, f"{rule.code} has no valid example"
    if rule.fixable:
        assert any(e.fixed is not None or e.unsafe_fixed is not None for e in rule.invalid), (
            f"{rule.code} is fixable but no example shows the fix"
        )
