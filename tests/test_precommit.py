"""The repository's pre-commit hooks, installed by pre-commit itself.

``pre-commit try-repo`` is pointed at a clean clone of this repository's HEAD (so the
committed ``.pre-commit-hooks.yaml`` and code are what is tested, and pre-commit builds
the hook's virtualenv, ``pip install .``, once for all three runs; that needs PyPI or a
pip cache), and runs the hooks on a temporary git repository holding a file with a
fixable finding.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BAD = "import torch_xla\n\n\ndef log(step):\n    print('step', step)\n"
FIXED = "import torch_xla\n\n\ndef log(step):\n    print('step', step, flush=True)\n"


def _pre_commit() -> str | None:
    beside = Path(sys.executable).parent / "pre-commit"
    return str(beside) if beside.exists() else shutil.which("pre-commit")


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory) -> Path:
    """One PRE_COMMIT_HOME for the session, so both hooks share the built environment."""
    return tmp_path_factory.mktemp("pre-commit-home")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="session")
def hooks_repo(tmp_path_factory) -> Path:
    """A clone of this repository at HEAD."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: pre-commit try-repo needs the repository's history")
    clone = tmp_path_factory.mktemp("hooks-repo") / "xla-lint"
    _git(ROOT, "clone", "-q", str(ROOT), str(clone))
    return clone


@pytest.mark.slow
def test_hooks_report_and_fix(tmp_path, pre_commit_home, hooks_repo):
    exe = _pre_commit()
    if exe is None:
        pytest.skip("pre-commit is not installed (pip install 'xla-lint[test]')")
    project = tmp_path / "project"
    project.mkdir()
    _git(project, "init", "-q")
    (project / "train.py").write_text(BAD)
    # a library checked alone, and os._exit below: XLA004's preview behaviour (no launcher
    # of the tree shows stdout is not a terminal)
    (project / "pyproject.toml").write_text("[tool.xla-lint]\npreview = true\n")
    (project / "notes.txt").write_text("print('not python')\n")
    notebook = json.dumps(
        {
            "cells": [
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": {},
                    "outputs": [],
                    "source": [
                        "import os\n",
                        "import torch_xla\n",
                        "def f():\n",
                        "    print('x')\n",
                        "    os._exit(0)\n",  # the print's output is lost: XLA004
                    ],
                }
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
    )
    (project / "train.ipynb").write_text(notebook)
    _git(project, "add", ".")
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(pre_commit_home),
        "PRE_COMMIT_COLOR": "never",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    env.pop("VIRTUAL_ENV", None)

    def hook(name: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [exe, "try-repo", str(hooks_repo), name, "--all-files", "--verbose"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    lint = hook("xla-lint")
    assert lint.returncode == 1, lint.stdout + lint.stderr
    assert "train.py:5:5: XLA004" in lint.stdout
    assert "notes.txt" not in lint.stdout  # types_or: [python, jupyter]
    assert "train.ipynb:" in lint.stdout and "XLA004" in lint.stdout
    assert (project / "train.py").read_text() == BAD

    fix = hook("xla-lint-fix")
    assert fix.returncode == 1, (
        fix.stdout + fix.stderr
    )  # pre-commit fails a hook that changed files
    assert "files were modified by this hook" in fix.stdout
    assert (project / "train.py").read_text() == FIXED
    assert (project / "train.ipynb").read_text() == notebook  # notebooks are never rewritten

    again = hook("xla-lint")
    assert again.returncode == 1, again.stdout + again.stderr  # the notebook's finding stays
    assert "train.py:" not in again.stdout and "train.ipynb:" in again.stdout


def test_the_projects_own_hooks_are_valid_and_match_ci():
    """.pre-commit-config.yaml (the project's own hooks) parses for pre-commit, and runs the
    gates .ci/run runs before the tests."""
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-config", ".pre-commit-config.yaml"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = (root / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    ci = (root / ".ci" / "run").read_text(encoding="utf-8")
    for command in ("ruff check", "ruff format --check", "mypy"):
        assert f"entry: {command}" in config
        assert f"\n{command}" in ci
