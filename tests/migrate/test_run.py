"""``xla-lint migrate --to torchtpu``: the report formats, the program and mode of each site,
``--diff`` and ``--fix`` (the files rewritten, then nothing left to rewrite)."""

from __future__ import annotations

import json
import os
import textwrap

import libcst as cst
from click.testing import CliRunner

from xla_lint.cli import main

SPAWNED = """
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
import torch_xla.distributed.xla_multiprocessing as xmp


def _mp_fn(index):
    device = torch_xla.device()
    rank = xr.global_ordinal()
    for step in range(3):
        xm.mark_step()


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=())
"""

SPMD = """
import torch_xla.runtime as xr
import torch_xla.distributed.spmd as xs

xr.use_spmd()
rank = xr.global_ordinal()
mesh = xs.Mesh(list(range(4)), (4,), ("data",))
"""


def tree(tmp_path):
    (tmp_path / "spawned.py").write_text(textwrap.dedent(SPAWNED))
    (tmp_path / "spmd.py").write_text(textwrap.dedent(SPMD))
    return tmp_path


def run(tmp_path, *args):
    """``xla-lint migrate --to torchtpu ARGS .`` run in ``tmp_path``."""
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        return CliRunner().invoke(main, ["migrate", "--to", "torchtpu", "--isolated", *args, "."])
    finally:
        os.chdir(old)


def test_json_report_has_sites_summary_and_order(tmp_path):
    result = run(tree(tmp_path), "--output-format", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    assert set(data) == {"sites", "summary", "order"}
    site = next(s for s in data["sites"] if s["api"] == "torch_xla.device")
    assert {k: site[k] for k in ("path", "line", "column", "class", "fixable")} == {
        "path": "spawned.py",
        "line": 10,
        "column": 14,
        "class": "mechanical",
        "fixable": True,
    }
    assert site["target"].startswith('torch.device("tpu")')
    assert site["program"] == {
        "entry": "spawned.py",
        "kind": "script",
        "mode": "multiprocess",
        "others": 0,
    }
    assert data["summary"]["sites"] == len(data["sites"])
    assert [step["phase"] for step in data["order"]][-1] == "imports"


def test_a_rank_is_mechanical_in_a_spawned_program_and_a_decision_in_spmd(tmp_path):
    data = json.loads(run(tree(tmp_path), "--output-format", "json").output)
    ranks = {s["path"]: s for s in data["sites"] if s["api"].endswith("global_ordinal")}
    assert ranks["spawned.py"]["class"] == "mechanical" and ranks["spawned.py"]["fixable"]
    assert ranks["spmd.py"]["class"] == "decision" and not ranks["spmd.py"]["fixable"]
    assert ranks["spmd.py"]["program"]["mode"] == "spmd"


def test_text_and_markdown_group_by_file_and_class(tmp_path):
    text = run(tree(tmp_path)).output
    assert "spawned.py  (runs in spawned.py (script, multiprocess))" in text
    assert "  decision (1)\n    17:5 torch_xla.distributed.xla_multiprocessing.spawn" in text
    assert "Order to migrate:" in text and "nothing of TorchTPU ran" in text
    md = run(tree(tmp_path), "--output-format", "markdown").output
    assert md.startswith("# Migration to TorchTPU 0.2.0")
    assert "## `spmd.py`" in md and "| 5:1 | no-equivalent | `torch_xla.runtime.use_spmd` |" in md


def test_diff_changes_nothing_and_fix_is_idempotent(tmp_path):
    root = tree(tmp_path)
    before = (root / "spawned.py").read_text()
    diff = run(root, "--diff")
    assert diff.exit_code == 1 and '+    device = torch.device("tpu")' in diff.output
    assert "xm.mark_step()" in diff.output and "-        xm.mark_step()" not in diff.output
    assert (root / "spawned.py").read_text() == before
    first = run(root, "--fix", "--unsafe-fixes")
    assert first.exit_code == 1, first.output  # the decisions remain
    after = (root / "spawned.py").read_text()
    cst.parse_module(after)
    assert 'device = torch.device("tpu")' in after and "mark_step" not in after
    assert "rank = torch.distributed.get_rank()" in after
    assert "xmp.spawn(_mp_fn, args=())" in after  # a decision: never rewritten
    assert (root / "spmd.py").read_text() == textwrap.dedent(SPMD).replace("xr.use_spmd()\n", "")
    second = run(root, "--diff", "--unsafe-fixes")
    assert second.exit_code == 0 and second.output == ""


def test_usage_errors(tmp_path):
    assert run(tree(tmp_path), "--fix", "--diff").exit_code == 2
    assert run(tree(tmp_path), "--diff", "--output-format", "json").exit_code == 2
