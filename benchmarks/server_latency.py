"""Time the language server from an edit to its diagnostics, against linting the file from scratch.

Usage::

    python benchmarks/server_latency.py                 # a generated 1,000-line torch_xla file
    python benchmarks/server_latency.py --file PATH     # your own file instead
    python benchmarks/server_latency.py --edits 40

Starts ``python -m xla_lint server`` as an editor does (pygls's LanguageClient on its
standard input and output, ``initializationOptions: {"debounce": 0}`` so the debounce is not
counted), opens the file in a workspace folder that holds it and one module it imports, then
makes ``--edits`` edits, one at a time, each changing a line in the middle of the file, and
times each from sending ``textDocument/didChange`` to receiving the
``textDocument/publishDiagnostics`` for that version. Printed: the median (and the slowest)
of those, and, measured in the same run on the same text, the peers' median of 5:

- ``xla-lint - --stdin-filename FILE``: the command line linting the buffer, a fresh process
  each time, as an editor plugin without a server runs it (start-up included);
- ``ruff check --stdin-filename FILE -`` (its default rules), when Ruff is on ``PATH`` or in
  the benchmark virtualenv (``$XLA_LINT_BENCH_VENV``, default ``/work/benchvenv``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

HEAD = '''"""Train a transformer with SPMD on TPU (generated for benchmarks/server_latency.py)."""

import argparse
import math
import os
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from torch_xla.experimental.spmd_fully_sharded_data_parallel import (
    SpmdFullyShardedDataParallel as FSDPv2,
)

import data

xr.use_spmd()


@dataclass
class Config:
    dim: int = 512
    layers: int = 8
    heads: int = 8
    lr: float = 3e-4
    steps: int = 1000
    batch: int = 32
    log_every: int = 10
'''

BLOCK = '''

class Block{n}(nn.Module):
    """Attention and MLP block {n}."""

    def __init__(self, config: Config):
        super().__init__()
        self.norm1 = nn.LayerNorm(config.dim)
        self.attn = nn.MultiheadAttention(config.dim, config.heads, batch_first=True)
        self.norm2 = nn.LayerNorm(config.dim)
        self.fc1 = nn.Linear(config.dim, config.dim * 4)
        self.fc2 = nn.Linear(config.dim * 4, config.dim)

    def forward(self, x):
        h = self.norm1(x)
        h, _ = self.attn(h, h, h, need_weights=False)
        x = x + h
        h = torch.relu(self.fc1(self.norm2(x)))
        xs.mark_sharding(h, xs.get_global_mesh(), ("data", "model"))
        return x + self.fc2(h)
'''

HELPERS = '''

def schedule_{n}(step: int, config: Config) -> float:
    """Learning rate of step {n}: warm-up, then cosine decay."""
    warmup = max(1, config.steps // 20)
    if step < warmup:
        return config.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, config.steps - warmup)
    return config.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def summarize_{n}(values: list[float]) -> dict:
    """Mean, min and max of a list of losses."""
    if not values:
        return {{"mean": float("nan"), "min": float("nan"), "max": float("nan")}}
    return {{"mean": sum(values) / len(values), "min": min(values), "max": max(values)}}
'''

TRAIN = """

