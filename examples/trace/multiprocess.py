"""One process per device: `torch_xla.launch` runs `_mp_fn` once per device, each a rank.

`xla-lint trace --cpu-devices 2 -- python examples/trace/multiprocess.py` traces every rank
in its own events file and stops all of them at the same step boundary. On a TPU VM each chip
gets its own process; on CPU torch_xla runs one thread per virtual device in a single worker
process (torch_xla/_internal/pjrt.py `run_multiprocess`), so `--cpu-devices` sets the ranks.

On CPU, torch_xla 2.9 cannot run a collective between those threads (XLA's CPU rendezvous
aborts after 10 s), so the ranks here train independently; on a TPU, replace
`optimizer.step()` by `xm.optimizer_step(optimizer)` to all-reduce the gradients.
"""

import torch
import torch.nn as nn
import torch_xla


def _mp_fn(index):
    device = torch_xla.device()
    torch.manual_seed(0)  # the same initial model on every rank (XLA028)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32).to(device)
    y = torch.randn(16, 1).to(device)
    for step in range(100):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"rank {index}: final loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    torch_xla.launch(_mp_fn, args=())
