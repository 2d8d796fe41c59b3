"""FSDPv2 (``SpmdFullyShardedDataParallel``): its mesh, its arguments and what may wrap it."""

from __future__ import annotations

import libcst as cst

from .. import apis
from ..context import find_arg, literal_string
from ..diagnostics import Severity
from ..rule import Invalid, PendingFix, Replacement, Rule, Valid
from .mesh import mesh_of
from .spmd import expects_error, function_key

FSDPV2_POSITIONAL = ("mesh", "shard_output")  # keyword-only since torch_xla 2.4 (pytorch/xla#7044)
KEYWORD_ONLY_SINCE = (2, 4)
CHECKPOINT_MODULE = frozenset({"torch_xla.distributed.fsdp.checkpoint_module",
                               "torch_xla.distributed.fsdp.utils.checkpoint_module"})

_IMPORT = ("from torch_xla.experimental.spmd_fully_sharded_data_parallel import "
           "SpmdFullyShardedDataParallel as FSDPv2\n")
_MESH = "import numpy as np\nimport torch_xla.distributed.spmd as xs\n"


def _keyword(arg: cst.Arg, name: str) -> cst.Arg:
    return arg.with_changes(keyword=cst.Name(name), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))


class Fsdpv2Mesh(Rule):
    code = "XLA009"
    name = "fsdpv2-mesh"
    summary = "FSDPv2 given mesh/shard_output positionally, no mesh at all, or a mesh without an 'fsdp' axis."
    message = "{detail}"
    severity = Severity.ERROR
    fixable = True
    explanation = """\
## What it does
Checks calls of `SpmdFullyShardedDataParallel` (FSDPv2, any alias). It flags:

- `mesh` or `shard_output` passed positionally, `FSDPv2(model, mesh)` (when linting
  for torch_xla 2.4 or later, `--target-version`);
- a call without `mesh=` in a program that never calls `xs.set_global_mesh(...)`;
- a `mesh=` that is a `Mesh(...)` call, or a name assigned once from one, whose literal
  `axis_names` lack `"fsdp"` (or that has no axis names), and a literal
  `extra_data_axis=` that is not one of the mesh's axis names.

Calls passing `*args`/`**kwargs` are only checked for what they spell out; calls under
`with self.assertRaises(...)`/`pytest.raises(...)` are not checked.

## Why is this bad
In torch_xla 2.9.0 (`torch_xla/experimental/spmd_fully_sharded_data_parallel.py`)
`__init__(self, module, *, mesh=None, shard_output=None, auto_wrap_policy=None,
auto_wrapper_callable=None, extra_data_axis=None)` is keyword-only after `module`
(since pytorch/xla#7044, torch_xla 2.4), so `FSDPv2(model, mesh)` raises
`TypeError: __init__() takes 2 positional arguments but 3 were given`. The FSDPv2 guide
(`docs/source/perf/fsdp_spmd.md`) still shows the positional form. Without `mesh=` it
falls back to `xs.get_global_mesh()` and raises `ValueError: No mesh is provided and no
global mesh is set` when none was set. It then checks `"fsdp" not in mesh.axis_names`
(`ValueError: The mesh must have an axis named 'fsdp'`; a mesh without axis names
fails with a `TypeError` there), shards every parameter on the `"fsdp"` axis
(`_prepare_spmd_partition_spec`, combined as `(extra_data_axis, "fsdp")` when
`extra_data_axis` is given) and raises `ValueError` for an `extra_data_axis` missing
from the mesh.

## Example
```python
mesh = xs.Mesh(np.arange(n), (n, 1), ("data", "model"))
model = FSDPv2(model, mesh)
```

## Use instead
```python
mesh = xs.Mesh(np.arange(n), (n, 1), ("fsdp", "model"))
model = FSDPv2(model, mesh=mesh)
# or: xs.set_global_mesh(mesh); model = FSDPv2(model)
```
The fix names positional `mesh` and `shard_output` arguments.

## References
- https://docs.pytorch.org/xla/master/perf/fsdp_spmd.html
- torch_xla 2.9.0 `torch_xla/experimental/spmd_fully_sharded_data_parallel.py`
- https://github.com/pytorch/xla/pull/7044
"""
    valid = (
        Valid(_MESH + _IMPORT + "mesh = xs.Mesh(np.arange(8), (8, 1), ('fsdp', 'model'))\n"
              "model = FSDPv2(model, mesh=mesh)\n"),
        Valid(_MESH + _IMPORT + "xs.set_global_mesh(xs.Mesh(np.arange(8), (8,), ('fsdp',)))\nmodel = FSDPv2(model)\n"),
        # A module of a program whose entry sets the global mesh before calling it.
        Valid(_IMPORT + "def wrap(model):\n    return FSDPv2(model)\n",
              files=(("setup_mesh.py", _MESH + "import example\nxs.set_global_mesh(xs.get_1d_mesh('fsdp'))\n"
                                       "model = example.wrap(model)\n"),)),
        Valid(_IMPORT + "wrap = lambda m, *args, **kwargs: FSDPv2(m, *args, **kwargs)\n"
              "model = FSDPv2(model, mesh=get_mesh(), auto_wrapper_callable=wrap)\n"),
        Valid(_MESH + _IMPORT + "mesh = xs.Mesh(np.arange(8), (2, 4), ('data', 'fsdp'))\n"
              "model = FSDPv2(model, mesh=mesh, extra_data_axis='data')\n"),
        Valid("import torch_xla\nclass SpmdFullyShardedDataParallel:\n    pass\n"
              "m = SpmdFullyShardedDataParallel(model, mesh)\n"),
        Valid("import pytest\n" + _IMPORT + "def test_no_mesh():\n    with pytest.raises(ValueError):\n"
              "        FSDPv2(model)\n"),
    )
    invalid = (
        Invalid(_MESH + _IMPORT + "mesh = xs.Mesh(np.arange(8), (8, 1), ('fsdp', 'model'))\n"
                "model = FSDPv2(model, mesh)\n", (5,),
                fixed=_MESH + _IMPORT + "mesh = xs.Mesh(np.arange(8), (8, 1), ('fsdp', 'model'))\n"
                "model = FSDPv2(model, mesh=mesh)\n"),
        Invalid("import torch_xla.experimental.spmd_fully_sharded_data_parallel as spmd_fsdp\n"
                "model = spmd_fsdp.SpmdFullyShardedDataParallel(model, mesh, shard_output)\n", (2,),
                fixed="import torch_xla.experimental.spmd_fully_sharded_data_parallel as spmd_fsdp\n"
                      "model = spmd_fsdp.SpmdFullyShardedDataParallel(model, mesh=mesh, shard_output=shard_output)\n"),
        Invalid(_IMPORT + "model = FSDPv2(model)\n", (2,)),
        Invalid(_MESH + _IMPORT + "mesh = xs.Mesh(np.arange(8), (8, 1), ('data', 'model'))\n"
                "def wrap(m):\n    return FSDPv2(m, mesh=mesh)\n", (6,)),
        Invalid(_MESH + "import torch_xla\nmodel = torch_xla.experimental.spmd_fully_sharded_data_parallel."
                "SpmdFullyShardedDataParallel(\n    model, mesh=xs.Mesh(np.arange(4), (4,), ('fsdp',)), "
                "extra_data_axis='dp')\n", (4,)),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.is_call_to(node, apis.FSDPV2) or expects_error(self.ctx):
            return
        positional = [a for a in node.args if a.keyword is None and not a.star]
        starred = any(a.star for a in node.args)
        if len(positional) > 1 and self.ctx.target_version >= KEYWORD_ONLY_SINCE:
            extra = positional[1:]
            names = ", ".join(f"`{n}`" for n in FSDPV2_POSITIONAL[: len(extra)]) or "arguments"
            self.report(node, self.message.format(
                detail=f"`SpmdFullyShardedDataParallel` takes {names} as keywords only (since torch_xla 2.4): "
                       "a positional argument after the module raises TypeError"), fix=self._fix(node))
            return
        mesh_arg = find_arg(node, "mesh", 1)
        if mesh_arg is None:
            if not starred:
                self.report(node, self.message.format(
                    detail="`SpmdFullyShardedDataParallel` without `mesh=` uses the global mesh, and this "
                           "program never calls `xs.set_global_mesh(...)`: ValueError 'No mesh is provided'"),
                    requires=[("global_mesh", False)])
            return
        mesh = mesh_of(self.ctx, mesh_arg.value)
        if mesh is None or mesh.axis_names is None:
            return
        if "fsdp" not in mesh.axis_names:
            have = ", ".join(repr(a) for a in mesh.axis_names)
            self.report(node, self.message.format(
                detail=(f"FSDPv2 shards parameters on the mesh axis 'fsdp', but the mesh's axis names are ({have})"
                        if have else "FSDPv2 needs a mesh with an axis named 'fsdp', but this mesh has no axis names")
                       + ": ValueError at construction"))
            return
        extra = find_arg(node, "extra_data_axis")
        axis = literal_string(extra.value) if extra is not None else None
        if axis is not None and axis not in mesh.axis_names:
            self.report(node, self.message.format(
                detail=f"`extra_data_axis={axis!r}` is not an axis of the mesh: ValueError at construction"))

    @staticmethod
    def _fix(node: cst.Call) -> PendingFix | None:
        positional = [a for a in node.args if a.keyword is None]
        if any(a.star for a in node.args) or len(positional) > 1 + len(FSDPV2_POSITIONAL):
            return None
        given = {a.keyword.value for a in node.args if a.keyword is not None}
        names = FSDPV2_POSITIONAL[: len(positional) - 1]
        if given & set(names):
            return None
        new_args, index = [], 0
        for arg in node.args:
            if arg.keyword is None:
                if index > 0:
                    arg = _keyword(arg, names[index - 1])
                index += 1
            new_args.append(arg)
        return PendingFix("name the arguments " + ", ".join(names),
                          [Replacement(node, node.with_changes(args=new_args))])


class CheckpointAfterFsdpv2(Rule):
    code = "XLA010"
    name = "checkpoint-after-fsdpv2"
    summary = "checkpoint_module applied to an FSDPv2-wrapped module; wrap the inner module instead."
    message = ("`checkpoint_module` applied to a module already wrapped in FSDPv2; apply it to the inner "
               "module: `FSDPv2(checkpoint_module(module), mesh=mesh)`")
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `checkpoint_module(x)` (`torch_xla.distributed.fsdp.checkpoint_module`) where `x`
is an FSDPv2 call, `checkpoint_module(FSDPv2(m, mesh=mesh))`, or a name last assigned
from one in the same function or module body (`model = FSDPv2(m)` then
`model = checkpoint_module(model)`).

## Why is this bad
`checkpoint_module` (torch_xla 2.9.0 `torch_xla/distributed/fsdp/utils.py`) replaces the
module's `forward` with one that runs under `torch_xla.utils.checkpoint.checkpoint`.
Applied to the FSDPv2 wrapper it checkpoints the wrapper's forward, which also runs the
wrapper's output-sharding hook and re-enters the wrapped module, instead of the layer's
own computation. The FSDPv2 guide (`docs/source/perf/fsdp_spmd.md`, "Gradient
checkpointing") states that checkpointing "needs to be applied to the module before
the FSDP wrapper. Otherwise, recursively loop into children modules will end up with
infinite loop."

## Example
```python
model = FSDPv2(model, mesh=mesh)
model = checkpoint_module(model)
```

## Use instead
```python
model = FSDPv2(checkpoint_module(model), mesh=mesh)
```
With `auto_wrap_policy`, checkpoint each wrapped layer through
`auto_wrapper_callable=lambda m, *a, **k: FSDPv2(checkpoint_module(m), *a, **k)`.

## References
- https://docs.pytorch.org/xla/master/perf/fsdp_spmd.html#gradient-checkpointing
- torch_xla 2.9.0 `torch_xla/distributed/fsdp/utils.py` (`checkpoint_module`)
"""
    valid = (
        Valid(_IMPORT + "from torch_xla.distributed.fsdp import checkpoint_module\n"
              "model = FSDPv2(checkpoint_module(model), mesh=mesh)\n"),
        Valid(_IMPORT + "from torch_xla.distributed.fsdp import checkpoint_module\n"
              "wrapped = FSDPv2(model, mesh=mesh)\nmodel = checkpoint_module(layer)\n"),
        Valid(_IMPORT + "from torch_xla.distributed.fsdp import checkpoint_module\n"
              "model = FSDPv2(model, mesh=mesh)\nmodel = Other(model)\nmodel = checkpoint_module(model)\n"),
    )
    invalid = (
        Invalid(_IMPORT + "from torch_xla.distributed.fsdp import checkpoint_module\n"
                "model = checkpoint_module(FSDPv2(model, mesh=mesh))\n", (3,)),
        Invalid(_IMPORT + "from torch_xla.distributed.fsdp.utils import checkpoint_module as ckpt\n"
                "def build(model, mesh):\n    model = FSDPv2(model, mesh=mesh)\n"
                "    model = ckpt(model)\n    return model\n", (5,)),
        Invalid("import torch_xla.distributed.fsdp as fsdp\n"
                "import torch_xla.experimental.spmd_fully_sharded_data_parallel as s\n"
                "m = fsdp.checkpoint_module(s.SpmdFullyShardedDataParallel(net))\n", (3,)),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.wrapped: dict[cst.CSTNode, set[str]] = {}

    def leave_Assign(self, node: cst.Assign) -> None:
        names = self.wrapped.setdefault(function_key(self.ctx), set())
        is_fsdp = self.ctx.is_call_to(node.value, apis.FSDPV2)
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                (names.add if is_fsdp else names.discard)(target.target.value)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.is_call_to(node, CHECKPOINT_MODULE):
            return
        arg = find_arg(node, "module", 0)
        if arg is None:
            return
        value = arg.value
        if self.ctx.is_call_to(value, apis.FSDPV2) or (
                isinstance(value, cst.Name) and value.value in self.wrapped.get(function_key(self.ctx), ())):
            self.report(node)
