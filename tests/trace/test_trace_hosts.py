"""``xla-lint trace --simulate-hosts N``: N copies of the script, each a simulated host of a pod
(``xr.process_index()`` its index, ``xr.process_count()`` N), compared step by step.

The runs are real (``python -m xla_lint trace --json --simulate-hosts 2 ...`` on CPU with one
device, 3 steps; each starts two torch_xla processes, ~15-20 s); the comparison of hosts is
also tested on hand-made events.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from xla_lint.trace.events import EVENT_SCHEMA, REPORT_SCHEMA, Trace
from xla_lint.trace.hosts import divergence, failures, host_events_path
from xla_lint.trace.runner import RunResult, Target

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "trace" / "host_divergence.py"
RUN_TIMEOUT = 300
#: --timeout of the run where host 1 hangs: time for host 0 to import torch_xla and run its steps.
HANG_TIMEOUT = 60


def line_of(path: Path, text: str) -> int:
    """The 1-based line of ``path`` that contains ``text`` (exactly one)."""
    found = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(found) == 1, (path, text, found)
    return found[0]


def _trace(
    script_args: list[str], events: Path, options: tuple[str, ...] = ()
) -> tuple[int, dict, dict[int, list[dict]], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "trace", "--json", "--events", str(events)]
        + ["--simulate-hosts", "2", "--cpu-devices", "1", "--steps", "3", "--no-static"]
        + [*options, "--", "python", str(EXAMPLE), *script_args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    report = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    hosts = {}
    for host in (0, 1):
        path = Path(host_events_path(str(events), host))
        hosts[host] = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return proc.returncode, report, hosts, proc.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Future]:
    pytest.importorskip("torch_xla")
    base = tmp_path_factory.mktemp("hosts")
    scenarios = {  # name -> (script arguments, trace options); the long one first
        "hangs": (["--same", "--hang-at", "2"], ("--timeout", str(HANG_TIMEOUT))),
        "diverge": ([], ()),
        "seeds": (["--same", "--seed-per-host"], ()),
        "same": (["--same"], ()),
        "raises": (["--same", "--fail-at", "2"], ()),
    }
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {
        name: pool.submit(_trace, args, base / f"{name}.jsonl", options)
        for name, (args, options) in scenarios.items()
    }
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


def get(runs, name: str) -> tuple[int, dict, dict[int, list[dict]], str]:
    code, report, hosts, stderr = runs[name].result(timeout=RUN_TIMEOUT * 2)
    assert report, stderr
    jsonschema.validate(report, REPORT_SCHEMA)
    for events in hosts.values():
        for event in events:
            jsonschema.validate(event, EVENT_SCHEMA)
    return code, report, hosts, stderr


@pytest.mark.runtime
def test_a_host_running_another_graph_is_reported_at_its_step_and_line(runs):
    code, report, hosts, stderr = get(runs, "diverge")
    assert code == 1, stderr
    [finding] = report["findings"]
    assert finding["name"] == "host-divergence" and finding["code"] is None
    assert finding["related"] == []
    assert finding["steps"] == [1] and finding["title"] == "hosts diverge at step 1"
    assert finding["message"].startswith("hosts diverge at step 1: host 1 ran graph ")
    sync = line_of(EXAMPLE, "torch_xla.sync()")
    assert finding["location"]["line"] == sync
    assert f"host_divergence.py:{sync}), host 0 ran graph " in finding["message"]
    rows = report["hosts"]
    assert [(r["host"], r["status"], r["steps_traced"]) for r in rows] == [
        (0, "stopped", 3),
        (1, "stopped", 3),
    ]
    assert rows[0]["graphs"]["2"] != rows[1]["graphs"]["2"]
    assert report["device"]["hosts"] == 2


@pytest.mark.runtime
def test_hosts_running_the_same_graphs_agree(runs):
    code, report, hosts, stderr = get(runs, "same")
    assert code == 0, stderr
    assert report["findings"] == [] and report["status"] == "stopped"
    rows = report["hosts"]
    assert [r["status"] for r in rows] == ["stopped", "stopped"]
    assert rows[0]["graphs"] == rows[1]["graphs"] and len(rows[0]["graphs"]) == 3
    assert not [e for e in hosts[0] if e["event"] == "seed"]


@pytest.mark.runtime
def test_hosts_diverging_after_per_host_seeds_is_xla027(runs):
    code, report, hosts, stderr = get(runs, "seeds")
    assert code == 1, stderr
    [finding] = report["findings"]
    assert finding["code"] == "XLA027" and finding["steps"] == [1]
    assert finding["message"].endswith("host 1 seeded torch with [1], host 0 with [0]")
    assert [r["line"] for r in finding["related"]] == [
        line_of(EXAMPLE, "torch.manual_seed(xr.process_index())")
    ]
    assert [e["value"] for e in hosts[1] if e["event"] == "seed"] == [1]


@pytest.mark.runtime
def test_a_host_that_raises_is_named_and_the_run_ends(runs):
    code, report, hosts, stderr = get(runs, "raises")
    assert code == 1, stderr
    [finding] = report["findings"]
    assert finding["name"] == "host-failed" and finding["title"] == "host 1 error"
    assert finding["message"].startswith("host 1 raised RuntimeError: host 1 lost its data")
    assert finding["location"]["line"] == line_of(EXAMPLE, "raise RuntimeError")
    assert [(r["host"], r["status"]) for r in report["hosts"]] == [(0, "stopped"), (1, "error")]
    assert [e["reason"] for e in hosts[0] if e["event"] == "stop"] == ["steps"]


@pytest.mark.runtime
def test_a_host_hung_in_its_step_is_named_at_its_line(runs):
    """A host sleeping in its step was reported "host 1 timeout  (no user frame)": the line of
    its stack (faulthandler on SIGUSR1, as for one process) was not used."""
    code, report, hosts, stderr = get(runs, "hangs")
    assert code == 1, stderr
    finding = next(f for f in report["findings"] if f["title"] == "host 1 timeout")
    sleep = line_of(EXAMPLE, "time.sleep(3600)")
    assert finding["location"]["line"] == sleep and finding["location"]["path"] == str(EXAMPLE)
    assert finding["message"] == (
        f"host 1 was ended by --timeout while at examples/trace/host_divergence.py:{sleep} "
        "after 1 step(s)"
    )
    timeout = next(e for e in hosts[1] if e["event"] == "timeout")
    assert timeout["location"]["line"] == sleep


# --- the comparison, on hand-made events ----------------------------------------------------------


def _host(graphs: dict[int, list[str]], steps: int, line: int = 9) -> Trace:
    trace = Trace()
    for step, hashes in graphs.items():
        for h in hashes:
            trace.add(
                {
                    "event": "graph",
                    "step": step,
                    "kind": "execution",
                    "graph_hash": h,
                    "location": {"path": "/x/train.py", "line": line},
                }
            )
    for step in range(1, steps + 1):
        trace.add(
            {
                "event": "step",
                "step": step,
                "duration_s": 0.1,
                "compiles": 0,
                "compile_s": 0.0,
                "executions": 1,
                "transfers": 0,
            }
        )
    trace.add({"event": "stop", "reason": "steps", "steps": steps})
    return trace


def test_divergence_names_the_first_differing_step_and_graph():
    a = _host({1: ["aa", "bb"], 2: ["aa"], 3: ["aa"]}, 3)
    b = _host({1: ["aa", "bb"], 2: ["aa", "cc"], 3: ["dd"]}, 3, line=12)
    finding = divergence({0: a, 1: b})
    assert finding is not None and finding["steps"] == [2]
    assert finding["message"].startswith(
        "hosts diverge at step 2: host 1 ran graph cc (triggered at /x/train.py:12), "
        "host 0 ran no graph;"
    )
    assert divergence({0: a, 1: a}) is None


def test_divergence_only_compares_steps_every_host_completed():
    a = _host({1: ["aa"], 2: ["aa"]}, 2)
    b = _host({1: ["aa"], 2: ["zz"]}, 1)
    assert divergence({0: a, 1: b}) is None


def test_a_host_without_a_boundary_is_named():
    ok = _host({1: ["aa"]}, 1)
    never = Trace()
    never.add({"event": "stop", "reason": "no-boundary", "steps": 0})
    [finding] = failures({0: ok, 1: never}, {})
    assert finding["message"] == "host 1 never reached a step boundary after 0 step(s)"


def test_a_host_ended_by_the_timeout_is_named_at_the_line_of_its_stack():
    ok = _host({1: ["aa"]}, 1)
    hung = Trace()
    hung.add({"event": "timeout", "seconds": 60.0, "location": {"path": "/x/t.py", "line": 7}})
    results = {1: RunResult(Target("path", "/x/t.py"), "e", "w", -15, True, False, 60.0, {})}
    [finding] = failures({0: ok, 1: hung}, results)
    assert finding["location"] == {"path": "/x/t.py", "line": 7}
    assert finding["message"] == "host 1 was ended by --timeout while at /x/t.py:7 after 0 step(s)"


def test_host_events_path():
    assert host_events_path("/t/events.jsonl", 1) == "/t/events.host1.jsonl"
    assert host_events_path("/t/ev", 0) == "/t/ev.host0.jsonl"


PHASED = """\
import torch_xla

