"""Loops and steps, as the loop rules and the initialisation rules ask: which loops are training loops
(their body runs a step: ``loss.backward()``, an optimizer step, ``torch_xla.step()``, a sync, a
``torch_xla.compile``d call), directly or through a function of the module (:class:`LoopFacts`),
what kind of loop each is (:class:`LoopKind`: training, evaluation, setup) and what ends a step
there (:class:`Steps`; a device loader's batches: :mod:`xla_lint.analysis.loaders`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import libcst as cst

from . import apis
from .context import FileContext, find_arg
from .holds import name_words
from .loaders import LOADER, RETURN, LoaderFlow, parse_param
from .names import Scope
from .names import last_name as _last_name
from .walk import TRIVIA, calls_in, walk

SYNC = frozenset({"torch_xla.sync", f"{apis.XM}.mark_step"})


XLA_STEP = "torch_xla.step"


XLA_COMPILE = "torch_xla.compile"


# A function compiled by these runs its own graph when called (dynamo with the openxla backend,
# or torch_xla.compile, which syncs before and after: torch_xla/torch_xla.py): a step boundary.
COMPILERS = frozenset({XLA_COMPILE, "torch.compile"})


OPTIMIZER_STEP = f"{apis.XM}.optimizer_step"


# Keys of LoopFacts.step_records (xla_lint/analysis/loaders.py describes them).
RUN_SYNC = "run:sync"
RUN_BATCH = "run:batch"
BODY = "body:"


ADD_STEP_CLOSURE = f"{apis.XM}.add_step_closure"


EAGER_MODE = frozenset(
    {"torch_xla.experimental.eager_mode", "torch_xla.experimental.eager.eager_mode"}
)


ITERABLE_DATASET = frozenset(
    {
        "torch.utils.data.IterableDataset",
        "torch.utils.data.dataset.IterableDataset",
        "torch.utils.data.datapipes.datapipe.IterDataPipe",
    }
)


_Assignment = cst.Assign | cst.AugAssign | cst.AnnAssign


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


class LoopKind(StrEnum):
    """What a loop does on each iteration (:meth:`LoopFacts.kind`)."""

    TRAINING = "training"  # runs backward() or an optimizer step
    EVALUATION = "evaluation"  # runs a model's forward without either (evaluation, inference)
    SETUP = "setup"  # neither: building, loading, logging, data preparation


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
    compiled: bool = (
        False  # calls a function compiled with torch_xla.compile (one whole step per call)
    )

    def merge(self, other: Steps) -> None:
        self.backward |= other.backward
        self.optimizer |= other.optimizer
        self.boundary |= other.boundary
        self.xla_step |= other.xla_step
        self.compiled |= other.compiled

    @property
    def trains(self) -> bool:
        """The code trains a model: it runs ``backward()``, an optimizer step, or a step function
        compiled with ``torch_xla.compile`` (directly or through a same-module function). A step
        boundary alone (``xm.mark_step()`` in a latency benchmark or a feature-extraction loop)
        is not training: the host copy there is often the point (a completion barrier, the output)."""
        return self.backward or self.optimizer or self.compiled


class LoopFacts:
    """Per-module facts the loop rules share, from one pass over the module's nodes
    (:attr:`FileContext.flat`; computed once per file).

    ``functions``: same-module function name -> :class:`Steps` of its body outside its own
    loops (a function that *is* one training step); ``flow``: the module's
    :class:`~xla_lint.analysis.loaders.LoaderFlow`; ``loader_names``: names assigned a torch_xla
    device loader made here (``MpDeviceLoader``, ``ParallelLoader``, ``.per_device_loader()``),
    through ``iter()``/``islice``/``or``/...; ``has_device_loader``: the module makes one;
    ``consumes``: the module's functions that take batches (``next(it)``) from a parameter.

    The pass records where every call and assignment sits: its function (whose body it is
    directly in) and the chain of loops around it up to the nearest function, lambda or
    class, each with whether it is in that loop's body (a ``while`` loop's test counts as
    body) or elsewhere in the loop (a ``for`` loop's iterable, an ``else`` branch). Calls are
    classified after the pass, when every name the classification reads is known.
    """

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.flow = LoaderFlow.of(ctx)
        self.functions: dict[str, Steps] = {}
        # Same-module function name -> the parameters whose batches it takes (`next(it)`), by
        # the position a caller fills and by name: a device loader passed there ends a step.
        self.consumes: dict[str, frozenset[str]] = {}
        self.loader_names: set[str] = self.flow.loader_names
        self.has_device_loader = self.flow.makes_loader
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
        # Every loop with the scope its iterable is read in; every function with the calls in its
        # body (its loops' too, not its nested functions'): for step_records.
        self._every_loop: list[tuple[cst.For | cst.While, Scope]] = []
        self._body_calls: list[tuple[cst.FunctionDef, list[tuple[cst.Call, Scope]]]] = []
        self._classified: dict[tuple[int, bool], Steps | None] = {}
        self._scan_module()

    # -- the pass -------------------------------------------------------------------
    def _scan_module(self) -> None:
        ctx = self.ctx
        facts = self
        functions: list[tuple[cst.FunctionDef, Scope]] = []
        function_calls: dict[int, list[tuple[cst.Call, Scope]]] = {}
        body_calls: dict[int, list[tuple[cst.Call, Scope]]] = {}
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
                if function is not None:
                    body_calls[id(function)].append(record)
                visit_call(node)
            elif type(node) is cst.For or type(node) is cst.While:
                for loop, in_body in where(i)[1]:
                    if in_body:
                        inner[id(loop)].append(node)
                key = id(node)
                full[key], own[key], inner[key], assigns[key] = [], [], [], []
                self._every_loop.append((node, scopes[-1]))
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
                body_calls[id(node)] = []
                self._body_calls.append((node, body_calls[id(node)]))
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
                steps.xla_step = steps.compiled = (
                    True  # `@torch_xla.compile`: each call is one step
                )
                self.xla_compiled_names.add(func.name.value)
            for call, call_scope in function_calls[id(func)]:
                found = self._classify(call, call_scope, False)
                if found is not None:
                    steps.merge(found)
            previous = self.functions.get(func.name.value)
            if previous is not None:
                steps.merge(previous)
            self.functions[func.name.value] = steps
            consumed = self.flow.consumed(func)
            if consumed:
                self.consumes[func.name.value] = (
                    self.consumes.get(func.name.value, frozenset()) | consumed
                )

    def step_records(self) -> dict[str, list[str]]:
        """What the module's functions and step loops call, for the program model to tell which
        functions run inside one step of a loop (keys described in
        :mod:`xla_lint.analysis.loaders`): ``run:sync`` for a loop whose body ends a step
        (:attr:`Steps.boundary`), ``run:batch`` for a loop over a device loader made here,
        ``run:batch=K`` for a loop over a value other code decides (``K`` a parameter or return
        key), ``body:F`` for the calls of function ``F`` (its loops' included). Each maps to the
        targets of those calls (:meth:`LoaderFlow.targets`). A device loader syncs before each
        batch (torch_xla 2.9.0 ``torch_xla/distributed/parallel_loader.py``, ``PerDeviceLoader.next``)."""
        flow = self.flow
        out: dict[str, set[str]] = {}

        def targets(calls: list[tuple[cst.Call, Scope]]) -> set[str]:
            found: set[str] = set()
            for call, scope in calls:
                found |= flow.targets(call, scope)
            return found

        for loop, scope in self._every_loop:
            conditions: list[str] = []
            if self.loop(loop)[1].boundary:
                conditions.append(RUN_SYNC)
            if type(loop) is cst.For:
                sources = flow.sources(loop.iter, scope)
                if LOADER in sources:
                    conditions.append(RUN_BATCH)
                else:
                    conditions.extend(
                        f"{RUN_BATCH}={k}"
                        for k in sorted(sources)
                        if k.startswith(RETURN) or parse_param(k) is not None
                    )
            if not conditions:
                continue
            found = targets(self.calls(loop))
            if found:
                for condition in conditions:
                    out.setdefault(condition, set()).update(found)
        for function, calls in self._body_calls:
            key = flow.key_of(function)
            found = targets(calls)
            if key is not None and found:
                out.setdefault(BODY + key, set()).update(found)
        return {k: sorted(v) for k, v in sorted(out.items())}

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
        """``MpDeviceLoader(...)``, ``ParallelLoader(...)``, ``x.per_device_loader(...)``, or a
        value that may be one of them made in this module: a name or attribute assigned one,
        ``a or b``/``x if c else y`` with an operand that may be, such a value passed through
        ``enumerate``/``iter``/``islice``/``zip``/..., a call of a function of the module that
        returns one (:meth:`LoaderFlow.is_loader`)."""
        return self.flow.is_loader(node, scope)

    def classify(self, call: cst.Call, scope: Scope, use_functions: bool = True) -> Steps | None:
        """What one call does to the step structure, or None when nothing."""
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "backward":
            # `loss.backward()`; `fabric.backward(loss)`, `accelerator.backward(loss)`: the
            # tensor is the argument, the receiver an object of the library
            target = call.args[0].value if call.args and not call.args[0].keyword else func.value
            root = root_name(target)
            roots = {root} if root else _names_in(target)
            return Steps(backward=True, backward_roots=roots)
        names = self.flow.qnames(call, scope)
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
                xla = self.runs_xla_compiled(call, scope)
                return Steps(boundary=True, xla_step=xla, compiled=xla)
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
                boundary = s.boundary or self._passes_loader(call, scope, name)
                return Steps(s.backward, s.optimizer, boundary, s.xla_step, compiled=s.compiled)
        return None

    def _passes_loader(self, call: cst.Call, scope: Scope, name: str | None) -> bool:
        """The call gives a device loader (or its iterator) to a parameter whose batches the
        module's function ``name`` takes (``self._collect(loader_iter, n)`` with ``next(it)``
        in ``_collect``): taking each batch ends a step."""
        consumed = self.consumes.get(name or "")
        if not consumed:
            return False
        position = 0
        for arg in call.args:
            if arg.star:
                return False
            if arg.keyword is not None:
                slot = arg.keyword.value
            else:
                slot = str(position)
                position += 1
            if slot in consumed and self.is_device_loader(arg.value, scope):
                return True
        return False

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

    def kind(self, node: cst.For | cst.While) -> LoopKind:
        """:class:`LoopKind` of a loop, from its body (inner loops included, calls of the
        module's functions counted as what those do): ``TRAINING`` when it runs ``backward()`` or
        an optimizer step (``optimizer.step()``, ``scaler.step(opt)``, ``xm.optimizer_step``);
        ``EVALUATION`` when it runs a forward without them: a call of a model (a name the module
        calls ``.eval()``/``.train()``/``.parameters()``... on, or named like one: ``model``,
        ``self.net``, ``text_encoder``; or its method, ``model.generate(...)``) or of a function
        compiled with ``torch_xla.compile``; ``SETUP`` otherwise."""
        _, full = self.loop(node)
        if full.backward or full.optimizer:
            return LoopKind.TRAINING
        models = model_names(self.ctx)
        for call, scope in self.calls(node):
            func = call.func
            if type(func) is not cst.Name and type(func) is not cst.Attribute:
                continue
            if self.runs_xla_compiled(call, scope):
                return LoopKind.EVALUATION
            if self.ctx.qnames(func, scope):
                continue  # a module's function (torch.cat), not a model the program built
            names = [_last_name(func)]
            if type(func) is cst.Attribute:
                names.append(_last_name(func.value))
            if any(n and n != "self" and (n in models or model_word(n)) for n in names):
                return LoopKind.EVALUATION
        return LoopKind.SETUP


@dataclass(frozen=True)
class LoopSpan:
    """One loop of a module: its lines (``first``: the ``for``/``while`` line, ``last``: the
    last line of its body or ``else``, 1-based, inclusive) and its :class:`LoopKind`."""

    first: int
    last: int
    kind: LoopKind

    def holds(self, line: int) -> bool:
        """Whether ``line`` is one of the loop's lines."""
        return self.first <= line <= self.last


def loop_spans(ctx: FileContext) -> tuple[LoopSpan, ...]:
    """Every ``for``/``while`` loop of ``ctx``'s module with its lines and
    :meth:`LoopFacts.kind` (the facts shared with the loop rules, computed once per file),
    outer loops before the loops nested in them: what ``xla-lint trace`` places each runtime
    event by (the innermost loop holding its line is the phase it ran in)."""
    from .positions import module_positions

    facts: LoopFacts = ctx.memo(LoopFacts, lambda: LoopFacts(ctx))
    positions = module_positions(ctx.module)
    spans = [
        LoopSpan(where.start.line, where.end.line, facts.kind(node))
        for node, where in positions.items()
        if type(node) is cst.For or type(node) is cst.While
    ]
    return tuple(sorted(spans, key=lambda s: (s.first, -s.last)))


def innermost_loop(spans: tuple[LoopSpan, ...], line: int) -> LoopSpan | None:
    """The innermost of ``spans`` (:func:`loop_spans`) that holds ``line``, or None."""
    found = None
    for span in spans:
        if span.holds(line) and (
            found is None or span.last - span.first <= found.last - found.first
        ):
            found = span
    return found


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


_CALLS = frozenset({cst.Call})


@dataclass
class StepClosures:
    """The functions this module gives to ``xm.add_step_closure``: what runs after a step.

    torch_xla 2.9.0 runs a step closure inside ``torch_xla.sync()`` once the step's graph has
    been launched on every replica (``torch_xla/torch_xla.py`` ``sync``, then
    ``xla_model._run_step_closures``); its tensors are that graph's outputs, so reading them
    there (``.item()``, ``.cpu()``, ``print``), on one replica or all, copies values and runs no
    graph of its own. ``names``: functions and methods given by name (``_report``,
    ``self._train_update``: ``_train_update``); ``lambdas``: lambdas given directly. A closure
    imported from another module, or built by a factory, is not recognised.
    """

    names: frozenset[str] = frozenset()
    lambdas: frozenset[int] = frozenset()  # id() of the Lambda nodes

    @classmethod
    def of(cls, ctx: FileContext) -> StepClosures:
        """The closures of ``ctx``'s module, computed once per file."""
        return ctx.memo("xla_lint.analysis.loops.StepClosures", lambda: cls._find(ctx))

    @classmethod
    def _find(cls, ctx: FileContext) -> StepClosures:
        names: set[str] = set()
        lambdas: set[int] = set()
        flat = ctx.flat  # the shared node list, not another walk of the module
        for i in flat.of_types(_CALLS):
            call = flat.nodes[i]
            assert isinstance(call, cst.Call)
            if ADD_STEP_CLOSURE not in ctx.qnames(call.func):
                continue
            arg = find_arg(call, "closure", 0)
            value = arg.value if arg is not None else None
            if isinstance(value, cst.Name):
                names.add(value.value)
            elif isinstance(value, cst.Attribute):
                names.add(value.attr.value)
            elif isinstance(value, cst.Lambda):
                lambdas.add(id(value))
        return cls(frozenset(names), frozenset(lambdas))


def in_step_closure(ctx: FileContext) -> bool:
    """True when the node being visited runs in a step closure of its module (inside a function
    or lambda the module gives to ``xm.add_step_closure``; see :class:`StepClosures`)."""
    closures = StepClosures.of(ctx)
    if not closures.names and not closures.lambdas:
        return False
    for node in ctx.stack:
        if isinstance(node, cst.FunctionDef) and node.name.value in closures.names:
            return True
        if isinstance(node, cst.Lambda) and id(node) in closures.lambdas:
            return True
    return False


def model_word(name: str) -> bool:
    """``name`` starts or ends with a word of :data:`MODEL_WORDS`: ``model``, ``text_encoder``,
    ``model_fn``; not ``get_module_size``."""
    words = name_words(name)
    return bool(words) and (words[0] in MODEL_WORDS or words[-1] in MODEL_WORDS)


def model_names(ctx: FileContext) -> frozenset[str]:
    """Names (last names: ``model`` for ``self.model``) the module calls a method only a
    ``torch.nn.Module`` has on: ``model.eval()``, ``net.parameters()``, ``m.train()``
    (computed once per file)."""
    return ctx.memo("xla_lint.analysis.loops.model_names", lambda: _model_names(ctx))


def _model_names(ctx: FileContext) -> frozenset[str]:
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
