"""Host syncs, graph breaks and shape changes: what makes a lazy-tensor training loop slow.

The rules here look at *training loops*: ``for``/``while`` loops whose body runs a step
(``loss.backward()``, an optimizer step, ``torch_xla.step()``, ``torch_xla.sync()``,
``xm.mark_step()``, a call of a ``torch_xla.compile``d function), directly or through a
function of the same module that does so outside its own loops. :class:`LoopFacts` is the
per-module analysis both loop rules share. XLA204 is about a graph that changes once, late:
torch's Adam/AdamW passing a host-side bias correction that becomes the special scalar 1.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import libcst as cst

from ..analysis import apis
from ..analysis.context import FileContext, find_arg, literal_string
from ..analysis.holds import name_words, plain_name
from ..analysis.names import Scope, bound_names, dotted_name
from ..analysis.values import Known, Site, definition, value_of
from ..analysis.walk import TRIVIA, calls_in, iter_nodes, walk
from ..diagnostics import Severity
from ..program.facts import Fact
from ..rule import Invalid, Rule, Valid
from ..scalars import recompile_step, round_to  # noqa: F401 - round_to: re-exported for tests

SYNC = frozenset({"torch_xla.sync", f"{apis.XM}.mark_step"})
XLA_STEP = "torch_xla.step"
XLA_COMPILE = "torch_xla.compile"
# A function compiled by these runs its own graph when called (dynamo with the openxla backend,
# or torch_xla.compile, which syncs before and after: torch_xla/torch_xla.py): a step boundary.
COMPILERS = frozenset({XLA_COMPILE, "torch.compile"})
OPTIMIZER_STEP = f"{apis.XM}.optimizer_step"
ADD_STEP_CLOSURE = f"{apis.XM}.add_step_closure"
DEVICE_LOADERS = frozenset({apis.MP_DEVICE_LOADER, apis.PARALLEL_LOADER})
EAGER_MODE = frozenset(
    {"torch_xla.experimental.eager_mode", "torch_xla.experimental.eager.eager_mode"}
)
DATALOADER = "torch.utils.data.DataLoader"
TENSOR_DATASETS = frozenset(
    {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}
)
TENSOR_FACTORIES = frozenset(
    {f"torch.{n}" for n in ("randn", "rand", "zeros", "ones", "empty", "arange", "randint", "full")}
)
ITERABLE_DATASET = frozenset(
    {
        "torch.utils.data.IterableDataset",
        "torch.utils.data.dataset.IterableDataset",
        "torch.utils.data.datapipes.datapipe.IterDataPipe",
    }
)
# Calls that pass an iterable through: `for i, b in enumerate(loader)` iterates `loader`.
WRAPPERS = frozenset({"enumerate", "iter", "zip", "tqdm", "islice", "cycle", "chain", "trange"})
_Assignment = cst.Assign | cst.AugAssign | cst.AnnAssign
# What LoopFacts reads from the module's Flat (FileContext.flat).
_LOOP_FACTS_TYPES = frozenset(
    {
        cst.Call,
        cst.For,
        cst.While,
        cst.Assign,
        cst.AugAssign,
        cst.AnnAssign,
        cst.FunctionDef,
        cst.ClassDef,
        cst.Lambda,
    }
)

# An open loop, function, class or lambda while LoopFacts reads the module (see _scan_module).
_Opened = tuple[int, cst.For | cst.While | None, cst.FunctionDef | None, int, int, bool]


def root_name(node: cst.CSTNode) -> str | None:
    """``loss`` for ``loss``, ``loss.data``, ``loss[0]``; None for calls and literals."""
    while type(node) is cst.Attribute or type(node) is cst.Subscript:
        node = node.value
    return node.value if type(node) is cst.Name else None


def chain_root(node: cst.CSTNode) -> str | None:
    """``data`` for ``data.detach().float()[0]``: the name a method chain starts from."""
    while True:
        if type(node) is cst.Call:
            node = node.func
        elif type(node) is cst.Attribute or type(node) is cst.Subscript:
            node = node.value
        else:
            return node.value if type(node) is cst.Name else None


def _last_name(node: cst.CSTNode) -> str | None:
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute:
        return node.attr.value
    return None


def _looks_like_optimizer(node: cst.CSTNode) -> bool:
    name = _last_name(node)
    return name is not None and "opt" in name.lower()


@dataclass
class Steps:
    """What running a piece of code does, as far as the step structure goes."""

    backward: bool = False
    optimizer: bool = False
    boundary: bool = (
        False  # cuts the lazy graph: torch_xla.step/sync/mark_step/optimizer_step(barrier=True)
    )
    xla_step: bool = False  # torch_xla.step() / sync() / mark_step() / a torch_xla.compile'd call (marks a step loop)
    backward_roots: set[str] = field(default_factory=set)

    def merge(self, other: Steps) -> None:
        self.backward |= other.backward
        self.optimizer |= other.optimizer
        self.boundary |= other.boundary
        self.xla_step |= other.xla_step

    @property
    def trains(self) -> bool:
        return self.backward or self.optimizer or self.xla_step


class LoopFacts:
    """Per-module facts the loop rules share, from one pass over the module's nodes
    (:attr:`FileContext.flat`; computed once per file).

    ``functions``: same-module function name -> :class:`Steps` of its body outside its own
    loops (a function that *is* one training step); ``loader_names``: names and attributes
    assigned a torch_xla device loader (``MpDeviceLoader``, ``ParallelLoader``,
    ``.per_device_loader()``), or ``iter()`` of one; ``has_device_loader``: the module makes one.

    The pass records where every call and assignment sits: its function (whose body it is
    directly in) and the chain of loops around it up to the nearest function, lambda or
    class, each with whether it is in that loop's body (a ``while`` loop's test counts as
    body) or elsewhere in the loop (a ``for`` loop's iterable, an ``else`` branch). Calls are
    classified after the pass, when every name the classification reads is known.
    """

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.functions: dict[str, Steps] = {}
        self.loader_names: set[str] = set()
        self.has_device_loader = False
        self.eager = False
        self.iterable_classes: set[str] = set()
        self.iterable_values: set[str] = set()
        self.compiled_names: set[str] = (
            set()
        )  # names assigned `torch.compile(...)`/`torch_xla.compile(...)`
        # The subset assigned `torch_xla.compile(...)`, and functions decorated with it: calling one
        # runs one XLA step (torch_xla/torch_xla.py `compile`: sync() before and after the call).
        self.xla_compiled_names: set[str] = set()
        # Per loop (by id): calls in its body (full) / not inside a nested loop (own), the
        # loops nested in its body, the assignments in its body; each call with its scope.
        self._full: dict[int, list[tuple[cst.Call, Scope]]] = {}
        self._own: dict[int, list[tuple[cst.Call, Scope]]] = {}
        self._inner: dict[int, list[cst.For | cst.While]] = {}
        self._assigns: dict[int, list[_Assignment]] = {}
        self._loops: dict[int, tuple[Steps, Steps]] = {}
        self._classified: dict[tuple[int, bool], Steps | None] = {}
        self._scan_module()

    # -- the pass -------------------------------------------------------------------
    def _scan_module(self) -> None:
        ctx = self.ctx
        facts = self
        functions: list[tuple[cst.FunctionDef, Scope]] = []
        function_calls: dict[int, list[tuple[cst.Call, Scope]]] = {}
        full, own, inner, assigns = self._full, self._own, self._inner, self._assigns
        scopes: list[Scope] = [ctx.root_scope]
        flat = ctx.flat
        nodes, ends = flat.nodes, flat.ends

        def visit_call(node: cst.Call) -> None:
            names = ctx.qnames(node, scopes[-1])
            if names & EAGER_MODE:
                arg = find_arg(node, "enable", 0)
                if arg is not None and not (
                    isinstance(arg.value, cst.Name) and arg.value.value == "False"
                ):
                    facts.eager = True
            if facts.is_device_loader(node, scopes[-1]):
                facts.has_device_loader = True

        def visit_assign(node: cst.Assign) -> None:
            scope = scopes[-1]
            value = node.value
            if type(value) is cst.Call and ctx.qnames(value, scope) & COMPILERS:
                xla = XLA_COMPILE in ctx.qnames(value, scope)
                for t in node.targets:
                    name = _last_name(t.target)
                    if name:
                        facts.compiled_names.add(name)
                        if xla:
                            facts.xla_compiled_names.add(name)
            if facts.is_device_loader(value, scope):
                for t in node.targets:
                    name = _last_name(t.target)
                    if name:
                        facts.loader_names.add(name)
            if type(value) is cst.Call:
                callee = _last_name(value.func)
                streaming = find_arg(value, "streaming")
                if (
                    callee in facts.iterable_classes
                    or ctx.qnames(value, scope) & ITERABLE_DATASET
                    or (
                        streaming is not None
                        and isinstance(streaming.value, cst.Name)
                        and streaming.value.value == "True"
                    )
                ):
                    for t in node.targets:
                        name = _last_name(t.target)
                        if name:
                            facts.iterable_values.add(name)

        # The loops, functions, classes and lambdas around the node being read, outermost first:
        # (end of its subtree, the loop, the function, start, stop, pushed a scope), [start, stop)
        # being the range of a function's body or of a loop's body (with a while loop's test,
        # which runs as often); a class or lambda has neither loop nor function.
        opened: list[_Opened] = []

        def where(i: int) -> tuple[cst.FunctionDef | None, list[tuple[cst.For | cst.While, bool]]]:
            """The function whose body ``nodes[i]`` is directly in (or None), and the loops around
            it up to the nearest function, lambda or class, each with whether it is in that loop's
            body or elsewhere in the loop (a ``for`` loop's iterable, an ``else`` branch)."""
            chain: list[tuple[cst.For | cst.While, bool]] = []
            function = None
            for _, loop, defined, start, stop, _ in reversed(opened):
                if loop is not None:
                    chain.append((loop, start <= i < stop))
                    continue
                if defined is not None and start <= i < stop:
                    function = defined
                break
            chain.reverse()
            return function, chain

        def extent(i: int, node: cst.CSTNode) -> tuple[int, int]:
            """Where ``node``, a child of ``nodes[i]``, starts and ends in ``nodes`` (an empty
            range when it is not there)."""
            j = i + 1
            while j < ends[i] and nodes[j] is not node:
                j = ends[j]
            return (j, ends[j]) if j < ends[i] else (j, j)

        for i in flat.of_types(_LOOP_FACTS_TYPES):
            while opened and opened[-1][0] <= i:
                if opened.pop()[5]:
                    scopes.pop()
            node = nodes[i]
            if type(node) is cst.Call:
                function, chain = where(i)
                record = (node, scopes[-1])
                if chain:
                    last = len(chain) - 1
                    for k, (loop, in_body) in enumerate(chain):
                        if in_body:
                            full[id(loop)].append(record)
                            if k == last:
                                own[id(loop)].append(record)
                elif function is not None:
                    function_calls[id(function)].append(record)
                visit_call(node)
            elif type(node) is cst.For or type(node) is cst.While:
                for loop, in_body in where(i)[1]:
                    if in_body:
                        inner[id(loop)].append(node)
                key = id(node)
                full[key], own[key], inner[key], assigns[key] = [], [], [], []
                start, stop = extent(i, node.body)
                if type(node) is cst.While:
                    test_start, test_stop = extent(i, node.test)
                    if test_start < test_stop:  # (a leaf test, `while True:`, is not in flat)
                        start = test_start
                opened.append((ends[i], node, None, start, stop, False))
            elif (
                type(node) is cst.Assign
                or type(node) is cst.AugAssign
                or type(node) is cst.AnnAssign
            ):
                for loop, in_body in where(i)[1]:
                    if in_body:
                        assigns[id(loop)].append(node)
                if type(node) is cst.Assign:
                    visit_assign(node)
            elif type(node) is cst.FunctionDef:
                scopes.append(ctx.scopes.get(node, scopes[-1]))
                functions.append((node, scopes[-1]))
                function_calls[id(node)] = []
                start, stop = extent(i, node.body)
                opened.append((ends[i], None, node, start, stop, True))
            elif type(node) is cst.ClassDef:
                scopes.append(ctx.scopes.get(node, scopes[-1]))
                opened.append((ends[i], None, None, 0, 0, True))
                for base in node.bases:
                    if (
                        ctx.qnames(base.value, scopes[-2]) & ITERABLE_DATASET
                        or _last_name(base.value) in facts.iterable_classes
                    ):
                        facts.iterable_classes.add(node.name.value)
            elif type(node) is cst.Lambda:
                opened.append((ends[i], None, None, 0, 0, False))
        for func, scope in functions:
            steps = Steps()
            decorators = [ctx.qnames(d.decorator, scope) for d in func.decorators]
            if any(names & COMPILERS for names in decorators):
                steps.boundary = True
            if any(XLA_COMPILE in names for names in decorators):
                steps.xla_step = True  # `@torch_xla.compile`: each call is one step
                self.xla_compiled_names.add(func.name.value)
            for call, call_scope in function_calls[id(func)]:
                found = self._classify(call, call_scope, False)
                if found is not None:
                    steps.merge(found)
            previous = self.functions.get(func.name.value)
            if previous is not None:
                steps.merge(previous)
            self.functions[func.name.value] = steps

    def _classify(self, call: cst.Call, scope: Scope, use_functions: bool) -> Steps | None:
        key = (id(call), use_functions)
        if key not in self._classified:
            self._classified[key] = self.classify(call, scope, use_functions)
        return self._classified[key]

    def inner_loops(self, node: cst.For | cst.While) -> list[cst.For | cst.While]:
        """The loops inside ``node``'s body (at any depth, not inside a nested function,
        lambda or class), in source order."""
        return self._inner.get(id(node), [])

    def calls(self, node: cst.For | cst.While) -> list[tuple[cst.Call, Scope]]:
        """The calls in ``node``'s body (at any depth, not inside a nested function, lambda or
        class; a ``while`` loop's test included), in source order, each with its scope."""
        return self._full.get(id(node), [])

    def assignments(self, node: cst.For | cst.While) -> list[_Assignment]:
        """The ``=``, ``+=`` and annotated assignments in ``node``'s body (at any depth, not
        inside a nested function, lambda or class), in source order."""
        return self._assigns.get(id(node), [])

    def is_device_loader(self, node: cst.CSTNode, scope: Scope) -> bool:
        """``MpDeviceLoader(...)``, ``ParallelLoader(...)``, ``x.per_device_loader(...)``,
        a name assigned one, or such a value passed through ``enumerate``/``iter``/``zip``/..."""
        if type(node) is cst.Call:
            if self.ctx.qnames(node, scope) & DEVICE_LOADERS:
                return True
            if type(node.func) is cst.Attribute and node.func.attr.value == "per_device_loader":
                return True
            if _last_name(node.func) in WRAPPERS:
                return any(
                    self.is_device_loader(a.value, scope) for a in node.args if a.keyword is None
                )
            return False
        name = _last_name(node)
        return name is not None and name in self.loader_names

    def classify(self, call: cst.Call, scope: Scope, use_functions: bool = True) -> Steps | None:
        """What one call does to the step structure, or None when nothing."""
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "backward":
            root = root_name(func.value)
            roots = {root} if root else _names_in(func.value)
            return Steps(backward=True, backward_roots=roots)
        names = self.ctx.qnames(call, scope)
        if XLA_STEP in names or names & SYNC:
            return Steps(boundary=True, xla_step=True)
        if OPTIMIZER_STEP in names:
            barrier = find_arg(call, "barrier", 1)
            cuts = barrier is not None and not (
                isinstance(barrier.value, cst.Name) and barrier.value.value == "False"
            )
            return Steps(optimizer=True, boundary=cuts)
        if isinstance(func, cst.Attribute) and func.attr.value == "step" and not names:
            if _looks_like_optimizer(func.value) or any(
                _looks_like_optimizer(a.value) for a in call.args
            ):
                return Steps(optimizer=True)
        if (
            names & COMPILERS
            or (isinstance(func, cst.Call) and self.ctx.qnames(func, scope) & COMPILERS)
            or (
                _last_name(func) in self.compiled_names
                and (
                    isinstance(func, cst.Name)
                    or (
                        isinstance(func, cst.Attribute)
                        and isinstance(func.value, cst.Name)
                        and func.value.value == "self"
                    )
                )
            )
        ):
            if not names & COMPILERS:
                # calling a compiled function runs its graph; a torch_xla.compile'd one is a whole step
                return Steps(boundary=True, xla_step=self.runs_xla_compiled(call, scope))
        if isinstance(func, cst.Name) and func.value == "next" and call.args:
            if self.is_device_loader(call.args[0].value, scope):
                return Steps(boundary=True)
        if use_functions:
            name = _last_name(func)
            local = (
                isinstance(func, cst.Name)
                and not names
                or (
                    isinstance(func, cst.Attribute)
                    and isinstance(func.value, cst.Name)
                    and func.value.value == "self"
                )
            )
            if local and name in self.functions:
                s = self.functions[name]
                return Steps(s.backward, s.optimizer, s.boundary, s.xla_step)
        return None

    def runs_xla_compiled(self, call: cst.Call, scope: Scope) -> bool:
        """True for a call of a function compiled with ``torch_xla.compile``: ``step_fn(x)`` or
        ``self.step_fn(x)`` with ``step_fn = torch_xla.compile(f, ...)`` or ``@torch_xla.compile``
        (``@torch_xla.compile(...)``) on its definition, or ``torch_xla.compile(f)(x)``. In
        torch_xla 2.9.0 (``torch_xla/torch_xla.py``, ``compile``) the call syncs the pending
        graph, runs ``f`` with eager mode off and syncs again: it is one step, like ``torch_xla.step()``."""
        func = call.func
        if isinstance(func, cst.Call):
            return XLA_COMPILE in self.ctx.qnames(func, scope)
        if self.ctx.qnames(func, scope):
            return False  # a module's function, not one of this file's compiled names
        return _last_name(func) in self.xla_compiled_names and (
            isinstance(func, cst.Name)
            or (
                isinstance(func, cst.Attribute)
                and isinstance(func.value, cst.Name)
                and func.value.value == "self"
            )
        )

    def loop(self, node: cst.For | cst.While, scope: Scope | None = None) -> tuple[Steps, Steps]:
        """(own, full) :class:`Steps` of a loop's body (and of a ``while`` loop's test):
        ``own`` leaves out what runs inside loops nested in it; calls of same-module functions
        count as what those functions do. Nested functions, lambdas and classes are not part
        of it. (``scope`` is accepted for compatibility: each call is read in its own scope.)"""
        key = id(node)
        if key not in self._loops:
            own, full = Steps(), Steps()
            own_calls = {id(call) for call, _ in self._own.get(key, ())}
            # A while loop's test runs every iteration, but what `.backward()` is called on
            # there is not a tensor the body computes (XLA201 reads backward_roots).
            in_test = {id(c) for c in calls_in(node.test)} if type(node) is cst.While else ()
            for call, call_scope in self._full.get(key, ()):
                found = self._classify(call, call_scope, True)
                if found is None:
                    continue
                full.merge(found)
                if id(call) not in in_test:
                    full.backward_roots |= found.backward_roots
                if id(call) in own_calls:
                    own.merge(found)
            self._loops[key] = (own, full)
        return self._loops[key]


def is_literal_loop(node: cst.For | cst.While) -> bool:
    """``for dynamic in [True, False]:``: a loop over a literal list/tuple/set runs a fixed
    handful of configurations, not training steps."""
    return type(node) is cst.For and type(node.iter) in (cst.List, cst.Tuple, cst.Set)


def _names_in(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_Call(self, n: cst.Call) -> bool:
            for a in n.args:
                walk(a.value, self, TRIVIA)
            return False

    walk(node, _V(), TRIVIA)
    return found


def _has_modulo(node: cst.CSTNode) -> bool:
    found = False

    class _V(cst.CSTVisitor):
        def visit_BinaryOperation(self, n: cst.BinaryOperation) -> None:
            nonlocal found
            if isinstance(n.operator, cst.Modulo):
                found = True

    walk(node, _V(), TRIVIA)
    return found


def _compares_counter(test: cst.CSTNode, counters: set[str]) -> bool:
    """``step == 0``, ``i == n - 1``: a test true on one iteration of the loop counting with ``counters``."""
    if not isinstance(test, cst.Comparison):
        return False
    sides = [test.left, *(c.comparator for c in test.comparisons)]
    return any(isinstance(c.operator, cst.Equal) for c in test.comparisons) and any(
        isinstance(s, cst.Name) and s.value in counters for s in sides
    )


HOST_METHODS = {
    "item": False,
    "tolist": False,
    "cpu": True,
    "numpy": True,
}  # name -> may take arguments


class LoopRule(Rule):
    """A rule that reads the module's loop structure (:class:`LoopFacts`, shared by all of them)."""

    @property
    def facts(self) -> LoopFacts:
        return self.ctx.memo(LoopFacts, lambda: LoopFacts(self.ctx))

    def iterates_device_loader(self, iterable: cst.CSTNode, scope: Scope) -> bool:
        """True when a loop over ``iterable`` (read at the node being visited) iterates a
        torch_xla device loader, or may: a parameter of the enclosing function or an attribute,
        in a module that builds one (the loader may be what is passed in). A device loader
        syncs before handing out each batch (torch_xla 2.9.0
        ``torch_xla/distributed/parallel_loader.py``, ``PerDeviceLoader.next``)."""
        facts = self.facts
        if facts.is_device_loader(iterable, scope):
            return True
        if isinstance(iterable, cst.Call) and _last_name(iterable.func) in WRAPPERS:
            return any(
                self.iterates_device_loader(a.value, scope)
                for a in iterable.args
                if a.keyword is None
            )
        if not facts.has_device_loader:
            return False
        if isinstance(iterable, cst.Attribute):
            return True
        if isinstance(iterable, cst.Name):
            for func in self.ctx.enclosing(cst.FunctionDef):
                p = func.params
                params = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
                return iterable.value in params
        return False


class HostSyncInStep(LoopRule):
    code = "XLA201"
    name = "host-sync-in-step"
    summary = "A tensor read on the host (.item(), .cpu(), print) on every step of a training or step loop."
    message = (
        "{what} on every step of a loop that runs an XLA graph per iteration waits for the graph to "
        "run and copies the result to the host; read it every N steps or in `xm.add_step_closure` "
        "(a tensor already on the CPU is cheap: then ignore this)"
    )
    severity = Severity.WARNING
    explanation = """\
## What it does
In a module that imports torch_xla, flags reading a tensor's value on the host inside a
training loop (a loop whose body runs `backward()`, an optimizer step, `torch_xla.step()`,
`torch_xla.sync()` or `xm.mark_step()`, or calls a step function compiled with
`torch_xla.compile`: `step_fn = torch_xla.compile(train_step, ...)`, `@torch_xla.compile`,
`torch_xla.compile(f)(x)`; directly or through a function of the same module): `.item()`,
`.tolist()`, `.cpu()`, `.numpy()`, `float(t)`/`int(t)`, printing or formatting a tensor
(`print(loss)`, `f"{loss:.3f}"`). A "tensor" for `float`/`int`/printing is the value
`backward()` is called on, or a name the loop computes from it, from a `torch.*` call or
from a `torch_xla.compile`d function. Not flagged: code under `if step % N == 0:` (or `if step == 0:`,
or a flag assigned such a test: `log_now = step % N == 0` ... `if log_now:`),
inside a function or lambda given to `xm.add_step_closure`, after the loop, in a loop
that only evaluates (no step), a loop over a literal list or tuple (a few
configurations, not steps), inside `assert` statements and `assert*` calls (a test
checking a value needs the value), and methods on the loop's own batch variables (the
loader's CPU tensors). One diagnostic per statement: `allclose(a.cpu(), b.cpu())` and
`t.cpu().numpy()` are reported once.

## Why is this bad
torch_xla records operations lazily and runs them as one compiled graph at the step
boundary. Reading a value on the host needs it now: the part of the pending graph that
computes it is compiled (a different graph from the step's, so one more compilation) and
executed, and the host waits for the device and for the device-to-host copy before it can
trace the next operation. It is not a step boundary: the other pending tensors keep their
graphs (measured on CPU, torch_xla 2.9.0: after `loss.item()` on each of 40 iterations an
accumulated tensor still held a 363-node graph; see XLA205). Done every step it serializes host and device, which otherwise overlap:
`torch_xla.sync()` (`torch_xla/torch_xla.py`, 2.9.0) only *launches* the step's graph
(`wait=False`), and step closures (`xm.add_step_closure`, `torch_xla/core/xla_model.py`)
run after that launch, with the values already materialized. A function wrapped by
`torch_xla.compile` is such a step: in 2.9.0 (`torch_xla/torch_xla.py`, `compile`) each
call syncs the pending graph, traces the function with eager mode off and syncs again
on the way out, launching the step's graph; `loss.item()` right after it waits for that
whole step to finish on the device before the host may trace the next one.

## Example
```python
for step, (x, y) in enumerate(loader):
    with torch_xla.step():
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    total += loss.item()
```

## Use instead
```python
for step, (x, y) in enumerate(loader):
    with torch_xla.step():
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.detach()            # stays on the device
    if step % 50 == 0:
        xm.add_step_closure(lambda l=loss: print(f"loss {l.item():.3f}", flush=True))
print(total_loss.item())                       # once, after the loop
```

## References
- https://docs.pytorch.org/xla/master/learn/troubleshoot.html
- torch_xla 2.9.0 `torch_xla/torch_xla.py` (`sync`, `step`, `compile`), `torch_xla/core/xla_model.py` (`add_step_closure`)
"""
    valid = (
        Valid(
            "import torch_xla\nfor step, (x, y) in enumerate(loader):\n    with torch_xla.step():\n"
            "        loss = model(x).sum()\n        loss.backward()\n        opt.step()\n"
            "    if step % 10 == 0:\n        print(loss.item(), flush=True)\n"
        ),
        # The periodic test saved in a flag first (TaiMingLu/vision_transformers_torch_xla).
        Valid(
            "import torch_xla\nfor step, (x, y) in enumerate(loader):\n"
            "    loss = model(x).sum()\n    loss.backward()\n    opt.step()\n    torch_xla.sync()\n"
            "    log_now = step < 5 or (step + 1) % 100 == 0\n"
            "    if log_now:\n        print(loss.item(), flush=True)\n"
        ),
        Valid(
            "import torch_xla\nimport torch_xla.core.xla_model as xm\nfor x in loader:\n"
            "    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\n    torch_xla.sync()\n"
            "    xm.add_step_closure(lambda: print(loss.item(), flush=True))\n"
        ),
        Valid(
            "import torch_xla\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n"
            "    optimizer.step()\n    torch_xla.sync()\nprint(loss.item(), flush=True)\n"
        ),
        Valid(
            "import torch_xla\ncorrect = 0\nfor x, y in test_loader:\n"
            "    correct += model(x).argmax(1).eq(y).sum().item()\n"
        ),
        Valid(
            "import torch_xla\nfor epoch in range(3):\n    for x in loader:\n        loss = model(x).sum()\n"
            "        loss.backward()\n        optimizer.step()\n        torch_xla.sync()\n"
            "    print(f'epoch {epoch} loss {loss.item()}', flush=True)\n"
        ),
        Valid(
            "import torch_xla\nfor x, y in loader:\n    labels = y.numpy()\n    loss = model(x).sum()\n"
            "    loss.backward()\n    optimizer.step()\n    torch_xla.sync()\n"
        ),
        Valid(
            "import torch\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n"
            "    print(loss.item())\n"
        ),
        Valid(
            "import torch_xla\nfor dynamic in [True, False]:\n    out = run(dynamic)\n    torch_xla.sync()\n"
            "    print(out.cpu(), flush=True)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\nfor i in range(3):\n    out = model(x)\n    out.sum().backward()\n"
            "    torch_xla.sync()\n    assert torch.allclose(out.cpu(), expected)\n"
            "    self.assertEqual(out.tolist(), [1.0])\n"
        ),
        # pytorch/xla examples/train_resnet_base.py and test/eager/test_eager_with_xla_compile.py
        Valid(
            "import torch_xla\nimport torch_xla.core.xla_model as xm\nclass Trainer:\n"
            "    def __init__(self):\n"
            "        self.compiled_step_fn = torch_xla.compile(self.step_fn, full_graph=True, name='step')\n"
            "    def train_loop_fn(self, loader):\n        for step, (data, target) in enumerate(loader):\n"
            "            loss = self.compiled_step_fn(data, target)\n            if step % 10 == 0:\n"
            "                xm.add_step_closure(self._train_update, args=(step, loss))\n"
        ),
        Valid(
            "import torch\nimport torch_xla\nfor compiled in [dummy_decorated, torch_xla.compile(dummy)]:\n"
            "    t2_compiled = compiled(t1)\n    self.assertTrue(torch.allclose(t2.cpu(), t2_compiled.cpu()))\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch_xla\nfor x, y in loader:\n    with torch_xla.step():\n        loss = model(x).sum()\n"
            "        loss.backward()\n        optimizer.step()\n    losses.append(loss.item())\n"
            "    print(f'loss {loss:.3f}', flush=True)\n",
            (7, 8),
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\nfor i, batch in enumerate(loader):\n"
            "    out = model(batch)\n    loss = criterion(out, batch)\n    loss.backward()\n"
            "    xm.optimizer_step(optimizer, barrier=True)\n"
            "    acc = float(loss)\n    hist = out.cpu().detach().numpy()\n    xm.master_print(loss)\n"
            "    pair = (out.cpu(), loss.cpu())\n",
            (7, 8, 9, 10),
        ),
        Invalid(
            "import torch_xla\ndef train_step(x):\n    loss = model(x).sum()\n    loss.backward()\n"
            "    optimizer.step()\n    torch_xla.sync()\n    return loss\n"
            "for x in loader:\n    loss = train_step(x)\n    print(loss.tolist(), flush=True)\n",
            (10,),
        ),
        Invalid(
            "import torch_xla\nstep = 0\nwhile step < 100:\n    loss = model(next(it)).sum()\n"
            "    loss.backward()\n    optimizer.step()\n    torch_xla.sync()\n"
            "    if loss.item() < 0.01:\n        break\n    step += 1\n",
            (8,),
        ),
        # A function compiled with torch_xla.compile is one step per call (assigned, decorated, as a method).
        Invalid(
            "import torch_xla\ndef train_step(x, y):\n    loss = loss_fn(model(x), y)\n    loss.backward()\n"
            "    optimizer.step()\n    return loss\nstep_fn = torch_xla.compile(train_step)\n"
            "for x, y in loader:\n    loss = step_fn(x, y)\n    print(loss.item(), flush=True)\n",
            (10,),
        ),
        Invalid(
            "import torch_xla\n@torch_xla.compile\ndef step(x):\n    return model(x).sum()\n"
            "@torch_xla.compile(full_graph=True)\ndef other(x):\n    return model(x).mean()\n"
            "for x in loader:\n    total += step(x).item()\n    m = other(x)\n    print(m, flush=True)\n",
            (9, 11),
        ),
        Invalid(
            "import torch_xla\nclass Trainer:\n    def __init__(self):\n"
            "        self.step = torch_xla.compile(self.step_fn, full_graph=True)\n"
            "    def loop(self, loader):\n        for x in loader:\n            loss = self.step(x)\n"
            "            self.losses.append(float(loss))\n",
            (8,),
        ),
    )

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._tensors: dict[int, set[str]] = {}
        self._reported_statements: set[int] = set()
        self._modulo: dict[int, bool] = {}  # id(a test guarding a host read) -> _has_modulo

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.imports_torch_xla:
            return
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in HOST_METHODS:
            if node.args and not HOST_METHODS[func.attr.value]:
                return
            receiver = func.value
            if _has_host_call(receiver):
                return  # `t.cpu().detach().numpy()`: reported once, at `.cpu()`
            if self.ctx.qnames(receiver):
                return  # a module's function or value (`np.array(...).tolist()`), not a tensor
            self._check(node, f"`.{func.attr.value}()`", receiver=receiver)
            return
        if (
            type(func) is cst.Name
            and func.value in ("float", "int")
            and len(node.args) == 1
            and node.args[0].keyword is None
            and not node.args[0].star
        ):
            if "builtins." + func.value in self.ctx.qnames(func):
                self._check(node, f"`{func.value}()` of a tensor", value=node.args[0].value)
            return
        if _last_name(func) in ("print", "master_print"):
            if not self.ctx.is_call_to(node, apis.PRINT, f"{apis.XM}.master_print"):
                return
            for arg in node.args:
                if not arg.star and isinstance(arg.value, (cst.Name, cst.Attribute, cst.Subscript)):
                    if self._check(node, "printing a tensor", value=arg.value, plain=True):
                        return

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        if self.ctx.imports_torch_xla and isinstance(
            node.expression, (cst.Name, cst.Attribute, cst.Subscript)
        ):
            self._check(node, "formatting a tensor", value=node.expression, plain=True)

    # --------------------------------------------------------------------------
    def _check(
        self,
        node: cst.CSTNode,
        what: str,
        *,
        receiver: cst.CSTNode | None = None,
        value: cst.CSTNode | None = None,
        plain: bool = False,
    ) -> bool:
        loop = self._step_loop()
        if loop is None or self._in_verification():
            return False
        if receiver is not None:
            root = chain_root(receiver)
            if (
                root is not None
                and root in self._batch_names(loop)
                and root not in self._tensor_names(loop)
            ):
                return False
        if value is not None:
            root = root_name(value)
            if root is None or root not in self._tensor_names(loop):
                if plain or not (
                    isinstance(value, cst.Call)
                    and any(n.startswith("torch.") for n in self.ctx.qnames(value))
                ):
                    return False
        statement = self._statement_of(node)
        if statement in self._reported_statements:
            return (
                True  # one diagnostic per statement: `allclose(a.cpu(), b.cpu())` is one host read
            )
        self._reported_statements.add(statement)
        return self.report(node, self.message.format(what=what))

    def _statement_of(self, node: cst.CSTNode) -> int:
        """Identity of the innermost statement holding ``node``."""
        for anc in reversed(self.ctx.stack):
            if isinstance(anc, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return id(anc)
        return id(node)

    def _in_verification(self) -> bool:
        """Inside an ``assert`` statement or an ``assert*`` call (``self.assertTrue``,
        ``np.testing.assert_allclose``): checking a value needs the value."""
        stack = self.ctx.stack
        for i in range(len(stack) - 2, -1, -1):
            node = stack[i]
            kind = type(node)
            if kind is cst.FunctionDef or kind is cst.Lambda or kind is cst.ClassDef:
                return False
            if kind is cst.Assert:
                return True
            if type(node) is cst.Call and (_last_name(node.func) or "").startswith("assert"):
                return True
        return False

    def _step_loop(self) -> cst.For | cst.While | None:
        """The innermost loop running the current node on every iteration, if it is a training
        loop and the node is not under an every-N-steps branch or in a step closure."""
        stack = self.ctx.stack
        guarded: list[cst.CSTNode] = []
        for i in range(len(stack) - 2, -1, -1):
            node, child = stack[i], stack[i + 1]
            kind = type(node)
            if kind is cst.FunctionDef or kind is cst.Lambda or kind is cst.ClassDef:
                return None
            if (type(node) is cst.If or type(node) is cst.IfExp) and child is node.body:
                guarded.append(node.test)
                if type(node.test) is cst.Name:  # `log_now = step % 100 == 0` ... `if log_now:`
                    found = definition(self.ctx, node.test)
                    if found is not None:
                        guarded.append(found[0])
            if type(node) is cst.For or type(node) is cst.While:
                if not (child is node.body or type(node) is cst.While and child is node.test):
                    continue  # a for-loop's iterable, or an else branch: runs once
                own, _ = self.facts.loop(node, self.ctx.scope)
                if not own.trains or is_literal_loop(node):
                    return None
                counters = bound_names(node.target) if isinstance(node, cst.For) else set()
                if any(self._has_modulo(t) or _compares_counter(t, counters) for t in guarded):
                    return None
                return node
        return None

    def _has_modulo(self, test: cst.CSTNode) -> bool:
        """:func:`_has_modulo` of ``test``, once per test (each host read under it asks)."""
        found = self._modulo.get(id(test))
        if found is None:
            found = self._modulo[id(test)] = _has_modulo(test)
        return found

    def _batch_names(self, loop: cst.For | cst.While) -> set[str]:
        return bound_names(loop.target) if isinstance(loop, cst.For) else set()

    def _tensor_names(self, loop: cst.For | cst.While) -> set[str]:
        """Names holding device tensors in ``loop``: what ``backward()`` is called on, and
        names assigned from those or from a ``torch.*`` call in the loop."""
        key = id(loop)
        if key in self._tensors:
            return self._tensors[key]
        _, full = self.facts.loop(loop, self.ctx.scope)
        names = set(full.backward_roots)
        assigns: list[tuple[set[str], cst.CSTNode]] = []
        ctx = self.ctx
        for node in self.facts.assignments(loop):
            if type(node) is cst.Assign:
                targets: set[str] = set()
                for t in node.targets:
                    targets |= bound_names(t.target)
                assigns.append((targets, node.value))
            elif (type(node) is cst.AugAssign or type(node) is cst.AnnAssign) and (
                node.value is not None  # an AnnAssign without one binds nothing
            ):
                assigns.append((bound_names(node.target), node.value))
        torchy: set[int] = set()
        for i, (_, value) in enumerate(assigns):
            for call in calls_in(value):
                if any(
                    n.startswith("torch.") and not n.startswith("torch_xla")
                    for n in ctx.qnames(call)
                ) or self.facts.runs_xla_compiled(call, ctx.scope):
                    torchy.add(i)  # a torch op's result, or what a torch_xla.compile'd step returns
                    break
        for _ in range(3):
            for i, (targets, value) in enumerate(assigns):
                if i in torchy or _names_in(value) & names:
                    names |= targets
        self._tensors[key] = names
        return names


def _has_host_call(node: cst.CSTNode) -> bool:
    """True when the receiver chain ``node`` already contains ``.item()``/``.cpu()``/..."""
    while isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)):
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in HOST_METHODS:
                return True
            node = node.func
        else:
            node = node.value
    return False


class DataLoaderPartialBatch(LoopRule):
    code = "XLA202"
    name = "dataloader-partial-batch"
    summary = "DataLoader without drop_last=True: the smaller last batch compiles another graph."
    message = (
        "`DataLoader` without `drop_last=True`: the last, smaller batch has a new shape and "
        "compiles a new graph; pass `drop_last=True` (or pad the last batch)"
    )
    severity = Severity.WARNING
    explanation = """\
## What it does
In a module that imports torch_xla, flags `torch.utils.data.DataLoader(...)` calls that
batch (`batch_size` not None) and say nothing about the last batch: no `drop_last=`
argument, no `batch_sampler=`, no `**kwargs`. Not flagged: no `batch_size` (the default is
1: every batch is full) or `batch_size=1`; a dataset whose size the file fixes
(`TensorDataset(torch.randn(1024, 16))`, `range(512)`, a literal list, through module
constants) when the batch size divides it (when it does not, the message says how large the
last batch is); a dataset that is an
`IterableDataset` (a class of this module deriving from it, or
`load_dataset(..., streaming=True)`): its length is unknown and the rule cannot say
what its last batch is. An explicit `drop_last=False` is taken as a decision (an
evaluation loader that must see every sample) and not flagged.

## Why is this bad
XLA compiles one graph per set of input shapes. With `len(dataset) % batch_size != 0`
the last batch of every epoch is smaller, so the forward and backward graphs are traced
and compiled again for that shape: minutes for a large model, once per process (then
cached), plus one more compile for each differently sized tail (evaluation loaders,
a different world size). With SPMD the batch is sharded over a mesh axis, and a tail
that does not divide the axis is padded by the partitioner.

`DistributedSampler(..., drop_last=True)` does not help: its `drop_last` drops samples
so that every replica gets the *same number of samples* (`torch/utils/data/distributed.py`,
`num_samples = len(dataset) // num_replicas`); the DataLoader then still batches those
`num_samples` with a partial last batch unless `num_samples % batch_size == 0`. So a
`DistributedSampler` passed as `sampler=` does not exempt the loader.

## Example
```python
loader = torch.utils.data.DataLoader(dataset, batch_size=128, shuffle=True)
```

## Use instead
```python
loader = torch.utils.data.DataLoader(dataset, batch_size=128, shuffle=True, drop_last=True)
```
or pad the last batch to the full size with a mask. There is no automatic fix: dropping
samples changes what the loop sees.

## References
- https://docs.pytorch.org/xla/master/learn/troubleshoot.html
- https://docs.pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader
- torch 2.9.0 `torch/utils/data/dataloader.py`, `torch/utils/data/distributed.py`
"""
    valid = (
        Valid(
            "import torch\nimport torch_xla\nloader = torch.utils.data.DataLoader(ds, batch_size=8, drop_last=True)\n"
        ),
        Valid("import torch\nloader = torch.utils.data.DataLoader(ds, batch_size=8)\n"),
        Valid(
            "import torch_xla\nfrom torch.utils.data import DataLoader, IterableDataset\n"
            "class Stream(IterableDataset):\n    def __iter__(self):\n        yield 1\n"
            "ds = Stream()\nloader = DataLoader(ds, batch_size=8)\nloader2 = DataLoader(Stream(), batch_size=8)\n"
        ),
        Valid(
            "import torch_xla\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, batch_sampler=sampler)\nraw = DataLoader(ds, batch_size=None)\n"
            "evalset = DataLoader(ds, batch_size=8, drop_last=False)\nany_ = DataLoader(ds, **kwargs)\n"
        ),
        # No partial batch: DataLoader's default batch_size=1, batch_size=1, or batches that divide
        # a dataset of literal size (seen in real code: a synthetic TensorDataset, a range).
        Valid(
            "import torch\nimport torch_xla\nfrom torch.utils.data import DataLoader, TensorDataset\n"
            "BATCH = 64\nN = 1024\nds = TensorDataset(torch.randn(N, 16), torch.randint(0, 4, (N,)))\n"
            "a = DataLoader(ds)\nb = DataLoader(ds, batch_size=1, shuffle=True)\n"
            "c = DataLoader(ds, batch_size=BATCH)\nd = DataLoader(range(512), batch_size=8)\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch\nimport torch_xla\nloader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True)\n",
            (3,),
        ),
        Invalid(
            "import torch\nimport torch_xla\nfrom torch.utils.data import DataLoader, TensorDataset\n"
            "ds = TensorDataset(torch.randn(1000, 16))\nloader = DataLoader(ds, batch_size=64)\n"
            "steps = DataLoader(torch.arange(0, 1024), batch_size=64)\n",
            (5, 6),
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\nfrom torch.utils.data import DataLoader as DL\n"
            "from torch.utils.data.distributed import DistributedSampler\n"
            "sampler = DistributedSampler(ds, num_replicas=4, rank=0, drop_last=True)\n"
            "loader = DL(ds, batch_size=8, sampler=sampler)\n",
            (5,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.in_xla_program or not self.ctx.is_call_to(node, DATALOADER):
            return
        if any(a.star == "**" for a in node.args):
            return
        if find_arg(node, "drop_last") is not None or find_arg(node, "batch_sampler") is not None:
            return
        batch_size = find_arg(node, "batch_size", 1)
        if batch_size is None:
            return  # DataLoader's default batch_size=1: every batch is full
        batch = value_of(self.ctx, batch_size.value)
        if isinstance(batch, Known) and (batch.value is None or batch.value == 1):
            return
        dataset = find_arg(node, "dataset", 0)
        if dataset is not None and self._iterable(dataset.value):
            return
        size = self._dataset_size(dataset.value) if dataset is not None else None
        if (
            isinstance(batch, Known)
            and type(batch.value) is int
            and batch.value > 0
            and size is not None
        ):
            if size % batch.value == 0:
                return  # the batches divide the dataset: no partial batch
            self.report(
                node,
                self.message
                + f" ({size} samples in batches of {batch.value} leave a last batch of "
                f"{size % batch.value})",
            )
            return
        self.report(node)

    def _dataset_size(self, value: cst.BaseExpression) -> int | None:
        """The number of samples of a dataset the file builds with a literal size:
        ``TensorDataset(torch.randn(1000, 16), ...)``, ``range(1000)``, a list or tuple literal,
        read through a name's one assignment (values.py); None when not known."""
        found = definition(self.ctx, value) if isinstance(value, cst.Name) else None
        expr, site = found if found is not None else (value, None)
        if isinstance(expr, (cst.List, cst.Tuple)) and not any(
            isinstance(e, cst.StarredElement) for e in expr.elements
        ):
            return len(expr.elements)
        if not isinstance(expr, cst.Call):
            return None
        names = self.ctx.qnames(expr.func)
        first = find_arg(expr, None, 0)
        if first is None:
            return None
        if "builtins.range" in names and len(expr.args) == 1:
            n = value_of(self.ctx, first.value, site)
            return n.value if isinstance(n, Known) and type(n.value) is int else None
        if names & TENSOR_DATASETS:
            return self._leading_dim(first.value, site)
        return None

    def _leading_dim(self, tensor: cst.BaseExpression, site) -> int | None:
        """The first dimension of ``torch.randn(N, ...)``/``zeros``/``ones``/``rand``/``empty``/
        ``arange(N)``/``randint(lo, hi, (N, ...))``, when N is known."""
        if not isinstance(tensor, cst.Call) or not self.ctx.qnames(tensor.func) & TENSOR_FACTORIES:
            return None
        names = self.ctx.qnames(tensor.func)
        if names & {"torch.randint"}:
            shape = find_arg(tensor, "size", 2)
            if (
                shape is None
                or not isinstance(shape.value, (cst.Tuple, cst.List))
                or not shape.value.elements
            ):
                return None
            first = shape.value.elements[0].value
        else:
            arg = find_arg(tensor, None, 0)
            if arg is None or (names & {"torch.arange"} and len(tensor.args) != 1):
                return None  # arange(start, end): the size is not its first argument
            first = arg.value
            if isinstance(first, (cst.Tuple, cst.List)):  # torch.zeros((N, 16))
                if not first.elements:
                    return None
                first = first.elements[0].value
        n = value_of(self.ctx, first, site)
        return n.value if isinstance(n, Known) and type(n.value) is int else None

    def _iterable(self, value: cst.CSTNode) -> bool:
        facts = self.facts
        if isinstance(value, cst.Call):
            if (
                _last_name(value.func) in facts.iterable_classes
                or self.ctx.qnames(value) & ITERABLE_DATASET
            ):
                return True
            streaming = find_arg(value, "streaming")
            return (
                streaming is not None
                and isinstance(streaming.value, cst.Name)
                and streaming.value.value == "True"
            )
        name = _last_name(value)
        return name is not None and name in facts.iterable_values


class MissingStepBoundary(LoopRule):
    code = "XLA203"
    name = "missing-step-boundary"
    summary = "A training loop with no torch_xla.step()/sync(): the lazy graph grows every step."
    message = (
        "training loop without a step boundary: wrap the step in `with torch_xla.step():`, call "
        "`torch_xla.sync()` after the optimizer step, or iterate an `MpDeviceLoader`"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
In a module that imports torch_xla, flags the innermost loop that runs both `backward()`
and an optimizer step (`optimizer.step()`, `scaler.step(optimizer)`,
`xm.optimizer_step(...)`, directly or through a function of the same module) when
nothing in it ends the step: no `torch_xla.step()`, `torch_xla.sync()`,
`xm.mark_step()`, `xm.optimizer_step(..., barrier=True)` or call of a function
compiled with `torch_xla.compile`/`torch.compile` (a decorated function, or a name
assigned `torch.compile(f, backend="openxla")`: calling it runs its own graph), and the loop does not iterate a torch_xla device loader
(`MpDeviceLoader`, `ParallelLoader.per_device_loader()`, directly, through
`enumerate`/`zip`/..., or through a name assigned one in this module). When the loop
iterates a function parameter or attribute and the module builds a device loader
somewhere, the loader may be what is passed in, and the loop is not flagged; nor is a
loop over a literal list or tuple. Modules
that turn on eager mode (`torch_xla.experimental.eager_mode(True)`) are not checked.

## Why is this bad
torch_xla traces operations into a graph and only compiles and runs it at a step
boundary. Without one, each iteration appends its forward, backward and optimizer
update to the same pending graph: the graph grows without bound, tracing slows down
step after step, host memory grows, and the device only runs something when a value is
read (`.item()`), which then compiles a huge, never-reused graph. Checked in torch_xla
2.9.0: `xm.optimizer_step` (`torch_xla/core/xla_model.py`) reduces gradients, calls
`optimizer.step()` and calls `torch_xla.sync()` only `if barrier:`; `PerDeviceLoader.next`
(`torch_xla/distributed/parallel_loader.py`, what `MpDeviceLoader.__iter__` returns)
calls `torch_xla.sync()` before handing out each batch (every `batches_per_execution`
batches) and at the end; `torch_xla.step()` (`torch_xla/torch_xla.py`) syncs on exit.

## Example
```python
for x, y in loader:                     # a torch DataLoader
    loss = loss_fn(model(x.to(device)), y.to(device))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
```

## Use instead
```python
for x, y in loader:
    with torch_xla.step():
        loss = loss_fn(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
```
or iterate `pl.MpDeviceLoader(loader, device)`, or call `torch_xla.sync()` at the end
of the step.

## References
- https://docs.pytorch.org/xla/master/learn/pytorch-on-xla-devices.html
- torch_xla 2.9.0 `torch_xla/distributed/parallel_loader.py`, `torch_xla/core/xla_model.py`, `torch_xla/torch_xla.py`
"""
    valid = (
        Valid(
            "import torch_xla\nfor x in loader:\n    with torch_xla.step():\n        loss = model(x).sum()\n"
            "        loss.backward()\n        optimizer.step()\n"
        ),
        Valid(
            "import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.parallel_loader as pl\n"
            "device_loader = pl.MpDeviceLoader(loader, device)\nfor step, (x, y) in enumerate(device_loader):\n"
            "    loss = model(x).sum()\n    loss.backward()\n    xm.optimizer_step(optimizer)\n"
        ),
        Valid(
            "import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.parallel_loader as pl\n"
            "def train_loop(loader):\n    for x in loader:\n        loss = model(x).sum()\n"
            "        loss.backward()\n        xm.optimizer_step(optimizer)\n"
            "train_loop(pl.MpDeviceLoader(train_loader, device))\n"
        ),
        Valid(
            "import torch_xla.core.xla_model as xm\nfor x in loader:\n    loss = model(x).sum()\n"
            "    loss.backward()\n    xm.optimizer_step(optimizer, barrier=True)\n"
        ),
        Valid(
            "import torch\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()\n"
        ),
        Valid(
            "import torch_xla\nfor epoch in range(2):\n    for x in loader:\n        loss = model(x).sum()\n"
            "        loss.backward()\n        optimizer.step()\n        torch_xla.sync()\n"
        ),
        Valid(
            "import torch_xla\ndef step(x):\n    loss = model(x).sum()\n    loss.backward()\n"
            "    optimizer.step()\n    torch_xla.sync()\nfor x in loader:\n    step(x)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\ndef train_step(model, x):\n    loss = model(x).sum()\n"
            "    loss.backward()\n    optimizer.step()\n    return loss\n"
            "compiled = torch.compile(train_step, backend='openxla')\nfor x in loader:\n"
            "    compiled(model, x)\n    train_step(cpu_model, x.cpu())\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch_xla\nfor x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n"
            "    optimizer.step()\n    optimizer.zero_grad()\n",
            (2,),
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\nfor epoch in range(3):\n"
            "    for x in loader:\n        loss = model(x).sum()\n        loss.backward()\n"
            "        xm.optimizer_step(optimizer)\n",
            (3,),
        ),
        Invalid(
            "import torch_xla\nstep = 0\nwhile step < 10:\n    loss = model(batch).sum()\n"
            "    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    step += 1\n",
            (3,),
        ),
    )

    def visit_For(self, node: cst.For) -> None:
        self._loop(node)

    def visit_While(self, node: cst.While) -> None:
        self._loop(node)

    def _loop(self, node: cst.For | cst.While) -> None:
        if not self.ctx.imports_torch_xla or self.facts.eager or is_literal_loop(node):
            return
        scope = self.ctx.scope
        _, full = self.facts.loop(node, scope)
        if not (full.backward and full.optimizer) or full.boundary:
            return
        if self._inner_training_loop(node, scope):
            return  # the inner loop is the training loop (and is checked itself)
        if isinstance(node, cst.For) and self.iterates_device_loader(node.iter, scope):
            return
        self.report(node)

    def _inner_training_loop(self, node: cst.For | cst.While, scope: Scope) -> bool:
        facts = self.facts
        for inner in facts.inner_loops(node):
            _, f = facts.loop(inner, scope)
            if f.backward and f.optimizer:
                return True
        return False


# ---- XLA205 eval-loop-without-step-boundary ---------------------------------------------------

# Context managers and decorators that turn autograd off: code under them evaluates.
NO_GRAD = frozenset(
    {
        "torch.no_grad",
        "torch.autograd.no_grad",
        "torch.autograd.grad_mode.no_grad",
        "torch.inference_mode",
        "torch.autograd.inference_mode",
        "torch.autograd.grad_mode.inference_mode",
    }
)
SET_GRAD_ENABLED = frozenset(
    {
        "torch.set_grad_enabled",
        "torch.autograd.set_grad_enabled",
        "torch.autograd.grad_mode.set_grad_enabled",
    }
)
# Words of a function name (holds.name_words) that say the function evaluates.
EVAL_WORDS = frozenset(
    {
        "eval",
        "evaluate",
        "evaluation",
        "validate",
        "validation",
        "val",
        "valid",
        "test",
        "testing",
        "predict",
        "prediction",
        "inference",
    }
)
# A tensor's attributes and methods that give Python values (`out.shape`, `out.size(0)`), and
# methods that read it on the host (`.item()`, `tokenizer.batch_decode(ids)` reads the ids).
PYTHON_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad"})
PYTHON_METHODS = frozenset(
    {
        *HOST_METHODS,
        "size",
        "dim",
        "ndimension",
        "numel",
        "nelement",
        "element_size",
        "stride",
        "is_contiguous",
        "get_device",
        "data_ptr",
        "batch_decode",
    }
)
# Words of a callee's name that say it is a model (holds.name_words splits the name), and
# methods only a model has (a name the module calls them on is a model).
MODEL_WORDS = frozenset(
    {
        "model",
        "models",
        "net",
        "network",
        "module",
        "encoder",
        "decoder",
        "classifier",
        "backbone",
        "unet",
        "transformer",
        "vae",
        "generator",
        "discriminator",
        "llm",
        "lm",
    }
)
MODEL_METHODS = frozenset(
    {"eval", "train", "parameters", "named_parameters", "load_state_dict", "requires_grad_"}
)
# Words of an iterable's names that say it is a dataset (holds.name_words splits the names).
DATA_WORDS = frozenset(
    {
        "loader",
        "loaders",
        "dataloader",
        "dataloaders",
        "dataset",
        "datasets",
        "data",
        "ds",
        "batches",
        "iterator",
        "samples",
        "examples",
        "split",
        "test",
        "val",
        "valid",
        "validation",
        "eval",
        "evaluation",
    }
)
_FUNCTIONS_AND_CALLS = frozenset({cst.FunctionDef, cst.Call})
# Tensor factories that build on the CPU unless given `device=`.
CPU_FACTORIES = TENSOR_FACTORIES | {"torch.tensor", "torch.as_tensor", "torch.Tensor"}
HOST_FUNCTIONS = frozenset({f"{apis.XM}.mesh_reduce"})  # reduces `.cpu()` copies on the host
# Reads that replace a tensor's pending graph with its data (measured, torch_xla 2.9.0 on CPU):
# `.cpu()`, `.tolist()`, `.numpy()`, `.to("cpu")`, `str()`/`print()`. `.item()` and `float()`
# run the graph but leave the tensor pending: its graph keeps growing.
MATERIALIZING_METHODS = frozenset({"cpu", "tolist", "numpy"})
MATERIALIZING_CALLS = frozenset(
    {"builtins.print", "builtins.str", "builtins.repr", f"{apis.XM}.master_print"}
)
# An assignment in a loop, its value and the names it binds.
_Binding = tuple[_Assignment, cst.BaseExpression, set[str]]
# Methods that keep a value across iterations: `outputs.append(logits)`.
COLLECTING_METHODS = frozenset({"append", "extend", "insert", "appendleft"})


def _read_names(node: cst.CSTNode) -> set[str]:
    """The names an expression reads: ``out`` and ``y`` in ``(out.argmax(1) == y).sum()``, not
    attribute names or keywords."""
    skip: set[int] = set()
    found: set[str] = set()
    for sub in iter_nodes(node):
        kind = type(sub)
        if kind is cst.Attribute:
            skip.add(id(sub.attr))
        elif kind is cst.Arg and sub.keyword is not None:
            skip.add(id(sub.keyword))
        elif kind is cst.Name and id(sub) not in skip:
            found.add(sub.value)
    return found


def _mentions(node: cst.CSTNode, key: str) -> bool:
    """``node`` reads the name or attribute chain ``key`` (``total``, ``self.total``)."""
    return any(
        (type(sub) is cst.Name or type(sub) is cst.Attribute) and dotted_name(sub) == key
        for sub in iter_nodes(node)
    )


def _kept_key(target: cst.CSTNode) -> str | None:
    """What an assignment to ``target`` keeps a value in: ``total`` for ``total``, ``self.total``
    for ``self.total``, ``stats`` for ``stats["loss"]``."""
    if type(target) is cst.Subscript:
        target = target.value
    return dotted_name(target)


def _targets(node: _Assignment) -> list[cst.BaseExpression]:
    """What an assignment assigns to: every target of ``a = b = ...``, the one of ``+=``."""
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    return [node.target]


def _unpacked(targets: list[cst.BaseExpression]) -> list[cst.BaseExpression]:
    """The targets of an assignment with tuples and lists unpacked: ``latents``, ``x0`` for
    ``latents, x0 = ...``."""
    out: list[cst.BaseExpression] = []
    for target in targets:
        if type(target) is cst.Tuple or type(target) is cst.List:
            out += _unpacked([e.value for e in target.elements])
        elif type(target) is cst.StarredElement:
            out += _unpacked([target.value])
        else:
            out.append(target)
    return out


def _next_batch(ctx: FileContext, value: cst.CSTNode, scope: Scope) -> bool:
    """``next(it)``, ``next(self.train_iter)``, ``next(iter(loader))``: the next item of an
    iterator (not ``next(i for i in ... if ...)``, a search)."""
    if type(value) is not cst.Call or "builtins.next" not in ctx.qnames(value, scope):
        return False
    first = find_arg(value, None, 0)
    return first is not None and type(first.value) in (cst.Name, cst.Attribute, cst.Call)


def _to_cpu(call: cst.Call) -> bool:
    """``t.to("cpu")``."""
    return any(literal_string(a.value) == "cpu" for a in call.args if a.keyword is None)


class EvalLoopWithoutStepBoundary(LoopRule):
    code = "XLA205"
    name = "eval-loop-without-step-boundary"
    summary = (
        "An evaluation loop keeps device tensors across iterations with no step boundary: one "
        "graph holds every iteration's forward."
    )
    message = (
        "evaluation loop keeps `{kept}` on the device across iterations with no step boundary: "
        "every iteration's forward stays in one pending graph, compiled when it is read after "
        "the loop (its size grows with the number of iterations); call `torch_xla.sync()` at "
        "the end of each iteration or iterate a `pl.MpDeviceLoader`"
    )
    severity = Severity.WARNING
    preview = True
    explanation = """\
## What it does
In a module that imports torch_xla, flags the innermost loop that evaluates and keeps
device tensors across its iterations with nothing that ends the graph per iteration.

- It *evaluates* when it is under `with torch.no_grad():`, `torch.inference_mode()` or
  `torch.set_grad_enabled(False)` (around it in its function, or inside its body), in a
  function decorated with one of them, or in a function whose name says so (eval,
  evaluate, validate, validation, val, test, predict, inference, ...). A loop that runs
  `backward()` or an optimizer step is a training loop (XLA203's).
- Its body runs a *forward*: a call of a model of the module (a name or attribute named
  like one, `model`, `self.net`, `text_encoder`, `unet`, or one the module calls `.eval()`,
  `.train()`, `.parameters()`... on; or its method: `model.generate(...)`) given the batch.
- It *keeps* a tensor computed from the forward in something that outlives the iteration:
  `correct += (out.argmax(1) == y).sum()`, `total = total + loss`, `outputs.append(logits)`,
  `all_preds = torch.cat([all_preds, p])`, `metric.update(out, y)`, `latents = step(latents)`.
- It iterates a dataset (an iterable named like one: `test_loader`,
  `enumerate(self.val_dataloader)`, `range(len(eval_data))`; a `while` loop taking
  `next(it)`), or its forward reads what the previous iteration computed (a sampling or
  decoding loop: `noise = self.unet(latents, t)`, `latents = scheduler.step(noise, t, latents)`).

Not flagged: a loop with `torch_xla.step()`, `torch_xla.sync()`, `xm.mark_step()`, a call
of a `torch_xla.compile`d/`torch.compile`d function or of a function of the module that
syncs anywhere in its body (a nested denoising loop), or inside a loop that syncs on each
of its own iterations (the tiles of one denoising step); a loop over a device loader
(`MpDeviceLoader`, `per_device_loader()`, through `enumerate`/`zip`/a name, or a parameter
in a module that builds one: XLA203's logic); values made Python numbers or host copies
before they are kept (`correct += (...).sum().item()`, `preds.append(out.argmax(1).cpu())`,
`texts += tokenizer.batch_decode(ids)`), shapes and counts (`total += y.size(0)`); an
accumulator reset in the loop, copied to the host each iteration (`acc.cpu()`,
`print(acc)`), or built on the CPU before the loop (`torch.tensor([0.0, 0.0])`, no
`device=`); a loop over a few items of a call (`for image in control_images:`); a loop over
a literal list or tuple; modules that turn eager mode on; test programs.

## Why is this bad
torch_xla records operations lazily and compiles the pending graph only at a step boundary
(`torch_xla.sync()`, `torch_xla/torch_xla.py`, 2.9.0; `torch_xla.step()` syncs on entry and
exit; `PerDeviceLoader.next`, `torch_xla/distributed/parallel_loader.py`, syncs before
each batch). An evaluation loop has no optimizer step to put one in, so an accumulated
tensor carries every iteration's forward: the graph read after the loop is compiled as one
program whose size, compile time and host memory grow with the dataset, and another
dataset length is another compilation. Measured on CPU, torch_xla 2.9.0, `Linear(32, 10)`,
batches of 16, `correct += (out.argmax(1) == y).sum()` under `no_grad`, read with
`.item()` after the loop: 10/40/160/320 iterations give one graph of 93/363/1443/2883 IR
nodes with 22/82/322/642 inputs, compiled in 0.16/0.21/0.73/2.18 s, one compilation per
length; with `torch_xla.sync()` per iteration: 2 compilations in all (the first iteration,
then the steady one), reused for every length, and a 1-node graph at the read.

A host read of *another* tensor in the loop does not help: `loss.item()`,
`out.argmax(1).cpu()` or `print(loss)` run (or materialize) that tensor's graph, but the
accumulator still holds every forward (measured: 363 IR nodes after 40 iterations with or
without them). `.item()` or `float()` of the accumulator itself is worse: it runs the graph
but leaves the tensor pending, so each iteration compiles a larger graph (measured: 20
compilations for 20 iterations).

## Example
```python
correct = 0
with torch.no_grad():
    for x, y in loader:                  # a torch DataLoader
        out = model(x.to(device))
        correct += (out.argmax(1) == y.to(device)).sum()
print(correct.item() / len(dataset))
```

## Use instead
```python
correct = 0
with torch.no_grad():
    for x, y in pl.MpDeviceLoader(loader, device):   # syncs before each batch
        out = model(x)
        correct += (out.argmax(1) == y).sum()
print(correct.item() / len(dataset))
```
or call `torch_xla.sync()` at the end of each iteration (or wrap the body in
`with torch_xla.step():`).

## References
- https://docs.pytorch.org/xla/master/learn/pytorch-on-xla-devices.html
- torch_xla 2.9.0 `torch_xla/torch_xla.py` (`sync`, `step`, `compile`), `torch_xla/distributed/parallel_loader.py` (`PerDeviceLoader.next`)
"""
    valid = (
        # The accumulated values are Python numbers: `.item()` per iteration.
        Valid(
            "import torch\nimport torch_xla\ndevice = torch_xla.device()\ncorrect = 0\n"
            "with torch.no_grad():\n    for x, y in loader:\n        out = model(x.to(device))\n"
            "        correct += (out.argmax(1) == y.to(device)).sum().item()\n"
            "        total += y.size(0)\n"
        ),
        # A device loader syncs before each batch: directly, or passed to the function.
        Valid(
            "import torch\nimport torch_xla\nimport torch_xla.distributed.parallel_loader as pl\n"
            "with torch.no_grad():\n    for x, y in pl.MpDeviceLoader(loader, device):\n"
            "        correct += (model(x).argmax(1) == y).sum()\n"
            "def evaluate(model, loader):\n    outputs = []\n    for i, (x, y) in enumerate(loader):\n"
            "        outputs.append(model(x))\n    return torch.cat(outputs)\n"
            "evaluate(model, pl.MpDeviceLoader(test_loader, device))\n"
        ),
        Valid(
            "import torch\nimport torch_xla\nwith torch.no_grad():\n    for x, y in loader:\n"
            "        with torch_xla.step():\n            loss = criterion(model(x), y)\n"
            "            total_loss += loss\n"
        ),
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\n@torch.no_grad()\n"
            "def validate(model, loader, device):\n    correct = 0\n    for x, y in loader:\n"
            "        out = model(x.to(device))\n        correct += out.argmax(1).eq(y.to(device)).sum()\n"
            "        xm.mark_step()\n    return correct\n"
        ),
        # Only host copies are kept; a counter; an accumulator reset every iteration.
        Valid(
            "import torch\nimport torch_xla\ndef predict(model, loader):\n    preds, texts = [], []\n"
            "    for batch in loader:\n        logits = model(**batch)\n"
            "        preds.append(logits.argmax(-1).cpu())\n"
            "        texts.extend(tokenizer.batch_decode(logits.argmax(-1)))\n"
            "        n = 0\n        n += logits.shape[0]\n    return preds\n"
        ),
        # A training loop is XLA203's.
        Valid(
            "import torch\nimport torch_xla\ndef train(model, loader):\n    for x, y in loader:\n"
            "        loss = criterion(model(x), y)\n        loss.backward()\n        optimizer.step()\n"
            "        total_loss += loss.detach()\n"
        ),
        # No torch_xla in the module: a CUDA script.
        Valid(
            "import torch\nwith torch.no_grad():\n    for x, y in loader:\n"
            "        out = model(x.cuda())\n        correct += (out.argmax(1) == y.cuda()).sum()\n"
        ),
        # A few configurations, not a dataset; eager mode.
        Valid(
            "import torch\nimport torch_xla\nwith torch.no_grad():\n    for x in [a, b]:\n"
            "        outputs.append(model(x))\n"
        ),
        Valid(
            "import torch\nimport torch_xla\ntorch_xla.experimental.eager_mode(True)\n"
            "with torch.no_grad():\n    for x, y in loader:\n        correct += (model(x).argmax(1) == y).sum()\n"
        ),
        # The forward's result is only printed; the accumulator is printed (materialized) each time.
        Valid(
            "import torch\nimport torch_xla\nwith torch.no_grad():\n    for x in loader:\n"
            "        out = model(x)\n        print(out)\n"
            "    for x in loader:\n        total = total + model(x).sum()\n        print(total)\n"
        ),
        # A compiled eval step runs its own graph per call.
        Valid(
            "import torch\nimport torch_xla\n"
            "def eval_step(model, x, y):\n    return (model(x).argmax(1) == y).sum()\n"
            "compiled = torch.compile(eval_step, backend='openxla')\n"
            "with torch.no_grad():\n    for x, y in loader:\n        correct += compiled(model, x, y)\n"
        ),
        # Not an evaluation (no no_grad, no evaluation name): left alone.
        Valid(
            "import torch_xla\ndef collect(model, loader):\n    feats = []\n    for x in loader:\n"
            "        feats.append(model(x))\n    return feats\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch\nimport torch_xla\ndevice = torch_xla.device()\ncorrect = 0\n"
            "with torch.no_grad():\n    for x, y in loader:\n        out = model(x.to(device))\n"
            "        correct += (out.argmax(1) == y.to(device)).sum()\n"
            "print(correct.item())\n",
            (6,),
        ),
        Invalid(
            "import torch\nimport torch_xla\ndef evaluate(model, loader):\n    logits_all = []\n"
            "    for x, _ in loader:\n        logits = model(x.to(torch_xla.device()))\n"
            "        logits_all.append(logits)\n    return torch.cat(logits_all)\n",
            (5,),
        ),
        # A synced training loop, then an unsynced validation loop: only the latter. The loss
        # read per iteration does not cut the accumulator's graph.
        Invalid(
            "import torch\nimport torch_xla\nclass Trainer:\n    def fit(self, epochs):\n"
            "        for epoch in range(epochs):\n            for x, y in self.train_loader:\n"
            "                self.criterion(self.model(x), y).backward()\n"
            "                self.optimizer.step()\n                torch_xla.sync()\n"
            "            with torch.no_grad():\n                for x, y in self.val_loader:\n"
            "                    loss = self.criterion(self.model(x), y)\n"
            "                    self.val_loss += loss\n                    print(loss.item())\n",
            (11,),
        ),
        # Greedy decoding: the generated ids feed the next forward.
        Invalid(
            "import torch\nimport torch_xla\n@torch.inference_mode()\n"
            "def generate(model, ids, steps):\n    for _ in range(steps):\n"
            "        logits = model(ids)[:, -1]\n"
            "        ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=-1)\n"
            "    return ids\n",
            (5,),
        ),
    )

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._kept: dict[int, str | None] = {}  # id(loop) -> _kept_across

    def visit_For(self, node: cst.For) -> None:
        self._loop(node)

    def visit_While(self, node: cst.While) -> None:
        self._loop(node)

    def _loop(self, node: cst.For | cst.While) -> None:
        ctx = self.ctx
        if not ctx.imports_torch_xla or self.facts.eager:
            return
        kept = self._kept_across(node)
        if kept is None:
            return
        if any(self._kept_across(inner) is not None for inner in self.facts.inner_loops(node)):
            return  # an inner loop keeps them (and is checked itself)
        if isinstance(node, cst.For) and self.iterates_device_loader(node.iter, ctx.scope):
            return
        if self._outer_boundary() or not self._evaluates(node):
            return
        self.report(node, self.message.format(kept=kept), requires=[(Fact.TEST, False)])

    def _outer_boundary(self) -> bool:
        """A loop around the one visited (in the same function) ends the graph on each of its
        iterations: the inner loop's graph is bounded by one outer iteration (the tiles of one
        denoising step)."""
        stack = self.ctx.stack
        for i in range(len(stack) - 2, -1, -1):
            ancestor, child = stack[i], stack[i + 1]
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False
            if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
                if self.facts.loop(ancestor, self.ctx.scope)[0].boundary:  # not in its inner loops
                    return True
                if isinstance(ancestor, cst.For) and self.iterates_device_loader(
                    ancestor.iter, self.ctx.scope
                ):
                    return True
        return False

    # -- is it an evaluation? ----------------------------------------------------------------
    def _evaluates(self, node: cst.For | cst.While) -> bool:
        """Under ``no_grad``/``inference_mode`` (in the loop's body, around it in its function,
        or decorating the function), or in a function whose name says it evaluates."""
        if any(self._no_grad(call, scope) for call, scope in self.facts.calls(node)):
            return True
        stack = self.ctx.stack
        for ancestor in reversed(stack[:-1]):
            if isinstance(ancestor, cst.With):
                if any(self._no_grad(item.item, self.ctx.scope) for item in ancestor.items):
                    return True
            elif isinstance(ancestor, cst.FunctionDef):
                return any(
                    self._no_grad(d.decorator, self.ctx.scope) for d in ancestor.decorators
                ) or not EVAL_WORDS.isdisjoint(name_words(ancestor.name.value))
            elif isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return False
        return False

    def _no_grad(self, node: cst.CSTNode, scope: Scope) -> bool:
        names = self.ctx.qnames(node, scope)
        if names & NO_GRAD:
            return True
        if type(node) is cst.Call and names & SET_GRAD_ENABLED:
            arg = find_arg(node, "mode", 0)
            return arg is not None and type(arg.value) is cst.Name and arg.value.value == "False"
        return False

    # -- does it keep tensors? ---------------------------------------------------------------
    def _kept_across(self, loop: cst.For | cst.While) -> str | None:
        """What ``loop`` keeps a forward's tensor in from one iteration to the next (``correct``,
        ``outputs``), when nothing in it ends the graph; None otherwise. Memoised per loop."""
        key = id(loop)
        if key not in self._kept:
            self._kept[key] = self._find_kept(loop)
        return self._kept[key]

    def _find_kept(self, loop: cst.For | cst.While) -> str | None:
        facts, scope = self.facts, self.ctx.scope
        if is_literal_loop(loop):
            return None
        _, full = facts.loop(loop, scope)
        if full.backward or full.optimizer or full.boundary:
            return None
        assigns: list[_Binding] = []  # (assignment, its value, the names it binds)
        for node in facts.assignments(loop):
            if node.value is None:
                continue  # `x: int` binds nothing
            bound: set[str] = set()
            for target in _targets(node):
                bound |= bound_names(target)
            assigns.append((node, node.value, bound))
        syncing = self.ctx.memo(_syncing_functions, lambda: _syncing_functions(self.ctx, facts))
        for call, call_scope in facts.calls(loop):
            func = call.func
            if _last_name(func) in syncing and not self.ctx.qnames(func, call_scope):
                return None  # a function of the module that syncs (in its own loop, say)
        # The loop's data: its target or what `next()` gives, and names carried from one
        # iteration to the next (`ids = torch.cat([ids, new])`); then what its forward computes.
        inputs = bound_names(loop.target) if type(loop) is cst.For else set()
        data = self._iterates_data(loop)
        carried: set[str] = set()
        rebound = set(inputs)  # names given a fresh value every iteration
        for node, value, targets in assigns:
            if type(node) is cst.AugAssign:
                continue
            if _read_names(value) & targets:
                carried |= targets
            else:
                rebound |= targets
                if _next_batch(self.ctx, value, scope):
                    inputs |= targets  # `batch = next(it)` in a while loop
                    data = True
        carried -= rebound
        inputs |= carried
        if not data and not self._feeds_back(loop, assigns, carried):
            return None  # a few items (the control images of one call), not a dataset
        tensors: set[str] = set()
        for _ in range(3):
            for _, value, targets in assigns:
                if targets <= tensors:
                    continue
                if self._tensor(value, tensors, inputs, scope):
                    tensors |= targets
                elif _read_names(value) & inputs:
                    inputs |= targets  # `input_ids = batch["input_ids"].to(device)`
        resets = set(rebound)
        kept: list[tuple[str, str | None]] = []  # (where, the name of the value kept there)
        for node, value, _ in assigns:
            if isinstance(node, cst.AugAssign):
                where = _kept_key(node.target)
                if where is not None and self._tensor(value, tensors, inputs, scope):
                    kept.append((where, None))
                continue
            for target in _unpacked(_targets(node)):
                where = dotted_name(target)
                if where is None:
                    continue
                if not _mentions(value, where):
                    resets.add(where)
                elif self._tensor(value, tensors, inputs, scope):
                    kept.append((where, None))
        for call, call_scope in facts.calls(loop):
            func = call.func
            if type(func) is not cst.Attribute:
                continue
            where = dotted_name(func.value)
            method = func.attr.value
            if where is None or not (
                method in COLLECTING_METHODS or (method == "update" and "metric" in where.lower())
            ):
                continue
            for arg in call.args:
                if self._tensor(arg.value, tensors, inputs, call_scope):
                    value = arg.value
                    kept.append((where, value.value if type(value) is cst.Name else None))
                    break
        materialized = self._materialized(loop)
        for where, name in kept:
            if where in resets or where in materialized or name in materialized:
                continue
            if not self._on_host(where):
                return where
        return None

    def _iterates_data(self, loop: cst.For | cst.While) -> bool:
        """A ``for`` loop over something named like a dataset: ``test_loader``,
        ``enumerate(self.val_dataloader)``, ``tqdm(eval_ds)``, ``range(len(test_data))``."""
        if type(loop) is not cst.For:
            return False
        return any(
            type(n) is cst.Name and not DATA_WORDS.isdisjoint(name_words(n.value))
            for n in iter_nodes(loop.iter)
        )

    def _feeds_back(
        self,
        loop: cst.For | cst.While,
        assigns: list[_Binding],
        carried: set[str],
    ) -> bool:
        """A model call in ``loop`` reads a value carried from the previous iteration (or one
        computed from it): a sampling or decoding loop (``latents = step(unet(latents), ...)``,
        ``ids = torch.cat([ids, model(ids).argmax(-1)])``), whose graph deepens every iteration."""
        if not carried:
            return False
        derived = set(carried)
        for _ in range(3):
            for _, value, targets in assigns:
                if not targets <= derived and _read_names(value) & derived:
                    derived |= targets
        for call, _ in self.facts.calls(loop):
            func = call.func
            if (type(func) is cst.Name or type(func) is cst.Attribute) and self._is_model(func):
                if any(_read_names(a.value) & derived for a in call.args):
                    return True
        return False

    def _materialized(self, loop: cst.For | cst.While) -> set[str]:
        """Names and attribute chains the loop copies to the host each iteration in a way that
        replaces their pending graph with data: ``acc.cpu()``, ``.tolist()``, ``.numpy()``,
        ``.to("cpu")``, ``print(acc)``, ``str(acc)``, ``f"{acc}"`` in a print."""
        found: set[str] = set()
        for call, scope in self.facts.calls(loop):
            func = call.func
            if type(func) is cst.Attribute and (
                func.attr.value in MATERIALIZING_METHODS
                or (func.attr.value == "to" and _to_cpu(call))
            ):
                where = dotted_name(func.value)
                if where is not None:
                    found.add(where)
            elif self.ctx.qnames(func, scope) & MATERIALIZING_CALLS:
                for arg in call.args:
                    exprs = [arg.value] + [
                        sub.expression
                        for sub in iter_nodes(arg.value)
                        if type(sub) is cst.FormattedStringExpression
                    ]
                    found.update(n for n in map(dotted_name, exprs) if n is not None)
        return found

    def _tensor(self, node: cst.CSTNode, tensors: set[str], inputs: set[str], scope: Scope) -> bool:
        """True when ``node`` evaluates to a device tensor the loop computes: a name in
        ``tensors``; an attribute, item or tensor method of one (not ``.shape``, ``.size()`` or
        a host read); arithmetic or a comparison on one; a torch function of one; a container
        of one; or a call of a callable of the module (a model, ``self.model``, a loss function:
        no imported name, no plain name such as ``tokenizer``) given ``inputs`` or ``tensors``."""
        if isinstance(node, cst.Name):
            return node.value in tensors
        if isinstance(node, cst.Attribute):
            return node.attr.value not in PYTHON_ATTRIBUTES and self._tensor(
                node.value, tensors, inputs, scope
            )
        if isinstance(node, cst.Subscript):
            return self._tensor(node.value, tensors, inputs, scope)
        if isinstance(node, cst.BinaryOperation):
            return self._tensor(node.left, tensors, inputs, scope) or self._tensor(
                node.right, tensors, inputs, scope
            )
        if isinstance(node, cst.UnaryOperation):
            return not isinstance(node.operator, cst.Not) and self._tensor(
                node.expression, tensors, inputs, scope
            )
        if isinstance(node, cst.Comparison):
            return self._tensor(node.left, tensors, inputs, scope) or any(
                self._tensor(c.comparator, tensors, inputs, scope) for c in node.comparisons
            )
        if isinstance(node, cst.IfExp):
            return self._tensor(node.body, tensors, inputs, scope) or self._tensor(
                node.orelse, tensors, inputs, scope
            )
        if isinstance(node, (cst.List, cst.Tuple)):
            return any(self._tensor(e.value, tensors, inputs, scope) for e in node.elements)
        if isinstance(node, cst.Call):
            return self._tensor_call(node, tensors, inputs, scope)
        return False

    def _tensor_call(
        self, call: cst.Call, tensors: set[str], inputs: set[str], scope: Scope
    ) -> bool:
        func = call.func
        names = self.ctx.qnames(func, scope)
        if names:  # torch.cat(...), F.softmax(...); not float(), len(), numpy, mesh_reduce
            return (
                any(n.startswith(("torch.", "torch_xla.")) for n in names)
                and not names & HOST_FUNCTIONS
                and any(self._tensor(a.value, tensors, inputs, scope) for a in call.args)
            )
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method in PYTHON_METHODS or (method == "to" and _to_cpu(call)):
                return False
            if self._tensor(func.value, tensors, inputs, scope):
                return True  # a tensor method: out.argmax(1), loss.detach()
            if chain_root(func) in inputs or plain_name(func.value):
                return False  # a method of the batch (x.to(device)) or a tokenizer's
        elif type(func) is not cst.Name:
            return False
        if plain_name(func):
            return False  # tokenizer(text), self.config(...)
        read: set[str] = set()
        for arg in call.args:
            read |= _read_names(arg.value)
        if read & tensors or any(self._tensor(a.value, tensors, inputs, scope) for a in call.args):
            return True  # criterion(out, y), criterion(model(x), y), model.test(logits, y)
        return bool(read & inputs) and self._is_model(func)

    def _is_model(self, func: cst.Name | cst.Attribute) -> bool:
        """``func`` (or, for a method, its receiver: ``model.generate``) is named like a model
        (``model``, ``self.net``, ``text_encoder``, ``unet``) or is a name the module calls
        ``.eval()``/``.train()``/``.parameters()``/... on."""
        names = [_last_name(func)]
        if type(func) is cst.Attribute:
            names.append(_last_name(func.value))
        models = self.ctx.memo(_model_names, lambda: _model_names(self.ctx))
        return any(
            n is not None
            and n != "self"  # a method of the module itself: self.prepare_image(...)
            and (n in models or _model_word(n))
            for n in names
        )

    def _on_host(self, where: str) -> bool:
        """The accumulator ``where`` (a name) is assigned once, before the loop, a tensor built
        on the CPU (``torch.tensor([0.0, 0.0])``, ``torch.zeros(4)``: no ``device=``): adding an
        XLA tensor to it in place would raise, so what the loop adds is on the CPU too."""
        if "." in where:
            return False
        found = definition(self.ctx, cst.Name(where))
        if found is None or type(found[0]) is not cst.Call:
            return False
        call = found[0]
        return (
            bool(self.ctx.qnames(call, found[1].scope) & CPU_FACTORIES)
            and find_arg(call, "device") is None
        )


def _model_word(name: str) -> bool:
    """``name`` starts or ends with a word of :data:`MODEL_WORDS`: ``model``, ``text_encoder``,
    ``model_fn``; not ``get_module_size``."""
    words = name_words(name)
    return bool(words) and (words[0] in MODEL_WORDS or words[-1] in MODEL_WORDS)


def _syncing_functions(ctx: FileContext, facts: LoopFacts) -> frozenset[str]:
    """Names of the module's functions that end the graph somewhere in their body (in a loop
    too: ``def denoise(...): for t in timesteps: ...; xm.mark_step()``), or call one that does
    (by name, transitively)."""
    flat = ctx.flat
    nodes, ends = flat.nodes, flat.ends
    syncing: set[str] = set()
    callees: dict[str, set[str]] = {}
    opened: list[tuple[int, cst.FunctionDef, Scope]] = []
    for i in flat.of_types(_FUNCTIONS_AND_CALLS):
        while opened and opened[-1][0] <= i:
            opened.pop()
        node = nodes[i]
        if type(node) is cst.FunctionDef:
            scope = ctx.scopes.get(node, opened[-1][2] if opened else ctx.root_scope)
            opened.append((ends[i], node, scope))
            continue
        if not opened or type(node) is not cst.Call:
            continue
        _, function, scope = opened[-1]
        name = function.name.value
        found = facts.classify(node, scope, use_functions=False)
        if found is not None and found.boundary:
            syncing.add(name)
        else:
            callee = _last_name(node.func)
            if callee is not None:
                callees.setdefault(name, set()).add(callee)
    changed = True
    while changed:
        changed = False
        for name, called in callees.items():
            if name not in syncing and called & syncing:
                syncing.add(name)
                changed = True
    return frozenset(syncing)


def _model_names(ctx: FileContext) -> frozenset[str]:
    """Names (last names: ``model`` for ``self.model``) the module calls a method only a
    ``torch.nn.Module`` has on: ``model.eval()``, ``net.parameters()``, ``m.train()``."""
    found: set[str] = set()
    flat = ctx.flat
    for i in flat.of_types(_CALLS):
        call = flat.nodes[i]
        func = call.func if type(call) is cst.Call else None
        if type(func) is cst.Attribute and func.attr.value in MODEL_METHODS:
            name = _last_name(func.value)
            if name is not None:
                found.add(name)
    return frozenset(found)


# ---- XLA204 adam-scalar-recompile ------------------------------------------------------------

# torch's Adam and AdamW, and torch_xla's sync-free AMP variants (torch_xla 2.9.0
# torch_xla/amp/syncfree/__init__.py exports Adam, AdamW and SGD; Adam and AdamW subclass
# torch's and call its `step()` when no `found_inf` is given).
TORCH_ADAMS = frozenset(
    {"torch.optim.Adam", "torch.optim.adam.Adam", "torch.optim.AdamW", "torch.optim.adamw.AdamW"}
)
SYNCFREE_ADAMS = frozenset(
    {
        "torch_xla.amp.syncfree.Adam",
        "torch_xla.amp.syncfree.adam.Adam",
        "torch_xla.amp.syncfree.AdamW",
        "torch_xla.amp.syncfree.adamw.AdamW",
    }
)
ADAMS = TORCH_ADAMS | SYNCFREE_ADAMS
DEFAULT_BETA2 = 0.999  # torch 2.9.0 torch/optim/adam.py and adamw.py: betas=(0.9, 0.999)
# A parameter dtype, as torch spells it, or a cast method, -> the name recompile_step takes.
TORCH_DTYPES = {
    "torch.bfloat16": "bfloat16",
    "torch.float16": "float16",
    "torch.half": "float16",
    "torch.float32": "float32",
    "torch.float": "float32",
    "torch.float64": "float64",
    "torch.double": "float64",
}
CAST_METHODS = {"bfloat16": "bfloat16", "half": "float16", "float": "float32", "double": "float64"}
_MISSING = object()  # an optimizer argument not passed
_UNKNOWN = object()  # passed, with a value the file does not fix


_CALLS = frozenset({cst.Call})
_ASSIGNS = frozenset({cst.Assign})
_CALLS_AND_ASSIGNS = _CALLS | _ASSIGNS
_DEFINITIONS = frozenset({cst.FunctionDef, cst.ClassDef})


def _module_casts(ctx: FileContext) -> dict[str, set[str]]:
    """Name -> the dtypes the module casts it to: ``model.to(torch.bfloat16)``,
    ``model.to(device, dtype=torch.bfloat16)``, ``self.model.bfloat16()``, ``model.half()``
    (by the last name of what the cast chain starts from), and ``model = Net().to(dev).bfloat16()``
    (by the assigned name)."""
    found: dict[str, set[str]] = {}

    def cast_dtype(call: cst.Call) -> str | None:
        func = call.func
        if not isinstance(func, cst.Attribute):
            return None
        method = func.attr.value
        if method in CAST_METHODS and not call.args:
            return CAST_METHODS[method]
        if method != "to":
            return None
        for arg in call.args:
            if arg.keyword is None or arg.keyword.value == "dtype":
                names = ctx.qnames(arg.value, ctx.root_scope) & TORCH_DTYPES.keys()
                if names:
                    return TORCH_DTYPES[min(names)]
        return None

    def chain(node: cst.CSTNode):
        """The calls of a method chain, outermost first, then what it starts from."""
        while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            yield node
            node = node.func.value
        yield node

    flat = ctx.flat
    for i in flat.of_types(_CALLS_AND_ASSIGNS):
        node = flat.nodes[i]
        if type(node) is cst.Call:
            dtype = cast_dtype(node)
            if dtype is not None:
                *_, start = chain(node)
                name = _last_name(start)
                if name is not None:
                    found.setdefault(name, set()).add(dtype)
        elif type(node) is cst.Assign:
            dtypes = {
                d
                for c in chain(node.value)
                if isinstance(c, cst.Call)
                for d in [cast_dtype(c)]
                if d
            }
            for target in node.targets:
                name = _last_name(target.target)
                if name is not None and dtypes:
                    found.setdefault(name, set()).update(dtypes)
    return found


def _literal_dtype(ctx: FileContext, node: cst.CSTNode) -> str | None:
    """``"bfloat16"`` for ``torch.bfloat16`` (through imports), None for anything else."""
    names = ctx.qnames(node, ctx.root_scope) & TORCH_DTYPES.keys()
    return TORCH_DTYPES[min(names)] if names else None


def _default_dtype(ctx: FileContext) -> tuple[str, int] | None:
    """The dtype of a module-level ``torch.set_default_dtype(torch.bfloat16)`` and the index
    of its statement in the module body; None when there is none, or several disagree, or
    one is not a literal dtype (``torch.set_default_dtype(dtype)``)."""
    found: set[str | None] = set()
    first = -1
    for index, stmt in enumerate(ctx.module.body):
        if type(stmt) is not cst.SimpleStatementLine:
            continue
        for small in stmt.body:
            value = small.value if type(small) is cst.Expr else None
            if type(value) is cst.Call and SET_DEFAULT_DTYPE in ctx.qnames(value, ctx.root_scope):
                arg = find_arg(value, "d", 0)
                found.add(_literal_dtype(ctx, arg.value) if arg is not None else None)
                first = index if first < 0 else first
    dtype = next(iter(found)) if len(found) == 1 else None
    if dtype is None:
        return None
    return dtype, first


def _built_dtypes(ctx: FileContext) -> dict[str, str | None]:
    """Name -> the dtype the model assigned to it is built in (by the last name of the target,
    as :func:`_module_casts`): the literal ``torch_dtype=``/``dtype=`` of a
    ``from_pretrained(...)``/``from_config(...)`` in the assigned call chain
    (``AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16).to(device)``),
    else the dtype of a module-level ``torch.set_default_dtype(<literal dtype>)`` before the
    assignment (torch builds parameters in the default dtype; a model built in a function is
    taken to be built after the module's statements ran). Assignments of a call that takes the
    name itself (``model = FSDP(model)``) and of anything but a call are skipped; None when the
    assignments disagree or a dtype is not a literal (``torch_dtype=args.dtype``); names with no
    such assignment, or only float32 ones, are left out."""
    default = _default_dtype(ctx)
    found: dict[str, set[str | None]] = {}
    for index, stmt in enumerate(ctx.module.body):
        deferred = type(stmt) in (cst.FunctionDef, cst.ClassDef)
        for node in iter_nodes(stmt):
            if type(node) is not cst.Assign or type(node.value) is not cst.Call:
                continue
            chain: list[cst.Call] = []
            value: cst.CSTNode = node.value
            while type(value) is cst.Call:
                chain.append(value)
                value = value.func.value if type(value.func) is cst.Attribute else value.func
            for target in node.targets:
                name = _last_name(target.target)
                if name is None or any(_last_name(a.value) == name for c in chain for a in c.args):
                    continue
                dtype: str | None = "float32"
                if default is not None and (deferred or default[1] < index):
                    dtype = default[0]
                for call in chain:
                    if type(call.func) is cst.Attribute and call.func.attr.value in MODEL_LOADERS:
                        arg = find_arg(call, "torch_dtype") or find_arg(call, "dtype")
                        if arg is not None:
                            dtype = _literal_dtype(ctx, arg.value)
                found.setdefault(name, set()).add(dtype)
    return {
        name: next(iter(dtypes)) if len(dtypes) == 1 else None
        for name, dtypes in found.items()
        if dtypes != {"float32"}
    }


def _passes_found_inf(ctx: FileContext) -> bool:
    """The module calls some ``.step(found_inf=...)`` (or ``.step(closure, found_inf)``), or
    ``xm.optimizer_step(opt, optimizer_args={"found_inf": ...})`` (also through a name assigned
    such a dict; it calls ``optimizer.step(**optimizer_args)``, torch_xla 2.9.0
    ``torch_xla/core/xla_model.py``; the form of pytorch/xla's ``test/test_syncfree_optimizers.py``):
    the sync-free optimizers' own update, whose step count stays on the device."""

    def has_found_inf(expr: cst.CSTNode | None) -> bool:
        if isinstance(expr, cst.Dict):
            return any(
                isinstance(e, cst.DictElement) and literal_string(e.key) == "found_inf"
                for e in expr.elements
            )
        return (
            isinstance(expr, cst.Call)
            and "builtins.dict" in ctx.qnames(expr, ctx.root_scope)
            and (find_arg(expr, "found_inf") is not None)
        )

    flat = ctx.flat
    dict_names = {
        t.target.value
        for i in flat.of_types(_ASSIGNS)
        for node in [flat.nodes[i]]
        if type(node) is cst.Assign and has_found_inf(node.value)
        for t in node.targets
        if isinstance(t.target, cst.Name)
    }
    for i in flat.of_types(_CALLS):
        call = flat.nodes[i]
        if type(call) is not cst.Call:
            continue
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "step"
            and (find_arg(call, "found_inf", 1) is not None)
        ):
            return True
        if OPTIMIZER_STEP in ctx.qnames(call, ctx.root_scope):
            arg = find_arg(call, "optimizer_args", 2)
            if arg is not None and (
                has_found_inf(arg.value)
                or (isinstance(arg.value, cst.Name) and arg.value.value in dict_names)
            ):
                return True
    return False


# Calls that pass a loop's iterable through without changing how many items it yields.
COUNT_WRAPPERS = frozenset({"tqdm", "enumerate"})
# Counts a loop bound may be read from: not a command-line option or a call result.
_FIXED_ORIGINS = ("a literal", "the module constant ", "the variable ")
TORCH_COMPILE = "torch.compile"
# They call the function they are given once in each process (torch_xla 2.9.0
# torch_xla/distributed/xla_multiprocessing.py `spawn`, torch_xla/torch_xla.py `launch`).
LAUNCHERS = frozenset({apis.SPAWN, apis.LAUNCH})
SET_DEFAULT_DTYPE = "torch.set_default_dtype"
# Loaders of pretrained models (transformers, diffusers): their `torch_dtype=`/`dtype=` is the parameters' dtype.
MODEL_LOADERS = frozenset({"from_pretrained", "from_config", "from_single_file"})


def literal_iterations(ctx: FileContext, loop: cst.For | cst.While, scope: Scope) -> int | None:
    """How many times ``loop``'s body runs, when the file fixes it: ``for i in range(100)``,
    ``range(a, b[, step])`` of int literals or constants (module constants, a local assigned
    a literal once), a literal list or tuple (``for n in [2048]:`` runs once); ``tqdm(...)``
    and ``enumerate(...)`` around any of these, and ``trange(n)``, run as often. None for any
    other loop: over a DataLoader, ``range(args.steps)`` (an argparse default is a default,
    not a bound), ``while True``. ``scope`` is the scope the loop is in."""
    if type(loop) is not cst.For:
        return None
    it = loop.iter
    while (
        type(it) is cst.Call
        and _last_name(it.func) in COUNT_WRAPPERS
        and it.args
        and (it.args[0].keyword is None and not it.args[0].star)
    ):
        it = it.args[0].value
    if type(it) is cst.List or type(it) is cst.Tuple:
        if any(type(e) is cst.StarredElement for e in it.elements):
            return None
        return len(it.elements)
    if type(it) is not cst.Call or not (
        "builtins.range" in ctx.qnames(it.func, scope) or _last_name(it.func) == "trange"
    ):
        return None
    bounds: list[int] = []
    for arg in it.args:
        if arg.keyword is not None or arg.star:
            return None
        value = value_of(ctx, arg.value, Site(scope))
        if (
            not isinstance(value, Known)
            or type(value.value) is not int
            or not value.origin.startswith(_FIXED_ORIGINS)
        ):
            return None
        bounds.append(value.value)
    try:
        return len(range(*bounds))
    except (TypeError, ValueError):
        return None


class OptimizerSteps:
    """Where a module steps its optimizers, and how often that runs, from one walk (computed
    once per file, for XLA204).

    ``steps``: name -> the ``.step()`` calls on it (``opt.step()``, ``self.opt.step()``,
    ``xm.optimizer_step(opt)``, ``scaler.step(opt)``: by the last name of the receiver or of
    the first argument), each as the loops and functions around it (innermost last, each with
    the scope it is in). ``refs``: function name -> every read of it, as ("call" | "compile" |
    "other", what surrounds it, read as an attribute); ``torch.compile(f)`` is a "compile"
    read, ``xmp.spawn(f)``/``torch_xla.launch(f)`` a call (they call ``f`` once in each
    process). ``compiled``: the functions decorated with ``torch.compile``.
    """

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.steps: dict[str, list[tuple]] = {}
        self.refs: dict[str, list[tuple[str, tuple, bool]]] = {}
        self.compiled: set[int] = set()
        self.methods: set[int] = set()
        functions: set[str] = set()
        flat = ctx.flat
        for i in flat.of_types(_DEFINITIONS):
            node = flat.nodes[i]
            if type(node) is cst.FunctionDef:
                functions.add(node.name.value)
            elif type(node) is cst.ClassDef:
                self.methods.update(id(s) for s in node.body.body if type(s) is cst.FunctionDef)
        self._scan(functions)

    def _scan(self, functions: set[str]) -> None:
        ctx = self.ctx
        frames: list[
            tuple[cst.CSTNode, Scope]
        ] = []  # (For/While whose body we are in | FunctionDef | Lambda, scope)
        scopes: list[Scope] = [ctx.root_scope]
        owners: list[cst.CSTNode] = []  # the node that pushed each frame
        bodies: dict[int, cst.CSTNode] = {}  # id(a loop's body, or a while loop's test) -> the loop
        kinds: dict[int, str] = {}  # id(a function read) -> "call" | "compile"
        not_refs: set[int] = (
            set()
        )  # Names that are no reads: attribute names, keywords, definitions

        def read(node: cst.CSTNode, name: str, attribute: bool) -> None:
            if name in functions:
                self.refs.setdefault(name, []).append(
                    (kinds.get(id(node), "other"), tuple(frames), attribute)
                )

        def on_visit(node: cst.CSTNode) -> bool:
            loop = bodies.pop(id(node), None)
            if loop is not None:
                frames.append((loop, scopes[-1]))
                owners.append(node)
            if type(node) is cst.Call:
                kinds[id(node.func)] = "call"
                self._on_call(node, scopes[-1], tuple(frames), kinds)
            elif type(node) is cst.Attribute:
                not_refs.add(id(node.attr))
                read(node, node.attr.value, True)
            elif type(node) is cst.Name:
                if id(node) not in not_refs:
                    read(node, node.value, False)
            elif type(node) is cst.For or type(node) is cst.While:
                bodies[id(node.body)] = node
                if type(node) is cst.While:
                    bodies[id(node.test)] = node
            elif type(node) is cst.FunctionDef:
                not_refs.add(id(node.name))
                if any(
                    TORCH_COMPILE in ctx.qnames(d.decorator, scopes[-1]) for d in node.decorators
                ):
                    self.compiled.add(id(node))
                frames.append((node, scopes[-1]))
                owners.append(node)
                scopes.append(ctx.scopes.get(node, scopes[-1]))
            elif type(node) is cst.ClassDef:
                not_refs.add(id(node.name))
                scopes.append(ctx.scopes.get(node, scopes[-1]))
            elif type(node) is cst.Lambda:
                frames.append((node, scopes[-1]))
                owners.append(node)
            elif type(node) is cst.Arg and node.keyword is not None:
                not_refs.add(id(node.keyword))
            return True

        def on_leave(node: cst.CSTNode) -> None:
            while owners and owners[-1] is node:
                owners.pop()
                frames.pop()
            if type(node) in (cst.FunctionDef, cst.ClassDef):
                scopes.pop()

        walk(ctx.module, SimpleNamespace(on_visit=on_visit, on_leave=on_leave), TRIVIA)

    def _on_call(self, call: cst.Call, scope: Scope, frames: tuple, kinds: dict[int, str]) -> None:
        """Record a step; mark the function ``torch.compile(f)`` compiles and the one
        ``xmp.spawn(f)``/``torch_xla.launch(f)`` runs (once in each process: a call of it)."""
        func = call.func
        names = self.ctx.qnames(call, scope)
        first = find_arg(call, None, 0)
        if names & LAUNCHERS:
            target = find_arg(call, "fn", 0)
            if target is not None:
                kinds[id(target.value)] = "call"
            return
        if TORCH_COMPILE in names:
            target = find_arg(call, "model", 0)
            if target is not None:
                kinds[id(target.value)] = "compile"
            return
        steppers: set[str | None] = set()
        if OPTIMIZER_STEP in names:
            steppers.add(_last_name(first.value) if first is not None else None)
        elif type(func) is cst.Attribute and func.attr.value == "step":
            steppers.add(_last_name(func.value))
            if first is not None:
                steppers.add(_last_name(first.value))
        for name in {n for n in steppers if n is not None}:
            self.steps.setdefault(name, []).append(frames)

    def executions(self, frames: tuple, seen: frozenset[int] = frozenset()) -> int | None:
        """How many times code surrounded by ``frames`` runs at most, as far as this file
        shows: the product of the loops' :func:`literal_iterations` up to the enclosing
        function, times the sum of that over the function's calls. 0 inside a function that
        only runs through ``torch.compile``. None when not fixed: a loop that is not counted,
        a function read other than by a call (a callback), or never called here, a lambda,
        recursion."""
        total = 1
        for node, scope in reversed(frames):
            if type(node) is cst.Lambda:
                return None
            if type(node) is not cst.FunctionDef:
                count = literal_iterations(self.ctx, node, scope)
                if count is None:
                    return None
                total *= count
                continue
            if id(node) in self.compiled:
                return 0
            method = id(node) in self.methods
            refs = [
                (kind, where)
                for kind, where, attribute in self.refs.get(node.name.value, ())
                if attribute == method
            ]
            eager = [(kind, where) for kind, where in refs if kind != "compile"]
            if refs and not eager:
                return 0
            if not eager or id(node) in seen or any(kind != "call" for kind, _ in eager):
                return None
            calls = 0
            for _, where in eager:
                count = self.executions(where, seen | {id(node)})
                if count is None:
                    return None
                calls += count
            return total * calls
        return total


class AdamScalarRecompile(Rule):
    code = "XLA204"
    name = "adam-scalar-recompile"
    summary = (
        "Adam/AdamW without capturable=True: the step graph compiles once more when the host-side "
        "bias correction rounds to 1.0."
    )
    message = (
        "`{optimizer}` without `capturable=True` compiles the training step once more {when}: its bias "
        "correction `(1 - beta2**step) ** 0.5` is a Python float, which torch_xla bakes into the graph as a "
        "constant once it rounds to 1.0; pass `capturable=True`{foreach} to keep it on the device, or accept "
        "the one extra compilation"
    )
    severity = Severity.WARNING
    preview = True
    explanation = """\
## What it does
In code that runs in an XLA program (a module that imports torch_xla, or a module without
it that an XLA script imports: a trainer library), flags building `torch.optim.Adam`,
`torch.optim.AdamW`, `torch_xla.amp.syncfree.Adam` or `torch_xla.amp.syncfree.AdamW`
without `capturable=True`. The message names the optimizer step at which the extra
compilation happens when `betas` is known (a literal, a constant, an argparse default;
`(0.9, 0.999)` when not passed): computed for float32 parameters, or for the dtype the same
file casts the model whose `.parameters()` are optimized to (`model.to(torch.bfloat16)`,
`model.bfloat16()`, `.half()`, `.double()`) or builds it in (a literal `torch_dtype=`/`dtype=`
of `from_pretrained(...)`/`from_config(...)`, a module-level
`torch.set_default_dtype(torch.bfloat16)` before the model is built), or in float64 with
`foreach=True`. With `betas=(0.9, 0.95)`: step 325 (float32), 109 (bfloat16), 709 (`foreach=True`), as measured
on CPU; with the default 0.999 the same computation gives 16628, 5544 and 36314.

Not flagged:
- `capturable=True` (or a value the file does not fix: `capturable=cfg.capturable`);
  `fused=True` (another problem: torch 2.9.0 has no fused Adam for XLA tensors and raises);
  arguments passed through `**kwargs` the file does not fix (they may set `capturable`);
- an optimizer class chosen at run time (`getattr(torch.optim, name)(...)`, a variable that
  may hold another class, a subclass; a name assigned the class once,
  `optimizer_cls = torch.optim.AdamW`, is followed);
- a sync-free optimizer in a file that calls `.step(found_inf=...)` or
  `xm.optimizer_step(opt, optimizer_args={"found_inf": ...})` (that update keeps its step
  count on the device);
- code under `if torch.cuda.is_available():` or another platform's branch; test programs,
  which do not run thousands of steps; a `beta2` of 0 (the constant is there from the first step);
- training that never reaches the predicted step, as the same file shows it: every `.step()`
  on the name the optimizer is assigned to (`opt.step()`, `self.opt.step()`,
  `xm.optimizer_step(opt)`, `scaler.step(opt)`) runs fewer times in all than that step:
  outside any loop, or only in loops over a literal count (`range(100)`, `range(1, N)` of int
  literals or module constants, a literal list or tuple, also inside `tqdm(...)` or
  `enumerate(...)`; nested loops multiply), in functions called (or run by `xmp.spawn`) a
  known number of times. A loop over a DataLoader, `range(args.steps)`, `while True`, a step
  function handed to code the file does not show, or an optimizer whose steps the file does
  not show keeps the finding;
- a step inside a function given to `torch.compile(...)` (or decorated with it): torch 2.9.0
  `torch/optim/optimizer.py` `_get_value` returns the step tensor itself while dynamo traces,
  not `.item()`, so the correction is a tensor, not a Python float (measured with the
  `openxla` backend on CPU, `betas=(0.9, 0.5)`: no compilation after the first step, where
  the eager step compiles once more at step 25). `torch_xla.compile` does not trace with
  dynamo: its steps are flagged.

## Why is this bad
It works, but costs one more compilation of the whole training step, at a step far into
the run where nobody looks for one. Read in torch 2.9.0 `torch/optim/adam.py`
(`Adam._init_group`, `_single_tensor_adam`): without `capturable` (or `fused`) the step
count `state["step"]` is a CPU tensor ("deliberately host `step` on CPU"); each step reads it
with `.item()` and computes `bias_correction2_sqrt = (1 - beta2**step) ** 0.5` as a Python
float, then `exp_avg_sq.sqrt() / bias_correction2_sqrt`. `torch/optim/optimizer.py`
`_default_to_fused_or_foreach` picks this single-tensor path by default for XLA tensors: it
only turns `foreach` on for "cuda", "xpu", "mtia" and the privateuse1 backend
("privateuseone"; XLA tensors have device type "xla"). torch_xla's `div` converts the
Python number to the tensor's dtype (`UnwrapNumber` in `torch_xla/csrc/torch_util.cpp`) and
a 0-dim value that is 0 or ±1 becomes a constant in the graph (`IsSpecialScalar` in
`XLATensor::GetIrValueForTensor`, `torch_xla/csrc/tensor.cpp`); any other value is device
data, a graph input (C++ sources of the v2.9.0 tag of pytorch/xla, not installed with the
wheel). Once the rounded correction is exactly 1.0 the graph differs, compiles once, and
stays the same for the rest of the run. Measured with torch_xla 2.9.0 on CPU,
`betas=(0.9, 0.95)`: one extra compilation at step 325 for `torch.optim.Adam`,
`torch.optim.AdamW` and `syncfree.AdamW().step()`; at 709 with `foreach=True`; at 109 with
bfloat16 parameters; none with `capturable=True` or `syncfree.AdamW().step(found_inf=...)`.
`XLA_NO_SPECIAL_SCALARS=1` does not remove it (measured): the 1.0 is then a graph input,
but the step-325 graph has one input fewer (15 instead of 16), the value sharing its device
buffer with another 1.0 input of the step.

## Example
```python
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95))
```

## Use instead
```python
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), capturable=True)
```
`capturable=True` keeps the step count on the device and computes the correction there
(the single-tensor path accepts XLA devices: `_get_capturable_supported_devices` lists
"xla"). Do not combine it with `foreach=True`: the multi-tensor path asks for
`_get_capturable_supported_devices(supports_xla=False)` and raises an `AssertionError` on
XLA. Or accept the one compilation: it happens once per run.

## References
- https://docs.pytorch.org/docs/stable/generated/torch.optim.AdamW.html (`capturable`)
- torch 2.9.0 `torch/optim/adam.py`, `torch/optim/optimizer.py`; torch_xla 2.9.0 `torch_xla/amp/syncfree/adamw.py`
- pytorch/xla v2.9.0 `torch_xla/csrc/tensor.cpp` (`GetIrValueForTensor`), `torch_xla/csrc/torch_util.cpp` (`UnwrapNumber`)
"""
    valid = (
        Valid(
            "import torch\nimport torch_xla\n"
            "opt = torch.optim.AdamW(model.parameters(), betas=(0.9, 0.95), capturable=True)\n"
        ),
        Valid("import torch\nopt = torch.optim.AdamW(model.parameters(), betas=(0.9, 0.95))\n"),
        # Another platform's branch, options the file does not fix, a class chosen at run time.
        Valid(
            "import torch\nimport torch_xla\n"
            "if torch.cuda.is_available():\n"
            "    opt = torch.optim.AdamW(model.parameters(), fused=True)\n"
            "else:\n"
            "    opt = torch.optim.AdamW(model.parameters(), capturable=True)\n"
            "opt2 = torch.optim.Adam(model.parameters(), **optimizer_kwargs)\n"
            "opt3 = torch.optim.AdamW(model.parameters(), capturable=config.capturable)\n"
            "opt4 = getattr(torch.optim, config.optimizer)(model.parameters(), lr=1e-3)\n"
        ),
        # The sync-free update with found_inf keeps its step count on the device.
        Valid(
            "import torch_xla\nfrom torch_xla.amp import syncfree\n"
            "optimizer = syncfree.AdamW(model.parameters(), lr=1e-4)\n"
            "def train_step(x, found_inf):\n"
            "    model(x).sum().backward()\n"
            "    optimizer.step(found_inf=found_inf)\n"
        ),
        Valid(
            "import torch_xla\nfrom mylib.optim import AdamW\n"
            "opt = AdamW(model.parameters(), betas=(0.9, 0.95))\n"
        ),
        # HeegyuKim/torch-xla-SPMD: training that never reaches step 16628: one step, loops
        # over literal short ranges, a one-element list in the function xmp.spawn runs.
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\nimport torch.optim as optim\n"
            "optimizer = optim.AdamW(model.parameters())\n"
            "loss.backward()\noptimizer.step()\nxm.mark_step()\n"
        ),
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\nfrom tqdm import tqdm\n"
            "optimizer = torch.optim.AdamW(model.parameters())\n"
            "for i in tqdm(range(100)):\n    optimizer.step()\n    xm.mark_step()\n"
            "def train():\n    for epoch in range(10):\n        for i in [2048]:\n"
            "            optimizer.step()\ntrain()\n"
        ),
        Valid(
            "import torch\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def main(index):\n    optim = torch.optim.Adam(model.parameters(), lr=0.0001)\n"
            "    for i in [2048]:  # [128, 256, 512, 1024, 2048]:\n        optim.step()\n"
            "xmp.spawn(main)\n"
        ),
        # A step traced by dynamo (torch.compile): `_get_value` returns the step tensor, no Python float.
        Valid(
            "import torch\nimport torch_xla\n"
            "optimizer = torch.optim.AdamW(model.parameters())\n"
            "def train_model(model, input_ids, optimizer):\n"
            "    model(input_ids).loss.backward()\n    optimizer.step()\n"
            "compiled_step = torch.compile(train_model, backend='openxla')\n"
            "for batch in loader:\n    compiled_step(model, batch, optimizer)\n"
        ),
    )
    invalid = (
        # diffusers examples/research_projects/pytorch_xla/training/text_to_image/train_text_to_image_xla.py
        Invalid(
            "import torch\nimport torch_xla\n"
            "def setup_optimizer(unet, args):\n"
            "    optimizer_cls = torch.optim.AdamW\n"
            "    return optimizer_cls(unet.parameters(), lr=args.learning_rate, foreach=True)\n",
            (5,),
        ),
        Invalid(
            "import torch\nimport torch_xla\n"
            "optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95))\n",
            (3,),
        ),
        Invalid(
            "import torch_xla\nfrom torch_xla.amp import syncfree\nfrom torch.optim import Adam\n"
            "model = Net().to(torch_xla.device()).bfloat16()\n"
            "a = syncfree.AdamW(model.parameters(), lr=1e-4)\n"
            "b = Adam(model.parameters(), capturable=False)\n"
            "for x in loader:\n    a.step()\n",
            (5, 6),
        ),
        Invalid(
            "import torch\nimport torch_xla\nBETAS = (0.9, 0.98)\n"
            "def build(model):\n"
            "    return torch.optim.AdamW(model.parameters(), 1e-3, BETAS, foreach=True)\n",
            (5,),
        ),
        # Loops whose count the file does not fix, or fixes beyond the step.
        Invalid(
            "import argparse\nimport torch\nimport torch_xla\n"
            "parser = argparse.ArgumentParser()\nparser.add_argument('--steps', type=int, default=100)\n"
            "args = parser.parse_args()\n"
            "opt = torch.optim.AdamW(model.parameters())\n"
            "for step in range(args.steps):\n    opt.step()\n",
            (7,),
        ),
        Invalid(
            "import torch\nimport torch_xla\n"
            "opt = torch.optim.AdamW(model.parameters())\n"
            "def train_step(batch):\n    model(batch).backward()\n    opt.step()\n"
            "for batch in loader:\n    train_step(batch)\n"
            "for i in range(20000):\n    opt.step()\n",
            (3,),
        ),
        # A Gemma script: the model is loaded in bfloat16, whose correction reaches 1.0 at step 5544.
        Invalid(
            "import torch\nimport torch_xla\nfrom transformers import AutoModelForCausalLM\n"
            "model = AutoModelForCausalLM.from_pretrained('google/gemma-2b', torch_dtype=torch.bfloat16)\n"
            "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)\n"
            "for epoch in range(10):\n    for step in range(1000):\n        optimizer.step()\n",
            (5,),
        ),
    )

    def _optimizer_class(self, node: cst.Call) -> frozenset[str]:
        """The Adam classes ``node`` builds: called by name (through imports), or through a name
        assigned the class once before the call (``optimizer_cls = torch.optim.AdamW`` then
        ``optimizer_cls(...)``, diffusers' training scripts)."""
        names = self.ctx.qnames(node) & ADAMS
        if names or type(node.func) is not cst.Name:
            return names
        found = definition(self.ctx, node.func)
        if found is None or not isinstance(found[0], (cst.Name, cst.Attribute)):
            return frozenset()
        return self.ctx.qnames(found[0], found[1].scope) & ADAMS

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.in_xla_program:
            return
        names = self._optimizer_class(node)
        if not names:
            return
        spread: dict = {}
        for arg in node.args:
            if arg.star == "**":
                value = value_of(self.ctx, arg.value)
                if not isinstance(value, Known) or not isinstance(value.value, dict):
                    return  # `**kwargs` the file does not fix: they may set capturable
                spread.update(value.value)
        capturable = self._option(node, "capturable", spread=spread)
        if capturable is _UNKNOWN or (capturable is not _MISSING and capturable):
            return
        fused = self._option(node, "fused", spread=spread)
        if fused is not _MISSING and fused is not _UNKNOWN and fused:
            return  # torch 2.9.0 raises for fused Adam on XLA tensors (`_device_dtype_check_for_fused`)
        if names & SYNCFREE_ADAMS and self.ctx.memo(
            _passes_found_inf, lambda: _passes_found_inf(self.ctx)
        ):
            return
        foreach = self._option(node, "foreach", spread=spread)
        foreach = foreach is not _MISSING and foreach is not _UNKNOWN and bool(foreach)
        dtype = "float64" if foreach else (self._param_dtype(node) or "float32")
        betas = self._option(node, "betas", 2, spread)
        beta2 = (
            DEFAULT_BETA2
            if betas is _MISSING
            else (betas[1] if isinstance(betas, (tuple, list)) and len(betas) == 2 else None)
        )
        runs = self._steps_run(node)
        if beta2 is None:
            if runs is not None and runs <= 1:
                return  # stepped once at most, or only under torch.compile
            when = "at an optimizer step that depends on beta2 (not known here)"
        else:
            step = recompile_step(beta2, dtype)
            if step is None or step == 1:
                return  # torch rejects the value, or the constant is in the graph from the first step
            if runs is not None and runs < step:
                return  # the training never reaches that step
            reason = "`foreach=True`" if foreach else f"{dtype} parameters"
            when = f"at optimizer step {step} (beta2={beta2!r}, {reason})"
        note = (
            " without `foreach=True` (torch 2.9's multi-tensor Adam rejects it on XLA)"
            if foreach
            else ""
        )
        optimizer = min(names, key=lambda n: (len(n), n))
        self.report(
            node,
            self.message.format(optimizer=optimizer, when=when, foreach=note),
            requires=[(Fact.TEST, False)],
        )

    def _steps_run(self, node: cst.Call) -> int | None:
        """How many optimizer steps the file runs at most on the optimizer ``node`` builds: the
        sum, over every ``.step()`` on the name or attribute it is assigned to, of
        :meth:`OptimizerSteps.executions` (0 for one inside a ``torch.compile``d function:
        torch 2.9.0 ``torch/optim/optimizer.py`` ``_get_value`` returns the step tensor itself,
        not ``.item()``, while compiling, so there is no Python-float correction). None when not
        known: the result is not assigned to a name, the file has no step on that name, or some
        step runs an unknown number of times."""
        parent = self.ctx.parent()
        if type(parent) is cst.Assign and parent.value is node:
            targets = [t.target for t in parent.targets]
        elif type(parent) is cst.AnnAssign and parent.value is node:
            targets = [parent.target]
        else:
            return None
        index = self.ctx.memo(OptimizerSteps, lambda: OptimizerSteps(self.ctx))
        found = [
            frames for target in targets for frames in index.steps.get(_last_name(target) or "", ())
        ]
        if not found:
            return None
        total = 0
        for frames in found:
            count = index.executions(frames)
            if count is None:
                return None
            total += count
        return total

    def _option(
        self, call: cst.Call, keyword: str, position: int | None = None, spread: dict | None = None
    ):
        """The value of an optimizer argument: :data:`_MISSING` when not passed, :data:`_UNKNOWN`
        when the file does not fix it. ``betas=(b1, 0.95)`` with ``b1`` unknown is ``(None, 0.95)``."""
        arg = find_arg(call, keyword, position)
        if arg is None:
            if spread and keyword in spread:
                return spread[keyword]
            if position is not None and any(a.star == "*" for a in call.args):
                return _UNKNOWN
            return _MISSING
        value = value_of(self.ctx, arg.value)
        if isinstance(value, Known):
            return value.value
        if isinstance(arg.value, (cst.Tuple, cst.List)) and len(arg.value.elements) == 2:
            second = value_of(self.ctx, arg.value.elements[1].value)
            if isinstance(second, Known):
                return (None, second.value)
        return _UNKNOWN

    def _param_dtype(self, call: cst.Call) -> str | None:
        """The dtype of the optimized model's parameters: the one the file casts it to, when it
        casts it to exactly one, else the one it is built in (:func:`_built_dtypes`). The model
        is what ``.parameters()``/``.named_parameters()`` is called on in the ``params``
        argument (or in the one assignment of a name passed there)."""
        arg = find_arg(call, "params", 0)
        if arg is None:
            return None
        expr = arg.value
        if isinstance(expr, cst.Name):
            found = definition(self.ctx, expr)
            if found is not None:
                expr = found[0]
        casts = self.ctx.memo(_module_casts, lambda: _module_casts(self.ctx))
        for inner in calls_in(expr):
            func = inner.func
            if isinstance(func, cst.Attribute) and func.attr.value in (
                "parameters",
                "named_parameters",
            ):
                model = _last_name(func.value)
                if model is None:
                    return None
                dtypes = casts.get(model, set())
                if dtypes:
                    return next(iter(dtypes)) if len(dtypes) == 1 else None
                return self.ctx.memo(_built_dtypes, lambda: _built_dtypes(self.ctx)).get(model)
        return None
