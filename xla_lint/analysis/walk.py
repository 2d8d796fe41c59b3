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
import typing

import libcst as cst

_CSTNode = cst.CSTNode


@functools.cache
def child_fields(node_type: type[cst.CSTNode]) -> tuple[str, ...]:
    """Names of ``node_type``'s fields that may hold child nodes, in LibCST's visit order.

    Read from the string constants of its ``_visit_and_replace_children``'s code object
    (each ``visit_*(self, "<field>", ...)`` call names its field; constants keep their
    order of first appearance, which is source order); from the method's source when the
    code object cannot be read.
    """
    names = [f.name for f in dataclasses.fields(node_type)]
    code = getattr(getattr(node_type, "_visit_and_replace_children", None), "__code__", None)
    if code is None:
        return _child_fields_from_source(node_type)
    wanted = set(names)
    ordered: list[str] = []
    for const in code.co_consts:
        if type(const) is str and const in wanted and const not in ordered:
            ordered.append(const)
    # Fields the method does not name (none in LibCST 1.x) keep their declaration order, last.
    return tuple(ordered + [n for n in names if n not in ordered and n not in _NOT_CHILDREN])


def _child_fields_from_source(node_type: type[cst.CSTNode]) -> tuple[str, ...]:
    """:func:`child_fields` read from the method's source (slower: ~1 ms per type)."""
    names = [f.name for f in dataclasses.fields(node_type)]
    order: list[str] = []
    try:
        source = textwrap.dedent(inspect.getsource(node_type._visit_and_replace_children))
        for call in ast.walk(ast.parse(source)):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id.startswith("visit_")
            ):
                if (
                    len(call.args) >= 2
                    and isinstance(call.args[1], ast.Constant)
                    and call.args[1].value in names
                ):
                    if call.args[1].value not in order:
                        order.append(call.args[1].value)
        ordered = _source_order(source, order)
    except (OSError, TypeError, SyntaxError, AttributeError):
        ordered = []
    if set(ordered) != set(order) or not ordered:
        ordered = order
    return tuple(ordered + [n for n in names if n not in ordered and n not in _NOT_CHILDREN])


_NOT_CHILDREN: frozenset[str] = frozenset()


@functools.cache
def _subclasses(base: type) -> frozenset[type]:
    out: set[type] = set()
    subs: list[type] = base.__subclasses__()  # typeshed: list[type[Never]] for a plain `type`
    for sub in subs:
        out.add(sub)
        out |= _subclasses(sub)
    return frozenset(out)


def _trivia() -> frozenset[type]:
    found: set[type] = {
        cst.Comma,
        cst.Dot,
        cst.Colon,
        cst.Semicolon,
        cst.AssignEqual,
        cst.LeftParen,
        cst.RightParen,
        cst.LeftSquareBracket,
        cst.RightSquareBracket,
        cst.LeftCurlyBrace,
        cst.RightCurlyBrace,
        cst.ImportStar,
        cst.Asynchronous,
        cst.TrailingWhitespace,
        cst.EmptyLine,
        cst.Newline,
        cst.Comment,
        cst.SimpleWhitespace,
        cst.ParenthesizedWhitespace,
    }
    for base in (
        cst.BaseParenthesizableWhitespace,
        cst.BaseBinaryOp,
        cst.BaseBooleanOp,
        cst.BaseCompOp,
        cst.BaseUnaryOp,
        cst.BaseAugOp,
    ):
        found |= _subclasses(base)
    return frozenset(found)


#: Whitespace, comments, punctuation and operator tokens: nodes whose subtrees hold only
#: more of the same, so they are never the ancestor of anything a rule looks at. About
#: half the nodes of a typical module; :func:`walk` can leave them out (``skip``).
TRIVIA = _trivia()


