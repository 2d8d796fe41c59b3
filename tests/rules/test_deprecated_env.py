"""XLA304 and XLA013 on environment variables, beyond the rules' own examples."""

from __future__ import annotations

from helpers import lint_tree, write_tree

USE_SPMD_IMPL = "import os\ndef use_spmd():\n    os.environ['XLA_USE_SPMD'] = '1'\n"


def test_torch_xla_own_package_may_set_xla_use_spmd(tmp_path):
    # torch_xla/runtime.py's use_spmd() sets the variable itself: that is the implementation, not a use.
    write_tree(
        tmp_path,
        {
            "torch_xla/__init__.py": "",
            "torch_xla/runtime.py": USE_SPMD_IMPL,
            "train.py": "import torch_xla\n" + USE_SPMD_IMPL,
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA304"])
    assert [(d.path, d.line) for d in result.diagnostics] == [("train.py", 4)]


def test_removed_variables_depend_on_target_version(tmp_path):
    write_tree(
        tmp_path,
        {
            "train.py": "import os\nimport torch_xla\nos.environ['XLA_USE_FP16'] = '1'\n"
            "os.environ['XRT_TPU_CONFIG'] = 'localservice;0;localhost:51011'\n"
        },
    )
    for version, lines in (("2.9", [3, 4]), ("2.4", [4]), ("2.0", [])):
        result, _, _ = lint_tree(tmp_path, select=["XLA013"], target_version=version)
        assert [d.line for d in result.diagnostics] == lines, version


def test_removed_functions_depend_on_target_version(tmp_path):
    write_tree(
        tmp_path,
        {
            "train.py": "import torch_xla.core.xla_model as xm\n"
            "import torch_xla.experimental.xla_sharding as xs\n"
            "n = xm.xrt_world_size()\n"
        },
    )
    for version, lines in (("2.9", [2, 3]), ("2.6", [2]), ("2.4", [])):
        result, _, _ = lint_tree(tmp_path, select=["XLA013"], target_version=version)
        assert [d.line for d in result.diagnostics] == lines, version
