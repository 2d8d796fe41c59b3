"""Pitfall: Adam compiles one more graph at step 325 (XLA204).

`torch.optim.Adam` keeps its step counter on the host and divides by the Python float
`sqrt(1 - beta2 ** step)` (torch/optim/adam.py, `_single_tensor_adam`). torch_xla bakes the
scalars 0 and 1 into the graph as constants (`IsSpecialScalar`, torch_xla/csrc/tensor.cpp);
with beta2 = 0.95 that float rounds to exactly 1.0 in float32 at step 325, so the graph
changes and compiles once more, mid-run. This script fast-forwards the optimizer's step
counter to 320 so the trace reaches step 325 in seconds:
`xla-lint trace --steps 8 -- python examples/trace/adam_step325.py` shows the compile at
the 5th traced step (optimizer step 325) with identical input shapes.

Fix: `torch.optim.Adam(..., capturable=True)` keeps the step on the device (no constant),
or accept the one compile.
"""

import torch
import torch.nn as nn
import torch_xla

device = torch_xla.device()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.95))  # XLA204
for p in model.parameters():  # resume at optimizer step 320, as from a checkpoint
    optimizer.state[p] = {
        "step": torch.tensor(320.0),
        "exp_avg": torch.zeros_like(p),
        "exp_avg_sq": torch.zeros_like(p),
    }
x = torch.randn(8, 16).to(device)
y = torch.randn(8, 1).to(device)

for step in range(1000):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    torch_xla.sync()
print("done", flush=True)
