"""xla_lint.analysis.pending: whether a graph is pending at a point, asked from inside the
traversal as rules ask (``probe()`` -> :func:`nothing_pending` there; ``probe(x)`` -> with ``x``
as what the node reads). ``probe`` is ``xm.master_print('probe', ...)``, which records nothing
itself, so that one probe does not hide the next."""

from __future__ import annotations

import libcst as cst

from xla_lint.analysis.context import Dispatcher, FileContext
from xla_lint.analysis.pending import nothing_pending
from xla_lint.analysis.walk import walk

HEAD = "import os\nimport torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n"


def ask(source: str) -> list[bool]:
    source = source.replace("probe()", "xm.master_print('probe')").replace(
        "probe(", "xm.master_print('probe', "
    )
    ctx = FileContext(cst.parse_module(HEAD + source))
    out: list[bool] = []

    class Probe:
        def visit_Call(self, node: cst.Call) -> None:
            args = node.args
            if ctx.is_call_to(node, "torch_xla.core.xla_model.master_print") and (
                args and isinstance(args[0].value, cst.SimpleString)
            ):
                out.append(nothing_pending(ctx, args[1].value if len(args) > 1 else None))

    walk(ctx.module, Dispatcher(ctx, [Probe()]))
    return out


def test_a_sync_earlier_in_the_block_or_around_it_with_nothing_recorded_since():
    assert ask(
        "def f(model, opt, path):\n"
        "    xm.mark_step()\n    probe()\n"
        "    os.makedirs(os.path.dirname(path), exist_ok=True)\n"
        "    ckpt = {'model': model.state_dict(), 'opt': opt.state_dict()}\n"
        "    if model is not None:\n        ckpt['x'] = 1\n"
        "    if xm.get_ordinal() == 0:\n        probe()\n        xm.save(ckpt, path)\n        probe()\n"
    ) == [True, True, True]


def test_each_kind_of_sync():
    assert ask(
        "def f(x):\n    torch_xla.sync()\n    probe()\n"
        "    xm.rendezvous('pre_save')\n    probe()\n"
        "    xm.optimizer_step(opt, barrier=True)\n    probe()\n"
        "    xm.optimizer_step(opt)\n    probe()\n"
        "    with torch_xla.step():\n        probe()\n        y = model(x)\n    probe()\n"
    ) == [True, True, True, False, False, True]


def test_a_tensor_operation_since_the_sync_leaves_a_graph_pending():
    assert ask(
        "def f(a, b, imgs):\n    xm.mark_step()\n    c = a + b\n    probe()\n"
        "    xm.mark_step()\n    s = torch.cat([imgs[:4], imgs[:4]])\n    probe()\n"
        "    xm.mark_step()\n    out = model(a)\n    probe()\n"
        "    xm.mark_step()\n    total += a\n    probe()\n"
        "    xm.mark_step()\n    probe(a)\n    probe(a.detach())\n    probe(a * 2)\n"
    ) == [False, False, False, False, True, True, False]


def test_a_same_module_function_that_ends_with_a_sync():
    assert ask(
        "def train_step(x):\n    loss = model(x).sum()\n    loss.backward()\n"
        "    xm.optimizer_step(opt)\n    xm.mark_step()\n    metrics = {'loss': loss.item()}\n"
        "    return metrics\n"
        "def no_sync(x):\n    xm.mark_step()\n    return model(x)\n"
        "class T:\n    def step(self, x):\n        torch_xla.sync()\n"
        "    def fit(self, x):\n        self.step(x)\n        probe()\n"
        "def main(x):\n    m = train_step(x)\n    probe()\n    y = no_sync(x)\n    probe()\n"
    ) == [True, True, False]


def test_function_entry_loop_start_and_loader_fetch_are_unknown():
    assert ask(
        "def f(x):\n    probe()\n"
        "for x in loader:\n    probe()\n    loss = model(x)\n    if xm.is_master_ordinal():\n"
        "        probe()\n"
        "probe()\n"
    ) == [False, False, False, False]


def test_after_a_device_loader_loop_ends_nothing_is_pending():
    # torch_xla 2.9.0 PerDeviceLoader.next: torch_xla.sync() before StopIteration
    assert ask(
        "import torch_xla.distributed.parallel_loader as pl\n"
        "def f(model, opt, loader, dev):\n"
        "    for x in pl.MpDeviceLoader(loader, dev):\n        model(x).sum().backward()\n"
        "        xm.optimizer_step(opt)\n"
        "    probe()\n"
        "    for i, x in enumerate(pl.ParallelLoader(loader, [dev]).per_device_loader(dev)):\n"
        "        if i == 3:\n            continue\n        model(x)\n"
        "    probe()\n"
        "    for x in pl.MpDeviceLoader(loader, dev):\n        if model(x) is None:\n"
        "            break\n"
        "    probe()\n"
        "    for x in pl.MpDeviceLoader(loader, dev):\n        pass\n    else:\n        model(x)\n"
        "    probe()\n"
    ) == [True, True, False, False]


