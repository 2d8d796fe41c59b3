"""A multi-slice FSDPv2 training script with the pitfalls xla-lint exists to catch.

Run `xla-lint examples/pitfalls` to see them, `xla-lint --fix examples/pitfalls`
(on a copy) to fix the ones with a safe fix. Each mistake is marked with the rule code.
"""

import torch
import torch.nn as nn
import torch_xla
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from torch_xla.experimental.spmd_fully_sharded_data_parallel import (
    SpmdFullyShardedDataParallel as FSDPv2,
)

xr.use_spmd()

# XLA001: HybridMesh is keyword-only; this raises TypeError.
ici_mesh_shape = (1, 4, 1)
dcn_mesh_shape = (2, 1, 1)
mesh = xs.HybridMesh(ici_mesh_shape, dcn_mesh_shape, ("data", "fsdp", "tensor"))
xs.set_global_mesh(mesh)

model = FSDPv2(nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)


def train(loader, steps):
    for step, batch in enumerate(loader):
        with torch_xla.step():
            loss = model(batch).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        # XLA005: in SPMD global_ordinal() is 0 on every host, so every host logs.
        if step % 100 == 0 and xr.global_ordinal() == 0:
            # XLA004: without flush=True this line can sit in a buffer and never appear.
            print(f"step {step} loss {loss.item():.4f}")
    # XLA003: gathers every shard, drops the sharding, every host writes the same file.
    torch.save(model.state_dict(), "checkpoint.pt")


if __name__ == "__main__":
    train([torch.randn(8, 1024) for _ in range(1000)], steps=1000)
