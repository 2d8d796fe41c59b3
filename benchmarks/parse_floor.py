"""The least any LibCST-based linter must do on a tree, timed: the floor under xla-lint's cold run.

Usage::

    python benchmarks/parse_floor.py PATH

Starts from a fresh interpreter (run it with ``/usr/bin/time`` for the start-up too),
imports LibCST, reads every ``*.py`` file under PATH and parses the ones that name
torch_xla, in one forked worker per core, and nothing else (no rules, no output). Prints
the seconds spent inside Python. ``benchmarks/RESULTS.md`` compares it with xla-lint,
Ruff and TorchFix on the same trees.
"""

import time

T0 = time.perf_counter()

import multiprocessing  # noqa: E402
import os  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402

import libcst as cst  # noqa: E402


def parse(path: str) -> int:
    """Parse ``path`` when it names torch_xla; returns 0."""
    with open(path, "rb") as handle:
        data = handle.read()
    if b"torch_xla" in data:
        cst.parse_module(data.decode("utf-8", "replace"))
    return 0


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python benchmarks/parse_floor.py PATH", file=sys.stderr)
        return 2
    files = [str(p) for p in pathlib.Path(sys.argv[1]).rglob("*.py")]
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    with multiprocessing.get_context("fork").Pool(cores) as pool:
        list(pool.imap_unordered(parse, files, chunksize=1))
    print(
        f"{len(files)} files: {time.perf_counter() - T0:.2f} s inside Python (import, read, parse)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