#: Node types with no child nodes but trivia: names, literals, ``pass``/``break``/``continue``.
LEAVES: frozenset[type] = frozenset(
    {
        cst.Name,
        cst.SimpleString,
        cst.Integer,
        cst.Float,
        cst.Imaginary,
        cst.Ellipsis,
        cst.Pass,
        cst.Break,
        cst.Continue,
    }
)


def _source_order(source: str, names: list[str]) -> list[str]:
    """``names`` sorted by where ``visit_*(self, "<name>", ...)`` first appears in ``source``."""
    positions = {}
    for name in names:
        for quote in ('"', "'"):
            at = source.find(f"{quote}{name}{quote}")
            if at >= 0:
                positions[name] = at
                break
    return sorted(names, key=lambda n: positions.get(n, 1 << 30))


def _node_types_in(hint) -> frozenset[type] | None:
    """The node types a field annotated ``hint`` may hold (None: cannot tell, assume any)."""
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return frozenset()
    if origin is not None:  # Union, Optional, Sequence[...], tuple[...]
        out: set[type] = set()
        for arg in typing.get_args(hint):
            if arg is Ellipsis:
                continue
            inner = _node_types_in(arg)
            if inner is None:
                return None
            out |= inner
        return frozenset(out)
    if isinstance(hint, type):
        if issubclass(hint, _CSTNode):
            return frozenset({hint} | _subclasses(hint))
        return frozenset()  # str, bool, MaybeSentinel, None
    return None


@functools.cache
def _annotated_types(node_type: type) -> dict[str, frozenset[type] | None]:
    """Each dataclass field of ``node_type`` -> the node types its annotation allows (None: any)."""
    hints = {f.name: f.type for f in dataclasses.fields(node_type)}
    if any(isinstance(h, str) for h in hints.values()):  # postponed annotations (not LibCST 1.x's)
        try:
            hints = typing.get_type_hints(node_type)
        except Exception:  # an annotation that does not resolve: every field may hold anything
            hints = {}
    return {
        f.name: (_node_types_in(hints[f.name]) if f.name in hints else None)
        for f in dataclasses.fields(node_type)
    }


@functools.cache
def _field_types(node_type: type[cst.CSTNode]) -> dict[str, frozenset[type] | None]:
    """:func:`_annotated_types` for the child fields, in LibCST's visit order."""
    annotated = _annotated_types(node_type)
    return {name: annotated.get(name) for name in child_fields(node_type)}


class _Plan:
    """For one ``skip`` set: per node type, the fields that may hold a node not in ``skip``."""

    __slots__ = ("skip", "allowed", "fields")

    def __init__(self, skip: frozenset[type]) -> None:
        self.skip = skip
        self.allowed = _NODE_TYPES.difference(skip)
        self.fields: dict[type, tuple[str, ...]] = {}

    def fields_of(self, node_type: type[cst.CSTNode]) -> tuple[str, ...]:
        found = self.fields.get(node_type)
        if found is None:
            if node_type not in _NODE_TYPES:  # a node class made after import: learn it
                _learn(node_type)
                self.allowed = _NODE_TYPES.difference(self.skip)
            found = tuple(
                name
                for name, types in _field_types(node_type).items()
                if types is None or not types <= self.skip
            )
            self.fields[node_type] = found
        return found


def _learn(node_type: type) -> None:
    global _NODE_TYPES
    _subclasses.cache_clear()
    _NODE_TYPES = _NODE_TYPES | {node_type} | _subclasses(_CSTNode)


_NODE_TYPES: frozenset[type] = frozenset(_subclasses(_CSTNode))
_EXPRESSIONS: frozenset[type] = frozenset({cst.BaseExpression} | _subclasses(cst.BaseExpression))
_PLANS: dict[frozenset, _Plan] = {}


def _plan(skip: frozenset[type]) -> _Plan:
    plan = _PLANS.get(skip)
    if plan is None:
        plan = _PLANS[skip] = _Plan(frozenset(skip))
    return plan


_ANY = (
    object()
)  # stands for "any node type" in the reachability graph (a field whose annotation is unknown)


