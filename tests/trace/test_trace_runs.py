"""End-to-end runs of ``xla-lint trace`` on CPU: every script of examples/trace, and the bad
inputs (a script that raises, one that swallows the stop, one that hangs, ``-m MODULE``, a
missing module). One process per device is in test_trace_multiprocess.py.

Each scenario is ``python -m xla_lint trace --json --events FILE ... -- python SCRIPT`` in a
subprocess; the tests assert the report (validated against REPORT_SCHEMA), every events
line (validated against EVENT_SCHEMA) and the user lines the findings point at. The
scenarios start together at module setup, two at a time (the machine has 2 cores); each
takes ~5-20 s, most of it importing torch_xla and compiling.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

pytest.importorskip("torch_xla")
jsonschema = pytest.importorskip("jsonschema")

from tracerun import ROOT, RUN_TIMEOUT, Run, line_of, trace  # noqa: E402

from xla_lint.trace.events import EVENT_SCHEMA, REPORT_SCHEMA  # noqa: E402

pytestmark = pytest.mark.runtime

EXAMPLES = ROOT / "examples" / "trace"

RAISES = """\
import torch, torch_xla
w = torch.zeros(3, device=torch_xla.device())
for i in range(10):
    w = w + 1
    torch_xla.sync()
    if i == 2:
        raise ValueError("bad batch at step 3")
"""
CATCHES = """\
import torch, torch_xla
w = torch.zeros(3, device=torch_xla.device())
while True:
    try:
        w = w + 1
        torch_xla.sync()
    except BaseException as exc:
        print("swallowed", type(exc).__name__, flush=True)
"""
HANGS = """\
import time, torch, torch_xla
w = torch.zeros(3, device=torch_xla.device())
for i in range(2):
    w = w + 1
    torch_xla.sync()
time.sleep(3600)
"""
MODULE = """\
import sys
import torch, torch_xla
assert __name__ == "__main__" and sys.argv[1:] == ["--lr", "0.1"], (__name__, sys.argv)
w = torch.zeros(3, device=torch_xla.device())
for i in range(100):
    w = w + 1
    torch_xla.sync()
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Future]:
    base = tmp_path_factory.mktemp("trace")
    scripts = base / "scripts"
    scripts.mkdir()
    for name, text in (
        ("raises.py", RAISES),
        ("catches.py", CATCHES),
        ("hangs.py", HANGS),
    ):
        (scripts / name).write_text(text)
    (scripts / "pkg").mkdir()
    (scripts / "pkg" / "__init__.py").write_text("")
    (scripts / "pkg" / "train.py").write_text(MODULE)
    scenarios = {  # name -> (trace options, command, cwd); long ones first
        "fsdpv2": ([], ["python", str(EXAMPLES / "fsdpv2.py")], ROOT),
        "hangs": (["--timeout", "25", "--no-static"], ["python", str(scripts / "hangs.py")], ROOT),
        "adam": (["--steps", "6"], ["python", str(EXAMPLES / "adam_step325.py")], ROOT),
        "adam_explain": (
            ["--steps", "6", "--explain", "--no-static"],
            ["python", str(EXAMPLES / "adam_step325.py")],
            ROOT,
        ),
        "partial": (["--steps", "9"], ["python", str(EXAMPLES / "partial_batch.py")], ROOT),
        "tuple": (["--steps", "3"], ["python", str(EXAMPLES / "tuple_batch.py")], ROOT),
        "host_read": (["--steps", "4"], [str(EXAMPLES / "host_read.py")], ROOT),
        "no_boundary": (["--steps", "4"], ["python", str(EXAMPLES / "no_boundary.py")], ROOT),
        "raises": (["--no-static"], ["python", str(scripts / "raises.py")], ROOT),
        "catches": (["--steps", "3", "--no-static"], ["python", str(scripts / "catches.py")], ROOT),
        "module": (["--steps", "3"], ["python", "-m", "pkg.train", "--lr", "0.1"], scripts),
        "missing_module": ([], ["python", "-m", "no_such_module_here"], scripts),
    }
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {
        name: pool.submit(trace, args, command, base / f"{name}.jsonl", cwd)
        for name, (args, command, cwd) in scenarios.items()
    }
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


