"""Multi-process (one process per device) programs: replicas that must stay in step."""

from __future__ import annotations

from typing import TypeGuard

import libcst as cst

from ..analysis import apis
from ..analysis.context import FileContext, find_arg, literal_string
from ..analysis.guards import runs_on_xla
from ..analysis.holds import may_hold_tensors, name_words
from ..analysis.names import dotted_name
from ..analysis.seeds import (
    RNG_APIS,
    TORCH_SEEDS,
    SeedBeforeModel,
    calls_that_run,
    launch_calls,
    launched_functions,
    statements_after,
)
from ..analysis.seeds import short as quoted_source
from ..analysis.values import (
    PARAMETER,
    Known,
    Site,
    Unknown,
    definition,
    is_replica_test,
    parts_of,
    value_of,
)
from ..analysis.walk import TRIVIA, iter_nodes, walk
from ..diagnostics import Severity
from ..program.facts import Fact
from ..rule import Invalid, Rule, Valid
from .spmd import DEVICE_APIS, PER_HOST_APIS, PER_HOST_VARIABLES, DeviceUse, function_key

MULTIPROCESS = [(Fact.MULTIPROCESS, True), (Fact.SPMD, False)]

_LAUNCH = "import torch_xla\nimport torch_xla.core.xla_model as xm\n"

# Tests that hold on some replicas only (`if xm.is_master_ordinal():`, `if xr.global_ordinal() == 0:`)
# are recognised by xla_lint.analysis.values, which also sees through saved flags (`is_root = ...`).

# Graph-executing or collective calls every replica must reach (torch_xla/core/xla_model.py).
SYNC_APIS = {
    f"{apis.XM}.save": "xm.save",
    f"{apis.XM}.rendezvous": "xm.rendezvous",
    f"{apis.XM}.xla_rendezvous": "xm.xla_rendezvous",
    f"{apis.XM}.mesh_reduce": "xm.mesh_reduce",
    f"{apis.XM}.all_reduce": "xm.all_reduce",
    f"{apis.XM}.all_gather": "xm.all_gather",
    f"{apis.XM}.mark_step": "xm.mark_step",
    "torch_xla.sync": "torch_xla.sync",
    "torch.distributed.barrier": "dist.barrier",
}
SYNC_METHODS = {"item": ".item()", "cpu": ".cpu()"}
# Calls that run the pending graph but are no collective themselves: `xm.save` syncs the XLA
# tensors of its data (`_maybe_convert_to_cpu`: `_xla_sync_multi`), nothing else.
_GRAPH_RUNNERS = ("torch_xla.sync", "xm.mark_step", "xm.save")

# Calls that initialise the PJRT runtime in the calling process (torch_xla/runtime.py:
# they read the device list or ordinals from the PJRT client).
RUNTIME_QUERIES = frozenset(
    {
        f"{apis.XR}.{n}"
        for n in (
            "global_runtime_device_count",
            "global_device_count",
            "world_size",
            "global_ordinal",
            "local_ordinal",
            "addressable_device_count",
            "addressable_runtime_device_count",
            "local_device_count",
            "global_runtime_device_attributes",
            "runtime_device_attributes",
            "process_index",
            "process_count",
        )
    }
    | {
        f"{apis.XM}.{n}"
        for n in (
            "xrt_world_size",
            "get_ordinal",
            "get_local_ordinal",
            "is_master_ordinal",
            "get_xla_supported_devices",
            "set_rng_state",
        )
    }
    | {
        "torch_xla.devices",
        "torch_xla.device_count",
        "torch_xla.real_devices",
        "torch_xla.manual_seed",
    }
)
_DEVICE_OR_RUNTIME = DEVICE_APIS | RUNTIME_QUERIES

CLIP_APIS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.clip_grad_norm",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_value_",
    }
)


def _divergent_test(ctx, test: cst.BaseExpression) -> bool:
    """True when ``test`` holds on some replicas only: it calls ``is_master_ordinal``, compares
    an ordinal (``xr.global_ordinal() == 0``) or reads a flag saved from one
    (``is_root = xm.is_master_ordinal()``); see :func:`xla_lint.analysis.values.is_replica_test`."""
    return is_replica_test(ctx, test)


EVAL_WORDS = frozenset(
    {"test", "eval", "evaluation", "val", "valid", "validation", "dev", "holdout"}
)


