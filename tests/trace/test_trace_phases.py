"""Phases of a traced run from the script's own loops (xla_lint/trace/phases.py): setup,
training and evaluation rows, steps numbered by training steps, warm-up per phase, and a
partial last batch named at its own DataLoader.

The first tests read hand-made events shaped like the hook's (one row per step boundary) of
the script below; the last one (runtime) traces the script itself on CPU and checks the
compile and host-read counts against torch_xla's own metrics from a bare run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xla_lint.trace.events import REPORT_SCHEMA, Trace
from xla_lint.trace.phases import EVALUATION, SETUP, TRAINING, PhaseMap, place
from xla_lint.trace.report import analyse, build_report, render_text

ROOT = Path(__file__).resolve().parents[2]

# A setup rendezvous and sync, a training loop, then an evaluation loop over a test loader
# of 10 samples in batches of 4 (its last batch holds 2).
SCRIPT = """\
import torch
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
from torch.utils.data import DataLoader, TensorDataset

device = torch_xla.device()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
train_loader = DataLoader(
    TensorDataset(torch.randn(24, 8), torch.randn(24, 1)), batch_size=4, drop_last=True
)
test_loader = DataLoader(TensorDataset(torch.randn(10, 8), torch.randn(10, 1)), batch_size=4)
xm.rendezvous("init")
scale = torch.ones(3, device=device) * 2
torch_xla.sync()  # a setup sync that compiles
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(2):
    model.train()
    for x, y in train_loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()
    model.eval()
    total = torch.zeros((), device=device)
    with torch.no_grad():
        for x, y in test_loader:
            x, y = x.to(device), y.to(device)
            total += nn.functional.mse_loss(model(x), y, reduction="sum")
            torch_xla.sync()
    print("eval", epoch, total.item(), flush=True)
