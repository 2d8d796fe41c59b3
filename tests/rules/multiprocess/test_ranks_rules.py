"""Ranks as the rules ask them: XLA031 (a rank read from a variable the launcher never sets,
the class of shared case c26) and XLA015 on rank guards (the class of c33: a `dist.get_rank()`
guard), with XLA015's severity following what the divergent graph holds (issue 22, item 2)."""

from __future__ import annotations

from helpers import lint_tree, write_tree

from xla_lint.diagnostics import Severity

HEAD = (
    "import os\nimport torch\nimport torch.distributed as dist\nimport torch_xla\n"
    "import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
    "import torch_xla.distributed.parallel_loader as pl\n"
    "from torch.utils.data.distributed import DistributedSampler\n"
)  # 8 lines

TRAIN = HEAD + (
    "def _mp_fn(index):\n"  # 9
    "    dist.init_process_group('xla', init_method='xla://')\n"
    "    local_rank = int(os.environ.get('LOCAL_RANK', 0))\n"  # 11
    "    sampler = DistributedSampler(data, num_replicas=xr.world_size(), rank=local_rank)\n"
    "    for x, y in pl.MpDeviceLoader(loader, torch_xla.device()):\n"
    "        xm.optimizer_step(opt)\n"
    "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn, args=())\n"
)


def _found(tmp_path, files: dict[str, str], select: list[str]) -> set[tuple]:
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=select, preview=True)  # XLA015 is preview
    return {(d.path, d.line, d.code, d.severity) for d in result.diagnostics}


def test_rank_from_env_under_python_is_reported_and_under_torchrun_is_not(tmp_path):
    """c26: the same code started by `python train.py` (torch_xla.launch spawns) and by torchrun."""
    found = _found(
        tmp_path,
        {
            "train.py": TRAIN,
            "train_elastic.py": TRAIN,
            "run_tpu.sh": "#!/bin/bash\nexport PJRT_DEVICE=TPU\npython train.py\n",
            "run_elastic.sh": "#!/bin/bash\ntorchrun --nnodes=1 --nproc_per_node=4 train_elastic.py\n",
        },
        ["XLA031"],
    )
    assert found == {("train.py", 11, "XLA031", Severity.ERROR)}


def test_rank_read_in_a_helper_module_of_a_spawned_program(tmp_path):
    """The read is in a module the spawning entry imports: the program's spawn fact reaches it;
    a library module no program reaches is not reported."""
    found = _found(
        tmp_path,
        {
            "main.py": HEAD
            + "import torch_xla.distributed.xla_multiprocessing as xmp\nfrom helpers import setup\n"
            "def _mp_fn(index):\n    setup()\nif __name__ == '__main__':\n    xmp.spawn(_mp_fn)\n",
            "helpers.py": "import os\n\ndef setup():\n    rank = int(os.getenv('RANK', 0))\n"
            "    world = int(os.getenv('WORLD_SIZE', 1))\n    return rank, world\n",
            "lib/unused.py": "import os\nimport torch_xla\nRANK = int(os.getenv('RANK', 0))\n",
        },
        ["XLA031"],
    )
    assert found == {
        ("helpers.py", 4, "XLA031", Severity.ERROR),
        ("helpers.py", 5, "XLA031", Severity.ERROR),
    }


def test_dist_rank_guard_host_read_is_a_warning(tmp_path):
    """c33: `rank = dist.get_rank()` ... `if rank == 0: loss.item()`: one replica runs the loss's
    graph, which holds no collective: a warning."""
    code = HEAD + (
        "def _mp_fn(index):\n"
        "    dist.init_process_group('xla', init_method='xla://')\n    rank = dist.get_rank()\n"
        "    for x, y in pl.MpDeviceLoader(loader, torch_xla.device()):\n"
        "        loss = model(x).sum()\n        loss.backward()\n        xm.optimizer_step(opt)\n"
        "        if rank == 0:\n            print(loss.item(), flush=True)\n"  # 17
        "        if dist.get_rank() == 0:\n            total = xm.all_reduce(xm.REDUCE_SUM, loss)\n"
        "            print(total.item())\n"  # 20
        "        if index == 0:\n            torch_xla.sync()\n"  # 22
        "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn, args=())\n"
    )
    found = _found(tmp_path, {"train.py": code}, ["XLA015"])
    assert found == {
        ("train.py", 17, "XLA015", Severity.WARNING),
        ("train.py", 19, "XLA015", Severity.ERROR),  # a collective on one replica
        ("train.py", 20, "XLA015", Severity.ERROR),  # its result holds the all-reduce
        ("train.py", 22, "XLA015", Severity.ERROR),  # the step's pending gradient all-reduce
    }


