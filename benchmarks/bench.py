"""Time xla-lint against Ruff, Fixit and TorchFix on one corpus, in one run.

Usage::

    python benchmarks/bench.py                       # synthesise a 2,400-file corpus in a temp folder
    python benchmarks/bench.py --corpus PATH         # time on your own tree instead
    python benchmarks/bench.py --peer-subset 240 --results benchmarks/RESULTS.md

Measured, each as a separate process tree (wall time; peak RSS of the largest process
in the tree, from ``resource.getrusage(RUSAGE_CHILDREN)`` of a wrapper process):

- xla-lint cold (empty cache folder) and warm (the same cache, nothing changed);
- Ruff's default rules (``ruff check --isolated``), without and with its cache;
- Fixit (its built-in rules) and TorchFix (its default rules): both parse every file
  with LibCST and are slow, so by default they run on a stratified subset
  (``--peer-subset`` files, the corpus's share of torch_xla files kept) and their
  whole-corpus time is *extrapolated* from files per second; the table says so;
- one small torch_xla file linted as a pre-commit hook runs it after an edit (a fresh process,
  start-up included; median of 5);
- where xla-lint's time goes, stage by stage (read, prefilter, import scan, cache, parse, facts,
  rules, fixes, program model, reached modules, join, report), cold and warm, from the pipeline's
  own timers (``XLA_LINT_TIMINGS``, :mod:`xla_lint.timings`): seconds summed over files and
  worker processes. ``--stages`` prints only that breakdown (one cold and one warm run).

Peers are installed on demand into ``--venv`` (default ``/work/benchvenv`` or
``$XLA_LINT_BENCH_VENV``) with ``pip install ruff fixit torchfix``; a peer that cannot be
installed is skipped with a message. xla-lint itself is the one on ``PATH`` (or ``--xla-lint``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus as corpus_mod

WRAPPER = r"""
import json, resource, subprocess, sys, time
cmd, cwd = json.loads(sys.argv[1]), sys.argv[2]
t = time.perf_counter()
proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "rss_mb": ru.ru_maxrss / 1024, "cpu": ru.ru_utime + ru.ru_stime,
                  "rc": proc.returncode, "out": proc.stdout[-400:].decode("utf-8", "replace"),
                  "err": proc.stderr[-400:].decode("utf-8", "replace")}))
"""


# Python tools are timed as installed ones run: with their bytecode cached (pip compiles
# it at install; an editable install writes it on first import). Some CI images set
# PYTHONDONTWRITEBYTECODE, which makes every start-up compile the package again.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def measure(cmd: list[str], cwd: str | Path) -> dict:
    """Run ``cmd`` in a fresh wrapper process; wall seconds, peak RSS (MB), CPU seconds, exit code."""
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER, json.dumps(cmd), str(cwd)],
        capture_output=True,
        text=True,
        check=True,
        env=ENV,
    )
    return json.loads(out.stdout)


def stage_times(cmd: list[str], cwd: str | Path) -> dict[str, float]:
    """Run ``cmd`` (an xla-lint command) with ``XLA_LINT_TIMINGS=1``: stage -> seconds, as the
    run printed them to standard error (``wall``: the process's own, start-up aside)."""
    proc = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env={**ENV, "XLA_LINT_TIMINGS": "1"}
    )
    out: dict[str, float] = {}
    lines = proc.stderr.splitlines()
    if "xla-lint timings" not in proc.stderr:
        print(f"no timings from {' '.join(cmd)}: {proc.stderr[-300:]}", file=sys.stderr)
        return out
    start = next(i for i, line in enumerate(lines) if line.startswith("xla-lint timings"))
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        parts = line.split()
        try:
            numbers = [float(p) for p in parts if p.replace(".", "", 1).isdigit()]
        except ValueError:
            continue
        if numbers:
            out[" ".join(p for p in parts if not p.replace(".", "", 1).isdigit())] = numbers[0]
    return out


