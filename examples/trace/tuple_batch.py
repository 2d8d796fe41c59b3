"""Pitfall: one ShardingSpec for a batch of tensors of different ranks (XLA022).

`MpDeviceLoader(..., input_sharding=xs.ShardingSpec(mesh, ("data", None)))` applies the
spec to every tensor of the `(x, y)` batch that has two dimensions
(`ShardingSpec.xla_spec` returns None when `len(t.shape) != len(partition_spec)`,
torch_xla/distributed/spmd/xla_sharding.py). The labels `y` have one dimension, so they are
silently left replicated: every device holds all labels of the global batch.
`xla-lint trace --steps 4 -- python examples/trace/tuple_batch.py` shows `y` replicated
while `x` (same leading dimension) is split over the 8 devices.

Fix: a dict batch with one spec per key (`input_sharding={"x": ShardingSpec(mesh, ("data",
None)), "y": ShardingSpec(mesh, ("data",))}`), or `xs.mark_sharding(y, mesh, ("data",))`.
"""

import numpy as np
import torch
import torch.nn as nn
import torch_xla
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from torch.utils.data import DataLoader, TensorDataset

xr.use_spmd()
num_devices = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(num_devices), (num_devices,), ("data",))

torch.manual_seed(0)
model = nn.Linear(32, 10).to(torch_xla.device())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
dataset = TensorDataset(torch.randn(512, 32), torch.randint(0, 10, (512,)))
loader = pl.MpDeviceLoader(
    DataLoader(dataset, batch_size=32, drop_last=True),
    torch_xla.device(),
    input_sharding=xs.ShardingSpec(mesh, ("data", None)),  # XLA022: y has one dimension
)

for epoch in range(10):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
print("done", flush=True)
