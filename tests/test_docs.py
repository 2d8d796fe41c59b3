"""docs/rules.md is generated from the rule classes: it must match what the generator renders now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from xla_lint.docs import DEFAULT_PATH, main, render
from xla_lint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent


def test_rules_md_is_up_to_date():
    current = DEFAULT_PATH.read_text(encoding="utf-8")
    assert current == render(), (
        "docs/rules.md is stale: run `python -m xla_lint.docs > docs/rules.md`"
    )


def test_every_rule_has_a_section_with_its_explanation():
    text = render()
    for rule in all_rules():
        assert f"\n## {rule.code} {rule.name}\n" in text
        assert "### What it does" in text.split(f"## {rule.code} {rule.name}")[1]


def test_check_flag_reports_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "rules.md"
    stale.write_text(render().replace("XLA001", "XLA0001", 1), encoding="utf-8")
    assert main(["--check", "--path", str(stale)]) == 1
    assert "is stale" in capsys.readouterr().err
    stale.write_text(render(), encoding="utf-8")
    assert main(["--check", "--path", str(stale)]) == 0
    assert main(["--check", "--path", str(tmp_path / "missing.md")]) == 1


def test_module_entry_point_prints_the_page():
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint.docs"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0
    assert proc.stdout == render()


def test_catalogue_is_up_to_date_and_agrees_with_the_rule_classes(tmp_path, capsys):
    """xla_lint/catalogue.py (what start-up reads instead of the rule classes) is generated and current."""
    from xla_lint import catalogue
    from xla_lint.docs import CATALOGUE_PATH, render_catalogue

    assert CATALOGUE_PATH.read_text(encoding="utf-8") == render_catalogue(), (
        "xla_lint/catalogue.py is stale: run `python -m xla_lint.docs --catalogue > xla_lint/catalogue.py`"
    )
    assert [
        (r.code, r.name, r.default_enabled, r.since_version, r.preview) for r in all_rules()
    ] == [tuple(info) for info in catalogue.RULES]
    for rule in all_rules():
        for version in ((2, 0), (2, 4), (2, 9), (3, 0)):
            assert catalogue.BY_CODE[rule.code].applies_to(version) == rule.applies_to(version)
    stale = tmp_path / "catalogue.py"
    stale.write_text(render_catalogue().replace('"XLA001"', '"XLA0001"'), encoding="utf-8")
    assert main(["--catalogue", "--check", "--path", str(stale)]) == 1
    assert "--catalogue" in capsys.readouterr().err


def test_cli_md_sarif_sample_matches_real_output(tmp_path):
    """docs/cli.md shows "real output" of --output-format sarif (rule table cut to one rule,
    help text shortened): everything else in it must still be what xla-lint prints."""
    import json
    import re

    page = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    section = page[page.index("### `sarif`") :]
    sample = json.loads(re.search(r"```json\n(.*?)\n```", section, re.S).group(1))
    (tmp_path / "train.py").write_text("import torch_xla\nprint(1)\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "xla_lint",
            "--isolated",
            "--no-cache",
            "--select",
            "XLA004",
            "--output-format",
            "sarif",
            "train.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    real = json.loads(out.stdout)
    rule = next(r for r in real["runs"][0]["tool"]["driver"]["rules"] if r["id"] == "XLA004")
    (shown,) = sample["runs"][0]["tool"]["driver"]["rules"]
    for key in ("id", "name", "shortDescription", "fullDescription", "defaultConfiguration"):
        assert shown[key] == rule[key], key
    assert {k: v for k, v in sample["runs"][0]["tool"]["driver"].items() if k != "rules"} == {
        k: v for k, v in real["runs"][0]["tool"]["driver"].items() if k != "rules"
    }
