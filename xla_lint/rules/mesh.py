"""Meshes and partition specs: how devices are laid out and how tensors map onto them."""

from __future__ import annotations

import libcst as cst

from ..analysis import apis
from ..analysis.context import literal_string
from ..analysis.devices import expects_error  # (spmd imports nothing from here)
from ..analysis.meshes import (
    LiteralMesh,
    literal_elements,
    literal_int,
    literal_mesh,
    mesh_of,
    spec_call,
)
from ..diagnostics import Severity
from ..rule import Invalid, PendingFix, Replacement, Rule, Valid

HYBRID_MESH_KEYWORDS = ("ici_mesh_shape", "dcn_mesh_shape", "axis_names")


class HybridMeshPositionalArgs(Rule):
    code = "XLA001"
    name = "hybrid-mesh-positional-args"
    summary = "HybridMesh is keyword-only: a positional argument raises TypeError."
    message = (
        "`HybridMesh` takes keyword arguments only; pass `ici_mesh_shape=`, "
        "`dcn_mesh_shape=` and `axis_names=`"
    )
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
        Valid(
            "import torch_xla.distributed.spmd as xs\n"
            "mesh = xs.HybridMesh(ici_mesh_shape=(1, 4), dcn_mesh_shape=(2, 1), axis_names=('data', 'fsdp'))\n"
        ),
        Valid("from mesh_utils import HybridMesh\nmesh = HybridMesh((4, 1), ('fsdp', 'model'))\n"),
        Valid(
            "import numpy as np\nimport torch_xla.distributed.spmd as xs\n"
            "mesh = xs.Mesh(np.arange(8), (8,), ('fsdp',))\n"
        ),
        Valid(
            "import torch_xla.distributed.spmd as xs\n"
            "def build(HybridMesh):\n    return HybridMesh((1, 4), (2, 1))\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch_xla.distributed.spmd as xs\n"
            "mesh = xs.HybridMesh((1, 4, 1), (2, 1, 1), ('data', 'fsdp', 'tensor'))\n",
            (2,),
            fixed="import torch_xla.distributed.spmd as xs\n"
            "mesh = xs.HybridMesh(ici_mesh_shape=(1, 4, 1), dcn_mesh_shape=(2, 1, 1), "
            "axis_names=('data', 'fsdp', 'tensor'))\n",
        ),
        Invalid(
            "from torch_xla.distributed.spmd import HybridMesh as HM\n"
            "mesh = HM((4, 1), axis_names=('fsdp', 'model'))\n",
            (2,),
            fixed="from torch_xla.distributed.spmd import HybridMesh as HM\n"
            "mesh = HM(ici_mesh_shape=(4, 1), axis_names=('fsdp', 'model'))\n",
        ),
        Invalid(
            "import torch_xla\n"
            "mesh = torch_xla.distributed.spmd.xla_sharding.HybridMesh(*shapes)\n",
            (2,),
        ),
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
                arg = arg.with_changes(
                    keyword=cst.Name(names[i]),
                    equal=cst.AssignEqual(
                        whitespace_before=cst.SimpleWhitespace(""),
                        whitespace_after=cst.SimpleWhitespace(""),
                    ),
                )
            new_args.append(arg)
        return PendingFix(
            "name the arguments " + ", ".join(names),
            [Replacement(node, node.with_changes(args=new_args))],
        )


