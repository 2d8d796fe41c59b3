"""Fast tests of ``xla-lint trace``'s torch-free parts: the PT_XLA_DEBUG parser, command
resolution, the findings drawn from hand-made events, the report schemas, and the
promises about imports (the hook is standard-library only; the linter never imports the
trace package)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from xla_lint.cli import main
from xla_lint.diagnostics import Diagnostic
from xla_lint.trace import hook, runner
from xla_lint.trace.events import EVENT_SCHEMA, REPORT_SCHEMA, Location, Trace
from xla_lint.trace.hosts import failures
from xla_lint.trace.report import (
    adam_constant_step,
    analyse,
    build_report,
    confirm_static,
    render_text,
    shards,
)
from xla_lint.trace.runner import TraceUsageError, _read_stack, resolve_target

jsonschema = pytest.importorskip("jsonschema")

# Shaped like torch_xla 2.9.0's output on CPU (csrc/debug_util.cpp), trimmed.
DEBUG = """
Compilation Analysis: ================================================================================
Compilation Analysis: Compilation Cause
Compilation Analysis:   most likely user code trying to access tensor value before torch_xla.sync
Compilation Analysis: Graph Info: 
Compilation Analysis:   Graph Hash: c30b122c409b276f55b1fb8979f4b9c8
Compilation Analysis:   Number of Graph Inputs: 6
Compilation Analysis:   Number of Graph Outputs: 1
Compilation Analysis: Python Frame Triggered Execution: 
Compilation Analysis:   host_read (/x/xla_lint/trace/hook.py:471)
Compilation Analysis:   <module> (/u/train.py:29)
Compilation Analysis:   _run_code (<frozen runpy>:88)
Compilation Analysis: --------------------------------------------------------------------------------
Compilation Analysis: ================================================================================

Computation hash: b5f056a84df9a5e5cc4ae93af29ae828

Post Compilation Analysis: ================================================================================
Post Compilation Analysis: Graph input size: 0.000000 GB
Post Compilation Analysis: Compiled program size: 0.000012 GB
Post Compilation Analysis: --------------------------------------------------------------------------------
Post Compilation Analysis: ================================================================================

Execution Analysis: ================================================================================
Execution Analysis: Execution Cause
Execution Analysis:   user torch_xla.sync
Execution Analysis: Graph Info: 
Execution Analysis:   Graph Hash: 5790d276cca3ae8f77545605bbb496b1
Execution Analysis:   Number of Graph Inputs: 4
Execution Analysis:   Number of Graph Outputs: 3
Execution Analysis: Python Frame Triggered Execution: 
Execution Analysis:   sync (/site/torch_xla/torch_xla.py:87)
Execution Analysis:   <module> (/u/train.py:30)
Execution Analysis: --------------------------------------------------------------------------------
Execution Analysis: ================================================================================