@functools.cache
def _edges(node_type: type) -> frozenset:
    out: set = set()
    for types in _annotated_types(node_type).values():
        if types is None:
            out.add(_ANY)
        elif not types.isdisjoint(_EXPRESSIONS):
            # Annotations narrower than the parser: `with f() as self.handle:` puts an
            # Attribute in AsName.name, annotated Name | Tuple | List. A field that may hold
            # some expression is taken to hold any.
            out |= types | _EXPRESSIONS
        else:
            out |= types
    return frozenset(out)


@functools.cache
def _holders() -> dict[object, frozenset[type]]:
    """Node type (or ``_ANY``) -> the node types with a field that may hold it directly."""
    reverse: dict[object, set[type]] = {}
    for node_type in _NODE_TYPES:
        for held in _edges(node_type):
            reverse.setdefault(held, set()).add(node_type)
    return {held: frozenset(types) for held, types in reverse.items()}


@functools.lru_cache(maxsize=64)
def silent_types(listened: frozenset[type]) -> frozenset[type]:
    """Node types a traversal that only acts on ``listened`` types may skip, subtree and all.

    A type is silent when it is not listened to and, by LibCST's field annotations, no
    listened type can occur below it: whitespace and punctuation (:data:`TRIVIA`), but
    also ``Name``, ``Integer`` or ``SimpleString`` when nobody listens to them. The
    largest skip set :func:`walk` can be given without changing which callbacks run.
    """
    holders = _holders()
    loud: set = set(listened) | {_ANY}
    todo = list(loud)
    while todo:
        for holder in holders.get(todo.pop(), ()):
            if holder not in loud:
                loud.add(holder)
                todo.append(holder)
    return _NODE_TYPES.difference(loud)


def children(node: cst.CSTNode, skip: frozenset[type] = frozenset()) -> list:
    """The child nodes of ``node`` in LibCST's visit order, without those whose type is in ``skip``.

    Fields whose annotation allows only ``skip`` types (``lpar``, ``whitespace_after``,
    ``comma`` for the :data:`TRIVIA` set) are not read at all, and node types are tested
    by exact type (``isinstance`` against LibCST's abstract classes costs ~10x more).
    """
    plan = _plan(skip)
    return _children(node, plan, plan.allowed)


def _children(node: cst.CSTNode, plan: _Plan, allowed: frozenset[type]) -> list:
    out: list = []
    node_type = type(node)
    fields = plan.fields.get(node_type)
    if fields is None:
        fields = plan.fields_of(node_type)
        allowed = plan.allowed
    for name in fields:
        value = getattr(node, name)
        kind = type(value)
        if kind in allowed:
            out.append(value)
        elif kind is tuple or kind is list:
            for item in value:
                if type(item) in allowed:
                    out.append(item)
    return out


def calls_in(root: cst.CSTNode) -> list[cst.Call]:
    """Every call under ``root`` (``root`` included), in source order."""
    return [n for n in iter_nodes(root) if type(n) is cst.Call]


def walk(root: cst.CSTNode, visitor, skip: frozenset[type] = frozenset()) -> None:
    """Call ``visitor.on_visit(node)`` and ``visitor.on_leave(node)`` for every node under ``root``.

    Same nodes and order as ``root.visit(visitor)`` for a :class:`libcst.CSTVisitor`,
    except nodes whose type is in ``skip`` (and their subtrees), which are not visited;
    pass a subset of :data:`TRIVIA` the visitor has no callback for. No recursion, so
    nesting depth is bounded by memory, not the interpreter's stack.
    """
    on_visit, on_leave = visitor.on_visit, visitor.on_leave
    plan = _plan(skip)
    leave = object()
    stack: list = [root]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        node = pop()
        if node is leave:
            on_leave(pop())
            continue
        descend = on_visit(node)
        push(node)
        push(leave)
        if descend is False:
            continue
        kids = _children(node, plan, plan.allowed)
        if kids:
            kids.reverse()
            extend(kids)


