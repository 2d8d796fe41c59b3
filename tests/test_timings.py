"""The stage timings of ``XLA_LINT_TIMINGS``: every stage a run goes through is counted, the worker
processes' included, and the report names them in pipeline order."""

from __future__ import annotations

import io
import subprocess
import sys

from helpers import write_tree

from xla_lint import timings

ENTRY = "import torch_xla.core.xla_model as xm\nimport helper\nprint(xm.xla_device())\n"


def test_a_run_with_timings_on_reports_each_stage_it_ran(tmp_path):
    write_tree(tmp_path, {"train.py": ENTRY, "helper.py": "import os\nX = 1\n"})
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "--isolated", "--no-cache", "--exit-zero", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, timings.ENV: "1"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.split("xla-lint timings", 1)[1].splitlines()[1:]
    calls = {" ".join(line.split()[:-2]): int(line.split()[-1]) for line in lines[:-1]}
    # Two files read and prefiltered, one import scan (helper.py), one parse (train.py).
    assert calls["read"] == 2 and calls["prefilter"] == 2
    assert calls["import scan"] == 1 and calls["parse"] == 1 and calls["rules"] == 1
    assert {"program model", "join", "report"} <= set(calls)
    assert lines[-1].split()[0] == "wall"
    order = [s for s in timings.STAGES if s in calls]
    assert list(calls) == order


def test_workers_totals_are_taken_and_merged(monkeypatch):
    monkeypatch.setattr(timings, "_seconds", {})
    monkeypatch.setattr(timings, "_calls", {})
    timings.add("parse", 0.5)
    timings.add("parse", 0.25)
    sent = timings.take()
    assert sent == {"parse": (0.75, 2)} and timings.take() == {}
    timings.merge(sent)
    timings.merge({"rules": (1.0, 3)})
    out = io.StringIO()
    timings.report(out)
    rows = out.getvalue().splitlines()
    assert rows[1].split() == ["parse", "0.750", "2"]
    assert rows[2].split() == ["rules", "1.000", "3"]


def test_timed_counts_nothing_when_timings_are_off(monkeypatch):
    monkeypatch.setattr(timings, "ENABLED", False)
    monkeypatch.setattr(timings, "_seconds", {})
    monkeypatch.setattr(timings, "_calls", {})
    with timings.timed("parse"):
        pass
    assert timings.take() == {}
    monkeypatch.setattr(timings, "ENABLED", True)
    with timings.timed("parse"):
        pass
    assert timings.take()["parse"][1] == 1


def test_cpu_timings_count_cpu_seconds_not_waits(tmp_path):
    """``XLA_LINT_TIMINGS=cpu``: a stage that sleeps costs (almost) nothing, one that computes
    costs its work, and the last line says ``cpu``."""
    script = (
        "import io, time\n"
        "from xla_lint import timings\n"
        "assert timings.CPU\n"
        "with timings.timed('parse'):\n"
        "    time.sleep(0.3)\n"
        "with timings.timed('rules'):\n"
        "    end = time.process_time() + 0.2\n"
        "    while time.process_time() < end:\n"
        "        pass\n"
        "out = io.StringIO()\n"
        "timings.report(out)\n"
        "print(out.getvalue())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**__import__("os").environ, timings.ENV: "cpu"},
    )
    assert proc.returncode == 0, proc.stderr
    rows = {r.split()[0]: float(r.split()[1]) for r in proc.stdout.splitlines()[1:] if r.strip()}
    assert rows["parse"] < 0.1
    assert rows["rules"] >= 0.19
    assert "cpu" in rows and "wall" not in rows
