"""XLA202: a DataLoader whose last batch is smaller (a new shape, one more compile) in a training loop."""

from __future__ import annotations

import libcst as cst

from ...analysis.context import find_arg
from ...analysis.loops import ITERABLE_DATASET, _last_name
from ...analysis.values import (
    PARAMETER,
    SEVERAL,
    Known,
    Site,
    Unknown,
    Value,
    arguments,
    definition,
    value_of,
)
from ...diagnostics import Severity
from ...rule import Invalid, Valid
from .common import TENSOR_FACTORIES, LoopRule

DATALOADER = "torch.utils.data.DataLoader"


TENSOR_DATASETS = frozenset(
    {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}
)


# Samplers that yield every index of the data set once per epoch (without `num_samples=`).
WHOLE_SAMPLERS = frozenset(
    {
        "torch.utils.data.RandomSampler",
        "torch.utils.data.sampler.RandomSampler",
        "torch.utils.data.SequentialSampler",
        "torch.utils.data.sampler.SequentialSampler",
    }
)


DISTRIBUTED_SAMPLERS = frozenset(
    {
        "torch.utils.data.DistributedSampler",
        "torch.utils.data.distributed.DistributedSampler",
    }
)


_REQUIRED = object()


# The sizes of torchvision's standard data sets (as the torchvision documentation and the data
# sets' own pages give them): class -> (the arguments that pick the split, each (keyword,
# position in the constructor, default or _REQUIRED), and the size for each choice).
_TRAIN = (("train", 1, True),)
_SPLIT = (("split", 1, "train"),)
TORCHVISION_SIZES: dict[str, tuple[tuple[tuple[str, int | None, object], ...], dict]] = {
    "MNIST": (_TRAIN, {(True,): 60000, (False,): 10000}),
    "FashionMNIST": (_TRAIN, {(True,): 60000, (False,): 10000}),
    "KMNIST": (_TRAIN, {(True,): 60000, (False,): 10000}),
    "CIFAR10": (_TRAIN, {(True,): 50000, (False,): 10000}),
    "CIFAR100": (_TRAIN, {(True,): 50000, (False,): 10000}),
    "USPS": (_TRAIN, {(True,): 7291, (False,): 2007}),
    "EMNIST": (
        (("split", 1, _REQUIRED), ("train", None, True)),
        {
            ("byclass", True): 697932,
            ("byclass", False): 116323,
            ("bymerge", True): 697932,
            ("bymerge", False): 116323,
            ("balanced", True): 112800,
            ("balanced", False): 18800,
            ("letters", True): 124800,
            ("letters", False): 20800,
            ("digits", True): 240000,
            ("digits", False): 40000,
            ("mnist", True): 60000,
            ("mnist", False): 10000,
        },
    ),
    "SVHN": (_SPLIT, {("train",): 73257, ("test",): 26032, ("extra",): 531131}),
    "STL10": (
        _SPLIT,
        {("train",): 5000, ("test",): 8000, ("unlabeled",): 100000, ("train+unlabeled",): 105000},
    ),
    "ImageNet": (_SPLIT, {("train",): 1281167, ("val",): 50000}),
    "Flowers102": (_SPLIT, {("train",): 1020, ("val",): 1020, ("test",): 6149}),
    "Food101": (_SPLIT, {("train",): 75750, ("test",): 25250}),
    "OxfordIIITPet": ((("split", 1, "trainval"),), {("trainval",): 3680, ("test",): 3669}),
}


