"""Issue 23's trace-unseen5 bugs on hand-made events shaped like the hook's rows of
``EVAL_FIRST`` (nanoGPT-TPU's pattern: an evaluation before the first optimizer step, with
more than 8 syncs and a trailing sync outside its loops; the boundary before the optimizer
step): B1 (that trailing sync was a training step that ended warm-up), B2 (a later evaluation
pass that compiled new graphs was warm-up) and B5 (``--explain names the line`` in a run with
``--explain``)."""

from __future__ import annotations

from xla_lint.trace.events import Step, Trace
from xla_lint.trace.phases import EVALUATION, TRAINING, PhaseMap
from xla_lint.trace.report import _warmup, analyse

EVAL_FIRST = """\
import torch, torch_xla
d = torch_xla.device()
model = torch.nn.Linear(8, 2).to(d)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

def evaluate():
    model.eval()
    for split in ['train', 'val']:
        for k in range(3):
            with torch.no_grad():
                v = model(torch.randn(4, 8, device=d)).sum().item()
            torch_xla.sync()
        torch_xla.sync()
    model.train()
    torch_xla.sync()          # trailing sync, outside the eval loops

it = 0
while True:
    if it % 4 == 0:
        evaluate()
    loss = model(torch.randn(4, 8, device=d)).sum()
    loss.backward()
    torch_xla.sync()          # boundary BEFORE the optimizer step (as nanoGPT-TPU does)
    opt.step()
    opt.zero_grad()
    it += 1
    if it > 7:
        break
"""
ITEM, BATCH_SYNC, SPLIT_SYNC, TRAILING, CALL, TRAIN_SYNC = 11, 12, 13, 15, 20, 23
INPUTS = [{"shape": [4, 8], "dtype": "float32"}]


def _events(path: str, second_pass_graphs: bool = True, explain: bool = False) -> Trace:
    """The hook's rows of EVAL_FIRST (26, as a real run wrote them): the first evaluation's 9
    syncs (the hook counts the 9th and the training loop's first, an optimizer having made 8
    boundaries without a step), 4 training rows, the second evaluation (its first batch in
    the row of iteration 3's optimizer step, which that row's new graphs fold in), 4 more."""
    trace = Trace()
    trace.add(
        {
            "event": "start",
            "schema": 1,
            "pid": 1,
            "kind": "path",
            "target": path,
            "steps_limit": 1000,
            "explain": explain,
        }
    )
    row = 0

    def frame(line: int, function: str) -> dict:
        return {"path": path, "line": line, "function": function}

    def add(line, frames, counted, trains, compiles=(), inputs=True):
        nonlocal row
        row += 1
        function = "evaluate" if line < 16 else "<module>"
        for at, graph in compiles:
            stack = [frame(at, function)] + ([frame(CALL, "<module>")] if at < 16 else [])
            trace.add(
                {
                    "event": "compile",
                    "step": row,
                    "cause": "user torch_xla.sync" if at == line else "user code reads a value",
                    "graph_hash": graph,
                    "location": stack[0],
                    "frames": stack,
                }
            )
        trace.add(
            {
                "event": "step",
                "step": row,
                "start": row * 0.1,
                "duration_s": 0.1,
                "compiles": len(compiles),
                "compile_s": 0.2 * len(compiles),
                "compile_times_s": [0.2] * len(compiles),
                "executions": 1,
                "transfers": 0,
                "transfer_s": 0.0,
                "optimizer_steps": 0,
                "inputs": INPUTS if inputs else None,
                "optimizers": [],
                "boundary": frame(line, function),
                "boundary_frames": [[path, f] for f in frames],
                "counted": counted,
                "trains": trains,
                "batches": [],
            }
        )

    def evaluation(first_row_trains: bool, graphs: list) -> None:
        for split in range(2):
            for k in range(3):
                first = split == 0 and k == 0
                add(
                    BATCH_SYNC,
                    [BATCH_SYNC, CALL],
                    first and first_row_trains,
                    first and first_row_trains,
                    graphs if first else (),
                )
            add(SPLIT_SYNC, [SPLIT_SYNC, CALL], False, False, inputs=False)

    evaluation(False, [(ITEM, "eval")])
    row_9_counted = True  # NO_OPTIMIZER_SPANS boundaries passed: the hook counts every one
    add(TRAILING, [TRAILING, CALL], row_9_counted, False, inputs=False)
    add(TRAIN_SYNC, [TRAIN_SYNC], True, False, [(TRAIN_SYNC, "fwd")])  # iteration 0, no step
    add(TRAIN_SYNC, [TRAIN_SYNC], True, True, [(TRAIN_SYNC, "step")])  # its update folded in
    add(TRAIN_SYNC, [TRAIN_SYNC], True, True, [(TRAIN_SYNC, "step2")])
    add(TRAIN_SYNC, [TRAIN_SYNC], True, True)
    # iteration 3's optimizer step runs after its boundary: the next evaluation's first row
    # trains, and its first batch's graphs hold that pending update (new graphs)
    evaluation(True, [(ITEM, "eval2"), (BATCH_SYNC, "eval2sync")] if second_pass_graphs else [])
    add(TRAILING, [TRAILING, CALL], False, False, inputs=False)
    add(TRAIN_SYNC, [TRAIN_SYNC], False, False)
    for _ in range(3):
        add(TRAIN_SYNC, [TRAIN_SYNC], True, True)
    trace.add({"event": "exit", "code": 0, "reason": "finished"})
    figures = {"compiles": 0, "compile_s": 0.0, "executions": 0, "transfers": 0}
    trace.add({"event": "end", "steps": row, "after_last_step": figures, "partial_step_s": 0.0})
    return trace


