"""XLA015: a graph run on some replicas only (a host read or a sync under a replica-only test)."""

from __future__ import annotations

from typing import TypeGuard

import libcst as cst

from ...analysis import apis
from ...analysis.context import find_arg, literal_string
from ...analysis.devices import (
    function_key,
)
from ...analysis.functions import LocalFunctions
from ...analysis.holds import may_hold_tensors
from ...analysis.loops import in_step_closure
from ...analysis.pending import nothing_pending
from ...analysis.ranks import Identity, replica_guard
from ...analysis.values import Site, definition
from ...analysis.walk import TRIVIA, walk
from ...diagnostics import Severity
from ...program.facts import Fact
from ...rule import Invalid, Rule, Valid
from .common import _LAUNCH, MULTIPROCESS

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


# Collectives that torch_xla 2.9.0 records in the pending graph (lazily) rather than running at
# once: a host read or sync that executes that graph on some replicas only waits in the
# collective for the others (torch_xla/core/xla_model.py `all_reduce`, `reduce_gradients`, which
# `optimizer_step` calls; torch_xla/distributed/xla_backend.py for the `xla` process group).
LAZY_COLLECTIVES = {
    f"{apis.XM}.all_reduce": "xm.all_reduce",
    f"{apis.XM}.reduce_gradients": "xm.reduce_gradients",
    f"{apis.XM}.optimizer_step": "xm.optimizer_step",
    f"{apis.XM}.all_gather": "xm.all_gather",
    f"{apis.XM}.reduce_scatter": "xm.reduce_scatter",
    f"{apis.XM}.all_to_all": "xm.all_to_all",
    f"{apis.XM}.collective_permute": "xm.collective_permute",
    f"{apis.XM}.collective_broadcast": "xm.collective_broadcast",
    f"{apis.XM}.broadcast_master_param": "xm.broadcast_master_param",
    "torch.distributed.all_reduce": "dist.all_reduce",
    "torch.distributed.all_gather": "dist.all_gather",
    "torch.distributed.all_gather_into_tensor": "dist.all_gather_into_tensor",
    "torch.distributed.reduce_scatter": "dist.reduce_scatter",
    "torch.distributed.reduce_scatter_tensor": "dist.reduce_scatter_tensor",
    "torch.distributed.all_to_all": "dist.all_to_all",
    "torch.distributed.broadcast": "dist.broadcast",
}