def test_save_after_optimizer_step_is_an_error_and_alone_a_warning(tmp_path):
    code = HEAD + (
        "def _mp_fn(index):\n"
        "    xm.optimizer_step(opt)\n"
        "    if xm.is_master_ordinal():\n        xm.save(model.state_dict(), 'm.pt')\n"  # 12
        "def export(model):\n"
        "    if xm.is_master_ordinal():\n        xm.save(model.state_dict(), 'm.pt')\n"  # 15
        "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn, args=())\n"
    )
    found = _found(tmp_path, {"train.py": code}, ["XLA015"])
    assert found == {
        ("train.py", 12, "XLA015", Severity.ERROR),
        ("train.py", 15, "XLA015", Severity.WARNING),
    }


def test_save_after_a_helper_s_optimizer_step_is_an_error_and_after_its_sync_silent(tmp_path):
    """projectt train_wtf.py: the optimizer step runs in a same-module function called just
    before the master-only save, with no sync between: the master alone runs the step's
    gradient all-reduce (an error). projectt run.py: the step function ends with
    xm.mark_step(): nothing is pending and the save only copies device data (not reported)."""
    code = (
        HEAD
        + (
            "def train_step(x):\n    model(x).sum().backward()\n    xm.optimizer_step(opt)\n"  # 11
            "def synced_step(x):\n    train_step(x)\n    xm.mark_step()\n"  # 14
            "def _mp_fn(index):\n    for x in loader:\n        train_step(x)\n"  # 17
            "        if xm.is_master_ordinal():\n            xm.save(model.state_dict(), 'm.pt')\n"  # 19
            "        synced_step(x)\n"
            "        if xm.is_master_ordinal():\n            xm.save(model.state_dict(), 'm.pt')\n"  # 22
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn, args=())\n"
        )
    )
    found = _found(tmp_path, {"train.py": code}, ["XLA015"])
    assert found == {("train.py", 19, "XLA015", Severity.ERROR)}


def test_an_environment_rank_guard_splits_replicas_only_under_torchrun(tmp_path):
    code = HEAD + (
        "def _mp_fn(index):\n    local_rank = int(os.environ['LOCAL_RANK'])\n"
        "    if local_rank == 0:\n        xm.rendezvous('only-one')\n"  # 12
        "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn, args=())\n"
    )
    alone = _found(tmp_path / "a", {"train.py": code}, ["XLA015"])
    assert alone == set()  # under xmp.spawn LOCAL_RANK is unset: no replica-only guard
    launched = _found(
        tmp_path / "b",
        {"train.py": code, "run.sh": "torchrun --nproc_per_node=4 train.py\n"},
        ["XLA015"],
    )
    assert launched == {("train.py", 12, "XLA015", Severity.ERROR)}


def test_paired_rendezvous_on_a_dist_rank_is_silent(tmp_path):
    code = HEAD + (
        "def _mp_fn(index):\n    rank = dist.get_rank()\n"
        "    if rank != 0:\n        xm.rendezvous('download')\n    prepare()\n"
        "    if rank == 0:\n        xm.rendezvous('download')\n"
        "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn, args=())\n"
    )
    assert _found(tmp_path, {"train.py": code}, ["XLA015"]) == set()


def test_a_host_read_of_a_sharded_model_is_an_error(tmp_path):
    """A tensor-parallel or FSDP model's forward holds collectives (neuronx-distributed's
    test_attention.py reads a TP attention's output on rank 0 alone)."""
    code = HEAD + (
        "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
        "def _mp_fn(index):\n    model = FSDP(net)\n    out = model(x)\n"
        "    if xr.global_ordinal() == 0:\n        print(out.cpu())\n"  # 14
        "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn, args=())\n"
    )
    assert _found(tmp_path, {"train.py": code}, ["XLA015"]) == {
        ("train.py", 14, "XLA015", Severity.ERROR)
    }
