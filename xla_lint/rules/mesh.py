"""Meshes and partition specs: how devices are laid out and how tensors map onto them."""

from __future__ import annotations

import libcst as cst

from .. import apis
from ..diagnostics import Severity
from ..rule import Invalid, PendingFix, Replacement, Rule, Valid

HYBRID_MESH_KEYWORDS = ("ici_mesh_shape", "dcn_mesh_shape", "axis_names")


class HybridMeshPositionalArgs(Rule):
    code = "XLA001"
    name = "hybrid-mesh-positional-args"
    summary = "HybridMesh is keyword-only: a positional argument raises TypeError."
    message = ("`HybridMesh` takes keyword arguments only; pass `ici_mesh_shape=`, "
               "`dcn_mesh_shape=` and `axis_names=`")
    severity = Severity.ERROR
    fixable = True
    explanation = """\
## What it does
Flags a call of torch_xla's `HybridMesh` (`torch_xla.distributed.spmd.HybridMesh`, under
any alias) given a positional argument, including `*args`.

## Why is this bad
`HybridMesh.__init__` is declared `def __init__(self, *, ici_mesh_shape, dcn_mesh_shape=None,
axis_names=None)`: every parameter is keyword-only, so `HybridMesh(ici, dcn, names)` raises
`TypeError: __init__() takes 1 positional argument but 4 were given` before any device
is touched. The class's own docstring still shows the positional form
(`HybridMesh(ici_mesh_shape, dcn_mesh_shape, ('data','fsdp','tensor'))`), which is where
most copies of the mistake come from. Checked against torch_xla 2.9.0,
`torch_xla/distributed/spmd/xla_sharding.py`. (`Mesh` is different: its
`device_ids, mesh_shape, axis_names` may be positional.)

## Example
```python
import torch_xla.distributed.spmd as xs

mesh = xs.HybridMesh((1, 4, 1), (2, 1, 1), ("data", "fsdp", "tensor"))
```

## Use instead
```python
mesh = xs.HybridMesh(ici_mesh_shape=(1, 4, 1), dcn_mesh_shape=(2, 1, 1),
                     axis_names=("data", "fsdp", "tensor"))
```
The fix names the positional arguments in order `ici_mesh_shape`, `dcn_mesh_shape`,
`axis_names`; it is offered when every argument is a plain position (no `*args`).

## References
- https://docs.pytorch.org/xla/master/perf/spmd_advanced.html#hybrid-mesh
- torch_xla 2.9.0 `torch_xla/distributed/spmd/xla_sharding.py`, `class HybridMesh`
"""
    valid = (
        Valid("import torch_xla.distributed.spmd as xs\n"
              "mesh = xs.HybridMesh(ici_mesh_shape=(1, 4), dcn_mesh_shape=(2, 1), axis_names=('data', 'fsdp'))\n"),
        Valid("from mesh_utils import HybridMesh\nmesh = HybridMesh((4, 1), ('fsdp', 'model'))\n"),
        Valid("import numpy as np\nimport torch_xla.distributed.spmd as xs\n"
              "mesh = xs.Mesh(np.arange(8), (8,), ('fsdp',))\n"),
        Valid("import torch_xla.distributed.spmd as xs\n"
              "def build(HybridMesh):\n    return HybridMesh((1, 4), (2, 1))\n"),
    )
    invalid = (
        Invalid("import torch_xla.distributed.spmd as xs\n"
                "mesh = xs.HybridMesh((1, 4, 1), (2, 1, 1), ('data', 'fsdp', 'tensor'))\n",
                (2,),
                fixed="import torch_xla.distributed.spmd as xs\n"
                      "mesh = xs.HybridMesh(ici_mesh_shape=(1, 4, 1), dcn_mesh_shape=(2, 1, 1), "
                      "axis_names=('data', 'fsdp', 'tensor'))\n"),
        Invalid("from torch_xla.distributed.spmd import HybridMesh as HM\n"
                "mesh = HM((4, 1), axis_names=('fsdp', 'model'))\n",
                (2,),
                fixed="from torch_xla.distributed.spmd import HybridMesh as HM\n"
                      "mesh = HM(ici_mesh_shape=(4, 1), axis_names=('fsdp', 'model'))\n"),
        Invalid("import torch_xla\n"
                "mesh = torch_xla.distributed.spmd.xla_sharding.HybridMesh(*shapes)\n", (2,)),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not any(arg.keyword is None for arg in node.args):
            return
        if not self.ctx.is_call_to(node, apis.HYBRID_MESH):
            return
        self.report(node, fix=self._fix(node))

    @staticmethod
    def _fix(node: cst.Call) -> PendingFix | None:
        positional = [a for a in node.args if a.keyword is None]
        if any(a.star for a in node.args) or len(positional) > len(HYBRID_MESH_KEYWORDS):
            return None
        given = {a.keyword.value for a in node.args if a.keyword is not None}
        names = HYBRID_MESH_KEYWORDS[: len(positional)]
        if given & set(names):
            return None
        new_args = []
        for i, arg in enumerate(node.args):
            if arg.keyword is None:
                arg = arg.with_changes(keyword=cst.Name(names[i]), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            new_args.append(arg)
        return PendingFix("name the arguments " + ", ".join(names),
                          [Replacement(node, node.with_changes(args=new_args))])
