"""XLA016: gradients clipped before they are reduced across replicas."""

from __future__ import annotations

import math
from dataclasses import dataclass

import libcst as cst

from ...analysis import apis
from ...analysis.context import find_arg
from ...analysis.functions import Arms, Function, LocalFunctions, exclusive
from ...analysis.seeds import launch_calls
from ...analysis.values import Known, Site, definition, value_of
from ...diagnostics import Severity
from ...rule import Invalid, Rule, Valid
from .common import _LAUNCH, MULTIPROCESS, _is_one

CLIP_APIS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.clip_grad_norm",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_value_",
        "torch.nn.utils.clip_grads_with_norm_",
        "torch.nn.utils.clip_grad._clip_grads_with_norm_",
    }
)


REDUCE_GRADIENTS = f"{apis.XM}.reduce_gradients"


OPTIMIZER_STEP = f"{apis.XM}.optimizer_step"


# Names of +inf: a clip bounded by one changes nothing (see clips_nothing).
INFINITIES = frozenset(
    {
        "math.inf",
        "torch.inf",
        "numpy.inf",
        "numpy.Inf",
        "numpy.infty",
        "numpy.PINF",
        "numpy.Infinity",
    }
)


class ClipBeforeReduce(Rule):
    code = "XLA016"
    name = "clip-before-reduce"
    summary = "clip_grad_norm_ before xm.optimizer_step clips the local, un-reduced gradients."
    message = (
        "`{api}` before `xm.optimizer_step`{where} clips each replica's local gradients before "
        "they are reduced; call `xm.reduce_gradients(optimizer)`, clip, then `optimizer.step()`"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
In a multi-process program that is not SPMD (one process per device: `xmp.spawn`,
`torch_xla.launch`, `torchrun`), flags `torch.nn.utils.clip_grad_norm_` /
`clip_grad_value_` / `clip_grads_with_norm_` that runs before `xm.optimizer_step(...)`, in
the order a function runs its calls, unless `xm.reduce_gradients(...)` ran before the clip.
Calls of the file's own helpers count where they are called: a clip inside `self._clip()`
(a method of the same class, or of a base class the file defines) or `clip_gradients(model)` (a function of the module) that
the step calls before `xm.optimizer_step` is reported at the clip inside the helper, and an
`xm.optimizer_step` inside `self._step()` counts as the step. A helper called *after* the
optimizer step is not flagged, nor a clip and a step in different arms of one `if`
(`if xla: xm.optimizer_step(opt) else: clip; opt.step()`), which never run together. A clip bounded by infinity (`max_norm=float("inf")`,
`math.inf`, `torch.inf`, `np.inf`, keyword or second argument) only measures the norm and is
never flagged.

## Why is this bad
`xm.optimizer_step` (torch_xla 2.9.0 `torch_xla/core/xla_model.py`) is
`reduce_gradients(optimizer)` followed by `optimizer.step()`: the gradients are averaged
over the replicas *inside* it. Clipping before it clips each replica's local gradient,
whose norm is larger and different on every replica, so the average of the clipped
gradients is not the clipped average gradient: the effective update differs from
single-device training with the same global batch. `reduce_gradients` all-reduces only when
`runtime.world_size()` is above 1, that is with one process per device; in SPMD the one
program computes the global gradient and in single-device code there is nothing to reduce,
so neither is flagged, nor a file whose every launch runs one process (`xmp.spawn(fn,
nprocs=1)`, which `torch_xla/_internal/pjrt.py` `spawn` runs in the calling process on one
device, or `debug_single_process=True`). With an infinite bound, torch 2.9.0 `torch/nn/utils/clip_grad.py`
multiplies the gradients by `clamp(inf / (norm + 1e-6), max=1.0)`, which is 1.0
(`clip_grad_value_` clamps to `[-inf, inf]`): the gradients are unchanged, so measuring the
local norm that way before the step is harmless.

## Example
```python
class Trainer:
    def _clip(self):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)

    def train_step(self, loss):
        loss.backward()
        self._clip()
        xm.optimizer_step(self.opt)
```

## Use instead
```python
class Trainer:
    def _clip(self):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)

    def train_step(self, loss):
        loss.backward()
        xm.reduce_gradients(self.opt)
        self._clip()
        self.opt.step()
```

## References
- https://docs.pytorch.org/xla/master/learn/pytorch-on-xla-devices.html
- torch_xla 2.9.0 `torch_xla/core/xla_model.py` (`optimizer_step`, `reduce_gradients`),
  `torch_xla/runtime.py` (`world_size`)
- torch 2.9.0 `torch/nn/utils/clip_grad.py` (`clip_grad_norm_`, `_clip_grads_with_norm_`,
  `clip_grad_value_`)
"""
    valid = (
        Valid(
            _LAUNCH + "import torch\ndef _mp_fn(i):\n    xm.reduce_gradients(opt)\n"
            "    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)\n    opt.step()\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\n"
            "torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)\nxm.optimizer_step(opt)\n"
        ),
        Valid(
            _LAUNCH + "def _mp_fn(i):\n    model.clip_grad_norm_(1.0)\n    xm.optimizer_step(opt)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        # an infinite bound measures the norm and clips nothing
        Valid(
            _LAUNCH
            + "import math\nimport numpy as np\nimport torch\nfrom torch.nn.utils import clip_grad_norm_\n"
            "NO_CLIP = math.inf\n"
            "def _mp_fn(i):\n    loss.backward()\n"
            "    norm = torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm=float('inf'))\n"
            "    clip_grad_norm_(m.parameters(), float('Inf'))\n"
            "    clip_grad_norm_(m.parameters(), math.inf)\n"
            "    clip_grad_norm_(m.parameters(), torch.inf)\n"
            "    clip_grad_norm_(m.parameters(), max_norm=np.inf)\n"
            "    clip_grad_norm_(m.parameters(), NO_CLIP)\n"
            "    torch.nn.utils.clip_grad_value_(m.parameters(), clip_value=float('inf'))\n"
            "    xm.optimizer_step(opt)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        # the clip runs after the gradients are reduced, in the step or in the helper
        Valid(
            _LAUNCH + "import torch\n"
            "class Trainer:\n"
            "    def _clip(self):\n"
            "        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)\n"
            "    def _reduce_and_clip(self):\n"
            "        xm.reduce_gradients(self.opt)\n"
            "        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)\n"
            "    def step(self, loss):\n"
            "        loss.backward()\n"
            "        xm.reduce_gradients(self.opt)\n"
            "        self._clip()\n"
            "        self.opt.step()\n"
            "    def other_step(self, loss):\n"
            "        loss.backward()\n"
            "        self._reduce_and_clip()\n"
            "        self.opt.step()\n"
            "torch_xla.launch(lambda i: Trainer().step(loss))\n"
        ),
        # the clip and the step are in different arms of one if: they never run together
        Valid(
            _LAUNCH + "import torch\n"
            "def _mp_fn(i):\n"
            "    loss.backward()\n"
            "    if args.cpu:\n"
            "        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)\n"
            "        opt.step()\n"
            "    elif args.debug:\n"
            "        opt.step()\n"
            "    else:\n"
            "        xm.optimizer_step(opt)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        # one process: nothing to reduce, so the clip sees the whole gradient
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\n"
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def train(i):\n    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)\n"
            "    xm.optimizer_step(opt)\n"
            "xmp.spawn(train, nprocs=1)\n"
        ),
        # a helper called after the optimizer step clips the next step's gradients too late
        # to matter here; another object's method of the same name is not this class's
        Valid(
            _LAUNCH + "import torch\n"
            "def clip_all(model):\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "class Trainer:\n"
            "    def _clip(self):\n"
            "        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)\n"
            "    def step(self, loss):\n"
            "        loss.backward()\n"
            "        xm.optimizer_step(self.opt)\n"
            "        self._clip()\n"
            "        clip_all(self.model)\n"
            "class Runner:\n"
            "    def step(self, trainer, loss):\n"
            "        trainer._clip()\n"
            "        xm.optimizer_step(self.opt)\n"
            "torch_xla.launch(lambda i: Trainer().step(loss))\n"
        ),
    )
    invalid = (
        Invalid(
            _LAUNCH + "import torch\ndef _mp_fn(i):\n    loss.backward()\n"
            "    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)\n    xm.optimizer_step(opt)\n"
            "torch_xla.launch(_mp_fn)\n",
            (6,),
        ),
        Invalid(
            "from torch.nn.utils import clip_grad_value_\nfrom torch_xla.core import xla_model as xm\n"
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def train(i):\n    clip_grad_value_(params, 0.5)\n    xm.optimizer_step(opt, barrier=True)\n"
            "xmp.spawn(train)\n",
            (5,),
        ),
        # through a method of the same class, reported at the clip inside it; a finite bound
        # given as the second argument clips
        Invalid(
            _LAUNCH + "import torch\n"
            "class Trainer:\n"
            "    def _clip(self):\n"
            "        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)\n"
            "    def train_step(self, loss):\n"
            "        loss.backward()\n"
            "        self._clip()\n"
            "        xm.optimizer_step(self.opt)\n"
            "torch_xla.launch(lambda i: Trainer().train_step(loss))\n",
            (6,),
        ),
        # through a function of the module (and one it calls), and with the optimizer step
        # in a helper of its own
        Invalid(
            _LAUNCH + "import torch\n"
            "def _clip_value(model):\n"
            "    torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)\n"
            "def clip(model):\n"
            "    _clip_value(model)\n"
            "def step(opt):\n"
            "    xm.optimizer_step(opt)\n"
            "def _mp_fn(i):\n"
            "    loss.backward()\n"
            "    clip(model)\n"
            "    step(opt)\n"
            "torch_xla.launch(_mp_fn)\n",
            (5,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.imports_torch_xla:
            return  # no name here can be xm.optimizer_step
        names = self.ctx.qnames(node.func)
        if not names or not names & CLIP_APIS:
            return
        order = GradientOrder.of(self.ctx)
        found = order.unreduced.get(id(node))
        if found is None or order.single_process or clips_nothing(self.ctx, node, names):
            return
        api = sorted(names & CLIP_APIS)[0].rsplit(".", 1)[1]
        self.report(
            node, self.message.format(api=api, where=found.describe()), requires=MULTIPROCESS
        )


def clips_nothing(ctx, call: cst.Call, names: frozenset[str]) -> bool:
    """True when the clip's bound is ``+inf`` (``max_norm=float("inf")``, ``math.inf``,
    ``torch.inf``, ``np.inf``, a name assigned one; keyword or second positional argument):
    torch 2.9.0 ``torch/nn/utils/clip_grad.py`` then multiplies the gradients by
    ``clamp(inf / (norm + 1e-6), max=1.0)`` = 1.0 (``clip_grad_norm_``, ``clip_grads_with_norm_``)
    or clamps them to ``[-inf, inf]`` (``clip_grad_value_``): it measures and changes nothing."""
    keyword = "clip_value" if any(n.endswith("clip_grad_value_") for n in names) else "max_norm"
    arg = find_arg(call, keyword, 1)
    return arg is not None and _is_infinity(ctx, arg.value, 0)


def _is_infinity(ctx, node: cst.BaseExpression, depth: int) -> bool:
    if ctx.qnames(node) & INFINITIES:
        return True
    value = value_of(ctx, node)
    if isinstance(value, Known):
        number = value.value
        return isinstance(number, float) and math.isinf(number) and number > 0
    if isinstance(node, cst.Name) and depth < 2:  # MAX_NORM = math.inf
        assigned = definition(ctx, node)
        if assigned is not None:
            return _is_infinity(ctx, assigned[0], depth + 1)
    return False


@dataclass(frozen=True)
class _Found:
    """Why a clip is reported: ``top`` is the function (None: the module body) whose order of
    calls puts the clip before an un-reduced ``xm.optimizer_step``; ``clip_via`` and
    ``step_via`` are the helpers of this file ``top`` reaches them through, outermost first."""

    top: str | None
    clip_via: tuple[str, ...]
    step_via: tuple[str, ...]

    def describe(self) -> str:
        """`` (`Trainer.train_step` calls `_clip()` before it)``, `` (`fit` clips, then calls
        `_step()`, which runs it)``, `` (`fit` calls `_clip()`, then `_step()`, which runs it)``; ``""``
        when the clip and the step are both in ``top`` itself."""
        top = f"`{self.top}`" if self.top else "the module body"
        clip = f"`{self.clip_via[0]}()`" if self.clip_via else None
        step = f"`{self.step_via[0]}()`" if self.step_via else None
        if clip and step:
            return f" ({top} calls {clip}, then {step}, which runs it)"
        if clip:
            return f" ({top} calls {clip} before it)"
        if step:
            return f" ({top} clips, then calls {step}, which runs it)"
        return ""


_MAX_EVENTS = 256  # a bound on one function's list (a helper called in a long chain of helpers)


# (clip | reduce | step, the call, the helpers on the way, the ifs around it on the way)
_Event = tuple[str, cst.Call, tuple[str, ...], Arms]


class GradientOrder:
    """Where this file clips, reduces and steps, in the order each function runs them, through
    the helpers of the module it calls (:class:`~xla_lint.analysis.functions.LocalFunctions`).

    ``unreduced`` maps ``id()`` of each clip call that some function (or the module body) runs
    before an ``xm.optimizer_step`` with no ``xm.reduce_gradients`` before the clip, to why
    (the shortest way found). A helper's calls count where the helper is called: a clip in
    ``self._clip()`` called before the step counts, one called after it does not; so does a
    step in ``self._step()``. Helpers are followed to any depth; a recursive call is not. A
    clip and a step (or a reduction) in different arms of one ``if`` never run together
    (:func:`~xla_lint.analysis.functions.exclusive`).
    """

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.local = LocalFunctions.of(ctx)
        self._events: dict[int, list[_Event]] = {}
        self.unreduced: dict[int, _Found] = {}
        for function in (None, *self.local.functions):
            self._order(function)
        self.single_process = bool(self.unreduced) and _launches_one_process(ctx, self.local)

    @classmethod
    def of(cls, ctx) -> GradientOrder:
        """The order of ``ctx``'s module, computed once per file (on its first clip call)."""
        return ctx.memo(
            "xla_lint.rules.multiprocess.clip_before_reduce.GradientOrder", lambda: cls(ctx)
        )

    def _order(self, function: Function | None) -> None:
        reduced: list[Arms] = []
        pending: list[_Event] = []
        for event in self._events_of(function):
            kind, call, via, arms = event
            if kind == "reduce":
                reduced.append(arms)
            elif kind == "clip":
                if all(exclusive(arms, before) for before in reduced):
                    pending.append(event)
            else:
                left = []
                for clip_event in pending:
                    _, clip, clip_via, clip_arms = clip_event
                    if exclusive(
                        clip_arms, arms
                    ):  # `if ...: clip; opt.step() else: xm.optimizer_step(opt)`
                        left.append(clip_event)
                        continue
                    found = _Found(_label(function), clip_via, via)
                    known = self.unreduced.get(id(clip))
                    if known is None or _length(found) < _length(known):
                        self.unreduced[id(clip)] = found
                pending = left

    def _events_of(self, function: Function | None) -> list[_Event]:
        """The clips, reductions and steps ``function`` (None: the module body) runs, in order,
        with those of the helpers it calls in their place (each function's list is built once)."""
        key = id(function.node) if function is not None else 0
        cached = self._events.get(key)
        if cached is not None:
            return cached
        self._events[key] = []  # a recursive call, while this list is built, adds nothing
        events: list[_Event] = []
        local = self.local
        qnames = self.ctx.qnames
        for call, scope in local.calls_of(function):
            names = qnames(call.func, scope)
            if names & CLIP_APIS:
                events.append(("clip", call, (), local.arms(call)))
            elif REDUCE_GRADIENTS in names:
                events.append(("reduce", call, (), local.arms(call)))
            elif OPTIMIZER_STEP in names:
                events.append(("step", call, (), local.arms(call)))
            else:
                callee = local.callee(call, scope, function)
                if callee is not None:
                    name, arms = callee.name, local.arms(call)
                    for kind, inner, via, inner_arms in self._events_of(callee):
                        events.append((kind, inner, (name, *via), arms + inner_arms))
            if len(events) > _MAX_EVENTS:
                break
        self._events[key] = events
        return events


