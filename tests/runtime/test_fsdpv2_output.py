"""XLA025 on 8 CPU devices: FSDPv2's default ``shard_output`` with the outputs a model can return.

A Hugging Face ``ModelOutput`` is an ``OrderedDict`` subclass; the subprocess
(``PJRT_DEVICE=CPU CPU_NUM_DEVICES=8``, SPMD on) wraps small modules returning a tensor, a
tuple (logits first, or a scalar loss first) and such a dict in ``SpmdFullyShardedDataParallel``
without ``shard_output`` and records what the first forward does. About 10 s.
"""

from __future__ import annotations

import pytest
from helpers import run_cpu_script

pytest.importorskip("torch_xla")

pytestmark = pytest.mark.runtime

SCRIPT = r'''
import collections, json, warnings
import numpy as np
import torch
import torch_xla
import torch_xla.runtime as xr
import torch_xla.distributed.spmd as xs
from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2

xr.use_spmd()
mesh = xs.Mesh(np.arange(8), (8, 1), ("fsdp", "model"))
spec_of = torch_xla._XLAC._get_xla_sharding_spec


class ModelOutput(collections.OrderedDict):
    """Shaped like transformers.utils.ModelOutput: an OrderedDict subclass, not a tuple."""


class Net(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        logits = self.fc(x)
        loss = logits.float().pow(2).mean()
        if self.kind == "tensor":
            return logits
        if self.kind == "tuple":
            return (logits, loss)
        if self.kind == "loss_first":
            return (loss, logits)
        return ModelOutput(loss=loss, logits=logits)


out = {}
for kind in ("tensor", "tuple", "loss_first", "model_output"):
    model = FSDPv2(Net(kind), mesh=mesh)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = model(torch.randn(8, 16).to("xla"))
            parts = [result] if isinstance(result, torch.Tensor) else list(result)
            out[kind] = {"error": None, "specs": [spec_of(t) for t in parts]}
        except Exception as e:
            out[kind] = {"error": [type(e).__name__, str(e)]}
    out[kind]["tuple_warning"] = any("only the first element is sharded" in str(w.message) for w in caught)
print("RESULT " + json.dumps(out))
'''


@pytest.fixture(scope="module")
def observed():
    return run_cpu_script(SCRIPT)


def _sharded(spec: str) -> bool:
    return spec not in ("", "{replicated}")


def test_a_dict_like_model_output_raises_at_the_first_forward(observed):
    # Why XLA025 is an error for a Hugging Face model (return_dict=True, the default).
    name, message = observed["model_output"]["error"]
    assert name == "RuntimeError" and "The output type is not supported" in message


def test_a_tuple_warns_and_shards_its_first_element_only(observed):
    # Why XLA025 is a warning for a model built with return_dict=False.
    tup, loss_first = observed["tuple"], observed["loss_first"]
    assert tup["error"] is None and tup["tuple_warning"]
    assert _sharded(tup["specs"][0]) and not _sharded(tup["specs"][1])
    assert loss_first["error"] is None and loss_first["tuple_warning"]
    assert not any(_sharded(s) for s in loss_first["specs"])  # the logits are left unsharded


def test_a_tensor_is_sharded_without_a_warning(observed):
    assert observed["tensor"]["error"] is None and not observed["tensor"]["tuple_warning"]
    assert _sharded(observed["tensor"]["specs"][0])