def _target_names(node: cst.BaseExpression) -> str:
    """The identifiers of a Name/Attribute chain joined with ``_`` (``self.test_loader`` -> ``self_test_loader``)."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
    return "_".join(reversed(parts))


class ReplicaDivergentSync(Rule):
    code = "XLA015"
    name = "replica-divergent-sync"
    summary = "A graph-executing or collective call under `if xm.is_master_ordinal():`: the other replicas never reach it."
    message = (
        "`{api}` under a branch only some replicas take (`{test}`): {why}; run it on every replica "
        "(or log through `xm.add_step_closure`)"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
In a multi-process program (`torch_xla.launch`, `xmp.spawn`, an `xla` process group)
that is not SPMD, flags `.item()`, `.cpu()`, `xm.save`, `xm.rendezvous`,
`xm.xla_rendezvous`, `xm.mesh_reduce`, `xm.all_reduce`, `xm.all_gather`,
`xm.mark_step`, `torch_xla.sync()` and `dist.barrier()` inside an `if` whose test only
holds on some replicas: `xm.is_master_ordinal()`, or a comparison of
`xr.global_ordinal()`, `xr.local_ordinal()`, `xm.get_ordinal()`... with a value, also
through a name saved from one (`is_root = xm.is_master_ordinal()` ... `if is_root:`;
`rank = xr.global_ordinal()` ... `if rank == 0:`; module level or the same function).

Not flagged: the "master goes first" idiom, where the same barrier (`xm.rendezvous`,
`xm.xla_rendezvous` or `dist.barrier`, with the same arguments: the same tag) is called in
the same function under complementary branches (`if not xm.is_master_ordinal():` /
`if xm.is_master_ordinal():`, `rank != 0` / `rank == 0`, the `if` and `else` of one test):
every replica enters exactly one of the two, so all of them meet in one rendezvous. Nor
`xm.save` of data that holds no XLA tensor (a scheduler's `state_dict()`, the arguments,
numbers): it syncs nothing.

## Why is this bad
Every replica runs the same program and the collectives in it must be entered by all of
them. In torch_xla 2.9.0 (`torch_xla/core/xla_model.py`): `rendezvous` is an
`xla_rendezvous`, an XLA `all_gather` over all replicas; `mesh_reduce` is a
`rendezvous`. Called from one replica, these wait for replicas that never come: the job
hangs. `save` is meant to be called by every replica: it syncs the XLA tensors of its data
on each (`_maybe_convert_to_cpu`, `_xla_sync_multi`) and writes only on the master itself
(`should_write_data = not master_only or is_master_ordinal(...)`). `save` of XLA tensors,
`.item()`, `.cpu()` and `torch_xla.sync()` on one replica execute the pending graph there
alone: when that
graph holds the step's gradient all-reduce, the master waits for the others forever;
otherwise the master compiles and runs a graph the others do not, and its later graphs
differ from theirs.

## Example
```python
if xm.is_master_ordinal():
    print(f"loss {loss.item()}")
    xm.save(model.state_dict(), "model.pt")
```

## Use instead
```python
xm.add_step_closure(lambda l: print(f"loss {l.item()}", flush=True), args=(loss,))
xm.save(model.state_dict(), "model.pt")   # all replicas call it; only the master writes
```

For the master to do something first (download a dataset) while the others wait, let
every replica enter the same rendezvous once, on either side of the work:
```python
if not xm.is_master_ordinal():
    xm.rendezvous("download")          # the others wait here...
dataset = datasets.MNIST(root, download=True)
if xm.is_master_ordinal():
    xm.rendezvous("download")          # ...until the master has downloaded
```

## References
- https://docs.pytorch.org/xla/master/learn/pytorch-on-xla-devices.html
- torch_xla 2.9.0 `torch_xla/core/xla_model.py` (`save`, `rendezvous`, `mesh_reduce`, `add_step_closure`)
"""
    valid = (
        Valid(
            _LAUNCH + "def _mp_fn(i):\n    xm.save(model.state_dict(), 'm.pt')\n"
            "    if xm.is_master_ordinal():\n        print('saved', flush=True)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH + "import torch_xla.runtime as xr\nxr.use_spmd()\n"
            "if xr.process_index() == 0:\n    print(loss.item(), flush=True)\n"
        ),
        Valid(
            _LAUNCH + "def _mp_fn(i):\n    if xm.is_master_ordinal():\n"
            "        def log(l):\n            print(l.item(), flush=True)\n"
            "        xm.add_step_closure(log, args=(loss,))\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch_xla.core.xla_model as xm\nif xm.is_master_ordinal():\n    v = t.item()\n"
        ),
        # The download idiom as real code writes it (pytorch/xla's old MNIST/ImageNet examples,
        # Colab notebooks): every replica enters exactly one `rendezvous('download_only_once')`.
        Valid(
            _LAUNCH + "def _mp_fn(i):\n    if not xm.is_master_ordinal():\n"
            "        xm.rendezvous('download_only_once')\n"
            "    train_dataset = datasets.MNIST('/tmp/mnist', download=True)\n"
            '    if xm.is_master_ordinal():\n        xm.rendezvous("download_only_once")\n'
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH + "def train(index):\n    is_root = xm.is_master_ordinal()\n"
            "    if Config.use_tpu and not is_root:\n        xm.rendezvous('download_only_once')\n"
            "    dataset = WikiDataset()\n"
            "    if Config.use_tpu and is_root:\n        xm.rendezvous('download_only_once')\n"
            "torch_xla.launch(train)\n"
        ),
        # torch_distributed_zero_first (YOLOv5 and others), with a saved ordinal, and an if/else.
        Valid(
            _LAUNCH + "import torch.distributed as dist\nimport torch_xla.runtime as xr\n"
            "def _mp_fn(i):\n    rank = xr.global_ordinal()\n    if rank != 0:\n        dist.barrier()\n"
            "    prepare()\n    if rank == 0:\n        dist.barrier()\n"
            "    if xm.is_master_ordinal(local=False):\n        xm.rendezvous('ckpt')\n"
            "    else:\n        xm.rendezvous('ckpt')\ntorch_xla.launch(_mp_fn)\n"
        ),
        # xm.save of a scheduler's state syncs nothing (cambrian-mllm/cambrian's trainer).
        Valid(
            _LAUNCH + "def _mp_fn(i):\n    sched = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
            "    lr_scheduler_state_dict = sched.state_dict()\n"
            "    if xm.is_master_ordinal(local=False):\n"
            "        xm.save(lr_scheduler_state_dict, 'sched.pt', master_only=True)\n"
            "        xm.save({'epoch': 3, 'args': vars(args)}, 'meta.pt')\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        # A flag that is a parameter (accelerate's `_goes_first(self, is_main)`) is not known to diverge.
        Valid(
            _LAUNCH
            + "def _goes_first(is_main):\n    if not is_main:\n        xm.rendezvous('first')\n"
            "    yield\n    if is_main:\n        xm.rendezvous('first')\n"
            "def _mp_fn(i):\n    is_main = 1\n    is_main = xm.is_master_ordinal()\n    is_main = 2\n"
            "    if is_main:\n        print(loss.item())\ntorch_xla.launch(_mp_fn)\n"
        ),
    )
    invalid = (
        Invalid(
            _LAUNCH + "def _mp_fn(i):\n    if xm.is_master_ordinal():\n"
            "        print(loss.item(), flush=True)\n        xm.save(model.state_dict(), 'm.pt')\n"
            "torch_xla.launch(_mp_fn)\n",
            (5, 6),
        ),
        Invalid(
            "import torch_xla\nfrom torch_xla import runtime as xr\n"
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def _mp_fn(i):\n    if xr.global_ordinal() == 0:\n        torch_xla.sync()\n"
            "    else:\n        torch_xla.core.xla_model.rendezvous('wait')\nxmp.spawn(_mp_fn)\n",
            (6, 8),
        ),
        Invalid(
            _LAUNCH + "import torch.distributed as dist\ndef _mp_fn(i):\n"
            "    if not xm.is_master_ordinal(local=False):\n        return\n"
            "    for batch in loader:\n        if xm.is_master_ordinal():\n            dist.barrier()\n"
            "torch_xla.launch(_mp_fn)\n",
            (9,),
        ),
        # Saved flags: module level and in the same function.
        Invalid(
            _LAUNCH + "import torch_xla.runtime as xr\nIS_ROOT = xr.global_ordinal() == 0\n"
            "def _mp_fn(i):\n    is_root = xm.is_master_ordinal()\n    rank = xm.get_ordinal()\n"
            "    if is_root:\n        print(loss.item())\n    if IS_ROOT:\n        xm.mark_step()\n"
            "    if rank == 0:\n        xm.save(model.state_dict(), 'm.pt')\n"
            "torch_xla.launch(_mp_fn)\n",
            (9, 11, 13),
        ),
        # Not the download idiom: different tags, the same side twice, another function.
        Invalid(
            _LAUNCH
            + "def _mp_fn(i):\n    if not xm.is_master_ordinal():\n        xm.rendezvous('a')\n"
            "    if xm.is_master_ordinal():\n        xm.rendezvous('b')\n"
            "    if xm.is_master_ordinal():\n        xm.rendezvous('c')\n"
            "    if xm.is_master_ordinal():\n        xm.rendezvous('c')\n"
            "def other():\n    if not xm.is_master_ordinal():\n        xm.rendezvous('a')\n"
            "torch_xla.launch(_mp_fn)\n",
            (5, 7, 9, 11, 14),
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._barriers: dict[int, list[tuple[cst.Call, str, tuple, list]]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        api = self._sync_api(node)
        if api is None:
            return
        branch = self._divergent_branch()
        if branch is None:
            return
        test, positive = branch
        if api in _BARRIERS and self._paired(node, api, (test, positive)):
            return
        if api == "xm.save":
            data = find_arg(node, "data", 0)
            if data is not None and not may_hold_tensors(self.ctx, data.value):
                return  # no XLA tensor in it: `_maybe_convert_to_cpu` syncs nothing
        why = (
            "the other replicas never enter the collective and the job hangs"
            if api not in SYNC_METHODS.values() and api not in _GRAPH_RUNNERS
            else "it executes the pending graph on these replicas alone, which hangs if the graph "
            "holds a collective and makes the replicas' graphs diverge otherwise"
        )
        text = " ".join(self.ctx.module.code_for_node(test).split())
        self.report(
            node, self.message.format(api=api, test=text[:60], why=why), requires=MULTIPROCESS
        )

    def _sync_api(self, node: cst.Call) -> str | None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS and not node.args:
            if not self.ctx.qnames(func):  # a method of a value, not a module function
                return SYNC_METHODS[func.attr.value]
        names = self.ctx.qnames(func)
        for api, short in SYNC_APIS.items():
            if api in names:
                return short
        return None

    def _divergent_branch(self) -> tuple[cst.BaseExpression, bool] | None:
        """The innermost enclosing test that holds on some replicas only, and whether the node
        is in its true branch; None outside such a branch."""
        stack = self.ctx.stack
        for i in range(len(stack) - 2, -1, -1):
            node = stack[i]
            if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return None
            if isinstance(node, (cst.If, cst.IfExp)) and stack[i + 1] is not node.test:
                if _divergent_test(self.ctx, node.test):
                    return node.test, stack[i + 1] is node.body
        return None

    def _paired(self, node: cst.Call, api: str, condition: tuple[cst.BaseExpression, bool]) -> bool:
        """The same barrier, with the same arguments, is called in the same function under the
        complementary condition: every replica enters exactly one of the two."""
        function = function_key(self.ctx)
        barriers = self._barriers.get(id(function))
        if barriers is None:
            barriers = self._barriers[id(function)] = self._collect_barriers(function)
        arguments = _arguments(self.ctx, node)
        for call, other, other_arguments, conditions in barriers:
            if (
                call is not node
                and other == api
                and other_arguments == arguments
                and any(_complementary(self.ctx, condition, c) for c in conditions)
            ):
                return True
        return False

    def _collect_barriers(self, function: cst.CSTNode) -> list[tuple[cst.Call, str, tuple, list]]:
        """Every barrier call in ``function``'s own code (not nested functions, classes or lambdas),
        with its arguments and the ``(test, in true branch)`` of each ``if`` around it, innermost first."""
        rule, found, stack = self, [], []

        class Collect:
            def on_visit(self, node: cst.CSTNode) -> bool:
                stack.append(node)
                if node is not function and isinstance(
                    node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)
                ):
                    return False
                if type(node) is cst.Call:
                    api = rule._sync_api(node)
                    if api in _BARRIERS:
                        conditions = []
                        for i in range(len(stack) - 2, -1, -1):
                            owner = stack[i]
                            if (
                                isinstance(owner, (cst.If, cst.IfExp))
                                and stack[i + 1] is not owner.test
                            ):
                                conditions.append((owner.test, stack[i + 1] is owner.body))
                        found.append((node, api, _arguments(rule.ctx, node), conditions))
                return True

            def on_leave(self, node: cst.CSTNode) -> None:
                stack.pop()

        walk(function, Collect(), TRIVIA)
        return found


# Barriers that the "master goes first" idiom calls from complementary branches.
_BARRIERS = frozenset({"xm.rendezvous", "xm.xla_rendezvous", "dist.barrier"})


def _arguments(ctx, call: cst.Call) -> tuple:
    """A call's arguments, comparable across calls: string literals by value, the rest by code."""
    out = []
    for arg in call.args:
        value = literal_string(arg.value)
        code = value if value is not None else " ".join(ctx.module.code_for_node(arg.value).split())
        out.append((arg.keyword.value if arg.keyword is not None else None, arg.star, code))
    return tuple(out)


def _bare(ctx, node: cst.BaseExpression) -> str:
    """The code of ``node`` without its own parentheses, on one line."""
    if getattr(node, "lpar", None):
        node = node.with_changes(lpar=[], rpar=[])
    return " ".join(ctx.module.code_for_node(node).split())


_OPPOSITE = {
    cst.Equal: cst.NotEqual,
    cst.NotEqual: cst.Equal,
    cst.LessThan: cst.GreaterThanEqual,
    cst.GreaterThanEqual: cst.LessThan,
    cst.GreaterThan: cst.LessThanEqual,
    cst.LessThanEqual: cst.GreaterThan,
    cst.Is: cst.IsNot,
    cst.IsNot: cst.Is,
    cst.In: cst.NotIn,
    cst.NotIn: cst.In,
}


def _complementary(
    ctx, a: tuple[cst.BaseExpression, bool], b: tuple[cst.BaseExpression, bool]
) -> bool:
    """True when condition ``a`` holds exactly where ``b`` does not. A condition is ``(test,
    in true branch)``; recognised: ``x`` / ``not x`` (and the ``if``/``else`` of one test),
    ``r == 0`` / ``r != 0`` (and the other opposite comparisons), and ``c and x`` / ``c and not x``
    (the same other conjuncts)."""
    (ta, pa), (tb, pb) = a, b
    while isinstance(ta, cst.UnaryOperation) and isinstance(ta.operator, cst.Not):
        ta, pa = ta.expression, not pa
    while isinstance(tb, cst.UnaryOperation) and isinstance(tb.operator, cst.Not):
        tb, pb = tb.expression, not pb
    if _bare(ctx, ta) == _bare(ctx, tb):
        return pa != pb
    if pa != pb:
        return False
    if (
        isinstance(ta, cst.Comparison)
        and isinstance(tb, cst.Comparison)
        and len(ta.comparisons) == 1
        and len(tb.comparisons) == 1
    ):
        ca, cb = ta.comparisons[0], tb.comparisons[0]
        return (
            _OPPOSITE.get(type(ca.operator)) is type(cb.operator)
            and _bare(ctx, ta.left) == _bare(ctx, tb.left)
            and _bare(ctx, ca.comparator) == _bare(ctx, cb.comparator)
        )
    if pa and _conjunction(ta) and _conjunction(tb):
        left, right = _conjuncts(ta), _conjuncts(tb)
        if len(left) != len(right):
            return False
        differ = [
            (x, y) for x, y in zip(left, right, strict=True) if _bare(ctx, x) != _bare(ctx, y)
        ]
        return len(differ) == 1 and _complementary(ctx, (differ[0][0], True), (differ[0][1], True))
    return False


def _conjunction(node: cst.BaseExpression) -> TypeGuard[cst.BooleanOperation]:
    return isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And)


def _conjuncts(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """``a and b and c`` -> ``[a, b, c]``."""
    if _conjunction(node):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


class ClipBeforeReduce(Rule):
    code = "XLA016"
    name = "clip-before-reduce"
    summary = "clip_grad_norm_ before xm.optimizer_step clips the local, un-reduced gradients."
    message = (
        "`{api}` before `xm.optimizer_step` clips each replica's local gradients before they are "
        "reduced; call `xm.reduce_gradients(optimizer)`, clip, then `optimizer.step()`"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
In a multi-process program that is not SPMD, flags `torch.nn.utils.clip_grad_norm_` /
`clip_grad_value_` followed, in the same function, by `xm.optimizer_step(...)`, unless
`xm.reduce_gradients(...)` was called before the clip.

## Why is this bad
`xm.optimizer_step` (torch_xla 2.9.0 `torch_xla/core/xla_model.py`) is
`reduce_gradients(optimizer)` followed by `optimizer.step()`: the gradients are averaged
over the replicas *inside* it. Clipping before it clips each replica's local gradient,
whose norm is larger and different on every replica, so the average of the clipped
gradients is not the clipped average gradient: the effective update differs from
single-device training with the same global batch. In SPMD and single-device code the
gradient is already global when clipped, and neither is flagged.

## Example
```python
loss.backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
xm.optimizer_step(optimizer)
```

## Use instead
```python
loss.backward()
xm.reduce_gradients(optimizer)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
optimizer.step()
```

## References
- https://docs.pytorch.org/xla/master/learn/pytorch-on-xla-devices.html
- torch_xla 2.9.0 `torch_xla/core/xla_model.py` (`optimizer_step`, `reduce_gradients`)
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
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.clips: dict[cst.CSTNode, list[tuple[cst.Call, str]]] = {}
        self.reduced: set[cst.CSTNode] = set()

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qnames(node.func)
        if not names:
            return
        key = function_key(self.ctx)
        if names & CLIP_APIS:
            if key not in self.reduced:
                api = next(iter(sorted(names & CLIP_APIS))).rsplit(".", 1)[1]
                self.clips.setdefault(key, []).append((node, api))
        elif f"{apis.XM}.reduce_gradients" in names:
            self.reduced.add(key)
        elif f"{apis.XM}.optimizer_step" in names:
            for clip, api in self.clips.pop(key, []):
                self.report(clip, self.message.format(api=api), requires=MULTIPROCESS)


# Calls that take a DataLoader over and give it a distributed sampler themselves (XLA017):
# accelerate's `Accelerator.prepare`/`prepare_data_loader` (accelerate/data_loader.py,
# `prepare_data_loader`: a `BatchSamplerShard` over `num_processes`/`process_index`), Lightning's
# `Trainer.fit/validate/test/predict` (lightning/pytorch/trainer/connectors/data_connector.py,
# `_prepare_dataloader` injects a `DistributedSampler` when `use_distributed_sampler`) and
# `Fabric.setup_dataloaders` (lightning/fabric/fabric.py, `use_distributed_sampler=True`).
ACCELERATE_METHODS = frozenset({"prepare", "prepare_data_loader"})
TRAINER_METHODS = frozenset({"fit", "validate", "test", "predict"})
FABRIC_METHODS = frozenset({"setup_dataloaders"})
# LightningModule / LightningDataModule hooks whose loaders the Trainer prepares the same way.
LIGHTNING_HOOKS = frozenset(
    {"train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"}
)
LIGHTNING_ROOTS = ("lightning", "pytorch_lightning", "lightning_fabric")
# What a loader may sit in on its way to an assignment, a return or an argument: `[dl1, dl2]`.
_CONTAINERS = (cst.Element, cst.List, cst.Tuple, cst.DictElement, cst.Dict, cst.StarredElement)


def _keys(node: cst.CSTNode) -> set[str]:
    """The names and attribute chains ``node`` (a target or a returned value) binds or holds:
    ``a, (b, self.c)`` -> ``{"a", "b", "self.c"}``."""
    key = dotted_name(node)
    if key is not None:
        return {key}
    out: set[str] = set()
    if isinstance(node, (cst.Tuple, cst.List)):
        for el in node.elements:
            out |= _keys(el.value)
    elif isinstance(node, cst.StarredElement):
        out |= _keys(node.value)
    return out


class LoaderHandoffs:
    """Where a file hands DataLoaders to code that installs the distributed sampler itself.

    One walk of the module (``ctx.memo``) records, per hand-off call
    (:data:`ACCELERATE_METHODS`, :data:`TRAINER_METHODS`, :data:`FABRIC_METHODS`; method calls
    count only in files that import that library, a module function only when it resolves to
    ``accelerate...prepare_data_loader``), every node inside its arguments and the names and
    attribute chains they mention, by the function (or module) the call is in; the call sites
    of the file's functions, with the names their results are assigned to; the names each
    function returns; and which classes derive from a Lightning class. A Lightning hand-off
    is ignored when the file passes ``use_distributed_sampler=False`` anywhere.
    """

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        roots = {m.split(".")[0] for m in ctx.imported_modules}
        self.accelerate = "accelerate" in roots
        self.trainer = bool(roots & {"lightning", "pytorch_lightning"})
        self.fabric = bool(roots & {"lightning", "lightning_fabric"})
        self.handed_nodes: set[int] = set()  # ids of nodes inside a hand-off's arguments
        self.handed_keys: dict[
            int, set[str]
        ] = {}  # id(function or module) -> keys handed over there
        self.class_keys: dict[
            int, set[str]
        ] = {}  # id(class) -> `self.*` keys handed over in its methods
        self.returned: dict[int, set[str]] = {}  # id(function) -> keys it returns
        self.call_sites: dict[str, list[tuple[cst.Call, cst.CSTNode, set[str]]]] = {}
        self.lightning_classes: set[str] = set()
        self.class_of: dict[
            int, cst.ClassDef | None
        ] = {}  # id(function) -> the class it is a method of
        self._sampler_off = False
        lightning_calls: list[
            tuple[cst.Call, cst.CSTNode]
        ] = []  # recorded once the whole file is read
        self._scan(lightning_calls)
        if not self._sampler_off:
            for call, owner in lightning_calls:
                self._record(call, owner)

    def _scan(self, lightning_calls) -> None:
        ctx = self.ctx
        facts = self
        scopes = [ctx.root_scope]
        owners: list[cst.CSTNode] = [ctx.module]
        classes: list[cst.ClassDef | None] = [None]
        pushed: list[tuple[cst.CSTNode, str]] = []

        class Scan:
            def on_visit(self, node: cst.CSTNode) -> bool:
                if type(node) is cst.ClassDef:  # bases are read in the enclosing scope
                    for base in node.bases:
                        names = ctx.qnames(base.value, scopes[-1])
                        if (
                            any(n.split(".")[0] in LIGHTNING_ROOTS for n in names)
                            or dotted_name(base.value) in facts.lightning_classes
                        ):
                            facts.lightning_classes.add(node.name.value)
                scope = ctx.scopes.get(node)
                if scope is not None and node is not ctx.module:
                    scopes.append(scope)
                    pushed.append((node, "scope"))
                if type(node) is cst.ClassDef:
                    classes.append(node)
                    pushed.append((node, "class"))
                elif type(node) is cst.FunctionDef:
                    facts.class_of[id(node)] = classes[-1]  # None unless directly in a class body
                    owners.append(node)
                    classes.append(None)
                    pushed.append((node, "function"))
                elif (
                    type(node) is cst.Return
                    and node.value is not None
                    and owners[-1] is not ctx.module
                ):
                    facts.returned.setdefault(id(owners[-1]), set()).update(_keys(node.value))
                elif type(node) is cst.Call:
                    facts._call(node, scopes[-1], owners[-1], lightning_calls)
                elif type(node) is cst.Assign and type(node.value) is cst.Call:
                    targets: set[str] = set()
                    for t in node.targets:
                        targets |= _keys(t.target)
                    facts._site(node.value, owners[-1], targets)
                return True

            def on_leave(self, node: cst.CSTNode) -> None:
                while pushed and pushed[-1][0] is node:
                    _, what = pushed.pop()
                    if what == "scope":
                        scopes.pop()
                    elif what == "class":
                        classes.pop()
                    else:
                        owners.pop()
                        classes.pop()

        walk(ctx.module, Scan(), TRIVIA)

    def _site(self, call: cst.Call, owner: cst.CSTNode, targets: set[str]) -> None:
        func = call.func
        if isinstance(func, cst.Name) or (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
        ):
            name = func.value if isinstance(func, cst.Name) else func.attr.value
            self.call_sites.setdefault(name, []).append((call, owner, targets))

    def _call(self, call: cst.Call, scope, owner: cst.CSTNode, lightning_calls) -> None:
        ctx = self.ctx
        off = find_arg(call, "use_distributed_sampler")
        if off is not None and isinstance(off.value, cst.Name) and off.value.value == "False":
            self._sampler_off = True
        self._site(call, owner, set())
        names = ctx.qnames(call, scope)
        func = call.func
        if any(n.startswith("accelerate.") and n.endswith(".prepare_data_loader") for n in names):
            self._record(call, owner)
            return
        if names or not isinstance(func, cst.Attribute):
            return
        attr = func.attr.value
        if attr in ACCELERATE_METHODS and self.accelerate:
            self._record(call, owner)
        elif attr in TRAINER_METHODS and self.trainer or attr in FABRIC_METHODS and self.fabric:
            lightning_calls.append((call, owner))

    def _record(self, call: cst.Call, owner: cst.CSTNode) -> None:
        """Note everything ``call`` (a hand-off in ``owner``) is given."""
        keys = self.handed_keys.setdefault(id(owner), set())
        for arg in call.args:
            for node in iter_nodes(arg.value):
                self.handed_nodes.add(id(node))
                key = dotted_name(node)
                if key is not None:
                    keys.add(key)
                    if key.startswith("self.") and isinstance(owner, cst.FunctionDef):
                        cls = self.class_of.get(id(owner))
                        if cls is not None:
                            self.class_keys.setdefault(id(cls), set()).add(key)

    # -- questions ------------------------------------------------------------------
    def handed(self, keys: set[str], owner: cst.CSTNode) -> bool:
        """True when one of ``keys`` is handed over in ``owner`` (or, for ``self.*``, in its class)."""
        if keys & self.handed_keys.get(id(owner), set()):
            return True
        cls = self.class_of.get(id(owner))
        return cls is not None and bool(keys & self.class_keys.get(id(cls), set()))

    def lightning_hook(self, function: cst.FunctionDef) -> bool:
        """True for a ``train_dataloader``/``val_dataloader``/... method of a class deriving from a
        Lightning class (``LightningModule``, ``LightningDataModule``, ``BoringModel``, or a class of
        this file that derives from one), in a file that imports Lightning's Trainer package."""
        cls = self.class_of.get(id(function))
        return (
            function.name.value in LIGHTNING_HOOKS
            and cls is not None
            and cls.name.value in self.lightning_classes
            and self.trainer
            and not self._sampler_off
        )

    def result_handed(self, function: cst.FunctionDef) -> bool:
        """True when what ``function`` returns is handed over: it is a Lightning ``*_dataloader``
        hook, or a call of it in this file is a hand-off's argument or is assigned to names
        that are handed over."""
        if self.lightning_hook(function):
            return True
        for call, owner, targets in self.call_sites.get(function.name.value, ()):
            if id(call) in self.handed_nodes or (targets and self.handed(targets, owner)):
                return True
        return False


class MissingDistributedSampler(Rule):
    code = "XLA017"
    name = "missing-distributed-sampler"
    summary = "A map-style DataLoader without a sampler in a multi-process program: every replica reads the same batches."
    message = (
        "`DataLoader` without `sampler=` in a multi-process program: every replica iterates the whole "
        "dataset in the same order; pass `DistributedSampler(dataset, num_replicas=xr.world_size(), "
        "rank=xr.global_ordinal())`"
    )
    severity = Severity.WARNING
    explanation = """\
## What it does
In a multi-process program (`torch_xla.launch`, `xmp.spawn`, an `xla` process group)
that is not SPMD, flags `torch.utils.data.DataLoader(...)` calls without `sampler=` or
`batch_sampler=`. Loaders over an `IterableDataset` subclass defined in the same file,
calls passing `**kwargs`, loaders given a sampler positionally and evaluation loaders
(`test_loader = DataLoader(test_dataset, ...)`: a loader or dataset named test, eval, val,
valid, validation, dev or holdout; every replica evaluating the whole set repeats work but
the metric stays right) are not flagged.

Nor are loaders handed to a library that installs the distributed sampler itself: passed
(directly, through a name or `self.` attribute of the same function or class, or as the
result of a function of the same file) to Hugging Face accelerate's
`accelerator.prepare(...)`/`prepare_data_loader(...)`, to Lightning's
`trainer.fit/validate/test/predict(...)` or `fabric.setup_dataloaders(...)`, or built in
the `train_dataloader`/`val_dataloader`/`test_dataloader`/`predict_dataloader` method of a
class deriving from a Lightning class. Method calls count only in files that import that
library, and Lightning's only when the file never passes `use_distributed_sampler=False`.
accelerate shards the batches over `num_processes`/`process_index`
(`accelerate/data_loader.py`, `prepare_data_loader`); Lightning replaces the sampler with a
`DistributedSampler` over the strategy's world size and rank (`lightning/pytorch/trainer/
connectors/data_connector.py`, `_prepare_dataloader`; `lightning/fabric/fabric.py`,
`setup_dataloaders`).

## Why is this bad
Each replica is its own process with its own `DataLoader`. A map-style loader without a
sampler reads the whole dataset (shuffled with the same seed, or in order) in every
replica, so the N replicas train on the same batches: the gradient all-reduce in
`xm.optimizer_step` averages N copies of one gradient, an epoch does N times the work
of one replica, and the effective batch is the per-replica batch instead of N times it.
`torch_xla.launch` passes only the replica index to the function (torch_xla 2.9.0
`torch_xla/torch_xla.py`, `launch`; `torch_xla/_internal/pjrt.py`, `_SpawnFn`): the
split of the data is the program's job.

## Example
```python
def _mp_fn(index):
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
```

## Use instead
```python
def _mp_fn(index):
    sampler = DistributedSampler(train_set, num_replicas=xr.world_size(),
                                 rank=xr.global_ordinal(), shuffle=True)
    loader = DataLoader(train_set, batch_size=64, sampler=sampler)
```
Call `sampler.set_epoch(epoch)` each epoch to reshuffle.

## References
- https://docs.pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler
- https://huggingface.co/docs/accelerate/basic_tutorials/migration,
  https://lightning.ai/docs/pytorch/stable/common/trainer.html#use-distributed-sampler
- torch_xla 2.9.0 `torch_xla/torch_xla.py` (`launch`)
"""
    valid = (
        Valid(
            _LAUNCH + "from torch.utils.data import DataLoader, DistributedSampler\n"
            "def _mp_fn(i):\n    s = DistributedSampler(ds)\n    loader = DataLoader(ds, batch_size=8, sampler=s)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH
            + "import torch.utils.data as data\nclass Stream(data.IterableDataset):\n    pass\n"
            "def _mp_fn(i):\n    loader = data.DataLoader(Stream(), batch_size=8)\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch_xla\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\n"
        ),
        Valid(
            _LAUNCH + "from torch.utils.data import DataLoader\n"
            "def _mp_fn(i):\n    loader = DataLoader(ds, batch_sampler=bs)\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH + "from torch.utils.data import DataLoader\n"
            "def _mp_fn(i):\n    test_loader = DataLoader(test_dataset, batch_size=8, shuffle=False)\n"
            "    evalLoader = DataLoader(ds, batch_size=8)\ntorch_xla.launch(_mp_fn)\n"
        ),
        # Hand-offs that install the distributed sampler (huggingface/accelerate test_metrics.py,
        # test_accelerator.py; Lightning tests_pytorch/models/test_tpu.py, examples/fabric).
        Valid(
            _LAUNCH
            + "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n"
            "def _mp_fn(i):\n    accelerator = Accelerator()\n    dataloader = DataLoader(dset, batch_size=16)\n"
            "    model, dataloader = accelerator.prepare(model, dataloader)\n"
            "    self.train_dl = DataLoader(ds, batch_size=2)\n    accelerator.prepare_data_loader(self.train_dl)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH
            + "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n"
            "def create_components():\n    train_dl = DataLoader(TensorDataset(t))\n    return model, opt, train_dl\n"
            "def get_dataloader(accelerator):\n    return DataLoader(tokenized, shuffle=False, batch_size=16)\n"
            "def _mp_fn(i):\n    accelerator = Accelerator()\n    model, opt, train_dl = create_components()\n"
            "    accelerator.prepare(model, opt, train_dl)\n    dataloader = get_dataloader(accelerator)\n"
            "    ddp_model, ddp_dataloader = accelerator.prepare(model, dataloader)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH + "from torch.utils.data import DataLoader\n"
            "from accelerate.data_loader import prepare_data_loader\n"
            "def _mp_fn(i):\n    dl = prepare_data_loader(DataLoader(range(32), batch_size=8), device)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH
            + "from torch.utils.data import DataLoader\nfrom lightning.pytorch import Trainer\n"
            "from lightning.pytorch.demos.boring_classes import BoringModel\n"
            "class SerialLoaderBoringModel(BoringModel):\n    def train_dataloader(self):\n"
            "        return DataLoader(RandomDataset(32, 2000), batch_size=32)\n"
            "    def predict_dataloader(self):\n"
            "        return apply_to_collection(self.sets, Dataset, lambda x: DataLoader(x))\n"
            "def _mp_fn(i):\n    trainer = Trainer(accelerator='tpu')\n"
            "    trainer.test(model, dataloaders=DataLoader(RandomDataset(32, 2000), batch_size=32))\n"
            "    train_data = DataLoader(RandomDataset(32, 64), batch_size=2)\n"
            "    trainer.fit(model, train_dataloaders=train_data)\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH
            + "from torch.utils.data import DataLoader\nfrom lightning.fabric import Fabric\n"
            "def _mp_fn(i):\n    fabric = Fabric(accelerator='tpu')\n"
            "    dataloader = DataLoader(RandomDataset(32, 64))\n"
            "    dataloader = fabric.setup_dataloaders(dataloader)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
    )
    invalid = (
        Invalid(
            _LAUNCH + "from torch.utils.data import DataLoader\n"
            "def _mp_fn(i):\n    loader = DataLoader(ds, batch_size=8, shuffle=True)\n"
            "torch_xla.launch(_mp_fn)\n",
            (5,),
        ),
        Invalid(
            "import torch\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def train(i):\n    loader = torch.utils.data.DataLoader(ds, 8)\nxmp.spawn(train)\n",
            (4,),
        ),
        Invalid(
            _LAUNCH + "import torch\ndef _mp_fn(i):\n    attest = make()\n"
            "    self.train_loader = torch.utils.data.DataLoader(latest_dataset, batch_size=8)\n"
            "torch_xla.launch(_mp_fn)\n",
            (6,),
        ),
        # Not handed over: another loader is prepared; `use_distributed_sampler=False` keeps the
        # loader as it is; a `train_dataloader` method of a class that is not a Lightning class;
        # `.prepare(...)` in a file that does not use accelerate.
        Invalid(
            _LAUNCH
            + "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n"
            "def _mp_fn(i):\n    dl = DataLoader(ds, batch_size=8)\n    other = accelerator.prepare(model)\n"
            "torch_xla.launch(_mp_fn)\n",
            (6,),
        ),
        Invalid(
            _LAUNCH + "from torch.utils.data import DataLoader\nimport lightning as L\n"
            "def _mp_fn(i):\n    trainer = L.Trainer(use_distributed_sampler=False)\n"
            "    trainer.fit(model, DataLoader(ds, batch_size=8))\ntorch_xla.launch(_mp_fn)\n",
            (7,),
        ),
        Invalid(
            _LAUNCH + "from torch.utils.data import DataLoader\nimport lightning\nclass Data:\n"
            "    def train_dataloader(self):\n        return DataLoader(ds, batch_size=8)\n"
            "def _mp_fn(i):\n    for batch in Data().train_dataloader():\n        pass\n"
            "torch_xla.launch(_mp_fn)\n",
            (7,),
        ),
        Invalid(
            _LAUNCH + "from torch.utils.data import DataLoader\n"
            "def _mp_fn(i):\n    dl = DataLoader(ds, batch_size=8)\n    dl = pipeline.prepare(dl)\n"
            "torch_xla.launch(_mp_fn)\n",
            (5,),
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._iterable: set[str] | None = None

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.is_call_to(node, "torch.utils.data.DataLoader"):
            return
        if any(a.star for a in node.args):
            return
        if (
            find_arg(node, "sampler", 3) is not None
            or find_arg(node, "batch_sampler", 4) is not None
        ):
            return
        dataset = find_arg(node, "dataset", 0)
        if dataset is not None and self._is_iterable(dataset.value):
            return
        if self._is_evaluation(node, dataset) or self._handed_over(node):
            return
        self.report(node, requires=MULTIPROCESS)

    def _handed_over(self, node: cst.Call) -> bool:
        """The loader goes to code that installs the distributed sampler itself (:class:`LoaderHandoffs`):
        it is a hand-off's argument, is assigned to a name (or ``self.`` attribute) handed over in
        the same function (class), or is returned by a function whose result is handed over."""
        ctx = self.ctx
        handoffs = ctx.memo(LoaderHandoffs, lambda: LoaderHandoffs(ctx))
        if id(node) in handoffs.handed_nodes:
            return True
        for function in ctx.enclosing(cst.FunctionDef):
            if handoffs.lightning_hook(function):
                return True  # anything a `train_dataloader` hook builds (`lambda x: DataLoader(x)`) is its result
        stack = ctx.stack
        i = len(stack) - 2
        while i >= 0 and isinstance(stack[i], _CONTAINERS):
            i -= 1
        holder = stack[i] if i >= 0 else None
        owner = function_key(ctx)
        if isinstance(holder, (cst.Assign, cst.AnnAssign)):
            targets: set[str] = set()
            for t in holder.targets if isinstance(holder, cst.Assign) else (holder,):
                targets |= _keys(t.target)
            if handoffs.handed(targets, owner):
                return True
            return (
                isinstance(owner, cst.FunctionDef)
                and bool(targets & handoffs.returned.get(id(owner), set()))
                and handoffs.result_handed(owner)
            )
        if isinstance(holder, cst.Return) and isinstance(owner, cst.FunctionDef):
            return handoffs.result_handed(owner)
        return False

    def _is_evaluation(self, node: cst.Call, dataset: cst.Arg | None) -> bool:
        """A loader named for evaluation (``test_loader = DataLoader(test_dataset, ...)``): every
        replica evaluating the whole set repeats work but the reduced metric is still right."""
        names: list[str] = []
        parent = self.ctx.parent()
        if isinstance(parent, cst.Assign):
            names.extend(_target_names(t.target) for t in parent.targets)
        if dataset is not None:
            names.append(_target_names(dataset.value))
        return any(EVAL_WORDS & set(name_words(n)) for n in names)

    def _is_iterable(self, node: cst.BaseExpression) -> bool:
        """An instance of an ``IterableDataset`` subclass defined in this file."""
        if self._iterable is None:
            self._iterable = set()
            for stmt in iter_nodes(self.ctx.module):
                if isinstance(stmt, cst.ClassDef) and any(
                    isinstance(b.value, (cst.Name, cst.Attribute))
                    and (b.value.value if isinstance(b.value, cst.Name) else b.value.attr.value)
                    in ("IterableDataset", *self._iterable)
                    for b in stmt.bases
                ):
                    self._iterable.add(stmt.name.value)
        if isinstance(node, cst.Call):
            node = node.func
        return isinstance(node, cst.Name) and node.value in self._iterable


class XlaBeforeLaunch(Rule):
    code = "XLA018"
    name = "xla-before-launch"
    summary = "The XLA runtime is used in the parent process before torch_xla.launch/xmp.spawn."
    message = (
        "{what} uses the XLA runtime in the parent process before `{launch}`: the parent takes the "
        "devices and the launch fails with 'Runtime is already initialized'; move it into the "
        "spawned function"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
In a file that calls `torch_xla.launch(...)` or `xmp.spawn(...)`, flags the first use of
the XLA runtime at module level, or in the function that calls launch before the launch
call: `torch_xla.device()`, `xm.xla_device()`, `.to('xla')`/`.to(dev)`, `device=dev`,
runtime queries (`xr.global_runtime_device_count()`, `xr.world_size()`,
`xr.global_ordinal()`, `xm.is_master_ordinal()`...) and RNG seeding
(`xm.set_rng_state`, `torch_xla.manual_seed`). `xr.device_type()` and
`xr.local_process_count()` only read the environment and are fine. Launches with
`nprocs=1` or `debug_single_process=True` run in the same process and are skipped.

It also flags a launch inside a function the file already launches (`torch_xla.launch(outer)`
where `outer` calls `torch_xla.launch`/`xmp.spawn` again, or calls `fit`/`validate`/`test`/
`predict` of a Lightning `Trainer(strategy="xla")`, whose `_XLALauncher` calls `xmp.spawn`).

## Why is this bad
These calls create the PJRT client in the calling process, which opens the host's
devices. `xmp.spawn` then refuses to start (torch_xla 2.9.0
`torch_xla/_internal/pjrt.py`, `run_multiprocess`: `RuntimeError: Runtime is already
initialized. Do not use the XLA device before calling xmp.spawn.`), and
`torch_xla.launch` calls `xmp.spawn`. Module-level code also runs again in every child
when the start method is `spawn` (the main module is re-imported as `__mp_main__`), so
each child initialises the runtime at import, before its per-device setup. Inside a
spawned process the runtime is always up before the function runs
(`torch_xla/_internal/pjrt.py`, `initialize_multiprocess` calls `torch_xla.device()`), so a
second launch from there raises the same error (measured on CPU: `torch_xla.launch(outer)`
with `outer` calling `torch_xla.launch(inner)`).

## Example
```python
device = torch_xla.device()

def _mp_fn(index):
    model = Model().to(device)

if __name__ == "__main__":
    torch_xla.launch(_mp_fn)
```

## Use instead
```python
def _mp_fn(index):
    device = torch_xla.device()
    model = Model().to(device)

if __name__ == "__main__":
    torch_xla.launch(_mp_fn)
```

## References
- https://docs.pytorch.org/xla/master/learn/pjrt.html
- torch_xla 2.9.0 `torch_xla/_internal/pjrt.py` (`run_multiprocess`), `torch_xla/torch_xla.py` (`launch`)
"""
    valid = (
        Valid(
            _LAUNCH + "def _mp_fn(i):\n    device = torch_xla.device()\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch_xla\nimport torch_xla.runtime as xr\nif xr.device_type() == 'TPU':\n    pass\n"
            "torch_xla.launch(fn)\n"
        ),
        Valid(
            _LAUNCH
            + "def main():\n    torch_xla.launch(fn)\n    print(xm.xla_device(), flush=True)\n"
        ),
        Valid(_LAUNCH + "def helper():\n    return torch_xla.device()\ntorch_xla.launch(fn)\n"),
        # younjoo0614/DyLLM_tpu: the CPU fallback runs the test in the branch without XLA.
        Valid(
            _LAUNCH + "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def run(rank):\n    print(torch_xla.device(), flush=True)\n"
            "def _mp_fn(rank, flags):\n    run(rank)\n"
            "if __name__ == '__main__':\n    if HAS_XLA:\n        xmp.spawn(_mp_fn, args=({},))\n"
            "    else:\n        run(0)\n"
        ),
        # A helper that launches (main) or is launched, called before another launch.
        Valid(
            _LAUNCH + "def _mp_fn(i):\n    print(torch_xla.device(), flush=True)\n"
            "def main():\n    torch_xla.launch(_mp_fn)\n    print(xm.xla_device(), flush=True)\n"
            "main()\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH + "device = xm.xla_device()\ntorch_xla.launch(fn, debug_single_process=True)\n"
        ),
        # A Trainer of another strategy, a single-process launch inside, a Trainer in the parent.
        Valid(
            "import lightning as L\nimport torch_xla\n"
            "def inner(i):\n    pass\n"
            "def train(rank):\n    L.Trainer(strategy='ddp').fit(model)\n"
            "    torch_xla.launch(inner, debug_single_process=True)\n"
            "if __name__ == '__main__':\n    torch_xla.launch(train)\n"
            "    L.Trainer(strategy='xla').fit(model)\n"
        ),
    )
    invalid = (
        Invalid(
            _LAUNCH + "device = torch_xla.device()\ndef _mp_fn(i):\n    pass\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
            (3,),
        ),
        # Through a helper of the file (a fresh user's log_devices()).
        Invalid(
            _LAUNCH + "def log_devices():\n    print(torch_xla.device(), flush=True)\n"
            "def _mp_fn(i):\n    pass\n"
            "if __name__ == '__main__':\n    log_devices()\n    torch_xla.launch(_mp_fn)\n",
            (8,),
        ),
        Invalid(
            "import torch_xla.runtime as xr\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def main():\n    n = xr.global_runtime_device_count()\n    xmp.spawn(train, args=(n,))\n",
            (4,),
        ),
        Invalid(
            "import torch\nfrom torch_xla.distributed import xla_multiprocessing as xmp\n"
            "def main():\n    w = torch.zeros(2).to('xla')\n    xmp.spawn(train)\nmain()\n",
            (4,),
        ),
        Invalid(
            _LAUNCH + "def inner(i):\n    pass\ndef outer(i):\n    torch_xla.launch(inner)\n"
            "if __name__ == '__main__':\n    torch_xla.launch(outer)\n",
            (6,),
        ),
        # JungyongHan/kobart_tpu train.py: Lightning's XLA strategy inside xmp.spawn's function
        Invalid(
            "import lightning as L\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def train(rank, args):\n    trainer = L.Trainer(devices='auto', strategy='xla')\n"
            "    trainer.fit(model, dm)\n"
            "if __name__ == '__main__':\n    xmp.spawn(train, args=(args,))\n",
            (5,),
        ),
    )

    nested_message = (
        "{launch} inside `{fn}`, which this file already runs in each spawned process: the "
        "child's XLA runtime is up before `{fn}` starts, so this launch fails with 'Runtime is "
        "already initialized'; launch once, from the parent"
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.devices = DeviceUse(ctx)
        self.first: dict[cst.CSTNode, cst.Call] = {}
        self.reported: set[cst.CSTNode] = set()
        self.launch: str | None = None

    def leave_Assign(self, node: cst.Assign) -> None:
        self.devices.on_assign(node)

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qnames(node.func)
        key = function_key(self.ctx)
        nested = self._nested_launch(node, names)
        if nested is not None:
            self.report(node, self.nested_message.format(launch=nested[0], fn=nested[1]))
            return
        if names & apis.LAUNCH_APIS:
            if self._single_process(node):
                return
            launch = "torch_xla.launch" if apis.LAUNCH in names else "xmp.spawn"
            self.launch = self.launch or launch
            first = self.first.get(key)
            if first is not None and key is not self.ctx.module and key not in self.reported:
                self.reported.add(key)
                self._report(first, launch)
            return
        if key in self.first:
            return
        if not (
            names & _DEVICE_OR_RUNTIME
            or self.devices.placement(node)
            or self._runtime_helper(node, names)
        ):
            return
        # Reported when the launch is seen (or at the module's end): where the use stands
        # decides, so a use in another platform's branch (`else:` of `if HAS_XLA:`) is none.
        if self.ctx.spmd_branch() is not True and runs_on_xla(self.ctx):
            self.first[key] = node

    def _runtime_helper(self, node: cst.Call, names: frozenset[str]) -> bool:
        """A call of a module-level function of this file that uses the runtime itself
        (``log_devices()`` calling ``torch_xla.device()``) and launches nothing."""
        func = node.func
        if type(func) is not cst.Name or names:  # a local name resolves to no import
            return False
        return func.value in self._helpers()

    def _helpers(self) -> dict[str, cst.Call]:
        """Module-level functions of this file (not launched ones) that use the runtime and
        launch nothing, with the first runtime call in each."""
        return self.ctx.memo((XlaBeforeLaunch, "helpers"), self._find_helpers)

    def _find_helpers(self) -> dict[str, cst.Call]:
        found: dict[str, cst.Call] = {}
        if not launch_calls(self.ctx):
            return found  # no launch in the file: nothing to use the runtime before
        launched = launched_functions(self.ctx)
        flat = self.ctx.flat
        nodes, ends = flat.nodes, flat.ends
        index = {id(nodes[i]): i for i in flat.of_types(frozenset({cst.FunctionDef}))}
        for stmt in self.ctx.module.body:
            if type(stmt) is not cst.FunctionDef or stmt.name.value in launched:
                continue
            start = index.get(id(stmt))
            if start is None:
                continue
            use: cst.Call | None = None
            launches = False
            scope = self.ctx.scopes.get(stmt)
            for n in nodes[start + 1 : ends[start]]:
                if type(n) is cst.Call:
                    called = self.ctx.qnames(n.func, scope)
                    if use is None and called & _DEVICE_OR_RUNTIME:
                        use = n
                    launches = launches or bool(called & apis.LAUNCH_APIS)
            if use is not None and not launches:
                found[stmt.name.value] = use
        return found

    def leave_Module(self, node: cst.Module) -> None:
        first = self.first.get(node)
        if first is not None and self.launch is not None:
            self._report(first, self.launch)

    def _nested_launch(self, node: cst.Call, names: frozenset[str]) -> tuple[str, str] | None:
        """``(what launches, the launched function)`` when ``node`` starts processes inside a
        function this file already runs in spawned processes: ``torch_xla.launch``/``xmp.spawn``
        (not single-process), or ``fit``/``validate``/``test``/``predict`` of a Lightning
        ``Trainer(strategy="xla")``, whose launcher calls ``xmp.spawn``."""
        func = node.func
        launches = bool(names & apis.LAUNCH_APIS)
        if not launches and not (
            type(func) is cst.Attribute and func.attr.value in TRAINER_METHODS
        ):
            return None  # most calls: no need to find the launched functions
        outer = None
        for function in self.ctx.enclosing(cst.FunctionDef):
            outer = function
        if outer is None or outer.name.value not in launched_functions(self.ctx):
            return None
        if launches:
            if self._single_process(node):
                return None
            launch = "torch_xla.launch" if apis.LAUNCH in names else "xmp.spawn"
            return f"`{launch}`", outer.name.value
        if type(func) is cst.Attribute and func.attr.value in TRAINER_METHODS:
            trainer = func.value
            if type(trainer) is cst.Name:
                found = definition(self.ctx, trainer)
                trainer = found[0] if found is not None else trainer
            if type(trainer) is cst.Call and self._xla_trainer(trainer):
                return f'`Trainer(strategy="xla").{func.attr.value}()`', outer.name.value
        return None

    def _xla_trainer(self, call: cst.Call) -> bool:
        """A Lightning ``Trainer(...)`` whose ``strategy`` is ``"xla"``/``"xla_fsdp"`` (or an
        ``XLAStrategy``/``XLAFSDPStrategy`` instance): its launcher is ``_XLALauncher``
        (lightning/pytorch/strategies/launchers/xla.py), which calls ``xmp.spawn``."""
        if not any(
            n.split(".")[0] in LIGHTNING_ROOTS and n.endswith(".Trainer")
            for n in self.ctx.qnames(call.func)
        ):
            return False
        strategy = find_arg(call, "strategy")
        if strategy is None:
            return False
        value = strategy.value
        if literal_string(value) in ("xla", "xla_fsdp"):
            return True
        return type(value) is cst.Call and any(
            n.endswith((".XLAStrategy", ".XLAFSDPStrategy")) for n in self.ctx.qnames(value.func)
        )

    def _report(self, node: cst.Call, launch: str) -> None:
        text = quoted_source(self.ctx, node)
        func = node.func
        inner = self._helpers().get(func.value) if type(func) is cst.Name else None
        if inner is not None and not self.ctx.qnames(func):
            text = f"{text} (through {quoted_source(self.ctx, inner)})"
        self.report(node, self.message.format(what=text, launch=launch))

    def _single_process(self, node: cst.Call) -> bool:
        """``nprocs`` is 1 (``spawn`` tests ``nprocs == 1``) or ``debug_single_process`` is true,
        as literals or values the file fixes (``NPROCS = 1``; :mod:`xla_lint.analysis.values`)."""
        nprocs = find_arg(node, "nprocs", 2)
        if nprocs is not None and _is_one(value_of(self.ctx, nprocs.value)):
            return True
        debug = find_arg(node, "debug_single_process", 3)
        if debug is None:
            return False
        value = value_of(self.ctx, debug.value)
        return isinstance(value, Known) and bool(value.value) is True


class SpawnNprocs(Rule):
    code = "XLA019"
    name = "spawn-nprocs"
    summary = "xmp.spawn with nprocs other than 1/None raises ValueError; torch_xla.launch takes no nprocs at all."
    message = (
        "`nprocs={value}` raises ValueError in torch_xla 2.x: spawn uses every local device; "
        "drop `nprocs` (limit devices with `TPU_NUM_DEVICES`/`CPU_NUM_DEVICES`), or pass 1 to debug"
    )
    known_message = (
        "`nprocs={text}` is {value} ({origin}), and any nprocs other than 1 or None raises "
        "ValueError in torch_xla 2.x: spawn uses every local device; drop `nprocs` (limit devices "
        "with `TPU_NUM_DEVICES`/`CPU_NUM_DEVICES`), or pass 1 to debug"
    )
    unknown_message = (
        "`nprocs={text}` comes from {origin}: `xmp.spawn` raises ValueError in torch_xla 2.x "
        "unless it is 1 or None; drop `nprocs` (spawn uses every local device; limit them with "
        "`TPU_NUM_DEVICES`/`CPU_NUM_DEVICES`), or pass 1 to debug"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `xmp.spawn(fn, nprocs=N)` (positional or keyword) unless `N` is provably `1` or
`None`, and `torch_xla.launch(..., nprocs=...)` with any value: `launch(fn, args=(),
start_method='spawn', debug_single_process=False)` has no `nprocs` parameter
(`torch_xla/torch_xla.py`, 2.9.0), so the call raises TypeError.

`N` is followed through the file (`xla_lint/analysis/values.py`): a literal, a module constant
(`NPROCS = 8`), a variable assigned once before the call, or the default of an argparse
option (`nprocs=args.num_cores` with `parser.add_argument("--num_cores", type=int,
default=8)`). A value the file fixes to something other than 1 or None is an error, and
the message says where it comes from. A value the file cannot fix (a function parameter,
an environment variable, an option without a default, the result of a call) is a
warning: it raises unless whoever runs the program passes 1.

## Why is this bad
Under PJRT, `xmp.spawn` starts one process per local device and takes no count. In
torch_xla 2.9.0, `torch_xla/distributed/xla_multiprocessing.py` `spawn(fn, args=(),
nprocs=None, join=True, daemon=False, start_method='spawn')` passes `nprocs` straight to
`torch_xla/_internal/pjrt.py` `spawn`, which runs `fn` in the calling process when
`nprocs == 1`, starts one process per device when it is `None`, and otherwise raises
`ValueError: Unsupported nprocs (8). Please use nprocs=1 or None (default)...` (a
string `"1"` is not 1 there either: the message's `%d` then raises TypeError). Old
XRT-era scripts (`xmp.spawn(_mp_fn, nprocs=8)`, `nprocs=FLAGS.num_cores` with a
`--num_cores` option defaulting to 8) fail at start-up on every host.

## Example
```python
import torch_xla.distributed.xla_multiprocessing as xmp

parser.add_argument("--num_cores", type=int, default=8)
args = parser.parse_args()
xmp.spawn(_mp_fn, args=(args,), nprocs=args.num_cores, start_method="fork")
```

## Use instead
```python
import torch_xla

torch_xla.launch(_mp_fn, args=(args,))  # one process per local device
```
To use fewer devices, set `TPU_NUM_DEVICES` (or `CPU_NUM_DEVICES`) before start-up;
`nprocs=1` (or `torch_xla.launch(..., debug_single_process=True)`) runs one process for
debugging.

## References
- https://docs.pytorch.org/xla/master/learn/pjrt.html
- torch_xla 2.9.0 `torch_xla/_internal/pjrt.py` (`spawn`), `torch_xla/distributed/xla_multiprocessing.py` (`spawn`)
"""
    valid = (
        Valid("import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(fn, args=())\n"),
        Valid(
            "import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(fn, args=(), nprocs=1)\n"
        ),
        Valid("import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(fn, (), None)\n"),
        Valid("import torch_xla\nimport torch.multiprocessing as mp\nmp.spawn(fn, nprocs=8)\n"),
        # Values the file fixes to 1 or None: a constant, an argparse default, both arms of a choice.
        Valid(
            "import argparse\nimport torch_xla.distributed.xla_multiprocessing as xmp\nNPROCS = 1\n"
            "def main():\n    parser = argparse.ArgumentParser()\n"
            "    parser.add_argument('--num-cores', type=int, default=None)\n"
            "    args = parser.parse_args()\n    xmp.spawn(fn, nprocs=args.num_cores)\n"
            "    xmp.spawn(fn, nprocs=NPROCS)\n    xmp.spawn(fn, nprocs=1 if args.num_cores else None)\n"
        ),
        # Lightning's XLA launcher passes nprocs only when it is 1 (lightning/fabric/strategies/launchers/xla.py).
        Valid(
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def launch(self, function):\n    spawn_kwargs = {}\n    nprocs = self._strategy.num_processes\n"
            "    if nprocs == 1:\n        spawn_kwargs['nprocs'] = nprocs\n"
            "    xmp.spawn(self._wrapping_function, args=(function,), **spawn_kwargs)\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "xmp.spawn(_mp_fn, nprocs=8, start_method='fork')\n",
            (2,),
        ),
        Invalid("import torch_xla\ntorch_xla.launch(_mp_fn, args=(), nprocs=4)\n", (2,)),
        Invalid(
            "from torch_xla.distributed import xla_multiprocessing\n"
            "xla_multiprocessing.spawn(_mp_fn, (), 4)\n",
            (2,),
        ),
        # Known values: a module constant, an argparse default (huggingface transformers'
        # old xla_spawn.py, pytorch/xla's XRT-era tests: `nprocs=FLAGS.num_cores`).
        Invalid(
            "import argparse\nimport torch_xla.distributed.xla_multiprocessing as xmp\nNPROCS = 8\n"
            "def main():\n    parser = argparse.ArgumentParser()\n"
            "    parser.add_argument('--num_cores', type=int, default=8, help='1 or 8')\n"
            "    args = parser.parse_args()\n    xmp.spawn(_mp_fn, args=(args,), nprocs=args.num_cores)\n"
            "    xmp.spawn(_mp_fn, nprocs=NPROCS)\n",
            (8, 9),
        ),
        # Values the file cannot fix (warnings): a parameter, the environment, an option without default.
        Invalid(
            "import os\nimport argparse\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "parser = argparse.ArgumentParser()\nparser.add_argument('--cores', type=int)\n"
            "def run(n):\n    xmp.spawn(_mp_fn, nprocs=n)\n"
            "xmp.spawn(_mp_fn, nprocs=int(os.environ['NUM_CORES']))\n"
            "xmp.spawn(_mp_fn, nprocs=parser.parse_args().cores)\n",
            (7, 8, 9),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        keyword = find_arg(node, "nprocs")
        if keyword is not None and self.ctx.is_call_to(node, apis.LAUNCH):
            self.report(
                node,
                "`torch_xla.launch` takes no `nprocs` (TypeError): it starts one process per "
                "local device; use `debug_single_process=True` for one process",
            )
            return
        arg = find_arg(node, "nprocs", 2)
        if arg is None or not self.ctx.is_call_to(node, apis.SPAWN):
            return
        value = value_of(self.ctx, arg.value)
        bad, unknown = _nprocs_verdict(self.ctx, value)
        text = " ".join(self.ctx.module.code_for_node(arg.value).split())
        text = text if len(text) <= 40 else text[:37] + "..."
        if bad is not None:
            if bad.origin == "a literal" and bad is value:
                self.report(node, self.message.format(value=text))
            else:
                self.report(
                    node,
                    self.known_message.format(text=text, value=repr(bad.value), origin=bad.origin),
                )
        elif unknown is not None:
            self.report(
                node,
                self.unknown_message.format(text=text, origin=unknown.origin),
                severity=Severity.WARNING,
            )


def _is_one(value) -> bool:
    """``spawn`` runs one process: ``nprocs == 1`` holds (1, 1.0, True), as ``pjrt.spawn`` tests it."""
    return (
        isinstance(value, Known) and not isinstance(value.value, str) and _equals_one(value.value)
    )


def _equals_one(value: object) -> bool:
    try:
        return bool(value == 1)
    except Exception:  # pragma: no cover - an object whose == raises
        return False


def _nprocs_verdict(ctx, value, depth: int = 0) -> tuple[Known | None, Unknown | None]:
    """``(bad, unknown)`` for an ``nprocs`` value: the first known value that is neither 1 nor
    None, else the first value that cannot be known; ``(None, None)`` when every value it may
    take is 1 or None (a conditional expression is followed into both arms)."""
    if isinstance(value, Known):
        if value.value is None or _is_one(value):
            return None, None
        return value, None
    if value.kind == "several" and value.parts and depth < 4:
        unknown = None
        for part in parts_of(ctx, value):
            bad, maybe = _nprocs_verdict(ctx, part, depth + 1)
            if bad is not None:
                return bad, None
            unknown = unknown or maybe
        return None, unknown
    return None, value


# ---- XLA028: a seed that differs per replica before the model is built ------------------------

# What tells the replicas of a one-process-per-device program apart: their ordinals
# (torch_xla/runtime.py `global_ordinal`, `local_ordinal`; torch_xla/core/xla_model.py
# `get_ordinal`, `get_local_ordinal`), the process index (one process per device), the rank of
# the process group, and what also tells hosts apart (XLA027's sources: replicas on different
# hosts differ by them).
PER_REPLICA_APIS = {
    f"{apis.XR}.global_ordinal": "`xr.global_ordinal()`",
    f"{apis.XR}.local_ordinal": "`xr.local_ordinal()`",
    f"{apis.XM}.get_ordinal": "`xm.get_ordinal()`",
    f"{apis.XM}.get_local_ordinal": "`xm.get_local_ordinal()`",
    "torch.distributed.get_node_local_rank": "`dist.get_node_local_rank()`",
    **PER_HOST_APIS,
}
PER_REPLICA_VARIABLES = PER_HOST_VARIABLES | {"LOCAL_RANK"}
# `xm.set_rng_state`/`torch_xla.manual_seed` seed the XLA device's generator
# (torch_xla/core/xla_model.py `set_rng_state`: `_xla_set_rng_seed` for the device), not torch's
# CPU generator that initialises a module built on the CPU: a per-replica device seed (dropout
# masks) after a common `torch.manual_seed` is the right thing, so they do not count here.
REPLICA_SEEDS = TORCH_SEEDS - RNG_APIS
# Accelerate's objects whose `process_index` is the replica's (accelerate/state.py: on XLA it is
# `xr.global_ordinal()`), and its `set_seed(seed, device_specific=True)`, which adds it to the seed
# (accelerate/utils/random.py).
_ACCELERATE_STATES = frozenset(
    {
        "accelerate.Accelerator",
        "accelerate.accelerator.Accelerator",
        "accelerate.PartialState",
        "accelerate.state.PartialState",
        "accelerate.state.AcceleratorState",
    }
)
_ACCELERATE_INDEXES = frozenset({"process_index", "local_process_index"})
ACCELERATE_SET_SEED = "accelerate.utils.set_seed"
# What makes the replicas' parameters equal after they were built apart:
# `xm.broadcast_master_param` (torch_xla/core/xla_model.py: `collective_broadcast` of every parameter
# and buffer from ordinal 0) and other broadcasts; a DDP wrap (torch/nn/parallel/distributed.py
# `DistributedDataParallel.__init__` calls torch/distributed/utils.py `_sync_module_states`, a
# broadcast from rank 0); an FSDP wrap (torch_xla/distributed/fsdp/xla_fully_sharded_data_parallel.py
# `_shard_parameters_` keeps one slice of each parameter per rank: every value then exists once);
# Lightning's Trainer and Fabric (their XLA strategies `broadcast_master_param` the module,
# `sync_module_states=True` by default: lightning/pytorch/strategies/xla.py `setup`,
# lightning/fabric/strategies/xla.py `setup_module`; their DDP strategies wrap it in DDP).
PARAMETER_SYNCS = frozenset(
    {
        f"{apis.XM}.broadcast_master_param",
        f"{apis.XM}.collective_broadcast",
        "torch_xla.experimental.pjrt.broadcast_master_param",
        "torch.distributed.broadcast",
        "torch.distributed.utils._sync_module_states",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch_xla.distributed.fsdp.XlaFullyShardedDataParallel",
        "torch_xla.distributed.fsdp.xla_fully_sharded_data_parallel.XlaFullyShardedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
    }
)
_LIGHTNING_RUNNERS = (".Trainer", ".Fabric")
# Loading the whole model after it was built overwrites every replica's initial values with the
# same ones: `model.load_state_dict(...)`, torch.distributed.checkpoint, and functions whose name
# says they load or restore a checkpoint (`load_checkpoint(model, path)`).
_LOAD_METHODS = frozenset({"load_state_dict", "load_state", "set_model_state_dict"})
_LOAD_APIS = frozenset(
    {
        "torch.distributed.checkpoint.load",
        "torch.distributed.checkpoint.load_state_dict",
        "torch.distributed.checkpoint.state_dict.set_model_state_dict",
    }
)
_LOAD_WORDS = (
    "load_checkpoint",
    "load_ckpt",
    "load_weights",
    "load_pretrained",
    "restore",
    "resume",
)
# Functions of other modules (the rule sees one file) whose name says they make parameters equal:
# `broadcast_params(model)`, `sync_model_states(model)`, `wrap_ddp(model)`, `setup_fsdp(model)`.
_SYNC_WORDS = ("broadcast", "ddp", "fsdp")
_SYNC_OBJECTS = ("param", "model", "weight", "state", "module")
_NOT_MODEL_STATE = ("optim", "sched", "scaler")


class PerReplicaSeed(SeedBeforeModel):
    code = "XLA028"
    name = "per-replica-seed"
    preview = True
    sources = PER_REPLICA_APIS
    variables = PER_REPLICA_VARIABLES
    seeds = REPLICA_SEEDS
    requires = tuple(MULTIPROCESS)
    summary = (
        "With one process per device, a seed that differs per replica (ordinal, rank, the launch "
        "index) set before the model is built, and nothing makes the replicas' parameters equal."
    )
    message = (
        "seed depends on {source}, so it differs per replica, and the model is built after it "
        "({model}) while nothing makes the replicas' parameters equal: `xm.optimizer_step` "
        "averages gradients, so each replica keeps training its own initial weights; seed the same "
        "on every replica before building the model (per replica only afterwards), or call "
        "`xm.broadcast_master_param(model)` once it is built"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
In a program that runs one process per device (`torch_xla.launch`, `xmp.spawn`, torchrun,
`init_process_group("xla")`), flags a seed of torch's generator (`torch.manual_seed`,
`transformers.set_seed`, Lightning's `seed_everything`, Accelerate's `set_seed`, or a function of
the same file that passes its parameter to one of them) whose argument depends on the replica:
`xr.global_ordinal()`, `xr.local_ordinal()`, `xm.get_ordinal()`, `xm.get_local_ordinal()`,
`xr.process_index()`, `dist.get_rank()`, the `RANK`/`LOCAL_RANK` environment variables, the
index parameter of the function given to `torch_xla.launch`/`xmp.spawn` (`def _mp_fn(index):`),
Accelerate's `accelerator.process_index`, or `set_seed(seed, device_specific=True)`; directly or
through a local variable assigned from one. It is reported when a model is built after it in the
same function (as XLA027 recognises one: a `torch.nn` layer, a module class of the file, a
`from_pretrained`/`from_config` call, `build_model()`...) and the file never makes the replicas'
parameters equal: no `xm.broadcast_master_param(...)` or other broadcast, no
`DistributedDataParallel(...)` or FSDP wrap, no Lightning `Trainer`/`Fabric`, no call of a
function whose name says it does one of these (`broadcast_params(model)`, `wrap_ddp(model)`: the
rule reads one file), and no `load_state_dict`/checkpoint load after the seed. Not flagged: per-replica seeds after the model
exists (data order, augmentation, dropout), seeds in a `worker_init_fn`, `random.seed` and
`np.random.seed`, `xm.set_rng_state`/`torch_xla.manual_seed` (they seed the XLA device's
generator, not the CPU generator that initialises a module built on the CPU), modules built
directly on the device (`nn.Linear(4, 4, device=torch_xla.device())`: their initial values
come from the device's generator, which `torch.manual_seed` does not seed; measured), SPMD
programs (XLA027) and single-process programs.

## Why is this bad
With one process per device every replica builds its own copy of the model, and nothing in
torch_xla makes the copies equal: `xm.optimizer_step` calls `reduce_gradients`, which
all-reduces the gradients it fetches from the optimizer (`_fetch_gradients`: `p.grad.data`,
summed and scaled by `1 / world_size`) and never touches a parameter (torch_xla 2.9.0
`torch_xla/core/xla_model.py`, `optimizer_step`, `reduce_gradients`). Replicas that start from
different weights then apply the same averaged gradient to different models for the whole run:
the averaged gradient is the gradient of none of them, the replicas never agree, and `xm.save`
writes the master replica's copy only (`save`, `master_only=True`). Training runs and the loss
falls, so nothing shows the problem. torch_xla's fix is `xm.broadcast_master_param(model)`
(`collective_broadcast` of every parameter and buffer from ordinal 0); torch_xla's own test
`test/pjrt/test_collective_ops_tpu.py` (`test_broadcast_master_param`) seeds with
`xr.global_ordinal()` and asserts that replicas differ without it and agree with it. A DDP wrap
broadcasts rank 0's parameters in its constructor (torch 2.9.0 `torch/nn/parallel/distributed.py`,
`DistributedDataParallel.__init__` → `_sync_module_states`), and Lightning's XLA strategies call
`broadcast_master_param` (`sync_module_states=True` by default). Accelerate does neither on XLA:
`set_seed(seed, device_specific=True)` adds `AcceleratorState().process_index` (the global
ordinal on XLA) and `Accelerator.prepare_model` wraps in DDP only for GPU-like backends.
Run on CPU (two gloo processes doing what `reduce_gradients` does), a per-rank seed left the
replicas' weights 0.72 apart after 100 SGD steps; with a DDP wrap, 0.0.

## Example
```python
import torch
import torch_xla

def _mp_fn(index):
    torch.manual_seed(1234 + index)
    model = Net().to(torch_xla.device())
    ...

torch_xla.launch(_mp_fn)
```

## Use instead
```python
import torch
import torch_xla
import torch_xla.core.xla_model as xm

def _mp_fn(index):
    torch.manual_seed(1234)            # the same on every replica: one initial model
    model = Net().to(torch_xla.device())
    xm.broadcast_master_param(model)   # or make them equal this way
    torch.manual_seed(1234 + index)    # per replica from here: data order, augmentation
    ...

torch_xla.launch(_mp_fn)
```

## References
- https://docs.pytorch.org/xla/master/learn/pjrt.html
- torch_xla 2.9.0 `torch_xla/core/xla_model.py` (`optimizer_step`, `reduce_gradients`,
  `broadcast_master_param`, `save`)
- pytorch/xla `test/pjrt/test_collective_ops_tpu.py` (`test_broadcast_master_param`)
- torch 2.9.0 `torch/nn/parallel/distributed.py` (`DistributedDataParallel.__init__`),
  `torch/distributed/utils.py` (`_sync_module_states`)
"""
    valid = (
        Valid(
            "import torch\nimport torch_xla\n"
            "def _mp_fn(index):\n    torch.manual_seed(42)\n    model = torch.nn.Linear(4, 4)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        # Built on the XLA device: initialised from the device's generator, which
        # torch.manual_seed does not seed (a fresh user measured equal weights for seeds 1, 2).
        Valid(
            "import torch\nimport torch_xla\n"
            "def _mp_fn(index):\n    torch.manual_seed(index)\n"
            "    model = torch.nn.Linear(4, 4, device=torch_xla.device())\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\n"
            "def _mp_fn(index):\n    torch.manual_seed(42)\n    model = torch.nn.Linear(4, 4)\n"
            "    torch.manual_seed(42 + index)\n    shuffle(data)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH + "def _mp_fn(index):\n    torch.manual_seed(xm.get_ordinal())\n"
            "    model = torch.nn.Linear(4, 4).to(torch_xla.device())\n"
            "    xm.broadcast_master_param(model)\n"
            "import torch\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch.distributed as dist\nimport torch_xla\n"
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "def _mp_fn(index):\n    dist.init_process_group('xla', init_method='xla://')\n"
            "    torch.manual_seed(dist.get_rank())\n    model = DDP(torch.nn.Linear(4, 4))\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\nimport torch_xla.runtime as xr\n"
            "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
            "def _mp_fn(index):\n    torch.manual_seed(xr.global_ordinal())\n"
            "    model = torch.nn.Linear(4, 4)\n    model = FSDP(model)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import random\nimport numpy as np\nimport torch\nimport torch_xla\n"
            "def _mp_fn(index):\n    np.random.seed(index)\n    random.seed(index)\n"
            "    model = torch.nn.Linear(4, 4)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\nimport torch_xla.runtime as xr\n"
            "def _mp_fn(index):\n"
            "    def worker_init_fn(worker_id):\n"
            "        torch.manual_seed(1234 + worker_id + xr.global_ordinal())\n"
            "    model = torch.nn.Linear(4, 4)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\n"
            "def _mp_fn(index):\n    torch.manual_seed(42)\n    torch_xla.manual_seed(42 + index)\n"
            "    model = torch.nn.Linear(4, 4)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n"
            "def _mp_fn(index):\n    torch.manual_seed(xm.get_ordinal())\n"
            "    model = torch.nn.Linear(4, 4)\n"
            "    model.load_state_dict(torch.load('init.pt'))\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla.runtime as xr\nxr.use_spmd()\n"
            "torch.manual_seed(xr.global_ordinal())\nmodel = torch.nn.Linear(4, 4)\n"
        ),
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\n"
            "torch.manual_seed(xm.get_ordinal())\nmodel = torch.nn.Linear(4, 4)\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch\nimport torch.nn as nn\nimport torch_xla\n"
            "class Net(nn.Module):\n    pass\n"
            "def _mp_fn(index):\n    torch.manual_seed(index)\n    model = Net()\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
            (7,),
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\n"
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "from transformers import AutoConfig, AutoModelForCausalLM, set_seed\n"
            "def train(index, args):\n    set_seed(args.seed + xm.get_ordinal())\n"
            "    config = AutoConfig.from_pretrained(args.model)\n"
            "    model = AutoModelForCausalLM.from_config(config)\n"
            "xmp.spawn(train, args=(args,))\n",
            (5,),
        ),
        Invalid(
            "import os\nimport torch\nimport torch_xla\n"
            "def seed_all(seed):\n    torch.manual_seed(seed)\n"
            "def main():\n    rank = int(os.environ['RANK'])\n    seed_all(100 + rank)\n"
            "    model = torch.nn.Sequential(torch.nn.Linear(4, 4))\n"
            "if __name__ == '__main__':\n    main()\n",
            (8,),
            files=(("run.sh", "torchrun --nproc_per_node=4 example.py\n"),),
        ),
    )

    def other_source(self, node: cst.CSTNode, site: Site | None) -> str | None:
        """The index parameter of a function this file launches (``def _mp_fn(index):``), or
        Accelerate's ``process_index`` (``accelerator.process_index``)."""
        ctx = self.ctx
        if type(node) is cst.Name:
            value = value_of(ctx, node, site)
            if isinstance(value, Unknown) and value.kind == PARAMETER:
                return _index_parameters(ctx).get(id(value.node))
            return None
        if type(node) is cst.Attribute and node.attr.value in _ACCELERATE_INDEXES:
            base = node.value
            if type(base) is cst.Name:
                found = definition(ctx, base, site)
                base = found[0] if found is not None else base
            if ctx.is_call_to(base, _ACCELERATE_STATES):
                return f"Accelerate's `{node.attr.value}`"
        return None

    def call_source(self, call: cst.Call) -> str | None:
        """``set_seed(seed, device_specific=True)`` of Accelerate adds the process index."""
        if not self.ctx.is_call_to(call, ACCELERATE_SET_SEED):
            return None
        arg = find_arg(call, "device_specific", 1)
        if arg is None:
            return None
        value = value_of(self.ctx, arg.value)
        if isinstance(value, Known) and value.value is True:
            return "`device_specific=True` (Accelerate adds the process index)"
        return None

    def synchronised(self) -> bool:
        """The file broadcasts parameters or wraps the model in DDP/FSDP/Lightning anywhere
        (:data:`PARAMETER_SYNCS`), or loads a checkpoint into it after the seed."""
        ctx = self.ctx
        if ctx.memo(_syncs_parameters, lambda: _syncs_parameters(ctx)):
            return True
        return any(_loads_model(ctx, n) for s in statements_after(ctx) for n in calls_that_run(s))


def _index_parameters(ctx: FileContext) -> dict[int, str]:
    """The first parameter of each function this file launches (``torch_xla.launch`` and
    ``xmp.spawn`` call ``fn(index, *args)`` with the global ordinal: torch_xla/_internal/pjrt.py
    ``_SpawnFn``), by the id of its Param node, with how the message names it."""
    return ctx.memo(_index_parameters, lambda: _find_index_parameters(ctx))


def _find_index_parameters(ctx: FileContext) -> dict[int, str]:
    out: dict[int, str] = {}
    for name, fn in launched_functions(ctx).items():
        params = fn.params.params
        if params:
            first = params[0]
            text = f"`{first.name.value}`, the global ordinal `{name}` receives from the launch"
            out[id(first)] = text
    return out


def _syncs_parameters(ctx: FileContext) -> bool:
    """The file calls one of :data:`PARAMETER_SYNCS`, makes a Lightning ``Trainer``/``Fabric``,
    or calls a function whose name says it broadcasts or wraps in DDP/FSDP (``broadcast_params``,
    ``sync_model_states``, ``wrap_ddp``: the rule cannot read another module's body). Each call
    is resolved in its own scope (an import inside a function counts)."""
    owners: list[cst.Module | cst.FunctionDef | cst.ClassDef] = [ctx.module]
    owners += [n for n in iter_nodes(ctx.module) if isinstance(n, (cst.FunctionDef, cst.ClassDef))]
    for owner in owners:
        scope = ctx.scopes.get(owner)
        body: cst.CSTNode = owner if isinstance(owner, cst.Module) else owner.body
        for call in calls_that_run(body):
            names = ctx.qnames(call.func, scope)
            if names & PARAMETER_SYNCS or any(
                q.startswith(LIGHTNING_ROOTS) and q.endswith(_LIGHTNING_RUNNERS) for q in names
            ):
                return True
            last = (dotted_name(call.func) or "").rsplit(".", 1)[-1].lower()
            if any(w in last for w in _SYNC_WORDS) or (
                "sync" in last and any(w in last for w in _SYNC_OBJECTS)
            ):
                return True
    return False


def _loads_model(ctx: FileContext, call: cst.Call) -> bool:
    """``call`` loads saved values into a model: ``x.load_state_dict(...)`` (not an optimizer's or
    a scheduler's), torch.distributed.checkpoint's loads, ``load_checkpoint(...)``."""
    func = call.func
    if type(func) is cst.Attribute and func.attr.value in _LOAD_METHODS:
        owner = (dotted_name(func.value) or "").lower()
        return not any(word in owner for word in _NOT_MODEL_STATE)
    if ctx.qnames(func) & _LOAD_APIS:
        return True
    last = dotted_name(func)
    return last is not None and any(w in last.rsplit(".", 1)[-1].lower() for w in _LOAD_WORDS)


# Multiprocessing objects that refuse to be pickled ("... should only be shared between processes
# through inheritance": multiprocessing/synchronize.py, queues.py, sharedctypes.py), by factory name.
# A Pipe's connections and a Manager's proxies pickle; measured with torch 2.9.0's multiprocessing.
_INHERIT_ONLY = frozenset(
    {
        "Queue",
        "SimpleQueue",
        "JoinableQueue",
        "Lock",
        "RLock",
        "Event",
        "Condition",
        "Semaphore",
        "BoundedSemaphore",
        "Barrier",
        "Value",
        "Array",
    }
)
_MP_ROOTS = ("multiprocessing", "torch.multiprocessing")


class SpawnUnpicklable(Rule):
    code = "XLA029"
    name = "spawn-unpicklable"
    summary = (
        "xmp.spawn/torch_xla.launch given a lambda, a nested function or a multiprocessing "
        "Queue/Lock/Event: they cannot be pickled to the worker processes."
    )
    message = (
        "{what} cannot be pickled, and `{api}` pickles its function and `args` to send them to "
        "the worker processes: it raises {error} before training starts; {fix}"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `xmp.spawn(fn, args=...)` and `torch_xla.launch(fn, args=...)` when `fn` is a
`lambda`, a function defined inside another function (or a name assigned one, or a
`functools.partial` of one), or when an element of `args` is a `multiprocessing` /
`torch.multiprocessing` `Queue`, `SimpleQueue`, `JoinableQueue`, `Lock`, `RLock`, `Event`,
`Condition`, `Semaphore`, `BoundedSemaphore`, `Barrier`, `Value` or `Array` (made there, or
a name assigned one, also through `mp.get_context(...)`). Not flagged: `xmp.spawn(...,
nprocs=1)` and `torch_xla.launch(..., debug_single_process=True)`, which run `fn` in the
calling process; a `Manager()`'s queues and a `Pipe()`'s connections, which pickle.

## Why is this bad
In torch_xla 2.9.0, `torch_xla.launch` calls `xmp.spawn`, which calls
`torch_xla/_internal/pjrt.py` `spawn` → `run_multiprocess`: the function and its `args`
are wrapped in `_SpawnFn` ("Pickle-able wrapper") and handed to a
`concurrent.futures.ProcessPoolExecutor`, which pickles every task to send it to a worker
process, whatever the start method (`fork` too), and on every device type (on CPU too,
with one worker). A local function or a lambda is pickled by name and cannot be found
(`AttributeError: Can't pickle local object 'main.<locals>.nested'`); a multiprocessing
synchronisation object refuses (`RuntimeError: Queue objects should only be shared between
processes through inheritance`). Measured with torch_xla 2.9.0 on CPU for each of them;
`xmp.spawn(..., nprocs=1)` (`_run_singleprocess`) and a `Manager().Queue()` run. Under
`torchrun`, `torch_xla.launch` calls `fn` directly and nothing is pickled: a program
started only that way does not raise.

## Example
```python
import torch.multiprocessing as mp
import torch_xla

def main():
    results = mp.Queue()
    def _mp_fn(index, results):
        results.put(train(index))
    torch_xla.launch(_mp_fn, args=(results,))
```

## Use instead
```python
import torch.multiprocessing as mp
import torch_xla

def _mp_fn(index, results):          # at module level: pickled by name
    results.put(train(index))

def main():
    results = mp.Manager().Queue()   # a proxy, which pickles
    torch_xla.launch(_mp_fn, args=(results,))
```

## References
- torch_xla 2.9.0 `torch_xla/_internal/pjrt.py` (`spawn`, `run_multiprocess`, `_SpawnFn`),
  `torch_xla/torch_xla.py` (`launch`)
- https://docs.python.org/3/library/multiprocessing.html#programming-guidelines ("Explicitly
  pass resources to child processes", picklability)
"""
    valid = (
        Valid(
            "import torch_xla\nimport torch.multiprocessing as mp\n"
            "def _mp_fn(index, q):\n    q.put(index)\n"
            "if __name__ == '__main__':\n    q = mp.Manager().Queue()\n"
            "    torch_xla.launch(_mp_fn, args=(q,))\n"
        ),
        Valid(
            "import torch_xla\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def main():\n    def nested(index):\n        pass\n"
            "    xmp.spawn(nested, nprocs=1)\n"
            "    torch_xla.launch(lambda i: None, debug_single_process=True)\n"
        ),
        Valid(
            "import multiprocessing\nimport torch_xla\n"
            "def _mp_fn(index, conn):\n    conn.send(index)\n"
            "def main():\n    parent, child = multiprocessing.Pipe()\n"
            "    torch_xla.launch(_mp_fn, args=(child,))\n"
        ),
        # A module-level function, a method of an instance, a partial of a module-level function.
        Valid(
            "import functools\nimport torch_xla\n"
            "def _mp_fn(index, cfg):\n    pass\n"
            "class Launcher:\n    def run(self, index):\n        pass\n"
            "    def go(self):\n        torch_xla.launch(self.run)\n"
            "def main(cfg):\n    torch_xla.launch(functools.partial(_mp_fn, cfg=cfg))\n"
            "    torch_xla.launch(_mp_fn, args=(cfg,))\n"
        ),
        # torch's own mp.spawn is not torch_xla's (it starts processes itself, by inheritance).
        Valid(
            "import torch.multiprocessing as mp\nimport torch_xla\n"
            "def main():\n    q = mp.Queue()\n    mp.spawn(lambda i, q: None, args=(q,), nprocs=2)\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch.multiprocessing as mp\nimport torch_xla\n"
            "def main():\n    results = mp.Queue()\n"
            "    def _mp_fn(index, results):\n        results.put(index)\n"
            "    torch_xla.launch(_mp_fn, args=(results,))\n",
            (7, 7),
        ),
        # nreimers/se-pytorch-xla train_many_data_files_v1.py: a Queue through xmp.spawn's args
        Invalid(
            "import multiprocessing as mp\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def _mp_fn(index, queue):\n    pass\n"
            "if __name__ == '__main__':\n    ctx = mp.get_context('spawn')\n"
            "    xmp.spawn(_mp_fn, args=(ctx.Queue(),))\n"
            "    lock = mp.Lock()\n    xmp.spawn(_mp_fn, (lock,))\n",
            (7, 9),
        ),
        Invalid("import torch_xla\ntorch_xla.launch(lambda index: print(index))\n", (2,)),
        # A function defined under the main guard, a queue inside a dict of args.
        Invalid(
            "import torch.multiprocessing as mp\nimport torch_xla\n"
            "if __name__ == '__main__':\n    def _mp_fn(index, box):\n        pass\n"
            "    torch_xla.launch(_mp_fn, args=({'queue': mp.Queue()},))\n",
            (6, 6),
        ),
        # nreimers/se-pytorch-xla train_many_data_files_v1.py: a list of queues
        Invalid(
            "import torch.multiprocessing as mp\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def main(files):\n    queues = []\n    for f in files:\n"
            "        queue = mp.Queue(maxsize=8)\n        queues.append(queue)\n"
            "    xmp.spawn(train, args=(files, queues), start_method='fork')\n",
            (8,),
        ),
        Invalid(
            "import functools\nimport torch_xla\n"
            "def main(cfg):\n    def train(index, cfg):\n        pass\n"
            "    fn = functools.partial(train, cfg=cfg)\n    torch_xla.launch(fn)\n",
            (7,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        if ctx.is_call_to(node, apis.LAUNCH):
            api = "torch_xla.launch"
            single = find_arg(node, "debug_single_process", 3)
            if single is not None and _is_true_literal(single.value):
                return
        elif ctx.is_call_to(node, apis.SPAWN):
            api = "xmp.spawn"
            nprocs = find_arg(node, "nprocs", 2)
            if nprocs is not None and _is_one(value_of(ctx, nprocs.value)):
                return
        else:
            return
        fn = find_arg(node, "fn", 0)
        if fn is not None:
            what = self._unpicklable_function(fn.value, 0)
            if what is not None:
                self.report(
                    node,
                    self.message.format(
                        what=what,
                        api=api,
                        error="a pickling error (`Can't pickle local object`, `Can't get "
                        "attribute ... on <module '__mp_main__'>`)",
                        fix="define the function at module level, outside `if __name__ == "
                        "'__main__':`",
                    ),
                )
        args = find_arg(node, "args", 1)
        if args is None:
            return
        value = args.value
        if type(value) is cst.Name:
            found = definition(ctx, value)
            value = found[0] if found is not None else value
        if not isinstance(value, (cst.Tuple, cst.List)):
            return
        for item in _contents(value):
            kind = self._inherit_only(item) or self._collects_inherit_only(item)
            if kind is not None:
                self.report(
                    node,
                    self.message.format(
                        what=f"a multiprocessing `{kind}`",
                        api=api,
                        error="`RuntimeError: ... objects should only be shared between "
                        "processes through inheritance`",
                        fix="pass a `Manager().Queue()`-style proxy (`mp.Manager()` makes "
                        "queues, locks and events that pickle), or create it in each process",
                    ),
                )

    def _unpicklable_function(self, expr: cst.BaseExpression, depth: int) -> str | None:
        """What makes ``expr`` (the launched function) unpicklable: "a `lambda`", "the nested
        function `name`", or None. Follows a name assigned once and a ``functools.partial``."""
        ctx = self.ctx
        if type(expr) is cst.Lambda:
            return "a `lambda`"
        if type(expr) is cst.Call and ctx.is_call_to(expr, "functools.partial") and expr.args:
            return self._unpicklable_function(expr.args[0].value, depth + 1) if depth < 3 else None
        if type(expr) is not cst.Name:
            return None
        if _local_function(ctx, expr.value):
            return f"the nested function `{expr.value}`"
        found = definition(ctx, expr)
        if found is not None and depth < 3:
            return self._unpicklable_function(found[0], depth + 1)
        return None

    def _inherit_only(self, expr: cst.BaseExpression) -> str | None:
        """The class name (``Queue``) when ``expr`` makes or names a multiprocessing object
        that only pickles for a child started by inheritance, else None. A name is read at
        the node being visited (the launch call)."""
        ctx = self.ctx
        if type(expr) is cst.Name:
            found = definition(ctx, expr)
            if found is None:
                return None
            expr = found[0]
        if type(expr) is not cst.Call:
            return None
        func = expr.func
        if type(func) is not cst.Attribute or func.attr.value not in _INHERIT_ONLY:
            return None
        kind = func.attr.value
        for name in ctx.qnames(func):
            if any(name == f"{root}.{kind}" for root in _MP_ROOTS):
                return kind
        owner = func.value  # ctx.Queue() with ctx = mp.get_context(...)
        if type(owner) is cst.Name:
            found = definition(ctx, owner)
            owner = found[0] if found is not None else owner
        if type(owner) is cst.Call and any(
            name in (f"{root}.get_context" for root in _MP_ROOTS) for name in ctx.qnames(owner.func)
        ):
            return kind
        return None

    def _collects_inherit_only(self, expr: cst.BaseExpression) -> str | None:
        """The class name when ``expr`` is a list the enclosing function (or the module)
        fills with such objects: ``queues.append(mp.Queue())`` or ``q = mp.Queue()`` then
        ``queues.append(q)`` (nreimers/se-pytorch-xla passes the list to ``xmp.spawn``)."""
        if type(expr) is not cst.Name:
            return None
        body = next(iter(self.ctx.enclosing(cst.FunctionDef)), self.ctx.module)
        made: dict[str, str] = {}  # local name -> the class of the object assigned to it
        added: list[cst.BaseExpression] = []  # what is appended to the list
        for node in iter_nodes(body):
            if type(node) is cst.Assign and len(node.targets) == 1:
                target = node.targets[0].target
                if type(target) is cst.Name and type(node.value) is cst.Call:
                    kind = self._inherit_only(node.value)
                    if kind is not None:
                        made[target.value] = kind
            elif (
                type(node) is cst.Call
                and type(node.func) is cst.Attribute
                and node.func.attr.value in ("append", "insert")
                and type(node.func.value) is cst.Name
                and node.func.value.value == expr.value
                and node.args
            ):
                added.append(node.args[-1].value)
        for item in added:
            kind = made.get(item.value) if type(item) is cst.Name else self._inherit_only(item)
            if kind is not None:
                return kind
        return None


def _contents(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values a tuple, list or dict display holds, nested displays opened (``args=(cfg,
    {"queue": q})`` gives ``cfg`` and ``q``); any other expression is itself."""
    if isinstance(node, (cst.Tuple, cst.List)):
        return [v for e in node.elements for v in _contents(e.value)]
    if isinstance(node, cst.Dict):
        return [
            v for e in node.elements if isinstance(e, cst.DictElement) for v in _contents(e.value)
        ]
    return [node]


def _is_true_literal(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Name and node.value == "True"


def _defined_under_main_guard(module: cst.Module, name: str) -> bool:
    """True when the module defines function ``name`` only inside ``if __name__ ==
    "__main__":``: a spawned worker imports the script as ``__mp_main__``, where that block
    does not run, so unpickling the function by name fails (measured with torch_xla 2.9.0)."""
    inside = outside = False
    for stmt in module.body:
        if type(stmt) is cst.FunctionDef and stmt.name.value == name:
            outside = True
        elif type(stmt) is cst.If and _is_main_guard(stmt.test):
            inside = inside or any(
                type(n) is cst.FunctionDef and n.name.value == name for n in iter_nodes(stmt.body)
            )
    return inside and not outside


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    words = {
        n.value if type(n) is cst.Name else literal_string(n)
        for n in (test.left, target.comparator)
    }
    return type(target.operator) is cst.Equal and words == {"__name__", "__main__"}


def _local_function(ctx, name: str) -> bool:
    """True when ``name``, read in the scope being visited, is a function defined inside
    another function's body (a closure: pickle looks it up by ``__qualname__`` and fails)."""
    scope = ctx.scope
    while scope is not None and name not in scope.bindings:
        scope = scope.parent
    if scope is not None and scope.kind == "module":
        return _defined_under_main_guard(ctx.module, name)
    if scope is None or scope.kind != "function" or scope.node is None:
        return False
    return any(
        type(n) is cst.FunctionDef and n.name.value == name
        for n in iter_nodes(scope.node.body)
        if n is not scope.node
    )
