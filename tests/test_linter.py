"""The engine's parse (:func:`xla_lint.linter.parse_module`): LibCST's tree without its per-node
validation during the parse, and validation back for every node built afterwards."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from xla_lint import linter

ROOT = Path(__file__).resolve().parents[1]


def _sources() -> list[Path]:
    return sorted((ROOT / "xla_lint" / "rules").rglob("*.py"))[:12] + [
        ROOT / "xla_lint" / "linter.py"
    ]


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.name)
def test_the_tree_is_libcsts_own(path):
    text = path.read_text()
    tree = linter.parse_module(text)
    assert tree.code == text
    assert tree.deep_equals(cst.parse_module(text))


def test_nodes_built_after_a_parse_are_validated():
    linter.parse_module("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.SimpleWhitespace("not whitespace")


def test_validation_comes_back_when_the_parse_fails():
    with pytest.raises(cst.ParserSyntaxError):
        linter.parse_module("def f(:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.SimpleWhitespace("x")


def test_the_parse_itself_does_not_validate(monkeypatch):
    """What the parse skips: a node LibCST's parser builds runs no ``_validate``."""
    calls = []
    original = cst.SimpleWhitespace._validate

    def counting(self):
        calls.append(self)
        return original(self)

    monkeypatch.setattr(cst.SimpleWhitespace, "_validate", counting)
    linter.parse_module("x = 1  # c\n")
    assert calls == []
    cst.parse_module("x = 1  # c\n")
    assert calls  # LibCST's own parse validates every whitespace node
