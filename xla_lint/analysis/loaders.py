"""Device loaders followed through a file's value flow (:class:`LoaderFlow`).

A torch_xla device loader (``pl.MpDeviceLoader(loader, device)``,
``pl.ParallelLoader(...).per_device_loader(device)``) ends a step on each batch: in torch_xla
2.9.0 ``PerDeviceLoader.next`` (``torch_xla/distributed/parallel_loader.py``, what
``MpDeviceLoader.__iter__`` returns) calls ``torch_xla.sync()`` before it hands out a batch. A
loop that iterates one needs no other step boundary. Where the loader comes from is a question
of flow, not of syntax: it reaches the loop through names, ``a or b``, ``x if c else y``,
``iter()``/``enumerate``/``islice``/``zip``, a parameter, a return value, an attribute, and other
modules of the program.

What one file can say about an expression is its *sources* (:meth:`LoaderFlow.sources`):

- :data:`LOADER`: it may be a device loader made in this file (any operand of ``or``/``if else``
  may be, a wrapper of one, a name or attribute assigned one anywhere in the module);
- ``F#i:name``: parameter ``name`` (position ``i``, empty for a keyword-only one) of the
  function keyed ``F``: whatever a caller passes there;
- ``ret:F``: what the function keyed ``F`` returns;
- ``fn:F``: the function keyed ``F`` itself (a name a ``def`` binds: ``return train`` in a factory
  that defines the closure ``train``), so that a call of a value can be followed to the functions
  it may run (:meth:`LoaderFlow.targets`).

Function keys: ``module.function`` for a function (nested ones too), ``module.Class`` for a
class's ``__init__`` (a call of the class), ``*.method`` for another method (a call
``obj.method(a)`` is recorded by attribute name; positions count after ``self``/``cls``).

The file's contribution to the program (:meth:`LoaderFlow.records`) is the value flow into
call slots and returns: ``{"loop.run_epoch#2": ["loader"], "ret:data.get_loader": ["loader"],
"*.fit#0": ["train.main#0:loader"]}`` (a slot is a position, a keyword, or ``*`` for a call
with ``*args``/``**kwargs``, whose source is :data:`UNKNOWN`). The program model joins every
file's records (:mod:`xla_lint.program.flow`) and closes them transitively.

Beside the value flow, the records say which functions run inside a step (keys the loop facts
add, :meth:`xla_lint.analysis.loops.LoopFacts.step_records`): ``run:sync`` -> what a loop whose
iterations end a step (a sync, ``torch_xla.step()``, a compiled call) calls, ``run:batch`` ->
what a loop over a device loader made here calls, ``run:batch=K`` -> what a loop over the value
keyed ``K`` (a parameter, a return) calls, ``body:F`` -> what the function keyed ``F`` calls;
each call named by :meth:`LoaderFlow.targets`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import libcst as cst

from . import apis
from .context import FileContext
from .names import Scope, defining_scope
from .names import last_name as _last_name

DEVICE_LOADERS = frozenset({apis.MP_DEVICE_LOADER, apis.PARALLEL_LOADER})


# Calls that pass an iterable through: `for i, b in enumerate(loader)` iterates `loader`.
WRAPPERS = frozenset({"enumerate", "iter", "zip", "tqdm", "islice", "cycle", "chain", "trange"})


LOADER = "loader"  # a source: may be a device loader made in this file
UNKNOWN = "?"  # a source: a value the file cannot follow (`f(*args)`)
RETURN = "ret:"  # a key's prefix: what a function returns
FUNCTION = "fn:"  # a source's prefix: the function keyed so, as a value


# Callees whose parameters and returns no linted file defines: not recorded (the records stay small).
# accelerate's calls that return the loaders they are given, wrapped for the device.
_ACCELERATE_PREPARE = frozenset({"prepare", "prepare_data_loader"})


def _display_values(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values of a dict, list or tuple display (none for anything else)."""
    if type(node) is cst.Dict:
        return [e.value for e in node.elements if type(e) is cst.DictElement]
    if isinstance(node, (cst.List, cst.Tuple)):
        return [e.value for e in node.elements if type(e) is cst.Element]
    return []


