"""XLA303 when torch_xla's own source is linted together with the user's scripts."""

from __future__ import annotations

from helpers import lint_tree, write_tree

RUNTIME = "import os\ndef use_spmd():\n    os.environ['XLA_USE_SPMD'] = '1'\n"
SCRIPT = (
    "import torch_xla.runtime as xr\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
    "def _mp_fn(i):\n    pass\nxmp.spawn(_mp_fn, args=())\n"
)


def test_torch_xla_package_does_not_make_its_importers_spmd(tmp_path):
    # torch_xla/runtime.py's use_spmd() sets XLA_USE_SPMD: that implementation must not turn every
    # script importing torch_xla.runtime into an SPMD program (which would hide XLA303).
    write_tree(
        tmp_path, {"torch_xla/__init__.py": "", "torch_xla/runtime.py": RUNTIME, "train.py": SCRIPT}
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA303"])
    assert [(d.path, d.line) for d in result.diagnostics] == [("train.py", 5)]


def test_a_user_module_enabling_spmd_still_counts(tmp_path):
    write_tree(
        tmp_path,
        {
            "setup_spmd.py": "import torch_xla.runtime as xr\nxr.use_spmd()\n",
            "train.py": "import setup_spmd\n" + SCRIPT,
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA303"])
    assert result.diagnostics == []
