"""Sites outside Python source: launch scripts (their torch_xla variables and ``python -m
torch_xla...`` modules, read through the program model's launches), requirement pins
(requirements files, ``pyproject.toml``, ``setup.cfg``, ``setup.py``), notebooks' code cells
and documents' Python blocks (read by the lint's own readers, never rewritten)."""

from __future__ import annotations

import json
import os
import textwrap

from click.testing import CliRunner

from xla_lint.cli import main
from xla_lint.migrate import table
from xla_lint.migrate.pins import pin_sites

TRAIN = """
import torch_xla.core.xla_model as xm

def step():
    xm.mark_step()

step()
"""

LAUNCHER = """#!/bin/bash
export PJRT_DEVICE=TPU
export TPU_NUM_DEVICES=4
XLA_USE_BF16=1 python train.py
python train.py --again
python -m torch_xla.distributed.xla_dist --tpu=pod -- python train.py
export XLA_FLAGS=--xla_dump_to=/tmp/dump
python -m pip install -r requirements.txt
"""


def run(tmp_path, *args):
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(
            main,
            ["migrate", "--to", "torchtpu", "--isolated", "--output-format", "json", *args, "."],
        )
    finally:
        os.chdir(old)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)


def write(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text) if not name.endswith(".sh") else text)


def keyed(data, path):
    return {
        (s["line"], s["api"]): (s["column"], s["class"], s["source"])
        for s in data["sites"]
        if s["path"] == path
    }


def test_launcher_variables_and_modules_are_sites_at_the_line_that_sets_them(tmp_path):
    write(tmp_path, {"train.py": TRAIN, "run.sh": LAUNCHER})
    data = run(tmp_path)
    assert keyed(data, "run.sh") == {
        (2, "env:PJRT_DEVICE"): (8, "no-equivalent", "shell"),  # once, for both commands
        (3, "env:TPU_NUM_DEVICES"): (8, "decision", "shell"),
        (4, "env:XLA_USE_BF16"): (1, "no-equivalent", "shell"),
        (6, "python -m torch_xla.distributed.xla_dist"): (11, "no-equivalent", "shell"),
        # XLA_FLAGS is exported only before pip, a tool: not set for any program
    }
    bf16 = next(s for s in data["sites"] if s["api"] == "env:XLA_USE_BF16")
    assert bf16["program"]["entry"] == "train.py" and not bf16["fixable"]
    assert "torch.autocast" in bf16["target"]
    xla_dist = next(s for s in data["sites"] if s["api"].startswith("python -m"))
    assert xla_dist["program"] == {"entry": None, "kind": "launcher", "mode": "none", "others": 0}
    assert "torchrun" in xla_dist["target"]


def test_a_variable_torch_tpu_also_reads_is_kept(tmp_path):
    write(
        tmp_path,
        {
            "train.py": TRAIN,
            "run.sh": "export XLA_FLAGS=--xla_dump_to=/tmp/d TPU_WORKER_HOSTNAMES=a,b\n"
            "export TPU_LAUNCH_BLOCKING=1\npython train.py\n",
        },
    )
    sites = keyed(run(tmp_path), "run.sh")
    assert sites[(1, "env:XLA_FLAGS")][1] == "mechanical"
    assert sites[(1, "env:TPU_WORKER_HOSTNAMES")][1] == "mechanical"
    # not a torch_xla variable (older TorchTPU docs spell it; XLA403's business, not migrate's)
    assert (2, "env:TPU_LAUNCH_BLOCKING") not in sites


def test_a_torch_xla_variable_set_in_a_readme_shell_block_is_a_document_site(tmp_path):
    write(
        tmp_path,
        {
            "train.py": TRAIN,
            "README.md": "# Train\n\n```bash\nPJRT_DEVICE=TPU python train.py\n```\n",
        },
    )
    assert keyed(run(tmp_path), "README.md") == {
        (4, "env:PJRT_DEVICE"): (1, "no-equivalent", "document")
    }