_FOREIGN = frozenset(sys.stdlib_module_names) | {"builtins", "torch", "torch_xla", "numpy", "np"}


_FLOW_TYPES = frozenset(
    {
        cst.FunctionDef,
        cst.ClassDef,
        cst.Lambda,
        cst.Assign,
        cst.AnnAssign,
        cst.Return,
        cst.Call,
    }
)


@dataclass
class _Function:
    """A function of the file: its key, its parameters (name -> source key) and the position a
    caller fills for each positional one (``self``/``cls`` of a method not counted)."""

    key: str
    params: dict[str, str] = field(default_factory=dict)
    positions: dict[str, int] = field(default_factory=dict)  # name -> position a caller fills


def param_key(function: str, position: int | None, name: str) -> str:
    """The source key of a parameter: ``loop.run_epoch#2:loader`` (``#:name`` keyword-only)."""
    return f"{function}#{'' if position is None else position}:{name}"


def parse_param(key: str) -> tuple[str, str, str] | None:
    """``("loop.run_epoch", "2", "loader")`` for ``loop.run_epoch#2:loader``; None for another key."""
    function, sep, rest = key.rpartition("#")
    if not sep or ":" not in rest or key.startswith(RETURN):
        return None
    position, _, name = rest.partition(":")
    return function, position, name


