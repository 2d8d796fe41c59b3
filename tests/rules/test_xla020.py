"""XLA020 use-spmd-return-value: `xr.use_spmd()` read as a value, beyond the rule's own examples."""

from __future__ import annotations

from helpers import lint_tree, write_tree

SCRIPT = """\
import torch_xla.runtime as xr
from torch_xla.distributed.spmd import Mesh

xr.use_spmd()
spec = ('data', None) if xr.use_spmd() else None
if xr.is_spmd():
    mesh = Mesh(ids, (4, 2), ('data', 'model'))
enabled = xr.use_spmd(auto=True)
"""


def _found(tmp_path, files):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA020"])
    return [(d.path, d.line, d.message) for d in result.diagnostics]


def test_condition_and_value_are_reported_with_their_own_reason(tmp_path):
    found = _found(tmp_path, {"train.py": SCRIPT})
    assert [(p, line) for p, line, _ in found] == [("train.py", 5), ("train.py", 8)]
    condition, value = found[0][2], found[1][2]
    assert "as a condition it is always false" in condition and "`xr.is_spmd()`" in condition
    assert "its value is always None" in value and "`xr.is_spmd()`" in value


def test_a_project_function_or_method_called_use_spmd_is_not_torch_xla_s(tmp_path):
    found = _found(
        tmp_path,
        {
            "config.py": "def use_spmd():\n    return True\n",
            "train.py": "import torch_xla\nfrom config import use_spmd\nimport config as cfg\n"
            "if use_spmd():\n    pass\nok = cfg.use_spmd()\nflag = args.use_spmd()\n",
        },
    )
    assert found == []


def test_the_old_experimental_pjrt_spelling_resolves_too(tmp_path):
    # torch_xla.experimental.pjrt was the runtime module's name before 2.5 (apis.canonical maps it).
    found = _found(
        tmp_path, {"train.py": "from torch_xla.experimental import pjrt\nassert pjrt.use_spmd()\n"}
    )
    assert [(p, line) for p, line, _ in found] == [("train.py", 2)]
