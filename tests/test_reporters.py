"""Every output format on the same fixture diagnostics.

The fixture has an error without a fix, a warning with a safe fix, an unsafe fix that adds
an import, and a path and message full of characters the formats must escape.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from xla_lint.diagnostics import Diagnostic, Edit, Fix, Severity
from xla_lint.reporters import Report, reporters, rule_to_json
from xla_lint.reporters import statistics
from xla_lint.reporters.explain import render_markdown, render_rule
from xla_lint.reporters.github import escape_data, escape_property
from xla_lint.reporters.sarif import sarif_log
from xla_lint.rules import all_rules, rule_by_code

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))

TRAIN = "import torch_xla\nmesh = HM((4, 1))\n\tprint('a')\nxm.mark_step()\n"
ODD = "x = 1\n"
MSG4 = "`print` without `flush=True`"

DIAGNOSTICS = [
    Diagnostic("XLA001", "hybrid-mesh-positional-args", "keyword arguments only: 100% sure,\nsee docs", "pkg/train.py",
               2, 8, 2, 18, Severity.ERROR),
    Diagnostic("XLA004", "print-without-flush", MSG4, "pkg/train.py", 3, 2, 3, 12, Severity.WARNING,
               Fix("add `flush=True`", (Edit(3, 2, 3, 12, "print('a', flush=True)"),))),
    Diagnostic("XLA302", "deprecated-mark-step", "use torch_xla.sync()", "pkg/train.py", 4, 1, 4, 13,
               Severity.WARNING,
               Fix("call torch_xla.sync()", (Edit(4, 1, 4, 13, "torch_xla.sync"),), safe=False,
                   add_imports=(("torch_xla", None),))),
    Diagnostic("XLA000", "syntax-error", "cannot parse: bad\r\nthing", "odd, name:1.py", 1, 1, 1, 2, Severity.ERROR),
]
SOURCES = {"pkg/train.py": TRAIN, "odd, name:1.py": ODD}


def report(**kw) -> Report:
    return Report(list(DIAGNOSTICS), files=3, sources=dict(SOURCES), **kw)


def render(fmt: str, **kw) -> str:
    return reporters()[fmt](report(**kw))


def test_registry_has_every_format():
    assert sorted(reporters()) == ["concise", "full", "github", "json", "sarif", "text"]


def test_text_and_concise():
    out = render("text")
    assert out == ("pkg/train.py:2:8: XLA001 keyword arguments only: 100% sure, see docs\n"
                   f"pkg/train.py:3:2: XLA004 {MSG4}\n"
                   "pkg/train.py:4:1: XLA302 use torch_xla.sync()\n"
                   "odd, name:1.py:1:1: XLA000 cannot parse: bad thing\n"
                   "Found 4 diagnostics in 2 files (1 fixable with --fix).\n")
    assert render("concise") == out
    assert render("text", quiet=True) == out.rsplit("Found", 1)[0]
    assert render("text", color=True) != out and "\x1b[1mpkg/train.py\x1b[0m" in render("text", color=True)
    assert reporters()["text"](Report([], files=1)) == "All checks passed (1 file).\n"
    assert reporters()["text"](Report([], files=1, quiet=True)) == ""


def test_show_fixes_lists_only_safe_fixes():
    out = render("text", show_fixes=True).splitlines()
    assert out[4:6] == ["Fixes --fix would apply (1):", "  pkg/train.py:3:2: XLA004 add `flush=True`"]
    applied = reporters()["text"](Report([], files=1, fixed=1, show_fixes=True, applied=[DIAGNOSTICS[1]]))
    assert applied.splitlines() == ["Applied fixes (1):", "  pkg/train.py:3:2: XLA004 add `flush=True`",
                                    "All checks passed (1 file). Fixed 1 diagnostic."]


def test_full_shows_source_caret_and_fix_diff():
    blocks = render("full").split("\n\n")
    assert blocks[1].splitlines() == [
        f"pkg/train.py:3:2: XLA004 {MSG4}",
        "  |",
        "3 | \tprint('a')",
        "  | \t^^^^^^^^^^ XLA004",   # the tab is kept so the caret lines up
        "  |",
        "  = fix: add `flush=True`",
        "  - \tprint('a')",
        "  + \tprint('a', flush=True)",
    ]
    assert blocks[0].splitlines()[3] == "  |        ^^^^^^^^^^ XLA001"
    assert blocks[0].splitlines()[0] == "pkg/train.py:2:8: XLA001 keyword arguments only: 100% sure, see docs"
    unsafe = blocks[2].splitlines()
    assert unsafe[5] == "  = fix: call torch_xla.sync() (unsafe: shown only, --fix does not apply it)"
    assert "  - xm.mark_step()" in unsafe and "  + torch_xla.sync()" in unsafe
    assert blocks[-1] == "Found 4 diagnostics in 2 files (1 fixable with --fix).\n"


def test_full_without_source_shows_the_line_only():
    out = reporters()["full"](Report([DIAGNOSTICS[0]], files=1))
    assert out.split("\n\n")[0] == "pkg/train.py:2:8: XLA001 keyword arguments only: 100% sure, see docs"


def test_json():
    data = json.loads(render("json"))
    assert data == [d.to_json() for d in DIAGNOSTICS]
    assert data[2]["fix"] == {"description": "call torch_xla.sync()", "safe": False,
                              "edits": [{"line": 4, "column": 1, "end_line": 4, "end_column": 13,
                                         "content": "torch_xla.sync"}],
                              "add_imports": [{"module": "torch_xla", "name": None}]}


def test_sarif_is_valid_and_complete():
    log = json.loads(render("sarif"))
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in all_rules()]
    for descriptor, rule in zip(rules, all_rules()):
        data = rule_to_json(rule)  # the one source of the rule table
        assert descriptor["name"] == data["name"]
        assert descriptor["shortDescription"]["text"] == data["summary"]
        assert descriptor["fullDescription"]["text"] == data["description"] and data["description"]
        assert descriptor["help"]["markdown"] == data["explanation"]
        assert descriptor["defaultConfiguration"]["level"] == data["severity"]
    results = run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [("XLA001", "error"), ("XLA004", "warning"),
                                                            ("XLA302", "warning"), ("XLA000", "error")]
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
    assert results[0]["message"]["text"] == "keyword arguments only: 100% sure,\nsee docs"
    loc = results[1]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "pkg/train.py", "uriBaseId": "%SRCROOT%"}
    assert loc["region"] == {"startLine": 3, "startColumn": 2, "endLine": 3, "endColumn": 12}
    assert results[1]["fixes"][0]["artifactChanges"][0]["replacements"] == [
        {"deletedRegion": {"startLine": 3, "startColumn": 2, "endLine": 3, "endColumn": 12},
         "insertedContent": {"text": "print('a', flush=True)"}}]
    assert "fixes" not in results[2]  # an added import has no position: not expressible
    assert results[3]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "odd%2C%20name%3A1.py"
    assert run["columnKind"] == "unicodeCodePoints"


def test_sarif_without_results_is_valid():
    log = sarif_log(Report([], files=0))
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert log["runs"][0]["results"] == []


def test_sarif_schema_rejects_a_broken_log():
    """The validation above can fail: a result without a message is refused."""
    log = json.loads(render("sarif"))
    del log["runs"][0]["results"][0]["message"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(SCHEMA).validate(log)


def test_github():
    assert render("github").splitlines() == [
        "::error file=pkg/train.py,line=2,col=8,endLine=2,endColumn=18,title=XLA001::"
        "keyword arguments only: 100%25 sure,%0Asee docs",
        f"::warning file=pkg/train.py,line=3,col=2,endLine=3,endColumn=12,title=XLA004::{MSG4}",
        "::warning file=pkg/train.py,line=4,col=1,endLine=4,endColumn=13,title=XLA302::use torch_xla.sync()",
        "::error file=odd%2C name%3A1.py,line=1,col=1,endLine=1,endColumn=2,title=XLA000::cannot parse: bad%0D%0Athing",
    ]
    assert reporters()["github"](Report([], files=2)) == ""
    assert escape_data("a%b\r\nc:d,e") == "a%25b%0D%0Ac:d,e"
    assert escape_property("a%b\r\nc:d,e") == "a%25b%0D%0Ac%3Ad%2Ce"


def test_statistics():
    rep = Report(DIAGNOSTICS + [DIAGNOSTICS[1], DIAGNOSTICS[1]], files=3)
    assert statistics.render(rep).splitlines() == [
        "3  XLA004  [*] print-without-flush",
        "1  XLA000  [ ] syntax-error",
        "1  XLA001  [ ] hybrid-mesh-positional-args",
        "1  XLA302  [ ] deprecated-mark-step",
    ]
    assert json.loads(statistics.render(rep, as_json=True))[0] == {
        "code": "XLA004", "name": "print-without-flush", "count": 3, "fixable": True}


def test_rule_rendering():
    rule = rule_by_code("XLA004")
    plain = render_rule(rule)
    assert plain.startswith("XLA004 print-without-flush (warning, fixable)\n\n" + rule.summary + "\n\n## What it does\n")
    colored = render_rule(rule, color=True)
    assert "\x1b[1m\x1b[4mWhat it does\x1b[0m" in colored and "## " not in colored
    assert render_markdown("## T\nuse `x`\n```python\ncode()\n```\n", True).splitlines() == [
        "\x1b[1m\x1b[4mT\x1b[0m", "use \x1b[36mx\x1b[0m", "\x1b[36m    code()\x1b[0m"]


def _documented_json_schema() -> dict:
    """The JSON Schema printed in docs/cli.md under "Its schema"."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    block = doc.split("Its schema", 1)[1].split("```json\n", 1)[1].split("\n```", 1)[0]
    return json.loads(block)


def test_json_output_matches_the_documented_schema():
    schema = _documented_json_schema()
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate(json.loads(render("json")))
    with pytest.raises(jsonschema.ValidationError):
        validator.validate([{**DIAGNOSTICS[0].to_json(), "severity": "info"}])
