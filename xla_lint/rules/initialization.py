"""Runtime initialisation: what must happen before the torch_xla runtime runs its first graph.

torch_xla starts lazily: importing it creates no runtime client, moving a tensor to the
device creates the client, and the first graph that is compiled (a sync, a step, a value read
on the host) fixes the computation cache. Measured on torch_xla 2.9.0 (CPU): after
``torch.zeros(2).to(dev)`` alone, a sync with nothing to compute, ``.cpu()`` of device data,
``xm.set_rng_state`` or ``xr.use_spmd()``, the cache is still uninitialised; after
``(x + 1)`` followed by ``torch_xla.sync()``, ``xm.mark_step()``, ``torch_xla.step()``, a
``torch_xla.compile``d call, ``.cpu()``/``.item()``/``print`` of a computed tensor, it is
initialised. The rules here report set-up that comes too late (XLA021) and a second runtime
(JAX, through torchax) in the same program (XLA026).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import libcst as cst

from ..analysis import apis
from ..analysis.context import find_arg
from ..analysis.devices import expects_error, is_xla_device
from ..analysis.loops import LoopFacts
from ..analysis.names import Scope
from ..analysis.seeds import blocks_around
from ..analysis.seeds import short as _short
from ..analysis.walk import TRIVIA, children, iter_nodes
from ..diagnostics import Severity
from ..program.facts import Fact
from ..rule import Invalid, Rule, Valid

INITIALIZE_CACHE = f"{apis.XR}.initialize_cache"
# The runtime's own test of the assertion initialize_cache makes (torch_xla/runtime.py).
CACHE_IS_INITIALIZED = "_xla_computation_cache_is_initialized"
# Reading these copies a tensor's value to the host: its pending graph is compiled and run.
HOST_READ_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
HOST_READ_CALLS = frozenset({"builtins.print", "builtins.float", "builtins.int", "builtins.bool"})
# Attributes that describe a tensor without reading it.
_METADATA = frozenset(
    {"shape", "dtype", "device", "ndim", "is_leaf", "requires_grad", "grad_fn", "names", "layout"}
)
# Methods whose result holds the same device data as their receiver (no computation).
_SAME_DATA = frozenset(
    {
        "to",
        "detach",
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "state_dict",
        "train",
        "eval",
        "requires_grad_",
    }
)
# Factories that copy host data to the device rather than compute on it (measured: no graph).
_DATA_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy"})
# Calls of torch whose result, given an XLA tensor, is not itself a device computation.
_NOT_COMPUTING = ("torch.optim.", "torch.utils.", "torch.nn.parallel.", "torch.distributed.")


@dataclass(frozen=True)
class GraphRun:
    """What compiled and ran an XLA graph: the node and a phrase for messages."""

    node: cst.CSTNode
    what: str


class GraphRuns:
    """Finds, in code that runs before a point, the first thing that compiles and runs an XLA
    graph (and so initialises the computation cache): a step boundary (``torch_xla.sync()``,
    ``xm.mark_step()``, ``torch_xla.step()``, ``xm.optimizer_step(..., barrier=True)``, a
    ``torch_xla.compile``d call: :meth:`LoopFacts.classify`), a loop over a device loader that
    trains (the loader syncs every batch), a value computed on the device and read on the host
    (``loss.item()``, ``out.cpu()``, ``print(loss)``), or a call of a function of the file that
    does one of these. One per file (``ctx.memo``); function summaries are computed once.

    Values are followed through assignments in source order: a name bound to device data
    (``x = t.to(dev)``, ``model = Net().to(dev)``, a device loader's batch) or to a computation
    on it (``out = model(x)``, ``y = x + 1``, ``torch.randn(2, device=dev)``); reading device
    data alone compiles nothing (measured), reading a computation does.
    """

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.loops: LoopFacts = ctx.memo(LoopFacts, lambda: LoopFacts(ctx))
        self.definitions: dict[str, cst.FunctionDef] = {}
        for node in _definitions(ctx.module):
            self.definitions.setdefault(node.name.value, node)
        self._summaries: dict[str, GraphRun | None] = {}

    # -- questions ----------------------------------------------------------------------
    def first(self, statements, scope: Scope) -> GraphRun | None:
        """The first graph run in ``statements`` (run in this order, read in ``scope``)."""
        return _Scan(self, scope).statements(statements)

    def of_function(self, name: str) -> GraphRun | None:
        """The first graph run in the body of this file's function (or method) ``name``."""
        if name in self._summaries:
            return self._summaries[name]
        node = self.definitions.get(name)
        self._summaries[name] = None  # recursion: a function that calls itself adds nothing
        found = None
        if node is not None:
            found = _Scan(self, self.ctx.scopes.get(node, self.ctx.root_scope)).statements(
                _body(node)
            )
        self._summaries[name] = found
        return found


def _body(node: cst.FunctionDef) -> list[cst.CSTNode]:
    body = node.body
    return list(body.body) if isinstance(body, cst.IndentedBlock) else [body]


def _definitions(module: cst.Module) -> list[cst.FunctionDef]:
    """Module-level functions and methods of module-level classes, in source order."""
    out = []
    for stmt in module.body:
        if type(stmt) is cst.FunctionDef:
            out.append(stmt)
        elif type(stmt) is cst.ClassDef and isinstance(stmt.body, cst.IndentedBlock):
            out.extend(s for s in stmt.body.body if type(s) is cst.FunctionDef)
    return out


class _Scan:
    """One pass over statements in execution order, with the names bound to XLA values so far."""

    def __init__(self, runs: GraphRuns, scope: Scope) -> None:
        self.runs = runs
        self.ctx = runs.ctx
        self.scope = scope
        self.values: dict[str, str] = {}  # name -> "data" | "computed"
        self.devices: set[str] = set()

    def statements(self, statements) -> GraphRun | None:
        for stmt in statements:
            found = self.statement(stmt)
            if found is not None:
                return found
        return None

    def statement(self, stmt: cst.CSTNode) -> GraphRun | None:
        if type(stmt) is cst.FunctionDef or type(stmt) is cst.ClassDef:
            return None
        if type(stmt) is cst.SimpleStatementLine or type(stmt) is cst.SimpleStatementSuite:
            for small in stmt.body:
                found = self.expression(small)
                if found is not None:
                    return found
                self.bind(small)
            return None
        if type(stmt) is cst.If:
            return (
                self.expression(stmt.test)
                or self.block(stmt.body)
                or (
                    self.statement(stmt.orelse)
                    if type(stmt.orelse) is cst.If
                    else self.block(stmt.orelse)
                )
            )
        if type(stmt) is cst.For:
            found = self.expression(stmt.iter)
            if found is not None:
                return found
            loops = self.runs.loops
            if loops.is_device_loader(stmt.iter, self.scope):
                for name in _names(stmt.target):
                    self.values[name] = "data"
                own, full = loops.loop(stmt)
                if full.backward or full.optimizer or full.boundary:
                    return GraphRun(
                        stmt,
                        f"{_short(self.ctx, stmt.iter)}, a device loader, syncs every batch of "
                        "the training loop over it",
                    )
            return self.block(stmt.body) or self.block(stmt.orelse)
        if type(stmt) is cst.While:
            return self.expression(stmt.test) or self.block(stmt.body) or self.block(stmt.orelse)
        if type(stmt) is cst.With:
            for item in stmt.items:
                found = self.expression(item.item)
                if found is not None:
                    return found
            return self.block(stmt.body)
        if type(stmt) is cst.Try:
            found = self.block(stmt.body)
            for handler in stmt.handlers:
                found = found or self.block(handler)
            return found or self.block(stmt.orelse) or self.block(stmt.finalbody)
        return None

    def block(self, node: cst.CSTNode | None) -> GraphRun | None:
        """The first graph run in a block: an indented block, a one-line suite, or an
        ``else``/``except``/``finally`` clause."""
        if node is None:
            return None
        if (
            type(node) is cst.Else
            or type(node) is cst.ExceptHandler
            or type(node) is cst.ExceptStarHandler
            or type(node) is cst.Finally
        ):
            node = node.body
        if type(node) is cst.IndentedBlock:
            return self.statements(node.body)
        return self.statement(node)

    # -- events ---------------------------------------------------------------------------
    def expression(self, node: cst.CSTNode) -> GraphRun | None:
        """The first graph run among the calls of one small statement or header expression."""
        ctx = self.ctx
        for call in _calls(node):
            steps = self.runs.loops.classify(call, self.scope, use_functions=False)
            if steps is not None and (steps.boundary or steps.xla_step):
                return GraphRun(call, f"{_short(ctx, call)} ran a step")
            func = call.func
            if type(func) is cst.Attribute and func.attr.value in HOST_READ_METHODS:
                if self.status(func.value) == "computed":
                    return GraphRun(
                        call, f"{_short(ctx, call)} read a device computation on the host"
                    )
            names = ctx.qnames(func, self.scope)
            if names & HOST_READ_CALLS and any(self._mentions_computed(a.value) for a in call.args):
                return GraphRun(call, f"{_short(ctx, call)} read a device computation on the host")
            local = _local_name(func, names)
            if local is not None and local in self.runs.definitions:
                inner = self.runs.of_function(local)
                if inner is not None:
                    return GraphRun(call, f"{_short(ctx, call)} ran a graph ({inner.what})")
        return None

    def _mentions_computed(self, node: cst.CSTNode) -> bool:
        """True when ``node`` reads a name bound to a device computation (not just its metadata)."""
        stack = [node]
        while stack:
            n = stack.pop()
            if type(n) is cst.Name:
                if self.values.get(n.value) == "computed":
                    return True
                continue
            if type(n) is cst.Attribute and n.attr.value in _METADATA:
                continue
            if type(n) is cst.Lambda:
                continue
            stack.extend(children(n, TRIVIA))
        return False

    # -- values ---------------------------------------------------------------------------
    def bind(self, small: cst.CSTNode) -> None:
        """Record what an assignment binds (names to XLA values or devices; others forgotten)."""
        if type(small) is cst.Assign:
            for target in small.targets:
                self._assign(target.target, small.value)
        elif type(small) is cst.AnnAssign and small.value is not None:
            self._assign(small.target, small.value)
        elif type(small) is cst.AugAssign and type(small.target) is cst.Name:
            if self.status(small.value) or self.values.get(small.target.value):
                self.values[small.target.value] = "computed"

    def _assign(self, target: cst.CSTNode, value: cst.BaseExpression) -> None:
        if (
            (type(target) is cst.Tuple or type(target) is cst.List)
            and (type(value) is cst.Tuple or type(value) is cst.List)
            and len(target.elements) == len(value.elements)
        ):
            for t, v in zip(target.elements, value.elements, strict=True):
                self._assign(t.value, v.value)
            return
        status = self.status(value)
        device = is_xla_device(self.ctx, value, self.devices)
        for name in _names(target):
            self.devices.discard(name)
            self.values.pop(name, None)
            if device:
                self.devices.add(name)
            elif status is not None:
                self.values[name] = status

    def status(self, node: cst.CSTNode, depth: int = 0) -> str | None:
        """``"computed"`` for a computation on the XLA device, ``"data"`` for device data (a
        transfer, a module moved there), None for anything else (a host value, unknown; an
        expression nested deeper than 40 levels)."""
        if depth > 40:
            return None
        status = functools.partial(self.status, depth=depth + 1)
        if type(node) is cst.Name:
            return self.values.get(node.value)
        if type(node) is cst.Attribute:
            return None if node.attr.value in _METADATA else status(node.value)
        if type(node) is cst.Subscript:
            return status(node.value)
        if type(node) is cst.BinaryOperation:
            return "computed" if status(node.left) or status(node.right) else None
        if type(node) is cst.UnaryOperation:
            return "computed" if status(node.expression) else None
        if type(node) is cst.IfExp:
            return status(node.body) or status(node.orelse)
        if type(node) is cst.Tuple or type(node) is cst.List:
            found = {status(e.value) for e in node.elements} - {None}
            return "computed" if "computed" in found else "data" if found else None
        if type(node) is not cst.Call:
            return None
        ctx = self.ctx
        func = node.func
        names = ctx.qnames(func, self.scope)
        device_kw = find_arg(node, "device")
        if (
            device_kw is not None
            and is_xla_device(ctx, device_kw.value, self.devices)
            and not names & {"torch.device"}
        ):
            return "data" if names & _DATA_FACTORIES else "computed"
        if type(func) is cst.Attribute:
            receiver = status(func.value)
            method = func.attr.value
            if (
                method == "to"
                and node.args
                and is_xla_device(ctx, node.args[0].value, self.devices)
            ):
                return "computed" if receiver == "computed" else "data"
            if receiver is not None:
                if method in HOST_READ_METHODS:
                    return None
                return receiver if method in _SAME_DATA else "computed"
        if type(func) is cst.Name and self.values.get(func.value):
            return "computed"  # model(x)
        if any(status(a.value) for a in node.args):
            if not names:
                return "computed"  # loss_fn(out, y), a function of the file
            if any(n.startswith("torch.") and not n.startswith(_NOT_COMPUTING) for n in names):
                return "computed"
            if any(n.startswith("torch_xla.") for n in names):
                return "data"  # a wrapper: FSDPv2(model)
        return None


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    """The calls under ``node`` in the order they run (arguments before the call that takes
    them), leaving out definitions and lambdas. No recursion (a 10,000-term expression is fine)."""
    out: list[cst.Call] = []
    # (node to expand, None) or (call, call): the call's arguments are done, it runs now
    stack: list[tuple[cst.CSTNode, cst.Call | None]] = [(node, None)]
    while stack:
        n, done = stack.pop()
        if done is not None:
            out.append(done)
            continue
        kind = type(n)
        if kind is cst.Lambda or kind is cst.FunctionDef or kind is cst.ClassDef:
            continue
        if type(n) is cst.Call:
            stack.append((n, n))
        stack.extend((c, None) for c in reversed(children(n, TRIVIA)))
    return out


def _names(target: cst.CSTNode) -> list[str]:
    if type(target) is cst.Name:
        return [target.value]
    if type(target) is cst.Tuple or type(target) is cst.List:
        return [n for e in target.elements for n in _names(e.value)]
    if type(target) is cst.StarredElement:
        return _names(target.value)
    return []


def _local_name(func: cst.CSTNode, names: frozenset[str]) -> str | None:
    """``f`` for ``f(...)`` of a function of this file, ``m`` for ``self.m(...)``; else None."""
    if type(func) is cst.Name and not names:
        return func.value
    if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
        return func.attr.value
    return None


def _guarded(ctx, stack) -> bool:
    """True under ``if not torch_xla._XLAC._xla_computation_cache_is_initialized():`` (or any
    ``if`` whose test asks it): the program checks the assertion itself."""
    for node in stack:
        if type(node) is cst.If and any(
            type(n) is cst.Name and n.value == CACHE_IS_INITIALIZED for n in iter_nodes(node.test)
        ):
            return True
    return False


class CompileCacheLate(Rule):
    code = "XLA021"
    name = "compile-cache-late"
    preview = True
    summary = "xr.initialize_cache() after an XLA graph already ran: it raises AssertionError."
    message = (
        "{call} after an XLA graph already ran ({why}): torch_xla raises `AssertionError: Computation "
        "cache has already been initialized`; call `xr.initialize_cache()` first, before any computation"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `torch_xla.runtime.initialize_cache(...)` when, earlier in the same function or
module body (or earlier in an enclosing loop, which runs it again), something compiled and
ran an XLA graph: a step boundary (`torch_xla.sync()`, `xm.mark_step()`, `with
torch_xla.step():`, `xm.optimizer_step(..., barrier=True)`, a call of a `torch_xla.compile`d
function), a training loop over an `MpDeviceLoader` (it syncs every batch), a value computed
on the device read on the host (`loss.item()`, `out.cpu()`, `print(loss)`), or a call of a
function of the same file that does one of these. A call of such a function of the file
(`setup()` that calls `initialize_cache`) made after a graph ran is flagged at the call.
Not flagged: a call under `if not torch_xla._XLAC._xla_computation_cache_is_initialized():`,
in a test that expects the error, or after work that compiles nothing (moving tensors or a
model to the device, `xr.use_spmd()`, `xm.set_rng_state()`).

## Why is this bad
`initialize_cache` starts with `assert not torch_xla._XLAC._xla_computation_cache_is_initialized(),
"Computation cache has already been initialized"` (torch_xla 2.9.0 `torch_xla/runtime.py`,
`initialize_cache`; its docstring: "This API must be called before any computations have been
performed"), and then only sets `XLA_PERSISTENT_CACHE_PATH` and `XLA_PERSISTENT_CACHE_READ_ONLY`
for the cache the runtime creates with the first compilation. Measured on torch_xla 2.9.0
(CPU): after `(torch.zeros(2).to(dev) + 1)` and `torch_xla.sync()`, `xm.mark_step()`,
`torch_xla.step()`, a `torch_xla.compile`d call, `.item()`, `.cpu()` or `print()` of the result,
or an SPMD forward pass followed by `torch_xla.sync()`, the call raises that `AssertionError`;
after `.to(dev)` alone, a sync with nothing to compute, `.cpu()` of device data, `xr.use_spmd()`
or `xm.set_rng_state()` it does not. (The rule cannot tell a sync that has nothing to compute
from one that has: a flagged call after such a sync alone may pass, but belongs first anyway.)
A program that catches the error runs without the cache it asked for, and so does one run
with `python -O`, which drops the assertion: measured, the late call then passes silently and
no cache file is ever written.

What the cache does once it is on, measured on CPU: the first run writes one file per
compiled graph (counter `PersistentCacheMiss`), a second run with the same directory fails to
load it (`Failed to deserialize executable: UNIMPLEMENTED: Deserializing serialized executable
not supported`, counter `PersistentCacheDeserializeFailure`; pytorch/xla v2.9.0
`torch_xla/csrc/runtime/pjrt_computation_client.cpp`, `DeserializeComputation`) and compiles again
(`UncachedCompile`), with correct results. So on the CPU backend the cache is written but never
read ("not implemented" is this message, not a broken set-up). pytorch/xla's own
`test/test_persistent_cache.py` runs only on TPU and Neuron ("Device type does not support
persistent caching") and expects a `PersistentCacheHit` on the second run there (not measured
here: no TPU). torch_xla's documentation (*PyTorch on XLA devices*,
Compilation Caching) says the call "must be activated before any computations are executed",
that `readonly=True` is for workers sharing one cache mount in an SPMD workload, and that
processes of `torch_xla.launch`/`xmp.spawn` need a path each, initialised inside the launched
function; the rule checks the order only.

## Example
```python
import torch_xla
import torch_xla.runtime as xr

xr.use_spmd()
model = Model().to(torch_xla.device())
loss = model(batch).sum()
print(loss.item())
xr.initialize_cache("/tmp/xla_cache")
```

## Use instead
```python
import torch_xla
import torch_xla.runtime as xr

xr.initialize_cache("/tmp/xla_cache")   # first: before anything is compiled
xr.use_spmd()
model = Model().to(torch_xla.device())
```

## References
- https://docs.pytorch.org/xla/master/learn/pytorch-on-xla-devices.html#compilation-caching
- torch_xla 2.9.0 `torch_xla/runtime.py` (`initialize_cache`)
"""
    valid = (
        Valid(
            "import torch_xla\nimport torch_xla.runtime as xr\nxr.initialize_cache('/tmp/c')\n"
            "xr.use_spmd()\nmodel = Model().to(torch_xla.device())\nloss = model(x).sum()\nprint(loss.item())\n"
            "torch_xla.sync()\n"
        ),
        Valid(
            "import torch\nimport torch_xla\nimport torch_xla.runtime as xr\nimport torch_xla.core.xla_model as xm\n"
            "dev = torch_xla.device()\nx = torch.zeros(2).to(dev)\nprint(x.cpu())\nxm.set_rng_state(0)\n"
            "xr.use_spmd()\nxr.initialize_cache('/tmp/c')\n"
        ),
        Valid(
            "import torch_xla\nimport torch_xla.runtime as xr\n"
            "def _mp_fn(index):\n    xr.initialize_cache(f'/tmp/c{index}')\n    train()\n"
            "def train():\n    torch_xla.sync()\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch_xla\nimport torch_xla.runtime as xr\ntorch_xla.sync()\n"
            "if not torch_xla._XLAC._xla_computation_cache_is_initialized():\n    xr.initialize_cache('/tmp/c')\n"
        ),
        Valid(
            "import torch\nimport torch_xla.runtime as xr\nn = torch.randint(0, 9, (1,)).item()\nprint(n)\n"
            "xr.initialize_cache('/tmp/c')\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch_xla\nimport torch_xla.runtime as xr\n"
            "def main():\n    x = torch_xla.device()\n    torch_xla.sync()\n    xr.initialize_cache('/tmp/c')\n",
            (6,),
        ),
        Invalid(
            "import torch\nimport torch_xla\nfrom torch_xla import runtime as xr\n"
            "dev = torch_xla.device()\nmodel = torch.nn.Linear(2, 2).to(dev)\nloss = model(torch.ones(1, 2, "
            "device=dev)).sum()\nprint(loss)\nxr.initialize_cache('/tmp/c', readonly=False)\n",
            (8,),
        ),
        Invalid(
            "import torch_xla\nimport torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
            "def train(loader):\n    for batch in loader:\n        step(batch)\n        xm.mark_step()\n"
            "def setup():\n    xr.initialize_cache('/tmp/c')\n"
            "def main():\n    train(loader)\n    setup()\n",
            (12,),
        ),
        Invalid(
            "import torch_xla\nimport torch_xla.runtime as xr\n"
            "for run in range(3):\n    xr.initialize_cache(f'/tmp/c{run}')\n    with torch_xla.step():\n"
            "        step()\n",
            (4,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        if ctx.is_call_to(node, INITIALIZE_CACHE):
            call, inner = "`initialize_cache()`", None
        else:
            names = ctx.qnames(node.func)
            name = _local_name(node.func, names)
            inner = self._initialising_functions().get(name) if name is not None else None
            if inner is None:
                return
            call = f"{_short(ctx, node)}, which calls {_short(ctx, inner)},"
        if _guarded(ctx, ctx.stack) or expects_error(ctx):
            return
        found = self._ran_before()
        if found is not None:
            self.report(node, self.message.format(call=call, why=found.what))

    def _ran_before(self) -> GraphRun | None:
        """The first graph run before the node being visited in its function (or the module)."""
        levels = blocks_around(self.ctx)
        statements: list[cst.CSTNode] = []
        for k, (block, index) in enumerate(levels):
            statements.extend(block[:index])
            holder = block[index]
            if (
                (type(holder) is cst.For or type(holder) is cst.While)
                and k + 1 < len(levels)
                and levels[k + 1][0] is getattr(holder.body, "body", None)
            ):
                statements.append(holder)  # a loop: its body ran before, on the earlier iterations
        if not statements:
            return None
        runs = self.ctx.memo(GraphRuns, lambda: GraphRuns(self.ctx))
        return runs.first(statements, self.ctx.scope)

    def _initialising_functions(self) -> dict[str, cst.Call]:
        """Functions of this file whose body calls ``initialize_cache`` unguarded -> that call."""

        def find() -> dict[str, cst.Call]:
            out: dict[str, cst.Call] = {}
            for node in _definitions(self.ctx.module):
                scope = self.ctx.scopes.get(node, self.ctx.root_scope)
                if any(
                    type(n) is cst.Name and n.value == CACHE_IS_INITIALIZED
                    for n in iter_nodes(node.body)
                ):
                    continue
                for n in _calls(node.body):
                    if INITIALIZE_CACHE in self.ctx.qnames(n.func, scope):
                        out.setdefault(node.name.value, n)
                        break
            return out

        return self.ctx.memo((CompileCacheLate, "functions"), find)


class TorchaxWithTorchXla(Rule):
    code = "XLA026"
    name = "torchax-with-torch-xla"
    preview = True
    once_per_file = True
    summary = "torch_xla used in a program that imports torchax (JAX) first: on TPU the two runtimes hang."
    message = (
        "the torch_xla runtime is used in a program that imports torchax, which imports JAX at "
        "import time: on TPU, JAX taking the chips first makes torch_xla's computations hang; "
        "run torchax and torch_xla code as separate programs, or import torchax only after "
        "torch_xla has started its runtime"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags the first call of a torch_xla API in each file of a program that also imports
`torchax` at module level (in any of its modules, before that module starts the torch_xla
runtime). The program is the entry script and every module it reaches; torchax's and
torch_xla's own modules do not count (torch_xla loads torchax itself, safely, see below). A
torchax import inside a function, or after `torch_xla.device()` /
`jax_import_guard()` at module level, is not counted.

## Why is this bad
torchax runs PyTorch on JAX: `torchax/__init__.py` (the torchax 0.0.6 that ships in the
torch_xla 2.9.0 wheel) does `import jax` at import time, and `torchax.default_env()` (called
by `enable_globally()`) creates a JAX PRNG key, which starts JAX's backend. On a TPU VM,
JAX and torch_xla each open the TPU through libtpu, and the first to do so keeps it. torch_xla
2.9.0 guards its own uses of JAX and torchax (`assume_pure`, `call_jax`, Pallas kernels,
`mark_sharding` of a torchax tensor) with `jax_import_guard()`
(`torch_xla/_internal/jax_workarounds.py`), which initialises torch_xla's runtime first,
with the comment "we need to grab the TPU before JAX locks it. Otherwise, any pt-xla TPU
operations will hang" (pytorch/xla issue 8793, "After importing jax first, any PyTorch/XLA
computation will hang", open). A user module that imports torchax at its top gives JAX
the chips before torch_xla has run anything. Reported in the wild: torchprime's test suite hung
on a TPU VM when a torchax test and torch_xla tests ran in one pytest process, and stopped
hanging when they ran separately (AI-Hypercomputer/torchprime PR 387, issue 375).

Not measured here: the hang needs a TPU. On CPU (torch_xla 2.9.0 with jax 0.7.1 and flax
installed in a separate directory) torch_xla computations run normally after `import torchax`,
`torchax.default_env()` and even `torchax.enable_globally()`. Without JAX installed,
`import torchax` itself fails (`ModuleNotFoundError: No module named 'jax'`; with JAX but
without flax: `No module named 'flax'`, from `torchax/checkpoint.py`).

## Example
```python
import torchax
import torch_xla

env = torchax.default_env()
model = Model().to(torch_xla.device())
```

## Use instead
Keep torchax code and torch_xla code in separate programs (separate entry scripts, separate
pytest processes). For JAX code inside a torch_xla program, use torch_xla's own bridges
(`torch_xla.experimental.assume_pure`, `xb.call_jax`), which start torch_xla first; or
start the runtime before importing torchax:
```python
import torch_xla
from torch_xla._internal.jax_workarounds import jax_import_guard

jax_import_guard()   # torch_xla takes the TPU first
import torchax
```

## References
- https://github.com/pytorch/xla/issues/8793
- https://github.com/AI-Hypercomputer/torchprime/pull/387
- torch_xla 2.9.0 `torch_xla/_internal/jax_workarounds.py` (`jax_import_guard`, `maybe_get_torchax`),
  `torchax/__init__.py`, `torchax/tensor.py` (`Environment`)
"""
    valid = (
        Valid("import torch_xla\nmodel = Model().to(torch_xla.device())\n"),
        Valid(
            "import torch_xla\nfrom torch_xla._internal.jax_workarounds import jax_import_guard\n"
            "jax_import_guard()\nimport torchax\nmodel = Model().to(torch_xla.device())\n"
        ),
        Valid(
            "import torch_xla\ndef kernel(x):\n    import torchax.interop\n    return torchax.interop.jax_view(x)\n"
            "model = Model().to(torch_xla.device())\n"
        ),
        Valid(
            "import torch_xla\nfrom torch_xla.experimental.assume_pure import assume_pure\n"
            "f = assume_pure(fn)\nout = f(x.to(torch_xla.device()))\n"
        ),
    )
    invalid = (
        Invalid(
            "import torchax\nimport torch_xla\nenv = torchax.default_env()\n"
            "model = Model().to(torch_xla.device())\ntorch_xla.sync()\n",
            (4,),
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\nimport jax_model\ndevice = xm.xla_device()\n",
            (3,),
            files=(
                (
                    "jax_model.py",
                    "import torchax\nfrom torchax import interop\n"
                    "def run(x):\n    return interop.jax_view(x)\n",
                ),
            ),
        ),
    )

    done = False

    def visit_Call(self, node: cst.Call) -> None:
        if self.done:
            return
        name = self.ctx.module_name
        if name.startswith(("torch_xla.", "torchax.")) or name in ("torch_xla", "torchax"):
            return
        names = self.ctx.qnames(node.func)
        if any(n.startswith("torch_xla.") for n in names) and not any(
            "jax_workarounds" in n for n in names
        ):
            self.done = self.report(node, requires=[(Fact.TORCHAX, True)])
