"""Correctness rules beyond their own examples: version gating, the global_mesh fact, messages."""

from __future__ import annotations

from helpers import lint_tree, write_tree

from xla_lint.program.facts import FileFacts
from xla_lint.program.model import ProgramModel

FSDP_POSITIONAL = (
    "import numpy as np\nimport torch_xla.distributed.spmd as xs\n"
    "from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2\n"
    "mesh = xs.Mesh(np.arange(8), (8,), ('fsdp',))\nmodel = FSDPv2(model, mesh)\n"
)


def _codes(tmp_path, files, select, **kw):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=select, **kw)
    return [(d.path, d.line, d.code, d.message) for d in result.diagnostics]


def test_fsdpv2_positional_mesh_is_only_an_error_from_2_4(tmp_path):
    old = _codes(tmp_path, {"train.py": FSDP_POSITIONAL}, ["XLA009"], target_version="2.3")
    new = _codes(tmp_path, {"train.py": FSDP_POSITIONAL}, ["XLA009"], target_version="2.4")
    assert old == []
    assert [(p, line, c) for p, line, c, _ in new] == [("train.py", 5, "XLA009")]


def test_global_mesh_set_in_an_imported_module_satisfies_fsdpv2(tmp_path):
    files = {
        "train.py": "import mesh_setup\n"
        "from torch_xla.experimental.spmd_fully_sharded_data_parallel import "
        "SpmdFullyShardedDataParallel as FSDPv2\nmodel = FSDPv2(model)\n",
        "mesh_setup.py": "import torch_xla.distributed.spmd as xs\nxs.set_global_mesh(xs.get_1d_mesh('fsdp'))\n",
    }
    assert _codes(tmp_path, files, ["XLA009"]) == []
    (tmp_path / "mesh_setup.py").write_text("import torch_xla.distributed.spmd as xs\n")
    assert [c[:3] for c in _codes(tmp_path, {}, ["XLA009"])] == [("train.py", 3, "XLA009")]


def test_global_mesh_fact_reads_old_facts_and_joins_along_imports():
    old_json = {
        "module": "a",
        "imports": [],
        "enables_spmd": False,
        "shards": True,
        "multiprocess": False,
        "imports_torch_xla": True,
        "group": None,
    }
    assert FileFacts.from_json(old_json).sets_global_mesh is False
    a = FileFacts(module="a", imports=frozenset({"b"}), entry=True)
    b = FileFacts(module="b", sets_global_mesh=True)
    assert FileFacts.from_json(b.to_json()) == b
    program = ProgramModel({"a.py": a, "b.py": b})
    assert program.holds("a.py", (("global_mesh", True),))
    assert program.holds("b.py", (("global_mesh", True),))
    lone = ProgramModel({"a.py": FileFacts(module="a", entry=True, requires_torch_xla=True)})
    assert lone.holds("a.py", (("global_mesh", False),))
    # A library module (no program reaches it) has no mode: its user's script may set the mesh.
    assert not ProgramModel({"a.py": FileFacts(module="a")}).holds(
        "a.py", (("global_mesh", False),)
    )


def test_messages_name_what_came_first(tmp_path):
    files = {
        "train.py": "import torch_xla\nimport torch_xla.runtime as xr\n"
        "model = Model().to('xla')\nxr.use_spmd()\n"
    }
    [(_, line, code, message)] = _codes(tmp_path, files, ["XLA012"])
    assert (line, code) == (4, "XLA012") and "Model().to('xla')" in message
    files = {
        "train.py": "import torch_xla\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
        "dev = torch_xla.device()\ndef _mp_fn(i):\n    pass\nxmp.spawn(_mp_fn)\n"
    }
    [(_, line, code, message)] = _codes(tmp_path, files, ["XLA018"])
    assert (
        (line, code) == (3, "XLA018") and "xmp.spawn" in message and "torch_xla.device()" in message
    )


def test_multiprocess_rules_stay_quiet_in_spmd_programs(tmp_path):
    body = (
        "import torch\nimport torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
        "from torch.utils.data import DataLoader\n{spmd}"
        "def _mp_fn(i):\n    loader = DataLoader(ds, batch_size=8)\n"
        "    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)\n    xm.optimizer_step(opt)\n"
        "    if xm.is_master_ordinal():\n        print(loss.item(), flush=True)\n"
        "import torch_xla\ntorch_xla.launch(_mp_fn)\n"
    )
    codes = ["XLA015", "XLA016", "XLA017"]
    found = _codes(tmp_path, {"train.py": body.format(spmd="")}, codes, preview=True)
    assert sorted((line, code) for _, line, code, _ in found) == [
        (6, "XLA017"),
        (7, "XLA016"),
        (10, "XLA015"),
    ]
    found = _codes(tmp_path, {"train.py": body.format(spmd="xr.use_spmd()\n")}, codes, preview=True)
    assert found == []


def test_master_print_in_spmd_is_a_warning_and_a_guarded_write_an_error(tmp_path):
    write_tree(
        tmp_path,
        {
            "train.py": "import torch\nimport torch_xla.core.xla_model as xm\n"
            "import torch_xla.runtime as xr\nxr.use_spmd()\n"
            "xm.master_print('epoch done')\n"
            "if xm.is_master_ordinal():\n    torch.save({}, 'log.pt')\n"
            "if xm.is_master_ordinal() and verbose:\n    print('done', flush=True)\n"
            "    logger.info('done')\n"
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA005"])
    assert [(d.line, d.severity.value) for d in result.diagnostics] == [
        (5, "warning"),
        (6, "error"),
        (8, "warning"),
    ]


def test_xla014_message_shows_a_spec_split_over_lines_on_one_line(tmp_path):
    src = (
        "import torch_xla.distributed.spmd as xs\n"
        "xs.mark_sharding(t, mesh, (\n"
        "                          'data'\n"
        "                          ))\n"
    )
    write_tree(tmp_path, {"a.py": src})
    result, _, _ = lint_tree(tmp_path, select=["XLA014"])
    [d] = result.diagnostics
    assert d.message == "partition spec `('data')` is a string, not a tuple: write `('data',)`"


def test_xla009_message_writes_a_one_name_mesh_as_a_tuple(tmp_path):
    src = (
        "import numpy as np\nimport torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
        "from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2\n"
        "xr.use_spmd()\nmesh = xs.Mesh(np.arange(8), (8,), ('data',))\nmodel = FSDPv2(model, mesh=mesh)\n"
    )
    write_tree(tmp_path, {"a.py": src})
    result, _, _ = lint_tree(tmp_path, select=["XLA009"], entry_points={"a.py": "single"})
    [d] = result.diagnostics
    assert "the mesh's axis names are ('data',): ValueError" in d.message