class MeshShapeMismatch(Rule):
    code = "XLA011"
    name = "mesh-shape-mismatch"
    summary = (
        "A Mesh whose literal shape, axis names, device count or partition specs do not agree."
    )
    message = "{detail}"
    severity = Severity.ERROR
    explanation = """\
## What it does
Checks the literal arguments of torch_xla's `Mesh(device_ids, mesh_shape, axis_names)`
and of the partition specs used with it. It flags:

- a literal `mesh_shape` and `axis_names` of different lengths;
- a literal `mesh_shape` whose product differs from a literal device count
  (`np.arange(8)`, `range(8)`, `np.array(range(8))`);
- a partition spec (`mark_sharding(t, mesh, spec)`, `mark_sharding_with_gradients`,
  `ShardingSpec(mesh, spec)`) that names an axis the mesh does not have, or indexes a
  mesh dimension past the end, where `mesh` is a `Mesh(...)` call or a name its module
  or function assigns exactly once from one.

Meshes built from variables, a project's own `Mesh` class, specs held in variables and
code under `with self.assertRaises(...)`/`pytest.raises(...)` (tests provoking the
error on purpose) are not checked.

## Why is this bad
`Mesh.__init__` (torch_xla 2.9.0 `torch_xla/distributed/spmd/xla_sharding.py`) asserts
`len(mesh_shape) == len(axis_names)` ("Number of axis names ... must match mesh
dimensions") and `len(device_ids) == np.prod(mesh_shape)` ("Number of device IDs ...
must match mesh size"), and `_translate_named_partition_spec` raises
`ValueError: Axis name ... is not defined in the given mesh` for an unknown name. These
fail at run time, usually after minutes of start-up on a pod; a literal mismatch can be
seen before.

## Example
```python
mesh = xs.Mesh(np.arange(8), (4, 2), ("data",))
xs.mark_sharding(t, mesh, ("data", "model"))
```

## Use instead
```python
mesh = xs.Mesh(np.arange(8), (4, 2), ("data", "model"))
xs.mark_sharding(t, mesh, ("data", "model"))
```
Prefer `n = xr.global_runtime_device_count()` and a shape computed from `n` to literal
device counts: the mesh must span every device of the job.

## References
- https://docs.pytorch.org/xla/master/perf/spmd_basic.html#mesh
- torch_xla 2.9.0 `torch_xla/distributed/spmd/xla_sharding.py` (`Mesh.__init__`, `_translate_named_partition_spec`)
"""
    valid = (
        Valid(
            "import numpy as np\nimport torch_xla.distributed.spmd as xs\n"
            "mesh = xs.Mesh(np.arange(8), (4, 2), ('data', 'model'))\n"
            "xs.mark_sharding(t, mesh, ('data', 'model'))\nxs.mark_sharding(t, mesh, (('data', 'model'), None))\n"
        ),
        Valid(
            "import torch_xla.distributed.spmd as xs\nmesh = xs.Mesh(ids, (n, 1), ('data', 'model'))\n"
            "spec = ('fsdp', None)\nxs.mark_sharding(t, mesh, spec)\n"
        ),
        Valid(
            "from mylib import Mesh\nimport torch_xla\nmesh = Mesh(range(8), (4,), ('a', 'b'))\n"
        ),
        Valid(
            "import numpy as np\nimport torch_xla.distributed.spmd as xs\n"
            "mesh = xs.Mesh(np.arange(8), (8,), ('data',))\nif big:\n    mesh = xs.Mesh(np.arange(8), (4, 2), ('data', 'model'))\n"
            "xs.mark_sharding(t, mesh, ('data', 'model'))\n"
        ),
        Valid(
            "import numpy as np\nimport torch_xla.distributed.spmd as xs\n"
            "mesh = xs.Mesh(np.arange(8), (8,), ('data',))\n"
            "def shard(t, mesh):\n    xs.mark_sharding(t, mesh, ('model',))\n"
        ),
        Valid(
            "import numpy as np\nimport torch_xla.distributed.spmd as xs\n"
            "def test_bad_mesh(self):\n    with self.assertRaisesRegex(AssertionError, 'must match'):\n"
            "        xs.Mesh(np.arange(8), (4, 4), ('a', 'b'))\n"
        ),
    )
    invalid = (
        Invalid(
            "import numpy as np\nimport torch_xla.distributed.spmd as xs\n"
            "mesh = xs.Mesh(np.arange(8), (4, 2), ('data',))\n",
            (3,),
        ),
        Invalid(
            "import numpy as np\nfrom torch_xla.distributed.spmd import Mesh\n"
            "mesh = Mesh(np.arange(8), (2, 2), ('data', 'model'))\n",
            (3,),
        ),
        Invalid(
            "import numpy as np\nimport torch_xla.distributed.spmd as xs\n"
            "mesh = xs.Mesh(np.array(range(4)), (4, 1), ('fsdp', 'model'))\n"
            "def shard(t):\n    xs.mark_sharding(t, mesh, ('data', None))\n"
            "    xs.mark_sharding(t, mesh, ('fsdp', 2))\n",
            (5, 6),
        ),
        Invalid(
            "import torch_xla\nmesh = torch_xla.distributed.spmd.xla_sharding.Mesh(range(8), (8,), ('x',))\n"
            "spec = torch_xla.distributed.spmd.ShardingSpec(mesh, ('y',))\n",
            (3,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        mesh = literal_mesh(self.ctx, node)
        if mesh is not None:
            if not expects_error(self.ctx):
                self._check_mesh(node, mesh)
            return
        found = spec_call(self.ctx, node)
        if found is None:
            return
        spec, mesh_arg = found
        if spec is None or mesh_arg is None or expects_error(self.ctx):
            return
        mesh = mesh_of(self.ctx, mesh_arg.value)
        if mesh is None or mesh.axis_names is None:
            return
        elements = literal_elements(spec.value)
        if elements is None:
            return
        flat: list[cst.BaseExpression] = []
        for e in elements:
            inner = literal_elements(e) if isinstance(e, cst.Tuple) else None
            flat.extend(inner if inner is not None else [e])
        for e in flat:
            axis = literal_string(e)
            if axis is not None and axis not in mesh.axis_names:
                have = ", ".join(repr(a) for a in mesh.axis_names) or "no axis names"
                self.report(
                    node,
                    self.message.format(
                        detail=f"partition spec names axis {axis!r}, but the mesh has {have}: "
                        "`ValueError: Axis name ... is not defined in the given mesh`"
                    ),
                )
                return
            index = literal_int(e)
            if index is not None and mesh.shape_length is not None and index >= mesh.shape_length:
                self.report(
                    node,
                    self.message.format(
                        detail=f"partition spec indexes mesh dimension {index}, but the mesh has "
                        f"{mesh.shape_length} dimension(s)"
                    ),
                )
                return

    def _check_mesh(self, node: cst.Call, mesh: LiteralMesh) -> None:
        if (
            mesh.shape_length is not None
            and mesh.names_length is not None
            and mesh.shape_length != mesh.names_length
        ):
            self.report(
                node,
                self.message.format(
                    detail=f"`Mesh` has {mesh.shape_length} dimension(s) but {mesh.names_length} axis name(s); "
                    "`Mesh.__init__` asserts they match"
                ),
            )
            return
        if mesh.shape is not None and mesh.device_count is not None:
            size = 1
            for d in mesh.shape:
                size *= d
            if size != mesh.device_count:
                self.report(
                    node,
                    self.message.format(
                        detail=f"`Mesh` shape {mesh.shape} holds {size} device(s) but {mesh.device_count} device "
                        "id(s) are given; `Mesh.__init__` asserts they match"
                    ),
                )


class PartitionSpecNotTuple(Rule):
    code = "XLA014"
    name = "partition-spec-not-tuple"
    summary = "A partition spec written as a string, ('data'), where the tuple ('data',) was meant."
    message = "partition spec {text} is a string, not a tuple: write `({value},)`"
    severity = Severity.ERROR
    fixable = True
    explanation = """\
## What it does
Flags a string literal given as a partition spec: `xs.mark_sharding(t, mesh, ("data"))`,
`mark_sharding_with_gradients`, `xs.ShardingSpec(mesh, ("data"))` (also inside
`MpDeviceLoader(..., input_sharding=...)`), `enable_manual_sharding` and
`disable_manual_sharding`. Parentheses around a single value do not make a tuple:
`("data")` is the string `"data"`.

## Why is this bad
A partition spec is a tuple with one entry per tensor dimension. torch_xla 2.9.0
(`torch_xla/distributed/spmd/xla_sharding.py`, `_translate_named_partition_spec`)
iterates it, so a string is read character by character: `"data"` becomes the spec
`("d", "a", "t", "a")` and fails with `ValueError: Axis name d is not defined in the
given mesh`, or, for a one-letter axis name, works only by accident for 1-D tensors.

## Example
```python
xs.mark_sharding(bias, mesh, ("data"))
```

## Use instead
```python
xs.mark_sharding(bias, mesh, ("data",))
```
The fix adds the trailing comma. Specs held in variables and nested tuples such as
`(("data", "model"),)` are not flagged, nor code under `with self.assertRaises(...)`.

## References
- https://docs.python.org/3/library/stdtypes.html#tuple
- torch_xla 2.9.0 `torch_xla/distributed/spmd/xla_sharding.py` (`mark_sharding`, `ShardingSpec`)
"""
    valid = (
        Valid("import torch_xla.distributed.spmd as xs\nxs.mark_sharding(t, mesh, ('data',))\n"),
        Valid(
            "import torch_xla.distributed.spmd as xs\nxs.mark_sharding(t, mesh, (('data', 'model'),))\n"
        ),
        Valid(
            "import torch_xla.distributed.spmd as xs\nspec = 'data'\nxs.mark_sharding(t, mesh, spec)\n"
        ),
        Valid(
            "from mylib import mark_sharding\nimport torch_xla\nmark_sharding(t, mesh, ('data'))\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch_xla.distributed.spmd as xs\nxs.mark_sharding(t, mesh, ('data'))\n",
            (2,),
            fixed="import torch_xla.distributed.spmd as xs\nxs.mark_sharding(t, mesh, ('data',))\n",
        ),
        Invalid(
            "from torch_xla.distributed.spmd import ShardingSpec\nimport torch_xla.distributed.parallel_loader as pl\n"
            'loader = pl.MpDeviceLoader(loader, dev, input_sharding=ShardingSpec(mesh, "data"))\n',
            (3,),
            fixed="from torch_xla.distributed.spmd import ShardingSpec\n"
            "import torch_xla.distributed.parallel_loader as pl\n"
            'loader = pl.MpDeviceLoader(loader, dev, input_sharding=ShardingSpec(mesh, ("data",)))\n',
        ),
        Invalid(
            "import torch_xla\n"
            "torch_xla.distributed.spmd.xla_sharding.mark_sharding(t, mesh, partition_spec=('fsdp'))\n",
            (2,),
            fixed="import torch_xla\n"
            "torch_xla.distributed.spmd.xla_sharding.mark_sharding(t, mesh, partition_spec=('fsdp',))\n",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        found = spec_call(self.ctx, node)
        if found is None or found[0] is None or expects_error(self.ctx):
            return
        value = found[0].value
        if isinstance(value, cst.SimpleString) and literal_string(value) is not None:
            # Shown as `("data")` however it is laid out (a spec split over lines kept its indentation).
            text = "(" * len(value.lpar) + value.value + ")" * len(value.rpar)
            # The node's position excludes its own parentheses: `('data')` only needs the comma.
            new = f"{value.value}," if value.lpar else f"({value.value},)"
            fix = PendingFix(
                f"make the spec the tuple `({value.value},)`", [Replacement(value, new)]
            )
            self.report(value, self.message.format(text=f"`{text}`", value=value.value), fix=fix)
        elif isinstance(value, (cst.ConcatenatedString, cst.FormattedString)):
            text = " ".join(self.ctx.module.code_for_node(value).split())
            self.report(value, self.message.format(text=f"`{text}`", value="..."))
