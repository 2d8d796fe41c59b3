"""Name resolution through imports: which API does ``xs.HybridMesh`` or ``HM`` stand for?

Full LibCST scope metadata (``ScopeProvider``/``QualifiedNameProvider``) visits every
expression and costs more than parsing. The rules only need to know where names come
from imports and where a local binding shadows them, and those bindings live in
statements: :class:`BindingCollector` walks statements only (not expressions) and
builds one :class:`Scope` per module, function and class, Python's rules applied:

- a name bound anywhere in a function is local to all of that function, unless
  declared ``global``/``nonlocal``;
- class bodies do not enclose the functions defined in them;
- module-level bindings are taken together, so ``try: from torch_xla... import X``
  ``except ImportError: X = None`` resolves ``X`` to both the import and a local value;
- ``from m import *`` makes unknown names resolve to ``m.<name>``.

A resolved name is a set of dotted qualified names (``"torch_xla.distributed.spmd.HybridMesh"``),
with :data:`LOCAL` standing for a value the module computes itself.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst

from ..program.facts import resolve_relative
from .walk import Flat, iter_nodes

LOCAL = "<local>"
_BUILTINS = frozenset(dir(builtins))


@dataclass
class Scope:
    """The names bound in one module, function or class body."""

    kind: str  # "module" | "function" | "class"
    parent: Scope | None
    bindings: dict[str, set[str]] = field(default_factory=dict)
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)
    star_imports: list[str] = field(default_factory=list)
    node: cst.Module | cst.FunctionDef | cst.ClassDef | None = None  # whose body this is

    def bind(self, name: str, qualified: str) -> None:
        self.bindings.setdefault(name, set()).add(qualified)

    @property
    def module(self) -> Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope


def dotted_name(node: cst.CSTNode) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is cst.Name:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


class BindingCollector:
    """Builds the scopes of a module by walking its statements.

    ``module_name`` is the dotted name of the file (``"mypkg.model"``), used for
    relative imports; ``is_package`` is true for ``__init__.py``.
    After :meth:`collect`, ``scopes`` maps each FunctionDef/ClassDef node to its scope,
    and ``imported_modules`` lists every module named by an import that may run (for program
    facts): imports under ``if TYPE_CHECKING:`` bind names but never run, and are left out.
    """

    def __init__(self, module_name: str = "", is_package: bool = False) -> None:
        self.module_name = module_name
        self.is_package = is_package
        self.scopes: dict[cst.CSTNode, Scope] = {}
        self.imported_modules: set[str] = set()
        # Names only relative imports gave, with the number of dotted parts of the package each
        # import's dots name (its anchor): the packages above the anchor are not imported by the
        # file (:func:`xla_lint.program.facts.import_prefixes`).
        self.relative_anchors: dict[str, int] = {}
        self._absolute: set[str] = set()
        self.root = Scope("module", None)
        self._type_checking = 0  # depth of `if TYPE_CHECKING:` bodies being walked

    def collect(self, module: cst.Module) -> Scope:
        self.root.node = module
        self.scopes[module] = self.root
        self._body(module.body, self.root)
        return self.root

    # -- statements -------------------------------------------------------
    def _body(self, body, scope: Scope) -> None:
        for stmt in body:
            self._statement(stmt, scope)

    def _block(self, block, scope: Scope) -> None:
        if type(block) is cst.IndentedBlock:
            self._body(block.body, scope)
        elif type(block) is cst.SimpleStatementSuite:
            for small in block.body:
                self._small(small, scope)

    def _statement(self, stmt, scope: Scope) -> None:
        if type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                self._small(small, scope)
        elif type(stmt) is cst.FunctionDef:
            scope.bind(stmt.name.value, LOCAL)
            inner = Scope("function", scope, node=stmt)
            self.scopes[stmt] = inner
            params = stmt.params
            for p in (*params.posonly_params, *params.params, *params.kwonly_params):
                inner.bind(p.name.value, LOCAL)
            for star in (params.star_arg, params.star_kwarg):
                if isinstance(star, cst.Param):
                    inner.bind(star.name.value, LOCAL)
            self._block(stmt.body, inner)
        elif type(stmt) is cst.ClassDef:
            scope.bind(stmt.name.value, LOCAL)
            inner = Scope("class", scope, node=stmt)
            self.scopes[stmt] = inner
            self._block(stmt.body, inner)
        elif type(stmt) is cst.If:
            checking = (dotted_name(stmt.test) or "").split(".")[-1] == "TYPE_CHECKING"
            self._type_checking += checking
            self._block(stmt.body, scope)
            self._type_checking -= checking
            orelse = stmt.orelse
            if isinstance(orelse, cst.If):
                self._statement(orelse, scope)
            elif isinstance(orelse, cst.Else):
                self._block(orelse.body, scope)
        elif type(stmt) is cst.For or type(stmt) is cst.While:
            if type(stmt) is cst.For:
                self._target(stmt.target, scope)
            self._block(stmt.body, scope)
            if stmt.orelse is not None:
                self._block(stmt.orelse.body, scope)
        elif type(stmt) is cst.Try or type(stmt) is cst.TryStar:
            self._block(stmt.body, scope)
            for handler in stmt.handlers:
                if handler.name is not None:
                    self._target(handler.name.name, scope)
                self._block(handler.body, scope)
            if stmt.orelse is not None:
                self._block(stmt.orelse.body, scope)
            if stmt.finalbody is not None:
                self._block(stmt.finalbody.body, scope)
        elif type(stmt) is cst.With:
            for item in stmt.items:
                if item.asname is not None:
                    self._target(item.asname.name, scope)
            self._block(stmt.body, scope)
        elif type(stmt) is cst.Match:
            for case in stmt.cases:
                self._pattern(case.pattern, scope)
                self._block(case.body, scope)

    def _imported(self, name: str, anchor: str | None) -> None:
        """Record ``name`` as imported, by a relative import anchored at package ``anchor``
        (None: an absolute import)."""
        self.imported_modules.add(name)
        if anchor is None:
            self._absolute.add(name)
            self.relative_anchors.pop(name, None)
        elif name not in self._absolute:
            depth = anchor.count(".") + 1 if anchor else 1
            self.relative_anchors[name] = min(depth, self.relative_anchors.get(name, depth))

    def _small(self, small, scope: Scope) -> None:
        if type(small) is cst.Import:
            for alias in small.names:
                full = dotted_name(alias.name)
                if full is None:
                    continue
                if not self._type_checking:
                    self._imported(full, None)
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    scope.bind(alias.asname.name.value, full)
                else:
                    head = full.split(".")[0]
                    scope.bind(head, head)
        elif type(small) is cst.ImportFrom:
            target = dotted_name(small.module) if small.module is not None else None
            level = len(small.relative)
            if level:
                base = resolve_relative(self.module_name, self.is_package, level, target)
                anchor: str | None = resolve_relative(
                    self.module_name, self.is_package, level, None
                )
            else:
                base, anchor = target or "", None
            runs = not self._type_checking
            if isinstance(small.names, cst.ImportStar):
                if runs:
                    self._imported(base, anchor)
                scope.star_imports.append(base)
                return
            if runs:
                self._imported(base, anchor)
            for alias in small.names:
                name = dotted_name(alias.name)
                if name is None:
                    continue
                full = f"{base}.{name}" if base else name
                if runs:
                    self._imported(full, anchor)
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    scope.bind(alias.asname.name.value, full)
                else:
                    scope.bind(name, full)
        elif type(small) is cst.Assign:
            for t in small.targets:
                self._target(t.target, scope)
        elif type(small) is cst.AnnAssign or type(small) is cst.AugAssign:
            self._target(small.target, scope)
        elif type(small) is cst.Global:
            scope.globals.update(n.name.value for n in small.names)
        elif type(small) is cst.Nonlocal:
            scope.nonlocals.update(n.name.value for n in small.names)

    def _pattern(self, pattern, scope: Scope) -> None:
        """Bind the capture names of a ``case`` pattern (``case x``, ``[a, *rest]``, ``{**kw}``, ``C(y=z) as w``)."""
        stack = [pattern]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is cst.MatchAs or kind is cst.MatchStar:
                if isinstance(node.name, cst.Name):
                    scope.bind(node.name.value, LOCAL)
            elif kind is cst.MatchMapping and isinstance(node.rest, cst.Name):
                scope.bind(node.rest.value, LOCAL)
            if isinstance(node, cst.MatchPattern) or kind in _PATTERN_PARTS:
                stack.extend(node.children)

    def _target(self, target, scope: Scope) -> None:
        if type(target) is cst.Name:
            scope.bind(target.value, LOCAL)
        elif type(target) is cst.Tuple or type(target) is cst.List:
            for el in target.elements:
                self._target(el.value, scope)
        elif type(target) is cst.StarredElement:
            self._target(target.value, scope)


def top_level_imports(
    module: cst.Module,
) -> list[tuple[cst.CSTNode, frozenset[str], frozenset[str]]]:
    """Every top-level statement of ``module`` in order, with the names its imports bind and
    the modules they name (both empty for other statements)."""
    out: list[tuple[cst.CSTNode, frozenset[str], frozenset[str]]] = []
    for statement in module.body:
        names: set[str] = set()
        modules: set[str] = set()
        if type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                if type(small) is cst.Import:
                    for alias in small.names:
                        full = dotted_name(alias.name)
                        if full is None:
                            continue
                        modules.add(full)
                        asname = alias.asname.name if alias.asname is not None else None
                        names.add(
                            asname.value if isinstance(asname, cst.Name) else full.split(".")[0]
                        )
                elif (
                    type(small) is cst.ImportFrom
                    and not small.relative
                    and small.module is not None
                ):
                    base = dotted_name(small.module)
                    if base is None:
                        continue
                    modules.add(base)
                    if not isinstance(small.names, cst.ImportStar):
                        for alias in small.names:
                            bound = alias.asname.name if alias.asname is not None else alias.name
                            if isinstance(bound, cst.Name):
                                names.add(bound.value)
        out.append((statement, frozenset(names), frozenset(modules)))
    return out


def names_bound_in_expressions_or_rebound(
    module: cst.Module, flat: Flat | None = None
) -> frozenset[str]:
    """Names ``module`` binds where :class:`BindingCollector` does not look (comprehension
    targets, lambda parameters, ``:=`` targets, all inside expressions), declares
    ``global``/``nonlocal`` (a function may rebind the module's name) or deletes with ``del``.

    The collector's scopes are enough to resolve names; a fix that *writes* a name (such as
    ``torch_xla.sync()``) must also know that no such binding can change what it means
    (a comprehension binding ``torch_xla`` would make it call that value's method). One walk
    of the module, or a pass over ``flat`` (the module's :class:`~xla_lint.analysis.walk.Flat`) when
    the caller has it.
    """
    names: set[str] = set()
    if flat is None:
        found: Iterable[cst.CSTNode] = iter_nodes(module)
    else:
        found = [flat.nodes[i] for i in flat.of_types(_REBINDING)]
    for node in found:
        if type(node) is cst.CompFor or type(node) is cst.NamedExpr or type(node) is cst.Del:
            names.update(_target_names(node.target))
        elif type(node) is cst.Lambda:
            params = node.params
            for p in (
                *params.posonly_params,
                *params.params,
                *params.kwonly_params,
                params.star_arg,
                params.star_kwarg,
            ):
                if isinstance(p, cst.Param):
                    names.add(p.name.value)
        elif type(node) is cst.Global or type(node) is cst.Nonlocal:
            names.update(item.name.value for item in node.names)
    return frozenset(names)


def bound_names(target: cst.CSTNode | None) -> set[str]:
    """The names an assignment target binds: ``a``, or those of ``(a, *b)``/``[a, b]``; none
    for an attribute or subscript target."""
    if type(target) is cst.Name:
        return {target.value}
    if type(target) is cst.Tuple or type(target) is cst.List:
        out: set[str] = set()
        for element in target.elements:
            out |= bound_names(element.value)
        return out
    if type(target) is cst.StarredElement:
        return bound_names(target.value)
    return set()


# What names_bound_in_expressions_or_rebound looks at.
_REBINDING = frozenset({cst.CompFor, cst.Lambda, cst.NamedExpr, cst.Global, cst.Nonlocal, cst.Del})


def _target_names(target: cst.CSTNode) -> set[str]:
    """Names bound by an assignment target (``a``, ``(a, *b)``, ``[a, b]``; an attribute or
    subscript target gives its names too, which only makes callers more careful)."""
    return {n.value for n in iter_nodes(target) if type(n) is cst.Name}


# Pattern nodes that hold patterns without being patterns themselves.
_PATTERN_PARTS = frozenset(
    {cst.MatchSequenceElement, cst.MatchMappingElement, cst.MatchKeywordElement, cst.MatchOrElement}
)


def defining_scope(name: str, scope: Scope) -> Scope | None:
    """The scope whose binding of ``name`` a read in ``scope`` sees, by Python's rules
    (``global`` declarations, class bodies not enclosing their methods); None: unbound here."""
    if name in scope.globals:
        scope = scope.module
    start = scope
    current: Scope | None = scope
    while current is not None:
        if current.kind == "class" and current is not start:
            current = current.parent
            continue
        if name in current.bindings and name not in current.nonlocals:
            return current
        current = current.parent
    return None


def lookup(name: str, scope: Scope) -> set[str]:
    """Qualified names a bare ``name`` may stand for when read in ``scope``."""
    owner = defining_scope(name, scope)
    if owner is not None:
        return owner.bindings[name]
    start = scope.module if name in scope.globals else scope
    module = start.module
    if module.star_imports:
        return {f"{m}.{name}" for m in module.star_imports}
    if name in _BUILTINS:
        return {f"builtins.{name}"}
    return set()


def qualified_names(node: cst.BaseExpression, scope: Scope) -> set[str]:
    """Qualified names of a Name/Attribute chain (``xs.Mesh`` -> ``{"torch_xla.distributed.spmd.Mesh"}``).

    Locally computed heads give no name: ``self.mesh.shape`` resolves to nothing.
    """
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return set()
    heads = lookup(node.value, scope)
    tail = ".".join(reversed(parts))
    out = set()
    for head in heads:
        if head == LOCAL:
            continue
        out.add(f"{head}.{tail}" if tail else head)
    return out


def last_name(node: cst.CSTNode) -> str | None:
    """``f`` for ``f`` and for ``a.b.f``: the name a call's callee or a target ends in; None for
    anything else (a call, a subscript)."""
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute:
        return node.attr.value
    return None