def _launches_one_process(ctx, local: LocalFunctions) -> bool:
    """True when this file launches, and every launch runs one process: ``nprocs=1``
    (torch_xla 2.9.0 ``_internal/pjrt.py`` ``spawn``: ``nprocs == 1`` runs ``fn`` in this
    process on one device) or ``debug_single_process=True``, as literals or module constants.
    ``reduce_gradients`` then reduces nothing (``runtime.world_size()`` is 1)."""
    launches = set(map(id, launch_calls(ctx)))
    if not launches:
        return False
    seen = 0
    for function in (None, *local.functions):
        for call, scope in local.calls_of(function):
            if id(call) not in launches:
                continue
            seen += 1
            site = Site(scope)
            nprocs = find_arg(call, "nprocs", 2)
            debug = find_arg(call, "debug_single_process", 3)
            if nprocs is not None and _is_one(value_of(ctx, nprocs.value, site)):
                continue
            value = value_of(ctx, debug.value, site) if debug is not None else None
            if not (isinstance(value, Known) and value.value is True):
                return False
    return seen == len(launches)  # (a launch in a lambda or class body: not read here)


def _label(function: Function | None) -> str | None:
    """``Trainer.train_step`` for a method, ``train`` for a function, None for the module body."""
    if function is None:
        return None
    if function.owner is not None:
        return f"{function.owner.name.value}.{function.name}"
    return function.name


def _length(found: _Found) -> int:
    return len(found.clip_via) + len(found.step_via)