"""


def _line(text: str) -> int:
    [line] = [i for i, s in enumerate(SCRIPT.splitlines(), 1) if s.startswith(text)]
    return line


TRAIN_LOADER, TEST_LOADER = 101, 202


def _events(path: str, epochs: int = 1) -> Trace:
    """The events the hook writes for ``epochs`` epochs of SCRIPT (one row per boundary)."""
    trace = Trace()
    t = 0.0
    row = 0

    def add(event: dict) -> None:
        trace.add({"t": t, **event})

    def boundary(line: int, counted: bool, trains: bool, batch=None, compiles=(), reads=()):
        nonlocal row, t
        row += 1
        t += 0.1
        for graph in compiles:
            frame = {"path": path, "line": line, "function": "<module>"}
            add(
                {
                    "event": "compile",
                    "step": row,
                    "cause": "user torch_xla.sync",
                    "graph_hash": graph,
                    "location": frame,
                    "frames": [frame],
                }
            )
        for kind, at in reads:
            frame = {"path": path, "line": at, "function": "<module>"}
            add(
                {
                    "event": "host_read",
                    "step": row,
                    "kind": kind,
                    "location": frame,
                    "count": 1,
                    "frames": [[path, at]],
                }
            )
        batches = []
        if batch is not None:
            loader, index, size = batch
            inputs = [
                {"shape": [size, 8], "dtype": "float32"},
                {"shape": [size, 1], "dtype": "float32"},
            ]
            batches = [{"loader": loader, "index": index, "inputs": inputs}]
        add(
            {
                "event": "step",
                "step": row,
                "start": t - 0.1,
                "duration_s": 0.1,
                "compiles": len(compiles),
                "compile_s": 0.5 * len(compiles),
                "compile_times_s": [0.5] * len(compiles),
                "executions": 1,
                "transfers": len(reads),
                "transfer_s": 0.0,
                "optimizer_steps": 0,
                "inputs": batches[-1]["inputs"] if batches else None,
                "optimizers": [],
                "boundary": {"path": path, "line": line, "function": "<module>"},
                "boundary_frames": [[path, line]],
                "counted": counted,
                "trains": trains,
                "batches": batches,
            }
        )

    where = {"path": path, "line": _line("train_loader = DataLoader("), "function": "<module>"}
    add(
        {
            "event": "loader",
            "kind": "DataLoader",
            "id": TRAIN_LOADER,
            "location": where,
            "batch_size": 4,
            "drop_last": True,
            "dataset_size": 24,
        }
    )
    where = {"path": path, "line": _line("test_loader = DataLoader("), "function": "<module>"}
    add(
        {
            "event": "loader",
            "kind": "DataLoader",
            "id": TEST_LOADER,
            "location": where,
            "batch_size": 4,
            "drop_last": False,
            "dataset_size": 10,
        }
    )
    # the rendezvous syncs (and reads) before the optimizer exists: the hook counts those rows
    boundary(
        _line('xm.rendezvous("init")'),
        True,
        False,
        compiles=["r"],
        reads=[(".item()", _line('xm.rendezvous("init")'))],
    )
    boundary(_line("torch_xla.sync()  # a setup"), True, False, compiles=["s"])
    for epoch in range(epochs):
        for i in range(6):
            boundary(
                _line("        torch_xla.sync()"),
                True,
                True,
                (TRAIN_LOADER, i + 1, 4),
                compiles=["train"] if epoch == 0 and i == 0 else [],
            )
        for i, size in enumerate((4, 4, 2)):
            first = epoch == 0
            graphs = {0: ["fwd"], 1: ["acc"], 2: ["partial"]}[i] if first else []
            boundary(
                _line("            torch_xla.sync()"),
                False,
                False,
                (TEST_LOADER, i + 1, size),
                compiles=graphs,
            )
    add({"event": "exit", "code": 0, "reason": "finished"})
    figures = {"compiles": 0, "compile_s": 0.0, "executions": 0, "transfers": 0}
    add({"event": "end", "steps": row, "after_last_step": figures, "partial_step_s": 0.01})
    return trace


@pytest.fixture
def script(tmp_path) -> str:
    path = tmp_path / "phases_script.py"
    path.write_text(SCRIPT)
    return str(path)


def test_rows_are_placed_by_the_scripts_loops_and_steps_count_training(script):
    placed = place(_events(script, epochs=2), PhaseMap.of_files([script]))
    phases = [(r.phase, r.number) for r in placed.steps]
    assert phases[:2] == [(SETUP, 0), (SETUP, 0)]  # the setup syncs are rows of their own
    assert phases[2:8] == [(TRAINING, n) for n in range(1, 7)]  # steps start at 1
    assert phases[8:11] == [(EVALUATION, 6)] * 3  # the evaluation after step 6
    assert phases[11:17] == [(TRAINING, n) for n in range(7, 13)]
    compiles = {c.graph_hash: c.phase for c in placed.compiles}
    assert compiles == {
        "r": SETUP,
        "s": SETUP,
        "train": TRAINING,
        "fwd": EVALUATION,
        "acc": EVALUATION,
        "partial": EVALUATION,
    }


def test_setup_syncs_do_not_end_warm_up_and_the_partial_eval_batch_is_xla202(script):
    analysis = analyse(_events(script), PhaseMap.of_files([script]))
    reasons = {c["graph_hash"]: (c["reason"], c["phase"], c["step"]) for c in analysis.compiles}
    assert reasons["r"] == ("setup", SETUP, 0) and reasons["s"] == ("setup", SETUP, 0)
    assert reasons["train"] == ("warm-up", TRAINING, 1)  # not "compiled again after warm-up"
    assert reasons["fwd"][:2] == ("warm-up", EVALUATION)  # the eval loop's own warm-up
    assert reasons["acc"][:2] == ("warm-up", EVALUATION)
    assert reasons["partial"] == ("new-input-shape", EVALUATION, 6)
    [finding] = analysis.findings
    assert finding.code == "XLA202"
    assert finding.location.line == _line("test_loader = DataLoader(")  # the test loader's line
    assert "batch 3 of (2, 8), (2, 1)" in finding.message
    assert "10 samples, batch_size=4" in finding.message
    assert "the evaluation after step 6" in finding.message


def test_report_json_has_phases_rows_loaders_and_text_rows(script):
    report = build_report(
        _events(script),
        command=["python", script],
        target=script,
        steps_requested=20,
        wall_s=1.0,
        events_file="e.jsonl",
        device={"pjrt_device": "CPU", "cpu_devices": 8},
        phases=PhaseMap.of_files([script]),
    )
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(report, REPORT_SCHEMA)
    assert report["steps_traced"] == 6
    assert [s["phase"] for s in report["steps"]][:3] == [SETUP, SETUP, TRAINING]
    assert [s["step"] for s in report["steps"] if s["phase"] == TRAINING] == [1, 2, 3, 4, 5, 6]
    test_line = _line("test_loader = DataLoader(")
    eval_batches = [b for s in report["steps"] if s["phase"] == EVALUATION for b in s["batches"]]
    assert [(b["index"], b["loader"]["location"]["line"]) for b in eval_batches] == [
        (1, test_line),
        (2, test_line),
        (3, test_line),
    ]
    loaders = {x["location"]["line"]: x for x in report["loaders"]}
    assert loaders[test_line]["batches"] == {"4": 2, "2": 1}
    assert loaders[test_line]["partial_last_batch"] is True
    assert loaders[_line("train_loader = DataLoader(")]["partial_last_batch"] is False
    [read] = [r for r in report["host_reads"] if r["phase"] == SETUP]
    assert read["steps"] == [0]
    text = render_text(report)
    assert "  setup" in text and "   eval" in text and "(3 boundaries)" in text


def test_without_a_map_uncounted_rows_join_the_next_counted_one(script):
    """--no-static: the hook's own steps (a sync without an optimizer step joins the next)."""
    placed = place(_events(script), None)
    # the rendezvous rows were counted by the hook (no optimizer yet): not known as setup
    assert [r.phase for r in placed.steps] == [None, None] + [TRAINING] * 6
    assert [r.number for r in placed.steps] == [0, 0, 1, 2, 3, 4, 5, 6]
    assert len(placed.before_end) == 3  # the eval rows: the hook's partial step at the end
    final = analyse(_events(script), None).final
    assert final is not None and final.final and final.compiles == 3


