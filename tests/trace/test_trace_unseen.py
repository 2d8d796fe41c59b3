"""Issue 23's unseen-script bugs on hand-made events (trace-unseen B1-B3, B5): an evaluation
loop with no sync of its own, a rebuilt model's evaluation, ``--no-static`` rows, ``--explain``
diffs and relative JSON locations."""

from __future__ import annotations

from tests.trace.test_trace_phases import SCRIPT, _events, _line
from xla_lint.trace.events import Trace
from xla_lint.trace.phases import EVALUATION, TRAINING, PhaseMap
from xla_lint.trace.report import analyse, build_report

# trace-unseen's closure_eval.py: the evaluation loop reads `.item()` per batch and never syncs
CLOSURE_EVAL = """\
import torch, torch.nn as nn
import torch_xla, torch_xla.core.xla_model as xm
from torch.utils.data import DataLoader, TensorDataset

dev = torch_xla.device()
model = nn.Linear(16, 4).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(TensorDataset(torch.randn(64, 16), torch.randint(0, 4, (64,))), batch_size=8)
test = DataLoader(TensorDataset(torch.randn(20, 16), torch.randint(0, 4, (20,))), batch_size=8)
for epoch in range(2):
    for x, y in train:
        loss = nn.functional.cross_entropy(model(x.to(dev)), y.to(dev))
        loss.backward()
        opt.step()
        torch_xla.sync()
    correct = 0
    with torch.no_grad():
        for x, y in test:
            correct += (model(x.to(dev)).argmax(1) == y.to(dev)).sum().item()
"""
TRAIN, TEST = 1, 2


def _closure_eval(path: str, train_rows: int = 3) -> Trace:
    """Rows 1..train_rows train (row 1 compiles); the evaluation ran inside the last row (its
    batches of 8, 8, 4 and two compiles at the `.item()` line, before that row's step)."""
    sync = CLOSURE_EVAL.splitlines().index("        torch_xla.sync()") + 1
    item = (
        CLOSURE_EVAL.splitlines().index(
            "            correct += (model(x.to(dev)).argmax(1) == y.to(dev)).sum().item()"
        )
        + 1
    )
    trace = Trace()
    for id_, line, size in ((TRAIN, 8, 64), (TEST, 9, 20)):
        trace.add(
            {
                "event": "loader",
                "kind": "DataLoader",
                "id": id_,
                "location": {"path": path, "line": line, "function": "<module>"},
                "batch_size": 8,
                "drop_last": False,
                "dataset_size": size,
            }
        )

    def batch(loader: int, index: int, n: int) -> dict:
        inputs = [{"shape": [n, 16], "dtype": "float32"}, {"shape": [n], "dtype": "int64"}]
        return {"loader": loader, "index": index, "inputs": inputs}

    def compile_at(row: int, line: int, graph: str) -> None:
        frame = {"path": path, "line": line, "function": "<module>"}
        trace.add(
            {
                "event": "compile",
                "step": row,
                "cause": "c",
                "graph_hash": graph,
                "location": frame,
                "frames": [frame],
            }
        )

    for row in range(1, train_rows + 1):
        batches = [batch(TRAIN, row, 8)]
        graphs = ["train"] if row == 1 else []
        if row == train_rows:  # the evaluation after the step before
            batches = [batch(TEST, 1, 8), batch(TEST, 2, 8), batch(TEST, 3, 4), *batches]
            graphs = ["fwd", "last"]
        for g in graphs:
            compile_at(row, sync if g == "train" else item, g)
        trace.add(
            {
                "event": "step",
                "step": row,
                "start": float(row),
                "duration_s": 0.1,
                "compiles": len(graphs),
                "compile_s": 0.5 * len(graphs),
                "compile_times_s": [0.5] * len(graphs),
                "executions": 1,
                "transfers": 0,
                "transfer_s": 0.0,
                "optimizer_steps": row,
                "inputs": batches[-1]["inputs"],
                "optimizers": [],
                "boundary": {"path": path, "line": sync, "function": "<module>"},
                "boundary_frames": [[path, sync]],
                "counted": True,
                "trains": True,
                "optimizer_frames": [[path, sync - 1]],
                "batches": batches,
            }
        )
    return trace


