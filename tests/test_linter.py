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


def test_overlapping_parses_in_two_threads_leave_validation_restored(monkeypatch):
    """The editor server parses in threads: thread A starts, B starts, A ends, B ends. Saving
    and restoring ``CSTNode.__post_init__`` per call left validation off for good after that
    order; the count of running parses restores it when the last one ends."""
    import threading

    import libcst as cst

    from xla_lint import linter

    original = cst.CSTNode.__post_init__
    real_parse = cst.parse_module
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def staged(text):
        if text.startswith("a"):
            a_in.set()
            assert b_in.wait(10)  # B starts while A runs
        else:
            assert a_in.wait(10)
            b_in.set()
            assert a_out.wait(10)  # ... and ends after A
        return real_parse(text)

    monkeypatch.setattr(cst, "parse_module", staged)

    def parse_a():
        linter.parse_module("a = 1\n")
        a_out.set()

    threads = [
        threading.Thread(target=parse_a),
        threading.Thread(target=linter.parse_module, args=("b = 2\n",)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert cst.CSTNode.__post_init__ is original
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")  # validation is on again