Compilation Analysis: ================================================================================
Compilation Analysis: Compilation Cause
Compilation Analysis:   user torch_xla.sync
"""


def test_parse_debug_blocks_reads_cause_hash_counts_frames_and_sizes():
    blocks = hook.parse_debug_blocks(DEBUG)
    assert [b["kind"] for b in blocks] == ["compile", "execution", "compile"]
    first = blocks[0]
    assert first["cause"].startswith("most likely user code")
    assert (first["graph_hash"], first["inputs"], first["outputs"]) == (
        "c30b122c409b276f55b1fb8979f4b9c8",
        6,
        1,
    )
    assert first["frames"][1] == {"path": "/u/train.py", "line": 29, "function": "<module>"}
    assert first["computation_hash"] == "b5f056a84df9a5e5cc4ae93af29ae828"
    assert first["compiled_program_size_gb"] == pytest.approx(0.000012)
    assert first["complete"] and blocks[1]["complete"]
    assert not blocks[2]["complete"]  # still being written: the child keeps it for the next read
    assert DEBUG[blocks[2]["start"] :].startswith("Compilation Analysis: ====")
    assert not hook.is_sync_cause(first["cause"]) and hook.is_sync_cause(blocks[1]["cause"])


def test_block_location_is_the_first_user_frame(monkeypatch):
    monkeypatch.setattr(hook, "_library_dirs", ("/x/xla_lint/", "/site/torch_xla/"))
    blocks = hook.parse_debug_blocks(DEBUG)
    assert hook.block_location(blocks[0]) == {
        "path": "/u/train.py",
        "line": 29,
        "function": "<module>",
    }
    event = hook.block_event(blocks[1], 3)
    assert event["event"] == "execution" and event["step"] == 3 and event["location"]["line"] == 30
    assert hook.block_event(blocks[2], 4)["partial"] is True


def test_ir_lines_are_normalised_for_diffing():
    line = "  %12 = f32[4,1]{1,0} aten::mul(%5, %7), scope=aten::mul.3, location=forward@linear.py:134, xla_shape=f32[4,1]{1,0}"
    assert hook._normalise_ir(line) == ("f32[4,1]{1,0} aten::mul(#, #)", "forward@linear.py:134")
    assert hook._normalise_ir(
        "  %3 = f32[] prim::Constant(), location=_single_tensor_adam@adam.py:535, xla_shape=f32[]"
    ) == ("f32[] prim::Constant()", "_single_tensor_adam@adam.py:535")


def test_faulthandler_dump_gives_the_script_thread(tmp_path):
    dump = tmp_path / "stacks.txt"
    dump.write_text(
        'Thread 0x01 (most recent call first):\n  File "/usr/lib/python3.11/threading.py", line 320 in wait\n'
        '\nCurrent thread 0x02 (most recent call first):\n  File "/u/train.py", line 7 in <module>\n'
        '  File "<frozen runpy>", line 88 in _run_code\n'
    )
    assert _read_stack(str(dump))[0] == {"path": "/u/train.py", "line": 7, "function": "<module>"}


def test_a_fatal_signal_dump_gives_the_crashed_thread_down_to_the_script(tmp_path, monkeypatch):
    monkeypatch.setattr(hook, "_library_dirs", ("/usr/lib/python3.11/",))
    dump = tmp_path / "fatal.txt"
    dump.write_text(
        "Fatal Python error: Segmentation fault\n\n"
        'Thread 0x01 (most recent call first):\n  File "/u/train.py", line 3 in <module>\n\n'
        "Current thread 0x02 (most recent call first):\n"
        '  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at\n'
        '  File "/u/loader.py", line 7 in read\n'
        '  File "/u/train.py", line 9 in <module>\n'
        '  File "<frozen runpy>", line 88 in _run_code\n'
        '  File "/x/xla_lint/trace/hook.py", line 1727 in _run\n'
        '  File "<string>", line 5 in <module>\n\n'
        "Extension modules: torch._C (total: 1)\n"
    )
    event = runner.crash_event(11, str(dump))
    jsonschema.validate({**event, "t": 1.0}, EVENT_SCHEMA)  # the runner stamps it
    assert (event["signal"], event["name"], event["fatal"]) == (11, "SIGSEGV", "Segmentation fault")
    assert [(f["path"], f["line"]) for f in event["stack"]] == [
        ("/usr/lib/python3.11/ctypes/__init__.py", 519),
        ("/u/loader.py", 7),
        ("/u/train.py", 9),
    ]
    assert event["location"] == {"path": "/u/loader.py", "line": 7, "function": "read"}
    assert runner.crash_event(None, str(dump))["signal"] == 11  # a rank's: from the dump
    killed = runner.crash_event(9, str(tmp_path / "none.txt"))
    assert (killed["name"], killed["stack"], killed["location"]) == ("SIGKILL", [], None)
    assert runner.crash_event(None, str(tmp_path / "none.txt")) is None


def test_a_patched_call_records_once_on_its_tracer_and_passes_through_otherwise(monkeypatch):
    """hook._wrap holds the guards of every patch: a call inside an exclusive call (a host
    read inside a host read) is not recorded again, nor one `when` refuses, nor one without a
    tracer (`own_thread`: the calling thread's own); `always` runs on every call."""
    import threading

    seen: list = []
    tracer = object()
    monkeypatch.setattr(hook, "_THREADS", {threading.get_ident(): tracer})
    monkeypatch.setattr(hook, "_DEFAULT", [tracer])

    def record(name):
        def around(t, frame, original, args, kwargs):
            seen.append((name, t is tracer, frame.f_code.co_name))
            return original(*args, **kwargs)

        return around

    inner = hook._wrap(lambda x: x + 1, around=record("inner"), when=lambda a, k: a[0] >= 0)
    outer = hook._wrap(lambda x: inner(x) * 2, around=record("outer"), exclusive=True)
    assert outer(1) == 4 and inner(1) == 2 and inner(-1) == 0
    here = sys._getframe().f_code.co_name  # each recorder sees its caller's frame: this test
    assert seen == [("outer", True, here), ("inner", True, here)]
    assert hook._LOCAL.busy is False
    seen.clear()
    always: list = []
    mine = hook._wrap(lambda: 1, own_thread=True, before=lambda t, f, a, k: seen.append("own"))
    any_thread = hook._wrap(
        lambda: 2,
        always=lambda a, k: always.append(1),
        after=lambda t, f, a, k, result, state: seen.append(("any", result)),
    )
    worker = threading.Thread(target=lambda: (mine(), any_thread()))
    worker.start()
    worker.join()
    assert seen == [("any", 2)] and always == [1]  # another thread: the process's first tracer
    monkeypatch.setattr(hook, "_DEFAULT", [])
    monkeypatch.setattr(hook, "_THREADS", {})
    assert (mine(), any_thread(), seen, always) == (1, 2, [("any", 2)], [1, 1])  # no tracer


# --- the command ------------------------------------------------------------------------------


def test_resolve_target_accepts_python_prefix_module_and_args(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    for words in (
        ["python", "train.py", "--lr", "1"],
        ["train.py", "--lr", "1"],
        [sys.executable, "train.py", "--lr", "1"],
        ["python3.11", "train.py", "--lr", "1"],
        ["--", "python", "train.py", "--lr", "1"],
    ):
        t = resolve_target(words, str(tmp_path))
        assert (t.kind, t.target, t.args) == ("path", str(script), ("--lr", "1")), words
    t = resolve_target(["python", "-m", "pkg.train", "-x"], str(tmp_path))
    assert (t.kind, t.target, t.args) == ("module", "pkg.train", ("-x",))


@pytest.mark.parametrize(
    "words",
    [
        ["torchrun", "--nproc-per-node", "2", "train.py", "--lr", "1"],
        ["/venv/bin/torchrun", "--nproc-per-node", "2", "train.py", "--lr", "1"],
        ["python", "-m", "torch.distributed.run", "--nproc-per-node", "2", "train.py", "--lr", "1"],
    ],
)
def test_torchrun_runs_the_launcher_module_whose_workers_are_ranks(tmp_path, words):
    t = resolve_target(words, str(tmp_path))
    assert (t.kind, t.target, t.launcher) == ("module", "torch.distributed.run", "torchrun")
    assert t.args == ("--nproc-per-node", "2", "train.py", "--lr", "1")


@pytest.mark.parametrize(
    "words, message",
    [
        ([], "nothing to trace"),
        (["python"], "needs a script"),
        (["missing.py"], "no such script: missing.py"),
        (["python", "-m"], "-m needs a module"),
        (["python", "-u", "train.py"], "interpreter option '-u'"),
        (["accelerate", "launch", "train.py"], "`accelerate` is not traced; .*torchrun"),
        (["python", "-m", "deepspeed.launcher.runner", "t.py"], "is not traced; .*xmp.spawn"),
    ],
)
def test_resolve_target_refuses_in_one_line(tmp_path, words, message):
    with pytest.raises(TraceUsageError, match=message):
        resolve_target(words, str(tmp_path))


def test_a_program_on_path_is_run_only_when_it_is_a_python_script(tmp_path, monkeypatch):
    """`trace -- bash -c ...` said "no such script: bash"; a console script installed by pip
    (a `#!.../python` file on PATH) is a Python script and is traced."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, first in (("train-cli", "#!/usr/bin/env python3\n"), ("tool", "#!/bin/sh\n")):
        (bin_dir / name).write_text(first + "print(1)\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    t = resolve_target(["train-cli", "--lr", "1"], str(tmp_path))
    assert (t.kind, t.target, t.args) == ("path", str(bin_dir / "train-cli"), ("--lr", "1"))
    with pytest.raises(TraceUsageError, match=r"`tool` is not a Python script .*trace runs Python"):
        resolve_target(["tool", "-c", "x"], str(tmp_path))


#: An executable's first bytes (ELF header), as /bin/true starts.
ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(56)


@pytest.mark.parametrize(
    "name, content, why",
    [
        ("prog", ELF, "an executable binary"),
        ("data.bin", b"print(1)\n\x00\x01", "a binary file: it holds NUL bytes"),
        ("run.sh", b"#!/bin/bash\necho hi\n", "its #! line runs /bin/bash"),
        ("tool", b"#!/usr/bin/env node\nconsole.log(1)\n", "its #! line runs /usr/bin/env node"),
    ],
    ids=["elf", "nul-bytes", "bash", "node"],
)
def test_a_file_that_is_not_python_source_is_refused(tmp_path, name, content, why):
    """`trace -- /bin/true` ran the binary as a Python script: the report said the script
    raised "SyntaxError: source code string cannot contain null bytes" (exit 1)."""
    (tmp_path / name).write_bytes(content)
    (tmp_path / name).chmod(0o755)
    for words in ([f"./{name}"], [str(tmp_path / name)], ["python", name, "--x"]):
        with pytest.raises(TraceUsageError) as info:
            resolve_target(words, str(tmp_path))
        head = words[1] if words[0] == "python" else words[0]
        assert str(info.value).startswith(
            f"`{head}` is not a Python script ({why}); trace runs Python: "
        ), info.value


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_reading_it(tmp_path):
    os.mkfifo(tmp_path / "train.py")
    with pytest.raises(TraceUsageError, match=r"not a Python script \(not a regular file\)"):
        resolve_target(["python", "train.py"], str(tmp_path))


def test_what_python_runs_is_still_traced(tmp_path, monkeypatch):
    """A `.py` file (whatever its `#!` line), a zipapp, a console script whose `#!` names
    python, and pip's `/bin/sh` trampoline for a long interpreter path are Python."""
    import zipapp

    (tmp_path / "train.py").write_text("#!/bin/bash\nprint(1)\n")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__main__.py").write_text("print(1)\n")
    zipapp.create_archive(tmp_path / "app", tmp_path / "app.pyz", interpreter="/usr/bin/python3")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "long-cli").write_text(
        "#!/bin/sh\n'''exec' \"/a/very/long/venv path/bin/python\" \"$0\" \"$@\"\n' '''\nprint(1)\n"
    )
    (bin_dir / "long-cli").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    for words, target in (
        (["python", "train.py"], tmp_path / "train.py"),
        (["train.py"], tmp_path / "train.py"),
        (["python", "app.pyz"], tmp_path / "app.pyz"),
        (["long-cli", "--lr", "1"], bin_dir / "long-cli"),
    ):
        t = resolve_target(words, str(tmp_path))
        assert (t.kind, t.target) == ("path", str(target)), words


def test_cli_usage_errors_are_one_line_exit_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prog").write_bytes(ELF)
    (tmp_path / "prog").chmod(0o755)
    runner = CliRunner()
    for args, text in (
        (["trace", "--", "./prog"], "`./prog` is not a Python script (an executable binary)"),
        (["trace", "--", "python", "nothere.py"], "no such script: nothere.py"),
        (["trace"], "nothing to trace"),
        (["trace", "--steps", "0", "--", "x.py"], "--steps"),
        (
            ["trace", "--stepz", "3", "--", "python", "x.py"],
            "No such option '--stepz'. Did you mean '--steps'?",
        ),
        # click drops the `--` after an unknown option: still ours, not the interpreter's
        (
            ["trace", "--fastcompile", "--", "python", "x.py"],
            "No such option '--fastcompile'. Did you mean '--fast-compile'?",
        ),
        (["trace", "--bogus", "--", "python", "x.py"], "No such option '--bogus'"),
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        lines = [line for line in result.output.splitlines() if line]
        assert len(lines) == 1 and text in lines[0] and lines[0].startswith("xla-lint: error:"), (
            result.output
        )


# --- findings from hand-made events ----------------------------------------------------------

U = "/u/train.py"


def loc(line: int) -> dict:
    return {"path": U, "line": line, "function": "<module>"}


def step(
    n: int,
    compiles: int = 0,
    shape=(16, 8),
    times=None,
    optimizers=(),
    optimizer_steps=None,
    sharding=None,
    extra_inputs=(),
) -> dict:
    inputs = [
        {
            "shape": list(shape),
            "dtype": "float32",
            **({"sharding": sharding} if sharding is not None else {}),
        }
    ]
    inputs += list(extra_inputs)
    return {
        "event": "step",
        "t": float(n),
        "step": n,
        "duration_s": 0.01,
        "compiles": compiles,
        "compile_s": 0.5 * compiles,
        "compile_times_s": times or [0.5] * compiles,
        "executions": 1,
        "transfers": 0,
        "transfer_s": 0.0,
        "optimizer_steps": n if optimizer_steps is None else optimizer_steps,
        "inputs": inputs,
        "optimizers": list(optimizers),
        "boundary": loc(30),
    }


def compile_at(n: int, line: int = 30, cause: str = "user torch_xla.sync") -> dict:
    return {
        "event": "compile",
        "t": float(n),
        "step": n,
        "cause": cause,
        "graph_hash": f"h{n}",
        "location": loc(line),
        "frames": [loc(line)],
    }


def make(events: list[dict]) -> Trace:
    trace = Trace()
    for e in events:
        jsonschema.validate(e, EVENT_SCHEMA)
        trace.add(e)
    return trace


def test_warmup_then_a_new_shape_from_a_partial_batch_is_xla202():
    events = [
        {
            "event": "loader",
            "t": 0.0,
            "kind": "DataLoader",
            "location": loc(21),
            "batch_size": 16,
            "drop_last": False,
            "dataset_size": 100,
        }
    ]
    for n in range(1, 9):
        shape = (4, 8) if n == 7 else (16, 8)
        compiles = 1 if n in (1, 7) else 0
        events += [compile_at(n)] * compiles + [step(n, compiles, shape)]
    a = analyse(make(events))
    assert a.warmup == {1}
    assert [(c["step"], c["reason"]) for c in a.compiles] == [
        (1, "warm-up"),
        (7, "new-input-shape"),
    ]
    [f] = a.findings
    assert (f.code, f.location.line, f.steps, [r.line for r in f.related]) == (
        "XLA202",
        21,
        [7],
        [30],
    )


def test_a_new_shape_without_a_partial_loader_has_no_code():
    events = []
    for n in range(1, 6):
        compiles = 1 if n in (1, 4) else 0
        events += [compile_at(n)] * compiles + [step(n, compiles, (32, 8) if n == 4 else (16, 8))]
    [f] = analyse(make(events)).findings
    assert f.code is None and "new input shape" in f.title


def test_same_shapes_recompile_at_the_adam_step_is_xla204():
    opt = {
        "event": "optimizer",
        "t": 0.0,
        "id": 1,
        "class": "Adam",
        "location": loc(23),
        "betas": [0.9, 0.95],
        "capturable": False,
        "foreach": None,
        "dtype": "float32",
    }
    events = [opt]
    for n in range(1, 9):
        compiles = 1 if n in (1, 2, 5) else 0
        events += [compile_at(n)] * compiles + [
            step(n, compiles, optimizers=[{"id": 1, "step": 320.0 + n}])
        ]
    a = analyse(make(events))
    assert a.warmup == {1, 2}
    [f] = a.findings
    assert (f.code, f.location.line, f.steps) == ("XLA204", 23, [5])
    assert "325" in f.message and "float32" in f.message


def test_same_shapes_recompile_elsewhere_is_not_called_adam():
    opt = {
        "event": "optimizer",
        "t": 0.0,
        "id": 1,
        "class": "Adam",
        "location": loc(23),
        "betas": [0.9, 0.95],
        "capturable": False,
        "foreach": None,
        "dtype": "float32",
    }
    events = [opt]
    for n in range(1, 6):
        compiles = 1 if n in (1, 4) else 0
        events += [compile_at(n)] * compiles + [
            step(n, compiles, optimizers=[{"id": 1, "step": float(n)}])
        ]
    [f] = analyse(make(events)).findings
    assert f.code is None and "same input shapes" in f.title


@pytest.mark.parametrize(
    "beta2, dtype, expected",
    [
        (0.95, "float32", 325),
        (0.95, "bfloat16", 109),
        (0.95, "float64", 709),
        (0.999, "float32", 16628),
        (0.9, "float32", 158),
        (0.98, "float32", 824),
        (0.99, "float32", 1656),
    ],
)
def test_adam_constant_step_matches_the_measured_steps(beta2, dtype, expected):
    assert adam_constant_step(beta2, dtype) == expected


def test_a_read_in_most_steps_is_xla201_and_an_occasional_one_is_not():
    events = []
    for n in range(1, 11):
        events.append(
            {
                "event": "host_read",
                "t": float(n),
                "step": n,
                "kind": ".item()",
                "location": loc(29),
                "count": 1,
            }
        )
        events.append(
            {
                "event": "execution",
                "t": float(n),
                "step": n,
                "location": loc(29),
                "cause": "most likely user code trying to access tensor value before torch_xla.sync",
            }
        )
        if n in (1, 6):
            events.append(
                {
                    "event": "host_read",
                    "t": float(n),
                    "step": n,
                    "kind": "print(tensor)",
                    "location": loc(40),
                    "count": 1,
                }
            )
        events.append(step(n, 1 if n == 1 else 0))
    a = analyse(make(events))
    [f] = a.findings
    assert (f.code, f.location.line, f.steps) == ("XLA201", 29, list(range(1, 11)))
    item = next(r for r in a.host_reads if r["kind"] == ".item()")
    assert (item["count"], item["forced_execution"]) == (10, 10)
    printed = next(r for r in a.host_reads if r["kind"] == "print(tensor)")
    assert (printed["steps"], printed["forced_execution"]) == ([1, 6], 0)


def test_optimizer_steps_without_a_boundary_are_xla203():
    trace = make(
        [
            {
                "event": "stop",
                "t": 1.0,
                "reason": "no-boundary",
                "steps": 0,
                "optimizer_steps": 5,
                "location": loc(27),
            }
        ]
    )
    [f] = analyse(trace).findings
    assert (f.code, f.location.line) == ("XLA203", 27) and "5 optimizer steps" in f.message


def test_a_replicated_label_beside_a_split_batch_is_xla022():
    split = "{devices=[8,1]0,1,2,3,4,5,6,7}"
    label = {"shape": [32], "dtype": "int64", "sharding": "{replicated}"}
    events = [
        {"event": "spmd", "t": 0.0, "location": loc(24)},
        {
            "event": "loader",
            "t": 0.0,
            "kind": "MpDeviceLoader",
            "location": loc(32),
            "sharding_location": loc(35),
            "input_sharding": {"partition_spec": ["data", None], "minibatch": False},
        },
        step(1, 1, (32, 32), sharding=split, extra_inputs=[label]),
        step(2, 0, (32, 32), sharding=split, extra_inputs=[label]),
    ]
    a = analyse(make(events))
    [f] = a.findings
    assert (f.code, f.location.line, [r.line for r in f.related]) == ("XLA022", 35, [32])
    assert a.sharding["inputs"][1]["split"] == [] and a.sharding["inputs"][0]["split"] == [8, 1]


def test_shards_reads_hlo_sharding_text():
    assert shards("{devices=[8,1]0,1,2,3,4,5,6,7}") == (8, 1)
    assert shards("{devices=[2,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}") == (2, 1)
    assert shards("{replicated}") == () and shards("") == () and shards("{devices=[1,1]0}") == ()


def test_static_diagnostics_are_confirmed_by_a_finding_within_their_lines():
    trace = make(
        [
            {
                "event": "stop",
                "t": 1.0,
                "reason": "no-boundary",
                "steps": 0,
                "optimizer_steps": 5,
                "location": loc(27),
            }
        ]
    )
    findings = analyse(trace).findings

    def diag(code, line, end):
        return Diagnostic(code, "name", "message", U, line, 1, end, 1)

    statuses = [
        d["status"]
        for d in confirm_static(
            [diag("XLA203", 24, 28), diag("XLA203", 40, 45), diag("XLA004", 27, 27)], findings
        )
    ]
    assert statuses == ["confirmed", "not reached", "not observable"]


def test_report_json_matches_the_schema_and_text_renders():
    events = [
        {
            "event": "start",
            "t": 0.0,
            "schema": 1,
            "pid": 1,
            "kind": "path",
            "target": U,
            "steps_limit": 2,
        },
        {"event": "torch_xla", "t": 1.0, "version": "2.9.0"},
        compile_at(1),
        step(1, 1),
        step(2, 0),
        {
            "event": "stop",
            "t": 3.0,
            "reason": "steps",
            "steps": 2,
            "optimizer_steps": 2,
            "location": None,
        },
        {"event": "exit", "t": 3.0, "code": 0, "reason": "stopped"},
        {"event": "end", "t": 3.0, "steps": 2},
        {"event": "child_exit", "t": 4.0, "code": 0},
    ]
    report = build_report(
        make(events),
        command=["python", "train.py"],
        target=U,
        steps_requested=2,
        wall_s=4.0,
        events_file="/tmp/e.jsonl",
        device={"pjrt_device": "CPU", "cpu_devices": 8},
        static=[Diagnostic("XLA201", "host-sync-in-step", "m", U, 29, 1, 29, 9)],
    )
    jsonschema.validate(report, REPORT_SCHEMA)
    assert (report["status"], report["exit_code"], report["steps_traced"]) == ("stopped", 0, 2)
    assert report["static"][0]["status"] == "not reached"
    text = render_text(report)
    assert (
        "stopped after 2 steps as asked" in text
        and "Findings: none" in text
        and "not reached" in text
    )


def test_a_script_error_is_exit_1_with_its_message():
    events = [
        {"event": "torch_xla", "t": 1.0, "version": "2.9.0"},
        step(1, 1),
        {
            "event": "error",
            "t": 2.0,
            "type": "ValueError",
            "message": "bad batch",
            "traceback": "Traceback...",
            "location": loc(8),
        },
    ]
    report = build_report(
        make(events),
        command=["x.py"],
        target=U,
        steps_requested=5,
        wall_s=2.0,
        events_file="/tmp/e.jsonl",
        device={"pjrt_device": "CPU", "cpu_devices": 8},
    )
    jsonschema.validate(report, REPORT_SCHEMA)
    assert (report["status"], report["exit_code"], report["error"]["type"]) == (
        "error",
        1,
        "ValueError",
    )
    assert "error: ValueError: bad batch at" in render_text(report)


def test_a_script_that_died_of_a_signal_is_headlined_with_it_and_its_stack():
    frames = [
        {"path": "/usr/lib/python3.11/ctypes/__init__.py", "line": 519, "function": "string_at"},
        loc(8) | {"function": "fail"},
        loc(12),
    ]
    crashed = [
        {"event": "torch_xla", "t": 1.0, "version": "2.9.0"},
        step(1, 1),
        step(2, 0),
        {"event": "child_exit", "t": 3.0, "code": -11},
    ]
    signal = {"event": "crash", "t": 3.0, "signal": 11, "name": "SIGSEGV"}
    reports = {}
    for name, extra in (
        (
            "segv",
            [{**signal, "fatal": "Segmentation fault", "stack": frames, "location": frames[1]}],
        ),
        (
            "kill",
            [
                {
                    **signal,
                    "signal": 9,
                    "name": "SIGKILL",
                    "fatal": None,
                    "stack": [],
                    "location": None,
                }
            ],
        ),
    ):
        reports[name] = build_report(
            make(crashed[:-1] + extra + crashed[-1:]),
            command=["x.py"],
            target=U,
            steps_requested=5,
            wall_s=3.0,
            events_file="/tmp/e.jsonl",
            device={"pjrt_device": "CPU", "cpu_devices": 8},
        )
        jsonschema.validate(reports[name], REPORT_SCHEMA)
        assert (reports[name]["status"], reports[name]["exit_code"]) == ("crashed", 1)
    assert reports["segv"]["crash"]["location"] == frames[1]
    text = render_text(reports["segv"]).splitlines()
    assert text[1].startswith(
        "the script died of signal 11 (SIGSEGV) after 2 steps at /u/train.py:8;"
    )
    assert text[2:6] == [
        "crash: Fatal Python error: Segmentation fault; the Python stack at the crash (most recent call first):",
        "    /usr/lib/python3.11/ctypes/__init__.py:519 in string_at",
        "  > /u/train.py:8 in fail",
        "    /u/train.py:12 in <module>",
    ]
    assert not any("without a word" in line or "signal 11" in line for line in text[6:])
    text = render_text(reports["kill"]).splitlines()
    assert text[1].startswith("the script died of signal 9 (SIGKILL) after 2 steps;")
    assert (
        text[2]
        == "crash: no Python stack: SIGKILL cannot be caught (the out-of-memory killer, or kill -9)"
    )
    hung = make(
        crashed[:-1]
        + [{**signal, "fatal": "Segmentation fault", "stack": frames, "location": frames[1]}]
    )
    [finding] = failures(
        {
            0: make([step(1, 1)] + [{"event": "stop", "t": 2.0, "reason": "steps", "steps": 1}]),
            1: hung,
        },
        {},
    )
    assert (
        finding["message"] == "host 1 died of signal 11 (SIGSEGV) at /u/train.py:8 after 2 step(s)"
    )
    assert finding["location"] == frames[1]


# --- import promises -------------------------------------------------------------------------


def test_the_hook_imports_only_the_standard_library():
    path = Path(hook.__file__)
    code = (
        "import importlib.util as u, sys\n"
        f"s = u.spec_from_file_location('h', {str(path)!r}); m = u.module_from_spec(s); s.loader.exec_module(m)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('torch', 'torch_xla', 'xla_lint', 'numpy',"
        " 'libcst', 'click'))\n"
        "print(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_linter_never_imports_the_trace_package():
    code = (
        "import sys, xla_lint.cli, xla_lint.pipeline.run, xla_lint.linter, xla_lint.rules\n"
        "print([n for n in sys.modules if n.startswith('xla_lint.trace')])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    ).stdout
    assert out.strip() == "[]"


def test_location_round_trip():
    assert Location.from_json(loc(3)).to_json() == loc(3)
    assert (
        Location.from_json(None) is None and Location.from_json({"path": None, "line": 1}) is None
    )


def test_event_schema_rejects_a_step_without_its_fields():
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"event": "step", "t": 1.0, "step": 1}, EVENT_SCHEMA)
    assert json.loads(json.dumps(REPORT_SCHEMA)) == REPORT_SCHEMA  # plain JSON


# --- issue 23: honest times, every compile, shards, step closures, predicted errors ------------


def test_compile_times_are_paired_by_place_and_time_never_by_position():
    from xla_lint.trace.events import Compile, HostRead, Step
    from xla_lint.trace.report import pair_compile_times

    # the gather of a sharded `.cpu()` at line 12 compiled first (0.1 s, no debug block), then
    # the step's graph at the boundary (0.8 s), then a value read at line 14 (0.05 s)
    row = Step.from_json(
        {
            **step(4, compiles=2),
            "start": 10.0,
            "duration_s": 2.0,
            "compile_samples": [[10.1, 0.1], [11.0, 0.8], [11.5, 0.05]],
        }
    )
    graph = Compile(4, "user torch_xla.sync", "h", Location(U, 30), [])
    value = Compile(4, "most likely user code trying to access", "v", Location(U, 14), [])
    gather_read = HostRead(4, ".cpu()", Location(U, 12), 1, None, [[10.09, 10.3]])
    value_read = HostRead(4, ".item()", Location(U, 14), 1, None, [[11.49, 11.6]])
    times, extra = pair_compile_times(row, [graph, value], [gather_read, value_read])
    assert times == [0.8, 0.05]  # by position the step's graph would have had 0.1 s
    assert extra == [(gather_read, 0.1)]


def test_a_step_without_samples_keeps_its_times_in_order():
    from xla_lint.trace.events import Compile, Step
    from xla_lint.trace.report import pair_compile_times

    row = Step.from_json(step(2, compiles=2, times=[0.3, 0.3]))
    blocks = [Compile(2, "user torch_xla.sync", "h", Location(U, 30), [])] * 3
    assert pair_compile_times(row, blocks, []) == ([0.3, 0.3, None], [])


def test_execute_time_belongs_to_the_step_that_launched_the_graph():
    from xla_lint.trace.events import Step, device_times

    # step 1's graph, launched at its boundary (1.9 s), began after step 1's span ended; a
    # host read in step 2 ran a graph mid-step (2.5 s); step 2's own graph began at 2.95 s
    one = Step.from_json(
        {**step(1), "start": 0.0, "duration_s": 2.0, "boundary_at": 1.9, "execute_samples": []}
    )
    two = Step.from_json(
        {
            **step(2),
            "start": 2.0,
            "duration_s": 1.0,
            "boundary_at": 2.9,
            "execute_samples": [[2.01, 0.4], [2.5, 0.1]],
        }
    )
    tail = Step.from_json({**step(3), "start": 3.0, "execute_samples": [[2.95, 0.3]]})
    assert device_times([one, two, tail]) == {1: 0.4, 2: 0.4, 3: 0.0}
    assert device_times([Step.from_json(step(3))]) == {3: None}


def test_shard_sizes_are_ceil_divided_with_the_runtime_checker():
    from xla_lint.runtime.spec import parse_sharding
    from xla_lint.shards import shard_bytes, shard_shape
    from xla_lint.trace.report import _bytes_per_device

    spec = "{devices=[8,1]0,1,2,3,4,5,6,7}"
    assert shard_shape((21, 16), (8, 1)) == (3, 16)
    assert parse_sharding(spec, 2).shard_shape((21, 16)) == (3, 16)  # the runtime checker
    assert shard_bytes((21, 16), (8, 1), 4) == 192
    param = {"shape": [21, 16], "bytes": 21 * 16 * 4, "sharding": spec}
    assert _bytes_per_device(param) == 192  # not 1344 / 8 = 168
    assert _bytes_per_device({**param, "shape": [24, 16], "bytes": 24 * 64}) == 192
    assert _bytes_per_device({**param, "sharding": "{replicated}"}) == 1344


def test_fast_compile_is_the_only_way_to_minus_o0(tmp_path):
    base = {"PATH": os.environ.get("PATH", "")}
    opts = runner.TraceOptions(("x.py",))
    env, facts = runner.build_env(opts, str(tmp_path / "e.jsonl"), str(tmp_path), base)
    assert "XLA_FLAGS" not in env and facts["xla_flags"] is None and not facts["fast_compile"]
    fast = runner.TraceOptions(("x.py",), fast_compile=True)
    env, facts = runner.build_env(fast, str(tmp_path / "e.jsonl"), str(tmp_path), base)
    assert env["XLA_FLAGS"] == "--xla_backend_optimization_level=0"
    assert facts["xla_flags_added"] == facts["xla_flags"] == env["XLA_FLAGS"]
    mine = {**base, "XLA_FLAGS": "--xla_backend_optimization_level=2"}
    env, facts = runner.build_env(fast, str(tmp_path / "e.jsonl"), str(tmp_path), mine)
    assert env["XLA_FLAGS"] == mine["XLA_FLAGS"] and facts["xla_flags_added"] is None
    result = CliRunner().invoke(main, ["trace", "--help"])
    assert "--fast-compile" in result.output


def test_sys_path_folders_of_a_script(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "vendor").mkdir()
    script = tmp_path / "scripts" / "train.py"
    script.write_text(
        "import os, sys\n"
        "sys.path.append('lib')\n"
        "sys.path.insert(0, os.path.join(os.path.dirname(__file__), 'vendor'))\n"
        "sys.path.append(os.path.dirname(__file__))\n"  # its own folder: linted anyway
        "sys.path.append('missing')\n"
        "sys.path.append(name)\n"  # not a literal
        "path.append('lib2')\n"
    )
    assert runner.sys_path_folders(str(script), str(tmp_path)) == [
        str(tmp_path / "lib"),
        str(tmp_path / "scripts" / "vendor"),
    ]


def test_sys_path_folders_of_pytorch_xla_examples(tmp_path):
    """examples/fsdp/train_decoder_only_fsdp_v2.py puts examples/ on sys.path through a name
    built from sys.argv[0]; the traced run's static list and phases missed the base module
    that holds the training loop (its compiles were placed as setup)."""
    (tmp_path / "fsdp").mkdir()
    (tmp_path / "other").mkdir()
    script = tmp_path / "fsdp" / "train.py"
    script.write_text(
        "import sys, os\n"
        "example_folder = os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[0])))\n"
        "sys.path.append(example_folder)\n"
        "twice = 'other'\n"
        "twice = 'fsdp'\n"
        "sys.path.append(twice)\n"  # assigned twice: not one folder
    )
    assert runner.sys_path_folders(str(script), str(tmp_path / "fsdp")) == [str(tmp_path)]


def test_step_closure_reads_are_not_xla201_and_the_static_model_knows_them(tmp_path):
    from xla_lint.trace.report import in_step_closure_at

    script = tmp_path / "train.py"
    script.write_text(
        "import torch_xla.core.xla_model as xm\n"
        "def log(loss):\n"
        "    print(loss.item())\n"
        "def other(loss):\n"
        "    print(loss.item())\n"
        "xm.add_step_closure(log, args=(1,))\n"
    )
    assert in_step_closure_at(Location(str(script), 3))
    assert not in_step_closure_at(Location(str(script), 5))
    events = [step(n) for n in (1, 2, 3)]
    for n in (1, 2, 3):
        for line, closure in ((3, None), (5, None), (40, "sync")):
            where = {"path": str(script), "line": line, "function": "f"} if line < 10 else loc(line)
            events.append(
                {
                    "event": "host_read",
                    "t": float(n),
                    "step": n,
                    "kind": ".item()",
                    "location": where,
                    "count": 1,
                    **({"closure": closure} if closure else {}),
                }
            )
    analysis = analyse(make(events))
    flagged = [f.location.line for f in analysis.findings if f.code == "XLA201"]
    assert flagged == [5]  # line 3 by the static model, line 40 as the run saw it
    assert len(analysis.notes) == 1 and ":40" in analysis.notes[0]


def test_an_error_the_static_finding_predicts_is_confirmed_as_the_cause():
    trace = make([step(1)])
    trace.error = {
        "type": "AttributeError",
        "message": "module 'torch_xla.core.xla_model' has no attribute 'xrt_world_size'",
        "traceback": "",
        "location": loc(12),
    }
    static = [
        Diagnostic("XLA013", "removed-api", "`xm.xrt_world_size` was removed", U, 12, 5, 12, 30),
        Diagnostic("XLA013", "removed-api", "`xm.get_ordinal` was removed", U, 20, 5, 20, 30),
    ]
    report = build_report(
        trace,
        command=["python", U],
        target=U,
        steps_requested=5,
        wall_s=1.0,
        events_file="e.jsonl",
        device={"pjrt_device": "CPU", "cpu_devices": 8},
        static=static,
    )
    jsonschema.validate(report, REPORT_SCHEMA)
    assert [d["status"] for d in report["static"]] == ["confirmed", "not observable"]
    assert report["error"]["cause"]["code"] == "XLA013"
    assert report["findings"][0]["code"] == "XLA013" and report["exit_code"] == 1
    assert "predicts" in render_text(report)


def test_messages_write_paths_below_the_current_folder_relative(tmp_path, monkeypatch):
    from xla_lint.trace.report import relative_paths

    monkeypatch.chdir(tmp_path)
    here = str(tmp_path)
    assert relative_paths(f"launched by {here}/run.sh:3 and `{here}/lib/x.py`") == (
        "launched by run.sh:3 and `lib/x.py`"
    )
    assert relative_paths("see /usr/lib/python3.11/os.py:12") == "see /usr/lib/python3.11/os.py:12"
    assert relative_paths("1/2 of the steps") == "1/2 of the steps"
    # a helper imported as here/../common (unseen7's UNet sample): `..` resolved
    (tmp_path / "unet").mkdir()
    monkeypatch.chdir(tmp_path / "unet")
    assert relative_paths(f"at {here}/unet/../common/utils.py:302") == (
        f"at {here}/common/utils.py:302"
    )
    assert relative_paths(f"at {here}/unet/x/../train.py:3") == "at train.py:3"


def test_two_reads_a_step_share_the_step_s_transfer_time():
    """trace-unseen8 bug A: with two per-step reads, each XLA201 showed the whole step's
    TransferFromDeviceTime ([4.76 s] twice on eltsai/resnet18); each now gets its share by
    read count, and the shares add up to the steps' total."""
    events = []
    for n in range(1, 9):
        for line, count in ((29, 1), (31, 3)):
            events.append(
                {"event": "host_read", "t": float(n), "step": n, "kind": ".item()",
                 "location": loc(line), "count": count}
            )  # fmt: skip
        events.append({**step(n, 1 if n == 1 else 0), "transfers": 4, "transfer_s": 0.2})
    a = analyse(make(events))
    costs = {f.location.line: f.cost_s for f in a.findings if f.code == "XLA201"}
    assert costs == {29: pytest.approx(8 * 0.05), 31: pytest.approx(8 * 0.15)}
