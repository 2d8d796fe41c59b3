"""A synthetic monorepo for benchmarking: many plain Python files, a few heavy torch_xla users.

Every template here was written for this benchmark (none is copied from pytorch/xla);
the torch_xla ones use the APIs the rules look at (SPMD meshes, ``mark_sharding``,
``xm.optimizer_step``, ``xmp.spawn``, ``torch_xla.launch``, FSDPv2, checkpoints) the way
training scripts do. Files are made distinct by seeded variations (names, constants,
how many helper functions), so neither xla-lint's nor Ruff's cache can answer one file
from another.
"""

from __future__ import annotations

import random
from pathlib import Path

PLAIN_HEAD = '''"""{title}."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Iterable

from {pkg} import common

log = logging.getLogger(__name__)
LIMIT_{n} = {limit}


@dataclass
class Record{n}:
    """One row of the {title} table."""

    name: str
    size: int = 0
    tags: list[str] = field(default_factory=list)

    def weight(self) -> float:
        return self.size * {factor} / max(1, len(self.tags))
'''

PLAIN_FUNC = '''

def transform_{n}_{i}(rows: Iterable[Record{n}], scale: float = {factor}) -> list[dict]:
    """Scale, filter and serialise rows."""
    out = []
    for row in rows:
        if row.size > LIMIT_{n} or not row.name:
            continue
        item = {{"name": row.name.strip().lower(), "weight": row.weight() * scale}}
        if row.tags:
            item["tags"] = sorted(set(row.tags))
        out.append(item)
    log.debug("kept %d rows", len(out))
    return out


def load_{n}_{i}(path: str) -> list[Record{n}]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return [Record{n}(d["name"], int(d.get("size", 0)), list(d.get("tags", []))) for d in data]
'''

PLAIN_TEST = '''"""Tests for {pkg}.mod{n}."""

import pytest

from {pkg}.mod{m} import Record{m}, transform_{m}_0


@pytest.mark.parametrize("size", [0, 1, {limit}])
def test_transform_keeps_small_rows_{n}(size):
    rows = [Record{m}("A", size, ["x", "y"])]
    out = transform_{m}_0(rows)
    assert all(r["name"] == "a" for r in out)


def test_empty_{n}():
    assert transform_{m}_0([]) == []
'''

XLA_TRAIN = '''"""Train a small transformer on TPU with SPMD ({title})."""

import os
import numpy as np
import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
import torch_xla.distributed.spmd as xs
import torch_xla.distributed.parallel_loader as pl
from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2

from {pkg}.models import block_{n}

xr.use_spmd()
NUM_STEPS = {steps}


def build_mesh():
    num_devices = xr.global_runtime_device_count()
    mesh_shape = (num_devices // {model}, {model})
    device_ids = np.array(range(num_devices))
    return xs.Mesh(device_ids, mesh_shape, ("data", "model"))


class Net{n}(nn.Module):
    def __init__(self, dim={dim}):
        super().__init__()
        self.layers = nn.ModuleList([block_{n}.Block(dim) for _ in range({layers})])
        self.head = nn.Linear(dim, {classes})

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def train(loader, mesh):
    device = torch_xla.device()
    model = Net{n}().to(device)
    for name, param in model.named_parameters():
        if param.dim() == 2:
            xs.mark_sharding(param, mesh, ("data", "model"))
    optimizer = torch.optim.AdamW(model.parameters(), lr={lr})
    loss_fn = nn.CrossEntropyLoss()
    loader = pl.MpDeviceLoader(loader, device, input_sharding=xs.ShardingSpec(mesh, ("data", None)))
    for step, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = loss_fn(model(data), target)
        loss.backward()
        optimizer.step()
        xm.mark_step()
        if step % 10 == 0:
            print("step", step, loss.item())
        if step >= NUM_STEPS:
            break
    xm.save(model.state_dict(), "/tmp/model_{n}.pt")
    return model
'''

