"""The bundled example program: it shows the five core codes, and --fix repairs XLA001 and XLA004."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from xla_lint.pipeline.fixes import parses

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "pitfalls"
CORE = ["XLA001", "XLA002", "XLA003", "XLA004", "XLA005"]


def xla_lint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "xla_lint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def codes(proc: subprocess.CompletedProcess) -> list[str]:
    return sorted(
        {line.split(": ", 1)[1].split()[0] for line in proc.stdout.splitlines() if ": XLA" in line}
    )


def test_example_shows_all_five_core_codes(tmp_path):
    proc = xla_lint("--select", ",".join(CORE), str(EXAMPLE), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert codes(proc) == CORE


def test_fix_repairs_hybrid_mesh_and_print_and_result_parses(tmp_path):
    work = tmp_path / "pitfalls"
    shutil.copytree(EXAMPLE, work)
    proc = xla_lint("--fix", "--select", ",".join(CORE), ".", cwd=work)
    assert proc.returncode == 1  # XLA002, XLA003, XLA005 have no safe fix and remain
    fixed = (work / "train_fsdpv2.py").read_text()
    assert parses(fixed)
    assert (
        "xs.HybridMesh(ici_mesh_shape=ici_mesh_shape, dcn_mesh_shape=dcn_mesh_shape, axis_names=("
        in fixed
    )
    assert 'print(f"step {step} loss {loss.item():.4f}", flush=True)' in fixed
    again = xla_lint("--select", ",".join(CORE), ".", cwd=work)
    assert codes(again) == ["XLA002", "XLA003", "XLA005"]
    before = fixed
    xla_lint("--fix", "--select", ",".join(CORE), ".", cwd=work)
    assert (work / "train_fsdpv2.py").read_text() == before  # a second --fix changes nothing
