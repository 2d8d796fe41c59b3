"""An SPMD FSDPv2 training script that does it right: the trace finds nothing.

The mesh has an `fsdp` axis over every device; FSDPv2 shards each parameter on it; the
`MpDeviceLoader` shards both tensors of the batch (both have two dimensions) and is the
step boundary; the batch size divides the dataset (`drop_last=True` as well); the loss is
read every 10 steps, from a step closure that runs after the step's graph; AdamW keeps its
step on the device (`capturable=True`).
`xla-lint trace -- python examples/trace/fsdpv2.py` shows two compiles (the first step,
then the step with the optimizer state) and none after, every parameter sharded 8 ways,
and both inputs split on their batch dimension.
"""

import numpy as np
import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from torch.utils.data import DataLoader, TensorDataset
from torch_xla.experimental.spmd_fully_sharded_data_parallel import (
    SpmdFullyShardedDataParallel as FSDPv2,
)

xr.use_spmd()
num_devices = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(num_devices), (num_devices,), ("fsdp",))
xs.set_global_mesh(mesh)

torch.manual_seed(0)
model = FSDPv2(nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=True)
dataset = TensorDataset(torch.randn(1024, 64), torch.randn(1024, 64))
loader = pl.MpDeviceLoader(
    DataLoader(dataset, batch_size=32, drop_last=True),
    torch_xla.device(),
    input_sharding=xs.ShardingSpec(mesh, ("fsdp", None)),
)


def log(step, loss):
    print(f"step {step} loss {loss.item():.4f}", flush=True)


for epoch in range(2):
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 10 == 0:
            xm.add_step_closure(log, args=(step, loss))
print("done", flush=True)
