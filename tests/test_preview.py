"""Preview mode: rules marked ``preview`` run only with ``--preview`` or ``preview = true``.

The selection logic is tested on the catalogue with one rule turned into a preview rule,
so these tests hold whichever rules are in preview at the time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_lint import config
from xla_lint.catalogue import RULES
from xla_lint.config import ConfigError, build_settings


@pytest.fixture
def preview_xla001(monkeypatch):
    """The catalogue, with XLA001 (on by default) as a preview rule."""
    rules = tuple(r._replace(preview=True) if r.code == "XLA001" else r for r in RULES)
    monkeypatch.setattr(config, "RULES", rules)


def _settings(tmp_path: Path, toml: str | None = None, **kw):
    if toml is not None:
        (tmp_path / "pyproject.toml").write_text("[tool.xla-lint]\n" + toml)
    return build_settings(cwd=tmp_path, **kw)


def test_preview_rule_is_off_by_default_and_on_in_preview_mode(tmp_path, preview_xla001):
    assert "XLA001" not in _settings(tmp_path).selected
    assert "XLA002" in _settings(tmp_path).selected
    assert "XLA001" in _settings(tmp_path, preview=True).selected


def test_preview_from_config_and_command_line_overrides_it(tmp_path, preview_xla001):
    assert "XLA001" in _settings(tmp_path, "preview = true\n").selected
    assert "XLA001" not in _settings(tmp_path, "preview = true\n", preview=False).selected


def test_selecting_a_preview_rule_by_code_without_preview_warns_and_does_not_run_it(
    tmp_path, preview_xla001
):
    settings = _settings(tmp_path, select=["XLA001", "XLA002"])
    assert settings.selected == frozenset({"XLA002"})
    assert (
        len(settings.warnings) == 1
        and "XLA001" in settings.warnings[0]
        and "--preview" in settings.warnings[0]
    )
    # A prefix is not a request for that rule: no warning.
    assert _settings(tmp_path, select=["XLA0"]).warnings == ()
    assert "XLA001" in _settings(tmp_path, select=["XLA001"], preview=True).selected


def test_ignore_still_wins_in_preview_mode(tmp_path, preview_xla001):
    assert "XLA001" not in _settings(tmp_path, preview=True, ignore=["XLA001"]).selected


def test_preview_value_must_be_a_boolean(tmp_path):
    with pytest.raises(ConfigError, match="preview must be true or false"):
        _settings(tmp_path, 'preview = "yes"\n')


ADAM = "import torch\nimport torch_xla\nopt = torch.optim.AdamW(model.parameters(), betas=(0.9, 0.95))\n"


def test_command_line_runs_preview_rules_only_with_preview(tmp_path):
    import subprocess
    import sys

    (tmp_path / "train.py").write_text(ADAM)

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "xla_lint", "--isolated", "--no-cache", *args, "train.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

    off = run("--select", "XLA204")
    assert off.returncode == 0 and "XLA204" not in off.stdout
    assert off.stderr.startswith(
        "xla-lint: warning: XLA204 (adam-scalar-recompile) is a preview rule"
    )
    on = run("--preview", "--select", "XLA204")
    assert on.returncode == 1 and "train.py:3:7: XLA204" in on.stdout and "step 325" in on.stdout
    listing = subprocess.run(
        [sys.executable, "-m", "xla_lint", "rule", "--all"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "XLA204 adam-scalar-recompile [warning] (preview)" in listing
    assert "XLA015 replica-divergent-sync [error] (preview)" in listing  # issue 22's gate
    assert "XLA201 host-sync-in-step [warning]:" in listing  # passed it again (s23)
    assert "XLA004 print-without-flush [warning]:" in listing
