"""Hosts of one pod that run different graphs: host 1 adds a term to its loss.

`xla-lint trace --simulate-hosts 2 --cpu-devices 1 --steps 3 -- python
examples/trace/host_divergence.py` runs two copies, each seeing `xr.process_index()` as its
host index, and reports "hosts diverge at step 1". On a real pod every host of an SPMD program
must run the same graph at each step: the collectives inside it pair up across hosts, and a
host running another graph leaves the others waiting (the pod hangs). `--same` takes the
branch out (the hosts agree); `--fail-at N` makes host 1 raise at step N, `--hang-at N` makes
it sleep forever in step N (a host stuck in its step, ended by `--timeout`); `--seed-per-host`
seeds torch with the host index and picks the loss's scale from a random draw, so the hosts
build different graphs from their seeds (reported as XLA027 per-host-seed).
"""

import sys
import time

import torch
import torch.nn as nn
import torch_xla
import torch_xla.runtime as xr


def main() -> None:
    scale = 1.0
    if "--seed-per-host" in sys.argv:
        torch.manual_seed(xr.process_index())
        scale = 2.0 if torch.rand(()).item() > 0.5 else 1.0  # seed 0: 0.496, seed 1: 0.758
    device = torch_xla.device()
    model = nn.Linear(8, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.ones(4, 8).to(device)
    fail_at = int(sys.argv[sys.argv.index("--fail-at") + 1]) if "--fail-at" in sys.argv else 0
    hang_at = int(sys.argv[sys.argv.index("--hang-at") + 1]) if "--hang-at" in sys.argv else 0
    for step in range(1, 100):
        if step == fail_at and xr.process_index() == 1:
            raise RuntimeError(f"host 1 lost its data at step {step}")
        if step == hang_at and xr.process_index() == 1:
            time.sleep(3600)  # host 1 waits forever (in a collective, on a pod)
        loss = model(x).pow(2).mean()
        if scale != 1.0:
            loss = loss * scale
        if xr.process_index() == 1 and "--same" not in sys.argv:
            loss = loss + model.weight.abs().sum()  # only host 1: another graph
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    print(f"host {xr.process_index()} of {xr.process_count()}: done", flush=True)


if __name__ == "__main__":
    main()
