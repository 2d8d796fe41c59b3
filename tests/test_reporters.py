"""Every output format on the same fixture diagnostics.

The fixture has an error without a fix, a warning with a safe fix, an unsafe fix that adds
an import, and a path and message full of characters the formats must escape.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from xla_lint.diagnostics import Diagnostic, Edit, Fix, Severity
from xla_lint.reporters import Report, reporters, rule_to_json, statistics
from xla_lint.reporters.explain import render_markdown, render_rule
from xla_lint.reporters.github import escape_data, escape_property
from xla_lint.reporters.gitlab import fingerprint, project_path
from xla_lint.reporters.junit import xml_text
from xla_lint.reporters.sarif import sarif_log
from xla_lint.rules import all_rules, rule_by_code

SCHEMA = json.loads(
    (Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8")
)

TRAIN = "import torch_xla\nmesh = HM((4, 1))\n\tprint('a')\nxm.mark_step()\n"
ODD = "x = 1\n"
MSG4 = "`print` without `flush=True`"

DIAGNOSTICS = [
    Diagnostic(
        "XLA001",
        "hybrid-mesh-positional-args",
        "keyword arguments only: 100% sure,\nsee docs",
        "pkg/train.py",
        2,
        8,
        2,
        18,
        Severity.ERROR,
    ),
    Diagnostic(
        "XLA004",
        "print-without-flush",
        MSG4,
        "pkg/train.py",
        3,
        2,
        3,
        12,
        Severity.WARNING,
        Fix("add `flush=True`", (Edit(3, 2, 3, 12, "print('a', flush=True)"),)),
    ),
    Diagnostic(
        "XLA302",
        "deprecated-mark-step",
        "use torch_xla.sync()",
        "pkg/train.py",
        4,
        1,
        4,
        13,
        Severity.WARNING,
        Fix(
            "call torch_xla.sync()",
            (Edit(4, 1, 4, 13, "torch_xla.sync"),),
            safe=False,
            add_imports=(("torch_xla", None),),
        ),
    ),
    Diagnostic(
        "XLA000",
        "syntax-error",
        "cannot parse: bad\r\nthing",
        "odd, name:1.py",
        1,
        1,
        1,
        2,
        Severity.ERROR,
    ),
]
SOURCES = {"pkg/train.py": TRAIN, "odd, name:1.py": ODD}


def report(**kw) -> Report:
    return Report(list(DIAGNOSTICS), files=3, sources=dict(SOURCES), **kw)


def render(fmt: str, **kw) -> str:
    return reporters()[fmt](report(**kw))


def test_registry_has_every_format():
    assert sorted(reporters()) == [
        "concise",
        "full",
        "github",
        "gitlab",
        "json",
        "json-lines",
        "junit",
        "pylint",
        "sarif",
        "text",
    ]


def test_text_and_concise():
    out = render("text")
    assert out == (
        "pkg/train.py:2:8: XLA001 keyword arguments only: 100% sure, see docs\n"
        f"pkg/train.py:3:2: XLA004 {MSG4}\n"
        "pkg/train.py:4:1: XLA302 use torch_xla.sync()\n"
        "odd, name:1.py:1:1: XLA000 cannot parse: bad thing\n"
        "Found 4 diagnostics in 2 files (1 fixable with --fix, 1 more with --fix --unsafe-fixes).\n"
    )
    assert render("concise") == out
    assert render("text", quiet=True) == out.rsplit("Found", 1)[0]
    # With --unsafe-fixes the unsafe fix is one --fix applies.
    assert render("text", unsafe_fixes=True).endswith("(2 fixable with --fix).\n")
    assert render("text", color=True) != out and "\x1b[1mpkg/train.py\x1b[0m" in render(
        "text", color=True
    )
    assert reporters()["text"](Report([], files=1)) == "All checks passed (1 file).\n"
    assert reporters()["text"](Report([], files=1, quiet=True)) == ""


def test_show_fixes_lists_safe_fixes_then_the_unsafe_ones_apart():
    out = render("text", show_fixes=True).splitlines()
    assert out[4:8] == [
        "Fixes --fix would apply (1):",
        "  pkg/train.py:3:2: XLA004 add `flush=True`",
        "Unsafe fixes, applied only with --unsafe-fixes (1):",
        "  pkg/train.py:4:1: XLA302 [unsafe] call torch_xla.sync()",
    ]
    out = render("text", show_fixes=True, unsafe_fixes=True).splitlines()
    assert out[4:7] == [
        "Fixes --fix would apply (2):",
        "  pkg/train.py:3:2: XLA004 add `flush=True`",
        "  pkg/train.py:4:1: XLA302 [unsafe] call torch_xla.sync()",
    ]
    applied = reporters()["text"](
        Report([], files=1, fixed=1, show_fixes=True, applied=[DIAGNOSTICS[1]])
    )
    assert applied.splitlines() == [
        "Applied fixes (1):",
        "  pkg/train.py:3:2: XLA004 add `flush=True`",
        "All checks passed (1 file). Fixed 1 diagnostic.",
    ]


def test_full_shows_source_caret_and_fix_diff():
    blocks = render("full").split("\n\n")
    assert blocks[1].splitlines() == [
        f"pkg/train.py:3:2: XLA004 {MSG4}",
        "  |",
        "3 | \tprint('a')",
        "  | \t^^^^^^^^^^ XLA004",  # the tab is kept so the caret lines up
        "  |",
        "  = fix: add `flush=True`",
        "  - \tprint('a')",
        "  + \tprint('a', flush=True)",
    ]
    assert blocks[0].splitlines()[3] == "  |        ^^^^^^^^^^ XLA001"
    assert (
        blocks[0].splitlines()[0]
        == "pkg/train.py:2:8: XLA001 keyword arguments only: 100% sure, see docs"
    )
    unsafe = blocks[2].splitlines()
    assert (
        unsafe[5]
        == "  = fix: call torch_xla.sync() (unsafe: shown only; --fix applies it with --unsafe-fixes)"
    )
    assert "  - xm.mark_step()" in unsafe and "  + torch_xla.sync()" in unsafe
    assert (
        blocks[-1]
        == "Found 4 diagnostics in 2 files (1 fixable with --fix, 1 more with --fix --unsafe-fixes).\n"
    )


def test_full_without_source_shows_the_line_only():
    out = reporters()["full"](Report([DIAGNOSTICS[0]], files=1))
    assert (
        out.split("\n\n")[0]
        == "pkg/train.py:2:8: XLA001 keyword arguments only: 100% sure, see docs"
    )


def test_json():
    data = json.loads(render("json"))
    assert data == [d.to_json() for d in DIAGNOSTICS]
    assert data[2]["fix"] == {
        "description": "call torch_xla.sync()",
        "safe": False,
        "edits": [
            {"line": 4, "column": 1, "end_line": 4, "end_column": 13, "content": "torch_xla.sync"}
        ],
        "add_imports": [{"module": "torch_xla", "name": None}],
    }


def test_sarif_is_valid_and_complete():
    log = json.loads(render("sarif"))
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in all_rules()]
    for descriptor, rule in zip(rules, all_rules(), strict=True):
        data = rule_to_json(rule)  # the one source of the rule table
        assert descriptor["name"] == data["name"]
        assert descriptor["shortDescription"]["text"] == data["summary"]
        assert descriptor["fullDescription"]["text"] == data["description"] and data["description"]
        assert descriptor["help"]["markdown"] == data["explanation"]
        assert descriptor["defaultConfiguration"]["level"] == data["severity"]
    results = run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        ("XLA001", "error"),
        ("XLA004", "warning"),
        ("XLA302", "warning"),
        ("XLA000", "error"),
    ]
    for r in results:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
    assert results[0]["message"]["text"] == "keyword arguments only: 100% sure,\nsee docs"
    loc = results[1]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "pkg/train.py", "uriBaseId": "%SRCROOT%"}
    assert loc["region"] == {"startLine": 3, "startColumn": 2, "endLine": 3, "endColumn": 12}
    assert results[1]["fixes"][0]["artifactChanges"][0]["replacements"] == [
        {
            "deletedRegion": {"startLine": 3, "startColumn": 2, "endLine": 3, "endColumn": 12},
            "insertedContent": {"text": "print('a', flush=True)"},
        }
    ]
    assert "fixes" not in results[2]  # an added import has no position: not expressible
    assert (
        results[3]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        == "odd%2C%20name%3A1.py"
    )
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
        "code": "XLA004",
        "name": "print-without-flush",
        "count": 3,
        "fixable": True,
    }


def test_rule_rendering():
    rule = rule_by_code("XLA004")
    plain = render_rule(rule)
    assert plain.startswith(
        "XLA004 print-without-flush (warning, fixable)\n\n" + rule.summary + "\n\n## What it does\n"
    )
    colored = render_rule(rule, color=True)
    assert "\x1b[1m\x1b[4mWhat it does\x1b[0m" in colored and "## " not in colored
    assert render_markdown("## T\nuse `x`\n```python\ncode()\n```\n", True).splitlines() == [
        "\x1b[1m\x1b[4mT\x1b[0m",
        "use \x1b[36mx\x1b[0m",
        "\x1b[36m    code()\x1b[0m",
    ]


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


# Hard to escape: quotes, markup, a control character (not allowed in XML 1.0 at all) and a
# file name that is not UTF-8 (Python holds its 0xFF byte as the lone surrogate \udcff).
NASTY = Diagnostic(
    "XLA004",
    "print-without-flush",
    "say \"<b>\" & 'x'\x1b[0m done",
    'we"ird <&>/bad\udcff.py',
    7,
    3,
    7,
    9,
    Severity.WARNING,
)

# GitLab publishes no JSON Schema for Code Quality reports; this one is the table of
# https://docs.gitlab.com/ci/testing/code_quality/#code-quality-report-format: every field
# there is required, severity is one of five words, and the line is location.lines.begin or
# location.positions.begin.line.
_POSITION = {
    "type": "object",
    "required": ["line"],
    "properties": {
        "line": {"type": "integer", "minimum": 1},
        "column": {"type": "integer", "minimum": 1},
    },
}
GITLAB_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "minLength": 1},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "required": ["path"],
                "properties": {
                    "path": {"type": "string", "minLength": 1},
                    "lines": {
                        "type": "object",
                        "required": ["begin"],
                        "properties": {"begin": {"type": "integer", "minimum": 1}},
                    },
                    "positions": {
                        "type": "object",
                        "required": ["begin"],
                        "properties": {"begin": _POSITION, "end": _POSITION},
                    },
                },
                "anyOf": [{"required": ["lines"]}, {"required": ["positions"]}],
            },
        },
    },
}


def test_pylint():
    assert render("pylint").splitlines() == [
        "pkg/train.py:2: [XLA001] keyword arguments only: 100% sure, see docs",
        f"pkg/train.py:3: [XLA004] {MSG4}",
        "pkg/train.py:4: [XLA302] use torch_xla.sync()",
        "odd, name:1.py:1: [XLA000] cannot parse: bad thing",
    ]
    assert reporters()["pylint"](Report([], files=2)) == ""


def test_json_lines_is_one_json_object_per_line():
    out = render("json-lines")
    rows = out.splitlines()
    assert out.endswith("\n") and len(rows) == len(DIAGNOSTICS)
    assert (
        [json.loads(row) for row in rows]
        == [d.to_json() for d in DIAGNOSTICS]
        == json.loads(render("json"))
    )
    assert all(
        row.isascii() and ": " not in row.split('"message"')[0] for row in rows
    )  # compact, as Ruff's
    nasty = reporters()["json-lines"](Report([NASTY]))
    assert nasty.count("\n") == 1 and json.loads(nasty) == NASTY.to_json()
    assert reporters()["json-lines"](Report([], files=1)) == ""


def test_gitlab_is_a_valid_code_quality_report():
    issues = json.loads(render("gitlab"))
    jsonschema.Draft202012Validator(GITLAB_SCHEMA).validate(issues)
    assert issues[1] == {
        "check_name": "XLA004",
        "description": f"XLA004: {MSG4}",
        "severity": "minor",
        "fingerprint": fingerprint("XLA004", "pkg/train.py", MSG4, 0),
        "location": {
            "path": "pkg/train.py",
            "positions": {"begin": {"line": 3, "column": 2}, "end": {"line": 3, "column": 12}},
        },
    }
    assert [i["severity"] for i in issues] == ["major", "minor", "minor", "major"]
    assert issues[3]["location"]["path"] == "odd, name:1.py"
    assert issues[3]["description"] == "XLA000: cannot parse: bad\r\nthing"
    assert len({i["fingerprint"] for i in issues}) == 4
    assert all(len(i["fingerprint"]) == 32 and int(i["fingerprint"], 16) >= 0 for i in issues)
    nasty = json.loads(reporters()["gitlab"](Report([NASTY])))
    jsonschema.Draft202012Validator(GITLAB_SCHEMA).validate(nasty)
    assert (
        nasty[0]["location"]["path"] == NASTY.path
        and nasty[0]["description"] == "XLA004: " + NASTY.message
    )


def test_gitlab_schema_rejects_a_broken_report():
    """The validation above can fail: an issue without a fingerprint or with an unknown severity is refused."""
    validator = jsonschema.Draft202012Validator(GITLAB_SCHEMA)
    issue = json.loads(render("gitlab"))[0]
    for broken in (
        {k: v for k, v in issue.items() if k != "fingerprint"},
        {**issue, "severity": "error"},
        {**issue, "location": {"path": "a.py"}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate([broken])


def test_gitlab_without_diagnostics_is_an_empty_list():
    out = reporters()["gitlab"](Report([], files=3))
    assert out == "[]\n" and json.loads(out) == []


def _shift(d: Diagnostic, lines: int) -> Diagnostic:
    return dataclasses.replace(d, line=d.line + lines, end_line=d.end_line + lines)


def test_gitlab_fingerprints_survive_moved_lines_and_tell_twins_apart():
    def prints(d: list[Diagnostic]) -> list[str]:
        return [i["fingerprint"] for i in json.loads(reporters()["gitlab"](Report(d)))]

    before = prints(DIAGNOSTICS)
    assert prints(DIAGNOSTICS) == before  # stable from run to run (SHA-256, not a seeded hash)
    assert (
        prints([_shift(d, 40) for d in DIAGNOSTICS]) == before
    )  # lines added above: same findings
    assert prints(DIAGNOSTICS[1:]) == before[1:]  # one finding fixed: the others keep theirs
    twins = prints([DIAGNOSTICS[1], _shift(DIAGNOSTICS[1], 5), _shift(DIAGNOSTICS[1], 9)])
    assert (
        len(set(twins)) == 3 and twins[0] == before[1]
    )  # the same finding three times: three issues
    moved = dataclasses.replace(DIAGNOSTICS[1], path="pkg/other.py")
    assert prints([moved]) != [before[1]]  # another file: another finding
    reworded = dataclasses.replace(DIAGNOSTICS[1], message=MSG4 + "!")
    assert prints([reworded]) != [before[1]]


def test_gitlab_paths_are_relative_to_the_project(tmp_path, monkeypatch):
    inside = tmp_path / "repo" / "src" / "train.py"
    monkeypatch.setenv("CI_PROJECT_DIR", str(tmp_path / "repo"))
    assert project_path(str(inside)) == "src/train.py"
    assert project_path("/elsewhere/x.py") == "/elsewhere/x.py"  # outside the project: as reported
    assert project_path("-") == "-"
    monkeypatch.delenv("CI_PROJECT_DIR")
    monkeypatch.chdir(tmp_path / "..")
    assert project_path(str(inside)) == f"{tmp_path.name}/repo/src/train.py"
    d = dataclasses.replace(DIAGNOSTICS[1], path=str(inside))
    monkeypatch.setenv("CI_PROJECT_DIR", str(tmp_path / "repo"))
    (issue,) = json.loads(reporters()["gitlab"](Report([d])))
    assert issue["location"]["path"] == "src/train.py"
    assert issue["fingerprint"] == fingerprint(
        "XLA004", "src/train.py", MSG4, 0
    )  # same in any checkout folder


def _parse_junit(out: str) -> ET.Element:
    assert out.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    return ET.fromstring(out.encode("utf-8"))


def test_junit_has_one_suite_per_file_and_one_case_per_diagnostic():
    root = _parse_junit(render("junit"))
    assert root.tag == "testsuites" and root.attrib == {
        "name": "xla-lint",
        "tests": "4",
        "failures": "4",
        "errors": "0",
    }
    suites = root.findall("testsuite")
    assert [
        (s.get("name"), s.get("tests"), s.get("failures"), s.get("package")) for s in suites
    ] == [("pkg/train.py", "3", "3", "org.xla_lint"), ("odd, name:1.py", "1", "1", "org.xla_lint")]
    cases = [c for s in suites for c in s.findall("testcase")]
    assert [(c.get("name"), c.get("classname"), c.get("line"), c.get("column")) for c in cases] == [
        ("org.xla_lint.XLA001", "pkg/train", "2", "8"),
        ("org.xla_lint.XLA004", "pkg/train", "3", "2"),
        ("org.xla_lint.XLA302", "pkg/train", "4", "1"),
        ("org.xla_lint.XLA000", "odd, name:1", "1", "1"),
    ]
    assert [c.find("properties/property").attrib for c in cases][:2] == [
        {"name": "severity", "value": "error"},
        {"name": "severity", "value": "warning"},
    ]
    failures = [c.find("failure") for c in cases]
    assert [f.get("message") for f in failures] == [
        d.message for d in DIAGNOSTICS
    ]  # line breaks kept: &#10;
    assert failures[1].text == f"line 3, col 2, {MSG4}"


def test_junit_escapes_what_xml_cannot_hold_as_is():
    root = _parse_junit(reporters()["junit"](Report([NASTY], files=1)))
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == 'we"ird <&>/bad\\xff.py'
    case = suite.find("testcase")
    assert case.get("classname") == 'we"ird <&>/bad\\xff'
    assert case.find("failure").get("message") == "say \"<b>\" & 'x'\\x1b[0m done"
    assert (
        xml_text('plain <&> "text" \t\n') == 'plain <&> "text" \t\n'
    )  # ElementTree escapes these itself
    assert xml_text("a\x00b\x1bc\udcffd\ufffe\ud800") == "a\\x00b\\x1bc\\xffd\\ufffe\\ud800"


def test_junit_without_diagnostics_is_one_passing_case():
    """As Ruff: a clean run is a valid report with one passing test, not an empty one that
    some consumers (Jenkins' junit step) refuse."""
    root = _parse_junit(reporters()["junit"](Report([], files=2)))
    assert root.attrib == {"name": "xla-lint", "tests": "1", "failures": "0", "errors": "0"}
    (suite,) = root.findall("testsuite")
    (case,) = suite.findall("testcase")
    assert case.attrib == {"name": "No errors found", "classname": "xla-lint"} and list(case) == []


@pytest.mark.parametrize(
    "fmt, clean", [("gitlab", "[]\n"), ("json-lines", ""), ("pylint", ""), ("junit", None)]
)
def test_a_clean_run_from_the_command_line(tmp_path, fmt, clean):
    (tmp_path / "train.py").write_text(
        "import torch_xla\nprint('ok', flush=True)\n", encoding="utf-8"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "xla_lint",
            "--isolated",
            "--no-cache",
            "--output-format",
            fmt,
            "train.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    if clean is None:
        assert _parse_junit(proc.stdout).get("failures") == "0"
    else:
        assert proc.stdout == clean


def test_cli_md_shows_the_real_output_of_the_ci_formats(tmp_path):
    """docs/cli.md's samples of json-lines, gitlab, junit and pylint are what xla-lint prints for its train.py."""
    import re

    page = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    formats = page[page.index("## Output formats") :]
    (tmp_path / "train.py").write_text(
        re.search(r"```python\n(.*?)```", formats, re.S).group(1), encoding="utf-8"
    )
    for fmt in ("json-lines", "gitlab", "junit", "pylint"):
        shown = re.search(
            r"```[a-z]*\n(.*?)```", formats[formats.index(f"### `{fmt}`") :], re.S
        ).group(1)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "xla_lint",
                "--preview",  # the docs' command: XLA004 before os._exit is preview behaviour
                "--isolated",
                "--no-cache",
                "--extend-select",
                "XLA900",
                "--output-format",
                fmt,
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.stdout == shown, fmt


# A diagnostic in a notebook: line and column of the .ipynb file, and the place in the cell.
IN_CELL = Diagnostic(
    "XLA301",
    "deprecated-xla-device",
    "`xm.xla_device()` is deprecated",
    "nb.ipynb",
    43,
    18,
    43,
    33,
    Severity.WARNING,
    cell=4,
    cell_line=3,
    cell_column=13,
)


def test_a_notebook_diagnostic_names_its_cell_as_ruff_does_in_text():
    out = reporters()["text"](Report([IN_CELL, DIAGNOSTICS[0]], files=2))
    assert out.splitlines()[0] == ("nb.ipynb:cell 4:3:13: XLA301 `xm.xla_device()` is deprecated")
    assert out.splitlines()[1].startswith("pkg/train.py:2:8: XLA001 ")  # other files as before


def test_json_keeps_the_file_line_and_adds_the_cell():
    (data,) = json.loads(reporters()["json"](Report([IN_CELL], files=1)))
    assert (data["line"], data["column"]) == (43, 18)
    assert (data["cell"], data["cell_line"], data["cell_column"]) == (4, 3, 13)
    assert "cell" not in DIAGNOSTICS[0].to_json()  # only notebook diagnostics carry it
    jsonschema.Draft202012Validator(_documented_json_schema()).validate([data])
    assert Diagnostic.from_json(data) == IN_CELL  # the result cache reads it back


def test_sarif_puts_the_cell_in_the_location_s_property_bag():
    log = sarif_log(Report([IN_CELL], files=1))
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    (location,) = log["runs"][0]["results"][0]["locations"]
    assert location["physicalLocation"]["region"]["startLine"] == 43
    assert location["properties"] == {"cell": 4, "cell_line": 3, "cell_column": 13}
