"""XLA201 host-sync-in-step: a value read to the host inside a training step."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ...analysis import apis
from ...analysis.context import FileContext
from ...analysis.functions import Function, LocalFunctions
from ...analysis.loops import _last_name, _names_in, root_name
from ...analysis.names import bound_names
from ...analysis.values import definition
from ...analysis.walk import calls_in, iter_nodes
from ...diagnostics import Severity
from ...rule import Invalid, Valid
from .common import HOST_METHODS, LoopRule, chain_root, is_literal_loop


def _has_modulo(node: cst.CSTNode) -> bool:
    """``node`` holds on one step in N: a remainder compared for equality (``step % 100 == 0``,
    ``(i + 1) % n in (0, 1)``) or negated (``not step % 100``). A remainder taken as a truth
    value (``if step % 100:``, ``step % 100 != 0``) holds on all the other steps (Kaggle
    Alaska2's per-step print)."""
    for n in iter_nodes(node):
        kind = type(n)
        if kind is cst.Comparison:
            if any(isinstance(c.operator, (cst.Equal, cst.In)) for c in n.comparisons) and any(
                _modulo(side) for side in (n.left, *(c.comparator for c in n.comparisons))
            ):
                return True
        elif kind is cst.UnaryOperation and isinstance(n.operator, cst.Not):
            if _modulo(n.expression):
                return True
    return False


def _flags(test: cst.BaseExpression) -> list[cst.Name]:
    """The names an ``if`` test is made of: ``log_now``, ``should_log or should_eval``."""
    if type(test) is cst.Name:
        return [test]
    if type(test) is cst.BooleanOperation:
        return _flags(test.left) + _flags(test.right)
    return []


def _modulo(node: cst.CSTNode) -> bool:
    return type(node) is cst.BinaryOperation and isinstance(node.operator, cst.Modulo)


def _compares_counter(test: cst.CSTNode, counters: set[str]) -> bool:
    """``step == 0``, ``i == n - 1``: a test true on one iteration of the loop counting with ``counters``."""
    if not isinstance(test, cst.Comparison):
        return False
    sides = [test.left, *(c.comparator for c in test.comparisons)]
    return any(isinstance(c.operator, cst.Equal) for c in test.comparisons) and any(
        isinstance(s, cst.Name) and s.value in counters for s in sides
    )


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
    # The precision gate (issue 22): 8 wrong and 3 harmless of 25 on unseen3 (s22), fixed there
    # (loops that only call xm.mark_step, a formatted `tensor.shape`). Measured after the fix on
    # sets nobody tuned it on: unseen4 5 of 5 right; unseen5 (s23, 11 repositories) 19 right, 1
    # wrong, 1 harmless of 21 (a number from `.item()` formatted later, fixed): 1 wrong of 26
    # (3.8%), inside the 5% gate, so on by default again. unseen7 (s24): 6 wrong of 49 (12%):
    # Python numbers taken as tensors, reads in a non-finite branch that leaves the step, a
    # once-per-epoch read beside the loader loop; fixed (x201), 0 wrong of 42 after.
    explanation = """\
## What it does
In a module that imports torch_xla, flags reading a tensor's value on the host inside a
training loop (a loop whose body runs `backward()`, an optimizer step, or calls a step
function compiled with `torch_xla.compile`: `step_fn = torch_xla.compile(train_step, ...)`,
`@torch_xla.compile`, `torch_xla.compile(f)(x)`; directly or through a function of the same
module): `.item()`,
`.tolist()`, `.cpu()`, `.numpy()`, `float(t)`/`int(t)`, a call of a function of the same module
whose every `return` gives a number read from a tensor (`def xla_sum_scalar(t) -> float: ...
return float(reduced.cpu().item())`: the call is the read, and what it returns is a Python
number), printing or formatting a tensor, an `if`
on one (`if torch.isnan(loss):`, `if loss.isnan().any():`: `Tensor.__bool__` copies it to the
host; comparisons such as `if loss > 100:` are not flagged)
(`print(loss)`, `f"{loss:.3f}"`). A "tensor" for `float`/`int`/printing is the value
`backward()` is called on, or a name the loop computes from it, from a `torch.*` call or
from a `torch_xla.compile`d function. In a loop that trains nothing but ends a step each
iteration (`xm.mark_step()`, `torch_xla.sync()`, `torch_xla.step()`: an evaluation loop), only
scalar reads are flagged (`.item()`, `float(t)`/`int(t)`: a metric, which can add up on the
device and be read once); its `.cpu()`/`.numpy()`/`.tolist()` copies and prints are its output
(feature extraction, embeddings) or a latency benchmark's deliberate completion barrier. Not
flagged: a loop that neither trains nor ends a step; reading a tensor's metadata (`t.shape`, `t.size()`, `t.dtype`, `t.device`, `t.ndim`,
`len(t)`: torch_xla keeps shapes on the host, no device is read); code under `if step % N == 0:`
or `if not step % N:` (not `if step % N:`, which holds on all the other steps; or `if step == 0:`,
or a flag assigned such a test: `log_now = step % N == 0` ... `if log_now:`),
inside a function or lambda given to `xm.add_step_closure`, after the loop, in a loop
that only evaluates (no step), a loop over a literal list or tuple (a few
configurations, not steps), a name assigned a Python number (`grad_accum =
int(config["grad_accum"])`, `float(grad_accum)`), the body of an `if` on a non-finite value
that leaves the step (`if not torch.isfinite(loss): print(loss.item()); continue`, or
`break`/`return`/`raise`/`sys.exit(...)`: it runs on the step that went wrong; the test itself
still reads every step), code of an epoch loop outside its inner loop over a data loader that
steps the optimizer (once per epoch, even when the epoch loop steps a last partial
accumulation itself), a second read of a name already read earlier in the iteration by a
read that always runs first (the first read executed its graph and left device data: the
second runs none), inside `assert` statements and `assert*` calls (a test
checking a value needs the value), and methods on the loop's own batch variables (the
loader's CPU tensors), nor the result of `xm.mesh_reduce(tag, loss, fn)`: torch_xla 2.9.0
`torch_xla/core/xla_model.py` `mesh_reduce` copies `data` to the CPU, exchanges it through
`rendezvous` and returns `reduce_fn` of the host copies, so its `.item()` reads no device. One diagnostic per statement: `allclose(a.cpu(), b.cpu())` and
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
        # wtfml engine.py: mesh_reduce returns a host value (reduce_fn of the CPU copies).
        Valid(
            "import torch_xla.core.xla_model as xm\nfor x in loader:\n    loss = model(x).sum()\n"
            "    loss.backward()\n    xm.optimizer_step(opt)\n"
            "    reduced = xm.mesh_reduce('loss_reduce', loss, reduce_fn)\n"
            "    losses.update(reduced.item(), 8)\n"
        ),
        Valid(
            "import torch_xla\nfor step, (x, y) in enumerate(loader):\n    with torch_xla.step():\n"
            "        loss = model(x).sum()\n        loss.backward()\n        opt.step()\n"
            "    if step % 10 == 0:\n        print(loss.item(), flush=True)\n"
        ),
        Valid(
            "import torch_xla\nfor step, (x, y) in enumerate(loader):\n"
            "    loss = model(x).sum()\n    loss.backward()\n    opt.step()\n    torch_xla.sync()\n"
            "    if not step % 10:\n        print(loss.item(), flush=True)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\nfor step, x in enumerate(loader):\n"
            "    loss = model(x).sum()\n    loss.backward()\n    opt.step()\n    torch_xla.sync()\n"
            "    if step % 100 == 0 and torch.isnan(loss):\n        raise RuntimeError('NaN')\n"
            "    if torch.cuda.is_available():\n        pass\n"
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
        # gpu-tpu-pedia tpu/YOLO/benchmarks/yolo_torch_xla.py: a latency benchmark's completion barrier.
        Valid(
            "import time\nimport torch\nimport torch_xla.core.xla_model as xm\n"
            "with torch.no_grad():\n    for _ in range(10):\n        t0 = time.perf_counter()\n"
            "        out = model(x)\n        xm.mark_step()\n        out.cpu()\n"
            "        times.append(time.perf_counter() - t0)\n"
        ),
        # projectt eval/pytorch_fid/fid_score.py, generate_embeddings.py: the host copy is the output.
        Valid(
            "import torch_xla.core.xla_model as xm\ndef extract(loader):\n    for batch in loader:\n"
            "        pred = model(batch)\n        xm.mark_step()\n"
            "        pred_arr[start:start + len(pred)] = pred.cpu().numpy()\n"
            "        embedding_buffer.append(pred.cpu())\n"
        ),
        # projectt eval/knn/dinov2/dinov2/eval/utils.py: a torch.Size, not a value.
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\nfor x in loader:\n"
            "    loss = model(x).sum()\n    loss.backward()\n    opt.step()\n"
            "    features = torch.zeros(8, loss.shape[-1])\n"
            "    logger.info(f'features of shape {features.shape} on {features.device}')\n"
            "    print(features.dtype, features.ndim, features.shape[0], flush=True)\n"
            "    n = int(features.size(0)) + int(features.shape[1]) + len(features)\n"
            "    xm.mark_step()\n"
        ),
        # unseen7 Laplace-attention: a Python number (`int(config[...])`) is no tensor, nor is
        # what a helper returning `float(....item())` gives (read there, under the log flags).
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\n"
            "def xla_mean_scalar(value, device) -> float:\n"
            "    reduced = xm.all_reduce(xm.REDUCE_SUM, value.detach().float())\n"
            "    return float(reduced.cpu().item()) / 8\n"
            "def train(config, loader, device):\n    grad_accum = int(config['grad_accum'])\n"
            "    acc_t = torch.tensor(0.0, device=device)\n    for step, x in enumerate(loader):\n"
            "        loss = model(x).mean()\n        (loss / grad_accum).backward()\n"
            "        xm.optimizer_step(opt)\n        acc_t = acc_t + loss.detach() / float(grad_accum)\n"
            "        should_log = step % 100 == 0\n        should_eval = step % 500 == 0\n"
            "        if should_log or should_eval:\n"
            "            smooth = xla_mean_scalar(acc_t, device)\n"
            "            xm.master_print(f'loss {smooth:.4f}')\n"
        ),
        # unseen7 rna-structure src/train.py, dino_google: a read in a branch on a non-finite loss
        # that leaves the step runs on the step that went wrong, not every step.
        Valid(
            "import math\nimport sys\nimport torch\nimport torch_xla.core.xla_model as xm\n"
            "for step, x in enumerate(loader):\n    loss = model(x).sum()\n"
            "    if step % 50 == 0 and not torch.isfinite(loss):\n"
            "        print(f'non-finite loss {loss.item()}, skipping')\n"
            "        opt.zero_grad()\n        continue\n"
            "    loss.backward()\n    xm.optimizer_step(opt)\n"
            "    if step % 50 == 0:\n        if not math.isfinite(loss.item()):\n"
            "            print('Loss is {}'.format(loss.item()))\n            sys.exit(1)\n"
        ),
        # unseen7 rna-structure src/train_tpu.py: the epoch loop's own body steps the optimizer
        # (a last partial accumulation); the read after the inner loader loop is once an epoch.
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\n"
            "import torch_xla.distributed.parallel_loader as pl\n"
            "for epoch in range(epochs):\n    para_loader = pl.MpDeviceLoader(train_loader, device)\n"
            "    acc = torch.zeros(1, device=device)\n"
            "    for step, batch in enumerate(para_loader):\n        loss = model(batch).sum()\n"
            "        loss.backward()\n        acc = acc + loss.detach()\n"
            "        if (step + 1) % 4 == 0:\n            xm.optimizer_step(optimizer)\n"
            "    if len(train_loader) % 4:\n        xm.optimizer_step(optimizer)\n"
            "    total = xm.all_reduce(xm.REDUCE_SUM, acc.clone())\n"
            "    train_loss = (total / n).item()\n"
        ),
    )
    invalid = (
        # unseen7 Laplace-attention: the helper's `.item()` runs at each optimizer step: the call
        # is the read (what it returns is a Python float: formatting it reads nothing).
        Invalid(
            "import torch\nimport torch_xla.core.xla_model as xm\n"
            "def xla_sum_scalar(value, device) -> float:\n"
            "    reduced = xm.all_reduce(xm.REDUCE_SUM, value.detach().float())\n"
            "    return float(reduced.cpu().item())\n"
            "bad_t = torch.tensor(0.0, device=device)\nfor x in loader:\n"
            "    loss = model(x).mean()\n"
            "    bad_t = bad_t + torch.where(torch.isfinite(loss), 0.0, 1.0)\n"
            "    loss.backward()\n    xm.optimizer_step(opt)\n"
            "    bad = xla_sum_scalar(bad_t, device)\n    if bad > 0:\n"
            "        raise RuntimeError(f'non-finite loss: {bad}')\n",
            (12,),
        ),
        # unseen7 rna-structure, dino_google: the finiteness test itself reads the loss every
        # step (the reads in the branch that leaves the step are not reported).
        Invalid(
            "import math\nimport sys\nimport torch\nimport torch_xla.core.xla_model as xm\n"
            "for x in loader:\n    loss = model(x).sum()\n"
            "    if not torch.isfinite(loss):\n        print(f'skip {loss.item()}')\n        continue\n"
            "    loss.backward()\n    xm.optimizer_step(opt)\n"
            "    if not math.isfinite(loss.item()):\n"
            "        print('Loss is {}'.format(loss.item()))\n        sys.exit(1)\n"
            "    if not torch.isfinite(loss):\n        print(loss.item())\n",
            (7, 12, 15),  # 15: a new graph on `loss` (not 16: `loss` itself was read at 12)
        ),
        # unseen6 styleTTS2: a NaN check every step copies a bool to the host (`Tensor.__bool__`).
        Invalid(
            "import torch\nimport torch_xla\nfor x, y in loader:\n    loss = model(x).sum()\n"
            "    loss.backward()\n    opt.step()\n    torch_xla.sync()\n"
            "    if torch.isnan(loss):\n        raise RuntimeError('NaN loss')\n"
            "    if loss.isnan().any() or loss > 100:\n        break\n"
            "    if global_step >= flags.steps or args.clip is not None:\n        pass\n"
            "    if torch.cuda.is_available() and step % 10 == 0:\n        pass\n",
            (8, 10),
        ),
        # Kaggle Alaska2: a remainder as the test holds on 99 steps of 100.
        Invalid(
            "import torch_xla\nfor batch_idx, (x, y) in enumerate(loader):\n"
            "    loss = model(x).sum()\n    loss.backward()\n    opt.step()\n    torch_xla.sync()\n"
            "    if batch_idx % 100:\n        print(loss.item(), flush=True)\n"
            "    if batch_idx % 100 != 0:\n        print(loss.item(), flush=True)\n",
            (8, 10),
        ),
        # moshi-finetune's Fabric loop: the all-reduce's `.item()` runs a graph every step; the
        # number it gives, formatted later, is no tensor (nor is `fabric`, whose `backward(loss)`
        # is the step's backward).
        Invalid(
            "import torch_xla.core.xla_model as xm\n"
            "def train(model, fabric, optimizer, loader, n):\n    for step in range(n):\n"
            "        mb_loss = model(next(loader)).sum()\n        fabric.backward(mb_loss)\n"
            "        optimizer.step()\n        xm.mark_step()\n"
            "        avg = xm.all_reduce('sum', mb_loss.detach()).item() / fabric.world_size\n"
            "        if fabric.is_global_zero:\n            print(f'loss {avg:.4f} {fabric.world_size}')\n",
            (8,),
        ),
        # projectt eval/linear_probe/engine_finetune.py evaluate(): a step loop that trains nothing
        # reads a metric every batch (its .cpu() output copy is not reported).
        Invalid(
            "import torch_xla.core.xla_model as xm\nfor images, target in loader:\n"
            "    output = model(images)\n    loss = criterion(output, target)\n"
            "    metric_logger.update(loss=loss.item())\n"
            "    outs.append(output.cpu())\n    xm.mark_step()\n",
            (5,),
        ),
        Invalid(
            "import torch_xla\nfor x, y in loader:\n    with torch_xla.step():\n        loss = model(x).sum()\n"
            "        loss.backward()\n        optimizer.step()\n    losses.append(loss.item())\n"
            "    ema = 0.9 * ema + 0.1 * loss\n    print(f'loss {ema:.3f}', flush=True)\n",
            (7, 9),
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\nfor i, batch in enumerate(loader):\n"
            "    out = model(batch)\n    loss = criterion(out, batch)\n    loss.backward()\n"
            "    xm.optimizer_step(optimizer, barrier=True)\n"
            "    acc = float(loss)\n    hist = out.cpu().detach().numpy()\n    xm.master_print(loss)\n"
            "    pair = (grad.cpu(), loss.cpu())\n",
            (7, 8, 10),  # not 9: `loss` was read at 7 (the second read runs no graph)
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
        self._hosts: dict[int, set[str]] = {}  # id(loop) -> _host_names
        self._reported_statements: set[int] = set()
        self._modulo: dict[int, bool] = {}  # id(a test guarding a host read) -> _has_modulo
        # id() of a def -> (every return is a host number, one reads a tensor on the host)
        self._helpers: dict[int, tuple[bool, bool]] = {}
        # id(loop) -> name -> the arms around each read of that bare name (`loss.item()`,
        # `print(loss)`) since its last assignment, in visiting (source) order
        self._read: dict[int, dict[str, list[frozenset[tuple[int, int]]]]] = {}

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
            names = self.ctx.qnames(receiver)
            if names and not names & _DEVICE_RESULTS:
                return  # a module's function or value (`np.array(...).tolist()`), not a tensor
            self._check(
                node,
                f"`.{func.attr.value}()`",
                receiver=receiver,
                scalar=func.attr.value == "item",
            )
            return
        if (
            type(func) is cst.Name
            and func.value in ("float", "int")
            and len(node.args) == 1
            and node.args[0].keyword is None
            and not node.args[0].star
        ):
            if "builtins." + func.value in self.ctx.qnames(func):
                self._check(
                    node, f"`{func.value}()` of a tensor", value=node.args[0].value, scalar=True
                )
            return
        if type(func) is cst.Name or type(func) is cst.Attribute:
            if self._reading_helper(node):
                # `bad = xla_sum_scalar(nonfinite_t, device)`: the helper's `.item()` is the read
                self._check(
                    node,
                    f"`{_last_name(func)}()` (which returns a tensor read on the host)",
                    operands=[a.value for a in node.args],
                    scalar=True,
                )
                return
        if _last_name(func) in ("print", "master_print"):
            if not self.ctx.is_call_to(node, apis.PRINT, f"{apis.XM}.master_print"):
                return
            for arg in node.args:
                if not arg.star and isinstance(arg.value, (cst.Name, cst.Attribute, cst.Subscript)):
                    if self._check(node, "printing a tensor", value=arg.value, plain=True):
                        return

    def visit_If(self, node: cst.If) -> None:
        if self.ctx.imports_torch_xla:
            self._test(node.test)

    def _test(self, test: cst.BaseExpression) -> bool:
        """An ``if`` on a tensor needs its value on the host (``Tensor.__bool__``):
        ``torch.isnan(loss)``, ``torch.isnan(loss).any()``, ``loss.isnan().any()``. A comparison
        (``if loss > 100:``) is not taken: its left side is a step counter as often (a
        ``global_step`` the tensor-name flow cannot tell apart)."""
        kind = type(test)
        if kind is cst.UnaryOperation:
            return self._test(test.expression)  # type: ignore[attr-defined]
        if kind is cst.BooleanOperation:
            if self._test(test.left):  # type: ignore[attr-defined]
                return True
            if isinstance(test.operator, cst.And) and _has_modulo(test.left):  # type: ignore[attr-defined]
                return False  # `step % 100 == 0 and torch.isnan(loss)`: every N steps
            return self._test(test.right)  # type: ignore[attr-defined]
        if kind is not cst.Call:
            return False
        func = test.func  # type: ignore[attr-defined]
        if self.ctx.qnames(func) & _TENSOR_TESTS:
            return self._check(test, "an `if` on a tensor", value=test)
        if type(func) is cst.Attribute and func.attr.value in _TENSOR_METHODS and not test.args:  # type: ignore[attr-defined]
            receiver = func.value
            while (
                type(receiver) is cst.Call
                and type(receiver.func) is cst.Attribute
                and receiver.func.attr.value in _TENSOR_METHODS
            ):
                receiver = receiver.func.value
            if type(receiver) is cst.Call and self.ctx.qnames(receiver.func) & _TENSOR_TESTS:
                return self._check(test, "an `if` on a tensor", value=receiver)
            if isinstance(receiver, (cst.Name, cst.Attribute, cst.Subscript)):
                return self._check(test, "an `if` on a tensor", value=receiver, plain=True)
        return False

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
        scalar: bool = False,
        operands: list[cst.BaseExpression] | None = None,
    ) -> bool:
        found = self._step_loop()
        if found is None or self._in_verification():
            return False
        loop, trains = found
        if not trains and not scalar:
            return False  # a step loop that trains nothing: its `.cpu()` copies are its output
        if receiver is not None:
            root = chain_root(receiver)
            if (
                root is not None
                and root in self._batch_names(loop)
                and root not in self._tensor_names(loop)
            ):
                return False
            if root is not None and root in self._host_names(loop):
                return False
        if value is not None:
            if _reads_metadata(value):
                return False  # `f"{t.shape}"`, `int(t.size(0))`: shapes live on the host
            if self._number_name(value):
                return False  # `float(grad_accum)`, `grad_accum = int(config["grad_accum"])`
            root = root_name(value)
            if root is None or root not in self._tensor_names(loop):
                if plain or not (
                    isinstance(value, cst.Call)
                    and any(n.startswith("torch.") for n in self.ctx.qnames(value))
                ):
                    return False
        if operands is not None:
            tensors = self._tensor_names(loop)
            if not any(
                _names_in(v) & tensors
                or any(n.startswith("torch.") for c in calls_in(v) for n in self.ctx.qnames(c.func))
                for v in operands
            ):
                return False  # a helper given no tensor this loop computes
        if self._read_before(loop, receiver if receiver is not None else value):
            return True  # `loss.item()` again: the first read left device data, no graph runs
        statement = self._statement_of(node)
        if statement in self._reported_statements:
            return (
                True  # one diagnostic per statement: `allclose(a.cpu(), b.cpu())` is one host read
            )
        self._reported_statements.add(statement)
        return self.report(node, self.message.format(what=what))

    def _read_before(self, loop: cst.For | cst.While, target: cst.CSTNode | None) -> bool:
        """``target`` is a bare name already read on the host earlier in this iteration of
        ``loop``, by a read that runs whenever this one does (outside any ``if`` arm this one is
        not in) and with no assignment of the name since: the first read executed its graph and
        left device data (torch_xla ``ApplyPendingGraph``), so this one runs none. Records
        this read otherwise."""
        if type(target) is not cst.Name:
            return False
        arms = frozenset(self._arms(loop))
        reads = self._read.setdefault(id(loop), {}).setdefault(target.value, [])
        if any(earlier <= arms for earlier in reads):
            return True
        reads.append(arms)
        return False

    def _arms(self, loop: cst.CSTNode) -> list[tuple[int, int]]:
        """The conditional parts of ``loop``'s body the current node is in: (id of an ``if``,
        ``if``-expression, ``try``, boolean operation or inner loop, id of its part)."""
        found: list[tuple[int, int]] = []
        stack = self.ctx.stack
        for i in range(len(stack) - 2, -1, -1):
            node, child = stack[i], stack[i + 1]
            if node is loop:
                break
            kind = type(node)
            if kind in (cst.If, cst.IfExp, cst.Try, cst.For, cst.While, cst.BooleanOperation):
                if not (kind in (cst.If, cst.IfExp) and child is node.test):  # type: ignore[attr-defined]
                    if not (kind is cst.BooleanOperation and child is node.left):  # type: ignore[attr-defined]
                        found.append((id(node), id(child)))
            elif kind is cst.ExceptHandler or kind is cst.Lambda or kind is cst.CompFor:
                found.append((id(node), id(child)))
        return found

    def _forget(self, targets: set[str]) -> None:
        for names in self._read.values():
            for name in targets:
                names.pop(name, None)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        if self._read:
            for t in original_node.targets:
                self._forget(bound_names(t.target))

    def leave_AugAssign(self, original_node: cst.AugAssign) -> None:
        if self._read:
            self._forget(bound_names(original_node.target))

    def leave_AnnAssign(self, original_node: cst.AnnAssign) -> None:
        if self._read and original_node.value is not None:
            self._forget(bound_names(original_node.target))

    def _number_name(self, value: cst.CSTNode) -> bool:
        """``value`` is a name whose one assignment reaching here gives a Python number
        (``grad_accum = int(config["grad_accum"])``, ``n = scalar(t)`` with a same-module
        ``scalar`` returning ``float(...)``): no tensor, whatever the loop does with it."""
        if type(value) is not cst.Name:
            return False
        found = definition(self.ctx, value)
        return found is not None and _host_number(found[0], set(), self._host_helper)

    def _callee(self, call: cst.Call) -> Function | None:
        """The function of this module ``call`` runs (in the scope being visited)."""
        local = LocalFunctions.of(self.ctx)
        caller = None
        for anc in reversed(self.ctx.stack):
            if type(anc) is cst.FunctionDef:
                caller = local.function(anc)
                break
        return local.callee(call, self.ctx.scope, caller)

    def _host_helper(self, call: cst.Call) -> bool:
        """``call`` runs a function of this module whose every ``return`` gives a Python number
        (``float(...)``, ``.item()``, ``int(...)``, such a helper's result, arithmetic of those):
        ``def xla_sum_scalar(v) -> float: ... return float(reduced.cpu().item())``."""
        return self._helper_kind(call)[0]

    def _reading_helper(self, call: cst.Call) -> bool:
        """A :meth:`_host_helper` call whose function reads a tensor on the host to make its
        number (a ``.item()``/``.tolist()``/``.cpu()``/``.numpy()`` in a return, or a call of
        another such helper there): calling it is the host read."""
        return self._helper_kind(call)[1]

    def _helper_kind(self, call: cst.Call) -> tuple[bool, bool]:
        """(:meth:`_host_helper`, :meth:`_reading_helper`) of ``call``."""
        func = call.func
        if type(func) is not cst.Name and not (
            type(func) is cst.Attribute
            and type(func.value) is cst.Name
            and func.value.value == "self"
        ):
            return False, False
        function = self._callee(call)
        return (False, False) if function is None else self._function_kind(function, 0)

    def _function_kind(self, function: Function, depth: int) -> tuple[bool, bool]:
        """:meth:`_helper_kind` of a function reached through another helper's return."""
        key = id(function.node)
        found = self._helpers.get(key)
        if found is not None:
            return found
        if depth > 3:
            return False, False
        self._helpers[key] = (False, False)
        local = LocalFunctions.of(self.ctx)
        values = local.returns(function)

        def inner(c: cst.Call) -> bool:
            callee = local.callee(c, function.scope, function)
            return callee is not None and self._function_kind(callee, depth + 1) == (True, True)

        host = bool(values) and all(v is not None and _host_number(v, set(), inner) for v in values)
        reads = host and any(
            v is not None
            and any(
                type(c.func) is cst.Attribute and c.func.attr.value in HOST_METHODS or inner(c)
                for c in calls_in(v)
            )
            for v in values
        )
        self._helpers[key] = (host, reads)
        return host, reads

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

    def _step_loop(self) -> tuple[cst.For | cst.While, bool] | None:
        """The innermost loop running the current node on every iteration, if it is a training
        loop or a step loop (``xm.mark_step()``/``torch_xla.sync()``/``torch_xla.step()`` in its
        body) and the node is not under an every-N-steps branch or in a step closure; with
        whether it trains (:attr:`Steps.trains`)."""
        stack = self.ctx.stack
        guarded: list[cst.CSTNode] = []
        for i in range(len(stack) - 2, -1, -1):
            node, child = stack[i], stack[i + 1]
            kind = type(node)
            if kind is cst.FunctionDef or kind is cst.Lambda or kind is cst.ClassDef:
                return None
            if type(node) is cst.If and child is node.body and _rare_exit(self.ctx, node):
                return None  # `if not torch.isfinite(loss): print(loss.item()); continue`
            if (type(node) is cst.If or type(node) is cst.IfExp) and child is node.body:
                guarded.append(node.test)
                # `log_now = step % 100 == 0` ... `if log_now:` (or `if log_now or eval_now:`)
                for flag in _flags(node.test):
                    found = definition(self.ctx, flag)
                    if found is not None:
                        guarded.append(found[0])
            if type(node) is cst.For or type(node) is cst.While:
                if not (child is node.body or type(node) is cst.While and child is node.test):
                    continue  # a for-loop's iterable, or an else branch: runs once
                own, _ = self.facts.loop(node, self.ctx.scope)
                if not (own.trains or own.xla_step) or is_literal_loop(node):
                    return None
                counters = bound_names(node.target) if isinstance(node, cst.For) else set()
                if any(self._has_modulo(t) or _compares_counter(t, counters) for t in guarded):
                    return None
                if self._epoch_level(node):
                    return None
                return node, own.trains
        return None

    def _epoch_level(self, loop: cst.For | cst.While) -> bool:
        """``loop`` runs a step loop over a data loader in its body that does not hold the current
        node (``for epoch ...: for batch in loader: ...optimizer step...``, then
        ``train_loss = total.item()``): the node runs once per pass of that inner loop, an epoch,
        even when ``loop``'s own body trains too (a last partial accumulation's step)."""
        stack = self.ctx.stack
        for inner in self.facts.inner_loops(loop):
            if type(inner) is not cst.For or any(anc is inner for anc in stack):
                continue
            _, full = self.facts.loop(inner, self.ctx.scope)
            if not (full.optimizer or full.compiled or full.xla_step):
                continue
            if _names_a_loader(inner.iter) or self.iterates_device_loader(
                inner.iter, self.ctx.scope
            ):
                return True
        return False

    def _has_modulo(self, test: cst.CSTNode) -> bool:
        """:func:`_has_modulo` of ``test``, once per test (each host read under it asks)."""
        found = self._modulo.get(id(test))
        if found is None:
            found = self._modulo[id(test)] = _has_modulo(test)
        return found

    def _batch_names(self, loop: cst.For | cst.While) -> set[str]:
        return bound_names(loop.target) if isinstance(loop, cst.For) else set()

    def _host_names(self, loop: cst.For | cst.While) -> set[str]:
        """Names ``loop`` binds only to host values: ``r = xm.mesh_reduce(tag, loss, fn)``
        (:data:`apis.HOST_RESULT_FUNCTIONS`) and no other assignment of ``r`` in the loop."""
        self._tensor_names(loop)
        return self._hosts[id(loop)]

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
        host = {
            i
            for i, (_, value) in enumerate(assigns)
            if type(value) is cst.Call
            and (ctx.qnames(value.func) & apis.HOST_RESULT_FUNCTIONS or self._host_helper(value))
        }  # `xm.mesh_reduce(tag, loss, fn)` returns a host value: its `.item()` reads no device;
        # so does `scalar(t)` with `def scalar(t): return float(t.cpu().item())`
        hosts: set[str] = set()
        for i in host:
            hosts |= assigns[i][0]
        for i, (targets, _) in enumerate(assigns):
            if i not in host:
                hosts -= targets
        self._hosts[key] = hosts
        for _ in range(3):
            for i, (targets, value) in enumerate(assigns):
                if i in host or _host_number(value, names, self._host_helper):
                    continue
                if i in torchy or _names_in(value) & names:
                    names |= targets
        self._tensors[key] = names
        return names


# torch_xla collectives called in the step whose result is a device tensor: a host read of it
# (`xm.all_reduce("sum", loss).item()`) runs the collective's graph.
_DEVICE_RESULTS = frozenset(
    f"{apis.XM}.{name}"
    for name in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute")
)

_NUMBER_CONVERSIONS = frozenset({"float", "int", "bool", "round", "len"})

# torch functions whose result an `if` tests as a tensor (a 0-d bool tensor: `Tensor.__bool__`
# copies it to the host); and tensor methods that keep it a tensor (`.any()`, `.isnan()`).
_TENSOR_TESTS = frozenset(
    f"torch.{name}"
    for name in ("isnan", "isinf", "isfinite", "any", "all", "allclose", "equal", "isclose")
)
_TENSOR_METHODS = frozenset({"any", "all", "isnan", "isinf", "isfinite"})


# Calls whose result an `if` tests for a non-finite value: a branch on one that leaves the step
# runs only when the step went wrong.
_FINITE_TESTS = frozenset({"isnan", "isinf", "isfinite", "isneginf", "isposinf"})


def _rare_exit(ctx: FileContext, node: cst.If) -> bool:
    """``if not torch.isfinite(loss): ...; continue`` (or ``break``/``return``/``raise``/
    ``sys.exit(1)``): a branch on a non-finite value whose body leaves the step. It runs on the
    step that went wrong, not on every step: a host read in its body is not a per-step read
    (the test itself, when it reads a tensor, still runs every step)."""
    if not any(
        type(call.func) in (cst.Name, cst.Attribute) and _last_name(call.func) in _FINITE_TESTS
        for call in calls_in(node.test)
    ):
        return False
    body = node.body
    if type(body) is not cst.IndentedBlock or not body.body:
        return False
    last = body.body[-1]
    if type(last) is not cst.SimpleStatementLine or not last.body:
        return False
    small = last.body[-1]
    if type(small) in (cst.Continue, cst.Break, cst.Return, cst.Raise):
        return True
    if type(small) is cst.Expr and type(small.value) is cst.Call:
        return not ctx.qnames(small.value.func).isdisjoint(_EXITS)
    return False


# Calls that end the process (resolved through imports: `from sys import exit as die` too).
_EXITS = frozenset({"sys.exit", "os._exit", "builtins.exit", "builtins.quit"})


def _names_a_loader(node: cst.CSTNode) -> bool:
    """``train_loader``, ``enumerate(tqdm(self.train_dataloader))``: an iterable that names a
    data loader (a name or attribute with ``loader`` in it, directly or as a call's argument)."""
    for n in iter_nodes(node):
        if type(n) is cst.Name and "loader" in n.value.lower():
            return True
    return False


def _host_number(
    node: cst.CSTNode, tensors: set[str], helper: Callable[[cst.Call], bool] | None = None
) -> bool:
    """An expression whose value is a Python number although it mentions a tensor: a host
    read (``t.item()``, ``float(t)``), a call for which ``helper`` holds (a same-module function
    returning such numbers), or arithmetic of one with other numbers
    (``xm.all_reduce('sum', loss).item() / world_size``)."""
    kind = type(node)
    if kind is cst.Call:
        func = node.func  # type: ignore[attr-defined]
        if type(func) is cst.Attribute and func.attr.value in ("item", "tolist"):
            return True
        if type(func) is cst.Name and func.value in _NUMBER_CONVERSIONS:
            return True
        return helper is not None and helper(node)  # type: ignore[arg-type]
    if kind is cst.BinaryOperation:
        left, right = node.left, node.right  # type: ignore[attr-defined]
        if _host_number(left, tensors, helper):
            return _host_number(right, tensors, helper) or not _names_in(right) & tensors
        if _host_number(right, tensors, helper):
            return not _names_in(left) & tensors
        return False
    if kind is cst.UnaryOperation:
        return _host_number(node.expression, tensors, helper)  # type: ignore[attr-defined]
    return False


# Tensor metadata torch_xla keeps on the host (the lazy tensor's shape and type): reading it runs
# no graph. Attributes, and methods called without touching the data.
_METADATA_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad"})
_METADATA_METHODS = frozenset({"size", "dim", "numel", "nelement", "element_size", "ndimension"})


def _reads_metadata(node: cst.CSTNode) -> bool:
    """``t.shape``, ``t.shape[-1]``, ``t.size(0)``, ``t.dtype``, ``t.device``, ``t.ndim``,
    ``len(t)``: an expression that reads a tensor's metadata, not its value (torch_xla
    ``XLATensor`` keeps the shape and type on the host; only the data is on the device)."""
    while True:
        kind = type(node)
        if kind is cst.Subscript:
            node = node.value  # type: ignore[attr-defined]
        elif kind is cst.Attribute:
            if node.attr.value in _METADATA_ATTRIBUTES:  # type: ignore[attr-defined]
                return True
            node = node.value  # type: ignore[attr-defined]
        elif kind is cst.Call:
            func = node.func  # type: ignore[attr-defined]
            if type(func) is cst.Name:
                return func.value == "len"
            if type(func) is cst.Attribute and func.attr.value in _METADATA_METHODS:
                return True
            return False
        else:
            return False


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
