"""XLA016: gradients clipped before they are reduced across replicas."""

from __future__ import annotations

import libcst as cst

from ...analysis import apis
from ...analysis.devices import (
    function_key,
)
from ...diagnostics import Severity
from ...rule import Invalid, Rule, Valid
from .common import _LAUNCH, MULTIPROCESS

CLIP_APIS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.clip_grad_norm",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_value_",
    }
)


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
