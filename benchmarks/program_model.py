"""What the program model costs in a cold run: the import scan of unparsed files, building
the model (import graph, programs), and the second pass over modules XLA programs reach, each
as a share of the whole run, measured in one process on one corpus.

Usage::

    python benchmarks/program_model.py                 # the synthetic 2,400-file corpus (benchmarks/corpus.py)
    python benchmarks/program_model.py --corpus PATH   # your own tree

Prints seconds and the ratio of each stage to the whole run (median of ``--repeat`` runs,
single process, no cache). The stages are timed by wrapping the engine's functions, so
nothing else changes.
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
    args = parser.parse_args(argv)

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


if __name__ == "__main__":
    sys.exit(main())