def test_after_a_loop_whose_body_ends_with_a_sync_nothing_is_pending():
    assert ask(
        "def f(model, loader):\n"
        "    for _ in range(10):\n        model(x).backward()\n        xm.mark_step()\n"
        "    probe()\n"
        "    for x in loader:\n        if x is None:\n            continue\n"
        "        model(x)\n        xm.mark_step()\n"
        "    probe()\n"
        "    for x in loader:\n        xm.mark_step()\n        loss = model(x)\n"
        "    probe()\n"
    ) == [True, False, False]


def test_an_if_that_only_syncs_or_does_nothing_leaves_what_was_before_it():
    assert ask(
        "def f(model, x, epoch):\n"
        "    xm.mark_step()\n"
        "    if not xm.is_master_ordinal():\n        xm.rendezvous('save')\n"
        "    probe()\n"
        "    y = model(x)\n"
        "    if not xm.is_master_ordinal():\n        xm.rendezvous('save')\n"
        "    probe()\n"
        "    if epoch:\n        xm.mark_step()\n    else:\n        torch_xla.sync()\n"
        "    probe()\n"
        "    if epoch:\n        y = model(x)\n"
        "    probe()\n"
    ) == [True, False, True, False]


def test_arithmetic_on_a_loop_counter_records_no_tensor_operation():
    assert ask(
        "def f(model, x, t):\n"
        "    for epoch in range(4):\n        xm.mark_step()\n"
        "        if epoch % 2 == 0:\n            probe()\n"
        "        if t % 2 == 0:\n            probe()\n"
    ) == [True, False]


def test_a_launched_function_starts_with_nothing_pending_and_building_a_model_records_nothing():
    # torch_xla.launch / xmp.spawn run the function first thing in a new process; a module or
    # optimizer constructor makes CPU tensors; .to(device) of the XLA device gives device data
    assert ask(
        "import torch_xla.distributed.xla_multiprocessing as xmp\n"
        "def train(index):\n    device = xm.xla_device()\n"
        "    model = torch.nn.Conv2d(3, 8, 3).to(device)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    probe()\n"
        "    model.to(torch.bfloat16)\n    probe()\n"
        "def helper(model, device):\n    model = model.to(device)\n    probe()\n"
        "xmp.spawn(train)\n"
    ) == [True, False, False]


def test_a_read_of_a_tensor_the_last_sync_made_device_data_runs_nothing():
    # unseen5: nanoGPT-TPU (mark_step, then an optimizer step that does not touch `loss`),
    # leaf-pytorch (a device loader's batch), lunariscodex (a second xm.save of the same dict)
    assert ask(
        "import torch_xla.distributed.parallel_loader as pl\n"
        "def f(model, opt, loader, dev):\n"
        "    for x, y in pl.MpDeviceLoader(loader, dev):\n"
        "        loss = model(x).sum()\n        loss.backward()\n        xm.mark_step()\n"
        "        xm.optimizer_step(opt)\n"
        "        probe(loss)\n        probe(y.detach())\n        probe(x)\n        probe()\n"
        "        loss = loss * 2\n        probe(loss)\n"
        "    ckpt = {'model': model.state_dict()}\n    xm.save(ckpt, 'a.pt')\n"
        "    loss = model(x)\n    probe(ckpt)\n    probe(loss)\n"
        "    for batch in pl.MpDeviceLoader(loader, dev):\n        x, _, y = batch\n"
        "        pred = model(x)\n        probe(y.detach())\n        probe(pred)\n"
    ) == [True, True, True, False, False, True, False, True, False]


def test_mesh_reduce_syncs_and_a_module_picked_from_a_container_records_nothing():
    # unseen6 styleTTS2: `{key: model[key].state_dict() for key in model}` after a sync; arc-nn's
    # per-batch xm.mesh_reduce (a rendezvous: torch_xla.sync() first, core/xla_model.py)
    assert ask(
        "def f(model, loss, x):\n"
        "    xm.mark_step()\n"
        "    state = {'net': {key: model[key].state_dict() for key in model}}\n"
        "    probe(state)\n    probe()\n"
        "    y = model(x)\n    acc = xm.mesh_reduce('acc', y, sum)\n    probe()\n"
        "    z = x[y].sum()\n    probe()\n"
    ) == [True, True, True, False]
