"""Line and column positions of reported nodes, computed only where reports are.

LibCST's ``MetadataWrapper.resolve(PositionProvider)`` generates the code of the whole
module with position tracking, after a full (empty) batched visit: on a file of a few
thousand lines that costs several times the parse. A report only needs the positions of
nodes inside a few module-level statements, so :func:`statement_positions` counts the
lines of the statements before them with plain code generation and runs LibCST's own
position-tracking code generation (``PositionProvidingCodegenState``, the class
``PositionProvider`` uses) on those statements alone. The positions are LibCST's:
1-based lines, 0-based columns, end exclusive.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import libcst as cst
from libcst.metadata import CodeRange, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState


def module_positions(tree: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of every node of ``tree`` (the slow, complete way)."""
    provider = PositionProvider()
    provider._computed = {}
    provider._gen_impl(tree)
    return provider._computed


def statement_positions(tree: cst.Module, statements: Iterable[cst.CSTNode]) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of every node inside the given module-level ``statements`` of ``tree``.

    Nodes elsewhere have no entry; a statement that is not in ``tree.body`` is ignored.
    """
    wanted = {id(s) for s in statements}
    provider = PositionProvider()
    provider._computed = {}
    line = 1 + sum(tree.code_for_node(h).count("\n") for h in tree.header)
    remaining = len(wanted)
    for stmt in tree.body:
        if not remaining:
            break
        if id(stmt) in wanted:
            state = PositionProvidingCodegenState(default_indent=tree.default_indent,
                                                  default_newline=tree.default_newline, provider=provider)
            state.line, state.column = line, 0
            stmt._codegen(state)
            line = state.line if state.column == 0 else state.line + 1
            remaining -= 1
        else:
            line += tree.code_for_node(stmt).count("\n")
    return provider._computed