def get(runs, name: str) -> Run:
    run = runs[name].result(timeout=RUN_TIMEOUT * 2)
    if run.report is not None:
        jsonschema.validate(run.report, REPORT_SCHEMA)
    for event in run.events:
        jsonschema.validate(event, EVENT_SCHEMA)
    return run


def test_host_read_every_step_is_xla201_at_the_item_line(runs):
    run = get(runs, "host_read")
    path = EXAMPLES / "host_read.py"
    line = line_of(path, "losses.append(loss.item())")
    assert run.code == 1 and run.report["status"] == "stopped" and run.report["steps_traced"] == 4
    f = run.finding("XLA201")
    # below the folder the trace ran from (ROOT), a JSON path is relative, as in the text report
    assert f["location"] == {
        "path": str(path.relative_to(ROOT)),
        "line": line,
        "function": "<module>",
    }
    assert f["steps"] == [1, 2, 3, 4]
    read = next(r for r in run.report["host_reads"] if r["location"]["line"] == line)
    assert (read["kind"], read["count"], read["forced_execution"]) == (".item()", 4, 4)
    assert [d["status"] for d in run.static("XLA201")] == ["confirmed"]
    compile_lines = {c["location"]["line"] for c in run.report["compiles"]}
    assert compile_lines == {line, line_of(path, "torch_xla.sync()")}


def test_partial_last_batch_recompiles_at_step_7_and_is_xla202(runs):
    run = get(runs, "partial")
    path = EXAMPLES / "partial_batch.py"
    assert run.code == 1 and run.report["steps_traced"] == 9
    late = [c for c in run.report["compiles"] if c["after_warmup"]]
    assert [(c["step"], c["reason"]) for c in late] == [(7, "new-input-shape")]
    assert late[0]["location"]["line"] == line_of(path, "torch_xla.sync()")
    assert run.report["steps"][6]["inputs"][0]["shape"] == [4, 8]
    f = run.finding("XLA202")
    assert f["location"]["line"] == line_of(path, "loader = DataLoader(") and f["steps"] == [7]
    assert [d["status"] for d in run.static("XLA202")] == ["confirmed"]


def test_no_boundary_stops_after_the_steps_and_is_xla203(runs):
    run = get(runs, "no_boundary")
    path = EXAMPLES / "no_boundary.py"
    assert (
        run.code == 1 and run.report["status"] == "no-boundary" and run.report["steps_traced"] == 0
    )
    assert run.report["optimizer_steps"] == 4
    f = run.finding("XLA203")
    assert f["location"]["line"] == line_of(path, "    optimizer.step()")
    assert [d["status"] for d in run.static("XLA203")] == ["confirmed"]
    assert "final loss" not in run.stderr  # stopped in the loop, before the script's last line


def test_adam_compiles_again_at_step_325_and_is_xla204(runs):
    run = get(runs, "adam")
    path = EXAMPLES / "adam_step325.py"
    assert run.code == 1
    late = [c for c in run.report["compiles"] if c["after_warmup"]]
    assert [(c["step"], c["reason"]) for c in late] == [(5, "same-input-shapes")]
    f = run.finding("XLA204")
    assert f["location"]["line"] == line_of(path, "optimizer = torch.optim.Adam(") and f[
        "steps"
    ] == [5]
    assert "optimizer step 325" in f["message"]
    assert [d["status"] for d in run.static("XLA204")] == [
        "confirmed"
    ]  # the preview rule, confirmed


def test_explain_names_the_adam_line_whose_value_became_a_constant(runs):
    run = get(runs, "adam_explain")
    [late] = [c for c in run.report["compiles"] if c["after_warmup"]]
    assert late["step"] == 5 and late["explain"]
    change = late["explain"][0]
    assert (
        change["before"] == "f32[] xla::device_data()"
        and change["after"] == "f32[] prim::Constant()"
    )
    assert change["location"].startswith(
        "_single_tensor_adam@adam.py:"
    )  # denom = (... / bias_correction2_sqrt)
    assert "the IR changed" in run.finding("XLA204")["message"]


