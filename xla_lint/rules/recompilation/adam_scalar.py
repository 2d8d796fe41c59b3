"""XLA204: torch's Adam/AdamW recompiling once, late, when the bias correction becomes 1.0."""

from __future__ import annotations

from types import SimpleNamespace

import libcst as cst

from ...analysis import apis
from ...analysis.context import FileContext, find_arg, literal_string
from ...analysis.loops import OPTIMIZER_STEP, _last_name
from ...analysis.names import Scope
from ...analysis.values import Known, Site, definition, value_of
from ...analysis.walk import TRIVIA, calls_in, iter_nodes, walk
from ...diagnostics import Severity
from ...program.facts import Fact
from ...rule import Invalid, Rule, Valid
from ...scalars import recompile_step
from .common import _CALLS

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
