"""A reader that closes standard output early (``xla-lint ... | head -1``).

The command runs in a subprocess whose standard output is a pipe; the test reads one line of
it and closes it. Whether the run had written everything by then depends on timing, so each
command runs several times; every run must exit with the status the run has when its output
is read to the end (never 2, the status of a usage error), with no traceback.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

WAIT = 120  # seconds for one run (a loaded machine lints slowly)

# 700 diagnostics (XLA302, each with a safe fix): a report larger than a pipe holds (64 KiB on
# Linux), so a reader that stops after one line breaks the pipe under it.
MANY = "import torch_xla.core.xla_model as xm\n" + "xm.mark_step()  # step\n" * 700
# The diff of each file is written on its own, after its fixes are made: the reader has left
# before the later ones.
STEPS = "import torch_xla.core.xla_model as xm\n" + f"xm.mark_step()  # {'x' * 100}\n" * 20


def first_line_then_close(cwd: Path, *args: str, merge_stderr: bool = False) -> tuple[int, str]:
    """Run ``python -m xla_lint ARGS``; read one line of its output and close the pipe.
    Returns the exit status and standard error (merged into the pipe: only the first line)."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "xla_lint", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else err,
        )
        assert proc.stdout is not None
        try:
            first = proc.stdout.readline()
            proc.stdout.close()
            status = proc.wait(WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(WAIT)
        err.seek(0)
        return status, first.decode() if merge_stderr else err.read().decode()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pipe")
    (root / "many").mkdir()
    (root / "many" / "steps.py").write_text(MANY)
    (root / "diffs").mkdir()
    for n in range(4):
        (root / "diffs" / f"steps{n}.py").write_text(STEPS)
    return root


def test_rule_list(tree: Path) -> None:
    statuses, errors = [], []
    for _ in range(20):
        status, err = first_line_then_close(tree, "rule", "--all")
        statuses.append(status)
        errors.append(err)
    assert statuses == [0] * 20
    assert errors == [""] * 20


def test_report_with_findings(tree: Path) -> None:
    for _ in range(3):
        assert first_line_then_close(tree, "--no-cache", "many") == (1, "")


def test_diff(tree: Path) -> None:
    for _ in range(3):
        assert first_line_then_close(tree, "--no-cache", "--fix", "--diff", "diffs") == (1, "")
    assert (tree / "diffs" / "steps0.py").read_text() == STEPS  # --diff writes nothing


def test_standard_error_into_the_same_pipe(tree: Path) -> None:
    """``2>&1 | head -1``: the notes written to standard error after the reader left are lost
    quietly too."""
    status, first = first_line_then_close(tree, "--no-cache", "-v", "many", merge_stderr=True)
    assert (status, first) == (1, f"xla-lint: linted {Path('many', 'steps.py')}\n")
