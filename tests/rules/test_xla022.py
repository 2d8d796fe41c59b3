"""XLA022 spmd-input-sharding: one `input_sharding` spec for batch tensors of other ranks,
beyond the rule's own examples (severities, messages, traps, the torch_xla logic it mirrors)."""

from __future__ import annotations

from helpers import lint_tree, write_tree

from xla_lint.diagnostics import Severity
from xla_lint.rules.data import raises_index_error, spec_applies, spec_axes

HEAD = """\
import numpy as np
import torch
import torch_xla
import torch_xla.runtime as xr
import torch_xla.distributed.spmd as xs
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader, TensorDataset

xr.use_spmd()
mesh = xs.Mesh(np.arange(8), (4, 2), ("data", "model"))
"""


def _found(tmp_path, files):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA022"], preview=True)
    return [(d.path, d.line, d.severity, d.message) for d in result.diagnostics]


def test_images_and_labels_with_one_rank_4_spec_warn_about_the_labels(tmp_path):
    code = (
        HEAD
        + (
            "images, labels = torch.randn(512, 3, 32, 32), torch.randint(0, 10, (512,))\n"  # 11: tuple unpacking
            "ds = TensorDataset(torch.randn(512, 3, 32, 32), torch.randint(0, 10, (512,)).long())\n"
            "loader = DataLoader(ds, batch_size=64, drop_last=True)\n"
            "SPEC = xs.ShardingSpec(mesh, ('data', None, None, None))\n"
            "def train():\n"
            "    for x, y in pl.MpDeviceLoader(loader, torch_xla.device(), input_sharding=SPEC):\n"  # 16
            "        pass\n"
        )
    )
    found = _found(tmp_path, {"train.py": code})
    assert [(p, line, sev) for p, line, sev, _ in found] == [("train.py", 16, Severity.WARNING)]
    message = found[0][3]
    assert "('data', None, None, None) has 4 entries" in message
    assert "tensor 2 (rank 1)" in message and "copied whole to every device" in message
    assert "input_sharding={key: ShardingSpec(...)}" in message


def test_index_error_spec_is_an_error_and_wins_over_the_rank_warning(tmp_path):
    code = HEAD + (
        "ds = TensorDataset(torch.randn(64, 3, 8, 8), torch.randint(0, 10, (64,)))\n"
        "dl = pl.MpDeviceLoader(DataLoader(ds, batch_size=8), torch_xla.device(),\n"
        "                       input_sharding=xs.ShardingSpec(mesh, ('data',)))\n"
    )  # 13
    found = _found(tmp_path, {"train.py": code})
    assert [(line, sev) for _, line, sev, _ in found] == [(13, Severity.ERROR)]
    assert "IndexError: too many indices for tensor of dimension 1" in found[0][3]
    assert "names 1 of the mesh's 2 axes" in found[0][3]


def test_full_module_path_and_parallel_loader_positional_spec(tmp_path):
    code = HEAD + (
        "import torch_xla.distributed.spmd.xla_sharding as xsh\n"
        "spec = xsh.ShardingSpec(mesh, ('model',))\n"
        "pl.ParallelLoader(loader, [dev], 0, 1, 16, 8, 1, spec)\n"
    )  # 13
    found = _found(tmp_path, {"train.py": code})
    assert [(line, sev) for _, line, sev, _ in found] == [(13, Severity.ERROR)]


def test_traps_are_not_reported(tmp_path):
    code = HEAD + (
        "from data import train_set\n"
        "def build(spec, ds):\n"
        "    a = pl.MpDeviceLoader(DataLoader(ds, batch_size=8), torch_xla.device(), input_sharding=spec)\n"
        "    return a\n"
        # a dataset from another module; ranks unknown
        "b = pl.MpDeviceLoader(DataLoader(train_set, batch_size=8), torch_xla.device(),\n"
        "                      input_sharding=xs.ShardingSpec(mesh, ('data', None)))\n"
        # a size held in a variable of unknown kind (could be a torch.Size)
        "def c(shape):\n"
        "    ds = TensorDataset(torch.randn(shape), torch.randint(0, 10, (8,)))\n"
        "    return pl.MpDeviceLoader(DataLoader(ds, batch_size=8), torch_xla.device(),\n"
        "                             input_sharding=xs.ShardingSpec(mesh, ('data',) + (None,)))\n"
        # batch_size=None: no batching, so the sample ranks are not the dataset's
        "ds = TensorDataset(torch.randn(64, 4), torch.randn(64, 4))\n"
        "d = pl.MpDeviceLoader(DataLoader(ds, batch_size=None), torch_xla.device(),\n"
        "                      input_sharding=xs.ShardingSpec(mesh, ('data',)+(None,)))\n"
        # a mesh the file does not spell out: the IndexError cannot be told
        "other = xs.get_1d_mesh('data')\n"
        "e = pl.MpDeviceLoader(loader, torch_xla.device(), input_sharding=xs.ShardingSpec(other, ('data',)))\n"
        # a mesh axis name the mesh lacks: another error (ValueError), not this rule's
        "f = pl.MpDeviceLoader(loader, torch_xla.device(), input_sharding=xs.ShardingSpec(mesh, ('batch',)))\n"
    )
    found = _found(tmp_path, {"train.py": code, "data.py": "train_set = None\n"})
    assert found == []