def stage_table(runs: dict[str, dict[str, float]]) -> list[str]:
    """A Markdown table of :func:`stage_times` results, one column per run."""
    names = list(runs)
    stages = list(dict.fromkeys(s for r in runs.values() for s in r))
    stages = [s for s in stages if s != "wall"] + (
        ["wall"] if any("wall" in r for r in runs.values()) else []
    )
    table = [
        "| stage | " + " | ".join(f"{n} (s)" for n in names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for stage in stages:
        cells = [f"{runs[n][stage]:.3f}" if stage in runs[n] else "–" for n in names]
        table.append(f"| {stage} | " + " | ".join(cells) + " |")
    return table


def python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if ".xla_lint_cache" not in p.parts)


def ensure_peers(venv: Path, install: bool) -> dict[str, str | None]:
    """Paths of the ruff, fixit and torchfix executables (None: unavailable)."""
    tools = {name: venv / "bin" / name for name in ("ruff", "fixit", "torchfix")}
    missing = [n for n, p in tools.items() if not p.exists()]
    if missing and install:
        print(f"installing {' '.join(missing)} into {venv} ...", file=sys.stderr)
        try:
            if not (venv / "bin" / "python").exists():
                subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run(
                [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *missing],
                check=True,
                capture_output=True,
            )
        except (subprocess.CalledProcessError, OSError) as exc:
            print(f"could not install peers ({exc}); they are skipped", file=sys.stderr)
    found = {}
    for name, path in tools.items():
        found[name] = (
            str(path) if path.exists() else (shutil.which(name) if name == "ruff" else None)
        )
        if found[name] is None:
            print(f"{name}: not available, skipped", file=sys.stderr)
    return found


def subset(root: Path, files: list[Path], count: int, dest: Path) -> tuple[int, int]:
    """Copy a stratified subset (same share of torch_xla files) of ``files`` under ``dest``."""
    xla = [f for f in files if b"torch_xla" in f.read_bytes()]
    plain = [f for f in files if f not in set(xla)]
    want_xla = max(1, round(count * len(xla) / max(1, len(files))))
    chosen = xla[:: max(1, len(xla) // want_xla)][:want_xla]
    chosen += plain[:: max(1, len(plain) // max(1, count - len(chosen)))][: count - len(chosen)]
    for f in chosen:
        target = dest / f.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
        for init in f.relative_to(root).parents:  # keep packages packages
            src = root / init / "__init__.py"
            if src.exists() and not (dest / init / "__init__.py").exists():
                shutil.copy2(src, dest / init / "__init__.py")
    n = len(python_files(dest))
    return n, sum(1 for f in python_files(dest) if b"torch_xla" in f.read_bytes())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, help="tree to lint (default: synthesise one)")
    ap.add_argument("--files", type=int, default=2400, help="size of the synthesised corpus")
    ap.add_argument(
        "--peer-subset",
        type=int,
        default=240,
        help="files Fixit and TorchFix run on (0: the whole corpus)",
    )
    ap.add_argument(
        "--fixit-subset",
        type=int,
        default=None,
        help="files Fixit runs on (default: --peer-subset; Fixit is ~100x slower than TorchFix)",
    )
    ap.add_argument(
        "--venv", type=Path, default=Path(os.environ.get("XLA_LINT_BENCH_VENV", "/work/benchvenv"))
    )
    ap.add_argument("--no-install", action="store_true", help="do not pip-install missing peers")
    ap.add_argument("--xla-lint", default=shutil.which("xla-lint") or "xla-lint")
    ap.add_argument(
        "--jobs", type=int, default=None, help="--jobs for xla-lint (default: its own default)"
    )
    ap.add_argument("--results", type=Path, help="write the Markdown table to this file")
    ap.add_argument(
        "--stages",
        action="store_true",
        help="only the per-stage breakdown of xla-lint (cold, then warm), no peers",
    )
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="xla-lint-bench-"))
    try:
        return _run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(args, work: Path) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if args.corpus:
        root = args.corpus.resolve()
        desc = f"`{root}`"
    else:
        root = work / "corpus"
        corpus_mod.build(root, files=args.files)
        desc = "synthetic monorepo (`benchmarks/corpus.py`)"
    files = python_files(root)
    n_xla = sum(1 for f in files if b"torch_xla" in f.read_bytes())
    lines = sum(f.read_bytes().count(b"\n") for f in files)
    print(
        f"corpus: {len(files)} files, {n_xla} using torch_xla, {lines} lines; {cores} cores",
        file=sys.stderr,
    )

    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    cache = work / "xla-cache"
    xla = [args.xla_lint, "--isolated", "--exit-zero", "--cache-dir", str(cache), *jobs, "."]
    if args.stages:
        staged = {"cold": stage_times(xla, root), "warm": stage_times(xla, root)}
        print(
            "\n".join(
                ["", "Where xla-lint's time goes (XLA_LINT_TIMINGS):", "", *stage_table(staged)]
            )
        )
        return 0
    peers = ensure_peers(args.venv, not args.no_install)
    rows: list[tuple[str, int, dict, str]] = []  # label, files, measurement, note

    warmup = work / "warmup"  # one parse first: writes the bytecode of an editable install
    warmup.mkdir()
    (warmup / "t.py").write_text("import torch_xla\nprint(1)\n")
    measure([args.xla_lint, "--isolated", "--exit-zero", "--no-cache", "-j", "1", "t.py"], warmup)
    rows.append(("xla-lint cold (empty cache)", len(files), measure(xla, root), ""))
    rows.append(("xla-lint warm (cache, nothing changed)", len(files), measure(xla, root), ""))
    rows.append(
        (
            "xla-lint --no-cache",
            len(files),
            measure([args.xla_lint, "--isolated", "--exit-zero", "--no-cache", *jobs, "."], root),
            "",
        )
    )
    if peers["ruff"]:
        ruff_cache = work / "ruff-cache"
        rows.append(
            (
                "Ruff default rules, --no-cache",
                len(files),
                measure(
                    [peers["ruff"], "check", "--isolated", "--exit-zero", "--no-cache", "."], root
                ),
                "",
            )
        )
        ruff = [
            peers["ruff"],
            "check",
            "--isolated",
            "--exit-zero",
            "--cache-dir",
            str(ruff_cache),
            ".",
        ]
        measure(ruff, root)
        rows.append(("Ruff default rules, warm cache", len(files), measure(ruff, root), ""))

    # Peers on a subset, extrapolated; xla-lint on the same subset for a direct ratio.
    if args.peer_subset and args.peer_subset < len(files):
        sub = work / "subset"
        n_sub, n_sub_xla = subset(root, files, args.peer_subset, sub)
        note = f"subset of {n_sub} files ({n_sub_xla} torch_xla), extrapolated"
    else:
        sub, n_sub, note = root, len(files), ""
    sub_cache = work / "xla-cache-sub"
    rows.append(
        (
            "xla-lint cold, peer subset",
            n_sub,
            measure(
                [
                    args.xla_lint,
                    "--isolated",
                    "--exit-zero",
                    "--cache-dir",
                    str(sub_cache),
                    *jobs,
                    ".",
                ],
                sub,
            ),
            note.replace(", extrapolated", ""),
        )
    )
    if peers["fixit"]:
        fixit_dir, n_fixit, fixit_note = sub, n_sub, note
        if args.fixit_subset and args.fixit_subset < n_sub:
            fixit_dir = work / "fixit-subset"
            n_fixit, n_fixit_xla = subset(root, files, args.fixit_subset, fixit_dir)
            fixit_note = f"subset of {n_fixit} files ({n_fixit_xla} torch_xla), extrapolated"
            rows.append(
                (
                    "xla-lint cold, Fixit subset",
                    n_fixit,
                    measure(
                        [
                            args.xla_lint,
                            "--isolated",
                            "--exit-zero",
                            "--cache-dir",
                            str(work / "xla-cache-fixit"),
                            *jobs,
                            ".",
                        ],
                        fixit_dir,
                    ),
                    fixit_note[: -len(", extrapolated")],
                )
            )
        rows.append(
            (
                "Fixit 2 (built-in rules)",
                n_fixit,
                measure([peers["fixit"], "--quiet", "lint", "."], fixit_dir),
                fixit_note,
            )
        )
    if peers["torchfix"]:
        rows.append(
            ("TorchFix (default rules)", n_sub, measure([peers["torchfix"], "."], sub), note)
        )

    # Where the time goes: a cold run and a warm run of their own, with the stage timers on.
    staged_cache = work / "xla-cache-stages"
    staged_cmd = [
        args.xla_lint,
        "--isolated",
        "--exit-zero",
        "--cache-dir",
        str(staged_cache),
        *jobs,
        ".",
    ]
    staged = {"cold": stage_times(staged_cmd, root), "warm": stage_times(staged_cmd, root)}

    # One small file, as pre-commit runs it: a fresh process per commit, cache present.
    hook_dir = work / "hook"
    hook_dir.mkdir()
    hook = [args.xla_lint, "--exit-zero", "train.py"]
    hooks = []
    for i in range(5):  # a commit changes the file: each run is a cache miss and parses it
        (hook_dir / "train.py").write_text(
            "import torch_xla\nimport torch_xla.core.xla_model as xm\n\n"
            f"print('step', {i})\nxm.mark_step()\n"
        )
        hooks.append(measure(hook, hook_dir))
    hook_row = min(
        hooks, key=lambda m: abs(m["wall"] - statistics.median(h["wall"] for h in hooks))
    )

    cold = rows[0][2]["wall"]
    sub_cold = next(r[2]["wall"] for r in rows if r[0].startswith("xla-lint cold, peer"))
    table = [
        f"Corpus: {desc}: **{len(files)} Python files, {n_xla} of them using torch_xla**, {lines:,} lines. "
        f"Machine: {cores} cores ({platform.machine()}, Python {platform.python_version()}), "
        f"{time.strftime('%Y-%m-%d')}. xla-lint `--jobs` default ({cores}).",
        "",
        "| run | files | wall (s) | files/s | wall ÷ xla-lint cold | peak RSS (MB) | note |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    refs: dict[int, float] = {}  # files -> xla-lint's cold wall on those same files
    for label, n, m, _ in rows:
        if label.startswith("xla-lint cold"):
            refs.setdefault(n, m["wall"])
    for label, n, m, extra in rows:
        fps = n / m["wall"] if m["wall"] else float("inf")
        ref = refs.get(n, sub_cold if n != len(files) else cold)
        full = ""
        if extra.endswith("extrapolated"):
            full = f"; whole corpus ≈ {len(files) / fps:.1f} s"
        status = "" if m["rc"] in (0, 1) else f" (exit {m['rc']})"
        table.append(
            f"| {label} | {n} | {m['wall']:.2f} | {fps:,.0f} | {m['wall'] / ref:.2f} | "
            f"{m['rss_mb']:.0f} | {extra}{full}{status} |"
        )
    table.append(
        f"| pre-commit: one small file, fresh process | 1 | {hook_row['wall']:.2f} | – | – | "
        f"{hook_row['rss_mb']:.0f} | median of 5 edits (cache misses), start-up included |"
    )
    by = {r[0]: (r[1], r[2]) for r in rows}
    notes = ["", "Targets (measured here, never asserted in tests):"]

    def fps(label):
        n, m = by[label]
        return n / m["wall"]

    if "TorchFix (default rules)" in by:
        ratio = fps("xla-lint cold, peer subset") / fps("TorchFix (default rules)")
        notes.append(
            f"- cold throughput vs TorchFix on the same files: {ratio:.0f}x (target >= 20x)"
        )
    if "Fixit 2 (built-in rules)" in by:
        n_fixit = by["Fixit 2 (built-in rules)"][0]
        mine = next(
            m for label, n, m, _ in rows if label.startswith("xla-lint cold") and n == n_fixit
        )
        notes.append(
            f"- cold throughput vs Fixit on the same files: "
            f"{(n_fixit / mine['wall']) / fps('Fixit 2 (built-in rules)'):.0f}x"
        )
    if "Ruff default rules, --no-cache" in by:
        ruff_wall = by["Ruff default rules, --no-cache"][1]["wall"]
        notes.append(f"- cold wall vs Ruff (no cache): {cold / ruff_wall:.1f}x (target <= 15x)")
        notes.append(
            f"- warm wall vs Ruff (no cache): {by['xla-lint warm (cache, nothing changed)'][1]['wall'] / ruff_wall:.1f}x"
            f" (target <= 2x); vs Ruff warm: "
            f"{by['xla-lint warm (cache, nothing changed)'][1]['wall'] / by['Ruff default rules, warm cache'][1]['wall']:.1f}x"
        )
    notes.append(f"- pre-commit single file: {hook_row['wall']:.2f} s (target < 0.5 s)")
    notes.append(
        f"- peak RSS of xla-lint: {max(m['rss_mb'] for label, _, m, _ in rows if label.startswith('xla-lint')):.0f} MB"
        " (target < 500 MB)"
    )
    notes += [
        "",
        "Where xla-lint's time goes, by its own timers (`XLA_LINT_TIMINGS=1`; seconds summed over",
        "files and worker processes, so a stage can exceed the wall time):",
        "",
        *stage_table(staged),
    ]
    text = "\n".join(table + notes) + "\n"
    print(text)
    for label, _, m, _ in rows:
        if m["rc"] not in (0, 1):
            print(f"{label}: exit {m['rc']}: {m['err'][-300:]}", file=sys.stderr)
    if args.results:
        args.results.write_text(
            "# Benchmark results\n\nProduced by `python benchmarks/bench.py`.\n\n" + text
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
