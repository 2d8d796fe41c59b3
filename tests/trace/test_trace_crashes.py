"""``xla-lint trace`` when a rank's process or a simulated host dies of a fatal signal: the
process's faulthandler dump (``fatal.PID.txt``, written by the hook's
``_dump_on_fatal_signal``) is read into the rank's ``crash`` event, and the report's headline
names the rank (or host), its pid, the signal and the user's line, with the stack.

Before, a rank killed by SIGSEGV was "crashed ... ended without a word" and the run was the
launcher's ``BrokenProcessPool`` error; a host's crash was only a finding under host 0's
"stopped" headline. The hand-made dumps are shaped like the real one (CPython 3.11's
faulthandler, two ranks as threads of one ``torch_xla.launch`` worker); the two runtime runs
are real (CPU, 2 devices or 2 hosts of 1 device, a few steps, run together: ~20-40 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from tracerun import ROOT, RUN_TIMEOUT, line_of, trace

from xla_lint.trace import hook, runner
from xla_lint.trace.events import EVENT_SCHEMA, REPORT_SCHEMA, read_events
from xla_lint.trace.hosts import host_events_path
from xla_lint.trace.report import build_report, render_text

jsonschema = pytest.importorskip("jsonschema")

U = "/u/train.py"
SITE = sysconfig.get_paths()["purelib"]
# As the report shows it: relative when below the current folder (a virtualenv inside the
# project, as CI's and main's are), like every path of the report.
SHOWN_SITE = (
    os.path.relpath(SITE) if SITE.startswith(os.path.abspath(os.getcwd()) + os.sep) else SITE
)
STD = sysconfig.get_paths()["stdlib"]
HOOK = os.path.abspath(hook.__file__)
PID = 4242


def _rank_thread(rank: int, top: list[str]) -> str:
    """One rank thread's part of the dump: ``top`` (innermost first), then torch_xla's and
    the hook's frames down to the thread's bootstrap, the rank's marker frame among them."""
    return "\n".join(
        [
            *top,
            f'  File "{SITE}/torch_xla/_internal/pjrt.py", line 183 in __call__',
            f'  File "{HOOK}", line 1565 in <lambda>',
            f'  File "<xla-lint rank {rank}>", line 2 in xla_lint_rank_{rank}',
            f'  File "{HOOK}", line 1941 in _marked',
            f'  File "{HOOK}", line 2002 in _run_rank',
            f'  File "{STD}/threading.py", line 1002 in _bootstrap',
        ]
    )


def _dump(current: int | None) -> str:
    """The dump of a worker whose rank 1 was at train.py:14 when the process got SIGSEGV
    (rank 0 inside ``torch_xla.sync`` at line 12): with ``current`` 1 the fault was rank 1's
    own (``ctypes.string_at(0)``); with None the signal went to the process (``os.kill``)
    and the main thread, waiting for the ranks, is the one that got it."""
    ranks = {
        1: _rank_thread(1, [f'  File "{U}", line 14 in _mp_fn']),
        0: _rank_thread(
            0,
            [
                f'  File "{SITE}/torch_xla/torch_xla.py", line 87 in sync',
                f'  File "{HOOK}", line 1306 in wrapper',
                f'  File "{U}", line 12 in _mp_fn',
            ],
        ),
    }
    main = f'  File "{STD}/threading.py", line 327 in wait\n  File "<string>", line 1 in <module>'
    threads = [
        ("Current thread" if current == rank else "Thread") + f" 0x0{rank + 1} "
        f"(most recent call first):\n{text}"
        for rank, text in ranks.items()
    ]
    threads.append(
        ("Thread" if current is not None else "Current thread")
        + f" 0x09 (most recent call first):\n{main}"
    )
    return (
        "Fatal Python error: Segmentation fault\n\n"
        + "\n\n".join(threads)
        + "\n\nExtension modules: torch._C (total: 1)\n"
    )


def _events(rank: int, steps: int) -> list[dict]:
    start = {"event": "start", "t": 0.0, "schema": 1, "pid": PID, "kind": "path",
             "target": U, "steps_limit": 50, "rank": rank, "launcher": "torch_xla.launch",
             "thread": f"rank{rank}", "shared": True}  # fmt: skip
    out = [start, {"event": "torch_xla", "t": 0.5, "version": "2.9.0"}]
    for n in range(1, steps + 1):
        out.append({"event": "step", "t": float(n), "step": n, "duration_s": 0.1,
                    "compiles": 0, "compile_s": 0.0, "executions": 1, "transfers": 0,
                    "inputs": None, "rank": rank})  # fmt: skip
    return out


