"""XLA202: a DataLoader whose last batch is smaller (a new shape, one more compile) in a training loop."""

from __future__ import annotations

import libcst as cst

from ...analysis.context import find_arg
from ...analysis.loops import ITERABLE_DATASET, _last_name
from ...analysis.values import Known, definition, value_of
from ...diagnostics import Severity
from ...rule import Invalid, Valid
from .common import TENSOR_FACTORIES, LoopRule

DATALOADER = "torch.utils.data.DataLoader"


TENSOR_DATASETS = frozenset(
    {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}
)


class DataLoaderPartialBatch(LoopRule):
    code = "XLA202"
    name = "dataloader-partial-batch"
    summary = "DataLoader without drop_last=True: the smaller last batch compiles another graph."
    message = (
        "`DataLoader` without `drop_last=True`: the last, smaller batch has a new shape and "
        "compiles a new graph; pass `drop_last=True` (or pad the last batch)"
    )
    severity = Severity.WARNING
    explanation = """\
## What it does
In a module that imports torch_xla, flags `torch.utils.data.DataLoader(...)` calls that
batch (`batch_size` not None) and say nothing about the last batch: no `drop_last=`
argument, no `batch_sampler=`, no `**kwargs`. Not flagged: no `batch_size` (the default is
1: every batch is full) or `batch_size=1`; a dataset whose size the file fixes
(`TensorDataset(torch.randn(1024, 16))`, `range(512)`, a literal list, through module
constants) when the batch size divides it (when it does not, the message says how large the
last batch is); a dataset that is an
`IterableDataset` (a class of this module deriving from it, or
`load_dataset(..., streaming=True)`): its length is unknown and the rule cannot say
what its last batch is. An explicit `drop_last=False` is taken as a decision (an
evaluation loader that must see every sample) and not flagged.

## Why is this bad
XLA compiles one graph per set of input shapes. With `len(dataset) % batch_size != 0`
the last batch of every epoch is smaller, so the forward and backward graphs are traced
and compiled again for that shape: minutes for a large model, once per process (then
cached), plus one more compile for each differently sized tail (evaluation loaders,
a different world size). With SPMD the batch is sharded over a mesh axis, and a tail
that does not divide the axis is padded by the partitioner.

`DistributedSampler(..., drop_last=True)` does not help: its `drop_last` drops samples
so that every replica gets the *same number of samples* (`torch/utils/data/distributed.py`,
`num_samples = len(dataset) // num_replicas`); the DataLoader then still batches those
`num_samples` with a partial last batch unless `num_samples % batch_size == 0`. So a
`DistributedSampler` passed as `sampler=` does not exempt the loader.

## Example
```python
loader = torch.utils.data.DataLoader(dataset, batch_size=128, shuffle=True)
```

## Use instead
```python
loader = torch.utils.data.DataLoader(dataset, batch_size=128, shuffle=True, drop_last=True)
```
or pad the last batch to the full size with a mask. There is no automatic fix: dropping
samples changes what the loop sees.

## References
- https://docs.pytorch.org/xla/master/learn/troubleshoot.html
- https://docs.pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader
- torch 2.9.0 `torch/utils/data/dataloader.py`, `torch/utils/data/distributed.py`
"""
    valid = (
        Valid(
            "import torch\nimport torch_xla\nloader = torch.utils.data.DataLoader(ds, batch_size=8, drop_last=True)\n"
        ),
        Valid("import torch\nloader = torch.utils.data.DataLoader(ds, batch_size=8)\n"),
        Valid(
            "import torch_xla\nfrom torch.utils.data import DataLoader, IterableDataset\n"
            "class Stream(IterableDataset):\n    def __iter__(self):\n        yield 1\n"
            "ds = Stream()\nloader = DataLoader(ds, batch_size=8)\nloader2 = DataLoader(Stream(), batch_size=8)\n"
        ),
        Valid(
            "import torch_xla\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, batch_sampler=sampler)\nraw = DataLoader(ds, batch_size=None)\n"
            "evalset = DataLoader(ds, batch_size=8, drop_last=False)\nany_ = DataLoader(ds, **kwargs)\n"
        ),
        # No partial batch: DataLoader's default batch_size=1, batch_size=1, or batches that divide
        # a dataset of literal size (seen in real code: a synthetic TensorDataset, a range).
        Valid(
            "import torch\nimport torch_xla\nfrom torch.utils.data import DataLoader, TensorDataset\n"
            "BATCH = 64\nN = 1024\nds = TensorDataset(torch.randn(N, 16), torch.randint(0, 4, (N,)))\n"
            "a = DataLoader(ds)\nb = DataLoader(ds, batch_size=1, shuffle=True)\n"
            "c = DataLoader(ds, batch_size=BATCH)\nd = DataLoader(range(512), batch_size=8)\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch\nimport torch_xla\nloader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True)\n",
            (3,),
        ),
        Invalid(
            "import torch\nimport torch_xla\nfrom torch.utils.data import DataLoader, TensorDataset\n"
            "ds = TensorDataset(torch.randn(1000, 16))\nloader = DataLoader(ds, batch_size=64)\n"
            "steps = DataLoader(torch.arange(0, 1024), batch_size=64)\n",
            (5, 6),
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\nfrom torch.utils.data import DataLoader as DL\n"
            "from torch.utils.data.distributed import DistributedSampler\n"
            "sampler = DistributedSampler(ds, num_replicas=4, rank=0, drop_last=True)\n"
            "loader = DL(ds, batch_size=8, sampler=sampler)\n",
            (5,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.in_xla_program or not self.ctx.is_call_to(node, DATALOADER):
            return
        if any(a.star == "**" for a in node.args):
            return
        if find_arg(node, "drop_last") is not None or find_arg(node, "batch_sampler") is not None:
            return
        batch_size = find_arg(node, "batch_size", 1)
        if batch_size is None:
            return  # DataLoader's default batch_size=1: every batch is full
        batch = value_of(self.ctx, batch_size.value)
        if isinstance(batch, Known) and (batch.value is None or batch.value == 1):
            return
        dataset = find_arg(node, "dataset", 0)
        if dataset is not None and self._iterable(dataset.value):
            return
        size = self._dataset_size(dataset.value) if dataset is not None else None
        if (
            isinstance(batch, Known)
            and type(batch.value) is int
            and batch.value > 0
            and size is not None
        ):
            if size % batch.value == 0:
                return  # the batches divide the dataset: no partial batch
            self.report(
                node,
                self.message
                + f" ({size} samples in batches of {batch.value} leave a last batch of "
                f"{size % batch.value})",
            )
            return
        self.report(node)

    def _dataset_size(self, value: cst.BaseExpression) -> int | None:
        """The number of samples of a dataset the file builds with a literal size:
        ``TensorDataset(torch.randn(1000, 16), ...)``, ``range(1000)``, a list or tuple literal,
        read through a name's one assignment (values.py); None when not known."""
        found = definition(self.ctx, value) if isinstance(value, cst.Name) else None
        expr, site = found if found is not None else (value, None)
        if isinstance(expr, (cst.List, cst.Tuple)) and not any(
            isinstance(e, cst.StarredElement) for e in expr.elements
        ):
            return len(expr.elements)
        if not isinstance(expr, cst.Call):
            return None
        names = self.ctx.qnames(expr.func)
        first = find_arg(expr, None, 0)
        if first is None:
            return None
        if "builtins.range" in names and len(expr.args) == 1:
            n = value_of(self.ctx, first.value, site)
            return n.value if isinstance(n, Known) and type(n.value) is int else None
        if names & TENSOR_DATASETS:
            return self._leading_dim(first.value, site)
        return None

    def _leading_dim(self, tensor: cst.BaseExpression, site) -> int | None:
        """The first dimension of ``torch.randn(N, ...)``/``zeros``/``ones``/``rand``/``empty``/
        ``arange(N)``/``randint(lo, hi, (N, ...))``, when N is known."""
        if not isinstance(tensor, cst.Call) or not self.ctx.qnames(tensor.func) & TENSOR_FACTORIES:
            return None
        names = self.ctx.qnames(tensor.func)
        if names & {"torch.randint"}:
            shape = find_arg(tensor, "size", 2)
            if (
                shape is None
                or not isinstance(shape.value, (cst.Tuple, cst.List))
                or not shape.value.elements
            ):
                return None
            first = shape.value.elements[0].value
        else:
            arg = find_arg(tensor, None, 0)
            if arg is None or (names & {"torch.arange"} and len(tensor.args) != 1):
                return None  # arange(start, end): the size is not its first argument
            first = arg.value
            if isinstance(first, (cst.Tuple, cst.List)):  # torch.zeros((N, 16))
                if not first.elements:
                    return None
                first = first.elements[0].value
        n = value_of(self.ctx, first, site)
        return n.value if isinstance(n, Known) and type(n.value) is int else None

    def _iterable(self, value: cst.CSTNode) -> bool:
        facts = self.facts
        if isinstance(value, cst.Call):
            if (
                _last_name(value.func) in facts.iterable_classes
                or self.ctx.qnames(value) & ITERABLE_DATASET
            ):
                return True
            streaming = find_arg(value, "streaming")
            return (
                streaming is not None
                and isinstance(streaming.value, cst.Name)
                and streaming.value.value == "True"
            )
        name = _last_name(value)
        return name is not None and name in facts.iterable_values