def _script(tmp_path) -> str:
    path = tmp_path / "evalfirst.py"
    path.write_text(EVAL_FIRST)
    return str(path)


def test_a_sync_before_the_first_optimizer_step_is_no_step_and_does_not_end_warm_up(tmp_path):
    """B1: the evaluation function's trailing sync (called from the training loop) and the
    boundary before the first optimizer step join the first training step."""
    script = _script(tmp_path)
    analysis = analyse(_events(script, second_pass_graphs=False), PhaseMap.of_files([script]))
    training = [r for r in analysis.trace.steps if r.phase == TRAINING]
    assert [r.number for r in training] == list(range(1, 8))  # 8 optimizer steps, 7 rows
    assert training[0].compiles == 2  # fwd (iteration 0) and step (its update)
    reasons = {c["graph_hash"]: (c["reason"], c["step"]) for c in analysis.compiles}
    assert reasons["eval"] == ("warm-up", 0)
    assert reasons["fwd"] == ("warm-up", 1) and reasons["step"] == ("warm-up", 1)
    assert reasons["step2"] == ("warm-up", 2)  # not "compiled again after warm-up"
    assert analysis.findings == []


def test_training_warm_up_ends_only_at_a_quiet_row_once_an_optimizer_stepped():
    """B1's rule where rows are not placed (``--no-static``, or a row the hook counted): a
    training row that compiled nothing before any optimizer step does not end warm-up."""

    def row(n: int, compiles: int, trains: bool) -> Step:
        return Step(n, 0.1, compiles, 0.0, [], 0, 0, 0.0, 0, None, [], None, trains=trains)

    rows = [row(1, 0, False), row(2, 1, False), row(3, 1, True), row(4, 1, True), row(5, 0, True)]
    assert _warmup(rows) == {1, 2, 3, 4}
    assert _warmup([row(1, 1, True), row(2, 0, True), row(3, 1, True)]) == {1}
    # every row compiled: the first two from the first that trained
    assert _warmup([row(1, 0, False), row(2, 1, True), row(3, 1, True), row(4, 1, True)]) == {
        1,
        2,
        3,
    }
    # no optimizer steps at all: the first quiet row, as before
    assert _warmup([row(1, 1, False), row(2, 0, False), row(3, 1, False)]) == {1}


def test_a_later_evaluation_pass_that_compiles_new_graphs_is_a_recompile(tmp_path):
    """B2: the second evaluation's first batch ran in the row of the optimizer step before it
    (it trains): its new graphs are not that loop's warm-up, whose first pass is the first
    evaluation; the inputs are the loop's own earlier ones, so the graph changed."""
    script = _script(tmp_path)
    analysis = analyse(_events(script), PhaseMap.of_files([script]))
    got = {c["graph_hash"]: c for c in analysis.compiles}
    assert got["eval"]["reason"] == "warm-up"
    for graph in ("eval2", "eval2sync"):
        assert got[graph]["phase"] == EVALUATION and got[graph]["after_warmup"]
        assert got[graph]["reason"] == "same-input-shapes"
    assert {f.location.line for f in analysis.findings} == {ITEM, BATCH_SYNC}
    message = analysis.findings[0].message
    assert message.startswith("the evaluation after step 3 compiled again after warm-up")
    assert "its update is still pending" in message and "--explain" not in message


def test_recompile_message_offers_explain_only_without_it(tmp_path):
    """B5: "--explain names the line" only in a run without --explain."""
    script = _script(tmp_path)
    for explain in (False, True):
        trace = _events(script, second_pass_graphs=False, explain=explain)
        # step 5's training row compiles a new graph with the same inputs
        trace.compiles.append(
            trace.compiles[-1].__class__.from_json(
                {
                    "event": "compile",
                    "step": 24,
                    "cause": "user torch_xla.sync",
                    "graph_hash": "late",
                    "location": {"path": script, "line": TRAIN_SYNC, "function": "<module>"},
                    "frames": [{"path": script, "line": TRAIN_SYNC, "function": "<module>"}],
                }
            )
        )
        trace.steps[23].compiles = 1
        trace.steps[23].compile_times_s = [0.2]
        findings = analyse(trace, PhaseMap.of_files([script])).findings
        same = [f for f in findings if f.title == "a new graph with the same input shapes"]
        assert same and any(f.location.line == TRAIN_SYNC for f in same)
        for finding in same:
            assert ("--explain names the line" in finding.message) is not explain
