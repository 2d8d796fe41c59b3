"""Launchers: the commands in shell scripts and docs that run the tree's files."""

from __future__ import annotations

from xla_lint.launchers import project_scripts, scan


def runs(path: str, text: str) -> list[tuple[str, bool, list[str], str]]:
    return [(launch.runs, launch.module, sorted(launch.facts), launch.where) for launch in scan(path, text)]


def test_exported_and_inline_environment():
    text = ("#!/bin/bash\nset -e\nexport XLA_USE_SPMD=1\npython3 train.py --steps 10\n"
            "unset XLA_USE_SPMD\nPYTHONUNBUFFERED=1 nohup python eval.py &\npython -m pkg.cli -x\n")
    assert runs("run.sh", text) == [
        ("train.py", False, ["spmd"], "run.sh:4"),
        ("eval.py", False, ["unbuffered"], "run.sh:6"),
        ("pkg.cli", True, [], "run.sh:7"),
    ]


def test_torchrun_and_distributed_run_are_one_process_per_device():
    text = ("torchrun --nproc_per_node=4 --master_port 1234 \\\n    examples/train.py --bf16\n"
            "python -m torch.distributed.run --nnodes 1 -m pkg.main\n")
    assert runs("x.sh", text) == [
        ("examples/train.py", False, ["multiprocess"], "x.sh:1"),
        ("pkg.main", True, ["multiprocess"], "x.sh:3"),
    ]


def test_python_options_and_commands_that_run_no_file():
    text = ("python -W ignore -u train.py\npython -c 'import torch_xla'\npip install torch_xla\n"
            "echo python train.py  # not run\npython setup.py develop ; python3.11 -X dev a.py\n")
    assert [r[:3] for r in runs("x.sh", text)] == [
        ("train.py", False, ["unbuffered"]), ("setup.py", False, []), ("a.py", False, [])]


def test_markdown_and_rst_shell_blocks():
    md = ("# Guide\n\n```python\nimport os\n```\n\n```bash\n$ export XLA_USE_SPMD=1\n$ python train.py\n```\n\n"
          "```console\nXLA_USE_SPMD=0 python other.py\n```\n")
    assert runs("docs/GUIDE.md", md) == [("train.py", False, ["spmd"], "docs/GUIDE.md:9"),
                                         ("other.py", False, [], "docs/GUIDE.md:13")]
    rst = "Run\n\n.. code-block:: bash\n\n   XLA_USE_SPMD=1 python run_spmd.py\n\nText\n"
    assert runs("docs/x.rst", rst) == [("run_spmd.py", False, ["spmd"], "docs/x.rst:5")]


def test_unreadable_shell_is_skipped_not_fatal():
    assert runs("x.sh", "python 'unterminated.py\npython ok.py\n") == [("ok.py", False, [], "x.sh:2")]


def test_project_scripts(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname="a"\n[project.scripts]\na = "pkg.cli:main"\n')
    [launch] = project_scripts(str(tmp_path))
    assert (launch.runs, launch.module) == ("pkg.cli", True)
    (tmp_path / "pyproject.toml").write_text("not toml = = =")
    assert project_scripts(str(tmp_path)) == []
