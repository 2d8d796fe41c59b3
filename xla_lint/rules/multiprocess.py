"""Multi-process (one process per device) programs: replicas that must stay in step."""

from __future__ import annotations

import libcst as cst

from .. import apis
from ..context import find_arg
from ..diagnostics import Severity
from ..rule import Invalid, Rule, Valid
from ..walk import iter_nodes
from .spmd import DEVICE_APIS, DeviceUse, function_key

MULTIPROCESS = [("multiprocess", True), ("spmd", False)]

_LAUNCH = "import torch_xla\nimport torch_xla.core.xla_model as xm\n"

# Tests that hold on some replicas only: `if xm.is_master_ordinal():`, `if xr.global_ordinal() == 0:`.
ORDINAL_APIS = frozenset({f"{apis.XR}.global_ordinal", f"{apis.XR}.local_ordinal", f"{apis.XM}.get_ordinal",
                          f"{apis.XM}.get_local_ordinal", f"{apis.XR}.process_index"})
MASTER_APIS = frozenset({f"{apis.XM}.is_master_ordinal"})

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

# Calls that initialise the PJRT runtime in the calling process (torch_xla/runtime.py:
# they read the device list or ordinals from the PJRT client).
RUNTIME_QUERIES = frozenset({
    f"{apis.XR}.{n}" for n in ("global_runtime_device_count", "global_device_count", "world_size",
                               "global_ordinal", "local_ordinal", "addressable_device_count",
                               "addressable_runtime_device_count", "local_device_count",
                               "global_runtime_device_attributes", "runtime_device_attributes",
                               "process_index", "process_count")
} | {f"{apis.XM}.{n}" for n in ("xrt_world_size", "get_ordinal", "get_local_ordinal", "is_master_ordinal",
                                 "get_xla_supported_devices", "set_rng_state")}
  | {"torch_xla.devices", "torch_xla.device_count", "torch_xla.real_devices", "torch_xla.manual_seed"})
_DEVICE_OR_RUNTIME = DEVICE_APIS | RUNTIME_QUERIES

CLIP_APIS = frozenset({"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_",
                       "torch.nn.utils.clip_grad_norm", "torch.nn.utils.clip_grad.clip_grad_norm_",
                       "torch.nn.utils.clip_grad.clip_grad_value_"})


def _divergent_test(ctx, test: cst.BaseExpression) -> bool:
    """True when ``test`` holds on some replicas only: it calls ``is_master_ordinal`` or
    compares an ordinal (``xr.global_ordinal() == 0``)."""
    for node in _walk(test):
        if isinstance(node, cst.Call):
            names = ctx.qnames(node.func)
            if names & MASTER_APIS:
                return True
        if isinstance(node, cst.Comparison):
            sides = [node.left, *(c.comparator for c in node.comparisons)]
            if any(isinstance(s, cst.Call) and ctx.qnames(s.func) & ORDINAL_APIS for s in sides):
                return True
    return False


EVAL_WORDS = frozenset({"test", "eval", "evaluation", "val", "valid", "validation", "dev", "holdout"})


def _target_names(node: cst.BaseExpression) -> str:
    """The identifiers of a Name/Attribute chain joined with ``_`` (``self.test_loader`` -> ``self_test_loader``)."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
    return "_".join(reversed(parts))


def _words(name: str) -> list[str]:
    """``testDataset_v2`` -> ``["test", "dataset", "v2"]``."""
    out = []
    for chunk in name.split("_"):
        word = ""
        for ch in chunk:
            if ch.isupper() and word and not word[-1].isupper():
                out.append(word.lower())
                word = ""
            word += ch
        if word:
            out.append(word.lower())
    return out


def _walk(node: cst.CSTNode):
    return iter_nodes(node)


class ReplicaDivergentSync(Rule):
    code = "XLA015"
    name = "replica-divergent-sync"
    summary = "A graph-executing or collective call under `if xm.is_master_ordinal():`: the other replicas never reach it."
    message = ("`{api}` under a branch only some replicas take (`{test}`): {why}; run it on every replica "
               "(or log through `xm.add_step_closure`)")
    severity = Severity.ERROR
    explanation = """\
