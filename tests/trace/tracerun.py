"""Running ``python -m xla_lint trace --json`` for the trace tests, and reading what it left.

Shared by test_trace_runs.py (one process) and test_trace_multiprocess.py (ranks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from xla_lint.trace.runner import rank_files

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 600  # seconds for one traced run, CPU start-up and compiles included


@dataclass
class Run:
    """One finished trace: exit status, report, the events of the run and of each rank
    (``ranks``: rank -> its events), output, and the wall time in seconds."""

    code: int
    report: dict | None
    events: list[dict]
    stdout: str
    stderr: str
    wall_s: float
    ranks: dict[int, list[dict]] = field(default_factory=dict)

    def finding(self, code: str) -> dict:
        """The report's first finding coded ``code``; StopIteration when there is none."""
        assert self.report is not None, self.stderr
        return next(f for f in self.report["findings"] if f["code"] == code)

    def static(self, code: str) -> list[dict]:
        """The report's static diagnostics coded ``code``."""
        assert self.report is not None, self.stderr
        return [d for d in self.report["static"] or [] if d["code"] == code]


def line_of(path: Path, text: str) -> int:
    """The 1-based line of ``path`` that contains ``text`` (exactly one)."""
    found = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(found) == 1, (path, text, found)
    return found[0]


def read_events(path: Path) -> list[dict]:
    """The events of one JSON-lines file; [] when the file was never written."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def trace(args: list[str], command: list[str], events: Path, cwd: Path = ROOT) -> Run:
    """``xla-lint trace --json --events EVENTS ARGS -- COMMAND`` run in ``cwd`` with this
    checkout on PYTHONPATH; raises subprocess.TimeoutExpired after RUN_TIMEOUT seconds."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "trace", "--json", "--events", str(events), *args]
        + ["--", *command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    wall = time.perf_counter() - t0
    report = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else None
    ranks = {rank: read_events(Path(path)) for rank, path in rank_files(str(events)).items()}
    return Run(proc.returncode, report, read_events(events), proc.stdout, proc.stderr, wall, ranks)