def build_mesh_{n}():
    num_devices = xr.global_runtime_device_count()
    device_ids = np.array(range(num_devices))
    mesh = xs.Mesh(device_ids, (num_devices // 2, 2), ("data", "model"))
    xs.set_global_mesh(mesh)
    return mesh


def train_{n}(config: Config, loader):
    mesh = build_mesh_{n}()
    device = torch_xla.device()
    model = nn.Sequential(*[Block{n}(config) for _ in range(config.layers)]).to(device)
    model = FSDPv2(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    loader = pl.MpDeviceLoader(loader, device, input_sharding=xs.ShardingSpec(mesh, ("data", None)))
    losses = []
    for step, (inputs, target) in enumerate(loader):
        for group in optimizer.param_groups:
            group["lr"] = schedule_{n}(step, config)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs).flatten(0, 1), target.flatten())
        loss.backward()
        optimizer.step()
        xm.mark_step()
        if step % config.log_every == 0:
            losses.append(loss.item())
            print("step", step, losses[-1], flush=True)
        if step >= config.steps:
            break
    if xr.process_index() == 0:
        print(summarize_{n}(losses), flush=True)
    return model
"""

MAIN = """

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    config = Config(steps=args.steps)
    started = time.time()
    train_0(config, data.loader(config.batch))
    print("done in", time.time() - started, flush=True)


if __name__ == "__main__":
    main()
"""

DATA = '''"""The data the benchmark's script imports."""

import torch


def loader(batch):
    for _ in range(100):
        yield torch.randint(0, 100, (batch, 16)), torch.randint(0, 100, (batch, 16))
'''


def generate(lines: int = 1000) -> str:
    """A torch_xla training script of about ``lines`` lines: model blocks, helpers, train loops."""
    parts = [HEAD]
    n = 0
    while sum(p.count("\n") for p in parts) + MAIN.count("\n") < lines:
        parts += [BLOCK.format(n=n), HELPERS.format(n=n), TRAIN.format(n=n)]
        n += 1
    return "".join(parts) + MAIN


def cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds process ``pid`` has used (Linux ``/proc``; else None)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def server_latencies(folder: Path, path: Path, edits: int) -> tuple[list[float], list[float]]:
    """Seconds from each didChange to its publishDiagnostics, one edit at a time, and the
    server's CPU seconds for each (empty where ``/proc`` is not there)."""
    client = LanguageClient("server-latency", "1")
    arrived: dict[int, float] = {}
    found: dict[int, int] = {}  # version -> diagnostics published
    broken: list[lsp.Diagnostic] = []  # XLA000: the edit made the text unparsable
    event = asyncio.Event()

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
        arrived[params.version or 0] = time.perf_counter()
        found[params.version or 0] = len(params.diagnostics)
        broken.extend(d for d in params.diagnostics if d.code == "XLA000")
        event.set()

    await client.start_io(sys.executable, "-m", "xla_lint", "server", cwd=str(folder))
    await client.initialize_async(
        lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(),
            root_uri=from_fs_path(str(folder)),
            initialization_options={"debounce": 0},
        )
    )
    client.initialized(lsp.InitializedParams())
    uri = from_fs_path(str(path))
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)

    async def until(version: int) -> None:
        while version not in arrived:
            event.clear()
            await asyncio.wait_for(event.wait(), 120)

    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "python", 1, text))
    )
    await until(1)
    # Each edit adds a statement before the first top-level `def` past the middle of the file
    # (a new text to lint each time, and one that still parses).
    middle = next(
        i for i in range(len(lines) // 2, len(lines)) if lines[i].startswith(("def ", "class "))
    )
    took, cpu = [], []
    pid = client._server.pid if client._server is not None else -1
    for version in range(2, edits + 2):
        edited = list(lines)
        edited.insert(middle, f"x_{version} = {version}  # edit {version}\n")
        sent, used = time.perf_counter(), cpu_seconds(pid)
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(version, uri),
                [lsp.TextDocumentContentChangeWholeDocument("".join(edited))],
            )
        )
        await until(version)
        took.append(arrived[version] - sent)
        after = cpu_seconds(pid)
        if used is not None and after is not None:
            cpu.append(after - used)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    if broken:
        sys.exit(f"an edited text does not parse: {broken[0].message}")
    print(f"diagnostics published per version: {sorted(set(found.values()))}")
    return took, cpu


def command_latencies(command: list[str], path: Path, folder: Path, runs: int = 5) -> list[float]:
    """Seconds for ``command`` to lint the file's text given on standard input, ``runs`` times."""
    data = path.read_bytes()
    took = []
    for i in range(runs):
        edited = data + f"\nx_{i} = {i}\n".encode()
        started = time.perf_counter()
        subprocess.run(command, input=edited, cwd=folder, capture_output=True, check=False)
        took.append(time.perf_counter() - started)
    return took


def engine_latencies(folder: Path, path: Path, runs: int = 5) -> list[float]:
    """Seconds for the engine to lint an edited text from scratch in this process (a full
    parse each time, as the server does without its parse of the last text), ``runs`` times."""
    from xla_lint.config import build_settings
    from xla_lint.pipeline.run import lint_file
    from xla_lint.sources.target import Target

    settings = build_settings(cwd=folder)
    text = path.read_text(encoding="utf-8")
    lint_file(Target(str(path), "python"), settings, text=text)  # imports, rule classes
    took = []
    for i in range(runs):
        started = time.perf_counter()
        lint_file(Target(str(path), "python"), settings, text=f"{text}\nx_{i} = {i}\n")
        took.append(time.perf_counter() - started)
    return took


def find_ruff() -> str | None:
    """Ruff on ``PATH``, or in the benchmark virtualenv."""
    venv = os.environ.get("XLA_LINT_BENCH_VENV", "/work/benchvenv")
    candidate = os.path.join(venv, "bin", "ruff")
    return shutil.which("ruff") or (candidate if os.path.exists(candidate) else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, help="a torch_xla file (default: a generated one)")
    parser.add_argument("--lines", type=int, default=1000, help="lines of the generated file")
    parser.add_argument("--edits", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "train.py"
        text = args.file.read_text(encoding="utf-8") if args.file else generate(args.lines)
        path.write_text(text, encoding="utf-8")
        (folder / "data.py").write_text(DATA, encoding="utf-8")
        took, cpu = asyncio.run(server_latencies(folder, path, args.edits))
        server = statistics.median(took)
        print(
            f"file: {args.file or 'generated'}, {text.count(chr(10))} lines, "
            f"{len(text.encode()):,} bytes; {args.edits} edits; machine: {os.cpu_count()} cores"
        )
        print(
            f"xla-lint server, didChange -> publishDiagnostics: median {server * 1000:.0f} ms "
            f"(fastest {min(took) * 1000:.0f} ms, slowest {max(took) * 1000:.0f} ms; "
            "debounce off)"
        )
        if cpu:  # wall time counts waiting for a core on a busy machine; CPU time does not
            print(
                f"  the server's CPU time per edit: median {statistics.median(cpu) * 1000:.0f} ms "
                f"(/proc, {1000 / os.sysconf('SC_CLK_TCK'):.0f} ms ticks); "
                f"load average at the end: {os.getloadavg()[0]:.1f}"
            )
        peers = [
            (
                "xla-lint - (fresh process)",
                [
                    sys.executable,
                    "-m",
                    "xla_lint",
                    "-",
                    "--stdin-filename",
                    "train.py",
                    "--no-cache",
                ],
            ),
        ]
        ruff = find_ruff()
        if ruff:
            peers.append(
                (
                    "ruff check - (fresh process)",
                    [
                        ruff,
                        "check",
                        "--isolated",
                        "--no-cache",
                        "--stdin-filename",
                        "train.py",
                        "-",
                    ],
                )
            )
        else:
            print("ruff: not found, skipped")
        timings = [
            ("xla-lint engine, whole text parsed, in process", engine_latencies(folder, path))
        ]
        timings += [(name, command_latencies(command, path, folder)) for name, command in peers]
        for name, peer_took in timings:
            peer = statistics.median(peer_took)
            print(f"{name}: median {peer * 1000:.0f} ms; server / peer = {server / peer:.2f}")


if __name__ == "__main__":
    main()
