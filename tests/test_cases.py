"""The user's reported situations (the shared case list), restated as programs of our own.

Each test builds a small program, lints the whole tree with the case's codes selected, and
compares the exact set of (path, line, code) reported.
"""

from __future__ import annotations

from helpers import lint_tree, write_tree

from xla_lint.rules import rule_by_code


def check(
    tmp_path, files: dict[str, str], select: list[str], expected: set[tuple[str, int, str]], **kw
):
    assert all(rule_by_code(c) is not None for c in select)
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=select, **kw)
    got = {(d.path, d.line, d.code) for d in result.diagnostics}
    assert got == expected


def test_positional_hybrid_mesh_is_reported_and_keyword_call_is_not(tmp_path):
    check(
        tmp_path,
        {
            "job.py": (
                "import torch_xla.runtime as xr\n"
                "import torch_xla.distributed.spmd as spmd\n"
                "xr.use_spmd()\n"
                "shape_ici, shape_dcn = (4, 2), (2, 1)\n"
                "bad = spmd.HybridMesh(shape_ici, shape_dcn, ('fsdp', 'tensor'))\n"
                "good = spmd.HybridMesh(ici_mesh_shape=shape_ici, dcn_mesh_shape=shape_dcn, axis_names=('fsdp', 'tensor'))\n"
            )
        },
        ["XLA001"],
        {("job.py", 5, "XLA001")},
    )


def test_aliased_hybrid_mesh_is_reported_but_project_class_of_same_name_is_not(tmp_path):
    check(
        tmp_path,
        {
            "run.py": (
                "from torch_xla.distributed.spmd import HybridMesh as TpuMesh\n"
                "from layout import HybridMesh\n"
                "ours = HybridMesh((2, 2), ('a', 'b'))\n"
                "theirs = TpuMesh((2, 2), axis_names=('a', 'b'))\n"
            ),
            "layout.py": "class HybridMesh:\n    def __init__(self, shape, names):\n        pass\n",
        },
        ["XLA001"],
        {("run.py", 4, "XLA001")},
    )


def test_sharding_without_use_spmd_reported_once_at_first_spmd_call(tmp_path):
    check(
        tmp_path,
        {
            "dp.py": (
                "import numpy as np\nimport torch\nimport torch_xla.distributed.spmd as xs\n"
                "import torch_xla.runtime as xr\n"
                "# remember: xr.use_spmd()\n"
                "n = xr.global_runtime_device_count()\n"
                "mesh = xs.Mesh(np.arange(n), (n,), ('data',))\n"
                "x = torch.ones(4).to('xla')\n"
                "xs.mark_sharding(x, mesh, ('data',))\n"
            )
        },
        ["XLA002"],
        {("dp.py", 7, "XLA002")},
    )


def test_use_spmd_in_entry_script_covers_imported_module(tmp_path):
    check(
        tmp_path,
        {
            "launch.py": "import torch_xla.runtime as xr\nfrom lib.shard import go\n\nif __name__ == '__main__':\n"
            "    xr.use_spmd()\n    go()\n",
            "lib/__init__.py": "",
            "lib/shard.py": "import numpy as np\nimport torch_xla.distributed.spmd as xs\n"
            "def go():\n    return xs.Mesh(np.arange(4), (4,), ('fsdp',))\n",
        },
        ["XLA002"],
        set(),
    )


def test_torch_save_of_fsdpv2_state_is_reported_but_plain_helper_is_not(tmp_path):
    check(
        tmp_path,
        {
            "train.py": (
                "import torch\nimport torch.nn as nn\nimport torch_xla.runtime as xr\n"
                "from torch_xla.experimental.spmd_fully_sharded_data_parallel import "
                "SpmdFullyShardedDataParallel\n"
                "xr.use_spmd()\nnet = SpmdFullyShardedDataParallel(nn.Linear(4, 4))\n"
                "def checkpoint(path):\n    torch.save(net.state_dict(), path)\n"
            ),
            "vocab.py": "import torch\ndef dump(v, p):\n    torch.save(v, p)\n",
        },
        ["XLA003"],
        {("train.py", 8, "XLA003")},
    )


