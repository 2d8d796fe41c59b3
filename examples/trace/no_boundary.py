"""Pitfall: a training loop without a step boundary (XLA203).

Nothing in the loop calls `torch_xla.sync()` (or `torch_xla.step()`, or iterates an
`MpDeviceLoader`), so torch_xla never cuts the lazy graph: it grows by one training step
per iteration and nothing runs on the device until the final `.item()`.
`xla-lint trace --steps 5 -- python examples/trace/no_boundary.py` stops it after five
optimizer steps and reports that no step boundary was reached.

Fix: wrap the body in `with torch_xla.step():`, or call `torch_xla.sync()` after
`optimizer.step()`.
"""

import torch
import torch.nn as nn
import torch_xla

device = torch_xla.device()
torch.manual_seed(0)
model = nn.Linear(16, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 16).to(device)
y = torch.randn(8, 1).to(device)

for step in range(100):  # XLA203: no torch_xla.sync() in this loop
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print(f"final loss {loss.item():.4f}", flush=True)
