"""Overhead of the runtime checker versus the same training loop run bare.

Runs, as subprocesses with the same options:

1. ``python -m xla_lint.runtime ARGS --json ...``  - the checker (all nine checks);
2. ``python -m xla_lint.runtime ARGS --bare --json ...`` - the same mesh, FSDPv2 model,
   data and optimizer loop with no instrumentation (no per-step wait, no metrics reads,
   no sharding inspection, no consistency or checkpoint stage).

and prints the process wall times, the training-loop times and their ratios. Usage::

    python benchmarks/runtime_overhead.py [--repeat N] [-- checker options...]

e.g. ``python benchmarks/runtime_overhead.py --repeat 2 -- --steps 30``. On a shared or
small machine, repeat and look at the medians: compile time dominates short runs.
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


def run(args: list[str], json_path: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint.runtime", *args, "--json", json_path, "--quiet"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - t0
    if not os.path.exists(json_path):
        sys.exit(f"no report from {args}: exit {proc.returncode}\n{proc.stderr}")
    with open(json_path, encoding="utf-8") as f:
        return wall, json.loads(f.readline() if "--bare" in args else f.read())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="pairs of runs (alternating checker and bare)"
    )
    parser.add_argument("checker_args", nargs="*", help="options passed to both runs (after --)")
    ns = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(ns.repeat):
            c_wall, report = run(ns.checker_args, os.path.join(tmp, f"checker{i}.json"))
            b_wall, bare = run([*ns.checker_args, "--bare"], os.path.join(tmp, f"bare{i}.json"))
            bare = bare["bare"]
            t = report["records"][0]["timings"]
            rows.append(
                {
                    "checker_process_s": round(c_wall, 2),
                    "bare_process_s": round(b_wall, 2),
                    "checker_train_s": t["train_s"],
                    "bare_train_s": bare["train_s"],
                    "checker_step_s": t["step_s_median"],
                    "bare_step_s": bare["steady_s_per_step"],
                    "checker_status": report["status"],
                }
            )
            print(json.dumps(rows[-1]), flush=True)

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    summary = {
        "runs": len(rows),
        "process_ratio": round(med("checker_process_s") / med("bare_process_s"), 3),
        "train_loop_ratio": round(med("checker_train_s") / med("bare_train_s"), 3),
        "steady_step_ratio": round(med("checker_step_s") / med("bare_step_s"), 3)
        if med("bare_step_s")
        else None,
        **{f"median_{k}": med(k) for k in rows[0] if k != "checker_status"},
    }
    print(json.dumps({"summary": summary}, indent=2), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