class ReplicaDivergentSync(Rule):
    code = "XLA015"
    name = "replica-divergent-sync"
    summary = "A graph-executing or collective call under `if xm.is_master_ordinal():`: the other replicas never reach it."
    message = (
        "`{api}` under a branch only some replicas take (`{test}`): {why}; run it on every replica "
        "(or log through `xm.add_step_closure`)"
    )
    severity = Severity.ERROR
    # The precision gate (issue 22): 8 wrong and 4 harmless of 17 on repositories nobody tuned on,
    # all a master-only `xm.save` right after a sync (no graph pending: it copies device data).
    # Fixed (analysis/pending.py); preview until a new unseen set measures it.
    preview = True
    explanation = """\
## What it does
In a file that imports torch_xla, of a multi-process program (`torch_xla.launch`,
`xmp.spawn`, an `xla` process group, torchrun) that is not SPMD, flags `.item()`, `.cpu()`, `xm.save`, `xm.rendezvous`,
`xm.xla_rendezvous`, `xm.mesh_reduce`, `xm.all_reduce`, `xm.all_gather`,
`xm.mark_step`, `torch_xla.sync()` and `dist.barrier()` inside an `if` whose test only
holds on some replicas (`xla_lint/analysis/ranks.py` `replica_guard`): `xm.is_master_ordinal()`,
or a comparison of a rank (`xr.global_ordinal()`, `xr.local_ordinal()`, `xm.get_ordinal()`,
`xr.process_index()`, `dist.get_rank()`, the launched function's first parameter) with a value,
also through a name or attribute saved from one (`is_root = xm.is_master_ordinal()` ...
`if is_root:`; `rank = dist.get_rank()` ... `if rank == 0:`; `self.rank`). A rank read from
the environment (`int(os.environ["LOCAL_RANK"])`) or the `--local_rank` option splits the
replicas only when the program is started by torchrun, which sets it; under `xmp.spawn` every
replica reads the same default (XLA031). A call of a function of the same module whose own
code runs one of these outside a rank test of its own is flagged at the call
(`if xm.is_master_ordinal(): store_checkpoint(model)` whose body calls `xm.save`;
one call deep: the first such call in its body).

Severity follows the consequence. A collective (`xm.rendezvous`, `xm.mesh_reduce`,
`xm.all_reduce`, `dist.barrier`...) on some replicas only, and a host read or sync whose graph
holds a collective (`.item()` of an `xm.all_reduce` result; `torch_xla.sync()`,
`xm.mark_step()` or `xm.save(model.state_dict())` after `xm.optimizer_step` or another lazy
collective in the same function; any host read of a model split over the replicas, whose
graphs hold collectives: a file importing torch_xla's FSDP or neuronx_distributed's parallel
layers), make the job hang: an error; the lazy collective may be in a function of the
same module called before it (`train_step(...)` whose body calls `xm.optimizer_step`). Any
other host read or sync
under such a guard compiles and runs one more graph on those replicas: a warning.

Not flagged: the "master goes first" idiom, where the same barrier (`xm.rendezvous`,
`xm.xla_rendezvous` or `dist.barrier`, with the same arguments: the same tag) is called in
the same function under complementary branches (`if not xm.is_master_ordinal():` /
`if xm.is_master_ordinal():`, `rank != 0` / `rank == 0`, the `if` and `else` of one test):
every replica enters exactly one of the two, so all of them meet in one rendezvous. Nor
`xm.save` of data that holds no XLA tensor (a scheduler's `state_dict()`, the arguments,
numbers): it syncs nothing. Nor anything in a step closure (a function or lambda the file
gives to `xm.add_step_closure`): torch_xla 2.9.0 runs it inside `torch_xla.sync()` after the
step's graph has run on every replica (`torch_xla/torch_xla.py` `sync`, then
`xla_model._run_step_closures`), and its tensors are that graph's outputs, so a master-only
`.item()` or `.cpu()` there copies values and runs no graph (measured on CPU: 5 steps with
such a closure ran 5 graphs and 1 compile). Nor a host read, `xm.save` or sync where nothing
is pending (`xla_lint/analysis/pending.py`): right after a sync in the same block, or in a block
around it, with no tensor operation since (`xm.mark_step()`, `torch_xla.sync()`,
`xm.optimizer_step(opt, barrier=True)`, the end of `with torch_xla.step():`, `xm.rendezvous`,
which syncs before and after its all-gathers, or a call of a function of the module whose body
ends with one of those; the end of a `for` loop over a device loader without `break`, whose
`PerDeviceLoader.next` syncs before it raises `StopIteration`, or of a loop whose body ends
with a sync; an `if` whose arms only sync or do nothing, such as the first half of the
"master goes first" idiom, leaves what was before it; the start of a function given to
`torch_xla.launch`/`xmp.spawn`, which runs first in a new process, where building a model or
an optimizer and `.to(device)` record nothing). There `xm.save` only copies device data to the host: torch_xla 2.9.0
`save` -> `_maybe_convert_to_cpu` -> `_xla_sync_multi` of tensors that are already device data
compiles and runs nothing, and `save` calls no rendezvous. A device loader's fetch at the top of
an iteration is no such sync for code after the step in the same body.

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
        # A step closure runs after the step's graph on every replica (aws-neuron samples' pattern)
        Valid(
            _LAUNCH + "def _report(step, loss):\n    if xm.is_master_ordinal():\n"
            "        print(step, loss.item(), flush=True)\n"
            "def _mp_fn(i):\n    for step, x in enumerate(loader):\n        loss = model(x)\n"
            "        xm.optimizer_step(opt)\n        xm.add_step_closure(_report, args=(step, loss))\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH + "class T:\n    def _log(self, loss):\n        if xm.is_master_ordinal():\n"
            "            print(loss.cpu(), flush=True)\n"
            "    def fit(self):\n        xm.add_step_closure(self._log, args=(self.loss,))\n"
            "def _mp_fn(i):\n    T().fit()\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH + "def _mp_fn(i):\n    loss = model(x)\n"
            "    xm.add_step_closure(lambda l: print(l.item()) if xm.is_master_ordinal() else None, args=(loss,))\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
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
        # projectt run.py save_checkpoint: rendezvous syncs first, then only state_dicts.
        Valid(
            _LAUNCH + "import os\ndef save_checkpoint(model, optimizer, path):\n"
            "    xm.rendezvous('pre_save')\n    os.makedirs(os.path.dirname(path), exist_ok=True)\n"
            "    ckpt = {'model': model.state_dict(), 'opt': optimizer.state_dict()}\n"
            "    if xm.get_ordinal() == 0:\n        xm.save(ckpt, path)\n"
            "        d_path = path.replace('checkpoint', 'd')\n        xm.save(ckpt, d_path)\n"
            "    xm.rendezvous('post_save')\n"
            "def _mp_fn(i):\n    save_checkpoint(model, opt, 'c.pt')\ntorch_xla.launch(_mp_fn)\n"
        ),
        # The step function called just before ends with the step's sync; and torch_xla.step().
        Valid(
            _LAUNCH + "def train_step(x):\n    loss = model(x).sum()\n    loss.backward()\n"
            "    xm.optimizer_step(opt)\n    xm.mark_step()\n    return loss\n"
            "def _mp_fn(i):\n    for step, x in enumerate(loader):\n        loss = train_step(x)\n"
            "        if step % 100 == 0 and xm.is_master_ordinal():\n"
            "            print(loss.item(), flush=True)\n"
            "            xm.save(model.state_dict(), 'm.pt')\n"
            "        with torch_xla.step():\n            out = model(x)\n"
            "        if xm.is_master_ordinal():\n            print(out.cpu(), flush=True)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        # xla#2573 in torch_xla 2.9.0: the helper's `xm.save` runs after the device loader's
        # loop, which ends with a sync: it copies device data (2.9.0's save has no rendezvous).
        Valid(
            _LAUNCH + "import torch_xla.distributed.parallel_loader as pl\n"
            "def store(model, epoch):\n    xm.save(model.state_dict(), f'model_{epoch}.pt')\n"
            "def _mp_fn(i):\n    for epoch in range(2):\n"
            "        for x in pl.MpDeviceLoader(data, dev):\n            model(x).sum().backward()\n"
            "            xm.optimizer_step(opt)\n"
            "        if xm.is_master_ordinal():\n            store(model, epoch)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        # An epoch loop whose steps end with a sync, a pair of rendezvous around the save.
        Valid(
            _LAUNCH + "import os\ndef train(index):\n    for epoch in range(4):\n"
            "        for _ in range(10):\n            model(x).sum().backward()\n"
            "            xm.optimizer_step(opt)\n            xm.mark_step()\n"
            "        if epoch % 2 == 0:\n            if not xm.is_master_ordinal():\n"
            "                xm.rendezvous('save_model')\n"
            "            if xm.is_master_ordinal():\n"
            "                xm.save(model.state_dict(), 'best.pth')\n"
            "                xm.rendezvous('save_model')\n"
            "torch_xla.launch(train)\n"
        ),
        # neuronx-nemo-megatron's apex CUDA tests: torchrun, an NCCL group, CUDA tensors; the
        # file does not import torch_xla.
        Valid(
            "import torch\nimport argparse\nimport torch.distributed as dist\n"
            "def compare(a, b):\n    return (a.cpu() - b.cpu()).abs().max()\n"
            "args = argparse.ArgumentParser().parse_args()\ndist.init_process_group('nccl')\n"
            "x = torch.randn(4).cuda()\n"
            "if args.local_rank == 0:\n    compare(x, x)\n    print(x.cpu())\n",
            files=(("run.sh", "torchrun --nproc_per_node=2 example.py\n"),),
        ),
        # xla#4571's initial checkpoint in torch_xla 2.9.0: the launched function has run no
        # graph yet; the model's parameters are device data after `.to(device)`.
        Valid(
            _LAUNCH + "import torch\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def train(rank, config):\n    device = xm.xla_device()\n"
            "    model = torch.nn.Conv2d(3, 8, 3).to(device)\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)\n"
            "    if not xm.is_master_ordinal():\n        xm.rendezvous('initial_checkpoint')\n"
            "    if xm.is_master_ordinal():\n"
            "        xm.save({'model': model.state_dict()}, config['ckpt'])\n"
            "        xm.rendezvous('initial_checkpoint')\n"
            "xmp.spawn(train, args=({'ckpt': 'init.pth'},))\n"
        ),
    )
    invalid = (
        # Through a helper of the module: a rendezvous (a hang), a host read of the step's loss
        # before its sync (one more graph on the master); a helper that tests the rank itself
        # is reported inside, not at its callers.
        Invalid(
            _LAUNCH + "def wait_all(tag):\n    xm.rendezvous(tag)\n"
            "def log(loss):\n    print(loss.item(), flush=True)\n"
            "def save(model):\n    if xm.is_master_ordinal():\n        xm.rendezvous('s')\n"
            "def _mp_fn(i):\n    for step, x in enumerate(data):\n        loss = model(x)\n"
            "        if xm.is_master_ordinal():\n            log(loss)\n"
            "            wait_all('ckpt')\n            save(model)\n"
            "        xm.mark_step()\n"
            "torch_xla.launch(_mp_fn)\n",
            (9, 14, 15),
        ),
        Invalid(
            _LAUNCH + "def _mp_fn(i):\n    loss = model(x)\n    if xm.is_master_ordinal():\n"
            "        print(loss.item(), flush=True)\n        xm.save(model.state_dict(), 'm.pt')\n"
            "torch_xla.launch(_mp_fn)\n",
            (6, 7),
        ),
        # Pending work after the sync; the loader's fetch is no sync after the step; the
        # optimizer step is in a helper called before the save, with no sync (an error).
        Invalid(
            _LAUNCH + "import torch\nimport torch_xla.distributed.parallel_loader as pl\n"
            "def train_step(x):\n    loss = model(x).sum()\n    loss.backward()\n"
            "    xm.optimizer_step(opt)\n    return loss\n"
            "def _mp_fn(i):\n    for x in pl.MpDeviceLoader(loader, dev):\n"
            "        loss = train_step(x)\n"
            "        if xm.is_master_ordinal():\n            xm.save(model.state_dict(), 'm.pt')\n"
            "        xm.mark_step()\n        samples = torch.cat([x[:4], x[:4]])\n"
            "        if xm.is_master_ordinal():\n            print(samples.cpu(), flush=True)\n"
            "            print((loss * 2).item(), flush=True)\n"
            "torch_xla.launch(_mp_fn)\n",
            (14, 18, 19),
        ),
        Invalid(
            "import torch_xla\nfrom torch_xla import runtime as xr\n"
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def _mp_fn(i):\n    y = model(x)\n    if xr.global_ordinal() == 0:\n"
            "        torch_xla.sync()\n"
            "    else:\n        torch_xla.core.xla_model.rendezvous('wait')\nxmp.spawn(_mp_fn)\n",
            (7, 9),
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
            "def _mp_fn(i):\n    loss = model(x)\n    is_root = xm.is_master_ordinal()\n"
            "    rank = xm.get_ordinal()\n"
            "    if is_root:\n        print(loss.item())\n    if IS_ROOT:\n        xm.mark_step()\n"
            "    if rank == 0:\n        xm.save(model.state_dict(), 'm.pt')\n"
            "torch_xla.launch(_mp_fn)\n",
            (10, 12, 14),
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
        if not self.ctx.imports_torch_xla:
            return  # its tensors are not known to be XLA tensors (a CUDA test of an XLA repo)
        api = self._sync_api(node)
        if api is not None:
            inner, label = node, api
        else:
            through = self._through_helper(node)
            if through is None:
                return
            api, inner, label = through
        branch = self._divergent_branch()
        if branch is None or in_step_closure(self.ctx):
            return
        test, positive, identity = branch
        if api in _BARRIERS and self._paired(node, label, (test, positive)):
            return
        if api == "xm.save":
            data = find_arg(inner, "data", 0)
            if data is not None and not may_hold_tensors(self.ctx, data.value):
                return  # no XLA tensor in it: `_maybe_convert_to_cpu` syncs nothing
        if api in SYNC_METHODS.values() or api in _GRAPH_RUNNERS:
            reads: cst.CSTNode | None = None
            if inner is not node:
                pass  # what the helper reads is not this statement's: only the call site counts
            elif api in SYNC_METHODS.values():
                assert isinstance(node.func, cst.Attribute)
                reads = node.func.value
            else:
                found = find_arg(node, "data", 0)
                reads = found.value if found is not None else None
            if nothing_pending(self.ctx, reads):
                return  # right after the step's sync: it copies device data, runs no graph
        severity = Severity.ERROR
        if api not in SYNC_METHODS.values() and api not in _GRAPH_RUNNERS:
            why = "the other replicas never enter the collective and the job hangs"
        else:
            collective = self._collective_in_graph(node, inner, api)
            if collective is not None:
                why = (
                    f"it executes the pending graph on these replicas alone, and that graph holds "
                    f"the collectives of {collective}, which the other replicas never enter: the "
                    "job hangs"
                )
            else:
                severity = Severity.WARNING
                why = (
                    "it compiles and executes the pending graph on these replicas alone (one more "
                    "compile and execution there, and graphs that differ from the other replicas'; "
                    "it hangs if that graph holds a collective)"
                )
        requires = list(MULTIPROCESS)
        if (
            identity.from_launcher
        ):  # a rank from the environment splits replicas under torchrun only
            requires.append((Fact.TORCHRUN, True))
        text = " ".join(self.ctx.module.code_for_node(test).split())
        self.report(
            node,
            self.message.format(api=label, test=text[:60], why=why),
            requires=requires,
            severity=severity,
        )

    def _collective_in_graph(self, node: cst.Call, inner: cst.Call, api: str) -> str | None:
        """The collective the graph that ``node`` executes holds, as far as the file shows: for
        ``.item()``/``.cpu()``, a collective whose result the read tensor is (``loss =
        xm.all_reduce(...)`` ... ``loss.item()``); for ``torch_xla.sync()``, ``xm.mark_step()`` and
        ``xm.save`` (every pending tensor, or the parameters that ``xm.optimizer_step`` updated),
        a lazy collective called before it in the same function. None: no collective known."""
        if api in SYNC_METHODS.values():
            assert isinstance(inner.func, cst.Attribute)
            found = self._collective_source(inner.func.value, 0)
            if found is None and inner is not node:
                found = self._collective_before(node)  # pending at the helper's call
        else:
            found = self._collective_before(node)
        return found if found is not None else self._sharded_model()

    def _sharded_model(self) -> str | None:
        """A module the file imports that splits the model over the replicas, whose forward and
        backward hold collectives (FSDP all-gathers the parameters:
        ``torch_xla/distributed/fsdp/xla_fully_sharded_data_parallel.py``; tensor-parallel layers
        all-reduce their outputs: neuronx_distributed ``parallel_layers``), else None."""
        for module in sorted(self.ctx.imported_modules):
            if module.startswith(_SHARDED_MODEL_MODULES):
                return f"the sharded model of `{module}`"
        return None

    def _collective_source(self, expr: cst.BaseExpression, depth: int) -> str | None:
        if depth > 6:
            return None
        if type(expr) is cst.Call:
            names = self.ctx.qnames(expr.func)
            for name in names:
                if name in LAZY_COLLECTIVES:
                    return f"`{LAZY_COLLECTIVES[name]}`"
            if isinstance(expr.func, cst.Attribute) and not names:  # x.detach(), x.mean()
                return self._collective_source(expr.func.value, depth + 1)
            return None
        if type(expr) is cst.Name:
            found = definition(self.ctx, expr)
            if found is not None:
                value, _ = found
                return self._collective_source(value, depth + 1)
        return None

    def _collective_before(self, node: cst.Call) -> str | None:
        """A lazy collective called in the enclosing function's own code before ``node``."""
        function = function_key(self.ctx)
        table = self.ctx.memo(_LazyCollectives, lambda: _LazyCollectives(self.ctx))
        return table.before(function, node)

    def _sync_api(self, node: cst.Call, scope=None) -> str | None:
        """The short name of the sync, host read or collective that ``node`` is, or None;
        ``scope``: the scope the call is read in (default: the node being visited)."""
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS and not node.args:
            if not self.ctx.qnames(func, scope):  # a method of a value, not a module function
                return SYNC_METHODS[func.attr.value]
        names = self.ctx.qnames(func, scope)
        for api, short in SYNC_APIS.items():
            if api in names:
                return short
        return None

    def _through_helper(self, node: cst.Call) -> tuple[str, cst.Call, str] | None:
        """For a call of a function of this module whose own code runs a sync, host read or
        collective outside a replica-only test of its own (``store_model_information(...)``
        whose body calls ``xm.save``; xla#2573): that call's short name, the call, and the
        label the message shows (``helper()` → `xm.save``). The first such call in the helper's
        body, one call deep (:class:`xla_lint.analysis.functions.LocalFunctions`); an ``xm.save``
        of data that holds no XLA tensor is passed over. None otherwise."""
        return _Helpers.of(self.ctx).through(self.ctx, node, self)

    def _divergent_branch(self) -> tuple[cst.BaseExpression, bool, Identity] | None:
        """The innermost enclosing test that holds on some replicas only
        (:func:`xla_lint.analysis.ranks.replica_guard`), whether the node is in its true branch,
        and the identity it tests; None outside such a branch."""
        stack = self.ctx.stack
        for i in range(len(stack) - 2, -1, -1):
            node = stack[i]
            if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return None
            if isinstance(node, (cst.If, cst.IfExp)) and stack[i + 1] is not node.test:
                identity = replica_guard(self.ctx, node.test)
                if identity is not None:
                    return node.test, stack[i + 1] is node.body, identity
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
                    barrier = api in _BARRIERS
                    if api is None:
                        through = rule._through_helper(node)
                        if through is not None and through[0] in _BARRIERS:
                            api, barrier = through[2], True  # paired with the same helper only
                    if barrier and api is not None:
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


