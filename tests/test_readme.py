"""The README stays true: its set-up commands are the ones CI runs, its example output is real,
and its rule table lists every rule."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from xla_lint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def setup_commands() -> list[str]:
    section = README.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_two_setup_commands_and_ci_runs_the_test_one():
    commands = setup_commands()
    assert len(commands) == 2
    install_and_lint, install_and_test = commands
    assert (
        "pip install -e ." in install_and_lint and "xla-lint examples/pitfalls" in install_and_lint
    )
    assert "[runtime,test]" in install_and_test and install_and_test.endswith("python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert install_and_test in ci


def test_example_output_in_readme_is_what_the_linter_prints():
    block = README.split("Expected output of the first command:", 1)[1].split("```\n", 2)[1]
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "--no-cache", "examples/pitfalls"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stdout == block


def test_rule_table_lists_every_rule():
    listed = re.findall(r"^\| `(XLA\d{3})` \| `([a-z0-9-]+)` \|", README, flags=re.M)
    assert listed == [(r.code, r.name) for r in all_rules()]
