"""XLA023 spmd-per-host-data: `ShardingSpec(..., minibatch=True)` over a loader that every host
reads whole, beyond the rule's own examples."""

from __future__ import annotations

from helpers import lint_tree, write_tree

from xla_lint.diagnostics import Severity

HEAD = """\
import torch
import torch_xla
import torch_xla.runtime as xr
import torch_xla.distributed.spmd as xs
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader, TensorDataset

xr.use_spmd()
SPEC = xs.ShardingSpec(mesh, ("data", None), minibatch=True)
"""


def _found(tmp_path, files):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA023"], preview=True)
    return [(d.path, d.line, d.severity, d.message) for d in result.diagnostics]


def test_plain_loader_with_minibatch_is_an_error_that_says_on_more_than_one_host(tmp_path):
    code = (
        HEAD
        + (
            "ds = TensorDataset(torch.randn(1024, 64))\n"
            "loader = DataLoader(ds, batch_size=32, shuffle=True)\n"
            "def train():\n"
            "    for (x,) in pl.MpDeviceLoader(loader, torch_xla.device(), input_sharding=SPEC):\n"  # 13
            "        pass\n"
        )
    )
    found = _found(tmp_path, {"train.py": code})
    assert [(p, line, sev) for p, line, sev, _ in found] == [("train.py", 13, Severity.ERROR)]
    message = found[0][3]
    assert "on more than one host" in message
    assert (
        "DistributedSampler(dataset, num_replicas=xr.process_count(), rank=xr.process_index())"
        in message
    )


def test_torchvision_and_local_iterable_datasets_are_read_whole(tmp_path):
    code = HEAD + (
        "import torchvision\n"
        "from torch.utils.data import IterableDataset\n"
        "class Stream(IterableDataset):\n"
        "    def __iter__(self):\n"
        "        yield from range(10)\n"
        "cifar = torchvision.datasets.CIFAR10('/data', download=True)\n"
        "a = pl.MpDeviceLoader(DataLoader(cifar, batch_size=8), dev, input_sharding=SPEC)\n"  # 16
        "b = pl.MpDeviceLoader(DataLoader(Stream(), batch_size=8), dev, input_sharding=SPEC)\n"
    )  # 17
    assert [line for _, line, _, _ in _found(tmp_path, {"train.py": code})] == [16, 17]


def test_any_mention_of_a_split_keeps_the_rule_silent(tmp_path):
    loader = "dl = pl.MpDeviceLoader(DataLoader(TensorDataset(x), batch_size=8), dev, input_sharding=SPEC)\n"
    splits = [
        "import os\nPART = int(os.environ['RANK'])\n",
        "def sampler(ds):\n    return DistributedSampler(ds)\n",
        "host = xr.host_index()\n",
        "def part(ds, world_size):\n    return ds\n",
        "x = x.shard(num_shards=4, index=0)\n",
        "my_rank = get_it()\n",
    ]
    for i, split in enumerate(splits):
        assert _found(tmp_path / str(i), {"train.py": HEAD + split + loader}) == [], split


def test_samplers_batch_samplers_and_unknown_loaders_are_not_judged(tmp_path):
    code = HEAD + (
        "from torch.utils.data import RandomSampler, SequentialSampler\n"
        "ds = TensorDataset(x)\n"
        "a = pl.MpDeviceLoader(DataLoader(ds, batch_size=8, sampler=my_sampler), dev, input_sharding=SPEC)\n"
        "b = pl.MpDeviceLoader(DataLoader(ds, batch_sampler=bs), dev, input_sharding=SPEC)\n"
        "def c(loader):\n    return pl.MpDeviceLoader(loader, dev, input_sharding=SPEC)\n"
        "d = pl.MpDeviceLoader(DataLoader(some_dataset, batch_size=8), dev, input_sharding=SPEC)\n"
        "e = pl.MpDeviceLoader(DataLoader(ds, batch_size=8, sampler=SequentialSampler(ds)), dev,\n"
        "                      input_sharding=SPEC)\n"
    )  # 18: a plain sampler does not split
    assert [line for _, line, _, _ in _found(tmp_path, {"train.py": code})] == [18]


def test_not_an_spmd_program_is_silent(tmp_path):
    code = (
        HEAD.replace("xr.use_spmd()\n", "")
        + "dl = pl.MpDeviceLoader(DataLoader(TensorDataset(x), batch_size=8), dev, input_sharding=SPEC)\n"
    )
    assert _found(tmp_path, {"train.py": code}) == []