class _Helpers:
    """Per file: for each function of the module, the first sync, host read or collective its
    own code runs outside a replica-only test of its own (:meth:`through`), computed once."""

    def __init__(self, ctx) -> None:
        self.local = LocalFunctions.of(ctx)
        self.ifs = {id(n): n for n in ctx.flat.nodes if type(n) is cst.If}
        self.first: dict[int, tuple[str, cst.Call] | None] = {}

    @classmethod
    def of(cls, ctx) -> _Helpers:
        return ctx.memo(_Helpers, lambda: cls(ctx))

    def through(
        self, ctx, node: cst.Call, rule: ReplicaDivergentSync
    ) -> tuple[str, cst.Call, str] | None:
        function = function_key(ctx)
        caller = self.local.function(function) if isinstance(function, cst.FunctionDef) else None
        callee = self.local.callee(node, ctx.scope, caller)
        if callee is None or callee.node is function:
            return None
        key = id(callee.node)
        if key not in self.first:
            self.first[key] = self._first_sync(ctx, callee, rule)
        found = self.first[key]
        if found is None:
            return None
        api, inner = found
        return api, inner, f"{callee.name}()` → `{api}"

    def _first_sync(self, ctx, callee, rule: ReplicaDivergentSync) -> tuple[str, cst.Call] | None:
        site = Site(callee.scope)
        for call, scope in callee.calls:
            api = rule._sync_api(call, scope)
            if api is None:
                continue
            guarded = any(
                replica_guard(ctx, self.ifs[i].test, site) is not None
                for i, _ in self.local.arms(call)
                if i in self.ifs
            )
            if guarded:
                continue  # the helper tests the rank itself: its own finding, not its callers'
            if api == "xm.save":
                data = find_arg(call, "data", 0)
                if data is not None and not may_hold_tensors(ctx, data.value):
                    continue
            return api, call
        return None


