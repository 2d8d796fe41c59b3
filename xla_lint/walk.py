"""A fast, non-recursive traversal of a LibCST tree that visits nodes in LibCST's own order.

``module.visit(visitor)`` rebuilds every node it passes (``_visit_and_replace_children``
constructs a copy even for a read-only :class:`libcst.CSTVisitor`), calls two attribute
hooks per child field, and recurses in Python once per level. On torch_xla training code
that costs 5-10x the parse itself. :func:`walk` calls the same ``on_visit(node)`` /
``on_leave(node)`` pair for the same nodes, in the same order, from an explicit stack:

- the order of each node type's child fields is read once from the keyword order of its
  ``_visit_and_replace_children`` (the constructor call that LibCST's visit evaluates in
  source order), falling back to the dataclass field order when that cannot be read;
- ``on_visit`` returning False skips the node's children (its ``on_leave`` still runs), as in LibCST;
- attribute hooks (``visit_Call_func``) are not called.

``tests/test_parallel.py`` checks the order against ``module.visit`` on real code.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap

import libcst as cst

_CSTNode = cst.CSTNode


@functools.lru_cache(maxsize=None)
def child_fields(node_type: type) -> tuple[str, ...]:
    """Names of ``node_type``'s fields that may hold child nodes, in LibCST's visit order."""
    names = [f.name for f in dataclasses.fields(node_type)]
    order: list[str] = []
    try:
        source = textwrap.dedent(inspect.getsource(node_type._visit_and_replace_children))
        for call in ast.walk(ast.parse(source)):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id.startswith("visit_"):
                if len(call.args) >= 2 and isinstance(call.args[1], ast.Constant) and call.args[1].value in names:
                    if call.args[1].value not in order:
                        order.append(call.args[1].value)
        ordered = _source_order(source, order)
    except (OSError, TypeError, SyntaxError):
        ordered = []
    if set(ordered) != set(order) or not ordered:
        ordered = order
    # Fields the method does not name (none in LibCST 1.x) keep their declaration order, last.
    return tuple(ordered + [n for n in names if n not in ordered and n not in _NOT_CHILDREN])


_NOT_CHILDREN = frozenset()


def _subclasses(base: type) -> set[type]:
    out: set[type] = set()
    for sub in base.__subclasses__():
        out.add(sub)
        out |= _subclasses(sub)
    return out


def _trivia() -> frozenset[type]:
    found: set[type] = {cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual, cst.LeftParen,
                        cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace,
                        cst.RightCurlyBrace, cst.ImportStar, cst.Asynchronous, cst.TrailingWhitespace,
                        cst.EmptyLine, cst.Newline, cst.Comment, cst.SimpleWhitespace, cst.ParenthesizedWhitespace}
    for base in (cst.BaseParenthesizableWhitespace, cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp,
                 cst.BaseUnaryOp, cst.BaseAugOp):
        found |= _subclasses(base)
    return frozenset(found)


#: Whitespace, comments, punctuation and operator tokens: nodes whose subtrees hold only
#: more of the same, so they are never the ancestor of anything a rule looks at. About
#: half the nodes of a typical module; :func:`walk` can leave them out (``skip``).
TRIVIA = _trivia()


def _source_order(source: str, names: list[str]) -> list[str]:
    """``names`` sorted by where ``visit_*(self, "<name>", ...)`` first appears in ``source``."""
    positions = {}
    for name in names:
        for quote in ('"', "'"):
            at = source.find(f'{quote}{name}{quote}')
            if at >= 0:
                positions[name] = at
                break
    return sorted(names, key=lambda n: positions.get(n, 1 << 30))


def children(node: cst.CSTNode, skip: frozenset[type] = frozenset()) -> list:
    """The child nodes of ``node`` in LibCST's visit order, without those whose type is in ``skip``."""
    out: list = []
    for name in child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, _CSTNode):
            if type(value) not in skip:
                out.append(value)
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, _CSTNode) and type(item) not in skip:
                    out.append(item)
    return out


def calls_in(root: cst.CSTNode) -> list[cst.Call]:
    """Every call under ``root`` (``root`` included), in source order."""
    return [n for n in iter_nodes(root) if isinstance(n, cst.Call)]


def walk(root: cst.CSTNode, visitor, skip: frozenset[type] = frozenset()) -> None:
    """Call ``visitor.on_visit(node)`` and ``visitor.on_leave(node)`` for every node under ``root``.

    Same nodes and order as ``root.visit(visitor)`` for a :class:`libcst.CSTVisitor`,
    except nodes whose type is in ``skip`` (and their subtrees), which are not visited;
    pass a subset of :data:`TRIVIA` the visitor has no callback for. No recursion, so
    nesting depth is bounded by memory, not the interpreter's stack.
    """
    on_visit, on_leave = visitor.on_visit, visitor.on_leave
    leave = object()
    stack: list = [root]
    while stack:
        node = stack.pop()
        if node is leave:
            on_leave(stack.pop())
            continue
        descend = on_visit(node)
        stack.append(node)
        stack.append(leave)
        if descend is False:
            continue
        stack.extend(reversed(children(node, skip)))


def iter_nodes(root: cst.CSTNode, skip: frozenset[type] = TRIVIA):
    """Every node under ``root`` (``root`` first), in :func:`walk`'s order, leaving out ``skip`` types.

    The cheap replacement for recursing over ``node.children`` (which rebuilds nodes).
    """
    stack: list = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node, skip)))
