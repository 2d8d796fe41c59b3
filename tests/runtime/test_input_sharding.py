"""XLA022 on 8 CPU devices: what `MpDeviceLoader(..., input_sharding=ShardingSpec(...))` really
does to each tensor of a batch, checked against the rule's own model of torch_xla
(:func:`xla_lint.rules.data.spec_applies`, :func:`xla_lint.rules.data.raises_index_error`).

One subprocess (``PJRT_DEVICE=CPU CPU_NUM_DEVICES=8``, SPMD on) records the sharding of every
loaded tensor, or the error, as JSON; the assertions run here. About 10 s.
"""

from __future__ import annotations

import pytest
from helpers import run_cpu_script

pytest.importorskip("torch_xla")

from xla_lint.rules.data import raises_index_error, spec_applies

pytestmark = pytest.mark.runtime

SCRIPT = r"""
import json, sys
import numpy as np
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
import torch_xla.distributed.spmd as xs
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data._utils.collate import default_collate

xr.use_spmd()
spec_of = torch_xla._XLAC._get_xla_sharding_spec
device = torch_xla.device()
names = ("data", "model")
mesh = xs.Mesh(np.arange(8), (4, 2), names)
out = {"devices": xr.global_runtime_device_count()}

# One spec for a tuple batch of images (rank 4) and labels (rank 1).
ds = TensorDataset(torch.randn(16, 3, 8, 8), torch.randint(0, 10, (16,)))
loader = pl.MpDeviceLoader(DataLoader(ds, batch_size=8), device,
                           input_sharding=xs.ShardingSpec(mesh, ("data", None, None, None)))
images, labels = next(iter(loader))
out["tuple"] = {"spec": ["data", None, None, None], "shapes": [list(images.shape), list(labels.shape)],
                "shardings": [spec_of(images), spec_of(labels)],
                "labels_equal": bool(torch.equal(labels.cpu(), ds.tensors[1][:8]))}

# The dict form: a spec per key, the labels' spec naming every mesh axis.
def as_dict(samples):
    x, y = default_collate(samples)
    return {"images": x, "labels": y}
loader = pl.MpDeviceLoader(DataLoader(ds, batch_size=8, collate_fn=as_dict), device, input_sharding={
    "images": xs.ShardingSpec(mesh, ("data", None, None, None)),
    "labels": xs.ShardingSpec(mesh, (("data", "model"),))})
batch = next(iter(loader))
out["dict"] = {k: spec_of(v) for k, v in batch.items()}

# A spec naming one of two mesh axes, no None: the loader's iterator re-raises the worker's error.
ds1 = TensorDataset(torch.randn(16, 4), torch.randint(0, 10, (16,)))
loader = pl.MpDeviceLoader(DataLoader(ds1, batch_size=8), device, input_sharding=xs.ShardingSpec(mesh, ("data",)))
try:
    next(iter(loader))
    out["loader_error"] = None
except Exception as e:
    out["loader_error"] = [type(e).__name__, str(e)]
t = torch.randint(0, 10, (8,)).to(device)
xs.mark_sharding(t, mesh, ("data",))
out["mark_sharding"] = spec_of(t)

# The IndexError cases and their neighbours, one tensor at a time, as the loader sends them.
cases = [((4, 2), names, ("data",), (8,)), ((4, 2), names, (0,), (8,)), ((8, 1), names, ("data",), (8,)),
         ((2, 2, 2), ("a", "b", "c"), ("a", "b"), (8, 4)), ((4, 2), names, (("data", "model"),), (8,)),
         ((4, 2), names, ("data", None), (8, 4)), ((4, 2), names, (None,), (8,)), ((8,), ("data",), ("data",), (8,)),
         ((4, 2), names, ("data",), (8, 3)), ((2, 2, 2), ("a", "b", "c"), ("a", None), (8, 4))]
out["cases"] = []
for shape, axis_names, spec, tshape in cases:
    m = xs.Mesh(np.arange(8), shape, axis_names)
    try:
        sent = xm.send_cpu_data_to_device([torch.zeros(tshape)], device, xs.ShardingSpec(m, spec))
        result = spec_of(sent[0])
    except Exception as e:
        result = "error: " + type(e).__name__ + ": " + str(e)
    out["cases"].append([list(shape), list(axis_names), spec, list(tshape), result])
print("RESULT " + json.dumps(out))
"""


def _spec(entries) -> tuple:
    return tuple(tuple(e) if isinstance(e, list) else e for e in entries)


def _replicated(sharding: str) -> bool:
    return sharding in ("", "{replicated}")


@pytest.fixture(scope="module")
def observed():
    return run_cpu_script(SCRIPT)


def test_one_spec_shards_the_images_and_silently_replicates_the_labels(observed):
    tup = observed["tuple"]
    assert observed["devices"] == 8
    spec = _spec(tup["spec"])
    images, labels = tup["shardings"]
    assert tup["shapes"] == [[8, 3, 8, 8], [8]]
    # The rule's model: a spec applies only to tensors of its own rank.
    for shape, sharding in zip(tup["shapes"], tup["shardings"], strict=True):
        assert spec_applies(len(spec), len(shape)) == (not _replicated(sharding)), (shape, sharding)
    assert images.startswith("{devices=[4,1,1,1,2]") and "last_tile_dim_replicate" in images
    assert _replicated(labels)
    assert tup["labels_equal"]  # replicated, not wrong: the whole labels tensor on every device


def test_dict_form_gives_each_tensor_its_own_spec(observed):
    assert observed["dict"]["images"].startswith("{devices=[4,1,1,1,2]")
    assert observed["dict"]["labels"].startswith("{devices=[8]")


def test_spec_with_fewer_axes_than_the_mesh_raises_index_error_in_the_loader_only(observed):
    assert raises_index_error(("data",), ("data", "model"), 2, 8)
    assert observed["loader_error"] == ["IndexError", "too many indices for tensor of dimension 1"]
    # mark_sharding accepts the same rank-1 tensor and spec: partial replication over `model`.
    assert observed["mark_sharding"] == "{devices=[4,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}"


def test_the_rules_index_error_model_matches_torch_xla_case_by_case(observed):
    for shape, axis_names, spec, tshape, result in observed["cases"]:
        spec = _spec(spec)
        applies = spec_applies(len(spec), len(tshape))
        predicted = applies and bool(raises_index_error(spec, axis_names, len(shape), 8))
        raised = result.startswith("error: IndexError: too many indices")
        assert raised == predicted, (shape, spec, tshape, result)
        if not applies:
            assert _replicated(result), (shape, spec, tshape, result)
