"""``xla-lint trace`` against torch_xla's own ground truth (issue 23): each scenario runs once
bare, with ``PT_XLA_DEBUG_LEVEL=2``, ``PT_XLA_DEBUG_FILE`` and the metrics report
(``torch_xla.debug.metrics``) read after the script, and once under the trace; the tests
compare the two.

* ``examples/trace/closure_gather.py`` (SPMD, 8 CPU devices): a step closure reads the loss
  every step (synchronous and ``run_async=True``), a sharded (21, 16) weight is read to the
  host in the step whose batch shape changes (torch_xla compiles a gather and writes no debug
  block for it), and the bias is read after the last step.
* a script that puts ``lib/`` on ``sys.path`` and dies of an ``AttributeError`` on a removed
  API (``xm.xrt_world_size``) inside ``lib/helpers.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("torch_xla")

from tracerun import ROOT, RUN_TIMEOUT, Run, line_of, trace

from xla_lint.trace.events import REPORT_SCHEMA

pytestmark = pytest.mark.runtime
jsonschema = pytest.importorskip("jsonschema")

EXAMPLE = ROOT / "examples" / "trace" / "closure_gather.py"

#: Runs a script bare and prints torch_xla's own counts, and each parameter's bytes on device
#: 0 from its local shards (torch_xla keeps a shard's padding in its data).
TRUTH = """\
import json, runpy, sys
script = sys.argv[1]
sys.argv = [script]
try:
    found = runpy.run_path(script, run_name="__main__")
except AttributeError as exc:
    found = {}
    print("RAISED", type(exc).__name__, flush=True)
import torch, torch_xla, torch_xla.debug.metrics as met
shard_bytes = {}
model = found.get("model")
if isinstance(model, torch.nn.Module):
    for name, p in model.named_parameters():
        data = torch_xla._XLAC._get_local_shards([p])[0][0][0]
        shard_bytes[name] = data.numel() * data.element_size()
print("TRUTH " + json.dumps({
    "compile_samples": (met.metric_data("CompileTime") or [0])[0],
    "uncached": met.counter_value("UncachedCompile") or 0,
    "transfers": (met.metric_data("TransferFromDeviceTime") or [0])[0],
    "shard_bytes": shard_bytes,
}), flush=True)
"""

MAIN = """\
import sys

sys.path.append("lib")
import torch
import torch_xla
from helpers import world

w = torch.zeros(3, device=torch_xla.device())
for i in range(3):
    w = w + 1
    torch_xla.sync()
print(world(), flush=True)
"""
HELPERS = """\
import torch_xla.core.xla_model as xm


def world():
    return xm.xrt_world_size()
"""


# aws-neuron-samples' customop_mlp train.py, cut down: the loss read with .to("cpu"), then the
# checkpoint written with xm.save, which copies the state to the host through
# torch_xla._XLAC._xla_get_cpu_tensors (one transfer, no torch.Tensor method).
SAVE = """\
import os
import torch
import torch_xla
import torch_xla.core.xla_model as xm

net = torch.nn.Linear(4, 2).to("xla")
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for i in range(3):
    optimizer.zero_grad()
    loss = net(torch.ones(2, 4, device="xla")).sum()
    loss.backward()
    optimizer.step()
    xm.mark_step()
print("loss", loss.detach().to("cpu"), flush=True)
xm.save({"state_dict": net.state_dict()}, os.path.join(os.path.dirname(__file__), "ck.pt"))
"""

# pytorch/xla's examples/eager/train_decoder_only_eager_with_compile.py, cut down: eager mode
# compiles each op outside the step on its own (UncachedCompile, EagerOpCompileTime), and the
# step through torch_xla.compile (CompileTime, a debug block).
EAGER = """\
import torch
import torch_xla

torch_xla.experimental.eager_mode(True)
net = torch.nn.Linear(4, 2).to("xla")
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)


def step_fn(x):
    optimizer.zero_grad()
    loss = net(x).sum()
    loss.backward()
    optimizer.step()
    return loss


step = torch_xla.compile(step_fn)
for i in range(3):
    x = torch.randn(2, 4, device="xla") * 2 + 1
    step(x)
