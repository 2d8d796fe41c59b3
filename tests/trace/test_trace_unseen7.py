"""Issue 24's trace-unseen7 bugs, on tiny live scripts shaped like the tester's reproductions
(``/work/notes/s24/trace-scripts/repros``), traced on CPU:

* A: an optimizer whose ``step()`` calls another optimizer's step (a wrapper;
  torch_xla's ``ZeroRedundancyOptimizer``) is one optimizer step, not two (no false XLA203
  "several optimizer steps in one graph").
* C: batches of an ``MpDeviceLoader`` are tagged with their ``DataLoader`` (loader id and
  batch index), so that two loaders leaving the same last-batch size get an XLA202 each.
* B: a script without a step boundary that ends by itself keeps XLA203's line, confirms the
  static XLA203, and its headline counts optimizer steps.
* D: the ranks table adds the compiles after the last step to the rank's compile time.
* E: a host read outside every loop is counted in no training or evaluation row.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import pytest

pytest.importorskip("torch_xla")
jsonschema = pytest.importorskip("jsonschema")

from tracerun import RUN_TIMEOUT, Run, trace  # noqa: E402

from xla_lint.trace.events import EVENT_SCHEMA, REPORT_SCHEMA  # noqa: E402
from xla_lint.trace.report import render_text  # noqa: E402

pytestmark = pytest.mark.runtime

NESTED = """\
import sys
import torch, torch.nn as nn
import torch_xla

class Wrapper(torch.optim.Optimizer):
    def __init__(self, params, **kw):
        params = list(params)
        self.inner = torch.optim.SGD(params, **kw)
        super().__init__(params, kw)
    def step(self, closure=None):
        return self.inner.step(closure)

dev = torch_xla.device()
model = nn.Linear(8, 2).to(dev)
if sys.argv[1:] == ["zero1"]:
    from torch_xla.distributed.zero_redundancy_optimizer import ZeroRedundancyOptimizer
    opt = ZeroRedundancyOptimizer(model.parameters(), torch.optim.SGD, lr=0.1, pin_layout=False)
else:
    opt = Wrapper(model.parameters(), lr=0.1)
for i in range(4):
    opt.zero_grad()
    model(torch.randn(4, 8, device=dev)).sum().backward()
    opt.step()
    torch_xla.sync()
"""
SAME_REMAINDER = """\
import torch, torch.nn as nn
import torch_xla
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader, TensorDataset
dev = torch_xla.device()
train = DataLoader(TensorDataset(torch.randn(21, 8), torch.randn(21, 1)), batch_size=4)
test = DataLoader(TensorDataset(torch.randn(5, 8), torch.randn(5, 1)), batch_size=2)
model = nn.Linear(8, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in pl.MpDeviceLoader(train, dev):
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
with torch.no_grad():
    tot = 0
    for x, y in pl.MpDeviceLoader(test, dev):
        tot = tot + nn.functional.mse_loss(model(x), y)
print(tot.item())
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Future]:
    base = tmp_path_factory.mktemp("unseen7")
    scripts = {
        "nested.py": NESTED,
        "same_remainder.py": SAME_REMAINDER,
        "no_boundary.py": NO_BOUNDARY,
        "setup_reads.py": SETUP_READS,
    }
    for name, text in scripts.items():
        (base / name).write_text(text)
    scenarios = {  # name -> (trace options, command)
        "wrapper": (["--no-static", "--cpu-devices", "1"], ["python", "nested.py"]),
        "zero1": (["--no-static", "--cpu-devices", "1"], ["python", "nested.py", "zero1"]),
        "same_remainder": (["--cpu-devices", "1"], ["python", "same_remainder.py"]),
        # more --steps than the script's 6 optimizer steps: it ends by itself
        "no_boundary": (["--cpu-devices", "1", "--steps", "30"], ["python", "no_boundary.py"]),
        "setup_reads": (["--cpu-devices", "1"], ["python", "setup_reads.py"]),
    }
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {
        name: pool.submit(trace, args, command, base / f"{name}.jsonl", base)
        for name, (args, command) in scenarios.items()
    }
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


def get(runs, name: str) -> Run:
    run = runs[name].result(timeout=RUN_TIMEOUT * 2)
    assert run.report is not None, run.stderr
    jsonschema.validate(run.report, REPORT_SCHEMA)
    for event in run.events:
        jsonschema.validate(event, EVENT_SCHEMA)
    return run


