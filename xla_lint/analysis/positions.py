"""Line and column positions of reported nodes, computed only where reports are.

LibCST's ``MetadataWrapper.resolve(PositionProvider)`` generates the code of the whole
module with position tracking, after a full (empty) batched visit: on a file of a few
thousand lines that costs several times the parse. A report needs the positions of a few
nodes only, so :func:`locate` runs LibCST's own position-tracking code generation
(``PositionProvidingCodegenState``, the class ``PositionProvider`` uses) on the innermost
statement holding each reported node, started at that statement's line and indentation.

The line comes from CPython's parse of the same text (:func:`xla_lint.sources.text.python_syntax`,
which the engine runs anyway), matched statement by statement along the path from the
module down to the reported statement. Every placement is checked: the statement's own
generated position must equal CPython's line and column for it, or the node is placed the
slow way (the module-level statement, then the whole module). The positions are LibCST's:
1-based lines, 0-based columns, end exclusive.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from typing import cast

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from ..sources.text import LINE_BREAK as _LINE_BREAK
from .walk import children

_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)

# The CPython statement types each LibCST statement type may stand for.
_AST_TYPES: dict[type, tuple[type, ...]] = {
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.ClassDef: (ast.ClassDef,),
    cst.If: (ast.If,),
    cst.For: (ast.For, ast.AsyncFor),
    cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith),
    cst.Try: (ast.Try,),
    cst.Match: (ast.Match,),
}
if hasattr(cst, "TryStar") and hasattr(ast, "TryStar"):
    _AST_TYPES[cst.TryStar] = (ast.TryStar,)


def module_positions(tree: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of every node of ``tree`` (the slow, complete way)."""
    provider = PositionProvider()
    provider._computed = {}
    provider._gen_impl(tree)
    return _ranges(provider)


def _ranges(provider: PositionProvider) -> dict[cst.CSTNode, CodeRange]:
    """``provider``'s table of positions. Its codegen state stores plain CodeRanges, never
    lazy values (LibCST types ``_computed`` for every provider: maybe-lazy)."""
    return cast("dict[cst.CSTNode, CodeRange]", provider._computed)


def statement_positions(
    tree: cst.Module, statements: Iterable[cst.CSTNode]
) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of every node inside the given module-level ``statements`` of ``tree``.

    Lines are counted by generating the code of every statement before them. Nodes
    elsewhere have no entry; a statement that is not in ``tree.body`` is ignored.
    """
    wanted = {id(s) for s in statements}
    provider = PositionProvider()
    provider._computed = {}
    line = 1 + sum(_line_breaks(tree.code_for_node(h)) for h in tree.header)
    remaining = len(wanted)
    for stmt in tree.body:
        if not remaining:
            break
        if id(stmt) in wanted:
            state = PositionProvidingCodegenState(
                default_indent=tree.default_indent,
                default_newline=tree.default_newline,
                provider=provider,
            )
            state.line, state.column = line, 0
            stmt._codegen(state)
            line = state.line if state.column == 0 else state.line + 1
            remaining -= 1
        else:
            line += _line_breaks(tree.code_for_node(stmt))
    return _ranges(provider)


def _line_breaks(code: str) -> int:
    """Line ends in ``code`` as Python counts them: ``\\n``, ``\\r\\n`` and a lone ``\\r``."""
    return len(_LINE_BREAK.findall(code))


def locate(
    tree: cst.Module,
    syntax: ast.Module | None,
    wanted: Sequence[tuple[cst.CSTNode, Sequence[cst.CSTNode]]],
) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of the ``wanted`` nodes of ``tree`` (and of every node of the statements holding them).

    ``wanted`` pairs each node with its ancestors as the rule saw them (the traversal's
    stack, ``tree`` first; may be empty or unrelated, e.g. for a node reported after the
    traversal: then the path is found by a search). ``syntax`` is CPython's parse of the
    same text (None: CPython could not parse it, so every node takes the slow way).
    Never raises for a node of ``tree``; a node not in ``tree`` has no entry.
    """
    try:
        return _locate(tree, syntax, wanted)
    finally:
        _INDEXES.clear()