XLA_MP = '''"""Data-parallel training with one process per device ({title})."""

import torch
import torch.distributed as dist
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.distributed.xla_backend


def _mp_fn(index, flags):
    dist.init_process_group("xla", init_method="xla://")
    device = xm.xla_device()
    model = torch.nn.Linear({dim}, {classes}).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True)
    opt = torch.optim.SGD(ddp.parameters(), lr={lr})
    for step in range({steps}):
        x = torch.randn({batch}, {dim}, device=device)
        loss = ddp(x).sum()
        loss.backward()
        xm.optimizer_step(opt)
        if xm.is_master_ordinal():
            print("loss", loss.item())
    torch.save(model.state_dict(), "ckpt_{n}.pt")


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=({{}},))
'''

XLA_BLOCK = '''"""Model blocks ({title})."""

import torch
import torch.nn as nn
import torch_xla.distributed.spmd as xs


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim * {mult})
        self.fc2 = nn.Linear(dim * {mult}, dim)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        xs.mark_sharding(h, xs.get_global_mesh(), ("data", "model"))
        return x + self.fc2(h)
'''


def build(root: str | Path, files: int = 2400, xla_every: int = 12, seed: int = 0) -> dict:
    """Write the corpus under ``root``; returns counts ``{"files", "torch_xla_files", "lines", "bytes"}``.

    Layout: ``pkg<k>/`` packages of 40 modules each, a ``tests/`` folder per package,
    and, every ``xla_every``-th file, a torch_xla training script, multi-process script
    or model block instead of a plain module.
    """
    rng = random.Random(seed)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    counts = {"files": 0, "torch_xla_files": 0, "lines": 0, "bytes": 0}

    def write(path: Path, text: str, xla: bool) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        counts["files"] += 1
        counts["torch_xla_files"] += xla
        counts["lines"] += text.count("\n")
        counts["bytes"] += len(text.encode())

    n = 0
    while counts["files"] < files:
        pkg = f"pkg{n // 40}"
        base = root / pkg
        if not (base / "__init__.py").exists():
            write(base / "__init__.py", f'"""Package {pkg}."""\n', False)
            write(base / "common.py", '"""Shared helpers."""\n\nVERSION = 1\n', False)
            (base / "models").mkdir(parents=True, exist_ok=True)
            write(base / "models" / "__init__.py", "", False)
        v = dict(
            n=n,
            pkg=pkg,
            title=f"component {n}",
            limit=rng.randint(10, 10_000),
            factor=round(rng.uniform(0.1, 9.9), 2),
            steps=rng.randint(10, 1000),
            model=rng.choice([1, 2, 4]),
            dim=rng.choice([128, 256, 512]),
            layers=rng.randint(2, 12),
            classes=rng.choice([10, 100, 1000]),
            lr=rng.choice([1e-3, 3e-4, 1e-4]),
            batch=rng.choice([8, 16, 32]),
            mult=rng.choice([2, 4]),
        )
        if n % xla_every == 0:
            kind = (n // xla_every) % 3
            if kind == 0:
                write(base / "models" / f"block_{n}.py", XLA_BLOCK.format(**v), True)
                write(base / f"train_{n}.py", XLA_TRAIN.format(**v), True)
            elif kind == 1:
                write(base / f"mp_{n}.py", XLA_MP.format(**v), True)
            else:
                write(base / "models" / f"block_{n}.py", XLA_BLOCK.format(**v), True)
                write(base / f"train_{n}.py", XLA_TRAIN.format(**v), True)
        else:
            text = PLAIN_HEAD.format(**v) + "".join(
                PLAIN_FUNC.format(i=i, **v) for i in range(rng.randint(1, 8))
            )
            write(base / f"mod{n}.py", text, False)
            if n % 3 == 1:
                write(base / "tests" / f"test_mod{n}.py", PLAIN_TEST.format(m=n, **v), False)
        n += 1
    return counts