def _crashed_run(tmp_path: Path, dump: str | None) -> tuple[dict, dict[int, list[dict]]]:
    """A ``torch_xla.launch`` run whose worker (``PID``, ranks 0 and 1 as threads) died with
    ``dump`` in its ``fatal.PID.txt`` (None: no dump, as after SIGKILL): the runner's
    additions to each rank's file, then the report."""
    events = tmp_path / "events.jsonl"
    launcher = [
        {"event": "start", "t": 0.0, "schema": 1, "pid": 1, "kind": "path", "target": U,
         "steps_limit": 50},
        {"event": "launch", "t": 0.4, "what": "torch_xla.launch", "location": None},
        {"event": "error", "t": 3.0, "type": "BrokenProcessPool", "traceback": "...",
         "message": "A process in the process pool was terminated abruptly"},
        {"event": "child_exit", "t": 3.1, "code": 1},
    ]  # fmt: skip
    events.write_text("".join(json.dumps(e) + "\n" for e in launcher))
    for rank, steps in ((0, 3), (1, 2)):
        path = Path(hook.rank_events_path(str(events), rank))
        path.write_text("".join(json.dumps(e) + "\n" for e in _events(rank, steps)))
    fatal = tmp_path / "fatal.txt"
    if dump is not None:
        Path(hook.worker_file(str(fatal), PID)).write_text(dump)
    env = {hook.FATAL_ENV: str(fatal), hook.STACKS_ENV: str(tmp_path / "stacks.txt")}
    dumps = {
        rank: runner._append_rank_events(path, rank, False, 3.1, env)
        for rank, path in runner.rank_files(str(events)).items()
    }
    ranks = {r: read_events(p) for r, p in runner.rank_files(str(events)).items()}
    for path in runner.rank_files(str(events)).values():
        for line in Path(path).read_text().splitlines():
            jsonschema.validate(json.loads(line), EVENT_SCHEMA)
    report = build_report(
        read_events(str(events)),
        command=["python", U],
        target=U,
        steps_requested=50,
        wall_s=3.1,
        events_file=str(events),
        device={"pjrt_device": "CPU", "cpu_devices": 2},
        ranks=ranks,
        rank_files=runner.rank_files(str(events)),
    )
    jsonschema.validate(report, REPORT_SCHEMA)
    return report, dumps


def test_a_rank_whose_own_thread_faulted_is_the_headline_with_its_stack(tmp_path):
    report, dumps = _crashed_run(tmp_path, _dump(current=1))
    expected = hook.worker_file(str(tmp_path / "fatal.txt"), PID)
    assert dumps == {0: expected, 1: expected}  # the runner prints the dump once
    assert (report["status"], report["exit_code"]) == ("crashed", 1)
    crash = report["crash"]
    assert (crash["rank"], crash["pid"], crash["signal"], crash["name"]) == (1, PID, 11, "SIGSEGV")
    assert crash["location"] == {"path": U, "line": 14, "function": "_mp_fn"}
    # the rank's own thread, down to (not into) the hook's frames that called its function
    assert [(f["path"], f["line"]) for f in crash["stack"]] == [
        (U, 14),
        (f"{SHOWN_SITE}/torch_xla/_internal/pjrt.py", 183),
    ]
    ranks = {r["rank"]: r for r in report["ranks"]}
    assert [ranks[r]["status"] for r in (0, 1)] == ["crashed", "crashed"]
    assert ranks[0]["crash"]["location"]["line"] == 12  # rank 0 died with it, in its sync
    text = render_text(report).splitlines()
    assert text[1].startswith(
        f"rank 1 (pid {PID}) died of signal 11 (SIGSEGV) after 2 steps at {U}:14;"
    )
    assert text[2].startswith("crash: Fatal Python error: Segmentation fault;")
    assert text[3] == f"  > {U}:14 in _mp_fn"
    assert f"note: rank 0 died with rank 1: their process (pid {PID}) ran them as threads" in text
    assert not any("without a word" in line for line in text)


def test_a_signal_sent_to_the_process_names_the_rank_that_was_in_its_own_code(tmp_path):
    """``os.kill(os.getpid(), SIGSEGV)`` in rank 1: the main thread gets the signal, rank 1's
    thread is at the user's line, rank 0's inside torch_xla."""
    report, _ = _crashed_run(tmp_path, _dump(current=None))
    assert report["status"] == "crashed"
    assert (report["crash"]["rank"], report["crash"]["location"]["line"]) == (1, 14)
    assert (
        render_text(report)
        .splitlines()[1]
        .startswith(f"rank 1 (pid {PID}) died of signal 11 (SIGSEGV) after 2 steps at {U}:14;")
    )