def _locate(
    tree: cst.Module,
    syntax: ast.Module | None,
    wanted: Sequence[tuple[cst.CSTNode, Sequence[cst.CSTNode]]],
) -> Mapping[cst.CSTNode, CodeRange]:
    found: dict[cst.CSTNode, CodeRange] = {}
    done: set[int] = set()
    parents: dict[cst.CSTNode, cst.CSTNode] | None = None
    late: list[cst.CSTNode] = []
    for node, ancestors in wanted:
        if node in found:
            continue
        if syntax is not None:
            path = list(ancestors) if ancestors and ancestors[0] is tree else []
            if node not in path:
                path.append(node)
            if not _place(tree, syntax, path, found, done) or node not in found:
                if parents is None:
                    parents = _parent_map(tree)
                _place(tree, syntax, _path_to(node, parents), found, done)
        if node not in found:
            late.append(node)
    if late:
        statements = set()
        parents = parents if parents is not None else _parent_map(tree)
        for node in late:
            path = _path_to(node, parents)
            if len(path) > 1 and path[0] is tree:
                statements.add(path[1])
        found.update(statement_positions(tree, statements))
        if any(node not in found for node in late):
            return module_positions(tree)
    return found


def _parent_map(tree: cst.Module) -> dict[cst.CSTNode, cst.CSTNode]:
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [tree]
    while stack:
        node = stack.pop()
        for child in children(node):
            parents[child] = node
            stack.append(child)
    return parents