"""


def bare(script: Path, cwd: Path, debug: Path) -> dict:
    """torch_xla's ground truth of ``script`` run bare: its counts (``TRUTH``), the compile
    blocks of its debug file, and whether it raised."""
    env = {
        **os.environ,
        "PJRT_DEVICE": "CPU",
        "CPU_NUM_DEVICES": "8",
        "PT_XLA_DEBUG_LEVEL": "2",
        "PT_XLA_DEBUG_FILE": str(debug),
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run(
        [sys.executable, "-c", TRUTH, str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    line = next(x for x in proc.stdout.splitlines() if x.startswith("TRUTH "))
    truth = json.loads(line[len("TRUTH ") :])
    text = debug.read_text() if debug.exists() else ""
    truth["blocks"] = text.count("Compilation Cause")
    truth["raised"] = "RAISED AttributeError" in proc.stdout
    return truth


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Future]:
    base = tmp_path_factory.mktemp("truth")
    project = base / "project"
    (project / "scripts").mkdir(parents=True)
    (project / "lib").mkdir()
    (project / "scripts" / "train.py").write_text(MAIN)
    (project / "lib" / "helpers.py").write_text(HELPERS)
    (project / "save.py").write_text(SAVE)
    (project / "eager.py").write_text(EAGER)
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {
        "closure": pool.submit(
            trace, ["--steps", "20"], ["python", str(EXAMPLE)], base / "closure.jsonl"
        ),
        "closure-truth": pool.submit(bare, EXAMPLE, ROOT, base / "closure-debug.txt"),
        "removed": pool.submit(
            trace, [], ["python", "scripts/train.py"], base / "removed.jsonl", project
        ),
        "removed-truth": pool.submit(
            bare, project / "scripts" / "train.py", project, base / "removed-debug.txt"
        ),
    }
    futures["save"] = pool.submit(trace, [], ["python", "save.py"], base / "save.jsonl", project)
    futures["save-truth"] = pool.submit(bare, project / "save.py", project, base / "save.txt")
    futures["eager"] = pool.submit(trace, [], ["python", "eager.py"], base / "eager.jsonl", project)
    futures["eager-truth"] = pool.submit(bare, project / "eager.py", project, base / "eager.txt")
    futures["project"] = Future()
    futures["project"].set_result(project)
    yield futures
    pool.shutdown(wait=True)


def _run(runs, name: str) -> Run:
    run = runs[name].result(timeout=RUN_TIMEOUT)
    assert run.report is not None, run.stderr
    jsonschema.validate(run.report, REPORT_SCHEMA)
    return run


def test_reads_in_step_closures_are_not_xla201_and_a_synchronous_one_gets_a_note(runs):
    run = _run(runs, "closure")
    sync_line = line_of(EXAMPLE, "# in a synchronous step closure")
    async_line = line_of(EXAMPLE, "# in a run_async step closure")
    reads = {r["location"]["line"]: r for r in run.report["host_reads"]}
    assert reads[sync_line]["closure"] == "sync" and len(reads[sync_line]["steps"]) == 6
    assert reads[async_line]["closure"] == "async"
    assert not [f for f in run.report["findings"] if f["code"] in ("XLA201", "XLA015")]
    assert "add_step_closure" not in json.dumps(run.report["findings"])
    note = next(n for n in run.report["notes"] if "step closure" in n)
    assert f"closure_gather.py:{sync_line}" in note and "run_async=True" in note
    assert not any(f"closure_gather.py:{async_line}" in n for n in run.report["notes"])


def test_every_compile_of_the_metric_is_listed_and_the_gather_is_at_its_read(runs):
    run, truth = _run(runs, "closure"), runs["closure-truth"].result(timeout=RUN_TIMEOUT)
    compiles = run.report["compiles"]
    # torch_xla's ground truth: CompileTime counts the gather, the debug file does not
    assert truth["compile_samples"] == truth["blocks"] + 1
    assert len(compiles) == truth["compile_samples"]
    assert len([c for c in compiles if c["reason"] != "host-read"]) == truth["blocks"]
    read_line = line_of(EXAMPLE, "kept = model.weight.cpu()")
    (gather,) = [c for c in compiles if c["reason"] == "host-read"]
    assert gather["location"]["line"] == read_line and not gather["after_warmup"]
    # never paired by position: the gather (first in its step) keeps its own time, and the
    # step graph compiled in the same step gets the sample outside the read
    step = next(e for e in run.events if e["event"] == "step" and e["step"] == gather["step"])
    span = next(
        e["compile_spans"][0]
        for e in run.events
        if e["event"] == "host_read" and e["location"]["line"] == read_line
    )
    inside = [s for a, s in step["compile_samples"] if span[0] - 0.01 <= a <= span[1]]
    outside = [s for a, s in step["compile_samples"] if not span[0] - 0.01 <= a <= span[1]]
    assert len(step["compile_samples"]) == 2 and len(inside) == len(outside) == 1
    graph = next(c for c in compiles if c["step"] == gather["step"] and c is not gather)
    assert gather["time_s"] == inside[0] and graph["time_s"] == outside[0]
    assert graph["reason"] == "new-input-shape"
    row = next(s for s in run.report["steps"] if s["step"] == gather["step"])
    assert row["compiles"] == 2


def test_events_after_the_last_step_are_a_final_row(runs):
    run = _run(runs, "closure")
    steps = run.report["steps"]
    assert [s["final"] for s in steps] == [False] * 6 + [True]
    final_line = line_of(EXAMPLE, 'print("final"')
    (late,) = [c for c in run.report["compiles"] if c["step"] == steps[-1]["step"]]
    assert late["reason"] == "after-last-step" and late["location"]["line"] == final_line
    assert steps[-1]["compiles"] == 1
    (read,) = [r for r in run.report["host_reads"] if r["location"]["line"] == final_line]
    assert read["steps"] == [steps[-1]["step"]] and read["forced_execution"] == 1
    assert not [f for f in run.report["findings"] if final_line in [f["location"]["line"]]]
    # the device time of the graphs each step launched, beside the host span
    assert all(isinstance(s["execute_s"], float) for s in steps)
    assert steps[0]["execute_s"] > 0


def test_bytes_per_device_count_the_padding_of_uneven_shards(runs):
    run, truth = _run(runs, "closure"), runs["closure-truth"].result(timeout=RUN_TIMEOUT)
    params = run.report["sharding"]["parameters"]
    # torch_xla's local shards hold the padding: (21, 16) float32 on 8 devices is 3 rows each
    assert truth["shard_bytes"]["weight"] == 3 * 16 * 4
    assert params["bytes_per_device"] == sum(truth["shard_bytes"].values())


def test_the_header_says_cpu_times_are_not_tpu_times_and_the_flags(runs):
    run = _run(runs, "closure")
    device = run.report["device"]
    # the flags of a bare run: the environment's (importing torch_xla here set some), no -O0
    assert device["xla_flags"] == (os.environ.get("XLA_FLAGS") or None)
    assert device["xla_flags_added"] is None and not device["fast_compile"]
    if "optimization_level" not in os.environ.get("XLA_FLAGS", ""):
        # (in the full suite an in-process runtime check has put -O0 into this process's
        # environment: the trace passes the environment's flags on, and adds none)
        assert "optimization_level" not in (device["xla_flags"] or "")
    from xla_lint.trace.report import render_text

    text = render_text(run.report)
    flags = f"XLA_FLAGS={device['xla_flags']} (from the environment)"
    assert "not TPU times" in text
    assert (flags if device["xla_flags"] else "no XLA_FLAGS (the flags of a bare run)") in text
    assert re.search(r"\n +end +\d", text)  # the row after the last step


def test_a_removed_api_the_script_died_of_is_confirmed_as_the_cause(runs):
    run, truth = _run(runs, "removed"), runs["removed-truth"].result(timeout=RUN_TIMEOUT)
    project = runs["project"].result()
    helpers = project / "lib" / "helpers.py"
    assert truth["raised"]
    assert run.report["status"] == "error" and run.code == 1
    line = line_of(helpers, "xm.xrt_world_size()")
    assert run.report["error"]["cause"] == {"code": "XLA013", "name": "removed-api", "line": line}
    (static,) = run.static("XLA013")  # lib/ is reached through sys.path.append("lib")
    assert static["status"] == "confirmed" and static["cause"] and static["line"] == line
    finding = run.finding("XLA013")
    assert finding["location"]["line"] == line and "AttributeError" in finding["message"]
    assert "torch_xla.runtime.world_size" in finding["fix"]


def test_messages_name_files_relative_to_where_the_trace_ran(runs):
    run = _run(runs, "removed")
    project = runs["project"].result()
    words = [f["message"] + f["title"] + f["fix"] for f in run.report["findings"]]
    words += run.report["notes"] + [d["message"] for d in run.report["static"]]
    assert words and not [w for w in words if str(project) in w or str(ROOT) in w]


def test_xm_save_is_a_host_read_at_its_line(runs):
    """torch_xla's TransferFromDeviceTime counts the .to("cpu") and xm.save's copy of the
    state (the trace counted only the first before)."""
    run, truth = _run(runs, "save"), runs["save-truth"].result(timeout=RUN_TIMEOUT)
    project = runs["project"].result()
    reads = {(r["kind"], r["location"]["line"]): r["count"] for r in run.report["host_reads"]}
    assert reads == {
        ('.to("cpu")', line_of(project / "save.py", 'to("cpu")')): 1,
        ("xm.save()", line_of(project / "save.py", "xm.save(")): 1,
    }
    assert sum(reads.values()) == truth["transfers"] == 2


def test_eager_op_compiles_are_not_graph_compiles(runs):
    """The step table counted UncachedCompile, which in eager mode also counts every op
    compiled on its own (9 in the real example's first step, 2 graphs listed)."""
    run, truth = _run(runs, "eager"), runs["eager-truth"].result(timeout=RUN_TIMEOUT)
    counted = sum(s["compiles"] for s in run.report["steps"])
    assert counted == len(run.report["compiles"]) == truth["compile_samples"] == truth["blocks"]
    assert truth["uncached"] > truth["compile_samples"]  # the eager ops the table counted
