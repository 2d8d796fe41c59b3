"""What the program model costs in a cold run: the import scan of unparsed files, building
the model (import graph, programs), and the second pass over modules XLA programs reach, each
as a share of the whole run, measured in one process on one corpus.

Usage::

    python benchmarks/program_model.py                 # the synthetic 2,400-file corpus (benchmarks/corpus.py)
    python benchmarks/program_model.py --corpus PATH   # your own tree

Prints seconds and the ratio of each stage to the whole run (median of ``--repeat`` runs,
single process, no cache). The stages are timed by wrapping the engine's functions, so
nothing else changes.

The import scan alone (:func:`xla_lint.program.modules.import_facts` over every file the
prefilter rules out, the files read first)::

    python benchmarks/program_model.py --scan --corpus PATH
    python benchmarks/program_model.py --scan --corpus PATH --against /work/main

``--against CHECKOUT`` times that checkout's ``xla_lint/program/modules.py`` too, interleaved
with this one in the same process (the rest of the package is this one), checks that both give
the same facts for every file, and prints the ratio of their medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help="tree to lint (default: synthesise one)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scan", action="store_true", help="time the import scan alone")
    parser.add_argument(
        "--against", help="with --scan: a checkout whose import scan to time beside this one"
    )
    args = parser.parse_args(argv)
    if args.scan:
        return scan(args)

    from xla_lint.config import build_settings
    from xla_lint.pipeline import run as engine
    from xla_lint.pipeline.discover import discover

    root = args.corpus
    if root is None:
        import corpus as corpus_mod

        root = tempfile.mkdtemp(prefix="xla-lint-program-")
        print("corpus:", corpus_mod.build(root))
    os.chdir(root)
    spent = {"import scan": 0.0, "program model": 0.0, "reached modules": 0.0}

    def timed(name, fn):
        def wrapper(*a, **kw):
            start = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[name] += time.perf_counter() - start

        return wrapper

    engine.import_facts = timed("import scan", engine.import_facts)
    engine.program_facts = timed("program model", engine.program_facts)
    engine.lint_reached = timed("reached modules", engine.lint_reached)

    rows: dict[str, list[float]] = {k: [] for k in (*spent, "whole run")}
    for _ in range(args.repeat):
        for k in spent:
            spent[k] = 0.0
        settings = build_settings(cwd=Path(root), isolated=True)
        launchers: list[str] = []
        start = time.perf_counter()
        targets = discover(["."], settings, launchers)
        engine.run(targets, settings, jobs=1, launchers=launchers, folders=["."])
        rows["whole run"].append(time.perf_counter() - start)
        for k, v in spent.items():
            rows[k].append(v)
    whole = statistics.median(rows["whole run"])
    for k, values in rows.items():
        m = statistics.median(values)
        print(f"{k:16s} {m:7.3f} s  {m / whole:6.1%} of the run")
    return 0


def scan(args) -> int:
    """``--scan``: the import scan's time per file, and against another checkout's."""
    import importlib.util

    from xla_lint.program import modules
    from xla_lint.sources.prefilter import needs_parse

    root = args.corpus
    if root is None:
        import corpus as corpus_mod

        root = tempfile.mkdtemp(prefix="xla-lint-scan-")
        corpus_mod.build(root)
    os.chdir(root)
    files = []
    for path in sorted(Path(".").rglob("*.py")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if not needs_parse(data):
            files.append((str(path), data))
    size = sum(len(d) for _, d in files)
    print(f"{len(files)} files the prefilter rules out, {size / 1e6:.1f} MB")
    scans = {"this checkout": modules.import_facts}
    if args.against:
        spec = importlib.util.spec_from_file_location(
            "xla_lint.program._modules_against",
            os.path.join(args.against, "xla_lint", "program", "modules.py"),
        )
        assert spec is not None and spec.loader is not None
        other = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(other)
        scans = {args.against: other.import_facts, **scans}
        differ = [p for p, d in files if other.import_facts(p, d) != modules.import_facts(p, d)]
        print(f"files whose facts differ: {len(differ)}", *differ[:5])
    times: dict[str, list[float]] = {k: [] for k in scans}
    for _ in range(args.repeat):
        for name, fn in scans.items():  # interleaved: the same load for both
            start = time.perf_counter()
            for path, data in files:
                fn(path, data)
            times[name].append(time.perf_counter() - start)
    for name, values in times.items():
        m = statistics.median(values)
        print(
            f"{name:24s} {m:7.3f} s  {m / max(1, len(files)) * 1e6:7.1f} us/file  {size / m / 1e6:6.1f} MB/s"
        )
    if args.against:
        before, after = (statistics.median(v) for v in times.values())
        print(f"ratio: {before / after:.1f}x faster than {args.against}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