def test_not_an_spmd_program_and_the_non_spmd_branch_are_silent(tmp_path):
    body = (
        "ds = TensorDataset(torch.randn(64, 3, 8, 8), torch.randint(0, 10, (64,)))\n"
        "spec = xs.ShardingSpec(mesh, ('data', None, None, None))\n"
    )
    plain = (
        HEAD.replace("xr.use_spmd()\n", "")
        + body
        + "dl = pl.MpDeviceLoader(DataLoader(ds, batch_size=8), dev, input_sharding=spec)\n"
    )
    assert _found(tmp_path, {"train.py": plain}) == []
    branch = (
        HEAD.replace("xr.use_spmd()\n", "if args.spmd:\n    xr.use_spmd()\n")
        + body
        + (
            "if not xr.is_spmd():\n"
            "    dl = pl.MpDeviceLoader(DataLoader(ds, batch_size=8), dev, input_sharding=spec)\n"
        )
    )
    assert _found(tmp_path, {"train.py": branch}) == []


def test_the_mirrored_torch_xla_logic():
    # ShardingSpec.can_apply (torch_xla 2.9.0): the spec's length must be the tensor's rank.
    assert spec_applies(4, 4) and not spec_applies(4, 1) and not spec_applies(2, 4)
    names = ("data", "model")
    assert spec_axes(("data", None, ("model",)), names) == [0, 1]
    assert spec_axes(("batch",), names) is None and spec_axes((1.5,), names) is None
    # Measured on 8 CPU devices (tests/runtime/test_input_sharding.py checks the same cases).
    assert raises_index_error(("data",), names, 2) is True
    assert raises_index_error((0,), names, 2) is True
    assert raises_index_error(("a", "b"), ("a", "b", "c"), 3) is True
    assert raises_index_error(("data",), ("data", "model"), 2, devices=8) is True
    assert raises_index_error(("data", None), names, 2) is False
    assert raises_index_error((("data", "model"),), names, 2) is False
    assert raises_index_error(("data",), ("data",), 1) is False
    assert raises_index_error((None,), names, 2) is False
    assert raises_index_error((), names, 2) is False
    assert (
        raises_index_error(("data",), names, 2, devices=1) is False
    )  # one device: MAXIMAL, no tiles
    assert (
        raises_index_error(("data", "data"), names, 2) is None
    )  # an axis twice: not this rule's case


def test_sample_generator_batches_are_read_as_they_are(tmp_path):
    # Shaped like pytorch/xla examples/data_parallel/train_resnet_spmd_data_parallel.py, with a known batch size.
    code = (
        HEAD
        + (
            "import torch_xla.utils.utils as xu\n"
            "BATCH = 64\n"
            "train_loader = xu.SampleGenerator(\n"
            "    data=(torch.zeros(BATCH, 3, 224, 224), torch.zeros(BATCH, dtype=torch.int64)),\n"
            "    sample_count=100)\n"
            "dl = pl.MpDeviceLoader(train_loader, torch_xla.device(),\n"
            "                       input_sharding=xs.ShardingSpec(mesh, ('data', None, None, None)))\n"  # 17
            "def unknown(bs):\n"  # a lone size argument of unknown kind: not judged
            "    gen = xu.SampleGenerator(data=(torch.zeros(bs, 3, 8, 8), torch.zeros(bs)), sample_count=1)\n"
            "    return pl.MpDeviceLoader(gen, torch_xla.device(),\n"
            "                             input_sharding=xs.ShardingSpec(mesh, ('data', None, None, None)))\n"
        )
    )
    found = _found(tmp_path, {"train.py": code})
    assert [(line, sev) for _, line, sev, _ in found] == [(17, Severity.WARNING)]
    assert "tensor 2 (rank 1)" in found[0][3]