def test_an_eval_loop_without_a_sync_has_its_own_warm_up_and_its_last_batch_is_xla202(tmp_path):
    path = tmp_path / "closure_eval.py"
    path.write_text(CLOSURE_EVAL)
    analysis = analyse(_closure_eval(str(path)), PhaseMap.of_files([str(path)]))
    got = {c["graph_hash"]: (c["reason"], c["phase"], c["step"]) for c in analysis.compiles}
    assert got["train"] == ("warm-up", TRAINING, 1)
    assert got["fwd"] == ("warm-up", EVALUATION, 2)  # its first pass, after step 2
    assert got["last"] == ("new-input-shape", EVALUATION, 2)  # the batch of 4
    [finding] = analysis.findings
    assert finding.code == "XLA202" and finding.location.line == 9  # the test loader
    assert "the evaluation after step 2 got batch 3 of (4, 16), (4,)" in finding.message
    report = build_report(
        _closure_eval(str(path)),
        command=["python", str(path)],
        target=str(path),
        steps_requested=20,
        wall_s=1.0,
        events_file="e.jsonl",
        device={},
        phases=PhaseMap.of_files([str(path)]),
    )
    # the steps table does not call the row warm-up while a compile in it is after warm-up
    assert [s["warmup"] for s in report["steps"]] == [True, False, False]


def _compile(trace: Trace, path: str, row: int, line: int, graph: str) -> None:
    frame = {"path": path, "line": line, "function": "<module>"}
    trace.add(
        {
            "event": "compile",
            "step": row,
            "cause": "c",
            "graph_hash": graph,
            "location": frame,
            "frames": [frame],
        }
    )


def _script(tmp_path) -> str:
    path = tmp_path / "phases_script.py"
    path.write_text(SCRIPT)
    return str(path)


def test_an_eval_pass_that_compiles_like_a_first_pass_is_a_new_models_warm_up(tmp_path):
    script = _script(tmp_path)
    eval_line = _line("            torch_xla.sync()")
    # epoch 2's evaluation (rows 18-20) compiles new graphs at every batch the first did
    trace = _events(script, epochs=2)
    for row, graph in ((18, "fwd2"), (19, "acc2"), (20, "partial2")):
        _compile(trace, script, row, eval_line, graph)
    got = {
        c["graph_hash"]: c["reason"] for c in analyse(trace, PhaseMap.of_files([script])).compiles
    }
    assert got["fwd2"] == got["acc2"] == "warm-up"
    assert got["partial2"] == "new-input-shape"  # that model's last batch is XLA202 too
    # one new graph in a later pass: a graph that changed, a recompile
    trace = _events(script, epochs=2)
    _compile(trace, script, 19, eval_line, "acc2")
    got = {c["graph_hash"]: c for c in analyse(trace, PhaseMap.of_files([script])).compiles}
    assert got["acc2"]["reason"] == "same-input-shapes" and got["acc2"]["after_warmup"]


def test_without_phases_syncs_outside_training_are_unplaced_and_diffs_are_the_steps_own(tmp_path):
    script = _script(tmp_path)
    train_line = _line("        torch_xla.sync()")
    trace = _events(script, epochs=2)  # epoch 1's eval rows (9-11) compile fwd, acc, partial
    # row 12 (after the eval rows) and row 13 (after a training row) compile new step graphs
    for row in (12, 13):
        _compile(trace, script, row, train_line, f"train{row}")
        trace.add(
            {
                "event": "ir_diff",
                "step": row,
                "changes": [{"before": "a", "after": "b", "location": "f@x.py:1"}],
                "changed": 1,
            }
        )
    analysis = analyse(trace, None)
    got = {c["graph_hash"]: c for c in analysis.compiles}
    for graph in ("fwd", "acc", "partial"):
        assert got[graph]["reason"] == "unplaced" and not got[graph]["after_warmup"]
    assert (
        got["train12"]["after_warmup"] and "explain" not in got["train12"]
    )  # another loop's graph
    assert got["train13"]["after_warmup"] and got["train13"]["explain"]
    assert {f.location.line for f in analysis.findings} == {train_line}


def test_json_locations_are_relative_to_the_working_folder(tmp_path, monkeypatch):
    script = _script(tmp_path)
    monkeypatch.chdir(tmp_path)
    report = build_report(
        _events(script),
        command=["python", script],
        target=script,
        steps_requested=20,
        wall_s=1.0,
        events_file="e.jsonl",
        device={},
        phases=PhaseMap.of_files([script]),
    )
    [finding] = report["findings"]
    assert finding["location"]["path"] == "phases_script.py"
    assert {c["location"]["path"] for c in report["compiles"]} == {"phases_script.py"}
    assert report["target"] == script  # the target stays absolute