## What it does
In a multi-process program (`torch_xla.launch`, `xmp.spawn`, an `xla` process group)
that is not SPMD, flags `.item()`, `.cpu()`, `xm.save`, `xm.rendezvous`,
`xm.xla_rendezvous`, `xm.mesh_reduce`, `xm.all_reduce`, `xm.all_gather`,
`xm.mark_step`, `torch_xla.sync()` and `dist.barrier()` inside an `if` whose test only
holds on some replicas: `xm.is_master_ordinal()`, or a comparison of
`xr.global_ordinal()`, `xr.local_ordinal()`, `xm.get_ordinal()`... with a value.

## Why is this bad
Every replica runs the same program and the collectives in it must be entered by all of
them. In torch_xla 2.9.0 (`torch_xla/core/xla_model.py`): `rendezvous` is an
`xla_rendezvous`, an XLA `all_gather` over all replicas; `mesh_reduce` is a
`rendezvous`; `save` is meant to be called by every replica (it syncs the tensors on
every replica, `_maybe_convert_to_cpu`, and writes only on the master itself,
`should_write_data = not master_only or is_master_ordinal(...)`). Called from one
replica, these wait for replicas that never come: the job hangs. `.item()`, `.cpu()`
and `torch_xla.sync()` on one replica execute the pending graph there alone: when that
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

