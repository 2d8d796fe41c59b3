"""Discovery and launchers: files named on the command line that are (also) launchers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import write_tree

from xla_lint.config import build_settings
from xla_lint.pipeline.discover import discover


def _discover(root, paths):
    old = os.getcwd()
    os.chdir(root)
    try:
        launchers: list[str] = []
        targets = discover(paths, build_settings(cwd=root, isolated=True), launchers)
        return [(t.path, t.kind) for t in targets], launchers
    finally:
        os.chdir(old)


def test_named_shell_script_is_a_launcher_not_a_target(tmp_path):
    write_tree(
        tmp_path,
        {
            "run.sh": "export XLA_USE_SPMD=1\npython train.py\n",
            "tools/go.bash": "python x.py\n",
            "train.py": "import torch_xla\n",
        },
    )
    targets, launchers = _discover(tmp_path, ["run.sh", "tools/go.bash", "train.py"])
    assert targets == [("train.py", "python")]
    assert launchers == ["run.sh", os.path.join("tools", "go.bash")]
    assert _discover(tmp_path, ["run.sh"])[0] == []


def test_named_page_is_a_doc_target_and_a_launcher(tmp_path):
    write_tree(
        tmp_path,
        {"README.md": "```bash\nXLA_USE_SPMD=1 python train.py\n```\n", "docs/x.rst": "Text\n"},
    )
    targets, launchers = _discover(tmp_path, ["README.md", "docs/x.rst"])
    assert targets == [("README.md", "doc"), (os.path.join("docs", "x.rst"), "doc")]
    assert launchers == ["README.md", os.path.join("docs", "x.rst")]


def test_a_launcher_named_and_found_in_a_folder_is_read_once(tmp_path):
    write_tree(
        tmp_path, {"run.sh": "python train.py\n", "pyproject.toml": "[project]\nname = 'x'\n"}
    )
    targets, launchers = _discover(tmp_path, ["run.sh", ".", "pyproject.toml"])
    assert targets == []
    assert sorted(launchers) == ["pyproject.toml", "run.sh"]


def test_cli_with_a_named_shell_script_uses_it_as_launcher(tmp_path):
    write_tree(
        tmp_path,
        {
            "run.sh": "export XLA_USE_SPMD=1\npython train.py\n",
            "train.py": "import torch_xla.runtime as xr\n\nif __name__ == '__main__':\n"
            "    print(xr.global_ordinal())\n",
        },
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "xla_lint",
            "--isolated",
            "--no-cache",
            "--output-format",
            "json",
            "run.sh",
            "train.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = [(d["path"], d["code"]) for d in json.loads(proc.stdout)]
    assert not any(code == "XLA000" for _, code in found), proc.stdout
    assert ("train.py", "XLA005") in found, proc.stdout


def test_a_file_without_suffix_is_a_launcher_by_its_shell_shebang(tmp_path):
    write_tree(
        tmp_path,
        {
            "scripts/train": "#!/bin/bash\npython train.py\n",
            "scripts/tool": "#!/usr/bin/env python3\nprint(1)\n",
            "LICENSE": "MIT\n",
            "train.py": "import torch_xla\n",
        },
    )
    targets, launchers = _discover(tmp_path, ["."])
    assert launchers == [os.path.join("scripts", "train")]
    assert targets == [("train.py", "python")]
    # Named on the command line: a launcher too, never a Python target.
    assert _discover(tmp_path, ["scripts/train"]) == ([], [os.path.join("scripts", "train")])
