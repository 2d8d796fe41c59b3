"""XLA024 spmd-checkpoint-planner: torch.distributed.checkpoint in SPMD programs, beyond the rule's own examples."""

from __future__ import annotations

from helpers import lint_tree, write_tree

from xla_lint.diagnostics import Severity

SPMD = """\
import numpy as np
import torch
import torch_xla.runtime as xr
import torch_xla.distributed.spmd as xs

xr.use_spmd()
mesh = xs.Mesh(np.arange(8), (8, 1), ('fsdp', 'model'))
model = torch.nn.Linear(16, 8).to('xla')
xs.mark_sharding(model.weight, mesh, ('fsdp', None))
"""


def _found(tmp_path, files, **settings):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA024"], preview=True, **settings)
    return [(d.path, d.line, d.severity, d.message) for d in result.diagnostics]


def test_every_import_spelling_resolves(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": SPMD
            + (
                "import torch.distributed.checkpoint\n"
                "from torch.distributed import checkpoint as dcp\n"
                "from torch.distributed.checkpoint.state_dict_loader import load\n"
                "torch.distributed.checkpoint.save({'m': model.state_dict()}, checkpoint_id='a')\n"
                "dcp.save_state_dict({'m': model.state_dict()}, dcp.FileSystemWriter('b'))\n"
                "load({'m': model.state_dict()}, checkpoint_id='a')\n"
            )
        },
    )
    assert [line for _, line, _, _ in found] == [13, 14, 15]
    assert "`torch.distributed.checkpoint.save` without `planner=`" in found[0][3]
    assert "SPMDSavePlanner()" in found[1][3] and "SPMDLoadPlanner()" in found[2][3]
    assert {severity for _, _, severity, _ in found} == {Severity.WARNING}


def test_a_default_planner_however_it_is_passed_is_reported(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": SPMD
            + (
                "import torch.distributed.checkpoint as dcp\n"
                "from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner\n"
                "def restore(path):\n"
                "    planner = DefaultLoadPlanner()\n"
                "    dcp.load({'m': model.state_dict()}, checkpoint_id=path, planner=planner)\n"
                "    dcp.load_state_dict({'m': model.state_dict()}, dcp.FileSystemReader(path), None, 0, False, None)\n"
            )
        },
    )
    assert [line for _, line, _, _ in found] == [14, 15]
    assert "with torch's default planner" in found[0][3]


def test_planners_of_the_project_and_forwarded_arguments_are_trusted(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": SPMD
            + (
                "import torch.distributed.checkpoint as dcp\n"
                "from torch_xla.experimental.distributed_checkpoint import SPMDSavePlanner\n"
                "class MyPlanner(SPMDSavePlanner):\n    pass\n"
                "def save(state, path, *args, **kwargs):\n"
                "    dcp.save(state, checkpoint_id=path, planner=MyPlanner())\n"
                "    dcp.save_state_dict(state, dcp.FileSystemWriter(path), *args)\n"
                "    dcp.save(state, checkpoint_id=path, **kwargs)\n"
                "    dcp.save_state_dict(state, dcp.FileSystemWriter(path), planner=get_planner())\n"
            )
        },
    )
    assert found == []


def test_state_without_xla_tensors_is_not_reported(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": SPMD
            + (
                "import torch.distributed.checkpoint as dcp\n"
                "def save(model, scheduler, step: int, path):\n"
                "    dcp.save({'step': step, 'scheduler': scheduler.state_dict()}, checkpoint_id=path)\n"
                "    model.to('cpu')\n"
                "    dcp.save(model.state_dict(), checkpoint_id=path)\n"
                "    dcp.save({'model': model.state_dict()}, checkpoint_id=path)\n"
            )
        },
    )
    # Plain values, and the state of a module moved to the host earlier in the function (alone or
    # in a container): XLA003's reading of the state, shared.
    assert found == []


def test_a_library_module_is_reported_in_the_spmd_program_that_runs_it(tmp_path):
    # (A module that does not import torch_xla is not linted at all: the engine's prefilter.)
    lib = (
        "import torch_xla\nimport torch.distributed.checkpoint as dcp\n"
        "def save(model, path):\n    dcp.save({'model': model.state_dict()}, checkpoint_id=path)\n"
    )
    spmd = _found(
        tmp_path / "spmd",
        {"ckpt.py": lib, "train.py": SPMD + "import ckpt\nckpt.save(model, 'c')\n"},
    )
    assert [(p, line) for p, line, _, _ in spmd] == [("ckpt.py", 4)]
    # The same library run by a program with one process per device and no SPMD: nothing to say.
    multi = _found(
        tmp_path / "multi",
        {
            "ckpt.py": lib,
            "train.py": (
                "import torch\nimport torch_xla\nimport ckpt\n"
                "def _mp_fn(index):\n    model = torch.nn.Linear(4, 4).to('xla')\n    ckpt.save(model, 'c')\n"
                "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n"
            ),
        },
    )
    assert multi == []


def test_async_save_is_an_error_with_or_without_a_planner(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": SPMD
            + (
                "import torch.distributed.checkpoint as dcp\n"
                "from torch_xla.experimental.distributed_checkpoint import SPMDSavePlanner\n"
                "f = dcp.async_save({'m': model.state_dict()}, checkpoint_id='a')\n"
                "g = dcp.async_save({'m': model.state_dict()}, checkpoint_id='a', planner=SPMDSavePlanner())\n"
                "h = dcp.async_save({'m': model.state_dict()}, checkpoint_id='a', async_stager=my_stager,\n"
                "                   planner=SPMDSavePlanner())\n"
            )
        },
    )
    assert [(line, severity) for _, line, severity, _ in found] == [
        (12, Severity.ERROR),
        (13, Severity.ERROR),
    ]
    assert "CheckpointManager.save_async" in found[0][3]


def test_not_reported_under_pytest_raises_or_in_torch_s_own_modules(tmp_path):
    found = _found(
        tmp_path,
        {
            "test_ckpt.py": SPMD
            + (
                "import pytest\nimport torch.distributed.checkpoint as dcp\n"
                "def test_async_fails():\n    with pytest.raises(BaseException):\n"
                "        dcp.async_save({'m': model.state_dict()}, checkpoint_id='a').result()\n"
            )
        },
    )
    assert found == []