class LoaderFlow:
    """The device-loader value flow of one module (one pass over :attr:`FileContext.flat`,
    computed once per file: :meth:`of`).

    ``makes_loader``: the module makes a device loader somewhere. ``defined``: the keys of its
    functions. :meth:`sources` answers for one expression; :meth:`records` gives what the file
    contributes to the program model (see the module docstring for the keys).
    """

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.module = ctx.module_name
        self.makes_loader = False
        self.functions: dict[int, _Function] = {}  # id(FunctionDef) -> its function
        self.by_key: dict[str, list[int]] = {}
        # (id(defining scope), name) -> values assigned; attribute name -> values assigned.
        self._names: dict[tuple[int, str], list[tuple[cst.BaseExpression, Scope]]] = {}
        self._attributes: dict[str, list[tuple[cst.BaseExpression, Scope]]] = {}
        self._returns: dict[str, list[tuple[cst.BaseExpression, Scope]]] = {}
        # (id(scope a def binds its name in), name) -> the function's key (not methods).
        self._defs: dict[tuple[int, str], str] = {}
        self._calls: list[tuple[cst.Call, Scope]] = []
        # `self._pl = pl` (a module bound to an attribute): attribute -> qualified names.
        self._attribute_modules: dict[str, frozenset[str]] = {}
        self.loader_names: set[str] = set()  # names assigned a loader made here, by name
        self.loader_attributes: set[str] = set()
        self._memo: dict[tuple[int, int], frozenset[str]] = {}
        self._active: set[tuple[int, int]] = set()
        self._scan()

    @classmethod
    def of(cls, ctx: FileContext) -> LoaderFlow:
        """The flow of ``ctx``'s module, computed once per file."""
        return ctx.memo("xla_lint.analysis.loaders.LoaderFlow", lambda: cls(ctx))

    # -- the pass -------------------------------------------------------------------
    def _scan(self) -> None:
        ctx = self.ctx
        flat = ctx.flat
        nodes, ends = flat.nodes, flat.ends
        # (end of subtree, scope pushed?, the FunctionDef or ClassDef or None)
        opened: list[tuple[int, bool, cst.CSTNode | None]] = []
        scopes: list[Scope] = [ctx.root_scope]
        prefix = f"{self.module}." if self.module else ""

        def enclosing_function() -> cst.FunctionDef | None:
            """The function whose body the node is in (not a lambda's or a class's)."""
            for _, _, node in reversed(opened):
                if type(node) is cst.FunctionDef:
                    return node
                return None
            return None

        assignments: list[tuple[list[cst.BaseExpression], cst.BaseExpression, Scope]] = []
        for i in flat.of_types(_FLOW_TYPES):
            while opened and opened[-1][0] <= i:
                if opened.pop()[1]:
                    scopes.pop()
            node = nodes[i]
            kind = type(node)
            if kind is cst.FunctionDef:
                assert isinstance(node, cst.FunctionDef)
                owner = opened[-1][2] if opened else None
                self._define(node, owner if type(owner) is cst.ClassDef else None, prefix)
                if type(owner) is not cst.ClassDef:
                    key = self.functions[id(node)].key
                    self._defs[(id(scopes[-1]), node.name.value)] = key
                scopes.append(ctx.scopes.get(node, scopes[-1]))
                opened.append((ends[i], True, node))
            elif kind is cst.ClassDef:
                scopes.append(ctx.scopes.get(node, scopes[-1]))
                opened.append((ends[i], True, node))
            elif kind is cst.Lambda:
                opened.append((ends[i], False, node))
            elif kind is cst.Assign:
                assert isinstance(node, cst.Assign)
                assignments.append(([t.target for t in node.targets], node.value, scopes[-1]))
            elif kind is cst.AnnAssign:
                assert isinstance(node, cst.AnnAssign)
                if node.value is not None:
                    assignments.append(([node.target], node.value, scopes[-1]))
            elif kind is cst.Return:
                assert isinstance(node, cst.Return)
                function = enclosing_function()
                if node.value is not None and function is not None:
                    key = self.functions[id(function)].key
                    self._returns.setdefault(key, []).append((node.value, scopes[-1]))
            elif kind is cst.Call:
                assert isinstance(node, cst.Call)
                self._calls.append((node, scopes[-1]))
        for targets, value, scope in assignments:
            for target in targets:
                if type(target) is cst.Name:
                    bound = defining_scope(target.value, scope) or scope
                    self._names.setdefault((id(bound), target.value), []).append((value, scope))
                elif type(target) is cst.Attribute:
                    attribute = target.attr.value
                    self._attributes.setdefault(attribute, []).append((value, scope))
                    if type(value) in (cst.Name, cst.Attribute):
                        found = ctx.qnames(value, scope)
                        if found:
                            self._attribute_modules[attribute] = found
        self.makes_loader = any(self._makes(call, scope) for call, scope in self._calls) or any(
            apis.DATA_PARALLEL in self.qnames(call, scope) for call, scope in self._calls
        )
        # Names and attributes assigned a loader made here, by name across the module (a name
        # reused for the same loader in another function is the same loader more often than not).
        changed = True
        while changed:
            changed = False
            for targets, value, scope in assignments:
                if not self._local_loader(value, scope):
                    continue
                for target in targets:
                    assigned = _last_name(target)
                    if assigned is None:
                        continue
                    table = (
                        self.loader_names if type(target) is cst.Name else self.loader_attributes
                    )
                    if assigned not in table:
                        table.add(assigned)
                        changed = True
                        self._memo.clear()

    def _define(self, node: cst.FunctionDef, owner: cst.ClassDef | None, prefix: str) -> None:
        name = node.name.value
        shift = 0
        if owner is not None:
            decorators = {_last_name(d.decorator) for d in node.decorators}
            shift = 0 if "staticmethod" in decorators else 1
            key = f"{prefix}{owner.name.value}" if name == "__init__" else f"*.{name}"
        else:
            key = f"{prefix}{name}"
        function = _Function(key)
        p = node.params
        positional = [*p.posonly_params, *p.params]
        for index, param in enumerate(positional):
            if index < shift:
                continue
            position = index - shift
            function.params[param.name.value] = param_key(key, position, param.name.value)
            function.positions[param.name.value] = position
        for param in p.kwonly_params:
            function.params[param.name.value] = param_key(key, None, param.name.value)
        self.functions[id(node)] = function
        self.by_key.setdefault(key, []).append(id(node))

    @property
    def defined(self) -> frozenset[str]:
        """Keys of the module's functions."""
        return frozenset(self.by_key)

    # -- what a name stands for -------------------------------------------------------
    def qnames(self, node: cst.CSTNode, scope: Scope) -> frozenset[str]:
        """:meth:`FileContext.qnames` of ``node`` (a call's callee), and for ``self._pl.X`` with
        ``self._pl = pl`` in the module, what ``pl.X`` names (``_pl`` bound to a module)."""
        found = self.ctx.qnames(node, scope)
        if found:
            return found
        func = node.func if type(node) is cst.Call else node
        if (
            type(func) is cst.Attribute
            and type(func.value) is cst.Attribute
            and type(func.value.value) is cst.Name
            and func.value.value.value == "self"
        ):
            modules = self._attribute_modules.get(func.value.attr.value)
            if modules:
                attr = func.attr.value
                return frozenset(
                    {f"{m}.{attr}" for m in modules}
                    | {apis.canonical(f"{m}.{attr}") for m in modules}
                )
        return frozenset()

    def _makes(self, call: cst.Call, scope: Scope) -> bool:
        """``MpDeviceLoader(...)``, ``ParallelLoader(...)``, ``x.per_device_loader(...)``, and
        accelerate's ``accelerator.prepare(...)``/``prepare_data_loader(...)`` in a file that
        imports torch_xla (on XLA accelerate wraps each DataLoader in ``MpDeviceLoaderWrapper``,
        an ``MpDeviceLoader``: accelerate ``data_loader.py`` ``prepare_data_loader``)."""
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "per_device_loader":
            return True
        if (
            self.ctx.imports_torch_xla
            and _last_name(func) in _ACCELERATE_PREPARE
            and any(m.split(".", 1)[0] == "accelerate" for m in self.ctx.imported_modules)
        ):
            return True
        return bool(self.qnames(call, scope) & DEVICE_LOADERS)

    def _local_loader(self, node: cst.CSTNode, scope: Scope) -> bool:
        return LOADER in self.sources(node, scope, local=True)

    def is_loader(self, node: cst.CSTNode, scope: Scope) -> bool:
        """True when ``node`` may be a device loader made in this module (see :data:`LOADER`),
        through names, attributes, ``or``/``if else``, wrappers and the module's own functions'
        returns."""
        return LOADER in self.sources(node, scope)

    def sources(self, node: cst.CSTNode, scope: Scope, local: bool = False) -> frozenset[str]:
        """Where ``node``'s value may come from (:data:`LOADER`, parameter and return keys; see
        the module docstring); the returns of the module's own functions are followed.
        ``local``: only what this module makes (no names assigned by name elsewhere)."""
        key = (id(node), id(scope) * 2 + local)
        found = self._memo.get(key)
        if found is not None:
            return found
        if key in self._active:
            return frozenset()  # a cycle: `x = x or y`
        self._active.add(key)
        try:
            found = frozenset(self._sources(node, scope, local))
        finally:
            self._active.discard(key)
        self._memo[key] = found
        return found

    def _sources(self, node: cst.CSTNode, scope: Scope, local: bool) -> set[str]:
        kind = type(node)
        if kind is cst.BooleanOperation:
            assert isinstance(node, cst.BooleanOperation)
            return set(
                self.sources(node.left, scope, local) | self.sources(node.right, scope, local)
            )
        if kind is cst.IfExp:
            assert isinstance(node, cst.IfExp)
            return set(
                self.sources(node.body, scope, local) | self.sources(node.orelse, scope, local)
            )
        if kind is cst.Call:
            assert isinstance(node, cst.Call)
            if self._makes(node, scope):
                return {LOADER}
            func = node.func
            if _last_name(func) in WRAPPERS:
                out: set[str] = set()
                for a in node.args:
                    if a.keyword is None:
                        out |= self.sources(a.value, scope, local)
                return out
            out = set()
            callees = self.callees(node, scope)
            for callee in callees:
                if not self._followed(node, callee):
                    continue
                out.add(RETURN + callee)
                for value, value_scope in self._returns.get(callee, ()):
                    out |= self.sources(value, value_scope, local)
            if callees and not any(c in self._returns for c in callees):
                # A call of code this file does not show, handed a device loader, may hand its
                # batches on: `for d in metric_logger.log_every(pl.MpDeviceLoader(...), 10):`
                # (DETR/DINO's MetricLogger, a generator of the items it is given).
                for a in node.args:
                    if a.keyword is None and LOADER in self.sources(a.value, scope, local):
                        out.add(LOADER)
                        break
            return out
        if kind is cst.Subscript:
            assert isinstance(node, cst.Subscript)
            # `loaders["train"]` of a dict, list or tuple display assigned to a name: any value.
            out = set()
            if type(node.value) is cst.Name:
                owner = defining_scope(node.value.value, scope)
                if owner is not None:
                    for value, value_scope in self._names.get((id(owner), node.value.value), ()):
                        for item in _display_values(value):
                            out |= self.sources(item, value_scope, local)
            return out
        if kind is cst.Name:
            assert isinstance(node, cst.Name)
            if not local and node.value in self.loader_names:
                return {LOADER}
            owner = defining_scope(node.value, scope)
            if owner is None:
                return set()
            out = set()
            defined = self._defs.get((id(owner), node.value))
            if defined is not None:
                out.add(FUNCTION + defined)
            if type(owner.node) is cst.FunctionDef:
                function = self.functions.get(id(owner.node))
                if function is not None and node.value in function.params:
                    out.add(function.params[node.value])
            for value, value_scope in self._names.get((id(owner), node.value), ()):
                out |= self.sources(value, value_scope, local)
            return out
        if kind is cst.Attribute:
            assert isinstance(node, cst.Attribute)
            name = node.attr.value
            if not local and name in self.loader_attributes:
                return {LOADER}
            out = set()
            for value, value_scope in self._attributes.get(name, ()):
                out |= self.sources(value, value_scope, local)
            return out
        return set()

    def callees(self, call: cst.Call, scope: Scope) -> list[str]:
        """Keys of the functions ``call`` may run: ``module.f`` for the module's own ``f(...)``,
        the qualified names of an imported one, ``*.m`` for a method call ``obj.m(...)``;
        none for the standard library, torch, torch_xla and numpy."""
        func = call.func
        names = self.ctx.qnames(func, scope)
        if names:
            return sorted(n for n in names if n.split(".", 1)[0] not in _FOREIGN)
        if type(func) is cst.Name:
            return [f"{self.module}.{func.value}" if self.module else func.value]
        if type(func) is cst.Attribute:
            return [f"*.{func.attr.value}"]
        return []

    def targets(self, call: cst.Call, scope: Scope) -> frozenset[str]:
        """What ``call`` may run, as flow keys for the program model to resolve: a function's key
        (``train_fns.train_step``, ``*.fit`` for ``self.fit(...)`` or a method of the module),
        or, for a callee that is a value, its sources (``fn:train_fns.train``, what
        ``ret:train_fns.make_step`` returns, a parameter ``loop.run#1:step_fn``): ``train =
        train_fns.GAN_training_function(...)`` ... ``train(x, y)`` runs what that factory returns.
        None for the standard library, torch, torch_xla and numpy."""
        func = call.func
        out: set[str] = set()
        if type(func) is cst.Name and not self.ctx.qnames(func, scope):
            found = self.sources(func, scope) - {LOADER}
            if found:
                return found
        for callee in self.callees(call, scope):
            if self._followed(call, callee):
                out.add(callee)
        if type(func) is cst.Attribute:
            out |= self.sources(func, scope) - {LOADER}
        return frozenset(out)

    def key_of(self, function: cst.FunctionDef) -> str | None:
        """The flow key of one of the module's functions (see the module docstring)."""
        info = self.functions.get(id(function))
        return info.key if info is not None else None

    def _followed(self, call: cst.Call, callee: str) -> bool:
        """Whether a call's return is worth a key: the module's own functions and methods,
        ``self.m(...)``, and functions of other modules (not ``obj.to(device)``)."""
        if not callee.startswith("*."):
            return True
        func = call.func
        return callee in self.by_key or (
            type(func) is cst.Attribute
            and type(func.value) is cst.Name
            and func.value.value == "self"
        )

    # -- what the file contributes ------------------------------------------------------
    def called(self) -> frozenset[str]:
        """Keys of the functions (not methods) this file calls or passes by name: ``f(...)``,
        ``mod.f(...)`` through an import, ``spawn(f, ...)``; the program model reads them to tell
        a function with callers from one without (a method call ``obj.f()`` calls no function ``f``)."""
        out: set[str] = set()
        for call, scope in self._calls:
            func = call.func
            if type(func) is cst.Name or self.ctx.qnames(func, scope):
                out.update(self.callees(call, scope))
            for arg in call.args:
                value = arg.value
                if type(value) is cst.Name and self.ctx.qnames(value, scope):
                    out.update(
                        n
                        for n in self.ctx.qnames(value, scope)
                        if n.split(".", 1)[0] not in _FOREIGN
                    )
                elif type(value) is cst.Name:
                    key = f"{self.module}.{value.value}" if self.module else value.value
                    if key in self.by_key:  # one of the module's functions, passed as a callback
                        out.add(key)
        return frozenset(out)

    def records(self) -> dict[str, list[str]]:
        """Value flow into call slots and returns, for :attr:`FileFacts.flows` (see the module
        docstring): only flows with a source, each target's sources sorted."""
        out: dict[str, set[str]] = {}
        for call, scope in self._calls:
            callees = self.callees(call, scope)
            if not callees:
                continue
            position = 0
            starred = False
            for arg in call.args:
                if arg.star:
                    starred = True
                    for callee in callees:
                        out.setdefault(f"{callee}#*", set()).add(UNKNOWN)
                    continue
                found = self.sources(arg.value, scope)
                if arg.keyword is not None:
                    slot = arg.keyword.value
                else:
                    slot = str(position)
                    position += 1
                    if starred:
                        slot = "*"
                if not found:
                    continue
                for callee in callees:
                    out.setdefault(f"{callee}#{slot}", set()).update(found)
        for key in self._data_parallel_loops():
            out.setdefault(f"{key}#1", set()).add(LOADER)
        for key, values in self._returns.items():
            found_all: set[str] = set()
            for value, scope in values:
                found_all |= self.sources(value, scope)
            if found_all:
                out.setdefault(RETURN + key, set()).update(found_all)
        return {k: sorted(v) for k, v in sorted(out.items())}

    def _data_parallel_loops(self) -> list[str]:
        """Keys of the module's functions given to a ``DataParallel`` instance as its loop
        function (``net = dp.DataParallel(model, device_ids=devices)`` ... ``net(train_loop_fn,
        loader)``): torch_xla passes each a per-device loader as its second argument
        (:data:`~xla_lint.analysis.apis.DATA_PARALLEL`)."""
        out = []
        for call, scope in self._calls:
            if not call.args or type(call.args[0].value) is not cst.Name:
                continue
            if not self._is_data_parallel(call.func, scope):
                continue
            name = call.args[0].value.value
            key = f"{self.module}.{name}" if self.module else name
            if key in self.by_key:
                out.append(key)
        return out

    def _is_data_parallel(self, func: cst.BaseExpression, scope: Scope) -> bool:
        """``func`` is a ``DataParallel(...)`` made there, or a name or attribute assigned one."""
        if type(func) is cst.Call:
            return apis.DATA_PARALLEL in self.ctx.qnames(func.func, scope)
        if type(func) is cst.Name:
            bound = defining_scope(func.value, scope) or scope
            values = self._names.get((id(bound), func.value), [])
        elif type(func) is cst.Attribute:
            values = self._attributes.get(func.attr.value, [])
        else:
            return False
        return any(
            type(value) is cst.Call and apis.DATA_PARALLEL in self.ctx.qnames(value.func, at)
            for value, at in values
        )

    def consumed(self, function: cst.FunctionDef) -> frozenset[str]:
        """The parameters of ``function`` (by caller position and name: ``"0"``, ``"it"``) whose
        batches it takes: ``next(it)`` or a ``for`` loop over one, directly in its body."""
        info = self.functions.get(id(function))
        if info is None:
            return frozenset()
        scope = self.ctx.scopes.get(function)
        out: set[str] = set()
        for call, call_scope in self._calls:
            if call_scope is not scope:
                continue
            func = call.func
            if type(func) is cst.Name and func.value == "next" and call.args:
                value = call.args[0].value
                if type(value) is cst.Name and value.value in info.params:
                    out.add(value.value)
                    if value.value in info.positions:
                        out.add(str(info.positions[value.value]))
        return frozenset(out)
