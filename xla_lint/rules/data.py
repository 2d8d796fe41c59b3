"""Input data in SPMD: what ``MpDeviceLoader(..., input_sharding=...)`` does to each tensor of a
batch, and which part of the data each host loads.

What the rules rely on, checked against torch_xla 2.9.0:

- ``torch_xla/distributed/parallel_loader.py`` (``ParallelLoader.send_cpu_data_to_device``):
  ``input_sharding`` is one ``ShardingSpec`` applied to every tensor of the batch, or a dict of
  them keyed like a dict batch (a non-dict batch then raises ``ValueError``, a missing key
  ``KeyError``); ``MpDeviceLoader`` passes its keyword arguments to ``ParallelLoader``.
- ``torch_xla/core/xla_model.py`` (``send_cpu_data_to_device``): ``input_sharding.xla_spec(t)``
  per tensor; with ``minibatch`` the per-host batch must divide by the local device count.
- ``torch_xla/distributed/spmd/xla_sharding.py`` (``ShardingSpec``): ``xla_spec`` returns None
  (the tensor is copied whole to every device) unless ``can_apply``, which is
  ``len(t.shape) == len(self.partition_spec)``; ``__post_init__`` types a spec without
  ``None`` as TILED over a tile assignment that keeps every mesh axis (``_get_tile_assignment``),
  where ``Mesh.get_op_sharding`` (what ``mark_sharding`` uses) switches to partial replication
  when the mesh has more axes than the spec has entries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from ..analysis import apis
from ..analysis.context import find_arg
from ..analysis.meshes import literal_elements, literal_int, mesh_of, spec_call
from ..analysis.values import Known, Site, definition, file_values, one_line, value_of
from ..analysis.walk import iter_nodes
from ..diagnostics import Severity
from ..program.facts import Fact
from ..rule import Invalid, Rule, Valid

SPMD = ((Fact.SPMD, True),)
DATA_LOADER = "torch.utils.data.DataLoader"
SAMPLE_GENERATOR = "torch_xla.utils.utils.SampleGenerator"
TENSOR_DATASET = frozenset(
    {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}
)
# Samplers that do not split the data between hosts (torch/utils/data/sampler.py).
PLAIN_SAMPLERS = frozenset(
    {
        "torch.utils.data.RandomSampler",
        "torch.utils.data.SequentialSampler",
        "torch.utils.data.sampler.RandomSampler",
        "torch.utils.data.sampler.SequentialSampler",
    }
)
# Tensor factories whose size is given as `*size` or as one sequence (torch 2.9 signatures).
SIZE_FACTORIES = frozenset(
    {"torch.randn", "torch.rand", "torch.zeros", "torch.ones", "torch.empty"}
)
# Tensor methods that keep the rank: `torch.randint(0, 10, (n,)).long()`.
RANK_KEEPING_METHODS = frozenset(
    {
        "float",
        "long",
        "int",
        "half",
        "bfloat16",
        "double",
        "bool",
        "to",
        "contiguous",
        "clone",
        "detach",
    }
)
_MAX_HOPS = 8


# ---- what torch_xla does with one ShardingSpec (the runtime test checks these) ---------------


def spec_applies(spec_length: int, rank: int) -> bool:
    """Whether a ``ShardingSpec`` with ``spec_length`` entries shards a tensor of ``rank``:
    ``ShardingSpec.can_apply`` (torch_xla 2.9.0) is ``len(t.shape) == len(self.partition_spec)``;
    for any other rank ``xla_spec`` returns None and the loader replicates the tensor."""
    return rank == spec_length


def spec_axes(spec: Sequence[object], axis_names: Sequence[str] | None) -> list[int] | None:
    """The mesh axes (indices) a partition spec tiles over, tuples flattened, or None when an
    entry is not an int, an axis name of ``axis_names``, a tuple of those or None."""
    axes: list[int] = []
    for entry in spec:
        for item in entry if isinstance(entry, tuple) else (entry,):
            if item is None:
                continue
            if isinstance(item, bool) or not isinstance(item, (int, str)):
                return None
            if isinstance(item, str):
                if not axis_names or item not in axis_names:
                    return None
                item = list(axis_names).index(item)
            axes.append(item)
    return axes


def raises_index_error(
    spec: Sequence[object],
    axis_names: Sequence[str] | None,
    mesh_rank: int,
    devices: int | None = None,
) -> bool | None:
    """Whether ``ShardingSpec(mesh, spec)`` makes the loader raise ``IndexError`` for a tensor of
    rank ``len(spec)``: no ``None`` entry (torch_xla 2.9.0 ``_get_sharding_type`` says TILED, with
    more than one device) and fewer mesh axes named than the mesh has, so the tile assignment
    (``_get_tile_assignment``) has more dimensions than the tensor. None when it cannot be told."""
    if devices == 1 or not spec or any(entry is None for entry in spec):
        return False
    axes = spec_axes(spec, axis_names)
    if axes is None or len(set(axes)) != len(axes) or any(a < 0 or a >= mesh_rank for a in axes):
        return None
    return len(axes) < mesh_rank


# ---- reading the program -------------------------------------------------------------------


def resolve(
    ctx, node: cst.BaseExpression | None, site: Site | None = None
) -> tuple[cst.BaseExpression, Site] | None:
    """``node`` itself, or for a name the single expression assigned to it that reaches the read
    (followed through ``a = b`` chains), with where that expression is read; None when unknown."""
    if node is None:
        return None
    if site is None:
        site = value_site(ctx)
    for _ in range(_MAX_HOPS):
        if not isinstance(node, cst.Name):
            return node, site
        found = definition(ctx, node, site)
        if found is None:
            return None
        node, site = found
    return None


def value_site(ctx) -> Site:
    """The site of the node being visited (what :func:`xla_lint.analysis.values.value_of` reads at by default)."""
    return file_values(ctx).current_site()


def call_to(
    ctx, found: tuple[cst.BaseExpression, Site] | None, names: frozenset[str] | str
) -> cst.Call | None:
    """The resolved expression when it is a call of one of ``names``, in its own scope."""
    if found is None or not isinstance(found[0], cst.Call):
        return None
    qnames = ctx.qnames(found[0].func, found[1].scope)
    wanted = {names} if isinstance(names, str) else names
    return found[0] if qnames & wanted else None


def input_sharding_arg(ctx, call: cst.Call) -> cst.Arg | None:
    """The ``input_sharding`` argument of an ``MpDeviceLoader``/``ParallelLoader`` call
    (``ParallelLoader``'s eighth positional parameter), else None."""
    names = ctx.qnames(call.func)
    if apis.MP_DEVICE_LOADER in names:
        return find_arg(call, "input_sharding")
    if apis.PARALLEL_LOADER in names:
        return find_arg(call, "input_sharding", 7)
    return None


@dataclass(frozen=True)
class Spec:
    """One ``ShardingSpec(mesh, partition_spec, minibatch)`` call, as far as the file tells."""

    call: cst.Call
    site: Site
    partition: tuple | None  # the partition spec when it is a known tuple/list
    minibatch: object  # the Known value of `minibatch` (False when not given), else None
    at: cst.BaseExpression  # where the loader call names it (the finding's position)


def sharding_specs(ctx, value: cst.BaseExpression) -> list[Spec] | None:
    """The ``ShardingSpec`` calls an ``input_sharding`` value stands for: one for a spec, one per
    value for a dict display of specs; None when any part is unknown. Each :class:`Spec`'s ``at``
    is the expression of ``value`` that names it (a dict display's value, else ``value``)."""
    found = resolve(ctx, value)
    if found is None:
        return None
    if isinstance(found[0], cst.Dict):
        specs: list[Spec] = []
        for element in found[0].elements:
            if not isinstance(element, cst.DictElement):
                return None
            at = element.value if found[0] is value else value
            one = _spec(ctx, resolve(ctx, element.value, found[1]), at)
            if one is None:
                return None
            specs.append(one)
        return specs
    one = _spec(ctx, found, value)
    return [one] if one is not None else None


def _spec(
    ctx, found: tuple[cst.BaseExpression, Site] | None, at: cst.BaseExpression
) -> Spec | None:
    call = call_to(ctx, found, apis.SHARDING_SPEC)
    if call is None or found is None or any(a.star for a in call.args):
        return None
    site = found[1]
    args = spec_call(ctx, call)
    partition = None
    if args is not None and args[0] is not None:
        known = value_of(ctx, args[0].value, site)
        if isinstance(known, Known) and isinstance(known.value, (tuple, list)):
            partition = tuple(known.value)
    flag = find_arg(call, "minibatch", 2)
    minibatch: object = False
    if flag is not None:
        known = value_of(ctx, flag.value, site)
        minibatch = known.value if isinstance(known, Known) else None
    return Spec(call, site, partition, minibatch, at)


def wrapped_loader(ctx, loader_call: cst.Call) -> tuple[cst.Call, Site] | None:
    """The call that builds what an ``MpDeviceLoader``/``ParallelLoader`` wraps (its first
    argument, directly or through names), when the file shows one."""
    arg = find_arg(
        loader_call,
        "loader" if ctx.is_call_to(loader_call, apis.MP_DEVICE_LOADER) else "cpu_loader",
        0,
    )
    found = resolve(ctx, arg.value) if arg is not None else None
    if found is None or not isinstance(found[0], cst.Call) or any(a.star for a in found[0].args):
        return None
    return found[0], found[1]


def data_loader(ctx, loader_call: cst.Call) -> tuple[cst.Call, Site] | None:
    """The ``torch.utils.data.DataLoader(...)`` call an XLA loader wraps, when the file builds it."""
    found = wrapped_loader(ctx, loader_call)
    return found if call_to(ctx, found, DATA_LOADER) is not None else None


def tensor_rank(ctx, node: cst.BaseExpression, site: Site) -> int | None:
    """The rank of a tensor built from literal sizes: ``torch.randn(n, 3, 224, 224)`` (4),
    ``torch.zeros((n, 16))`` (2), ``torch.randint(0, 10, (n,))`` (1), ``torch.full((n, 2), 0.)``,
    ``torch.arange(n)``, through names and rank-keeping methods (``.float()``, ``.to(...)``)."""
    found = resolve(ctx, node, site)
    if found is None:
        return None
    call, site = found
    if not isinstance(call, cst.Call) or any(a.star for a in call.args):
        return None
    func = call.func
    if (
        isinstance(func, cst.Attribute)
        and func.attr.value in RANK_KEEPING_METHODS
        and not ctx.qnames(func, site.scope)
    ):
        return tensor_rank(ctx, func.value, site)
    names = ctx.qnames(func, site.scope)
    positional = [a.value for a in call.args if a.keyword is None]
    if names & SIZE_FACTORIES:
        size = find_arg(call, "size")
        if size is not None:
            return _sequence_length(ctx, size.value, site)
        if len(positional) == 1:
            return _size_rank(ctx, positional[0], site)
        if len(positional) > 1 and all(_sequence_length(ctx, p, site) is None for p in positional):
            return len(positional)
        return None
    if "torch.randint" in names:
        size = find_arg(call, "size")
        if size is None and len(positional) in (2, 3):
            return _sequence_length(ctx, positional[-1], site)
        return _sequence_length(ctx, size.value, site) if size is not None else None
    if "torch.full" in names:
        size = find_arg(call, "size", 0)
        return _sequence_length(ctx, size.value, site) if size is not None else None
    if "torch.arange" in names and positional and find_arg(call, "out") is None:
        return 1
    return None


def _sequence_length(ctx, node: cst.BaseExpression, site: Site) -> int | None:
    elements = literal_elements(node)
    if elements is not None:
        return len(elements)
    known = value_of(ctx, node, site)
    if isinstance(known, Known) and isinstance(known.value, (tuple, list)):
        return len(known.value)
    return None


def _size_rank(ctx, node: cst.BaseExpression, site: Site) -> int | None:
    """The rank a single size argument gives: a sequence's length, 1 for an int."""
    length = _sequence_length(ctx, node, site)
    if length is not None:
        return length
    if literal_int(node) is not None:
        return 1
    known = value_of(ctx, node, site)
    if (
        isinstance(known, Known)
        and isinstance(known.value, int)
        and not isinstance(known.value, bool)
    ):
        return 1
    return None


@dataclass(frozen=True)
class Batch:
    """The tensors of the batches a loader yields, by rank, and the expression they come from."""

    ranks: tuple[int, ...]
    source: cst.CSTNode


def tensor_batch(ctx, loader_call: cst.Call) -> Batch | None:
    """The ranks of the batch tensors an XLA loader gets, when the file shows them: a
    ``DataLoader`` over a ``TensorDataset`` of tensors of known rank (one batch tensor per
    dataset tensor, same rank: the default collate stacks samples of rank r - 1 along a new
    dim 0), or torch_xla's ``SampleGenerator(data=(...))``, which yields ``data`` as it is
    (``torch_xla/utils/utils.py``). None otherwise: a dataset of dicts, a custom ``Dataset``, a
    ``collate_fn``, ``batch_size=None``..."""
    found = wrapped_loader(ctx, loader_call)
    if call_to(ctx, found, SAMPLE_GENERATOR) is not None and found is not None:
        data = find_arg(found[0], "data", 0)
        data_found = resolve(ctx, data.value, found[1]) if data is not None else None
        if data_found is None:
            return None
        tensors = literal_elements(data_found[0])
        ranks = (
            [tensor_rank(ctx, t, data_found[1]) for t in tensors]
            if tensors
            else [tensor_rank(ctx, data_found[0], data_found[1])]
        )
        return _batch(ranks, data_found[0])
    if call_to(ctx, found, DATA_LOADER) is None or found is None:
        return None
    loader, site = found
    if find_arg(loader, "collate_fn", 5) is not None:
        return None
    batch_size = find_arg(loader, "batch_size", 1)
    if batch_size is not None:
        known = value_of(ctx, batch_size.value, site)
        if isinstance(known, Known) and known.value is None:
            return None  # no automatic batching: the loader yields samples
    dataset = find_arg(loader, "dataset", 0)
    dataset_found = resolve(ctx, dataset.value, site) if dataset is not None else None
    call = call_to(ctx, dataset_found, TENSOR_DATASET)
    if (
        call is None
        or dataset_found is None
        or not call.args
        or any(a.star or a.keyword for a in call.args)
    ):
        return None
    return _batch([tensor_rank(ctx, a.value, dataset_found[1]) for a in call.args], call)


def _batch(ranks: list[int | None], source: cst.BaseExpression) -> Batch | None:
    """The batch of tensors of ``ranks`` built at ``source``; None when a rank is unknown."""
    known = [r for r in ranks if r is not None]
    return Batch(tuple(known), source) if len(known) == len(ranks) else None


def _spec_text(spec: Sequence[object]) -> str:
    return repr(tuple(spec))


def _listing(items: list[tuple[int, int]]) -> str:
    """``[(2, 1)]`` -> "tensor 2 (rank 1)"; several -> "tensors 1, 2 (ranks 4, 1)"."""
    if len(items) == 1:
        return f"tensor {items[0][0]} (rank {items[0][1]})"
    return (
        f"tensors {', '.join(str(i) for i, _ in items)} "
        f"(ranks {', '.join(str(r) for _, r in items)})"
    )


class SpmdInputSharding(Rule):
    code = "XLA022"
    name = "spmd-input-sharding"
    summary = (
        "One input_sharding ShardingSpec for batch tensors of other ranks: they are silently "
        "replicated, or the loader raises IndexError."
    )
    message = (
        "`input_sharding` {spec} has {n} entries and torch_xla applies it only to batch tensors of rank "
        "{n}: {which} of the batches from `{source}` get no sharding and are copied whole "
        "to every device, without a warning; give each tensor its own spec (a dict batch and "
        "`input_sharding={{key: ShardingSpec(...)}}`)"
    )
    index_error = (
        "`ShardingSpec` {spec} has no `None` and names {k} of the mesh's {m} axes: the loader raises "
        "`IndexError: too many indices for tensor of dimension {n}` on the first batch tensor of rank "
        "{n} (tensors of other ranks are replicated); name every mesh axis (group them: "
        "`(('data', 'model'),)`), or `xs.mark_sharding` the tensor after loading"
    )
    severity = Severity.WARNING
    preview = True
    explanation = """\
## What it does
Looks at `MpDeviceLoader(loader, device, input_sharding=...)` and
`ParallelLoader(..., input_sharding=...)` in an SPMD program, with the spec written in the
call or assigned to a name in the same file. Two findings:

- **Warning**: the loader wraps a `DataLoader` over a `TensorDataset` (or torch_xla's
  `SampleGenerator(data=(...))`) built in the same file from tensors of literal rank
  (`torch.randn(n, 3, 224, 224)`, `torch.randint(0, 10, (n,))`,
  `torch.zeros`/`ones`/`rand`/`empty`/`full`/`arange`), and some of them have a rank other
  than the number of entries of the one `ShardingSpec`: those tensors are replicated.
- **Error**: a `ShardingSpec` (also a value of the dict form) over a `Mesh` with literal
  axes whose partition spec has no `None` and names fewer mesh axes than the mesh has, such
  as `ShardingSpec(mesh, ("data",))` on a `("data", "model")` mesh.

Not flagged: the dict form's per-key specs for rank (the file does not show the dict
batch's shapes), datasets of dicts, custom `Dataset` classes, a `collate_fn`, specs and
meshes the file does not spell out, and specs whose length matches every tensor.

## Why is this bad
In torch_xla 2.9.0 the loader applies the one spec to every tensor of the batch
(`torch_xla/distributed/parallel_loader.py`, `ParallelLoader.send_cpu_data_to_device`, then
`torch_xla/core/xla_model.py`, `send_cpu_data_to_device`: `shardings = [input_sharding.xla_spec(t)
for t in tensors]`). `ShardingSpec.xla_spec` (`torch_xla/distributed/spmd/xla_sharding.py`)
returns None unless `can_apply`, which is `len(t.shape) == len(self.partition_spec)`; a None
sharding sends the whole tensor to every device. So with
`ShardingSpec(mesh, ("data", None, None, None))` the images are split over `data` and the
rank-1 labels are replicated, with no warning; with a rank-2 spec the images themselves are
replicated and every device holds the global batch. Measured on 8 CPU devices with a
`(4, 2)` mesh: images `{devices=[4,1,1,1,2]0,...,7 last_tile_dim_replicate}`, labels
`{replicated}`.

`ShardingSpec.__post_init__` types a spec without `None` as TILED and builds its tile
assignment from every mesh axis (`_get_tile_assignment`), unlike `mark_sharding`, whose
`Mesh.get_op_sharding` switches to partial replication when the mesh has more axes than the
spec has entries. A tensor of the spec's rank then fails inside the loader thread, re-raised
by the iterator: `IndexError: too many indices for tensor of dimension 1` for
`ShardingSpec(mesh, ("data",))` on a `(4, 2)` mesh (measured; `xs.mark_sharding` of the same
rank-1 tensor with the same spec works).

## Example
```python
mesh = xs.Mesh(np.arange(8), (4, 2), ("data", "model"))
dataset = TensorDataset(torch.randn(1024, 3, 224, 224), torch.randint(0, 10, (1024,)))
loader = DataLoader(dataset, batch_size=64)
train_loader = pl.MpDeviceLoader(loader, device,
                                 input_sharding=xs.ShardingSpec(mesh, ("data", None, None, None)))
```

## Use instead
```python
def as_dict(samples):
    images, labels = default_collate(samples)
    return {"images": images, "labels": labels}

loader = DataLoader(dataset, batch_size=64, collate_fn=as_dict)
train_loader = pl.MpDeviceLoader(loader, device, input_sharding={
    "images": xs.ShardingSpec(mesh, ("data", None, None, None)),
    "labels": xs.ShardingSpec(mesh, (("data", "model"),)),  # every mesh axis: no IndexError
})
```
Each key of the dict batch needs a spec (`KeyError` otherwise) and a spec of its rank. Or
keep the tuple batch and shard the odd tensors after loading:
`xs.mark_sharding(labels, mesh, ("data",))`.

## References
- https://docs.pytorch.org/xla/master/perf/spmd_advanced.html
- torch_xla 2.9.0 `torch_xla/distributed/parallel_loader.py` (`ParallelLoader.send_cpu_data_to_device`),
  `torch_xla/core/xla_model.py` (`send_cpu_data_to_device`),
  `torch_xla/distributed/spmd/xla_sharding.py` (`ShardingSpec.xla_spec`, `can_apply`, `_get_tile_assignment`)
"""
    valid = (
        # One rank for every tensor.
        Valid(
            "import numpy as np\nimport torch\nimport torch_xla\nimport torch_xla.runtime as xr\n"
            "import torch_xla.distributed.spmd as xs\nimport torch_xla.distributed.parallel_loader as pl\n"
            "from torch.utils.data import DataLoader, TensorDataset\nxr.use_spmd()\n"
            "mesh = xs.Mesh(np.arange(8), (4, 2), ('data', 'model'))\n"
            "ds = TensorDataset(torch.randn(64, 16), torch.randint(0, 10, (64, 1)))\n"
            "loader = pl.MpDeviceLoader(DataLoader(ds, batch_size=8), torch_xla.device(),\n"
            "                           input_sharding=xs.ShardingSpec(mesh, ('data', None)))\n"
        ),
        # The dict form, with a spec per key; an all-axes entry for the rank-1 labels.
        Valid(
            "import numpy as np\nimport torch_xla\nimport torch_xla.runtime as xr\n"
            "import torch_xla.distributed.spmd as xs\nimport torch_xla.distributed.parallel_loader as pl\n"
            "xr.use_spmd()\nmesh = xs.Mesh(np.arange(8), (4, 2), ('data', 'model'))\n"
            "loader = pl.MpDeviceLoader(train_loader, torch_xla.device(), input_sharding={\n"
            "    'images': xs.ShardingSpec(mesh, ('data', None, None, None)),\n"
            "    'labels': xs.ShardingSpec(mesh, (('data', 'model'),))})\n"
        ),
        # A custom dataset, a collate_fn, a dataset of dicts: the batch's ranks are not in the file.
        Valid(
            "import torch\nimport torch_xla\nimport torch_xla.runtime as xr\n"
            "import torch_xla.distributed.spmd as xs\nimport torch_xla.distributed.parallel_loader as pl\n"
            "from torch.utils.data import DataLoader, Dataset, TensorDataset\nxr.use_spmd()\n"
            "class Images(Dataset):\n    def __getitem__(self, i):\n"
            "        return torch.randn(3, 8, 8), torch.tensor(1)\n"
            "spec = xs.ShardingSpec(mesh, ('data', None, None, None))\n"
            "a = pl.MpDeviceLoader(DataLoader(Images(), batch_size=8), dev, input_sharding=spec)\n"
            "ds = TensorDataset(torch.randn(64, 3, 8, 8), torch.randint(0, 10, (64,)))\n"
            "b = pl.MpDeviceLoader(DataLoader(ds, batch_size=8, collate_fn=to_dict), dev, input_sharding=spec)\n"
            "c = pl.MpDeviceLoader(DataLoader(records, batch_size=8), dev, input_sharding=spec)\n"
        ),
        # A one-axis mesh, a spec with None, and a spec naming every axis: no IndexError.
        Valid(
            "import numpy as np\nimport torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
            "import torch_xla.distributed.parallel_loader as pl\nxr.use_spmd()\n"
            "m1 = xs.Mesh(np.arange(8), (8,), ('data',))\nm2 = xs.Mesh(np.arange(8), (4, 2), ('data', 'model'))\n"
            "a = pl.MpDeviceLoader(loader, dev, input_sharding=xs.ShardingSpec(m1, ('data',)))\n"
            "b = pl.MpDeviceLoader(loader, dev, input_sharding=xs.ShardingSpec(m2, ('data', None)))\n"
            "c = pl.MpDeviceLoader(loader, dev, input_sharding=xs.ShardingSpec(m2, (('data', 'model'),)))\n"
            "d = pl.MpDeviceLoader(loader, dev, input_sharding=xs.ShardingSpec(m2, ('model', 'data')))\n"
        ),
    )
    invalid = (
        Invalid(
            "import numpy as np\nimport torch\nimport torch_xla\nimport torch_xla.runtime as xr\n"
            "import torch_xla.distributed.spmd as xs\nimport torch_xla.distributed.parallel_loader as pl\n"
            "from torch.utils.data import DataLoader, TensorDataset\nxr.use_spmd()\n"
            "mesh = xs.Mesh(np.arange(8), (4, 2), ('data', 'model'))\nN = 1024\n"
            "dataset = TensorDataset(torch.randn(N, 3, 224, 224), torch.randint(0, 10, (N,)))\n"
            "loader = DataLoader(dataset, batch_size=64, shuffle=True)\n"
            "train_loader = pl.MpDeviceLoader(loader, torch_xla.device(),\n"
            "    input_sharding=xs.ShardingSpec(mesh, ('data', None, None, None)))\n",
            (14,),
        ),
        # Through names, a ParallelLoader, rank-keeping methods: both tensors are replicated.
        Invalid(
            "import torch\nimport torch_xla.runtime as xr\n"
            "from torch_xla.distributed.spmd import ShardingSpec\n"
            "from torch_xla.distributed.parallel_loader import ParallelLoader\n"
            "import torch.utils.data as data\nxr.use_spmd()\n"
            "def main(mesh, device):\n    x = torch.zeros((256, 32, 32)).float()\n"
            "    y = torch.randint(10, size=(256,)).long()\n"
            "    loader = data.DataLoader(data.TensorDataset(x, y), batch_size=32)\n"
            "    spec = ShardingSpec(mesh, ('data', None))\n"
            "    return ParallelLoader(loader, [device], input_sharding=spec)\n",
            (12,),
        ),
        # Fewer named axes than the mesh has and no None: IndexError (also in the dict form).
        Invalid(
            "import numpy as np\nimport torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
            "import torch_xla.distributed.parallel_loader as pl\nxr.use_spmd()\n"
            "mesh = xs.Mesh(np.arange(8), (4, 2), ('data', 'model'))\n"
            "a = pl.MpDeviceLoader(loader, dev, input_sharding=xs.ShardingSpec(mesh, ('data',)))\n"
            "b = pl.MpDeviceLoader(loader, dev, input_sharding={'x': xs.ShardingSpec(mesh, ('data', None)),\n"
            "                                                   'y': xs.ShardingSpec(mesh, (0,))})\n",
            (7, 9),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        arg = input_sharding_arg(self.ctx, node)
        if arg is None:
            return
        specs = sharding_specs(self.ctx, arg.value)
        if not specs:
            return
        reported = [self._index_error(spec) for spec in specs]
        if any(reported):
            return
        if len(specs) != 1 or specs[0].partition is None or isinstance(arg.value, cst.Dict):
            return
        partition = specs[0].partition
        batch = tensor_batch(self.ctx, node)
        if batch is None:
            return
        odd = [(i + 1, r) for i, r in enumerate(batch.ranks) if not spec_applies(len(partition), r)]
        if not odd:
            return
        self.report(
            arg.value,
            self.message.format(
                spec=_spec_text(partition),
                n=len(partition),
                which=_listing(odd),
                source=one_line(self.ctx, batch.source, 60),
            ),
            requires=SPMD,
        )

    def _index_error(self, spec: Spec) -> bool:
        """Report ``spec`` when it raises IndexError in the loader; True when reported."""
        if spec.partition is None:
            return False
        args = spec_call(self.ctx, spec.call)
        mesh = (
            mesh_of(self.ctx, args[1].value) if args is not None and args[1] is not None else None
        )
        if mesh is None or mesh.shape_length is None:
            return False
        devices = math.prod(mesh.shape) if mesh.shape is not None else None
        if not raises_index_error(spec.partition, mesh.axis_names, mesh.shape_length, devices):
            return False
        axes = spec_axes(spec.partition, mesh.axis_names) or []
        self.report(
            spec.at,
            self.index_error.format(
                spec=_spec_text(spec.partition),
                k=len(axes),
                m=mesh.shape_length,
                n=len(spec.partition),
            ),
            requires=SPMD,
            severity=Severity.ERROR,
        )
        return True


# ---- XLA023: minibatch=True without a per-host split -----------------------------------------

# Identifiers that show the file splits its data between hosts or processes somewhere (a
# sampler built in another function, a dataset sharded by process index, HF datasets'
# `split_dataset_by_node`): with any of them, XLA023 stays silent.
SPLIT_WORDS = (
    "rank",
    "process_index",
    "process_count",
    "ordinal",
    "world_size",
    "host_index",
    "host_id",
    "num_replicas",
    "num_processes",
    "split_dataset_by_node",
)
SPLIT_NAMES = frozenset(
    {"DistributedSampler", "shard", "shards", "num_shards", "shard_id", "shard_index"}
)
SPLIT_ENVIRONMENT = frozenset({"RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK"})


def splits_data(ctx) -> bool:
    """Whether the file mentions anything that splits data between hosts (:data:`SPLIT_WORDS`,
    :data:`SPLIT_NAMES`, a ``"RANK"``-like environment variable), anywhere."""

    def scan() -> bool:
        for node in iter_nodes(ctx.module):
            if isinstance(node, cst.Name):
                word = node.value
                if word in SPLIT_NAMES or any(w in word.lower() for w in SPLIT_WORDS):
                    return True
            elif (
                isinstance(node, cst.SimpleString) and node.value.strip("'\"") in SPLIT_ENVIRONMENT
            ):
                return True
        return False

    return ctx.memo(("data.splits_data",), scan)


def local_dataset(ctx, loader: cst.Call, site: Site) -> cst.Call | None:
    """The dataset call of a ``DataLoader`` when the file shows it reads the whole data on every
    host: a ``TensorDataset``, a ``torchvision.datasets`` class, Hugging Face
    ``datasets.load_dataset`` or a class defined in this file; None otherwise."""
    dataset = find_arg(loader, "dataset", 0)
    found = resolve(ctx, dataset.value, site) if dataset is not None else None
    if found is None or not isinstance(found[0], cst.Call):
        return None
    call = found[0]
    names = ctx.qnames(call.func, found[1].scope)
    if (
        names & TENSOR_DATASET
        or "datasets.load_dataset" in names
        or any(n.startswith("torchvision.datasets.") for n in names)
    ):
        return call
    if isinstance(call.func, cst.Name) and call.func.value in local_classes(ctx):
        return call
    return None


def local_classes(ctx) -> frozenset[str]:
    """Names of the classes this file defines."""
    return ctx.memo(
        ("data.local_classes",),
        lambda: frozenset(
            n.name.value for n in iter_nodes(ctx.module) if isinstance(n, cst.ClassDef)
        ),
    )


class SpmdPerHostData(Rule):
    code = "XLA023"
    name = "spmd-per-host-data"
    summary = (
        "ShardingSpec(..., minibatch=True) over a DataLoader that is not split by host: on several hosts "
        "every host feeds the same data."
    )
    message = (
        "`minibatch=True` says each host loads its own part of the global batch, but the `DataLoader` it wraps "
        "reads the whole dataset with no split by host: on more than one host every host feeds the same "
        "data, so each sample is trained on once per host per epoch; give the loader "
        "`sampler=DistributedSampler(dataset, num_replicas=xr.process_count(), rank=xr.process_index())`"
    )
    severity = Severity.ERROR
    preview = True
    explanation = """\
## What it does
Flags `MpDeviceLoader`/`ParallelLoader(..., input_sharding=xs.ShardingSpec(mesh, spec,
minibatch=True))` (also through a name, or as a value of the dict form) in an SPMD program
when the wrapped `DataLoader` is built in the same file without a sampler (or with a
`RandomSampler`/`SequentialSampler`), over a dataset the file shows reads all the data: a
`TensorDataset`, a `torchvision.datasets` class, `datasets.load_dataset(...)`, or a
`Dataset` class defined in the file.

Whether the program runs on several hosts is not in the source, so the message says "on
more than one host". The rule stays silent when the file mentions a split anywhere (a
name containing `rank`, `process_index`, `process_count`, `ordinal`, `world_size`,
`num_replicas`, `split_dataset_by_node`..., `DistributedSampler`, `shard`/`num_shards`, a
`"RANK"`/`"WORLD_SIZE"` environment variable), when the loader or dataset comes from
another module or a function parameter, and for `minibatch=False` (the default).

## Why is this bad
`minibatch=True` tells torch_xla that each host's batch is only that host's part of the
global batch. In torch_xla 2.9.0 the `XlaShardingSpec` binding (pytorch/xla `v2.9.0`,
`torch_xla/csrc/init_python_bindings.cpp`) sets the global batch dimension to the per-host
batch times `global devices / local devices` (the number of hosts), and each local device
takes its consecutive slice of the host's batch
(`torch_xla/csrc/xla_sharding_util.cpp`, `GetShardIndicesForMinibatchTensor`);
`torch_xla/core/xla_model.py` (`send_cpu_data_to_device`) only checks that the per-host batch
divides by `xr.addressable_runtime_device_count()`. Nothing splits the data: that is the
loader's job (pytorch/xla PR #5331, which added `minibatch`, pairs it with
`DistributedSampler(dataset, num_replicas=xr.process_count(), rank=xr.process_index())`).
A plain `DataLoader` reads the whole dataset on every host, so with N hosts each epoch feeds
every sample N times, and the global batch holds the same samples N times when the hosts
read in the same order (no shuffle, or a shuffle with one seed). Training runs, on duplicated
data, with nothing reported. On one host the global batch is the host's batch and nothing is
wrong, hence the rule's wording.

## Example
```python
loader = DataLoader(dataset, batch_size=global_batch // xr.process_count(), shuffle=True)
train_loader = pl.MpDeviceLoader(
    loader, device, input_sharding=xs.ShardingSpec(mesh, ("data", None), minibatch=True))
```

## Use instead
```python
sampler = DistributedSampler(dataset, num_replicas=xr.process_count(),
                             rank=xr.process_index(), shuffle=True)
loader = DataLoader(dataset, batch_size=global_batch // xr.process_count(), sampler=sampler)
train_loader = pl.MpDeviceLoader(
    loader, device, input_sharding=xs.ShardingSpec(mesh, ("data", None), minibatch=True))
```
Call `sampler.set_epoch(epoch)` each epoch. Or keep one loader that yields the global batch
on every host and drop `minibatch=True`.

## References
- https://github.com/pytorch/xla/pull/5331 (multi-host batch-sharded data loading)
- https://github.com/pytorch/xla/pull/8205 (per-host batch divisibility check)
- torch_xla 2.9.0 `torch_xla/distributed/spmd/xla_sharding.py` (`ShardingSpec.minibatch`),
  `torch_xla/core/xla_model.py` (`send_cpu_data_to_device`)
"""
    valid = (
        Valid(
            "import torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
            "import torch_xla.distributed.parallel_loader as pl\n"
            "from torch.utils.data import DataLoader, DistributedSampler, TensorDataset\nxr.use_spmd()\n"
            "ds = TensorDataset(x, y)\n"
            "sampler = DistributedSampler(ds, num_replicas=xr.process_count(), rank=xr.process_index())\n"
            "loader = DataLoader(ds, batch_size=8, sampler=sampler)\n"
            "dl = pl.MpDeviceLoader(loader, dev, input_sharding=xs.ShardingSpec(mesh, ('data',), minibatch=True))\n"
        ),
        # The split is made in another function of the file; minibatch off.
        Valid(
            "import torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
            "import torch_xla.distributed.parallel_loader as pl\n"
            "from torch.utils.data import DataLoader, Subset, TensorDataset\nxr.use_spmd()\n"
            "def my_part(ds):\n    i, n = xr.process_index(), xr.process_count()\n"
            "    return Subset(ds, range(i, len(ds), n))\n"
            "loader = DataLoader(TensorDataset(x, y), batch_size=8)\n"
            "dl = pl.MpDeviceLoader(loader, dev, input_sharding=xs.ShardingSpec(mesh, ('data',), minibatch=True))\n"
        ),
        Valid(
            "import torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
            "import torch_xla.distributed.parallel_loader as pl\n"
            "from torch.utils.data import DataLoader, TensorDataset\nxr.use_spmd()\n"
            "loader = DataLoader(TensorDataset(x, y), batch_size=8)\n"
            "a = pl.MpDeviceLoader(loader, dev, input_sharding=xs.ShardingSpec(mesh, ('data',), minibatch=False))\n"
            "b = pl.MpDeviceLoader(loader, dev, input_sharding=xs.ShardingSpec(mesh, ('data',)))\n"
            "c = pl.MpDeviceLoader(loader, dev,\n"
            "                      input_sharding=xs.ShardingSpec(mesh, ('data',), minibatch=args.mb))\n"
        ),
        # Hugging Face datasets split per node; a loader or dataset from another module.
        Valid(
            "import torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
            "import torch_xla.distributed.parallel_loader as pl\nfrom datasets import load_dataset\n"
            "from datasets.distributed import split_dataset_by_node\n"
            "from torch.utils.data import DataLoader\nxr.use_spmd()\n"
            "ds = split_dataset_by_node(load_dataset('c4', streaming=True), node, nodes)\n"
            "dl = pl.MpDeviceLoader(DataLoader(ds, batch_size=8), dev,\n"
            "                       input_sharding=xs.ShardingSpec(mesh, ('data', None), minibatch=True))\n"
        ),
        Valid(
            "import torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
            "import torch_xla.distributed.parallel_loader as pl\nfrom torch.utils.data import DataLoader\n"
            "from mydata import make_loader, TokenDataset\nxr.use_spmd()\n"
            "spec = xs.ShardingSpec(mesh, ('data', None), minibatch=True)\n"
            "a = pl.MpDeviceLoader(make_loader(), dev, input_sharding=spec)\n"
            "b = pl.MpDeviceLoader(DataLoader(TokenDataset(), batch_size=8), dev, input_sharding=spec)\n",
            files=(
                (
                    "mydata.py",
                    "import torch_xla.runtime as xr\nclass TokenDataset:\n"
                    "    def __init__(self):\n        self.part = xr.process_index()\n"
                    "def make_loader():\n    return None\n",
                ),
            ),
        ),
    )
    invalid = (
        Invalid(
            "import torch\nimport torch_xla\nimport torch_xla.runtime as xr\n"
            "import torch_xla.distributed.spmd as xs\nimport torch_xla.distributed.parallel_loader as pl\n"
            "from torch.utils.data import DataLoader, TensorDataset\nxr.use_spmd()\n"
            "ds = TensorDataset(torch.randn(4096, 128), torch.randint(0, 10, (4096,)))\n"
            "loader = DataLoader(ds, batch_size=64, shuffle=True, drop_last=True)\n"
            "train_loader = pl.MpDeviceLoader(loader, torch_xla.device(),\n"
            "    input_sharding=xs.ShardingSpec(mesh, ('data', None), minibatch=True))\n",
            (11,),
        ),
        # A dataset class of the file, a plain sampler, the spec through a name, the dict form.
        Invalid(
            "import torch_xla.runtime as xr\nfrom torch_xla.distributed.spmd import ShardingSpec\n"
            "from torch_xla.distributed.parallel_loader import MpDeviceLoader\n"
            "from torch.utils.data import DataLoader, Dataset, RandomSampler\nxr.use_spmd()\n"
            "class Tokens(Dataset):\n    def __len__(self):\n        return 1000\n"
            "def main(mesh, device):\n    ds = Tokens()\n"
            "    loader = DataLoader(ds, batch_size=16, sampler=RandomSampler(ds))\n"
            "    spec = ShardingSpec(mesh, ('data', None), True)\n"
            "    a = MpDeviceLoader(loader, device, input_sharding=spec)\n"
            "    b = MpDeviceLoader(loader, device, input_sharding={'ids': spec})\n",
            (13, 14),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        arg = input_sharding_arg(self.ctx, node)
        if arg is None:
            return
        specs = [s for s in sharding_specs(self.ctx, arg.value) or () if s.minibatch is True]
        if not specs:
            return
        loader = data_loader(self.ctx, node)
        if loader is None or self._has_split_sampler(*loader):
            return
        if local_dataset(self.ctx, *loader) is None or splits_data(self.ctx):
            return
        for spec in specs:
            self.report(spec.at, requires=SPMD)

    def _has_split_sampler(self, loader: cst.Call, site: Site) -> bool:
        """A sampler or batch sampler other than a plain ``RandomSampler``/``SequentialSampler``."""
        if find_arg(loader, "batch_sampler", 4) is not None:
            return True
        sampler = find_arg(loader, "sampler", 3)
        if sampler is None:
            return False
        return call_to(self.ctx, resolve(self.ctx, sampler.value, site), PLAIN_SAMPLERS) is None