@pytest.mark.runtime
def test_traced_script_matches_torch_xla_ground_truth(tmp_path):
    """The real script on CPU: compiles and host reads equal torch_xla's own counts from a
    bare run (CompileTime, TransferFromDeviceTime), training's first compile is warm-up,
    the evaluation graphs are in the evaluation phase, and the test loader's last batch is
    XLA202 at its DataLoader line."""
    pytest.importorskip("torch_xla")
    path = tmp_path / "phases_script.py"
    path.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PJRT_DEVICE": "CPU"}
    bare = tmp_path / "bare.py"
    bare.write_text(
        "import json, runpy, sys\n"
        "import torch_xla.debug.metrics as met\n"
        "sys.argv = sys.argv[1:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "print(json.dumps({'compiles': (met.metric_data('CompileTime') or [0])[0],"
        " 'reads': (met.metric_data('TransferFromDeviceTime') or [0])[0]}))\n"
    )
    truth = subprocess.run(
        [sys.executable, str(bare), str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    expected = json.loads(truth.stdout.strip().splitlines()[-1])
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "xla_lint",
            "trace",
            "--json",
            "--steps",
            "20",
            "--",
            "python",
            str(path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(proc.stdout)
    assert report["status"] == "finished", proc.stderr
    assert len(report["compiles"]) == expected["compiles"] == 6
    assert sum(r["count"] for r in report["host_reads"]) == expected["reads"]
    by_phase = [(c["phase"], c["reason"]) for c in report["compiles"]]
    assert by_phase[:3] == [(SETUP, "setup"), (SETUP, "setup"), (TRAINING, "warm-up")]
    assert [p for p, _ in by_phase[3:]] == [EVALUATION] * 3
    assert not any(c["after_warmup"] for c in report["compiles"] if c["phase"] == TRAINING)
    assert [s["step"] for s in report["steps"] if s["phase"] == TRAINING] == list(range(1, 13))
    [finding] = report["findings"]
    assert finding["code"] == "XLA202"
    assert finding["location"]["line"] == _line("test_loader = DataLoader(")
    assert [d["status"] for d in report["static"] if d["code"] == "XLA202"] == ["confirmed"]