def test_print_needs_flush_only_in_torch_xla_modules(tmp_path):
    check(
        tmp_path,
        {
            "log.py": "import torch_xla.core.xla_model as xm\n\ndef report(x):\n    print('value', x)\n"
            "    print('done', flush=True)\n",
            "cli.py": "print('hello')\n",
        },
        ["XLA004"],
        {("log.py", 4, "XLA004")},
        preview=True,  # a library checked alone: its prints may be lost, an inference
    )


def test_process_identity_in_spmd_is_reported(tmp_path):
    check(
        tmp_path,
        {
            "run.py": (
                "from torch_xla import runtime as xr\nfrom torch_xla.core import xla_model as xm\n"
                "xr.use_spmd()\n"
                "rank = xr.global_ordinal()\n"
                "n = xr.world_size()\n"
                "host = xr.process_index()\n"
                "lead = xm.is_master_ordinal(local=False)\n"
            )
        },
        ["XLA005"],
        {("run.py", 4, "XLA005"), ("run.py", 5, "XLA005"), ("run.py", 7, "XLA005")},
    )


def test_process_identity_in_multiprocess_program_is_fine(tmp_path):
    check(
        tmp_path,
        {
            "run.py": (
                "import torch_xla\nimport torch_xla.runtime as xr\n"
                "def worker(i):\n    return xr.global_ordinal(), xr.world_size()\n"
                "torch_xla.launch(worker, args=())\n"
            )
        },
        ["XLA005"],
        set(),
    )


def test_rendezvous_in_spmd_is_reported(tmp_path):
    check(
        tmp_path,
        {
            "sync.py": (
                "import torch.distributed as dist\nimport torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
                "xr.use_spmd()\ndist.init_process_group('gloo', init_method='xla://')\n"
                "def barrier():\n    xm.rendezvous('ready')\n    dist.barrier()\n"
            )
        },
        ["XLA006"],
        {("sync.py", 7, "XLA006")},
    )


def test_use_spmd_inside_launched_worker_is_reported_at_launch(tmp_path):
    check(
        tmp_path,
        {
            "job.py": (
                "import torch_xla\nimport torch_xla.runtime as xr\n"
                "def worker(index):\n    xr.use_spmd()\n"
                "if __name__ == '__main__':\n    torch_xla.launch(worker, args=())\n"
            )
        },
        ["XLA007"],
        {("job.py", 6, "XLA007")},
    )


def test_fsdpv2_positional_mesh_is_reported(tmp_path):
    check(
        tmp_path,
        {
            "wrap.py": (
                "import numpy as np\nimport torch.nn as nn\nimport torch_xla.runtime as xr\n"
                "import torch_xla.distributed.spmd as xs\n"
                "from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDP\n"
                "xr.use_spmd()\nmesh = xs.Mesh(np.arange(4), (4, 1), ('fsdp', 'model'))\n"
                "bad = FSDP(nn.Linear(2, 2), mesh)\ngood = FSDP(nn.Linear(2, 2), mesh=mesh)\n"
            )
        },
        ["XLA009"],
        {("wrap.py", 8, "XLA009")},
    )


def test_string_partition_spec_is_reported(tmp_path):
    check(
        tmp_path,
        {
            "spec.py": (
                "import numpy as np\nimport torch\nimport torch_xla.distributed.spmd as xs\nimport torch_xla.runtime as xr\n"
                "xr.use_spmd()\nmesh = xs.Mesh(np.arange(4), (4,), ('batch',))\nt = torch.zeros(8).to('xla')\n"
                "xs.mark_sharding(t, mesh, ('batch'))\nxs.mark_sharding(t, mesh, ('batch',))\n"
            )
        },
        ["XLA014"],
        {("spec.py", 8, "XLA014")},
    )


