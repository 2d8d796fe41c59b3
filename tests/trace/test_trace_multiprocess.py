"""``xla-lint trace`` with one process per device: ``torch_xla.launch`` (on CPU one worker
process, one thread per virtual device: torch_xla/_internal/pjrt.py ``run_multiprocess``)
and ``torchrun`` (one process per worker), plus a ``torch.compile``d step function.

The runs are real (``python -m xla_lint trace --json ...`` on CPU, two at a time, started
together at module setup; each takes ~15-30 s). The torch-free parts (rank files, block
attribution, the merged report) are tested on hand-made events at the end.
"""

from __future__ import annotations

import shutil
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from tracerun import ROOT, RUN_TIMEOUT, Run, line_of, trace

from xla_lint.trace import hook
from xla_lint.trace.events import EVENT_SCHEMA, REPORT_SCHEMA, Trace
from xla_lint.trace.report import build_report, render_text
from xla_lint.trace.runner import rank_files

jsonschema = pytest.importorskip("jsonschema")

EXAMPLE = ROOT / "examples" / "trace" / "multiprocess.py"

RANK_RAISES = """\
import torch, torch_xla


def _mp_fn(index):
    w = torch.zeros(3, device=torch_xla.device())
    for i in range(1000):
        w = w + 1
        torch_xla.sync()
        if index == 1 and i == 2:
            raise ValueError("bad batch on rank 1")


if __name__ == "__main__":
    torch_xla.launch(_mp_fn, args=())
"""
RANK_HANGS = """\
import time
import torch, torch_xla
import torch_xla.distributed.xla_multiprocessing as xmp


def _mp_fn(index):
    w = torch.zeros(3, device=torch_xla.device())
    for i in range(1000):
        w = w + 1
        torch_xla.sync()
        if index == 1 and i == 1:
            time.sleep(3600)


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=())
"""
COMPILED_STEP = """\
import torch
import torch.nn as nn
import torch_xla

device = torch_xla.device()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 32).to(device)
y = torch.randn(16, 1).to(device)


@torch.compile(backend="openxla")
def train_step(x, y):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


for step in range(100):
    loss = train_step(x, y)
print("done", loss.item())
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Future]:
    pytest.importorskip("torch_xla")
    base = tmp_path_factory.mktemp("multiprocess")
    for name, text in (
        ("rank_raises.py", RANK_RAISES),
        ("rank_hangs.py", RANK_HANGS),
        ("compiled_step.py", COMPILED_STEP),
    ):
        (base / name).write_text(text)
    two = ["--cpu-devices", "2", "--no-static"]
    scenarios = {  # name -> (trace options, command); long ones first
        "hangs": (
            [*two, "--steps", "3", "--timeout", "45"],
            ["python", str(base / "rank_hangs.py")],
        ),
        "launch": (["--cpu-devices", "2", "--steps", "4"], ["python", str(EXAMPLE)]),
        "torchrun": (
            ["--cpu-devices", "1", "--steps", "3", "--no-static"],
            ["torchrun", "--nproc-per-node", "2", str(EXAMPLE)],
        ),
        "raises": ([*two, "--steps", "50"], ["python", str(base / "rank_raises.py")]),
        "compiled": (["--steps", "5", "--no-static"], ["python", str(base / "compiled_step.py")]),
    }
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {
        name: pool.submit(trace, args, command, base / f"{name}.jsonl")
        for name, (args, command) in scenarios.items()
    }
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


def get(runs, name: str) -> Run:
    run = runs[name].result(timeout=RUN_TIMEOUT * 2)
    if run.report is not None:
        jsonschema.validate(run.report, REPORT_SCHEMA)
    for event in [*run.events, *(e for events in run.ranks.values() for e in events)]:
        jsonschema.validate(event, EVENT_SCHEMA)
    return run


@pytest.mark.runtime
def test_launch_traces_every_rank_in_its_own_file_and_stops_them_together(runs):
    run = get(runs, "launch")
    r = run.report
    assert run.code == 0, run.stderr
    assert r["status"] == "stopped" and r["findings"] == [] and r["static"] == []
    assert r["device"]["launcher"] == "torch_xla.launch" and r["device"]["processes"] == 1
    sync_line = line_of(EXAMPLE, "torch_xla.sync()")
    launch = next(e for e in run.events if e["event"] == "launch")
    assert launch["location"]["line"] == line_of(EXAMPLE, "torch_xla.launch(_mp_fn")
    assert sorted(run.ranks) == [0, 1]
    for rank, events in run.ranks.items():
        start = events[0]
        assert start["event"] == "start" and start["rank"] == rank and start["shared"] is True
        steps = [e for e in events if e["event"] == "step"]
        assert [s["step"] for s in steps] == [1, 2, 3, 4] and all(s["rank"] == rank for s in steps)
        compiles = [e for e in events if e["event"] == "compile"]
        # The ranks are threads sharing one process's compilation cache: the rank that
        # reaches a graph second may find it compiled (seen once in CI), so not every rank
        # need compile; every compile there is must be at the sync line.
        assert {c["location"]["line"] for c in compiles} <= {sync_line}
        assert [e["reason"] for e in events if e["event"] == "stop"] == ["steps"]
    assert [(x["rank"], x["status"], x["steps_traced"]) for x in r["ranks"]] == [
        (0, "stopped", 4),
        (1, "stopped", 4),
    ]
    assert all({c["location"]["line"] for c in x["compiles"]} <= {sync_line} for x in r["ranks"])
    assert {c["location"]["line"] for x in r["ranks"] for c in x["compiles"]} == {sync_line}
    assert len({x["pid"] for x in r["ranks"]}) == 1  # CPU: one worker process, a thread per rank
    assert "rank 0: final loss" not in run.stderr  # stopped in the loop, before the last line
    text = render_text(r)
    assert "one process per device: 2 ranks in 1 process, torch_xla.launch" in text
    assert "\nRanks\n" in text and "Steps (rank 0)" in text
    for rank in (0, 1):
        assert f"\n     {rank}  stopped" in text
    assert text.count(f"multiprocess.py:{sync_line} (step") >= 2


@pytest.mark.runtime
def test_torchrun_workers_are_ranks_with_their_own_processes(runs):
    run = get(runs, "torchrun")
    r = run.report
    assert run.code == 0, run.stderr
    assert r["status"] == "stopped" and r["target"] == str(EXAMPLE)
    assert r["device"]["launcher"] == "torchrun" and r["device"]["processes"] == 2
    assert [(x["rank"], x["status"], x["steps_traced"]) for x in r["ranks"]] == [
        (0, "stopped", 3),
        (1, "stopped", 3),
    ]
    assert len({x["pid"] for x in r["ranks"]}) == 2
    sync_line = line_of(EXAMPLE, "torch_xla.sync()")
    assert all({c["location"]["line"] for c in x["compiles"]} <= {sync_line} for x in r["ranks"])
    assert {c["location"]["line"] for x in r["ranks"] for c in x["compiles"]} == {sync_line}
    assert all(events[0]["launcher"] == "torchrun" for events in run.ranks.values())


@pytest.mark.runtime
def test_a_rank_that_raises_ends_the_run_with_its_traceback_and_the_others_steps(runs):
    run = get(runs, "raises")
    r = run.report
    assert run.code == 1 and r["status"] == "error"
    assert (r["error"]["type"], r["error"]["rank"]) == ("ValueError", 1)
    assert r["error"]["location"]["line"] == 10
    assert "rank 1: Traceback (most recent call last):" in run.stderr
    assert 'raise ValueError("bad batch on rank 1")' in run.stderr
    assert "xla_lint" not in run.stderr  # the script's traceback, not the hook's frames
    ranks = {x["rank"]: x for x in r["ranks"]}
    assert ranks[1]["status"] == "error" and ranks[1]["steps_traced"] == 3
    assert ranks[0]["status"] in ("peer-error", "stopped") and ranks[0]["steps_traced"] >= 1
    assert run.wall_s < 120  # rank 0 stopped at its next boundary: nothing waited for rank 1


@pytest.mark.runtime
def test_a_rank_that_hangs_is_ended_by_the_timeout_with_every_process(runs):
    run = get(runs, "hangs")
    r = run.report
    assert run.code == 1 and r["status"] == "timeout"
    assert r["device"]["launcher"] == "xmp.spawn"
    ranks = {x["rank"]: x for x in r["ranks"]}
    assert ranks[0]["status"] == "stopped" and ranks[0]["steps_traced"] == 3
    assert ranks[1]["status"] == "ended" and ranks[1]["steps_traced"] == 2
    timeout = next(e for e in run.ranks[1] if e["event"] == "timeout")
    assert timeout["location"]["line"] == 12  # time.sleep(3600), in rank 1's thread
    assert run.wall_s < 45 + 30
    if shutil.which("pgrep"):  # no worker left behind
        found = subprocess.run(["pgrep", "-f", "rank_hangs.py"], capture_output=True, text=True)
        assert found.stdout.split() == []


@pytest.mark.runtime
def test_a_compiled_step_function_counts_one_step_per_call_and_breaks_no_graph(runs):
    run = get(runs, "compiled")
    r = run.report
    assert run.code == 0, run.stderr
    assert r["status"] == "stopped" and r["steps_traced"] == 5
    assert r["findings"] == [] and r["host_reads"] == []  # no XLA203, no dynamo-internal reads
    assert [s["compiles"] > 0 for s in r["steps"]] == [True, False, False, False, False]
    assert "Dynamo does not know how to trace" not in run.stderr  # the hooks break no graph


# --- torch-free parts --------------------------------------------------------------------------


def test_rank_files_sit_beside_the_events_file(tmp_path):
    events = tmp_path / "run.jsonl"
    assert hook.rank_events_path(str(events), 3) == str(tmp_path / "run.rank3.jsonl")
    assert hook.rank_events_path("/x/events", 0) == "/x/events.rank0.jsonl"
    for name in ("run.rank0.jsonl", "run.rank12.jsonl", "run.rankx.jsonl", "other.rank1.jsonl"):
        (tmp_path / name).write_text("")
    assert rank_files(str(events)) == {
        0: str(tmp_path / "run.rank0.jsonl"),
        12: str(tmp_path / "run.rank12.jsonl"),
    }


def test_each_worker_gets_its_own_debug_file():
    assert hook.worker_file("/w/pt_xla_debug.txt", 42) == "/w/pt_xla_debug.42.txt"
    assert hook._top_file("/w/pt_xla_debug.42.txt") == "/w/pt_xla_debug.txt"
    assert hook._top_file("/w/pt_xla_debug.txt") == "/w/pt_xla_debug.txt"


def test_debug_blocks_go_to_the_rank_whose_marker_frame_they_hold(monkeypatch, tmp_path):
    def block(rank: int | None) -> str:
        frames = "Compilation Analysis:   _mp_fn (/u/train.py:9)\n"
        if rank is not None:
            frames += (
                f"Compilation Analysis:   {hook.RANK_MARKER}{rank} (<xla-lint rank {rank}>:2)\n"
            )
        return (
            "Compilation Analysis: " + "=" * 80 + "\n"
            "Compilation Analysis: Compilation Cause\n"
            "Compilation Analysis:   user torch_xla.sync\n"
            "Compilation Analysis: Python Frame Triggered Execution: \n" + frames + "Compilation "
            "Analysis: " + "-" * 80 + "\nCompilation Analysis: " + "=" * 80 + "\n"
        )

    debug = tmp_path / "pt_xla_debug.txt"
    debug.write_text(block(1) + block(0) + block(None) + block(7))

    class T:
        def __init__(self, rank: int) -> None:
            self.rank = rank

    monkeypatch.setattr(hook, "_THREADS", {1: T(0), 2: T(1)})
    reader = hook.DebugReader(str(debug))
    mine = reader.take(0, True)
    assert [hook.block_rank(b) for b in mine] == [0, None]  # its own, and the unmarked one
    assert [hook.block_rank(b) for b in reader.take(1, True)] == [1]  # rank 7 is not here


U = "/u/train.py"


def _events(rank: int, *, steps: int, error: bool = False, stop: str | None = "steps") -> list:
    location = {"path": U, "line": 9, "function": "_mp_fn"}
    out: list[dict] = [
        {
            "event": "start",
            "t": 0.0,
            "schema": 1,
            "pid": 100,
            "kind": "path",
            "target": U,
            "steps_limit": steps,
            "rank": rank,
            "shared": True,
            "thread": f"t{rank}",
        },
        {
            "event": "compile",
            "t": 0.1,
            "step": 1,
            "cause": "user torch_xla.sync",
            "location": location,
            "frames": [location],
        },  # fmt: skip
    ]
    for n in range(1, steps + 1):
        out.append(
            {
                "event": "step",
                "t": float(n),
                "step": n,
                "duration_s": 0.01,
                "compiles": 1 if n == 1 else 0,
                "compile_s": 0.2 if n == 1 else 0.0,
                "compile_times_s": [0.2] if n == 1 else [],
                "executions": 1,
                "transfers": 0,
                "inputs": None,
                "rank": rank,
            }
        )
    if error:
        out.append(
            {"event": "error", "t": 9.0, "type": "ValueError", "message": "bad",
             "traceback": "Traceback ...", "location": {"path": U, "line": 12, "function": "_mp_fn"}}
        )  # fmt: skip
    elif stop:
        out.append({"event": "stop", "t": 9.0, "reason": stop, "steps": steps})
        out.append({"event": "exit", "t": 9.0, "code": 0, "reason": "stopped"})
    out.append({"event": "end", "t": 9.5, "steps": steps})
    return out


def _trace_of(events: list[dict]) -> Trace:
    trace = Trace()
    for e in events:
        jsonschema.validate(e, EVENT_SCHEMA)
        trace.add(e)
    return trace


def _report(ranks: dict[int, list[dict]]) -> dict:
    main = _trace_of(
        [
            {"event": "start", "t": 0.0, "schema": 1, "pid": 99, "kind": "path", "target": U,
             "steps_limit": 4},
            {"event": "launch", "t": 1.0, "what": "torch_xla.launch",
             "location": {"path": U, "line": 20, "function": "<module>"}},
            {"event": "exit", "t": 10.0, "code": 0, "reason": "stopped"},
        ]
    )  # fmt: skip
    report = build_report(
        main,
        command=["python", U],
        target=U,
        steps_requested=4,
        wall_s=10.0,
        events_file="/tmp/e.jsonl",
        device={"pjrt_device": "CPU", "cpu_devices": 2},
        static=None,
        ranks={rank: _trace_of(events) for rank, events in ranks.items()},
        rank_files={rank: f"/tmp/e.rank{rank}.jsonl" for rank in ranks},
    )
    jsonschema.validate(report, REPORT_SCHEMA)
    return report


def test_the_report_lists_every_rank_and_takes_the_steps_of_rank_0():
    report = _report({0: _events(0, steps=4), 1: _events(1, steps=4)})
    assert report["status"] == "stopped" and report["exit_code"] == 0
    assert report["steps_traced"] == 4 and report["device"]["launcher"] == "torch_xla.launch"
    assert [(r["rank"], r["status"], r["compile_count"]) for r in report["ranks"]] == [
        (0, "stopped", 1),
        (1, "stopped", 1),
    ]
    assert any("ran as threads of one process" in n for n in report["notes"])
    text = render_text(report)
    assert "2 ranks in 1 process, torch_xla.launch" in text
    assert "/u/train.py:9 (step 1)" in text


def test_a_failed_rank_makes_the_run_an_error_and_names_the_rank():
    report = _report(
        {0: _events(0, steps=2, stop="peer-error"), 1: _events(1, steps=3, error=True)}
    )
    assert report["status"] == "error" and report["exit_code"] == 1
    assert (report["error"]["rank"], report["error"]["location"]["line"]) == (1, 12)
    assert [r["status"] for r in report["ranks"]] == ["peer-error", "error"]
    assert "rank 1 failed; rank 0 stopped at its next step boundary" in report["notes"]
    assert "(rank 1)" in render_text(report).splitlines()[2]
    # The ranks were threads of one process: a fresh user's xm.optimizer_step script died in
    # XLA's CPU rendezvous, and the report did not say why or what to run instead.
    assert any("trace one rank with `--cpu-devices 1`" in n for n in report["notes"])


def test_ranks_that_finish_get_no_collective_hint_and_one_rank_is_singular():
    report = _report({0: _events(0, steps=4), 1: _events(1, steps=4)})
    assert not any("--cpu-devices 1" in n for n in report["notes"])
    single = _report({0: _events(0, steps=4)})
    assert "1 rank in 1 process" in render_text(single)


def test_a_finding_on_one_rank_names_that_rank():
    late = {"path": U, "line": 9, "function": "_mp_fn"}
    rank1 = _events(1, steps=4)
    rank1.insert(-3, {"event": "compile", "t": 3.5, "step": 4, "cause": "user torch_xla.sync",
                      "location": late, "frames": [late]})  # fmt: skip
    for e in rank1:
        if e.get("event") == "step" and e["step"] == 4:
            e.update(compiles=1, compile_s=0.3, compile_times_s=[0.3])
    report = _report({0: _events(0, steps=4), 1: rank1})
    assert [(f["code"], f["ranks"], f["steps"]) for f in report["findings"]] == [(None, [1], [4])]
    assert "(rank 1)" in render_text(report)
