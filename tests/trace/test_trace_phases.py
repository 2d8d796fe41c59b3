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


# pytorch/xla's examples/train_resnet_base.py, cut down: the step function (backward and the
# optimizer step) runs through torch_xla.compile, so the loop's body reads as an evaluation.
COMPILED = """\
import torch_xla


class Trainer:
    def __init__(self, model, optimizer, loader):
        self.model, self.optimizer, self.loader = model, optimizer, loader
        self.compiled_step_fn = torch_xla.compile(self.step_fn)

    def step_fn(self, data, target):
        self.optimizer.zero_grad()
        loss = self.model(data).sum()
        loss.backward()
        self.optimizer.step()
        return loss

    def train_loop_fn(self):
        self.model.train()
        for step, (data, target) in enumerate(self.loader):
            loss = self.compiled_step_fn(data, target)
"""


def test_a_loop_an_optimizer_step_ran_in_is_training(tmp_path):
    """Each step of the compiled loop ends three rows (the MpDeviceLoader's sync at the loop
    line, torch_xla.compile's syncs on entry and exit); the loop reads as an evaluation
    statically, but the optimizer step ran inside it: its compile is warm-up, not a
    recompile after warm-up, and its rows are training steps 1, 2, 3."""
    path = tmp_path / "compiled_step.py"
    path.write_text(COMPILED)
    lines = COMPILED.splitlines()
    loop = 1 + next(i for i, s in enumerate(lines) if s.strip().startswith("for step,"))
    call, opt = loop + 1, 1 + next(i for i, s in enumerate(lines) if "optimizer.step()" in s)
    phases = PhaseMap.of_files([str(path)])
    assert phases.of_frames([[str(path), call]])[0] == EVALUATION  # what the body says
    # a loop in a file the map does not hold, called from the known file's top level: not setup
    top = 1 + next(i for i, s in enumerate(lines) if s.startswith("class Trainer"))
    assert phases.of_frames([["/elsewhere/base.py", 68], [str(path), top]]) == (None, None)
    assert phases.of_frames([[str(path), top]])[0] == SETUP
    trace = Trace()
    row = 0
    for step in range(3):
        for line, trains in ((loop, False), (call, False), (call, True)):
            row += 1
            if trains and step == 0:
                frame = {"path": str(path), "line": call, "function": "train_loop_fn"}
                trace.add(
                    {
                        "event": "compile",
                        "t": row,
                        "step": row,
                        "cause": "torch_xla.compile",
                        "graph_hash": "step",
                        "location": frame,
                        "frames": [frame],
                    }
                )
            trace.add(
                {
                    "event": "step",
                    "t": row,
                    "step": row,
                    "start": row - 1.0,
                    "duration_s": 1.0,
                    "compiles": int(trains and step == 0),
                    "compile_s": 0.0,
                    "compile_times_s": [0.5] if trains and step == 0 else [],
                    "executions": 1,
                    "transfers": 0,
                    "optimizer_steps": step + trains,
                    "inputs": [{"shape": [4, 3, 32, 32], "dtype": "float32"}],
                    "optimizers": [],
                    "boundary": {"path": str(path), "line": line, "function": "train_loop_fn"},
                    "boundary_frames": [[str(path), line]],
                    "optimizer_frames": [[str(path), opt], [str(path), call]] if trains else [],
                    "counted": trains,
                    "trains": trains,
                }
            )
    # the loader's sync when it runs out (test_train_mp_mnist.py), then a setup sync: the
    # first joins step 3, it is not a step 4
    for line in (loop, top):
        row += 1
        trace.add(
            {
                "event": "step",
                "t": row,
                "step": row,
                "start": row - 1.0,
                "duration_s": 1.0,
                "compiles": 0,
                "compile_s": 0.0,
                "executions": 1,
                "transfers": 0,
                "optimizer_steps": 3,
                "inputs": None,
                "optimizers": [],
                "boundary": {"path": str(path), "line": line, "function": "f"},
                "boundary_frames": [[str(path), line]],
                "counted": False,
                "trains": False,
            }
        )
    placed = place(trace, phases)
    assert [(r.phase, r.number) for r in placed.steps] == [
        *[(TRAINING, n) for n in (1, 2, 3)],
        (SETUP, 3),
    ]
    analysis = analyse(trace, phases)
    assert [(c["reason"], c["phase"], c["step"]) for c in analysis.compiles] == [
        ("warm-up", TRAINING, 1)
    ]
    assert analysis.findings == []