def test_requirement_pins(tmp_path):
    write(
        tmp_path,
        {
            "requirements.txt": """\
                torch==2.9.0
                torch_xla[tpu]==2.9.0  # the TPU wheel
                -f https://storage.googleapis.com/libtpu-releases/index.html
                numpy>=1.26
                # torch_xla is pinned above
                """,
            "requirements/dev.txt": "Torch-XLA >= 2.5 \\\n    ; python_version >= '3.10'\n",
            "pyproject.toml": """\
                [project]
                name = "trainer"
                dependencies = ["numpy", "torch-xla>=2.5"]

                [project.optional-dependencies]
                tpu = ["libtpu==0.0.21"]
                """,
            "setup.cfg": "[options]\ninstall_requires =\n    torch_xla\n    requests\n",
            "setup.py": """\
                from setuptools import setup
                setup(name="t", install_requires=["torch", "torch_xla[tpu]~=2.9"])
                """,
        },
    )
    data = run(tmp_path)
    pins = {(s["path"], s["line"], s["column"], s["api"]): s["class"] for s in data["sites"]}
    assert pins == {
        ("pyproject.toml", 3, 27, "pin:torch-xla"): "decision",
        ("pyproject.toml", 6, 9, "pin:libtpu"): "decision",
        ("requirements.txt", 1, 1, "pin:torch"): "decision",
        ("requirements.txt", 2, 1, "pin:torch-xla"): "decision",
        ("requirements.txt", 3, 1, "pin:index"): "no-equivalent",
        (os.path.join("requirements", "dev.txt"), 1, 1, "pin:torch-xla"): "decision",
        ("setup.cfg", 3, 5, "pin:torch-xla"): "decision",
        ("setup.py", 2, 45, "pin:torch-xla"): "decision",
        # setup.py's "torch" is a pin of the same list as torch_xla
        ("setup.py", 2, 36, "pin:torch"): "decision",
    }
    xla = next(s for s in data["sites"] if s["path"] == "requirements.txt" and s["line"] == 2)
    assert xla["target"].startswith("`torch_xla[tpu]==2.9.0`: torch-tpu==0.2.0")
    assert xla["source"] == "requirements" and not xla["fixable"]
    # the versions named are the wheel's METADATA, as the data file records it
    requires = table.torchtpu_api()["metadata"]["requires_dist"]
    assert requires["torch"] in xla["target"] and requires["libtpu"] in xla["target"]
    assert requires["torch"] == "torch>=2.11.0,<=2.15.0"


def test_pins_not_read_from_code_or_unparseable_manifests(tmp_path):
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\nREQS = ['torch_xla']\nsetup(install_requires=REQS)\n"
    )
    (tmp_path / "pyproject.toml").write_text("[project\nname = 'broken'\n")
    assert pin_sites(str(tmp_path / "setup.py")) == []  # a list built in code: not followed
    assert pin_sites(str(tmp_path / "pyproject.toml")) == []
    # a torch pin without torch_xla in the same file is not a migration site
    (tmp_path / "requirements.txt").write_text("torch==2.9.0\n")
    assert pin_sites(str(tmp_path / "requirements.txt")) == []


NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# TPU"]},
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": [
                "import torch_xla.core.xla_model as xm\n",
                "device = xm.xla_device()\n",
                "xm.mark_step()\n",
            ],
        },
    ],
    "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def test_notebook_cells_are_read_and_never_rewritten(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps(NOTEBOOK, indent=1))
    before = path.read_text()
    data = run(tmp_path)
    sites = [s for s in data["sites"] if s["path"] == "train.ipynb"]
    apis = {s["api"]: s for s in sites}
    device = apis["torch_xla.core.xla_model.xla_device"]
    assert device["class"] == "mechanical" and device["cell"] == 2 and not device["fixable"]
    assert device["source"] == "notebook"
    assert apis["torch_xla.core.xla_model.mark_step"]["class"] == "behaviour-change"
    # placed in the .ipynb file, on the line of the JSON string that holds the cell's line
    assert before.splitlines()[device["line"] - 1].strip().startswith('"device = xm.xla_device()')
    fixed = CliRunner().invoke(
        main, ["migrate", "--to", "torchtpu", "--isolated", "--fix", "--unsafe-fixes", str(path)]
    )
    assert fixed.exit_code == 1 and path.read_text() == before