class Flat:
    """Every node under ``root`` in :func:`walk`'s order (``root`` first, :data:`TRIVIA` left
    out), from one traversal, with the extent of each node's subtree: ``nodes[i:ends[i]]``.

    The per-file analyses that each need a pass over the whole module (the loop structure,
    child-process environments, names bound in expressions, each scope's assignments) read
    this list instead of walking the tree again (``FileContext.flat``, once per file): a
    pass over a list costs a fraction of a walk, which calls ``_children`` on every node.
    An analysis replays the nesting it needs with a stack of open nodes, closing each one
    when the index reaches its ``ends`` (``on_leave`` order: innermost first).

    ``leaves``: some of the :data:`LEAVES` types to leave out too (the rule traversal's
    :func:`silent_types`: no rule looks at them); :meth:`of_types` refuses to look for them.
    """

    __slots__ = ("nodes", "ends", "skip", "_by_type", "_selected")

    def __init__(self, root: cst.CSTNode, leaves: frozenset[type] = frozenset()) -> None:
        if not leaves <= LEAVES:
            raise ValueError(f"not leaf node types: {sorted(t.__name__ for t in leaves - LEAVES)}")
        self.skip = TRIVIA | leaves
        plan = _plan(self.skip)
        allowed, known = plan.allowed, plan.fields
        backwards: dict[type, tuple[str, ...]] = {}  # node type -> its child fields, last first
        nodes: list[cst.CSTNode] = []
        ends: list[int] = []
        # Each node is pushed with its index (an int) under its children, last child first: the
        # int comes off the stack when its subtree is done (as walk's ``leave`` marker does).
        stack: list = [root]
        pop, push = stack.pop, stack.append
        add, close = nodes.append, ends.append
        while stack:
            item = pop()
            kind = type(item)
            if kind is int:
                ends[item] = len(nodes)
                continue
            push(len(nodes))
            add(item)
            close(0)
            fields = backwards.get(kind)
            if fields is None:
                forward = known.get(kind)
                if forward is None:
                    forward = plan.fields_of(kind)
                    allowed = plan.allowed
                fields = backwards[kind] = forward[::-1]
            for name in fields:  # _children, inlined and backwards
                value = getattr(item, name)
                value_type = type(value)
                if value_type in allowed:
                    push(value)
                elif value_type is tuple or value_type is list:
                    for child in reversed(value):
                        if type(child) in allowed:
                            push(child)
        self.nodes = nodes
        self.ends = ends
        self._by_type: dict[type, list[int]] | None = None
        self._selected: dict[frozenset[type], list[int]] = {}

    def of_types(self, types: frozenset[type]) -> list[int]:
        """Indices of the nodes whose type is one of ``types`` (exact types), in order."""
        found = self._selected.get(types)
        if found is None:
            if not types.isdisjoint(self.skip):
                left_out = sorted(t.__name__ for t in types & self.skip)
                raise ValueError(f"this Flat leaves out {left_out}")
            by_type = self._by_type
            if by_type is None:
                by_type = self._by_type = {}
                for i, node in enumerate(self.nodes):
                    kind = type(node)
                    indices = by_type.get(kind)
                    if indices is None:
                        by_type[kind] = [i]
                    else:
                        indices.append(i)
            runs = [by_type[t] for t in types if t in by_type]
            found = runs[0] if len(runs) == 1 else sorted(i for run in runs for i in run)
            self._selected[types] = found
        return found


def iter_nodes(root: cst.CSTNode, skip: frozenset[type] = TRIVIA):
    """Every node under ``root`` (``root`` first), in :func:`walk`'s order, leaving out ``skip`` types.

    The cheap replacement for recursing over ``node.children`` (which rebuilds nodes).
    """
    plan = _plan(skip)
    stack: list = [root]
    while stack:
        node = stack.pop()
        yield node
        kids = _children(node, plan, plan.allowed)
        if kids:
            kids.reverse()
            stack.extend(kids)
