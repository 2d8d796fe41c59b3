"""Overhead of ``xla-lint trace`` versus the same script run bare, in one run.

Runs one example script (default: examples/trace/fsdpv2.py, SPMD FSDPv2 on 8 CPU devices)
alternately:

1. bare: ``python -c BARE SCRIPT`` where BARE only wraps ``torch_xla.sync`` to time each
   boundary (one ``perf_counter`` call) and stops after ``--steps`` boundaries;
2. traced: ``xla-lint trace --steps N --json --no-static -- python SCRIPT``.

Both get the same device environment (``PJRT_DEVICE=CPU``, ``CPU_NUM_DEVICES=8``) and the
same XLA flags: the environment's (a bare run's), or with ``--fast-compile`` LLVM -O0 for both
(the trace gets ``--fast-compile`` too). Prints the median step time of each after warm-up
(steps 1-2 compile; they are left out), the compile time of each, the ratio traced/bare
(target: at most 1.3x) and the trace's wall time. Usage::

    python benchmarks/trace_overhead.py [--script PATH] [--steps N] [--rounds R] [--fast-compile]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xla_lint.runtime.env import CPU_XLA_FLAGS  # noqa: E402

WARMUP = 2

BARE = r"""
import json, os, runpy, sys, time
import torch_xla
times = []
original = torch_xla.sync
limit = int(os.environ["BENCH_STEPS"])
def sync(*args, **kwargs):
    result = original(*args, **kwargs)
    times.append(time.perf_counter())
    if len(times) > limit:
        with open(os.environ["BENCH_OUT"], "w") as f:
            json.dump([b - a for a, b in zip(times, times[1:])], f)
        sys.stdout.flush()
        os._exit(0)
    return result
torch_xla.sync = sync
sys.modules["torch_xla.torch_xla"].sync = sync
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(script))
runpy.run_path(script, run_name="__main__")
"""


FAST = False  # --fast-compile: LLVM -O0 in both runs


def env() -> dict:
    e = dict(os.environ, PJRT_DEVICE="CPU", CPU_NUM_DEVICES="8", TF_CPP_MIN_LOG_LEVEL="2")
    if FAST and "xla_backend_optimization_level" not in e.get("XLA_FLAGS", ""):
        e["XLA_FLAGS"] = f"{e.get('XLA_FLAGS', '')} {CPU_XLA_FLAGS}".strip()
    return e


def bare(script: str, steps: int) -> list[float]:
    """Step durations of the bare run (the time between consecutive boundaries)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "times.json")
        # One boundary more than steps: the first boundary starts step 1's clock in the
        # trace too (its step 1 runs from the torch_xla import, so both drop it as warm-up).
        subprocess.run(
            [sys.executable, "-c", BARE, script],
            env={**env(), "BENCH_STEPS": str(steps), "BENCH_OUT": out},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=900,
            check=False,
        )
        if not os.path.exists(out):
            sys.exit(f"the bare run of {script} wrote no timings")
        with open(out, encoding="utf-8") as f:
            return [0.0] + json.load(f)  # index i = step i+1; step 1 has no start boundary


def traced(script: str, steps: int) -> tuple[list[float], float, float]:
    """Step durations of the traced run, its wall time and its compile seconds."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "xla_lint",
            "trace",
            "--steps",
            str(steps),
            "--json",
            "--no-static",
            *(["--fast-compile"] if FAST else []),
            "--",
            "python",
            script,
        ],
        env=env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    wall = time.perf_counter() - t0
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        sys.exit(
            f"the traced run printed no report (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
        )
    steps_ = [s for s in report["steps"] if not s.get("final")]
    compile_s = sum(c["time_s"] or 0.0 for c in report["compiles"])
    return [s["duration_s"] for s in steps_], wall, compile_s


def main() -> None:
    """Run the rounds and print the medians, the ratio and the trace's wall time."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", default=str(ROOT / "examples" / "trace" / "fsdpv2.py"))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fast-compile", action="store_true", help="LLVM -O0 in both runs")
    args = parser.parse_args()
    global FAST
    FAST = args.fast_compile
    compiles = []
    bare_steps: list[float] = []
    traced_steps: list[float] = []
    walls = []
    for _ in range(args.rounds):
        bare_steps += bare(args.script, args.steps)[WARMUP:]
        durations, wall, compile_s = traced(args.script, args.steps)
        compiles.append(compile_s)
        traced_steps += durations[WARMUP:]
        walls.append(wall)
    b, t = statistics.median(bare_steps), statistics.median(traced_steps)
    print(
        f"script: {os.path.relpath(args.script)}; {args.steps} steps x {args.rounds} rounds; "
        f"steps 1-{WARMUP} (compiles) left out"
    )
    print(f"bare   median step: {b * 1000:.2f} ms ({len(bare_steps)} steps)")
    print(f"traced median step: {t * 1000:.2f} ms ({len(traced_steps)} steps)")
    print(f"ratio traced/bare:  {t / b:.2f}x (target <= 1.3x)")
    print(
        f"XLA flags: {env().get('XLA_FLAGS') or 'none'}; traced compile time: "
        + ", ".join(f"{c:.2f} s" for c in compiles)
    )
    print(
        f"trace wall time ({args.steps} steps, torch_xla import and compiles included): "
        + ", ".join(f"{w:.1f} s" for w in walls)
    )


if __name__ == "__main__":
    main()