torch_xla.sync()
for x in loader:
    loss = model(x).sum()
    loss.backward()
    optimizer.step()
    torch_xla.sync()
"""


def _phased_host(path: str, graph_at_row3: str) -> Trace:
    """Rows of PHASED as the hook writes them: a setup sync (row 1), then 3 training steps; the
    host runs ``graph_at_row3`` at its second training step."""
    trace = Trace()
    for row, line in enumerate((3, 8, 8, 8), 1):
        trains = line == 8
        trace.add(
            {
                "event": "graph",
                "step": row,
                "kind": "execution",
                "graph_hash": graph_at_row3 if row == 3 else f"g{row}",
                "location": {"path": path, "line": line},
            }
        )
        trace.add(
            {
                "event": "step",
                "step": row,
                "duration_s": 0.1,
                "compiles": 0,
                "compile_s": 0.0,
                "executions": 1,
                "transfers": 0,
                "boundary": {"path": path, "line": line, "function": "<module>"},
                "boundary_frames": [[path, line]],
                "optimizer_frames": [[path, 7]] if trains else [],
                "counted": True,
                "trains": trains,
            }
        )
    return trace


def test_divergence_and_the_hosts_table_name_rows_by_phase(tmp_path):
    """The hook's third row is the second training step (the first row is a setup sync): the
    finding and the table count training steps, as the rest of the report does."""
    from xla_lint.trace.hosts import host_rows
    from xla_lint.trace.phases import PhaseMap

    path = tmp_path / "phased.py"
    path.write_text(PHASED)
    phases = PhaseMap.of_files([str(path)])
    hosts = {0: _phased_host(str(path), "aa"), 1: _phased_host(str(path), "bb")}
    finding = divergence(hosts, phases)
    assert finding is not None and finding["title"] == "hosts diverge at step 2"
    assert finding["steps"] == [2]
    [row, _] = host_rows(hosts, {}, phases)
    assert row["graphs"] == {"setup": ["g1"], "1": ["g2"], "2": ["aa"], "3": ["g4"]}
    assert row["steps_traced"] == 3
