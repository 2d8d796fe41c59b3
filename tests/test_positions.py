"""Positions computed statement by statement equal LibCST's whole-module PositionProvider."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from xla_lint.positions import statement_positions
from xla_lint.walk import iter_nodes

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("xla_lint/**/*.py"), *ROOT.glob("examples/**/*.py")])
EDGE_CASES = [
    "#!/usr/bin/env python\n# header comment\n\n\nimport torch_xla\nx = 1; y = 2\n\n\ndef f():\n    return (1,\n            2)\n",
    "x = 1",  # no trailing newline
    "\n\n# only comments before\nif True:\n    pass\nelse:\n    print('a')\n",
]


@pytest.mark.parametrize("source", [p.read_text(encoding="utf-8") for p in SOURCES[:40]] + EDGE_CASES)
def test_statement_positions_match_libcst(source):
    tree = cst.parse_module(source)
    full = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    chosen = tree.body[::3] + tree.body[-1:]
    partial = statement_positions(tree, chosen)
    checked = 0
    for stmt in chosen:
        for node in iter_nodes(stmt, frozenset()):
            assert partial[node] == full[node]
            checked += 1
    assert checked > 0
