"""Pitfall: reading the loss on the host every step (XLA201).

`loss.item()` before the step boundary makes torch_xla compile and run a second graph (the
loss alone) every step, and waits for it: the device idles while the host reads.
`xla-lint trace -- python examples/trace/host_read.py` shows the read at its line in
every step, with the extra graph it forced.

Fix: keep the running loss on the device and read it every N steps, or read it after the
boundary with `xm.add_step_closure(lambda: print(loss.item()))`.
"""

import torch
import torch.nn as nn
import torch_xla

device = torch_xla.device()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 32).to(device)
y = torch.randn(16, 1).to(device)

losses = []
for step in range(1000):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss.item())  # XLA201: a host read every step
    torch_xla.sync()
print(f"final loss {losses[-1]:.4f}", flush=True)
