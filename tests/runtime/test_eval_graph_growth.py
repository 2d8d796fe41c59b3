"""XLA205 eval-loop-without-step-boundary against torch_xla itself, on CPU.

A ``Linear(32, 10)`` evaluates batches of 16 under ``torch.no_grad()`` and accumulates
``correct += (out.argmax(1) == y).sum()``; the loop source is the one the rule is run on.
Without a step boundary the graph read after the loop holds every iteration's forward: its
IR grows linearly with the number of iterations and each length compiles once more; with
``torch_xla.sync()`` per iteration the read finds a 1-node graph and a second length
compiles nothing. Also measured, for the rule's exemptions: reading *another* tensor per
iteration (``.item()``, ``.cpu()``) leaves the accumulator's graph whole, ``.cpu()`` of the
accumulator itself replaces its graph with data, ``.item()`` of it does not (it runs the
graph and leaves it pending). One process with ``PJRT_DEVICE=CPU``: 10-20 s, most of it
importing torch_xla.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch_xla")

from helpers import lint_tree, run_cpu_script, write_tree

pytestmark = pytest.mark.runtime

# The evaluation loop under test, as a user writes it (`{read}`: what each iteration adds).
LOOP = """\
import torch
import torch_xla


def evaluate(model, loader, device, sync=False, read=None):
    correct = torch.zeros((), dtype=torch.long, device=device)
    with torch.no_grad():
        for x, y in loader:
            out = model(x.to(device))
            correct += (out.argmax(1) == y.to(device)).sum()
            if sync:
                torch_xla.sync()
            if read is not None:
                read(out, correct)
    return correct
"""

SCRIPT = (
    LOOP
    + r"""
import json, sys
import torch_xla.debug.metrics as met

def nodes(t):
    text = torch_xla._XLAC._get_xla_tensors_text([t])
    return sum(1 for line in text.splitlines() if "%" in line and "=" in line)

def compiles():
    data = met.metric_data("CompileTime")
    return data[0] if data else 0

device = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 10).to(device)
data = [(torch.randn(16, 32), torch.randint(0, 10, (16,))) for _ in range(40)]
(torch.ones(2, device=device) * 3).sum().item()  # warm up outside the measurements
READS = {
    "other_item": lambda out, acc: out.sum().item(),
    "other_cpu": lambda out, acc: out.argmax(1).cpu(),
    "acc_cpu": lambda out, acc: acc.cpu(),
    "acc_item": lambda out, acc: acc.item(),
}
results = {}
for sync in (False, True):
    for n in (10, 40):
        before = compiles()
        correct = evaluate(model, data[:n], device, sync=sync)
        looped = compiles()
        pending = nodes(correct)
        correct.item()
        results[f"sync={sync} n={n}"] = {
            "nodes": pending,
            "loop_compiles": looped - before,
            "read_compiles": compiles() - looped,
        }
for name, read in READS.items():
    before = compiles()
    correct = evaluate(model, data[:12], device, read=read)
    results[name] = {"nodes": nodes(correct), "compiles": compiles() - before}
print('RESULT ' + json.dumps(results))
"""
)


@pytest.fixture(scope="module")
def measured() -> dict:
    return run_cpu_script(
        SCRIPT, drop_env=("XLA_USE_SPMD", "XLA_IR_DEBUG"), timeout=300, cpu_devices=None
    )


def test_without_a_boundary_one_graph_grows_with_the_iterations(measured):
    small, large = measured["sync=False n=10"], measured["sync=False n=40"]
    # 9 IR nodes per iteration (measured: 93 and 363), compiled at the read, once per length.
    assert large["nodes"] - small["nodes"] == 9 * 30
    assert (small["loop_compiles"], small["read_compiles"]) == (0, 1)
    assert (large["loop_compiles"], large["read_compiles"]) == (0, 1)


def test_with_a_sync_per_iteration_the_graph_stays_the_same(measured):
    small, large = measured["sync=True n=10"], measured["sync=True n=40"]
    assert small["nodes"] == large["nodes"] == 1  # the accumulator is device data at the read
    assert small["read_compiles"] == large["read_compiles"] == 0
    # The first iteration's graph (the zero accumulator) and the steady one: nothing that
    # depends on the number of iterations (measured: 2, then 1 or 0 for the longer run).
    assert small["loop_compiles"] <= 2 and large["loop_compiles"] <= small["loop_compiles"]


def test_reading_another_tensor_does_not_cut_the_accumulator(measured):
    grown = measured["sync=False n=10"]["nodes"] + 9 * 2  # 12 iterations
    assert measured["other_item"]["nodes"] == grown
    assert measured["other_cpu"]["nodes"] == grown


def test_reading_the_accumulator_cpu_materializes_it_item_does_not(measured):
    assert measured["acc_cpu"]["nodes"] == 1
    grown = measured["sync=False n=10"]["nodes"] + 9 * 2
    assert measured["acc_item"]["nodes"] == grown
    # One larger graph per iteration (the 10-iteration one is cached from the run above).
    assert measured["acc_item"]["compiles"] >= 11


def test_the_rule_flags_the_measured_loop_and_not_the_synced_one(tmp_path):
    synced = LOOP.replace("            if sync:\n                torch_xla.sync()\n", "").replace(
        "            if read is not None:",
        "            torch_xla.sync()\n            if read is not None:",
    )
    unsynced = LOOP.replace("            if sync:\n                torch_xla.sync()\n", "")
    write_tree(tmp_path, {"unsynced.py": unsynced, "synced.py": synced})
    result, _, _ = lint_tree(
        tmp_path,
        select=["XLA205"],
        preview=True,
        entry_points={"unsynced.py": "single", "synced.py": "single"},
    )
    assert [(d.path, d.line, d.code) for d in result.diagnostics] == [("unsynced.py", 8, "XLA205")]