# Libraries whose models are split over the replicas, so that every graph of their forward and
# backward holds collectives.
_SHARDED_MODEL_MODULES = (
    "torch_xla.distributed.fsdp",
    "neuronx_distributed.parallel_layers",
    "neuronx_distributed.modules",
    "neuronx_distributed.pipeline",
    "neuronx_distributed.trainer",
)


class _LazyCollectives:
    """The file's calls of :data:`LAZY_COLLECTIVES`, by position in the shared node list
    (``ctx.flat``), with the function definitions, to answer "is one called before this node in
    the same function's own code?" (one pass over the file's calls, ``ctx.memo``)."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        flat = ctx.flat
        nodes = flat.nodes
        self.ends = flat.ends
        self.index: dict[int, int] = {}
        self.calls: list[tuple[int, str]] = []
        self.functions: list[int] = []
        for i in flat.of_types(frozenset({cst.Call, cst.FunctionDef, cst.Lambda, cst.ClassDef})):
            item = nodes[i]
            self.index[id(item)] = i
            if type(item) is cst.Call:
                for name in ctx.qnames(item.func, ctx.root_scope):  # module-level imports
                    if name in LAZY_COLLECTIVES:
                        self.calls.append((i, LAZY_COLLECTIVES[name]))
                        break
            else:
                self.functions.append(i)
        # Calls of this module's functions whose own code calls a lazy collective
        # (`train_step(...)` with `xm.optimizer_step` in it): one call deep.
        local = LocalFunctions.of(ctx)
        holding: dict[int, str] = {}
        for function in local.functions:
            for call, scope in function.calls:
                found = next(
                    (
                        LAZY_COLLECTIVES[n]
                        for n in ctx.qnames(call.func, scope)
                        if n in LAZY_COLLECTIVES
                    ),
                    None,
                )
                if found is not None:
                    holding[id(function.node)] = f"{found}` (in `{function.name}`)"
                    break
        if holding:
            callers = [(None, local.module_calls)] + [(f, f.calls) for f in local.functions]
            for caller, calls in callers:
                for call, scope in calls:
                    callee = local.callee(call, scope, caller)
                    if callee is not None and id(callee.node) in holding and id(call) in self.index:
                        self.calls.append((self.index[id(call)], holding[id(callee.node)]))
            self.calls.sort()

    def before(self, function: cst.CSTNode, node: cst.CSTNode) -> str | None:
        at = self.index.get(id(node))
        if at is None:
            return None
        start = self.index.get(id(function), 0)  # the module is node 0
        for i, api in self.calls:
            if (
                start < i < at
                and i < self.ends[start]
                and not any(start < f < i < self.ends[f] for f in self.functions)
            ):
                return f"`{api}`"
        return None


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
