"""XLA021 compile-cache-late: `xr.initialize_cache()` after an XLA graph ran, beyond the rule's own examples.

What compiles a graph was measured on torch_xla 2.9.0 (CPU); tests/runtime/test_compile_cache.py
checks the rule against torch_xla itself.
"""

from __future__ import annotations

from helpers import lint_tree, write_tree


def _found(tmp_path, files):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA021"], preview=True)
    return [(d.path, d.line, d.message) for d in result.diagnostics]


def test_a_training_loop_over_a_device_loader_runs_graphs(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": """\
import torch_xla
import torch_xla.distributed.parallel_loader as pl
import torch_xla.runtime as xr

device = torch_xla.device()
loader = pl.MpDeviceLoader(train_loader, device)
for epoch in range(2):
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
xr.initialize_cache("/tmp/xla_cache")
"""
        },
    )
    assert [(p, line) for p, line, _ in found] == [("train.py", 12)]
    assert "a device loader, syncs every batch" in found[0][2]


def test_a_forward_pass_that_nothing_reads_compiles_nothing(tmp_path):
    # Measured: an SPMD forward without a sync or a host read leaves the cache uninitialised.
    found = _found(
        tmp_path,
        {
            "train.py": """\
import torch
import torch_xla
import torch_xla.runtime as xr

xr.use_spmd()
dev = torch_xla.device()
model = torch.nn.Linear(2, 2).to(dev)
out = model(torch.ones(1, 2).to(dev))
print(out.shape, model.weight.dtype)
xr.initialize_cache("/tmp/xla_cache")
print(out)
xr.initialize_cache("/tmp/xla_cache")
"""
        },
    )
    assert [line for _, line, _ in found] == [12]
    assert "`print(out)` read a device computation on the host" in found[0][2]


def test_a_compiled_step_and_a_step_in_a_branch_count(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": """\
import torch_xla
import torch_xla.runtime as xr

step_fn = torch_xla.compile(train_step)

def main(args):
    if args.warmup:
        step_fn(batch)
    xr.initialize_cache(args.cache_dir)
"""
        },
    )
    assert [line for _, line, _ in found] == [9]


def test_set_up_in_a_class_after_moving_the_model_is_fine(tmp_path):
    found = _found(
        tmp_path,
        {
            "trainer.py": """\
import torch_xla
import torch_xla.runtime as xr

class Trainer:
    def __init__(self, model, cache_dir):
        self.device = torch_xla.device()
        self.model = model.to(self.device)
        xr.initialize_cache(cache_dir)

    def fit(self, loader):
        for batch in loader:
            self.model(batch).sum().backward()
            torch_xla.sync()
"""
        },
    )
    assert found == []


def test_a_test_that_expects_the_error_and_a_guarded_set_up_are_not_reported(tmp_path):
    found = _found(
        tmp_path,
        {
            "tests/test_cache.py": """\
import pytest
import torch_xla
import torch_xla.runtime as xr

def setup_cache(path):
    if not torch_xla._XLAC._xla_computation_cache_is_initialized():
        xr.initialize_cache(path)

def test_late(tmp_path):
    torch_xla.sync()
    with pytest.raises(AssertionError):
        xr.initialize_cache(str(tmp_path))
    setup_cache(str(tmp_path))
"""
        },
    )
    assert found == []


def test_a_function_that_runs_a_step_makes_a_later_set_up_call_late(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": """\
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

def evaluate(model, batch):
    out = model(batch)
    xm.mark_step()
    return out

def init_cache():
    xr.initialize_cache("/tmp/c", readonly=True)

def main():
    evaluate(model, batch)
    init_cache()

if __name__ == "__main__":
    main()
""",
            "score.py": """\
import torch_xla.runtime as xr

def score(model, batch):
    return model(batch).mean().item()  # its parameters' devices are unknown here

def main():
    score(model, batch)
    xr.initialize_cache("/tmp/c")
""",
        },
    )
    assert [(p, line) for p, line, _ in found] == [("train.py", 14)]
    assert (
        '`init_cache()`, which calls `xr.initialize_cache("/tmp/c", readonly=True)`, after an XLA graph '
        "already ran (`evaluate(model, batch)` ran a graph (`xm.mark_step()` ran a step))"
    ) in found[0][2]
