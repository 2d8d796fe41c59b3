"""XLA027 per-host-seed: a seed that differs per SPMD host before the model is built."""

from __future__ import annotations

from helpers import lint_tree, write_tree


def _found(tmp_path, files):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA027"], preview=True)
    return [(d.path, d.line, d.message) for d in result.diagnostics]


def test_a_module_constant_and_a_model_class_of_the_file(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": """\
import torch
import torch.nn as nn
import torch_xla.runtime as xr

SEED = 1234 + xr.process_index()

class Block(nn.Module):
    pass

class Net(Block):
    pass

def main():
    xr.use_spmd()
    torch.manual_seed(SEED)
    model = Net()

if __name__ == "__main__":
    main()
"""
        },
    )
    assert [(p, line) for p, line, _ in found] == [("train.py", 15)]
    assert "seed depends on `xr.process_index()`" in found[0][2] and "(`Net()`)" in found[0][2]


def test_what_runs_after_the_seed_but_builds_no_model(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": """\
import torch
import torch_xla.runtime as xr
from transformers import AutoTokenizer

xr.use_spmd()
model = build_model()
torch.manual_seed(0 + xr.process_index())
tokenizer = AutoTokenizer.from_pretrained("gpt2")
loss_fn = torch.nn.CrossEntropyLoss()
out = model(batch)
g = torch.Generator()
g.manual_seed(xr.process_index())
"""
        },
    )
    assert found == []


def test_programs_that_are_not_spmd_and_the_other_branch(tmp_path):
    found = _found(
        tmp_path,
        {
            "single.py": "import torch\nimport torch_xla.runtime as xr\n"
            "torch.manual_seed(xr.process_index())\nmodel = torch.nn.Linear(2, 2)\n",
            "both.py": "import torch\nimport torch_xla\nimport torch_xla.runtime as xr\nimport torch.distributed as dist\n"
            "if args.spmd:\n    xr.use_spmd()\n"
            "if not xr.is_spmd():\n    torch.manual_seed(dist.get_rank())\n    model = torch.nn.Linear(2, 2)\n",
        },
    )
    assert found == []


def test_a_seed_inside_an_if_and_the_model_after_the_if(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": """\
import os
import torch
import torch_xla.runtime as xr

xr.use_spmd()
if args.seed is not None:
    torch.manual_seed(args.seed + int(os.environ.get("TPU_WORKER_ID", 0)))
model = GPTModel(config)
"""
        },
    )
    assert [line for _, line, _ in found] == [7]
    assert "the environment variable `TPU_WORKER_ID`" in found[0][2]