def test_markdown_python_blocks_are_read_with_docs_on(tmp_path):
    write(
        tmp_path,
        {
            "guide.md": """\
                # Guide

                ```python
                import torch_xla
                device = torch_xla.device()
                ```
                """,
            "pyproject.toml": "[tool.xla-lint]\ndocs = true\n",
        },
    )
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(
            main, ["migrate", "--to", "torchtpu", "--output-format", "json", "."]
        )
        off = CliRunner().invoke(
            main, ["migrate", "--to", "torchtpu", "--isolated", "--output-format", "json", "."]
        )
    finally:
        os.chdir(old)
    sites = [s for s in json.loads(result.output)["sites"] if s["path"] == "guide.md"]
    assert {(s["line"], s["column"], s["api"], s["source"]) for s in sites} == {
        (4, 1, "torch_xla", "document"),
        (5, 10, "torch_xla.device", "document"),
    }
    assert not any(s["fixable"] for s in sites)
    assert not [s for s in json.loads(off.output)["sites"] if s["path"] == "guide.md"]


def test_each_file_is_parsed_once(tmp_path, monkeypatch):
    """The sites come from the lint's own traversal (the visitor is one of its rules): a file
    the lint parses is not parsed again by migrate; a file the lint's prefilter skips that may
    hold a site (a "xla" device string without torch_xla) is parsed by migrate alone."""
    import libcst

    from xla_lint.config import build_settings
    from xla_lint.migrate.run import migrate_paths

    write(
        tmp_path,
        {
            "train.py": TRAIN,
            "plain.py": "import torch\nx = torch.zeros(2, device='xla')\n",
            "other.py": "import torch\n",
        },
    )
    parsed: list[str] = []
    real = libcst.parse_module

    def counting(source, *args, **kwargs):
        parsed.append(source if isinstance(source, str) else source.decode())
        return real(source, *args, **kwargs)

    monkeypatch.setattr(libcst, "parse_module", counting)
    monkeypatch.chdir(tmp_path)
    settings = build_settings(cwd=tmp_path, select=["XLA000"], isolated=True)
    migration = migrate_paths(["."], settings, jobs=1)
    apis = {(s.site.path, s.site.api) for s in migration.sites}
    assert ("train.py", "torch_xla.core.xla_model.mark_step") in apis
    assert ("plain.py", 'device "xla"') in apis
    assert parsed.count(textwrap.dedent(TRAIN)) == 1
    assert len(parsed) == 2  # train.py by the lint, plain.py by migrate; other.py by neither


def test_python_m_pip_install_of_torch_xla_in_a_launcher_is_a_pin(tmp_path):
    write(
        tmp_path,
        {
            "setup_env.sh": 'python3 -m pip install numpy "torch_xla[tpu]==2.9.0" '
            "-f https://storage.googleapis.com/libtpu-releases/index.html\n"
            "pip install torch_xla\n",  # a bare pip: not a command the launcher model reads
        },
    )
    sites = keyed(run(tmp_path), "setup_env.sh")
    assert sites == {
        (1, "pin:torch-xla"): (31, "decision", "shell"),
        (1, "pin:index"): (57, "no-equivalent", "shell"),
    }


def test_platform_variables_a_program_reads_are_not_sites(tmp_path):
    # GKE sets TPU_WORKER_ID; torchprime's launcher names its worker with it
    write(tmp_path, {"thunk.py": "import os\nworker = os.getenv('TPU_WORKER_ID', '0')\n"})
    (tmp_path / "layout.py").write_text(
        "import os\nimport torch_xla\nos.environ['TPU_VISIBLE_CHIPS'] = '0'\n"
    )
    data = run(tmp_path)
    assert not [s for s in data["sites"] if s["path"] == "thunk.py"]
    chips = [s for s in data["sites"] if s["api"] == "env:TPU_VISIBLE_CHIPS"]
    assert [(s["line"], s["class"]) for s in chips] == [(3, "decision")]