def test_tuple_batch_with_one_spec_leaves_the_labels_replicated_xla022(runs):
    run = get(runs, "tuple")
    path = EXAMPLES / "tuple_batch.py"
    assert run.code == 1 and run.report["device"]["spmd"] is True
    f = run.finding("XLA022")
    assert f["location"]["line"] == line_of(
        path, '    input_sharding=xs.ShardingSpec(mesh, ("data", None)),'
    )
    assert [r["line"] for r in f["related"]] == [line_of(path, "loader = pl.MpDeviceLoader(")]
    inputs = run.report["sharding"]["inputs"]
    assert [(i["shape"], i["split"]) for i in inputs] == [([32, 32], [8, 1]), ([32], [])]
    assert [d["status"] for d in run.static("XLA022")] == ["confirmed"]


def test_the_right_fsdpv2_script_has_no_finding(runs):
    run = get(runs, "fsdpv2")
    r = run.report
    assert (
        run.code == 0
        and r["findings"] == []
        and r["status"] == "stopped"
        and r["steps_traced"] == 20
    )
    assert [c["step"] for c in r["compiles"]] == [1, 2] and not any(
        c["after_warmup"] for c in r["compiles"]
    )
    params = r["sharding"]["parameters"]
    assert (
        params["count"] == 4
        and params["sharded"] == 4
        and params["bytes_per_device"] * 8 == params["bytes"]
    )
    assert all(i["split"] == [8, 1] for i in r["sharding"]["inputs"])
    assert r["static"] == []
    loader_line = line_of(EXAMPLES / "fsdpv2.py", "for step, (x, y) in enumerate(loader):")
    assert {c["location"]["line"] for c in r["compiles"]} == {loader_line}
    assert run.wall_s < 120


def test_a_script_that_raises_shows_its_traceback_and_keeps_the_steps(runs):
    run = get(runs, "raises")
    assert run.code == 1 and run.report["status"] == "error" and run.report["steps_traced"] == 3
    assert (
        run.report["error"]["type"] == "ValueError" and run.report["error"]["location"]["line"] == 7
    )
    assert (
        'raise ValueError("bad batch at step 3")' in run.stderr
        and "ValueError: bad batch at step 3" in run.stderr
    )
    assert (
        "runpy" not in run.stderr and "xla_lint" not in run.stderr
    )  # the script's traceback, not ours


def test_a_script_that_swallows_the_stop_still_ends(runs):
    run = get(runs, "catches")
    assert run.code == 0 and run.report["status"] == "stopped" and run.report["steps_traced"] == 3
    assert "swallowed TraceStop" in run.stderr
    assert any(e["event"] == "exit" and e.get("reason") == "forced" for e in run.events)


def test_timeout_kills_the_script_and_keeps_the_partial_report(runs):
    run = get(runs, "hangs")
    assert run.code == 1 and run.report["status"] == "timeout" and run.report["steps_traced"] == 2
    assert run.wall_s < 25 + 30
    timeout = next(e for e in run.events if e["event"] == "timeout")
    assert timeout["location"]["line"] == 6  # time.sleep(3600)
    assert any("--timeout" in n and "hangs.py:6" in n for n in run.report["notes"])


def test_a_module_runs_as_main_with_its_arguments(runs):
    run = get(runs, "module")
    assert run.code == 0, run.stderr
    assert run.report["status"] == "stopped" and run.report["steps_traced"] == 3
    assert run.report["target"].endswith(os.path.join("pkg", "train.py"))
    assert run.report["static"] == []


def test_a_missing_module_is_a_one_line_error(runs):
    run = get(runs, "missing_module")
    assert run.code == 2 and run.report is None
    assert (
        run.stderr.strip().splitlines()[-1]
        == "xla-lint: error: no module named 'no_such_module_here'"
    )