# pytorch/xla's test/test_train_mp_mnist.py, cut down: both loops read MpDeviceLoaders (over
# xu.SampleGenerator with --fake_data: no DataLoader event), the evaluation counts from a
# Python 0, and the epoch loop around them (setup work) reads the accuracy after evaluation.
MP_MNIST = """\
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl


def train_loop_fn(loader):
    for data, target in loader:
        optimizer.zero_grad()
        loss_fn(model(data), target).backward()
        xm.optimizer_step(optimizer)


def test_loop_fn(loader):
    correct = 0
    for data, target in loader:
        pred = model(data).max(1, keepdim=True)[1]
        correct += pred.eq(target.view_as(pred)).sum()
    accuracy = correct.item()
    return xm.mesh_reduce("test_accuracy", accuracy, max)


train_device_loader = pl.MpDeviceLoader(train_loader, device)
test_device_loader = pl.MpDeviceLoader(test_loader, device)
for epoch in range(2):
    train_loop_fn(train_device_loader)
    accuracy = test_loop_fn(test_device_loader)
"""


def _mp_mnist_events(
    path: str, epoch2: dict | None = None, eval2: str | None = None, sizes=(64, 64, 64, 64)
) -> Trace:
    """The hook's rows of MP_MNIST's two epochs (4 training steps, 4 eval batches each): the
    eval loader's first sync (no batch, nothing compiled), batches 1 and 2 compiling (the
    count starts from a Python 0), a last sync when the loader runs out; then the
    mesh_reduce's two compiles in the epoch loop. ``epoch2``: graph per line compiled in the
    second epoch's setup rows; ``eval2``: a graph its second evaluation batch compiles;
    ``sizes``: the evaluation batches' leading dimensions."""
    lines = MP_MNIST.splitlines()

    def at(text: str) -> int:
        return 1 + next(i for i, s in enumerate(lines) if s.strip().startswith(text))

    train, opt, test = at("for data, target in loader:"), at("xm.optimizer_step"), 0
    test = 1 + next(
        i for i, s in enumerate(lines) if i + 1 > train and s.strip().startswith("for data,")
    )
    reduce, call_train, call_test = at("return xm.mesh_reduce"), at("train_loop_fn(t"), at("acc")
    trace = Trace()
    row = 0
    trace.add(
        {
            "event": "loader",
            "t": 0.0,
            "kind": "MpDeviceLoader",
            "id": 7,
            "wraps": 8,
            "location": {"path": path, "line": at("test_device_loader ="), "function": "<module>"},
        }
    )

    def boundary(frames, trains=False, batch=True, graphs=(), size=64):
        nonlocal row
        row += 1
        for graph in graphs:
            stack = [{"path": path, "line": line, "function": "f"} for line in frames]
            trace.add(
                {
                    "event": "compile",
                    "t": row,
                    "step": row,
                    "cause": "torch_xla.sync in parallel loader at step end",
                    "graph_hash": graph,
                    "location": stack[0],
                    "frames": stack,
                }
            )
        inputs = [{"shape": [size, 1, 28, 28], "dtype": "float32"}] if batch else None
        trace.add(
            {
                "event": "step",
                "t": row,
                "step": row,
                "start": row - 1.0,
                "duration_s": 1.0,
                "compiles": len(graphs),
                "compile_s": 0.5 * len(graphs),
                "compile_times_s": [0.5] * len(graphs),
                "executions": 1,
                "transfers": 0,
                "optimizer_steps": 0,
                "inputs": inputs,
                "optimizers": [],
                "boundary": {"path": path, "line": frames[0], "function": "f"},
                "boundary_frames": [[path, line] for line in frames],
                "optimizer_frames": [[path, opt], [path, call_train]] if trains else [],
                "counted": trains,
                "trains": trains,
                "batches": [{"loader": None, "index": 1, "inputs": inputs}] if batch else [],
            }
        )

    for epoch in (1, 2):
        for i in range(4):
            graphs = ["train"] if epoch == 1 and i == 0 else []
            boundary([train, call_train], trains=True, graphs=graphs)
        boundary([test, call_test], batch=False)  # the eval loader's first sync
        for i in range(4):
            graphs = {0: ["eval-int"], 1: ["eval-tensor"]}.get(i, []) if epoch == 1 else []
            graphs = [eval2] if eval2 and epoch == 2 and i == 1 else graphs
            if epoch == 1 and i == 2 and sizes[2] != sizes[1]:
                graphs = ["eval-shape"]
            boundary([test, call_test], graphs=graphs, size=sizes[i])
        boundary([test, call_test], batch=False)  # the loader ran out
        for i in range(2):
            graphs = [f"reduce{i}"] if epoch == 1 else (epoch2 or {}).get(i, [])
            boundary([reduce, call_test], batch=False, graphs=graphs)
    return trace