@pytest.mark.parametrize("name", ["wrapper", "zero1"])
def test_an_optimizer_stepping_another_is_one_optimizer_step(runs, name):
    run = get(runs, name)
    assert run.code == 0, run.stdout + run.stderr
    assert [f["code"] for f in run.report["findings"]] == []
    assert run.report["optimizer_steps"] == 4
    steps = [e for e in run.events if e["event"] == "step" and e.get("counted")]
    assert [e["optimizer_steps"] for e in steps] == [1, 2, 3, 4]


def test_mp_device_loader_batches_are_tagged_with_their_dataloader(runs):
    run = get(runs, "same_remainder")
    loaders = {e["id"]: e for e in run.events if e["event"] == "loader"}
    data = {e["location"]["line"]: e["id"] for e in loaders.values() if e["kind"] == "DataLoader"}
    train, test = data[6], data[7]
    batches = [b for e in run.events if e["event"] == "step" for b in e.get("batches") or []]
    assert {b["loader"] for b in batches} == {train, test}
    assert [b["index"] for b in batches if b["loader"] == train] == [1, 2, 3, 4, 5, 6]
    assert [b["index"] for b in batches if b["loader"] == test][-1] == 3
    counts = {d["location"]["line"]: d["batches"] for d in run.report["loaders"]}
    assert counts[6] and counts[7], run.report["loaders"]


def test_two_loaders_with_the_same_last_batch_size_get_an_xla202_each(runs):
    run = get(runs, "same_remainder")
    found = [f for f in run.report["findings"] if f["code"] == "XLA202"]
    assert sorted(f["location"]["line"] for f in found) == [6, 7], found
    train = next(f for f in found if f["location"]["line"] == 6)
    assert "21 samples" in train["message"] and "5 samples" not in train["message"]
    static = {d["line"]: d["status"] for d in run.static("XLA202")}
    assert static == {6: "confirmed", 7: "confirmed"}, run.report["static"]


NO_BOUNDARY = """\
import torch, torch.nn as nn
import torch_xla
dev = torch_xla.device()
model = nn.Linear(8, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(2):
    for i in range(3):
        opt.zero_grad()
        model(torch.randn(4, 8, device=dev)).sum().backward()
        opt.step()
print(model.weight.sum().item())
"""
SETUP_READS = """\
import torch, torch.nn as nn
import torch_xla
dev = torch_xla.device()
model = nn.Linear(8, 1).to(dev)
print(model.weight.sum().item())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(3):
    opt.zero_grad()
    loss = model(torch.randn(4, 8, device=dev)).sum()
    loss.backward()
    opt.step()
    torch_xla.sync()
print(loss.item())
with torch.no_grad():
    for i in range(2):
        out = model(torch.randn(4, 8, device=dev)).sum()
        torch_xla.sync()
"""


def test_a_script_without_a_boundary_that_ends_by_itself_keeps_xla203s_line(runs):
    run = get(runs, "no_boundary")
    assert run.report["status"] == "finished" and run.report["optimizer_steps"] == 6
    finding = run.finding("XLA203")
    assert finding["location"]["line"] == 10, finding  # the optimizer step
    assert "6 optimizer steps ran without a step boundary" in finding["message"]
    assert [d["status"] for d in run.static("XLA203")] == ["confirmed"], run.report["static"]
    end = next(e for e in run.events if e["event"] == "end")
    assert end["optimizer_location"]["line"] == 10 and end["optimizer_steps_unsynced"] == 6


def test_the_headline_of_a_run_without_a_boundary_counts_its_optimizer_steps(runs):
    run = get(runs, "no_boundary")
    text = render_text(run.report)
    assert "finished by itself after 6 optimizer steps and no step boundary" in text
    assert "after 0 steps" not in text


def test_host_reads_outside_every_loop_are_in_no_training_or_evaluation_row(runs):
    run = get(runs, "setup_reads")
    reads = {r["location"]["line"]: r for r in run.report["host_reads"]}
    assert {line: r["phase"] for line, r in reads.items()} == {5: "setup", 13: "setup"}
    rows = [(s["phase"], s["host_reads"], s["setup_host_reads"]) for s in run.report["steps"]]
    # step 1's span holds the read at :5, the evaluation's first the read at :13
    assert rows[0] == ("training", 0, 1), rows
    assert [r for r in rows if r[0] == "evaluation"][0] == ("evaluation", 0, 1), rows
    assert sum(r[1] for r in rows) == 0
    assert "2 host reads outside every loop: setup, in no row's count" in render_text(run.report)