class DataLoaderPartialBatch(LoopRule):
    code = "XLA202"
    name = "dataloader-partial-batch"
    summary = "DataLoader without drop_last=True: the smaller last batch compiles another graph."
    message = (
        "`DataLoader` without `drop_last=True`: the last, smaller batch has a new shape and "
        "compiles a new graph; pass `drop_last=True` (or pad the last batch)"
    )
    severity = Severity.WARNING
    # The precision gate (issue 22): 7 of 11 wrong on repositories nobody tuned on, loaders in
    # a monorepo's modules that only GPU programs run, reached through shared packages.
    preview = True
    explanation = """\
## What it does
In a module that imports torch_xla, flags `torch.utils.data.DataLoader(...)` calls that
batch (`batch_size` not None) and say nothing about the last batch: no `drop_last=`
argument, no `batch_sampler=`, no `**kwargs`. Not flagged: no `batch_size` (the default is
1: every batch is full) or `batch_size=1`; a dataset whose size the file fixes
(`TensorDataset(torch.randn(1024, 16))`, `range(512)`, a literal list, through module
constants) or a standard torchvision data set (MNIST, FashionMNIST, KMNIST, EMNIST, CIFAR10,
CIFAR100, SVHN, STL10, ImageNet, USPS, Flowers102, Food101, OxfordIIITPet, for the split its
`train=`/`split=` picks; `FakeData`'s `size`) when the batch size divides it (when it does not,
the message says how large the last batch is). The batch size is read as `values.py` reads a
value (a literal, a module constant, an argparse default) and, when it is a parameter, through
what every call of its function in the file passes. With `sampler=DistributedSampler(...,
num_replicas=W)` and `W` known, the size is one replica's share, `ceil(N / W)` (`N // W` with
the sampler's `drop_last=True`); when `W` is not known (`xm.xrt_world_size()`), the share is
not known and the loader is reported as one of unknown size. Not flagged either: a dataset that is an
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
        # torchvision's standard data sets have known sizes: MNIST's 10,000 test images in
        # batches of the option's default 1000, passed through two functions (ignite's
        # examples/mnist/mnist_with_tensorboard_on_tpu.py); CIFAR-10's 50,000 over 8 replicas.
        Valid(
            "import argparse\nimport torch_xla.core.xla_model as xm\n"
            "from torch.utils.data import DataLoader\nfrom torch.utils.data.distributed import "
            "DistributedSampler\nfrom torchvision.datasets import CIFAR10, MNIST\n"
            "def get_data_loaders(train_batch_size, val_batch_size):\n"
            "    return DataLoader(MNIST(root='.', train=False), batch_size=val_batch_size)\n"
            "def run(train_batch_size, val_batch_size):\n"
            "    val_loader = get_data_loaders(train_batch_size, val_batch_size)\n"
            "    train = CIFAR10('.', True)\n"
            "    sampler = DistributedSampler(train, num_replicas=8, rank=xm.get_ordinal())\n"
            "    return DataLoader(train, batch_size=125, sampler=sampler)\n"
            "if __name__ == '__main__':\n    parser = argparse.ArgumentParser()\n"
            "    parser.add_argument('--batch_size', type=int, default=64)\n"
            "    parser.add_argument('--val_batch_size', type=int, default=1000)\n"
            "    args = parser.parse_args()\n    run(args.batch_size, args.val_batch_size)\n"
        ),
    )
    invalid = (
        # 60,000 training images in batches of 64 leave 32; a sampler whose world size the file
        # does not fix leaves each replica's share unknown (reported as for an unknown size).
        Invalid(
            "import argparse\nimport torch_xla.core.xla_model as xm\n"
            "from torch.utils.data import DataLoader\nfrom torch.utils.data.distributed import "
            "DistributedSampler\nfrom torchvision.datasets import MNIST\n"
            "def get_data_loaders(train_batch_size):\n"
            "    return DataLoader(MNIST('.', train=True), batch_size=train_batch_size)\n"
            "test = MNIST('.', train=False)\n"
            "sampler = DistributedSampler(test, num_replicas=xm.xrt_world_size())\n"
            "test_loader = DataLoader(test, batch_size=1000, sampler=sampler)\n"
            "parser = argparse.ArgumentParser()\n"
            "parser.add_argument('--batch_size', type=int, default=64)\n"
            "args = parser.parse_args()\nget_data_loaders(args.batch_size)\n",
            (7, 10),
        ),
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
        samples = self._samples(node, dataset.value) if dataset is not None else None
        batches = self._values(batch_size.value, None, 0)
        sizes = [b.value for b in batches if isinstance(b, Known) and type(b.value) is int]
        if all(isinstance(b, Known) and (b.value is None or b.value == 1) for b in batches):
            return  # every call of the function passes batch_size 1 (or None)
        if samples is not None and len(sizes) == len(batches) and all(b > 0 for b in sizes):
            size, per_replica = samples
            bad = next((b for b in sizes if size % b), None)
            if bad is None:
                return  # the batches divide the dataset (each replica's share): no partial batch
            self.report(
                node,
                self.message
                + f" ({size} samples{per_replica} in batches of {bad} leave a last batch of "
                f"{size % bad})",
            )
            return
        self.report(node)

    def _values(self, expr: cst.BaseExpression, site: Site | None, depth: int) -> list[Value]:
        """The values ``expr`` may have: its own (:func:`value_of`), or, for a parameter of a
        function, what each call of it in the file passes (:func:`arguments`, followed through
        parameters of the callers' own functions), and each arm of a conditional."""
        value = value_of(self.ctx, expr, site)
        if isinstance(value, Unknown) and depth < 6:
            if value.kind == PARAMETER:
                passed = arguments(self.ctx, expr, site)
                if passed:
                    return [v for e, s in passed for v in self._values(e, s, depth + 1)]
            elif value.kind == SEVERAL and value.parts:
                return [v for e, s in value.parts for v in self._values(e, s, depth + 1)]
        return [value]

    def _samples(self, loader: cst.Call, dataset: cst.BaseExpression) -> tuple[int, str] | None:
        """How many samples the loader batches in an epoch, and a phrase for a per-replica share:
        the dataset's size (:meth:`_dataset_size`) with no ``sampler=``, a ``RandomSampler`` or
        ``SequentialSampler`` of it; with ``DistributedSampler(..., num_replicas=W)`` for a known
        ``W``, one replica's share: ``ceil(N / W)`` (the sampler pads), ``N // W`` with its
        ``drop_last=True`` (torch 2.9.0 ``torch/utils/data/distributed.py``, ``num_samples``).
        None when not known (a sampler whose world size the file does not fix)."""
        size = self._dataset_size(dataset)
        if size is None:
            return None
        arg = find_arg(loader, "sampler", 3)
        if arg is None or (isinstance(arg.value, cst.Name) and arg.value.value == "None"):
            return size, ""
        sampler, site = arg.value, None
        if isinstance(sampler, cst.Name):
            found = definition(self.ctx, sampler)
            if found is None:
                return None
            sampler, site = found
        if not isinstance(sampler, cst.Call):
            return None
        names = self.ctx.qnames(sampler.func)
        if names & WHOLE_SAMPLERS and find_arg(sampler, "num_samples", 2) is None:
            return size, ""
        if not names & DISTRIBUTED_SAMPLERS:
            return None
        replicas = find_arg(sampler, "num_replicas", 1)
        world = value_of(self.ctx, replicas.value, site) if replicas is not None else None
        if not isinstance(world, Known) or type(world.value) is not int or world.value < 1:
            return None
        drop = find_arg(sampler, "drop_last", 5)
        dropped = value_of(self.ctx, drop.value, site) if drop is not None else None
        if drop is not None and not (isinstance(dropped, Known) and type(dropped.value) is bool):
            return None
        w = world.value
        if isinstance(dropped, Known) and dropped.value is True:
            return size // w, f" per replica ({size} // {w})"
        return -(-size // w), f" per replica (ceil({size} / {w}))"

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
        known = self._torchvision_size(expr, names, site)
        if known is not None:
            return known
        first = find_arg(expr, None, 0)
        if first is None:
            return None
        if "builtins.range" in names and len(expr.args) == 1:
            n = value_of(self.ctx, first.value, site)
            return n.value if isinstance(n, Known) and type(n.value) is int else None
        if names & TENSOR_DATASETS:
            return self._leading_dim(first.value, site)
        return None

    def _torchvision_size(self, call: cst.Call, names: frozenset[str], site) -> int | None:
        """The size of a standard torchvision data set (:data:`TORCHVISION_SIZES`) for the split
        the call picks (``train=``/``split=``, given or defaulted), or ``FakeData``'s ``size``
        (default 1000); None when the split (or a ``folds=`` of STL10) is not known."""
        dataset = next(
            (n.rsplit(".", 1)[1] for n in names if n.startswith("torchvision.datasets.")), None
        )
        if dataset is None:
            return None
        if dataset == "FakeData":
            arg = find_arg(call, "size", 0)
            if arg is None:
                return 1000
            n = value_of(self.ctx, arg.value, site)
            return n.value if isinstance(n, Known) and type(n.value) is int else None
        known = TORCHVISION_SIZES.get(dataset)
        if known is None:
            return None
        selectors, sizes = known
        if dataset == "STL10":
            folds = find_arg(call, "folds", 2)
            if folds is not None and not (
                isinstance(folds.value, cst.Name) and folds.value.value == "None"
            ):
                return None  # one fold of the training split
        chosen: list[object] = []
        for name, position, default in selectors:
            arg = find_arg(call, name, position)
            if arg is None:
                if default is _REQUIRED:
                    return None
                chosen.append(default)
                continue
            value = value_of(self.ctx, arg.value, site)
            if not isinstance(value, Known):
                return None
            chosen.append(value.value)
        try:
            return sizes.get(tuple(chosen))
        except TypeError:  # an unhashable value (a list)
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