## References
- https://docs.pytorch.org/xla/master/learn/pytorch-on-xla-devices.html
- torch_xla 2.9.0 `torch_xla/core/xla_model.py` (`save`, `rendezvous`, `mesh_reduce`, `add_step_closure`)
"""
    valid = (
        Valid(_LAUNCH + "def _mp_fn(i):\n    xm.save(model.state_dict(), 'm.pt')\n"
              "    if xm.is_master_ordinal():\n        print('saved', flush=True)\n"
              "torch_xla.launch(_mp_fn)\n"),
        Valid(_LAUNCH + "import torch_xla.runtime as xr\nxr.use_spmd()\n"
              "if xr.process_index() == 0:\n    print(loss.item(), flush=True)\n"),
        Valid(_LAUNCH + "def _mp_fn(i):\n    if xm.is_master_ordinal():\n"
              "        def log(l):\n            print(l.item(), flush=True)\n"
              "        xm.add_step_closure(log, args=(loss,))\ntorch_xla.launch(_mp_fn)\n"),
        Valid("import torch_xla.core.xla_model as xm\nif xm.is_master_ordinal():\n    v = t.item()\n"),
    )
    invalid = (
        Invalid(_LAUNCH + "def _mp_fn(i):\n    if xm.is_master_ordinal():\n"
                "        print(loss.item(), flush=True)\n        xm.save(model.state_dict(), 'm.pt')\n"
                "torch_xla.launch(_mp_fn)\n", (5, 6)),
        Invalid("import torch_xla\nfrom torch_xla import runtime as xr\n"
                "import torch_xla.distributed.xla_multiprocessing as xmp\n"
                "def _mp_fn(i):\n    if xr.global_ordinal() == 0:\n        torch_xla.sync()\n"
                "    else:\n        torch_xla.core.xla_model.rendezvous('wait')\nxmp.spawn(_mp_fn)\n", (6, 8)),
        Invalid(_LAUNCH + "import torch.distributed as dist\ndef _mp_fn(i):\n"
                "    if not xm.is_master_ordinal(local=False):\n        return\n"
                "    for batch in loader:\n        if xm.is_master_ordinal():\n            dist.barrier()\n"
                "torch_xla.launch(_mp_fn)\n", (9,)),
    )

    def visit_Call(self, node: cst.Call) -> None:
        api = self._sync_api(node)
        if api is None:
            return
        test = self._divergent_branch()
        if test is None:
            return
        why = ("the other replicas never enter the collective and the job hangs"
               if api not in SYNC_METHODS.values() and api not in ("torch_xla.sync", "xm.mark_step")
               else "it executes the pending graph on these replicas alone, which hangs if the graph "
                    "holds a collective and makes the replicas' graphs diverge otherwise")
        text = " ".join(self.ctx.module.code_for_node(test).split())
        self.report(node, self.message.format(api=api, test=text[:60], why=why), requires=MULTIPROCESS)

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

    def _divergent_branch(self) -> cst.BaseExpression | None:
        stack = self.ctx.stack
        for i in range(len(stack) - 2, -1, -1):
            node = stack[i]
            if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return None
            if isinstance(node, (cst.If, cst.IfExp)) and stack[i + 1] is not node.test:
                if _divergent_test(self.ctx, node.test):
                    return node.test
        return None


class ClipBeforeReduce(Rule):
    code = "XLA016"
    name = "clip-before-reduce"
    summary = "clip_grad_norm_ before xm.optimizer_step clips the local, un-reduced gradients."
    message = ("`{api}` before `xm.optimizer_step` clips each replica's local gradients before they are "
               "reduced; call `xm.reduce_gradients(optimizer)`, clip, then `optimizer.step()`")
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
        Valid(_LAUNCH + "import torch\ndef _mp_fn(i):\n    xm.reduce_gradients(opt)\n"
              "    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)\n    opt.step()\n"
              "torch_xla.launch(_mp_fn)\n"),
        Valid("import torch\nimport torch_xla.core.xla_model as xm\n"
              "torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)\nxm.optimizer_step(opt)\n"),
        Valid(_LAUNCH + "def _mp_fn(i):\n    model.clip_grad_norm_(1.0)\n    xm.optimizer_step(opt)\n"
              "torch_xla.launch(_mp_fn)\n"),
    )
    invalid = (
        Invalid(_LAUNCH + "import torch\ndef _mp_fn(i):\n    loss.backward()\n"
                "    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)\n    xm.optimizer_step(opt)\n"
                "torch_xla.launch(_mp_fn)\n", (6,)),
        Invalid("from torch.nn.utils import clip_grad_value_\nfrom torch_xla.core import xla_model as xm\n"
                "import torch_xla.distributed.xla_multiprocessing as xmp\n"
                "def train(i):\n    clip_grad_value_(params, 0.5)\n    xm.optimizer_step(opt, barrier=True)\n"
                "xmp.spawn(train)\n", (5,)),
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


class MissingDistributedSampler(Rule):
    code = "XLA017"
    name = "missing-distributed-sampler"
    summary = "A map-style DataLoader without a sampler in a multi-process program: every replica reads the same batches."
    message = ("`DataLoader` without `sampler=` in a multi-process program: every replica iterates the whole "
               "dataset in the same order; pass `DistributedSampler(dataset, num_replicas=xr.world_size(), "
               "rank=xr.global_ordinal())`")
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
- torch_xla 2.9.0 `torch_xla/torch_xla.py` (`launch`)
"""
    valid = (
        Valid(_LAUNCH + "from torch.utils.data import DataLoader, DistributedSampler\n"
              "def _mp_fn(i):\n    s = DistributedSampler(ds)\n    loader = DataLoader(ds, batch_size=8, sampler=s)\n"
              "torch_xla.launch(_mp_fn)\n"),
        Valid(_LAUNCH + "import torch.utils.data as data\nclass Stream(data.IterableDataset):\n    pass\n"
              "def _mp_fn(i):\n    loader = data.DataLoader(Stream(), batch_size=8)\ntorch_xla.launch(_mp_fn)\n"),
        Valid("import torch_xla\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\n"),
        Valid(_LAUNCH + "from torch.utils.data import DataLoader\n"
              "def _mp_fn(i):\n    loader = DataLoader(ds, batch_sampler=bs)\ntorch_xla.launch(_mp_fn)\n"),
        Valid(_LAUNCH + "from torch.utils.data import DataLoader\n"
              "def _mp_fn(i):\n    test_loader = DataLoader(test_dataset, batch_size=8, shuffle=False)\n"
              "    evalLoader = DataLoader(ds, batch_size=8)\ntorch_xla.launch(_mp_fn)\n"),
    )
    invalid = (
        Invalid(_LAUNCH + "from torch.utils.data import DataLoader\n"
                "def _mp_fn(i):\n    loader = DataLoader(ds, batch_size=8, shuffle=True)\n"
                "torch_xla.launch(_mp_fn)\n", (5,)),
        Invalid("import torch\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
                "def train(i):\n    loader = torch.utils.data.DataLoader(ds, 8)\nxmp.spawn(train)\n", (4,)),
        Invalid(_LAUNCH + "import torch\ndef _mp_fn(i):\n    attest = make()\n"
                "    self.train_loader = torch.utils.data.DataLoader(latest_dataset, batch_size=8)\n"
                "torch_xla.launch(_mp_fn)\n", (6,)),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._iterable: set[str] | None = None

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.is_call_to(node, "torch.utils.data.DataLoader"):
            return
        if any(a.star for a in node.args):
            return
        if find_arg(node, "sampler", 3) is not None or find_arg(node, "batch_sampler", 4) is not None:
            return
        dataset = find_arg(node, "dataset", 0)
        if dataset is not None and self._is_iterable(dataset.value):
            return
        if self._is_evaluation(node, dataset):
            return
        self.report(node, requires=MULTIPROCESS)

    def _is_evaluation(self, node: cst.Call, dataset: cst.Arg | None) -> bool:
        """A loader named for evaluation (``test_loader = DataLoader(test_dataset, ...)``): every
        replica evaluating the whole set repeats work but the reduced metric is still right."""
        names: list[str] = []
        parent = self.ctx.parent()
        if isinstance(parent, cst.Assign):
            names.extend(_target_names(t.target) for t in parent.targets)
        if dataset is not None:
            names.append(_target_names(dataset.value))
        return any(EVAL_WORDS & set(_words(n)) for n in names)

    def _is_iterable(self, node: cst.BaseExpression) -> bool:
        """An instance of an ``IterableDataset`` subclass defined in this file."""
        if self._iterable is None:
            self._iterable = set()
            for stmt in _walk(self.ctx.module):
                if isinstance(stmt, cst.ClassDef) and any(
                        isinstance(b.value, (cst.Name, cst.Attribute))
                        and (b.value.value if isinstance(b.value, cst.Name) else b.value.attr.value)
                        in ("IterableDataset", *self._iterable) for b in stmt.bases):
                    self._iterable.add(stmt.name.value)
        if isinstance(node, cst.Call):
            node = node.func
        return isinstance(node, cst.Name) and node.value in self._iterable


class XlaBeforeLaunch(Rule):
    code = "XLA018"
    name = "xla-before-launch"
    summary = "The XLA runtime is used in the parent process before torch_xla.launch/xmp.spawn."
    message = ("`{what}` uses the XLA runtime in the parent process before `{launch}`: the parent takes the "
               "devices and the launch fails with 'Runtime is already initialized'; move it into the "
               "spawned function")
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

## Why is this bad
These calls create the PJRT client in the calling process, which opens the host's
devices. `xmp.spawn` then refuses to start (torch_xla 2.9.0
`torch_xla/_internal/pjrt.py`, `run_multiprocess`: `RuntimeError: Runtime is already
initialized. Do not use the XLA device before calling xmp.spawn.`), and
`torch_xla.launch` calls `xmp.spawn`. Module-level code also runs again in every child
when the start method is `spawn` (the main module is re-imported as `__mp_main__`), so
each child initialises the runtime at import, before its per-device setup.

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
        Valid(_LAUNCH + "def _mp_fn(i):\n    device = torch_xla.device()\n"
              "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n"),
        Valid("import torch_xla\nimport torch_xla.runtime as xr\nif xr.device_type() == 'TPU':\n    pass\n"
              "torch_xla.launch(fn)\n"),
        Valid(_LAUNCH + "def main():\n    torch_xla.launch(fn)\n    print(xm.xla_device(), flush=True)\n"),
        Valid(_LAUNCH + "def helper():\n    return torch_xla.device()\ntorch_xla.launch(fn)\n"),
        Valid(_LAUNCH + "device = xm.xla_device()\ntorch_xla.launch(fn, debug_single_process=True)\n"),
    )
    invalid = (
        Invalid(_LAUNCH + "device = torch_xla.device()\ndef _mp_fn(i):\n    pass\n"
                "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n", (3,)),
        Invalid("import torch_xla.runtime as xr\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
                "def main():\n    n = xr.global_runtime_device_count()\n    xmp.spawn(train, args=(n,))\n", (4,)),
        Invalid("import torch\nfrom torch_xla.distributed import xla_multiprocessing as xmp\n"
                "def main():\n    w = torch.zeros(2).to('xla')\n    xmp.spawn(train)\nmain()\n", (4,)),
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
        if not (names & _DEVICE_OR_RUNTIME or self.devices.placement(node)):
            return
        if self.ctx.spmd_branch() is not True:
            self.first[key] = node

    def leave_Module(self, node: cst.Module) -> None:
        first = self.first.get(node)
        if first is not None and self.launch is not None:
            self._report(first, self.launch)

    def _report(self, node: cst.Call, launch: str) -> None:
        text = " ".join(self.ctx.module.code_for_node(node).split())
        self.report(node, self.message.format(what=text if len(text) <= 50 else text[:47] + "...", launch=launch))

    @staticmethod
    def _single_process(node: cst.Call) -> bool:
        nprocs = find_arg(node, "nprocs", 2)
        if nprocs is not None and isinstance(nprocs.value, cst.Integer) and nprocs.value.value == "1":
            return True
        debug = find_arg(node, "debug_single_process", 3)
        return debug is not None and isinstance(debug.value, cst.Name) and debug.value.value == "True"


class SpawnNprocs(Rule):
    code = "XLA019"
    name = "spawn-nprocs"
    summary = "xmp.spawn with nprocs other than 1/None raises ValueError; torch_xla.launch takes no nprocs at all."
    message = ("`nprocs={value}` raises ValueError in torch_xla 2.x: spawn uses every local device; "
               "drop `nprocs` (limit devices with `TPU_NUM_DEVICES`/`CPU_NUM_DEVICES`), or pass 1 to debug")
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `xmp.spawn(fn, nprocs=N)` (positional or keyword) with a literal `N` other than
`1` or `None`, and `torch_xla.launch(..., nprocs=...)` with any value: `launch(fn, args=(),
start_method='spawn', debug_single_process=False)` has no `nprocs` parameter
(`torch_xla/torch_xla.py`, 2.9.0), so the call raises TypeError.

## Why is this bad
Under PJRT, `xmp.spawn` starts one process per local device and takes no count: in
torch_xla 2.9.0 `torch_xla/_internal/pjrt.py`, `spawn`, any `nprocs` other than `1` or
`None` raises `ValueError: Unsupported nprocs (8). Please use nprocs=1 or None
(default)...`. Old XRT-era examples (`xmp.spawn(_mp_fn, nprocs=8)`, also found in
multi-host notes) fail at start-up on every host.

## Example
```python
import torch_xla.distributed.xla_multiprocessing as xmp

xmp.spawn(_mp_fn, args=(flags,), nprocs=8, start_method="fork")
```

## Use instead
```python
import torch_xla

torch_xla.launch(_mp_fn, args=(flags,))  # one process per local device
```
To use fewer devices, set `TPU_NUM_DEVICES` (or `CPU_NUM_DEVICES`) before start-up;
`nprocs=1` (or `torch_xla.launch(..., debug_single_process=True)`) runs one process for
debugging.

## References
- https://docs.pytorch.org/xla/master/learn/pjrt.html
- torch_xla 2.9.0 `torch_xla/_internal/pjrt.py`, `spawn`
"""
    valid = (
        Valid("import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(fn, args=())\n"),
        Valid("import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(fn, args=(), nprocs=1)\n"),
        Valid("import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(fn, (), None)\n"),
        Valid("import torch_xla\nimport torch.multiprocessing as mp\nmp.spawn(fn, nprocs=8)\n"),
    )
    invalid = (
        Invalid("import torch_xla.distributed.xla_multiprocessing as xmp\n"
                "xmp.spawn(_mp_fn, nprocs=8, start_method='fork')\n", (2,)),
        Invalid("import torch_xla\ntorch_xla.launch(_mp_fn, args=(), nprocs=4)\n", (2,)),
        Invalid("from torch_xla.distributed import xla_multiprocessing\n"
                "xla_multiprocessing.spawn(_mp_fn, (), 4)\n", (2,)),
    )

    def visit_Call(self, node: cst.Call) -> None:
        keyword = find_arg(node, "nprocs")
        if keyword is not None and self.ctx.is_call_to(node, apis.LAUNCH):
            self.report(node, "`torch_xla.launch` takes no `nprocs` (TypeError): it starts one process per "
                              "local device; use `debug_single_process=True` for one process")
            return
        arg = find_arg(node, "nprocs", 2)
        if arg is None or not isinstance(arg.value, cst.Integer):
            return
        value = arg.value.evaluated_value
        if value == 1 or not self.ctx.is_call_to(node, apis.SPAWN):
            return
        self.report(node, self.message.format(value=value))
