"""The module's own functions and the calls that run them: which function or method of this file
``helper(...)`` or ``self._clip()`` runs, and the calls each function's body makes, in the
order they are written (:class:`LocalFunctions`, computed once per file from ``ctx.flat``).

A rule that asks what a step does "through the helpers it calls" (XLA016: a clip inside
``self._clip()`` called before ``xm.optimizer_step``) follows :meth:`LocalFunctions.callee`
from the calls of :meth:`LocalFunctions.calls_of`; it never matches names itself.
:meth:`LocalFunctions.arms` and :func:`exclusive` say when two calls are in different arms of
one ``if`` (``if xla: xm.optimizer_step(opt) else: clip(...); opt.step()``) and so never
run in the same pass. Only this
file's definitions are followed: a function imported from another module, a method of another
object (``trainer.clip()``) or of a base class defined elsewhere, and a function passed as a
value are not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .context import FileContext
from .names import Scope, defining_scope

_TYPES = frozenset({cst.Call, cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.If})


Arms = tuple[
    tuple[int, int], ...
]  # the ifs around a call in its body: (id() of the If, 0 body | 1 else)


@dataclass(eq=False)
class Function:
    """One ``def`` of the module.

    ``scope``: the scope of its body; ``owner``: the class whose body defines it (a method),
    else None; ``self_class``: the class ``self`` stands for in its body (its owner, or, for a
    function nested in a method, the method's class); ``calls``: the calls its body runs
    itself, in source order, each with the scope it is read in (not those inside a nested
    function, lambda or class, nor its decorators and parameter defaults, which run where it
    is defined).
    """

    node: cst.FunctionDef
    scope: Scope
    owner: cst.ClassDef | None
    self_class: cst.ClassDef | None
    calls: list[tuple[cst.Call, Scope]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.node.name.value


class LocalFunctions:
    """Every ``def`` of one module and the calls that run them.

    ``functions``: in source order; ``module_calls``: the calls the module body runs itself
    (outside any function, lambda or class body). Built in one pass over ``ctx.flat``: O(nodes).
    """

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.functions: list[Function] = []
        self.module_calls: list[tuple[cst.Call, Scope]] = []
        self._by_node: dict[int, Function] = {}
        # id() of a module/function/class node -> name -> the last def of that name in its body
        self._defined: dict[int, dict[str, Function]] = {}
        self._redefined: set[tuple[int, str]] = set()  # (id() of the body's node, name) def'd twice
        self._arms: dict[int, Arms] = {}  # id() of a call -> the ifs around it
        self._classes: dict[int, dict[str, cst.ClassDef]] = {}  # as _defined, for classes
        self._returns: dict[int, list[cst.BaseExpression | None]] = {}  # id() of a def -> returns
        self._scan()

    @classmethod
    def of(cls, ctx: FileContext) -> LocalFunctions:
        """The functions of ``ctx``'s module, computed once per file."""
        return ctx.memo("xla_lint.analysis.functions.LocalFunctions", lambda: cls(ctx))

    def _scan(self) -> None:
        ctx = self.ctx
        flat = ctx.flat
        nodes, ends = flat.nodes, flat.ends
        arms = self._arms
        # Open definitions and ifs around the node being read, outermost first: (end of its
        # subtree, the node, start and stop of its body's range in ``nodes``, its Function or
        # None, start and stop of an if's ``else``/``elif`` range).
        opened: list[tuple[int, cst.CSTNode, int, int, Function | None, int, int]] = []

        def extent(i: int, child: cst.CSTNode | None) -> tuple[int, int]:
            j = i + 1
            while child is not None and j < ends[i] and nodes[j] is not child:
                j = ends[j]
            return (j, ends[j]) if child is not None and j < ends[i] else (j, j)

        def holder(i: int) -> tuple[cst.CSTNode | None, Function | None, bool]:
            """The innermost definition whose body holds ``nodes[i]`` (None: the module), its
            Function when it is a def, and whether ``nodes[i]`` is in a lambda or class body."""
            for _, node, start, stop, function, _, _ in reversed(opened):
                if type(node) is not cst.If and start <= i < stop:
                    return node, function, type(node) is not cst.FunctionDef
            return None, None, False

        def scope_of(i: int) -> Scope:
            for _, node, start, stop, function, _, _ in reversed(opened):
                if type(node) is cst.If or not start <= i < stop:
                    continue
                if function is not None:
                    return function.scope
                if type(node) is cst.ClassDef:
                    return ctx.scopes[node]
            return ctx.root_scope

        def arms_of(i: int) -> tuple[tuple[int, int], ...]:
            """The ifs around ``nodes[i]`` in its own body, each with the arm it is in."""
            found: list[tuple[int, int]] = []
            for _, node, start, stop, _, else_start, else_stop in reversed(opened):
                if type(node) is not cst.If:
                    if start <= i < stop:
                        break
                    continue
                if start <= i < stop:
                    found.append((id(node), 0))
                elif else_start <= i < else_stop:
                    found.append((id(node), 1))
            return tuple(found)

        for i in flat.of_types(_TYPES):
            while opened and opened[-1][0] <= i:
                opened.pop()
            node = nodes[i]
            if type(node) is cst.Call:
                where, function, elsewhere = holder(i)
                if elsewhere:
                    continue
                record = (node, scope_of(i))
                if function is not None:
                    function.calls.append(record)
                elif where is None:
                    self.module_calls.append(record)
                path = arms_of(i)
                if path:
                    arms[id(node)] = path
                continue
            assert isinstance(node, (cst.If, cst.FunctionDef, cst.ClassDef, cst.Lambda))
            start, stop = extent(i, node.body)
            if type(node) is cst.If:
                else_start, else_stop = extent(i, node.orelse)
                opened.append((ends[i], node, start, stop, None, else_start, else_stop))
            elif type(node) is cst.FunctionDef:
                where, _, _ = holder(i)
                owner = where if isinstance(where, cst.ClassDef) else None
                self_class = owner
                if self_class is None:
                    for _, _, _, _, outer, _, _ in reversed(opened):
                        if outer is not None and outer.self_class is not None:
                            self_class = outer.self_class
                            break
                function = Function(node, ctx.scopes.get(node, ctx.root_scope), owner, self_class)
                self.functions.append(function)
                self._by_node[id(node)] = function
                key = id(where) if where is not None else id(ctx.module)
                defined = self._defined.setdefault(key, {})
                if node.name.value in defined:
                    self._redefined.add((key, node.name.value))
                defined[node.name.value] = function
                opened.append((ends[i], node, start, stop, function, 0, 0))
            else:
                if type(node) is cst.ClassDef:
                    where, _, _ = holder(i)
                    key = id(where) if where is not None else id(ctx.module)
                    self._classes.setdefault(key, {})[node.name.value] = node
                opened.append((ends[i], node, start, stop, None, 0, 0))

    def function(self, node: cst.FunctionDef) -> Function | None:
        """The :class:`Function` of a ``def`` of this module."""
        return self._by_node.get(id(node))

    def returns(self, function: Function) -> list[cst.BaseExpression | None]:
        """The values ``function``'s ``return`` statements give, in source order (None for a bare
        ``return``), not those of a nested function, lambda or class; [] when it has none."""
        key = id(function.node)
        found = self._returns.get(key)
        if found is None:
            found = self._returns[key] = []
            values = found

            class _Returns(cst.CSTVisitor):
                def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                    return False

                def visit_ClassDef(self, node: cst.ClassDef) -> bool:
                    return False

                def visit_Lambda(self, node: cst.Lambda) -> bool:
                    return False

                def visit_Return(self, node: cst.Return) -> None:
                    values.append(node.value)

            function.node.body.visit(_Returns())
        return found

    def calls_of(self, function: Function | None) -> list[tuple[cst.Call, Scope]]:
        """The calls ``function``'s body runs itself (None: the module body), in source order."""
        return self.module_calls if function is None else function.calls

    def arms(self, call: cst.Call) -> Arms:
        """The ``if`` statements around ``call`` in the body it runs in (innermost first), each
        with the arm it is in: 0 for the body, 1 for the ``else``/``elif`` part (a call in an
        ``if``'s test is in neither). Two calls in different arms of one ``if`` never both run
        in one pass (:func:`exclusive`)."""
        return self._arms.get(id(call), ())

    def callee(self, call: cst.Call, scope: Scope, caller: Function | None) -> Function | None:
        """The function of this module that ``call`` runs, or None.

        ``helper(...)``: the ``def helper`` that the name resolves to in ``scope`` (a
        module-level function, or one nested in an enclosing function; an imported name or a
        parameter is not one). ``self.name(...)`` in a method of class ``C`` (or in a function
        nested in one): :meth:`method` ``name`` of ``C``. When a body defines a name twice, the
        last definition is taken.
        """
        func = call.func
        if type(func) is cst.Name:
            return self.named(func, scope)
        if (
            type(func) is cst.Attribute
            and type(func.value) is cst.Name
            and func.value.value == "self"
            and caller is not None
            and caller.self_class is not None
        ):
            return self.method(caller.self_class, func.attr.value)
        return None

    def named(self, name: cst.Name, scope: Scope, once: bool = False) -> Function | None:
        """The ``def`` of this module that ``name`` resolves to in ``scope`` (a module-level
        function, or one nested in an enclosing function; an imported name or a parameter is
        not one); the last of two defs of the name in one body, or None with ``once``."""
        owner = defining_scope(name.value, scope)
        if owner is None or owner.kind == "class" or owner.node is None:
            return None
        if self.ctx.qnames(name, scope):
            return None  # imported, or bound to another module's name
        if once and (id(owner.node), name.value) in self._redefined:
            return None
        return self._defined.get(id(owner.node), {}).get(name.value)

    def method(self, cls: cst.ClassDef, name: str, depth: int = 0) -> Function | None:
        """The method ``name`` that ``self.name`` finds on an instance of ``cls``: ``cls``'s own,
        else its bases' that this file defines (``class Trainer(Base):``), left to right, depth
        first (Python's MRO differs only for diamonds). A base imported from elsewhere ends the
        search there: a subclass that leaves a method to an unknown base is not followed."""
        own = self._defined.get(id(cls), {}).get(name)
        if own is not None or depth > 8:
            return own
        outer = self.ctx.scopes.get(cls)
        scope = outer.parent if outer is not None else None
        for base in cls.bases:
            value = base.value
            if base.keyword is not None:
                continue  # metaclass=...
            names = self.ctx.qnames(value, scope) if scope is not None else frozenset()
            if names == {"builtins.object"}:
                continue
            parent = None
            if scope is not None and type(value) is cst.Name and not names:
                owner = defining_scope(value.value, scope)
                if owner is not None and owner.node is not None:
                    parent = self._classes.get(id(owner.node), {}).get(value.value)
            if parent is None or parent is cls:
                return None  # a base defined elsewhere may define it
            found = self.method(parent, name, depth + 1)
            if found is not None:
                return found
        return None


def exclusive(a: Arms, b: Arms) -> bool:
    """True when two calls with these :meth:`LocalFunctions.arms` paths are in different arms
    of one ``if`` (paths through helpers concatenate: a helper's ifs are its own nodes)."""
    if not a or not b:
        return False
    other = dict(b)
    return any(other.get(node, arm) != arm for node, arm in a)