def test_text_report_names_the_finding_and_its_line(tmp_path):
    path = EXAMPLES / "no_boundary.py"
    events = tmp_path / "events.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "xla_lint",
            "trace",
            "--steps",
            "2",
            "--no-static",
            "--events",
            str(events),
            "--",
            "python",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        cwd=ROOT,
    )
    assert proc.returncode == 1, proc.stderr
    out = textwrap.dedent(proc.stdout)
    assert "stopped after 2 optimizer steps: no step boundary was reached" in out
    assert f"events: {events}" in out
    line = line_of(path, "    optimizer.step()")
    assert (
        f"XLA203 missing-step-boundary: no step boundary  examples/trace/no_boundary.py:{line}"
        in out
    )


CRASHES = """\
import ctypes, os
import torch, torch_xla


def fail():
    {crash}


w = torch.zeros(3, device=torch_xla.device())
for i in range(10):
    w = w + 1
    torch_xla.sync()
    if i == 1:
        fail()
"""


@pytest.mark.parametrize(
    "crash, number, name, fatal",
    [
        ("ctypes.string_at(0)", 11, "SIGSEGV", "Segmentation fault"),
        ("os.abort()", 6, "SIGABRT", "Aborted"),
    ],
)
def test_a_script_that_dies_of_a_signal_is_named_with_its_stack(
    tmp_path, crash, number, name, fatal
):
    """A segfault was "the script died after 2 steps without a word (killed, or os._exit)":
    now the signal, and the Python stack faulthandler wrote at the crash, at the user's line."""
    from xla_lint.trace.report import render_text

    script = tmp_path / "crash.py"
    script.write_text(CRASHES.format(crash=crash))
    run = trace(["--no-static"], ["python", str(script)], tmp_path / "events.jsonl")
    for event in run.events:
        jsonschema.validate(event, EVENT_SCHEMA)
    jsonschema.validate(run.report, REPORT_SCHEMA)
    assert run.code == 1 and run.report["status"] == "crashed", run.stderr
    assert run.report["steps_traced"] == 2
    report = run.report["crash"]
    assert (report["signal"], report["name"], report["fatal"]) == (number, name, fatal)
    line = line_of(script, crash)
    assert report["location"] == {"path": str(script), "line": line, "function": "fail"}
    user = [f for f in report["stack"] if f["path"] == str(script)]
    assert [(f["line"], f["function"]) for f in user] == [
        (line, "fail"),
        (line_of(script, "        fail()"), "<module>"),
    ]
    assert not any("runpy" in f["path"] or "hook.py" in f["path"] for f in report["stack"])
    text = render_text(run.report)
    assert f"the script died of signal {number} ({name}) after 2 steps at {script}:{line};" in text
    assert f"  > {script}:{line} in fail" in text
    assert "without a word" not in text and "killed by signal" not in text
    assert f"Fatal Python error: {fatal}" in run.stderr  # where faulthandler would print it


def test_events_file_that_would_destroy_data_is_refused_and_left_unchanged(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    other = tmp_path / "notes.txt"
    other.write_text("my notes\n")
    for target in (script, other):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "xla_lint",
                "trace",
                "--no-static",
                "--events",
                str(target),
                "--",
                "python",
                str(script),
            ],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        assert proc.returncode == 2 and proc.stderr.startswith("xla-lint: error: --events ")
    assert script.read_text() == "print('hi')\n" and other.read_text() == "my notes\n"


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_timeout_that_is_not_finite_is_refused(tmp_path, value):
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "xla_lint",
            "trace",
            "--timeout",
            value,
            "--",
            "python",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert proc.returncode == 2 and "--timeout must be a finite number of seconds" in proc.stderr


def test_sigterm_ends_the_script_and_prints_the_partial_report(tmp_path):
    import signal

    script = tmp_path / "sleepy.py"
    script.write_text("import time\nwhile True:\n    time.sleep(0.1)\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "xla_lint", "trace", "--no-static", "--", "python", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(4)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=RUN_TIMEOUT)
    assert proc.returncode == 130
    assert "the run was interrupted while at" in out and "sleepy.py" in out
    import shutil

    if shutil.which("pgrep"):  # the script's process group was ended, not left running
        assert (
            subprocess.run(
                ["pgrep", "-f", str(script)], capture_output=True, text=True
            ).stdout.split()
            == []
        )
