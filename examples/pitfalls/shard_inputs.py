"""A data-parallel SPMD script that forgot to turn SPMD on."""

import numpy as np
import torch
import torch_xla
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

num_devices = xr.global_runtime_device_count()
# XLA002: a mesh and mark_sharding, but xr.use_spmd() is never called.
mesh = xs.Mesh(np.arange(num_devices), (num_devices,), ("data",))
batch = torch.randn(8 * num_devices, 128).to(torch_xla.device())
xs.mark_sharding(batch, mesh, ("data", None))
print("sharded the batch", flush=True)
