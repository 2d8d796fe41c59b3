"""XLA027/XLA028 through their shared machinery (xla_lint/analysis/seeds.py), on small programs.

XLA028 per-replica-seed: with one process per device, a seed that differs per replica before
the model is built, in a program that never makes the replicas' parameters equal.
"""

from __future__ import annotations

from helpers import lint_tree, write_tree


def _found(tmp_path, files, codes=("XLA028",)):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=list(codes), preview=True)
    return sorted((d.code, d.path, d.line, d.message) for d in result.diagnostics)


def _where(found):
    return [(code, path, line) for code, path, line, _ in found]


def test_the_launch_index_through_a_local_and_the_other_arguments(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": """\
import torch
import torch_xla.distributed.xla_multiprocessing as xmp

class Net(torch.nn.Module):
    pass

def train(rank, args):
    seed = args.seed + rank
    torch.manual_seed(seed)
    model = Net()

def evaluate(rank, args):
    torch.manual_seed(args.rank + offset(rank=0))
    model = Net()

def not_launched(rank):
    torch.manual_seed(rank)
    model = Net()

if __name__ == "__main__":
    xmp.spawn(train, args=(args,))
    xmp.spawn(evaluate, args=(args,))
"""
        },
    )
    assert _where(found) == [("XLA028", "train.py", 9)]
    message = found[0][3]
    assert "seed depends on `rank`, the global ordinal `train` receives from the launch" in message
    assert "(`Net()`)" in message and "xm.broadcast_master_param(model)" in message


def test_a_model_built_by_a_helper_module_or_a_function_of_the_file(tmp_path):
    found = _found(
        tmp_path,
        {
            "run.py": """\
import torch
import torch_xla
import torch_xla.runtime as xr
from models import build_model

def make():
    return torch.nn.Linear(4, 4)

def _mp_fn(index):
    torch.manual_seed(xr.global_ordinal())
    model = build_model(config)
    torch.manual_seed(xr.local_ordinal())
    head = make()
    torch.manual_seed(xr.global_ordinal())
    loss_fn = torch.nn.CrossEntropyLoss()

torch_xla.launch(_mp_fn)
""",
            "models.py": "import torch\ndef build_model(config):\n    return torch.nn.Linear(4, 4)\n",
        },
    )
    assert _where(found) == [("XLA028", "run.py", 10), ("XLA028", "run.py", 12)]
    assert "(`build_model(config)`)" in found[0][3] and "`xr.local_ordinal()`" in found[1][3]


def test_a_broadcast_or_wrap_in_the_file_or_named_by_a_helper_of_another(tmp_path):
    trainer = """\
import torch
import torch_xla
import torch_xla.core.xla_model as xm
{imports}
def _mp_fn(index):
    torch.manual_seed(xm.get_ordinal())
    model = torch.nn.Linear(4, 4)
    {after}

torch_xla.launch(_mp_fn)
"""
    cases = {
        "broadcast.py": ("", "xm.broadcast_master_param(model)"),
        "ddp.py": (
            "from torch.nn.parallel import DistributedDataParallel as DDP",
            "model = DDP(model)",
        ),
        "fsdp.py": (
            "import torch_xla.distributed.fsdp as fsdp",
            "model = fsdp.XlaFullyShardedDataParallel(model)",
        ),
        "helper.py": ("from utils import broadcast_params", "broadcast_params(model)"),
        "local_import.py": (
            "def wrap(m):\n    from torch.nn.parallel import DistributedDataParallel\n"
            "    return DistributedDataParallel(m)",
            "model = wrap(model)",
        ),
        "resume.py": ("", "model.load_state_dict(torch.load(path))"),
        # What does not make the parameters equal: an optimizer's state, an unknown helper.
        "optimizer.py": ("", "optimizer.load_state_dict(torch.load(path))"),
        "opaque.py": ("from utils import finish", "finish(model)"),
    }
    files = {
        name: trainer.format(imports=imports, after=after)
        for name, (imports, after) in cases.items()
    }
    files["utils.py"] = (
        "import torch_xla.core.xla_model as xm\n"
        "def broadcast_params(model):\n    xm.broadcast_master_param(model)\n"
        "def finish(model):\n    xm.broadcast_master_param(model)\n"
    )
    found = _found(tmp_path, files)
    # `finish` broadcasts too, in another module: the rule reads one file and cannot see it.
    assert _where(found) == [("XLA028", "opaque.py", 6), ("XLA028", "optimizer.py", 6)]


def test_accelerate_process_index_and_device_specific(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": """\
import torch
import torch_xla
from accelerate import Accelerator
from accelerate.utils import set_seed
from transformers import AutoModelForSequenceClassification

def _mp_fn(index):
    accelerator = Accelerator()
    set_seed(42, device_specific=True)
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
    torch.manual_seed(1 + accelerator.process_index)
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
    set_seed(42, device_specific=False)
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")

torch_xla.launch(_mp_fn)
"""
        },
    )
    assert _where(found) == [("XLA028", "train.py", 9), ("XLA028", "train.py", 11)]
    assert "`device_specific=True`" in found[0][3]
    assert "Accelerate's `process_index`" in found[1][3]


def test_xla027_and_xla028_split_programs_by_mode(tmp_path):
    body = (
        "import torch\nimport torch.distributed as dist\nimport torch_xla\n"
        "def main():\n    torch.manual_seed(dist.get_rank())\n    model = torch.nn.Linear(4, 4)\n"
    )
    found = _found(
        tmp_path,
        {
            "common.py": body,
            "spmd_run.py": "import torch_xla.runtime as xr\nfrom common import main\n"
            "xr.use_spmd()\nmain()\n",
            "mp_run.py": "import torch_xla\nfrom common import main\n"
            "def _mp_fn(index):\n    main()\ntorch_xla.launch(_mp_fn)\n",
            # One process, one device: nothing to disagree with.
            "single.py": "import torch\nimport torch_xla.core.xla_model as xm\n"
            "torch.manual_seed(xm.get_ordinal())\nmodel = torch.nn.Linear(4, 4)\n",
        },
        codes=("XLA027", "XLA028"),
    )
    assert _where(found) == [("XLA027", "common.py", 5), ("XLA028", "common.py", 5)]
    # Each names the program that runs it in its mode.
    assert "spmd_run.py" in found[0][3] and "mp_run.py" in found[1][3]


def test_device_seeds_and_worker_seeds_do_not_count(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": """\
import torch
import torch_xla
import torch_xla.core.xla_model as xm

def seed_device(seed):
    xm.set_rng_state(seed)

def _mp_fn(index):
    torch.manual_seed(1234)
    seed_device(1234 + index)
    torch_xla.manual_seed(1234 + index)
    model = torch.nn.Linear(4, 4)
    def worker_init_fn(worker_id):
        torch.manual_seed(index * 100 + worker_id)
    loader = torch.utils.data.DataLoader(data, worker_init_fn=worker_init_fn)

torch_xla.launch(_mp_fn)
"""
        },
    )
    assert found == []


def test_xla027_in_launched_function_is_left_to_xla028(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": """\
import torch
import torch_xla
import torch_xla.runtime as xr

def _mp_fn(index):
    torch.manual_seed(xr.process_index())
    model = torch.nn.Linear(4, 4)

torch_xla.launch(_mp_fn)
"""
        },
        codes=("XLA027", "XLA028"),
    )
    assert _where(found) == [("XLA028", "train.py", 6)]
