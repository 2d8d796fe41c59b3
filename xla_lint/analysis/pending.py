"""Where nothing is pending: a point of a function at which the lazy graph has just been run.

torch_xla records tensor operations lazily and runs them at a sync. Right after one, until the
next tensor operation, no graph is pending: a host read (``.item()``, ``.cpu()``) or an
``xm.save`` there only copies device data to the host (torch_xla 2.9.0
``torch_xla/core/xla_model.py`` ``save`` -> ``_maybe_convert_to_cpu``: ``_xla_sync_multi`` of
tensors that are already device data compiles and executes nothing). A rule that asks "does
this host read run a graph?" (XLA015: a master-only save after the step's sync) asks
:func:`nothing_pending` for the node being visited; it never scans the statements itself.

A sync is, in torch_xla 2.9.0: ``xm.mark_step()`` and ``torch_xla.sync()``
(``torch_xla/torch_xla.py`` ``sync``); ``xm.optimizer_step(opt, barrier=True)``, which ends with
``mark_step``; the end of a ``with torch_xla.step():`` block (``step`` syncs on exit);
``xm.rendezvous``/``xm.xla_rendezvous`` (``xla_rendezvous`` calls ``torch_xla.sync()`` first and
after its own all-gathers, on every path) and ``xm.mesh_reduce``, which is a ``rendezvous`` of its
data copied to the host; a call of a function of this module whose body ends
with one of those (``train_step(...)`` whose last statement is ``xm.mark_step()``, a trailing
``return`` of values it computed before); the normal end of a ``for`` loop over a device loader
(``PerDeviceLoader.next`` in ``torch_xla/distributed/parallel_loader.py`` calls
``torch_xla.sync()`` before it raises ``StopIteration``) or of a loop whose body ends with a
sync, and an ``if`` every arm of which ends with one. An ``if`` whose arms only sync or do
nothing leaves what was pending before it. A device loader's fetch at the top of a loop
iteration (``for batch in mp_loader:``) syncs before the body, not after it: it is no sync for
code after the step in the same body.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst

from . import apis
from .context import FileContext, find_arg
from .devices import is_xla_device
from .functions import Function, LocalFunctions
from .holds import may_hold_tensors
from .loaders import LoaderFlow
from .loops import SYNC
from .names import Scope, bound_names, last_name
from .ranks import replica_guard
from .seeds import launched_functions
from .values import Site, definition
from .walk import TRIVIA, iter_nodes, walk

# Calls after which no graph is pending (see the module docstring).
SYNCS = SYNC | {f"{apis.XM}.rendezvous", f"{apis.XM}.xla_rendezvous", f"{apis.XM}.mesh_reduce"}
_OPTIMIZER_STEP = f"{apis.XM}.optimizer_step"
_STEP = "torch_xla.step"

# torch_xla functions that record no tensor operation: runtime queries, and `xm.save`, which
# syncs its data and copies it to the host (`_maybe_convert_to_cpu`).
_RECORD_NOTHING = frozenset(
    {
        f"{apis.XM}.get_ordinal",
        f"{apis.XM}.get_local_ordinal",
        f"{apis.XM}.is_master_ordinal",
        f"{apis.XM}.xrt_world_size",
        f"{apis.XM}.master_print",
        f"{apis.XM}.save",
        f"{apis.XM}.xla_device",
        "torch_xla.device",
    }
)

# Methods that record no tensor operation: the host's (dicts, strings, lists, loggers, files,
# progress bars), a module's or optimizer's `state_dict()` (references to device data), and
# host reads of a tensor (`.item()`, `.cpu()`: they execute what is pending, add nothing).
_HOST_METHODS = frozenset(
    {
        "state_dict",
        "item",
        "tolist",
        "cpu",
        "numpy",
        "detach",
        "format",
        "replace",
        "join",
        "get",
        "items",
        "keys",
        "values",
        "append",
        "extend",
        "update",
        "startswith",
        "endswith",
        "strip",
        "lower",
        "upper",
        "copy",
        "log",
        "info",
        "warning",
        "debug",
        "error",
        "write",
        "flush",
        "close",
        "exists",
        "makedirs",
        "mkdir",
        "set_description",
        "set_postfix",
        "add_scalar",
        "add_scalars",
        "parameters",
        "named_parameters",
        "train",
        "eval",
    }
)

_SYNC, _OP = "sync", "op"

_STATEMENT_OWNERS = (
    cst.IndentedBlock,
    cst.Module,
    cst.SimpleStatementLine,
    cst.SimpleStatementSuite,
)


def nothing_pending(ctx: FileContext, reads: cst.CSTNode | None = None) -> bool:
    """True when no graph is pending at the node being visited (``ctx.stack[-1]``): a sync
    (module docstring) runs earlier in the same block, or in a block around it, with no tensor
    operation between it and the node's statement. Code before the node in its own statement
    is not read (``xm.save(model.state_dict(), p)``: the arguments are the node's). Reaching a
    loop's body start or a function's entry without a sync answers False: what the previous
    iteration or the caller left pending is not known here. ``reads``: what the node reads
    in its own statement (a host read's tensor, ``xm.save``'s data), which must record no
    tensor operation either (``(a + b).item()`` runs the graph of ``a + b``)."""
    pending = _Pending.of(ctx)
    if reads is not None and pending.records(reads, None):
        return False
    if reads is not None:
        name = _read_name(reads)
        if name is not None and pending.materialized(ctx.stack, name):
            return True
    return pending.at(ctx.stack)


def _read_name(node: cst.CSTNode) -> str | None:
    """The one variable a read reads: ``loss`` for ``loss``, ``loss.detach()``, ``out[0]``."""
    while True:
        kind = type(node)
        if kind is cst.Attribute or kind is cst.Subscript:
            node = node.value  # type: ignore[attr-defined]
        elif kind is cst.Call and type(node.func) is cst.Attribute:  # type: ignore[attr-defined]
            node = node.func.value  # type: ignore[attr-defined]
        else:
            return node.value if kind is cst.Name else None  # type: ignore[attr-defined]


class _Pending:
    """The statement scan behind :func:`nothing_pending`, with the file's functions
    (:class:`LocalFunctions`) and a memo of which of them end with a sync."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.functions = LocalFunctions.of(ctx)
        self._ends_synced: dict[int, bool] = {}

    @classmethod
    def of(cls, ctx: FileContext) -> _Pending:
        return ctx.memo(_Pending, lambda: cls(ctx))

    def _position(
        self, stack: Sequence[cst.CSTNode]
    ) -> tuple[Function | None, Scope | None, int | None]:
        """The function the node (``stack[-1]``) runs in, its body's scope, and the index in
        ``stack`` of the innermost statement holding the node (None: no statement)."""
        caller, scope = None, None
        for anc in reversed(stack):
            if type(anc) is cst.FunctionDef:
                caller = self.functions.function(anc)
                scope = caller.scope if caller is not None else None
                break
        for i in range(len(stack) - 1, -1, -1):
            if isinstance(stack[i], cst.BaseSmallStatement | cst.BaseCompoundStatement):
                return caller, scope, i
        return caller, scope, None

    def at(self, stack: Sequence[cst.CSTNode]) -> bool:
        ctx = self.ctx
        caller, scope, start = self._position(stack)
        if start is None:
            return False
        child = stack[start]
        for j in range(start - 1, -1, -1):
            parent = stack[j]
            kind = type(parent)
            if kind is cst.FunctionDef and any(
                f is parent for f in launched_functions(ctx).values()
            ):
                return True  # a launched function starts a fresh process: nothing pending
            if kind is cst.FunctionDef or kind is cst.Lambda or kind is cst.ClassDef:
                return False
            if kind is cst.For or kind is cst.While:
                return False  # what the previous iteration left is not known here
            if isinstance(parent, _STATEMENT_OWNERS):
                body = parent.body
                for k in range(len(body) - 1, -1, -1):
                    if body[k] is child:
                        for sibling in reversed(body[:k]):
                            effect = self._effect(sibling, scope, caller, 1)
                            if effect == _SYNC:
                                return True
                            if effect == _OP:
                                return False
                        break
                if kind is cst.Module:
                    return False
            elif isinstance(parent, cst.If) and child is not parent.test:
                if replica_guard(ctx, parent.test) is None and self.records(parent.test, scope):
                    return False
            elif isinstance(parent, cst.With):
                if any(_STEP in ctx.qnames(item.item, scope) for item in parent.items):
                    return False  # inside the step: its graph is being recorded
                if any(self.records(item.item, scope) for item in parent.items):
                    return False
            child = parent
        return False

    def materialized(self, stack: Sequence[cst.CSTNode], name: str) -> bool:
        """The tensor(s) in variable ``name`` are device data at the node (``stack[-1]``), though
        other work may be pending: read backwards through the blocks around the node, a sync or
        an ``xm.save`` of ``name`` comes before any statement that mentions ``name`` (which may
        assign or change it), or the loop around reads it as a batch of a device loader (a
        transfer: device data). A ``.item()`` or ``.cpu()`` of device data copies it and runs no
        graph; ``xm.save`` makes the tensors of its data device data (``_xla_sync_multi``)."""
        ctx = self.ctx
        caller, scope, start = self._position(stack)
        if start is None:
            return False
        child = stack[start]
        for j in range(start - 1, -1, -1):
            parent = stack[j]
            kind = type(parent)
            if kind is cst.FunctionDef or kind is cst.Lambda or kind is cst.ClassDef:
                return False
            if kind is cst.While:
                return False
            if isinstance(parent, cst.For):
                return (
                    child is parent.body
                    and name in bound_names(parent.target)
                    and LoaderFlow.of(ctx).is_loader(parent.iter, scope or ctx.root_scope)
                )
            if isinstance(parent, _STATEMENT_OWNERS):
                body = parent.body
                for k in range(len(body) - 1, -1, -1):
                    if body[k] is child:
                        for sibling in reversed(body[:k]):
                            if self._effect(sibling, scope, caller, 1) == _SYNC:
                                return True
                            if _mentions(sibling, name):
                                source = _unpacked_from(sibling, name)
                                if source is None:
                                    return self._saves(sibling, name, scope)
                                name = source  # `x, _, y = batch`: what `batch` holds
                        break
                if kind is cst.Module:
                    return False
            elif isinstance(parent, cst.With) and any(
                _STEP in ctx.qnames(item.item, scope) for item in parent.items
            ):
                return False  # inside the step: its graph is being recorded
            child = parent
        return False

    def _saves(self, statement: cst.CSTNode, name: str, scope: Scope | None) -> bool:
        """``statement`` is ``xm.save(name, ...)``: it syncs the tensors of ``name``."""
        if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
            return False
        small = statement.body[0]
        call = small.value if type(small) is cst.Expr else None
        if type(call) is not cst.Call or f"{apis.XM}.save" not in self.ctx.qnames(call.func, scope):
            return False
        data = find_arg(call, "data", 0)
        return data is not None and type(data.value) is cst.Name and data.value.value == name

    # -- what one statement does --------------------------------------------------------
    def _effect(
        self, node: cst.CSTNode, scope: Scope | None, caller: Function | None, depth: int
    ) -> str | None:
        """``_SYNC`` when the statement ends with a sync, ``_OP`` when it may record a tensor
        operation after its last sync, None when it does neither."""
        ctx = self.ctx
        if isinstance(node, cst.SimpleStatementLine | cst.SimpleStatementSuite):
            for small in reversed(node.body):
                effect = self._effect(small, scope, caller, depth)
                if effect is not None:
                    return effect
            return None
        if type(node) is cst.FunctionDef or type(node) is cst.ClassDef:
            return None  # defines, runs nothing
        if type(node) is cst.For and self._loop_ends_synced(node, scope, caller, depth):
            return _SYNC
        if type(node) is cst.If:
            return self._if_effect(node, scope, caller, depth)
        if type(node) is cst.With:
            if any(_STEP in ctx.qnames(item.item, scope) for item in node.items):
                return _SYNC  # `torch_xla.step()` syncs on exit
            return _OP if self.records(node, scope) else None
        value: cst.CSTNode | None = None
        if type(node) is cst.Expr:
            value = node.value
        elif type(node) is cst.Assign or type(node) is cst.AnnAssign:
            value = node.value
        if type(value) is cst.Call and self._syncs(value, scope, caller, depth):
            targets = (
                [t.target for t in node.targets]
                if type(node) is cst.Assign
                else [node.target]
                if type(node) is cst.AnnAssign
                else []
            )
            if any(self.records(t, scope) for t in targets):
                return _OP
            return _SYNC
        return _OP if self.records(node, scope) else None

    def _syncs(
        self, call: cst.Call, scope: Scope | None, caller: Function | None, depth: int
    ) -> bool:
        """``call`` is a sync, or runs a function of this module whose body ends with one."""
        names = self.ctx.qnames(call.func, scope)
        if names & SYNCS:
            return True
        if _OPTIMIZER_STEP in names:
            barrier = find_arg(call, "barrier", 1)
            return barrier is not None and not (
                type(barrier.value) is cst.Name and barrier.value.value == "False"
            )
        if depth <= 0:
            return False
        callee = self.functions.callee(call, scope or self.ctx.root_scope, caller)
        return callee is not None and self._ends_with_sync(callee, depth - 1)

    def _if_effect(
        self, node: cst.If, scope: Scope | None, caller: Function | None, depth: int
    ) -> str | None:
        """An ``if`` statement's effect: ``_OP`` when its test or an arm may leave a tensor
        operation pending, ``_SYNC`` when every arm (an ``else`` included) ends with a sync,
        else None: an arm that syncs or does nothing (``if not master: xm.rendezvous(t)``)
        leaves at most what was pending before it."""
        if self.records(node.test, scope):
            return _OP
        effects = []
        arm: cst.If | cst.Else | None = node
        while arm is not None:
            effects.append(self._block_effect(arm.body, scope, caller, depth))
            if type(arm) is cst.If:
                if arm is not node and self.records(arm.test, scope):
                    return _OP
                arm = arm.orelse
            else:
                arm = None
        if not _has_else(node):
            effects.append(None)  # no else: the path that takes no arm
        if _OP in effects:
            return _OP
        return _SYNC if all(e == _SYNC for e in effects) else None

    def _block_effect(
        self, body: cst.BaseSuite, scope: Scope | None, caller: Function | None, depth: int
    ) -> str | None:
        """The effect of a block's last statement that has one (read backwards)."""
        statements = body.body if isinstance(body, cst.IndentedBlock) else (body,)
        for statement in reversed(statements):
            effect = self._effect(statement, scope, caller, depth)
            if effect is not None:
                return effect
        return None

    def _loop_ends_synced(
        self, loop: cst.For, scope: Scope | None, caller: Function | None, depth: int
    ) -> bool:
        """A ``for`` loop after whose normal end nothing is pending: it has no ``break`` and no
        ``else``, and either iterates a device loader (directly or through ``enumerate``/
        ``tqdm``; torch_xla 2.9.0 ``PerDeviceLoader.next`` calls ``torch_xla.sync()`` before it
        raises ``StopIteration``) or, with no ``continue`` either, its body ends with a sync."""
        if loop.orelse is not None:
            return False
        jumps = _jumps(loop)
        if cst.Break in jumps:
            return False
        iterable = loop.iter
        while (
            type(iterable) is cst.Call
            and iterable.args
            and last_name(iterable.func) in ("enumerate", "tqdm")
        ):
            iterable = iterable.args[0].value
        if LoaderFlow.of(self.ctx).is_loader(iterable, scope or self.ctx.root_scope):
            return True
        if cst.Continue in jumps:
            return False
        return self._block_effect(loop.body, scope, caller, depth) == _SYNC

    def _ends_with_sync(self, function: Function, depth: int) -> bool:
        """The function's body ends with a sync: its last statements, read backwards past a
        trailing ``return`` that records nothing, reach one before any tensor operation."""
        key = id(function.node)
        if key not in self._ends_synced:
            self._ends_synced[key] = False  # a recursive call reads False
            effect = self._block_effect(function.node.body, function.scope, function, depth)
            self._ends_synced[key] = effect == _SYNC
        return self._ends_synced[key]

    def records(self, node: cst.CSTNode, scope: Scope | None) -> bool:
        """``node`` may record a tensor operation: a call that is not a host one (a function of
        a module other than torch's, a torch_xla runtime query, a host method: ``state_dict``,
        ``format``, ``append``...), arithmetic other than on literals or a string's formatting
        (``a * 2`` may be a tensor's), a tensor index or slice (``x[:4]``; ``d['key']`` with a
        string key is a dict's), an in-place ``x += t`` (a counter's ``step += 1`` is not)."""
        ctx = self.ctx
        found = False
        site = Site(scope or ctx.root_scope)

        def _host(n: cst.BaseExpression) -> bool:
            """Arithmetic on values that provably hold no tensor (``epoch % 2`` of a range
            counter, ``(i + 1) % log_interval`` of an option)."""
            if type(n) is cst.BinaryOperation:
                return _host(n.left) and _host(n.right)
            return _literal(n) or not may_hold_tensors(ctx, n, site)

        class _V(cst.CSTVisitor):
            def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
                return False

            def visit_Lambda(self, n: cst.Lambda) -> bool:
                return False

            def visit_Call(self, n: cst.Call) -> bool:
                nonlocal found
                if not _host_call(ctx, n, scope):
                    found = True
                func = n.func
                if type(func) is cst.Attribute and func.attr.value == "state_dict":
                    return False  # `models[key].state_dict()`: a module picked from a container
                return not found

            def visit_BinaryOperation(self, n: cst.BinaryOperation) -> bool:
                nonlocal found
                strings = isinstance(n.left, cst.BaseString) or isinstance(n.right, cst.BaseString)
                if not (strings or _literal(n.left) and _literal(n.right) or _host(n)):
                    found = True
                return not found

            def visit_AugAssign(self, n: cst.AugAssign) -> bool:
                nonlocal found
                if not _literal(n.value):
                    found = True
                return not found

            def visit_Subscript(self, n: cst.Subscript) -> bool:
                nonlocal found
                for element in n.slice:
                    index = element.slice
                    if not (type(index) is cst.Index and type(index.value) is cst.SimpleString):
                        found = True
                return not found

        walk(node, _V(), TRIVIA)
        return found


def _unpacked_from(statement: cst.CSTNode, name: str) -> str | None:
    """For ``a, b = batch`` or ``b = batch`` that binds ``name``: ``batch``, else None."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if type(small) is not cst.Assign or type(small.value) is not cst.Name:
        return None
    if not any(name in bound_names(t.target) for t in small.targets):
        return None
    return small.value.value


def _mentions(node: cst.CSTNode, name: str) -> bool:
    """``node`` reads or binds the variable ``name`` anywhere (a nested function's too)."""
    return any(type(n) is cst.Name and n.value == name for n in iter_nodes(node))


def _has_else(node: cst.If) -> bool:
    """The ``if``/``elif`` chain ends with an ``else``."""
    arm: cst.If | cst.Else | None = node
    while type(arm) is cst.If:
        arm = arm.orelse
    return arm is not None


def _jumps(loop: cst.For) -> set[type]:
    """The ``break``/``continue`` types in ``loop``'s body that act on ``loop`` itself (not those
    of a nested loop, function, lambda or class)."""
    found: set[type] = set()
    nested = (cst.For, cst.While, cst.FunctionDef, cst.Lambda, cst.ClassDef)

    class Collect:
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, nested):
                return False
            if type(node) is cst.Break or type(node) is cst.Continue:
                found.add(type(node))
            return True

        def on_leave(self, node: cst.CSTNode) -> None:
            pass

    walk(loop.body, Collect(), TRIVIA)
    return found


def _literal(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.BaseNumber | cst.BaseString) or (
        type(node) is cst.Name and node.value in ("None", "True", "False")
    )


def _host_call(ctx: FileContext, call: cst.Call, scope: Scope | None) -> bool:
    """A call that records no tensor operation (see :meth:`_Pending.records`): also a module's
    or optimizer's constructor (``torch.nn.Linear(...)``, ``torch.optim.SGD(...)``: CPU tensors,
    or optimizer state made at the first step) and ``.to(device)`` of a device (a transfer
    gives device data, nothing pending)."""
    func = call.func
    names = ctx.qnames(func, scope)
    if names:
        if names & _RECORD_NOTHING or any(n.startswith("torch_xla.runtime.") for n in names):
            return True
        if all(_CONSTRUCTOR.match(n) for n in names):
            return True
        return not any(n == "torch" or n.startswith(("torch.", "torch_xla")) for n in names)
    if type(func) is not cst.Attribute:
        return False
    if func.attr.value == "to":
        return _to_device(ctx, call, scope)
    return func.attr.value in _HOST_METHODS


# A class of torch.nn or torch.optim (a module or an optimizer), not a function.
_CONSTRUCTOR = re.compile(r"torch\.(nn|optim)(\.[a-z_]+)*\.[A-Z]\w*$")


def _to_device(ctx: FileContext, call: cst.Call, scope: Scope | None) -> bool:
    """``x.to(device)`` with only a device argument: ``xm.xla_device()``, ``torch_xla.device()``,
    an ``'xla'`` literal, or a name assigned one of them."""
    if len(call.args) != 1:
        return False
    arg = call.args[0]
    if arg.star or (arg.keyword is not None and arg.keyword.value != "device"):
        return False
    value = arg.value
    if type(value) is cst.Name:
        found = definition(ctx, value, Site(scope or ctx.root_scope))
        if found is None:
            return False
        value = found[0]
    return is_xla_device(ctx, value)
