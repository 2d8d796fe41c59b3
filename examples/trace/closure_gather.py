"""SPMD: a step closure reads the loss every step, a sharded weight is read to the host in the
step whose batch shape changes, and the bias is read after the loop."""

import numpy as np
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

xr.use_spmd()
n = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(n), (n, 1), ("data", "model"))
device = torch_xla.device()
model = torch.nn.Linear(16, 21).to(device)
xs.mark_sharding(model.weight, mesh, ("data", None))  # 21 rows on 8 devices: 3 each, padded
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def report(loss):
    print("loss", loss.item(), flush=True)  # in a synchronous step closure


def report_later(loss):
    print("loss (async)", loss.item(), flush=True)  # in a run_async step closure


for i in range(6):
    if i == 3:
        kept = model.weight.cpu()  # a sharded tensor to the host: torch_xla compiles a gather
    x = torch.randn(16 if i == 3 else 8, 16).to(device)
    xs.mark_sharding(x, mesh, ("data", None))
    loss = model(x).sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    xm.add_step_closure(report, args=(loss,))
    xm.add_step_closure(report_later, args=(loss,), run_async=True)
    torch_xla.sync()
print("final", model.bias.sum().item(), flush=True)  # after the last step
