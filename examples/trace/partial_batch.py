"""Pitfall: a dataset whose size is not a multiple of the batch size (XLA202).

100 samples in batches of 16: six full batches, then one of 4. The last batch has a new
shape, so torch_xla traces and compiles a new graph for it in every epoch's last step.
`xla-lint trace --steps 10 -- python examples/trace/partial_batch.py` shows the compile
at step 7 with its cause: a new input shape.

Fix: `DataLoader(..., drop_last=True)`, or pad the last batch to the full size.
"""

import torch
import torch.nn as nn
import torch_xla
from torch.utils.data import DataLoader, TensorDataset

device = torch_xla.device()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
dataset = TensorDataset(torch.randn(100, 8), torch.randn(100, 1))
loader = DataLoader(dataset, batch_size=16, shuffle=True)  # XLA202: 100 % 16 == 4

for epoch in range(10):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
print("done", flush=True)