def _path_to(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> list[cst.CSTNode]:
    path = [node]
    while node in parents:
        node = parents[node]
        path.append(node)
    path.reverse()
    return path


def _place(
    tree: cst.Module,
    syntax: ast.Module,
    path: Sequence[cst.CSTNode],
    found: dict[cst.CSTNode, CodeRange],
    done: set[int],
) -> bool:
    """Generate positions for the innermost statement on ``path``; False when it cannot be placed."""
    for last in range(len(path) - 1, 0, -1):
        if isinstance(path[last], _STATEMENTS):
            break
    else:
        return False
    statement = path[last]
    if id(statement) in done:
        return True
    start = _start(tree, syntax, path[: last + 1])
    if start is None:
        return False
    line, indents, is_elif, expected = start
    provider = PositionProvider()
    provider._computed = {}
    state = PositionProvidingCodegenState(
        default_indent=tree.default_indent, default_newline=tree.default_newline, provider=provider
    )
    for indent in indents:
        state.increase_indent(indent)
    state.line, state.column = line, 0
    if is_elif:
        statement._codegen(state, is_elif=True)
    else:
        statement._codegen(state)
    computed = _ranges(provider)
    own = computed.get(statement)
    if own is None:
        return False
    if (own.start.line, own.start.column) != expected:
        shift = expected[1] - own.start.column
        if own.start.line != expected[0] or shift <= 0:
            return False  # CPython and LibCST disagree on where it starts: not trusted
        # LibCST drops form feeds before a line's first token (``\fx = 1`` generates
        # ``x = 1``): every position on that line moves right by what was dropped.
        _shift_line(computed, own.start.line, shift)
    done.add(id(statement))
    found.update(computed)
    return True


def _shift_line(positions: dict[cst.CSTNode, CodeRange], line: int, shift: int) -> None:
    """Move every position on ``line`` (1-based) ``shift`` columns to the right, in place."""
    for node, r in positions.items():
        if r.start.line == line or r.end.line == line:
            start = (
                CodePosition(r.start.line, r.start.column + shift)
                if r.start.line == line
                else r.start
            )
            end = CodePosition(r.end.line, r.end.column + shift) if r.end.line == line else r.end
            positions[node] = CodeRange(start, end)


def _start(
    tree: cst.Module, syntax: ast.Module, path: Sequence[cst.CSTNode]
) -> tuple[int, list[str], bool, tuple[int, int]] | None:
    """Where code generation of ``path[-1]`` (a statement) starts.

    Returns (first line of its leading blank/comment lines, the indentation of each
    enclosing block, whether it is an ``elif``, CPython's (line, column) of its first
    token), or None when the LibCST and CPython trees do not line up along ``path``.
    """
    target = path[-1]
    indents: list[str] = []
    block, ast_block = tree.body, syntax.body
    at = 1
    is_elif = False
    while True:
        if at >= len(path):
            return None
        pair = _match(block, ast_block, path[at])
        if pair is None:
            return None
        stmt, node = pair
        while True:  # an elif chain: the If in orelse is the next statement, not a block
            if stmt is target:
                return _first_line(stmt, node, indents, is_elif)
            if at + 1 >= len(path):
                return None
            step = path[at + 1]
            if type(stmt) is cst.If and step is stmt.orelse and type(step) is cst.If:
                assert type(node) is ast.If  # _match pairs a cst.If with an ast.If only
                if len(node.orelse) != 1 or type(node.orelse[0]) is not ast.If:
                    return None
                stmt, node, at, is_elif = step, node.orelse[0], at + 1, True
                continue
            break
        is_elif = False
        suite, ast_block, at = _descend(stmt, node, path, at)
        if suite is None or at + 1 >= len(path) or path[at] is not suite:
            return None
        if type(stmt) is cst.Match:  # `case` clauses are indented by the match statement itself
            indents.append(tree.default_indent if stmt.indent is None else stmt.indent)
        indents.append(tree.default_indent if suite.indent is None else suite.indent)
        block = suite.body
        at += 1


def _descend(stmt: cst.CSTNode, node: ast.AST, path: Sequence[cst.CSTNode], at: int):
    """The indented block of ``stmt`` that ``path[at + 1]`` leads into, CPython's statements
    for it and the index of that block in ``path``; (None, None, at) when there is none."""
    step = path[at + 1]
    body = getattr(stmt, "body", None)
    if step is body and isinstance(body, cst.IndentedBlock):
        return body, getattr(node, "body", None) or [], at + 1
    if at + 2 >= len(path):
        return None, None, at
    inner = getattr(step, "body", None)
    if not isinstance(inner, cst.IndentedBlock):
        return None, None, at
    if step is getattr(stmt, "orelse", None) and type(step) is cst.Else:
        return inner, getattr(node, "orelse", []), at + 2
    if step is getattr(stmt, "finalbody", None) and type(step) is cst.Finally:
        return inner, getattr(node, "finalbody", []), at + 2
    for clauses, ast_clauses in (
        (getattr(stmt, "handlers", ()), getattr(node, "handlers", [])),
        (getattr(stmt, "cases", ()), getattr(node, "cases", [])),
    ):
        for index, clause in enumerate(clauses):
            if clause is step:
                if index >= len(ast_clauses):
                    return None, None, at
                return inner, ast_clauses[index].body, at + 2
    return None, None, at


_Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


def _match(
    block: Sequence[cst.CSTNode], ast_block: Sequence[ast.stmt], stmt: cst.CSTNode
) -> tuple[_Statement, ast.stmt] | None:
    """``stmt`` (a statement of ``block``) and CPython's statement for it, or None."""
    index = _block_index(block).get(id(stmt))
    if index is None or index >= len(ast_block):
        return None
    node = ast_block[index]
    if type(stmt) is not cst.SimpleStatementLine and type(node) not in _AST_TYPES.get(
        type(stmt), ()
    ):
        return None
    # found in the index of ``block`` by id: one of its statements
    return cast(_Statement, stmt), node


_INDEXES: dict[
    int, tuple[Sequence[cst.CSTNode], dict[int, int]]
] = {}  # emptied when locate() returns


def _block_index(block: Sequence[cst.CSTNode]) -> dict[int, int]:
    """id of each statement of ``block`` -> the index of its first CPython statement
    (``a; b`` is one LibCST line, two CPython statements). Built once per block."""
    cached = _INDEXES.get(id(block))
    if cached is not None and cached[0] is block:
        return cached[1]
    index: dict[int, int] = {}
    at = 0
    for item in block:
        index[id(item)] = at
        at += len(item.body) if type(item) is cst.SimpleStatementLine else 1
    _INDEXES[id(block)] = (block, index)
    return index


def _first_line(
    stmt: _Statement,
    node: ast.stmt,
    indents: list[str],
    is_elif: bool,
) -> tuple[int, list[str], bool, tuple[int, int]] | None:
    decorators = getattr(stmt, "decorators", ())
    leading = len(stmt.leading_lines)
    if decorators:
        ast_decorators = getattr(node, "decorator_list", [])
        if len(ast_decorators) != len(decorators):
            return None
        first = ast_decorators[0].lineno - len(decorators[0].leading_lines) - leading
    else:
        first = node.lineno - leading
    return first, indents, is_elif, (node.lineno, node.col_offset)