def test_item_every_step_is_reported_but_not_every_n_steps(tmp_path):
    check(
        tmp_path,
        {
            "loop.py": (
                "import torch_xla\n"
                "def fit(model, data, opt):\n"
                "    for i, batch in enumerate(data):\n"
                "        with torch_xla.step():\n"
                "            loss = model(batch)\n"
                "            loss.backward()\n"
                "            opt.step()\n"
                "        seen = loss.item()\n"
                "        if i % 10 == 0:\n"
                "            print(loss.item(), flush=True)\n"
            )
        },
        ["XLA201"],
        {("loop.py", 8, "XLA201")},
        preview=True,  # XLA201 is preview (issue 22's gate)
    )


def test_deprecated_device_and_mark_step_are_reported(tmp_path):
    check(
        tmp_path,
        {
            "old.py": (
                "from torch_xla.core import xla_model as xm\n"
                "dev = xm.xla_device()\n"
                "for b in range(3):\n"
                "    xm.mark_step()\n"
            )
        },
        ["XLA301", "XLA302"],
        {("old.py", 2, "XLA301"), ("old.py", 4, "XLA302")},
    )


def test_markdown_code_block_positions_are_in_the_document(tmp_path):
    write_tree(
        tmp_path,
        {
            "README.md": (
                "# Setup\n\nSome prose.\n\n```python\nimport torch_xla.distributed.spmd as xs\n"
                "m = xs.HybridMesh((2, 2), (1, 1), ('a', 'b'))\n```\n\n```bash\necho not python\n```\n"
            )
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA001"], docs=True)
    assert [(d.path, d.line, d.column, d.code) for d in result.diagnostics] == [
        ("README.md", 7, 5, "XLA001")
    ]


def test_names_imported_in_one_markdown_block_resolve_in_the_next(tmp_path):
    write_tree(
        tmp_path,
        {
            "GUIDE.md": (
                "Import first:\n\n```python\nimport torch_xla.distributed.spmd as xs\n```\n\n"
                "Then, later on the page:\n\n```python\nmesh = xs.HybridMesh((2, 2), (1, 1), ('a', 'b'))\n```\n"
            )
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA001"], docs=True)
    assert [(d.path, d.line, d.column) for d in result.diagnostics] == [("GUIDE.md", 10, 8)]


def test_a_pseudo_code_block_does_not_hide_the_others(tmp_path):
    write_tree(
        tmp_path,
        {
            "notes.rst": (
                "Setup\n=====\n\n.. code-block:: python\n\n   model = ...  # fill in\n   for x in:\n\n"
                "Mesh\n\n.. code-block:: python\n\n   import torch_xla.distributed.spmd as xs\n"
                "   m = xs.HybridMesh((4,), (1,), ('fsdp',))\n"
            )
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA001", "XLA000"], docs=True)
    assert [(d.path, d.line, d.column, d.code) for d in result.diagnostics] == [
        ("notes.rst", 14, 8, "XLA001")
    ]


def test_separate_examples_on_one_page_are_not_one_flow(tmp_path):
    # The first block moves a model to the device; the second, a separate example,
    # starts with use_spmd(). Names resolve across blocks, order-sensitive rules do not.
    write_tree(
        tmp_path,
        {
            "guide.md": (
                "```python\nimport torch_xla.runtime as xr\nmodel = Net().to('xla')\n```\n\n"
                "```python\nxr.use_spmd()\nrank = xr.global_ordinal()\n```\n"
            )
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA012", "XLA005"], docs=True)
    assert [(d.line, d.code) for d in result.diagnostics] == [(8, "XLA005")]


def test_spmd_not_enabled_is_reported_once_per_page(tmp_path):
    write_tree(
        tmp_path,
        {
            "guide.md": (
                "```python\nimport torch_xla.distributed.spmd as xs\nmesh = xs.Mesh(ids, (4,), ('fsdp',))\n```\n\n"
                "```python\nxs.mark_sharding(t, mesh, ('fsdp',))\n```\n"
            )
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA002"], docs=True)
    assert [(d.line, d.code) for d in result.diagnostics] == [(3, "XLA002")]
