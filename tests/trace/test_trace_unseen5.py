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


def test_compile_samples_go_to_the_read_that_holds_them_and_the_boundary_after_a_read():
    """B3, nanoGPT-TPU's first evaluation batch as the hook recorded it (starts and seconds):
    the :290 read's sample began 0.4 ms after the :287 read ended (within the 2 ms slack it
    was :287's: the :290 block took the boundary's 1.9 s, the boundary's block none, and the
    sample left in :287 was a phantom compile "that torch_xla's debug output does not
    report"); the first block at :281 is `predicted[mask]`'s hidden read of the element
    count, before the line's `.item()`. evalfirst3.py's boundary sample began 0.6 ms after
    the last read ended (the second test)."""
    from xla_lint.trace.events import Compile, HostRead, Location
    from xla_lint.trace.report import pair_compile_times

    path = "/x/train_tpu.py"
    row = Step.from_json(
        {
            "step": 1,
            "duration_s": 6.2,
            "compiles": 6,
            "compile_s": 6.09,
            "executions": 6,
            "transfers": 8,
            "transfer_s": 0.0,
            "optimizer_steps": 0,
            "inputs": None,
            "optimizers": [],
            "start": 0.0005,
            "boundary_at": 4.284496,
            "compile_samples": [
                [0.024728, 0.041567],
                [0.070467, 1.216],
                [1.329104, 1.225199],
                [2.560592, 1.635121],
                [4.211623, 0.071596],
                [4.288481, 1.901835],
            ],
        }
    )
    read = "most likely user code trying to access tensor value before torch_xla.sync"
    blocks = [Compile(1, read, g, Location(path, n), []) for g, n in (("a", 281), ("b", 281))]
    blocks += [Compile(1, read, g, Location(path, n), []) for g, n in (("c", 284), ("d", 287))]
    blocks += [Compile(1, read, "e", Location(path, 290), [])]
    blocks += [Compile(1, "user torch_xla.sync", "f", Location(path, 301), [])]
    spans = {281: [0.068402, 1.32639], 284: [1.327372, 2.558382], 287: [2.559166, 4.210672]}
    spans[290] = [4.211208, 4.284184]
    reads = [HostRead(1, ".item()", Location(path, n), 1, None, [s]) for n, s in spans.items()]
    times, extra = pair_compile_times(row, blocks, reads)
    assert times == [0.041567, 1.216, 1.225199, 1.635121, 0.071596, 1.901835]
    assert extra == []  # 6 samples, 6 blocks: no compile torch_xla did not report


def test_a_sample_that_began_after_the_boundary_is_not_the_read_before_it():
    """B3, evalfirst3.py's second evaluation's first row: its boundary's compile began 0.6 ms
    after the `.item()` read ended, after the sync began: the boundary's, not the read's."""
    from xla_lint.trace.events import Compile, HostRead, Location
    from xla_lint.trace.report import pair_compile_times

    path = "/x/evalfirst3.py"
    row = Step.from_json(
        {
            "step": 12,
            "duration_s": 0.3,
            "compiles": 2,
            "compile_s": 0.29,
            "executions": 2,
            "transfers": 1,
            "transfer_s": 0.0,
            "optimizer_steps": 0,
            "inputs": None,
            "optimizers": [],
            "start": 5.919893,
            "boundary_at": 6.131435,
            "compile_samples": [[5.922879, 0.20726], [6.131849, 0.087676]],
        }
    )
    blocks = [
        Compile(12, "most likely user code trying to access", "a", Location(path, ITEM), []),
        Compile(12, "user torch_xla.sync", "b", Location(path, BATCH_SYNC), []),
    ]
    reads = [HostRead(12, ".item()", Location(path, ITEM), 1, None, [[5.922176, 6.131294]])]
    assert pair_compile_times(row, blocks, reads) == ([0.20726, 0.087676], [])
