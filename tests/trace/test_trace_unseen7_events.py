"""Issue 24's trace-unseen7 bug D on stored events: a rank of ``xmp.spawn`` without a step
boundary whose one compile ran after its last step (dellano54/BERT_accuracy's ``xser.save``
after the loop): the ranks table gives that rank the compile's time, as the steps table."""

from __future__ import annotations

import pytest

from xla_lint.trace.events import EVENT_SCHEMA, REPORT_SCHEMA, Trace
from xla_lint.trace.report import build_report, render_text

jsonschema = pytest.importorskip("jsonschema")

U = "/u/train.py"
SAVE = {"path": U, "line": 60, "function": "_mp_fn"}


def _trace(events: list[dict]) -> Trace:
    trace = Trace()
    for e in events:
        jsonschema.validate(e, EVENT_SCHEMA)
        trace.add(e)
    return trace


def _rank0() -> list[dict]:
    """One step with a 0.5 s compile, then the save's 9.4 s compile after the last step."""
    return [
        {"event": "start", "t": 0.0, "schema": 1, "pid": 100, "kind": "path", "target": U,
         "steps_limit": 200, "rank": 0, "shared": False},
        {"event": "compile", "t": 0.5, "step": 1, "cause": "user torch_xla.sync",
         "location": {"path": U, "line": 56, "function": "_mp_fn"},
         "frames": [{"path": U, "line": 56, "function": "_mp_fn"}]},
        {"event": "step", "t": 1.0, "step": 1, "duration_s": 0.6, "compiles": 1,
         "compile_s": 0.5, "compile_times_s": [0.5], "executions": 1, "transfers": 0,
         "inputs": None, "rank": 0},
        {"event": "compile", "t": 11.0, "step": 2, "cause": "user code trying to access tensor value",
         "location": SAVE, "frames": [SAVE]},
        {"event": "exit", "t": 12.0, "code": 0, "reason": "finished"},
        {"event": "end", "t": 12.0, "steps": 1, "step_in_progress": 2, "optimizer_steps": 0,
         "partial_step_s": 10.0,
         "after_last_step": {"compiles": 1, "compile_s": 9.4, "compile_times_s": [9.4],
                             "executions": 1, "transfers": 2, "transfer_s": 0.01}},
    ]  # fmt: skip


def test_the_ranks_table_counts_the_compile_after_the_last_step():
    main = _trace(
        [
            {"event": "start", "t": 0.0, "schema": 1, "pid": 99, "kind": "path", "target": U,
             "steps_limit": 200},
            {"event": "launch", "t": 0.2, "what": "xmp.spawn",
             "location": {"path": U, "line": 70, "function": "<module>"}},
            {"event": "exit", "t": 12.5, "code": 0, "reason": "finished"},
        ]
    )  # fmt: skip
    report = build_report(
        main,
        command=["python", U],
        target=U,
        steps_requested=200,
        wall_s=12.5,
        events_file="/tmp/e.jsonl",
        device={"pjrt_device": "CPU", "cpu_devices": 1},
        static=None,
        ranks={0: _trace(_rank0())},
        rank_files={0: "/tmp/e.rank0.jsonl"},
    )
    jsonschema.validate(report, REPORT_SCHEMA)
    rank = report["ranks"][0]
    assert [s["compile_s"] for s in rank["steps"]] == [0.5, 9.4]
    assert rank["compile_count"] == 2 and rank["compile_s"] == pytest.approx(9.9)
    ranks_table = render_text(report).split("\nRanks")[1]
    assert "2 (9.90 s)" in ranks_table, ranks_table