def test_an_evaluation_loops_first_pass_is_its_warm_up_whatever_its_loader(tmp_path, monkeypatch):
    """test_train_mp_mnist.py's evaluation over an MpDeviceLoader (no DataLoader event): its
    first row compiles nothing (the loader's sync before the first batch), its first two
    batches compile (``correct += ...`` from a Python 0): both are the loop's warm-up, not
    "compiled again after warm-up"; the mesh_reduce's compiles in the epoch loop after it are
    setup, not after warm-up; the same line compiling a new graph in the next epoch is a
    recompile."""
    monkeypatch.chdir(tmp_path)  # messages name files relative to it
    path = tmp_path / "mp_mnist.py"
    path.write_text(MP_MNIST)
    phases = PhaseMap.of_files([str(path)])
    analysis = analyse(_mp_mnist_events(str(path)), phases)
    reasons = {c["graph_hash"]: (c["reason"], c["phase"], c["step"]) for c in analysis.compiles}
    assert reasons == {
        "train": ("warm-up", TRAINING, 1),
        "eval-int": ("warm-up", EVALUATION, 4),
        "eval-tensor": ("warm-up", EVALUATION, 4),
        "reduce0": ("setup", SETUP, 4),
        "reduce1": ("setup", SETUP, 4),
    }
    assert analysis.findings == []
    again = analyse(_mp_mnist_events(str(path), epoch2={0: ["reduce-new"]}), phases)
    [finding] = again.findings
    assert finding.title == "a setup line compiled again"
    reduce = 1 + MP_MNIST.splitlines().index(
        '    return xm.mesh_reduce("test_accuracy", accuracy, max)'
    )
    assert f"setup after step 8 compiled a new graph at mp_mnist.py:{reduce}," in finding.message
    # past its first pass, the evaluation's recompile is one; --explain (training steps' IR
    # only) is not offered for it
    [finding] = analyse(_mp_mnist_events(str(path), eval2="eval-new"), phases).findings
    assert finding.title == "a new graph with the same input shapes"
    assert finding.message.startswith("the evaluation after step 8 compiled again after warm-up")
    assert "an earlier batch of the same loop" in finding.message
    assert "--explain" not in finding.message
    # a new input shape inside the first pass (not a loader's remainder) is not warm-up
    shaped = analyse(_mp_mnist_events(str(path), sizes=(64, 64, 48, 64)), phases)
    [finding] = shaped.findings
    assert finding.title == "a new graph for a new input shape"
    assert [c["reason"] for c in shaped.compiles if c["phase"] == EVALUATION] == [
        "warm-up",
        "warm-up",
        "new-input-shape",
    ]
