"""XLA021 compile-cache-late against torch_xla itself, on CPU.

Each snippet runs in a fresh process (the computation cache is per process) with
``PJRT_DEVICE=CPU``; the same snippet is linted, and the linter must flag exactly the
snippets whose ``xr.initialize_cache()`` raises. The snippet that initialises the cache first
runs twice with one cache directory: the first run writes the compiled graph, the second
cannot load it on CPU (``PersistentCacheDeserializeFailure``), which is the "not implemented"
users see. About 40 s (five processes, each importing torch_xla, two at a time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("torch_xla")

from helpers import lint_tree, write_tree

pytestmark = pytest.mark.runtime

PRELUDE = """\
import json, os, sys
import torch
import torch_xla
import torch_xla.runtime as xr
import torch_xla.debug.metrics as met

dev = torch_xla.device()
"""
REPORT = """\
counters = {n: met.counter_value(n) for n in met.counter_names() if n.startswith(("PersistentCache", "UncachedCompile"))}
print(json.dumps({"counters": counters, "files": len(os.listdir(sys.argv[1]))}))
"""
CATCH = """\
try:
    xr.initialize_cache(sys.argv[1], readonly=False)
except AssertionError as exc:
    print(json.dumps({"error": str(exc)}))
    sys.exit(0)
"""

SNIPPETS = {
    # name -> (source, initialize_cache raises)
    "first": (
        PRELUDE + "xr.initialize_cache(sys.argv[1], readonly=False)\n"
        "t = torch.arange(4.0).to(dev) * 2 + 1\ntorch_xla.sync()\nprint(t.cpu().tolist(), file=sys.stderr)\n"
        + REPORT,
        False,
    ),
    "after_sync": (
        PRELUDE + "t = torch.zeros(2).to(dev) + 1\ntorch_xla.sync()\n" + CATCH + REPORT,
        True,
    ),
    "after_item": (
        PRELUDE
        + "loss = (torch.ones(3).to(dev) * 2).sum()\nprint(loss.item(), file=sys.stderr)\n"
        + CATCH
        + REPORT,
        True,
    ),
    "after_transfer": (
        PRELUDE + "t = torch.zeros(2).to(dev)\nprint(t.cpu(), file=sys.stderr)\n" + CATCH + REPORT,
        False,
    ),
}


def _run(path: Path, cache: Path) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("XLA_", "PJRT_", "CPU_NUM", "TPU_"))
    }
    env.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1")
    proc = subprocess.run(
        [sys.executable, str(path), str(cache)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {"out": json.loads(proc.stdout.strip().splitlines()[-1]), "stderr": proc.stderr}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every snippet's output, two processes at a time (the machine may have two cores)."""
    base = tmp_path_factory.mktemp("compile_cache")

    def run(name: str) -> dict:
        path = base / f"{name}.py"
        path.write_text(SNIPPETS[name][0])
        cache = base / f"cache_{name}"
        cache.mkdir()
        out = {name: _run(path, cache)}
        if name == "first":  # the same program again, same cache directory
            out["first_again"] = _run(path, cache)
        return out

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, SNIPPETS))
    return {k: v for r in results for k, v in r.items()}


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_initialize_cache_raises_exactly_where_xla021_reports(runs, tmp_path, name):
    source, raises = SNIPPETS[name]
    result = runs[name]["out"]
    if raises:
        assert result == {"error": "Computation cache has already been initialized"}
    else:
        assert "error" not in result
    write_tree(tmp_path, {"snippet.py": source})
    found, _, _ = lint_tree(tmp_path, select=["XLA021"], preview=True)
    lines = [d.line for d in found.diagnostics if d.code == "XLA021"]
    assert bool(lines) is raises, (name, [d.message for d in found.diagnostics])
    if raises:
        assert lines == [
            source.splitlines().index("    xr.initialize_cache(sys.argv[1], readonly=False)") + 1
        ]


def test_cpu_writes_the_cache_but_cannot_load_it(runs):
    first, again = runs["first"], runs["first_again"]
    assert first["out"]["counters"].get("PersistentCacheMiss") == 1
    assert first["out"]["files"] == 1
    # Second run: the file is found, the CPU client cannot deserialize it, the graph is compiled again.
    assert again["out"]["counters"].get("PersistentCacheDeserializeFailure") == 1
    assert again["out"]["counters"].get("UncachedCompile") == 1
    assert "PersistentCacheHit" not in again["out"]["counters"]
    assert "Deserializing serialized executable not supported" in again["stderr"]
    assert "[1.0, 3.0, 5.0, 7.0]" in again["stderr"]  # results are still right