def test_a_rank_without_a_dump_still_ended_without_a_word(tmp_path):
    report, dumps = _crashed_run(tmp_path, None)
    assert dumps == {0: None, 1: None}
    assert report["status"] == "error" and report["crash"] is None  # the launcher's exception
    assert "rank 0-1 ended without a word (killed, or os._exit)" in report["notes"]


# --- real runs -------------------------------------------------------------------------------

RANK_SEGV = """\
import ctypes

import torch
import torch_xla


def _mp_fn(index):
    w = torch.zeros(3, device=torch_xla.device())
    for i in range(1000):
        w = w + 1
        torch_xla.sync()
        if index == 1 and i == 1:
            ctypes.string_at(0)  # rank 1 faults in its own thread


if __name__ == "__main__":
    torch_xla.launch(_mp_fn, args=())
"""
HOST_SEGV = """\
import ctypes

import torch
import torch_xla
import torch_xla.runtime as xr

w = torch.zeros(3, device=torch_xla.device())
for i in range(3):
    w = w + 1
    torch_xla.sync()
    if xr.process_index() == 1 and i == 1:
        ctypes.string_at(0)  # host 1 dies
"""


def _hosts(script: Path, events: Path) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "trace", "--json", "--events", str(events)]
        + ["--simulate-hosts", "2", "--cpu-devices", "1", "--steps", "3", "--no-static"]
        + ["--", "python", str(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    report = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, report, proc.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Future]:
    pytest.importorskip("torch_xla")
    base = tmp_path_factory.mktemp("crashes")
    (base / "rank_segv.py").write_text(RANK_SEGV)
    (base / "host_segv.py").write_text(HOST_SEGV)
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {
        "rank": pool.submit(
            trace,
            ["--cpu-devices", "2", "--steps", "50", "--no-static"],
            ["python", str(base / "rank_segv.py")],
            base / "rank.jsonl",
        ),
        "host": pool.submit(_hosts, base / "host_segv.py", base / "host.jsonl"),
    }
    yield {**futures, "base": base}  # type: ignore[dict-item]
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.runtime
def test_a_launch_rank_killed_by_sigsegv_is_the_headline_with_its_line(runs):
    run = runs["rank"].result(timeout=RUN_TIMEOUT * 2)
    script = runs["base"] / "rank_segv.py"
    r = run.report
    assert r is not None, run.stderr
    jsonschema.validate(r, REPORT_SCHEMA)
    assert (run.code, r["status"]) == (1, "crashed")
    crash = r["crash"]
    pid = next(x["pid"] for x in r["ranks"] if x["rank"] == 1)
    assert (crash["rank"], crash["pid"], crash["name"]) == (1, pid, "SIGSEGV")
    # A fault is delivered to the thread that made it: rank 1's, whatever rank 0 is doing (an
    # os.kill goes to the process's main thread, and the rank it names was a race on CI).
    kill = line_of(script, "ctypes.string_at(0)")
    assert (crash["location"]["path"], crash["location"]["line"]) == (str(script), kill)
    assert [x["status"] for x in r["ranks"]] == ["crashed", "crashed"]
    crashes = [e for e in run.ranks[1] if e["event"] == "crash"]
    assert len(crashes) == 1 and crashes[0]["pid"] == pid
    text = render_text(r).splitlines()
    assert f"rank 1 (pid {pid}) died of signal 11 (SIGSEGV) after 2 steps at " in text[1]
    assert text[1].split(";")[0].endswith(f"rank_segv.py:{kill}")
    assert "Fatal Python error: Segmentation fault" in run.stderr  # the rank's dump, echoed


@pytest.mark.runtime
def test_a_simulated_host_killed_by_sigsegv_is_the_headline_with_its_line(runs):
    code, report, stderr = runs["host"].result(timeout=RUN_TIMEOUT * 2)
    script = runs["base"] / "host_segv.py"
    assert report, stderr
    jsonschema.validate(report, REPORT_SCHEMA)
    assert (code, report["status"]) == (1, "crashed")
    crash = report["crash"]
    host1 = read_events(host_events_path(str(runs["base"] / "host.jsonl"), 1))
    line = line_of(script, "ctypes.string_at(0)")
    assert (crash["host"], crash["pid"], crash["name"]) == (1, host1.start["pid"], "SIGSEGV")
    assert (crash["location"]["path"], crash["location"]["line"]) == (str(script), line)
    assert [(h["host"], h["status"]) for h in report["hosts"]] == [(0, "stopped"), (1, "crashed")]
    assert any(f["title"] == "host 1 crashed" for f in report["findings"])
    text = render_text(report).splitlines()
    assert text[1].startswith(
        f"host 1 (pid {crash['pid']}) died of signal 11 (SIGSEGV) after 2 steps at "
    )
    assert text[1].split(";")[0].endswith(f"host_segv.py:{line}")
