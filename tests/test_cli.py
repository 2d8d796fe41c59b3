"""The real command line (``python -m xla_lint``) on real files in a temporary folder.

Each test runs the CLI as a user would, in a subprocess, and checks standard output,
standard error, the exit status and the files left on disk.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from helpers import LOST, LOST_NOTE, preview_args, without_file_powers, write_tree

from xla_lint.reporters import reporters
from xla_lint.rules import all_rules

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"

# One warning with a safe fix (XLA004) and one error with a safe fix (XLA001). The scripts whose
# prints XLA004 reports end with os._exit, which loses what they printed (helpers.LOST).
PRINTS = "import torch_xla\nprint('a')\nprint('b', flush=True)\nprint('c')\n" + LOST
HYBRID = (
    "from torch_xla.distributed.spmd import HybridMesh as HM\n"
    "mesh = HM((4, 1), axis_names=('fsdp', 'model'))\n"
)
CLEAN = "import torch_xla\nprint('ok', flush=True)\n"
MSG4 = (
    "`print` without `flush=True` in torch_xla code: the line may sit in a buffer and never appear"
    + LOST_NOTE
)


def xla(
    cwd: Path,
    *args: str,
    input: bytes | None = None,
    env: dict | None = None,
    prefix: list[str] = (),
) -> subprocess.CompletedProcess:
    """Run ``python -m xla_lint ARGS`` in ``cwd`` (after the command ``prefix``); stdout/stderr as text."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    full_env.update(env or {})
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "xla_lint", *preview_args(args)],
        cwd=cwd,
        input=input,
        capture_output=True,
        env=full_env,
        timeout=120,
    )
    proc.stdout = proc.stdout.decode("utf-8")
    proc.stderr = proc.stderr.decode("utf-8")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def lines(proc) -> list[str]:
    return proc.stdout.splitlines()


# ---- discovery ---------------------------------------------------------------------------


def test_no_path_means_current_folder_and_skips_hidden_venv_build(tmp_path):
    write_tree(
        tmp_path,
        {
            "a.py": PRINTS,
            "pkg/b.py": PRINTS,
            ".hidden/c.py": PRINTS,
            "venv/d.py": PRINTS,
            "myenv/pyvenv.cfg": "home = /usr\n",
            "myenv/e.py": PRINTS,
            "build/f.py": PRINTS,
            "dist/g.py": PRINTS,
            "__pycache__/h.py": PRINTS,
            "third_party/i.py": PRINTS,
            "notes.txt": PRINTS,
            "pyproject.toml": '[tool.xla-lint]\nexclude = ["third_party/"]\n',
        },
    )
    proc = xla(tmp_path, "--select", "XLA004")
    assert proc.returncode == 1
    paths = sorted({row.split(":")[0] for row in lines(proc)[:-1]})
    assert paths == ["a.py", "pkg/b.py"]


def test_explicitly_named_file_is_always_linted(tmp_path):
    write_tree(
        tmp_path,
        {
            "build/f.py": PRINTS,
            "third_party/i.py": PRINTS,
            "pyproject.toml": '[tool.xla-lint]\nexclude = ["third_party/"]\n',
        },
    )
    proc = xla(tmp_path, "--select", "XLA004", "build/f.py", "third_party/i.py")
    assert [row.split(":")[0] for row in lines(proc)[:-1]] == ["build/f.py"] * 2 + [
        "third_party/i.py"
    ] * 2


def test_missing_path_is_a_usage_error(tmp_path):
    write_tree(tmp_path, {"a.py": PRINTS})
    proc = xla(tmp_path, "a.py", "nope.py")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip() == "xla-lint: error: nope.py: no such file or directory"


# ---- the report --------------------------------------------------------------------------


def test_text_output_sorted_by_path_then_position_with_summary(tmp_path):
    write_tree(tmp_path, {"b.py": PRINTS, "a.py": HYBRID + "print('x')\n" + LOST, "ok.py": CLEAN})
    proc = xla(tmp_path, "--isolated", "--select", "XLA001,XLA004")
    assert proc.returncode == 1
    assert lines(proc) == [
        "a.py:2:8: XLA001 `HybridMesh` takes keyword arguments only; pass `ici_mesh_shape=`, "
        "`dcn_mesh_shape=` and `axis_names=`",
        f"a.py:3:1: XLA004 {MSG4}",
        f"b.py:2:1: XLA004 {MSG4}",
        f"b.py:4:1: XLA004 {MSG4}",
        "Found 4 diagnostics in 2 files (4 fixable with --fix).",
    ]


def test_clean_run_exits_zero(tmp_path):
    write_tree(tmp_path, {"ok.py": CLEAN, "plain.py": "print('no torch xla')\n"})
    proc = xla(tmp_path)
    assert proc.returncode == 0
    assert lines(proc) == ["All checks passed (2 files)."]


def test_exit_zero(tmp_path):
    write_tree(tmp_path, {"a.py": PRINTS})
    proc = xla(tmp_path, "--exit-zero", "--select", "XLA004")
    assert proc.returncode == 0 and "XLA004" in proc.stdout


def test_json_output_keys(tmp_path):
    write_tree(tmp_path, {"a.py": PRINTS})
    proc = xla(tmp_path, "--select", "XLA004", "--output-format", "json")
    data = json.loads(proc.stdout)
    assert [d["line"] for d in data] == [2, 4]
    assert set(data[0]) == {
        "code",
        "name",
        "message",
        "severity",
        "path",
        "line",
        "column",
        "end_line",
        "end_column",
        "fix",
    }
    assert (
        data[0]["code"] == "XLA004"
        and data[0]["severity"] == "warning"
        and data[0]["path"] == "a.py"
    )
    assert (data[0]["column"], data[0]["end_line"], data[0]["end_column"]) == (1, 2, 11)
    assert data[0]["fix"]["safe"] is True
    assert data[0]["fix"]["edits"] == [
        {
            "line": 2,
            "column": 1,
            "end_line": 2,
            "end_column": 11,
            "content": "print('a', flush=True)",
        }
    ]


# ---- selection and configuration ---------------------------------------------------------


def test_select_and_ignore_codes_and_prefixes(tmp_path):
    write_tree(tmp_path, {"a.py": HYBRID + "print('x')\n" + LOST})
    assert {
        r.split()[1]
        for r in lines(xla(tmp_path, "--isolated", "--select", "XLA00", "--ignore", "XLA002"))[:-1]
    } == {"XLA001", "XLA004"}
    assert {
        r.split()[1] for r in lines(xla(tmp_path, "--isolated", "--select", "XLA004"))[:-1]
    } == {"XLA004"}
    # the more specific of a select and an ignore wins, as in Ruff (a tie: the ignore)
    assert {
        r.split()[1]
        for r in lines(
            xla(tmp_path, "--isolated", "--select", "XLA001,XLA004", "--ignore", "XLA00")
        )[:-1]
    } == {"XLA001", "XLA004"}
    assert (
        {  # `--ignore XLA --select XLA004` ran nothing, silently
            r.split()[1]
            for r in lines(xla(tmp_path, "--isolated", "--ignore", "XLA", "--select", "XLA004"))[
                :-1
            ]
        }
        == {"XLA004"}
    )
    assert {
        r.split()[1]
        for r in lines(xla(tmp_path, "--isolated", "--select", "XLA004", "--ignore", "XLA004"))
    } == {"checks"}  # "All checks passed"
    assert {
        r.split()[1]
        for r in lines(
            xla(tmp_path, "--isolated", "--extend-select", "XLA004", "--ignore", "XLA0")
        )[:-1]
    } == {"XLA004"}


def test_pyproject_keys(tmp_path):
    write_tree(
        tmp_path,
        {
            "pyproject.toml": (
                '[tool.xla-lint]\nselect = ["XLA001", "XLA004"]\nignore = ["XLA001"]\n'
                'exclude = ["gen_*.py"]\nper-file-ignores = { "tests/*" = ["XLA004"] }\n'
            ),
            "src/a.py": HYBRID + "print('x')\n" + LOST,
            "src/gen_x.py": PRINTS,
            "tests/t.py": PRINTS,
        },
    )
    proc = xla(tmp_path / "src", ".")  # the nearest pyproject.toml is the parent's
    assert lines(proc)[:-1] == [f"a.py:3:1: XLA004 {MSG4}"]
    assert lines(xla(tmp_path, "tests"))[-1] == "All checks passed (1 file)."


@pytest.mark.parametrize(
    "table,named",
    [
        ('colour = "always"', "'colour'"),
        ('select = ["XLA999"]', "'XLA999'"),
        ('ignore = ["E501"]', "'E501'"),
        ('per-file-ignores = { "a.py" = ["XLA9x"] }', "'XLA9X'"),
        # Values of the wrong type, which used to be taken silently:
        ("target-version = 2.10", "target-version must be a quoted string"),  # TOML: the number 2.1
        ('target-version = "banana"', "pyproject.toml: target-version must look like '2.9'"),
        ('target-version = "2"', "pyproject.toml: target-version must look like '2.9'"),
        (
            'target-version = "3.0"',
            "target-version '3.0' is not a torch_xla release (1.5 to 1.13, 2.0 to 2.9)",
        ),
        ('target-version = "1.0"', "target-version '1.0' is not a torch_xla release"),
        ('select = "XLA001"', "select must be a list of rule codes"),
        (
            'per-file-ignores = { "a.py" = "XLA004" }',
            "per-file-ignores.a.py must be a list of rule codes",
        ),
    ],
)
def test_config_errors_name_the_culprit(tmp_path, table, named):
    write_tree(tmp_path, {"pyproject.toml": f"[tool.xla-lint]\n{table}\n", "a.py": PRINTS})
    proc = xla(tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("xla-lint: error: ") and named in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args,named",
    [
        (["--output-format", "xml"], "'xml' is not one of"),
        (["--color", "sometimes"], "'sometimes' is not one of"),
        (["-j", "0"], "'--jobs'"),
        (["--formt", "x"], "No such option '--formt'"),
    ],
)
def test_usage_errors_are_one_line(tmp_path, args, named):
    """Option errors found by click used to print its four-line usage block."""
    write_tree(tmp_path, {"a.py": PRINTS})
    proc = xla(tmp_path, *args, "a.py")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("xla-lint: error: ") and named in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("option", ["--select", "--extend-select", "--ignore"])
def test_an_empty_code_list_is_an_error_not_the_default_set(tmp_path, option):
    """`--select "$CODES"` with CODES unset ran every default rule as if nothing was given."""
    write_tree(tmp_path, {"a.py": PRINTS})
    proc = xla(tmp_path, option, "", "a.py")
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"{option} '' names no rule" in proc.stderr


@pytest.mark.parametrize(
    "args,where",
    [
        (["--formt", "x"], "(see xla-lint check --help)"),
        (["check", "--formt", "x"], "(see xla-lint check --help)"),
        (["rule", "--formt"], "(see xla-lint rule --help)"),
        (["server", "--tcp"], "(see xla-lint server --help)"),
    ],
)
def test_usage_errors_point_at_the_help_of_the_command_that_was_run(tmp_path, args, where):
    proc = xla(tmp_path, *args)
    assert proc.returncode == 2 and proc.stderr.strip().endswith(where), proc.stderr


def test_unknown_code_on_command_line_is_an_error(tmp_path):
    write_tree(tmp_path, {"a.py": PRINTS})
    proc = xla(tmp_path, "--select", "XLA999")
    assert proc.returncode == 2 and "'XLA999'" in proc.stderr
    named = xla(tmp_path, "--select", "print-without-flush")  # said 'PRINT-WITHOUT-FLUSH'
    assert named.returncode == 2
    assert "'print-without-flush' in --select is a rule name; --select takes codes: XLA004" in (
        named.stderr
    )


# ---- suppression comments ----------------------------------------------------------------


def test_noqa_and_disable_file(tmp_path):
    write_tree(
        tmp_path,
        {
            "a.py": (
                "import torch_xla\nprint(1)  # noqa: XLA004\nprint(2)  # noqa\nprint(3)  # noqa: XLA001\n"
                "print(4)  # noqa: E501\ns = '# noqa'; print(5)\n" + LOST
            ),
            "b.py": "# xla-lint: disable-file=XLA004\n" + PRINTS,
            "c.py": "# xla-lint: disable-file=XLA001\n" + PRINTS,
        },
    )
    proc = xla(tmp_path, "--isolated", "--select", "XLA004")
    assert [r.split(": XLA")[0] for r in lines(proc)[:-1]] == [
        "a.py:4:1",
        "a.py:5:1",
        "a.py:6:15",
        "c.py:3:1",
        "c.py:5:1",
    ]


# ---- fixes -------------------------------------------------------------------------------


def test_fix_applies_safe_fixes_keeps_mode_and_is_idempotent(tmp_path):
    write_tree(tmp_path, {"a.py": PRINTS, "m.py": HYBRID})
    (tmp_path / "a.py").chmod(0o754)
    proc = xla(tmp_path, "--isolated", "--select", "XLA001,XLA004", "--fix")
    assert proc.returncode == 0, proc.stdout
    assert lines(proc) == ["All checks passed (2 files). Fixed 3 diagnostics."]
    assert (tmp_path / "a.py").read_text() == (
        "import torch_xla\nprint('a', flush=True)\nprint('b', flush=True)\nprint('c', flush=True)\n"
        + LOST
    )
    assert (
        "HM(ici_mesh_shape=(4, 1), axis_names=('fsdp', 'model'))" in (tmp_path / "m.py").read_text()
    )
    assert stat.S_IMODE((tmp_path / "a.py").stat().st_mode) == 0o754
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*.py")}
    again = xla(tmp_path, "--isolated", "--select", "XLA001,XLA004", "--fix")
    assert again.returncode == 0 and "Fixed" not in again.stdout
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.py")} == before


def test_diff_prints_and_writes_nothing(tmp_path):
    write_tree(tmp_path, {"a.py": PRINTS})
    proc = xla(tmp_path, "--select", "XLA004", "--diff")
    assert proc.returncode == 1
    assert lines(proc) == [
        "--- a/a.py",
        "+++ b/a.py",
        "@@ -1,6 +1,6 @@",
        " import torch_xla",
        "-print('a')",
        "+print('a', flush=True)",
        " print('b', flush=True)",
        "-print('c')",
        "+print('c', flush=True)",
        " import os",
        " os._exit(0)",
    ]
    assert (tmp_path / "a.py").read_text() == PRINTS


def test_fix_reports_unwritable_file_and_leaves_it(tmp_path):
    prefix = without_file_powers()
    write_tree(tmp_path, {"a.py": PRINTS})
    (tmp_path / "a.py").chmod(0o444)
    proc = xla(tmp_path, "--select", "XLA004", "--fix", prefix=prefix)
    assert proc.returncode == 1 and "a.py: read-only, left unchanged" in proc.stderr
    assert (tmp_path / "a.py").read_text() == PRINTS


# ---- files that are not Python -----------------------------------------------------------


def test_unparsable_files_give_xla000_and_the_run_goes_on(tmp_path):
    write_tree(tmp_path, {"good.py": PRINTS, "syntax.py": "import torch_xla\ndef f(:\n    pass\n"})
    (tmp_path / "latin.py").write_bytes(b"import torch_xla\nx = '\xff'\n")
    (tmp_path / "nul.py").write_bytes(b"import torch_xla\nx = 1\0\n")
    proc = xla(tmp_path, "--isolated", "--select", "XLA004")
    assert proc.returncode == 1
    rows = lines(proc)
    assert f"good.py:2:1: XLA004 {MSG4}" in rows
    assert (
        "latin.py:2:6: XLA000 cannot parse: bytes are not valid utf-8: invalid start byte" in rows
    )
    assert "nul.py:2:6: XLA000 cannot parse: source contains a NUL byte" in rows
    assert any(r.startswith("syntax.py:") and " XLA000 cannot parse: " in r for r in rows)


def test_deeply_nested_brackets_do_not_crash(tmp_path):
    write_tree(
        tmp_path,
        {"good.py": PRINTS, "deep.py": "import torch_xla\nx = " + "(" * 5000 + ")" * 5000 + "\n"},
    )
    proc = xla(tmp_path, "--isolated", "--select", "XLA004")
    assert proc.returncode == 1
    assert lines(proc)[0].startswith("deep.py:") and " XLA000 cannot parse" in lines(proc)[0]
    assert f"good.py:2:1: XLA004 {MSG4}" in lines(proc)


# ---- rule explanations -------------------------------------------------------------------


def test_rule_command(tmp_path):
    proc = xla(tmp_path, "rule", "xla004", "--color", "never")
    assert proc.returncode == 0
    assert lines(proc)[0] == "XLA004 print-without-flush (warning, fixable)"
    assert "## Why is this bad" in proc.stdout
    every = xla(tmp_path, "rule", "--all")
    assert [r.split()[0] for r in lines(every)] == [r.code for r in all_rules()]
    catalogue = json.loads(xla(tmp_path, "rule", "--all", "--output-format", "json").stdout)
    assert [r["code"] for r in catalogue] == [r.code for r in all_rules()]
    assert {"code", "name", "summary", "description", "severity", "explanation"} <= set(
        catalogue[0]
    )
    bad = xla(tmp_path, "rule", "XLA999")
    assert bad.returncode == 2 and "unknown rule 'XLA999'" in bad.stderr
    by_name = xla(tmp_path, "rule", "host-sync-in-step")
    assert by_name.returncode == 0 and lines(by_name)[0].startswith("XLA201 host-sync-in-step")


def test_runtime_usage_errors_name_the_command_that_was_run(tmp_path):
    proc = xla(tmp_path, "runtime", "--steps", "-1")
    assert proc.returncode == 2 and "xla-lint runtime" in proc.stderr
    assert "python -m xla_lint.runtime" not in proc.stderr
    typo = xla(tmp_path, "runtime", "--stepz", "3")  # was click's three-line usage block
    assert typo.returncode == 2 and typo.stderr.count("\n") == 1, typo.stderr
    assert typo.stderr.startswith("xla-lint runtime: error: No such option '--stepz'")
    assert typo.stderr.rstrip().endswith("(see xla-lint runtime --help)")


def test_rule_command_emphasises_headings_in_color(tmp_path):
    proc = xla(tmp_path, "rule", "XLA004", "--color", "always")
    assert "\x1b[1m\x1b[4mWhy is this bad\x1b[0m" in proc.stdout
    assert "## Why" not in proc.stdout and "```" not in proc.stdout


# ---- output formats through the CLI --------------------------------------------------------


def test_every_format_from_the_cli(tmp_path):
    write_tree(tmp_path, {"a.py": HYBRID + "print('x')\n" + LOST})
    args = ("--isolated", "--select", "XLA001,XLA004", "--output-format")
    sarif = json.loads(xla(tmp_path, *args, "sarif").stdout)
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text())).validate(sarif)
    assert [(r["ruleId"], r["level"]) for r in sarif["runs"][0]["results"]] == [
        ("XLA001", "error"),
        ("XLA004", "warning"),
    ]
    github = lines(xla(tmp_path, *args, "github"))
    assert github[0].startswith("::error file=a.py,line=2,col=8,endLine=2,endColumn=")
    assert (
        github[1] == f"::warning file=a.py,line=3,col=1,endLine=3,endColumn=11,title=XLA004::{MSG4}"
    )
    assert xla(tmp_path, *args, "concise").stdout == xla(tmp_path, *args, "text").stdout
    full = lines(xla(tmp_path, *args, "full"))
    i = full.index(f"a.py:3:1: XLA004 {MSG4}")
    assert full[i + 1 : i + 8] == [
        "  |",
        "3 | print('x')",
        "  | ^^^^^^^^^^ XLA004",
        "  |",
        "  = fix: add `flush=True`",
        "  - print('x')",
        "  + print('x', flush=True)",
    ]


def test_statistics(tmp_path):
    write_tree(tmp_path, {"a.py": HYBRID + "print('x')\n" + LOST, "b.py": PRINTS})
    proc = xla(tmp_path, "--isolated", "--select", "XLA001,XLA004", "--statistics")
    assert proc.returncode == 1
    assert lines(proc) == [
        "3  XLA004  [*] print-without-flush",
        "1  XLA001  [*] hybrid-mesh-positional-args",
    ]
    data = json.loads(
        xla(
            tmp_path,
            "--isolated",
            "--select",
            "XLA001,XLA004",
            "--statistics",
            "--output-format",
            "json",
        ).stdout
    )
    assert [(r["code"], r["count"]) for r in data] == [("XLA004", 3), ("XLA001", 1)]


def test_show_fixes_lists_fixes_without_applying_them(tmp_path):
    write_tree(tmp_path, {"a.py": PRINTS})
    proc = xla(tmp_path, "--select", "XLA004", "--show-fixes")
    assert lines(proc)[2:5] == [
        "Fixes --fix would apply (2):",
        "  a.py:2:1: XLA004 add `flush=True`",
        "  a.py:4:1: XLA004 add `flush=True`",
    ]
    assert (tmp_path / "a.py").read_text() == PRINTS
    fixed = xla(tmp_path, "--select", "XLA004", "--show-fixes", "--fix")
    assert lines(fixed)[0] == "Applied fixes (2):"


def test_quiet_prints_only_diagnostics(tmp_path):
    write_tree(tmp_path, {"a.py": PRINTS, "ok.py": CLEAN})
    assert lines(xla(tmp_path, "-q", "--select", "XLA004")) == [
        f"a.py:2:1: XLA004 {MSG4}",
        f"a.py:4:1: XLA004 {MSG4}",
    ]
    assert xla(tmp_path, "--quiet", "ok.py").stdout == ""


def test_verbose_reports_files_and_timing_on_stderr(tmp_path):
    write_tree(tmp_path, {"a.py": PRINTS, "plain.py": "x = 1\n"})
    proc = xla(tmp_path, "-v", "--select", "XLA004")
    assert "linted a.py" in proc.stderr and "skipped plain.py (no torch_xla)" in proc.stderr
    assert "2 files read" in proc.stderr and "s;" in proc.stderr
    assert "linted" not in proc.stdout


def test_color_always_never_auto_and_no_color(tmp_path):
    write_tree(tmp_path, {"a.py": PRINTS})
    assert "\x1b[" in xla(tmp_path, "--select", "XLA004", "--color", "always").stdout
    assert (
        "\x1b["
        in xla(tmp_path, "--select", "XLA004", "--color", "always", env={"NO_COLOR": "1"}).stdout
    )
    assert "\x1b[" not in xla(tmp_path, "--select", "XLA004", "--color", "never").stdout
    assert "\x1b[" not in xla(tmp_path, "--select", "XLA004").stdout  # auto, not a terminal


def test_color_auto_on_a_terminal_honours_no_color(tmp_path):
    pty = pytest.importorskip("pty")
    write_tree(tmp_path, {"a.py": PRINTS})

    def on_tty(env_extra: dict) -> bytes:
        env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
        env.update(env_extra)
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "xla_lint", "--preview", "--select", "XLA004", "a.py"],
            cwd=tmp_path,
            stdout=slave,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        proc.wait(timeout=60)
        os.close(master)
        return out

    assert b"\x1b[" in on_tty({})
    assert b"\x1b[" not in on_tty({"NO_COLOR": "1"})


# ---- standard input ----------------------------------------------------------------------


def test_stdin_with_filename(tmp_path):
    write_tree(
        tmp_path,
        {"pyproject.toml": '[tool.xla-lint]\nper-file-ignores = { "tests/*" = ["XLA004"] }\n'},
    )
    proc = xla(tmp_path, "-", "--stdin-filename", "src/train.py", input=PRINTS.encode())
    assert proc.returncode == 1
    assert lines(proc) == [
        f"src/train.py:2:1: XLA004 {MSG4}",
        f"src/train.py:4:1: XLA004 {MSG4}",
        "Found 2 diagnostics in 1 file (2 fixable with --fix).",
    ]
    ignored = xla(tmp_path, "-", "--stdin-filename", "tests/t.py", input=PRINTS.encode())
    assert ignored.returncode == 0
    assert lines(xla(tmp_path, "-", input=PRINTS.encode()))[0].startswith("-:2:1: XLA004")


def test_stdin_fix_writes_the_fixed_source_to_stdout(tmp_path):
    proc = xla(tmp_path, "-", "--select", "XLA004", "--fix", input=PRINTS.encode())
    assert proc.returncode == 0
    assert proc.stdout == PRINTS.replace("('a')", "('a', flush=True)").replace(
        "('c')", "('c', flush=True)"
    )
    assert "Fixed 2 diagnostics" in proc.stderr
    diff = xla(
        tmp_path,
        "-",
        "--select",
        "XLA004",
        "--diff",
        "--stdin-filename",
        "t.py",
        input=PRINTS.encode(),
    )
    assert (
        diff.returncode == 1
        and "+print('a', flush=True)" in diff.stdout
        and "--- a/t.py" in diff.stdout
    )


def test_stdin_bad_bytes(tmp_path):
    proc = xla(tmp_path, "-", "--fix", input=b"import torch_xla\nx = 1\0\n")
    assert proc.returncode == 1
    assert proc.stdout == "import torch_xla\nx = 1\0\n"  # unchanged source back
    assert "-:2:6: XLA000 cannot parse: source contains a NUL byte" in proc.stderr


def test_stdin_usage_errors(tmp_path):
    write_tree(tmp_path, {"a.py": PRINTS})
    assert xla(tmp_path, "-", "a.py", input=b"").returncode == 2
    proc = xla(tmp_path, "--stdin-filename", "x.py", "a.py")
    assert proc.returncode == 2 and "needs the path `-`" in proc.stderr


# ---- XLA900 unused-noqa ------------------------------------------------------------------


def test_unused_noqa_reported_and_fixed(tmp_path):
    source = (
        "import torch_xla\n"
        "print(1)  # noqa: XLA004\n"  # used
        "print(2, flush=True)  # noqa: XLA004\n"  # unused
        "x = 1  # noqa: XLA004, E501\n"  # unused XLA code; E501 is another tool's
        "y = 2  # noqa: E501\n"  # not ours
        "z = 3  # noqa\n"
    )  # bare: not ours either
    write_tree(tmp_path, {"a.py": source})
    plain = xla(tmp_path, "--isolated", "--select", "XLA004")
    assert plain.returncode == 0  # off unless selected
    proc = xla(tmp_path, "--isolated", "--select", "XLA004,XLA900")
    assert lines(proc)[:-1] == [
        "a.py:3:23: XLA900 unused `noqa` directive (unused: XLA004)",
        "a.py:4:8: XLA900 unused `noqa` directive (unused: XLA004)",
    ]
    assert xla(tmp_path, "--isolated", "--select", "XLA004,XLA900", "--fix").returncode == 0
    assert (tmp_path / "a.py").read_text() == (
        "import torch_xla\nprint(1)  # noqa: XLA004\nprint(2, flush=True)\n"
        "x = 1  # noqa: E501\ny = 2  # noqa: E501\nz = 3  # noqa\n"
    )


def test_unused_noqa_kinds_and_self_suppression(tmp_path):
    write_tree(
        tmp_path,
        {
            "a.py": (
                "import torch_xla\nx = 1  # noqa: XLA001, XLA777\ny = 2  # noqa: XLA001, XLA900\n"
            )
        },
    )
    proc = xla(tmp_path, "--isolated", "--select", "XLA004,XLA900")
    # XLA001 did not run (not selected): its noqa may be needed, so only the unknown code is reported.
    assert lines(proc)[:-1] == ["a.py:2:8: XLA900 unused `noqa` directive (unknown: XLA777)"]


def test_fix_select_xla900_keeps_suppressions_of_rules_that_did_not_run(tmp_path):
    src = (
        "from torch_xla.distributed.spmd import HybridMesh\n"
        "mesh = HybridMesh((4, 1))  # noqa: XLA001\nprint(1)  # noqa: XLA004\n"
    )
    write_tree(tmp_path, {"a.py": src})
    assert xla(tmp_path, "--isolated", "--select", "XLA900", "--fix").returncode == 0
    assert (tmp_path / "a.py").read_text() == src


def test_unused_noqa_in_a_markdown_code_block_is_reported_without_fix(tmp_path):
    doc = "# T\n\n```python\nimport torch_xla\nprint('a')  # noqa: XLA004\nx = 1  # noqa: XLA004\n```\n"
    write_tree(tmp_path, {"guide.md": doc})
    proc = xla(tmp_path, "--isolated", "--docs", "--select", "XLA004,XLA900", "--fix")
    assert lines(proc) == [
        "guide.md:6:8: XLA900 unused `noqa` directive (unused: XLA004)",
        "Found 1 diagnostic in 1 file.",
    ]
    assert (tmp_path / "guide.md").read_text() == doc


def test_unused_noqa_is_the_same_on_a_second_run(tmp_path):
    """A second run may read files' results from the cache: the noqa positions XLA900 and its
    fix need must survive it."""
    write_tree(
        tmp_path,
        {
            "a.py": "import torch_xla\nx = 1  # noqa: XLA004, E501 -- why\nprint(1)  # noqa: XLA004\n"
        },
    )
    args = (
        "--isolated",
        "--select",
        "XLA004,XLA900",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--output-format",
        "json",
    )
    first = json.loads(xla(tmp_path, *args).stdout)
    second = json.loads(xla(tmp_path, *args).stdout)
    assert first == second
    assert [(d["code"], d["line"], d["fix"]["edits"][0]["content"]) for d in second] == [
        ("XLA900", 2, "E501")
    ]


def test_syntax_error_is_reported_where_python_reports_it(tmp_path):
    (tmp_path / "bad.py").write_text("import torch_xla\n\ndef f(:\n    pass\n")
    (tmp_path / "unclosed.py").write_text("import torch_xla\nx = (1,\ny = 2\n")
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "--preview", "--no-cache", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert "bad.py:3:7: XLA000 cannot parse: invalid syntax" in lines
    assert "unclosed.py:2:5: XLA000 cannot parse: '(' was never closed" in lines


def test_force_exclude_applies_exclude_to_named_files(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.xla-lint]\nexclude = ["third_party/"]\n')
    (tmp_path / "third_party").mkdir()
    (tmp_path / "third_party" / "v.py").write_text("import torch_xla\nprint('x')\n" + LOST)
    named = [sys.executable, "-m", "xla_lint", "--preview", "--no-cache", "third_party/v.py"]
    plain = subprocess.run(named, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 1 and "XLA004" in plain.stdout  # a named file is linted...
    forced = subprocess.run(
        named + ["--force-exclude"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert forced.returncode == 0, forced.stdout + forced.stderr  # ...unless exclusion is forced
    hooks = (Path(__file__).resolve().parent.parent / ".pre-commit-hooks.yaml").read_text()
    assert hooks.count("--force-exclude") == 2


@pytest.mark.parametrize(
    "args",
    [
        ["--statistics", "--output-format", "sarif"],
        ["--statistics", "--output-format", "github"],
        ["--statistics", "--output-format", "gitlab"],
        ["--statistics", "--output-format", "junit"],
        ["--diff", "--output-format", "json"],
    ],
)
def test_options_that_cannot_be_shown_together_are_a_usage_error(tmp_path, args):
    (tmp_path / "t.py").write_text("import torch_xla\nprint('x')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "--preview", "--no-cache", *args, "t.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert (
        proc.stderr.startswith("xla-lint: error: ") and len(proc.stderr.strip().splitlines()) == 1
    )


@pytest.mark.skipif(
    sys.platform != "linux", reason="needs a file system that takes any bytes as a name"
)
@pytest.mark.parametrize("fmt", sorted(reporters()))
def test_a_file_name_that_is_not_utf8_is_written_by_every_format(tmp_path, fmt):
    with open(os.path.join(os.fsencode(tmp_path), b"bad\xffname.py"), "wb") as f:
        f.write(PRINTS.encode())
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "--preview", "--no-cache", "--output-format", fmt, "."],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == b""
    if fmt == "json":
        assert {d["path"] for d in json.loads(proc.stdout)} == {"bad\udcffname.py"}
    elif fmt == "json-lines":
        assert {json.loads(row)["path"] for row in proc.stdout.decode("ascii").splitlines()} == {
            "bad\udcffname.py"
        }
    elif fmt == "gitlab":
        issues = json.loads(proc.stdout)
        assert {i["location"]["path"] for i in issues} == {"bad\udcffname.py"}
        assert len({i["fingerprint"] for i in issues}) == len(issues) == 2
    elif fmt == "junit":
        import xml.etree.ElementTree as ET

        root = ET.fromstring(proc.stdout)  # well-formed: the 0xFF byte is written as the text \xff
        assert [s.get("name") for s in root.iter("testsuite")] == ["bad\\xffname.py"]
        assert {c.get("classname") for c in root.iter("testcase")} == {"bad\\xffname"}
    elif fmt == "sarif":
        log = json.loads(proc.stdout)
        jsonschema.validate(log, json.loads(SCHEMA.read_text(encoding="utf-8")))
        uris = {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in log["runs"][0]["results"]
        }
        assert uris == {"bad%FFname.py"}  # the file's bytes, percent-encoded as a URI has them
    else:
        assert b"bad\xffname.py" in proc.stdout


def test_a_file_above_max_file_size_is_skipped_with_a_warning(tmp_path):
    big = "import torch_xla\n" + "x = 1\n" * 25_000  # 150 KB
    write_tree(tmp_path, {"gen.py": big, "small.py": PRINTS})
    proc = xla(tmp_path, "--no-cache", "--max-file-size", "100KB", ".")
    assert proc.returncode == 1  # small.py is still linted
    assert (
        "xla-lint: warning: skipped gen.py (too large: 150 KB, above max-file-size 100 KB)"
        in proc.stderr
    )
    assert "gen.py:" not in proc.stdout and "small.py:2:1: XLA004" in proc.stdout
    assert (
        xla(tmp_path, "--no-cache", "--max-file-size", "0", "--select", "XLA004", "gen.py").stderr
        == ""
    )
    write_tree(tmp_path, {"pyproject.toml": '[tool.xla-lint]\nmax-file-size = "100KB"\n'})
    assert "skipped gen.py" in xla(tmp_path, "--no-cache", "gen.py").stderr


@pytest.mark.parametrize("value", ["banana", "-1", "2XB", "nan"])
def test_a_bad_max_file_size_is_a_one_line_error(tmp_path, value):
    write_tree(tmp_path, {"a.py": PRINTS})
    proc = xla(tmp_path, "--max-file-size", value, "a.py")
    assert proc.returncode == 2 and "--max-file-size must be a size such as" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_add_noqa_merges_keeps_other_comments_and_is_idempotent(tmp_path):
    src = (
        "import torch_xla\r\n"
        "print('a')\r\n"
        "print('b')  # type: ignore\r\n"
        "print('c')  # noqa: E501\r\n"
        "print('d')  # noqa\r\n"
        'print("""x\r\n'
        '""")\r\n'
        "import os\r\nos._exit(0)\r\n"
    )
    (tmp_path / "a.py").write_bytes(src.encode())
    proc = xla(tmp_path, "--isolated", "--no-cache", "--add-noqa", "a.py")
    assert proc.returncode == 0
    assert "no noqa added" not in proc.stderr
    assert proc.stderr.strip().endswith("Added 4 noqa directives to 1 file.")
    assert (tmp_path / "a.py").read_bytes().decode() == (
        "import torch_xla\r\n"
        "print('a')  # noqa: XLA004\r\n"
        "print('b')  # type: ignore  # noqa: XLA004\r\n"
        "print('c')  # noqa: E501, XLA004\r\n"
        "print('d')  # noqa\r\n"
        'print("""x\r\n'
        '""")  # noqa: XLA004\r\n'  # after the string: it covers the string's lines (Ruff's rule)
        "import os\r\nos._exit(0)\r\n"
    )
    again = xla(tmp_path, "--isolated", "--no-cache", "--add-noqa", "a.py")
    assert again.stderr.strip().endswith("Added 0 noqa directives to 0 files.")
    after = xla(tmp_path, "--isolated", "--no-cache", "--extend-select", "XLA900", "a.py")
    assert after.returncode == 0, after.stdout


def test_a_noqa_after_a_multi_line_string_covers_its_lines(tmp_path):
    # The only place a comment can go for a finding on a multi-line string's first line is
    # after the string; it silenced nothing there, and --add-noqa refused the line.
    src = (
        "import torch_xla\n"
        'print("""a\n'
        'b""")  # noqa: XLA004\n'
        'x = f"""{print(1)}\n'
        '"""  # noqa: XLA004\n'
        'print("""c\n'
        'd""")\n' + LOST
    )
    (tmp_path / "a.py").write_text(src)
    proc = xla(tmp_path, "--isolated", "--no-cache", "--extend-select", "XLA900", "a.py")
    assert [line.split(" ")[:2] for line in lines(proc) if ": XLA" in line] == [
        ["a.py:6:1:", "XLA004"]  # the string without a comment; no XLA900 for the two used ones
    ]


def test_add_noqa_cannot_be_combined_with_fix(tmp_path):
    write_tree(tmp_path, {"a.py": PRINTS})
    proc = xla(tmp_path, "--add-noqa", "--fix", "a.py")
    assert proc.returncode == 2 and "--add-noqa writes comments into files" in proc.stderr
    assert (tmp_path / "a.py").read_text() == PRINTS


def test_add_noqa_counts_lines_as_python_does_not_at_form_feeds(tmp_path):
    src = "import torch_xla\nx = 1  # a\x0cb\nprint('a')\n" + LOST
    (tmp_path / "a.py").write_bytes(src.encode())
    assert xla(tmp_path, "--isolated", "--no-cache", "--add-noqa", "a.py").returncode == 0
    assert (tmp_path / "a.py").read_bytes().decode() == (
        "import torch_xla\nx = 1  # a\x0cb\nprint('a')  # noqa: XLA004\n" + LOST
    )


# XLA005 has an unsafe fix (the value changes); XLA302 a safe one.
SPMD_IDENTITY = (
    "import torch_xla.runtime as xr\nimport torch_xla.core.xla_model as xm\nxr.use_spmd()\n"
    "if xr.global_ordinal() == 0:\n    print('host 0', flush=True)\nxm.mark_step()\n"
)
IDENTITY_FIXED = SPMD_IDENTITY.replace("global_ordinal", "process_index")


def test_fix_leaves_unsafe_fixes_out_and_unsafe_fixes_applies_them(tmp_path):
    write_tree(tmp_path, {"train.py": SPMD_IDENTITY})
    args = ("--no-cache", "--select", "XLA005,XLA302")
    shown = xla(tmp_path, *args, "--show-fixes")
    assert lines(shown)[2:7] == [
        "Fixes --fix would apply (1):",
        "  train.py:6:1: XLA302 call `torch_xla.sync()`",
        "Unsafe fixes, applied only with --unsafe-fixes (1):",
        "  train.py:4:4: XLA005 [unsafe] call `process_index()` instead",
        "Found 2 diagnostics in 1 file (1 fixable with --fix, 1 more with --fix --unsafe-fixes).",
    ]
    diff = xla(tmp_path, *args, "--diff")
    assert "+torch_xla.sync()" in diff.stdout and "process_index" not in diff.stdout
    assert "1 unsafe fix is not in this diff (--unsafe-fixes adds them)" in diff.stderr
    unsafe_diff = xla(tmp_path, *args, "--diff", "--unsafe-fixes")
    assert "+if xr.process_index() == 0:" in unsafe_diff.stdout
    assert "1 of the fixes in this diff is unsafe" in unsafe_diff.stderr
    assert "train.py:4:4: XLA005 call `process_index()` instead" in unsafe_diff.stderr
    assert (tmp_path / "train.py").read_text() == SPMD_IDENTITY  # --diff writes nothing

    fixed = xla(tmp_path, *args, "--fix")
    text = (tmp_path / "train.py").read_text()
    assert "xr.global_ordinal()" in text and "torch_xla.sync()" in text
    assert fixed.returncode == 1 and "XLA005" in fixed.stdout
    xla(tmp_path, *args, "--fix", "--unsafe-fixes")
    text = (tmp_path / "train.py").read_text()
    assert "xr.process_index() == 0" in text and "global_ordinal" not in text
    assert xla(tmp_path, *args).returncode == 0


@pytest.mark.parametrize(
    "table,expect_identity_fixed,expect_sync_fixed",
    [
        ("unsafe-fixes = true", True, True),
        ('extend-safe-fixes = ["XLA005"]', True, True),
        ('extend-unsafe-fixes = ["XLA3"]', False, False),
        ('unfixable = ["XLA302"]\nunsafe-fixes = true', True, False),
        ('unfixable = ["XLA0"]\nextend-safe-fixes = ["XLA005"]', False, True),
    ],
)
def test_fix_safety_from_configuration(tmp_path, table, expect_identity_fixed, expect_sync_fixed):
    write_tree(
        tmp_path,
        {"train.py": SPMD_IDENTITY, "pyproject.toml": f"[tool.xla-lint]\n{table}\n"},
    )
    xla(tmp_path, "--no-cache", "--select", "XLA005,XLA302", "--fix")
    text = (tmp_path / "train.py").read_text()
    assert ("xr.process_index()" in text) == expect_identity_fixed
    assert ("torch_xla.sync()" in text) == expect_sync_fixed


def test_unfixable_code_shows_no_fix_and_no_unsafe_hint(tmp_path):
    write_tree(
        tmp_path,
        {"train.py": SPMD_IDENTITY, "pyproject.toml": '[tool.xla-lint]\nunfixable = ["XLA005"]\n'},
    )
    proc = xla(tmp_path, "--no-cache", "--select", "XLA005", "--output-format", "json")
    [d] = json.loads(proc.stdout)
    assert d["code"] == "XLA005" and d["fix"] is None
    text = xla(tmp_path, "--no-cache", "--select", "XLA005")
    assert lines(text)[-1] == "Found 1 diagnostic in 1 file."


def test_no_unsafe_fixes_overrides_the_configuration(tmp_path):
    write_tree(
        tmp_path,
        {"train.py": SPMD_IDENTITY, "pyproject.toml": "[tool.xla-lint]\nunsafe-fixes = true\n"},
    )
    xla(tmp_path, "--no-cache", "--select", "XLA005", "--fix", "--no-unsafe-fixes")
    assert (tmp_path / "train.py").read_text() == SPMD_IDENTITY


@pytest.mark.parametrize(
    "table,message",
    [
        ('unsafe-fixes = "yes"', "unsafe-fixes must be true or false"),
        ('unfixable = ["XLA9999"]', "XLA9999"),
        ("extend-safe-fixes = 5", "extend-safe-fixes"),
    ],
)
def test_fix_safety_keys_are_validated(tmp_path, table, message):
    write_tree(
        tmp_path, {"train.py": SPMD_IDENTITY, "pyproject.toml": f"[tool.xla-lint]\n{table}\n"}
    )
    proc = xla(tmp_path, "--no-cache")
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_add_noqa_names_notebooks_it_does_not_rewrite(tmp_path):
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"language_info": {"name": "python"}},
        "cells": [{**cell, "source": "import torch_xla.core.xla_model as xm\nxm.mark_step()\n"}],
    }
    text = json.dumps(notebook, indent=1)
    write_tree(tmp_path, {"nb.ipynb": text, "a.py": PRINTS})
    proc = xla(tmp_path, "--no-cache", "--select", "XLA004,XLA302", "--add-noqa")
    assert proc.returncode == 0
    assert "nb.ipynb: no noqa added for 1 diagnostic: notebooks and documents" in proc.stderr
    assert (tmp_path / "nb.ipynb").read_text() == text
    assert "# noqa: XLA004" in (tmp_path / "a.py").read_text()


# ---- Ctrl-C ------------------------------------------------------------------------------

# `xla-lint`, held in click's own parse of the group's arguments (`click.Group.parse_args`)
# until SIGINT comes: "parsing" on stdout says it is there.
SLOW_PARSE = """
import os, sys, time
import click
from xla_lint.__main__ import main

real = click.Group.parse_args


def slow(self, ctx, args):
    os.write(1, b"parsing\\n")  # unbuffered: a SIGINT in a flush of print's would repeat it
    time.sleep(60)
    return real(self, ctx, args)


click.Group.parse_args = slow
sys.argv[0] = "xla-lint"
main()
"""


@pytest.mark.parametrize("args", [["--isolated", "."], ["check", "--output-format", "json", "."]])
def test_ctrl_c_while_click_parses_the_command_line_is_one_line(tmp_path, args):
    """Ctrl-C in click's parse of the command line printed click's empty line (it closes the
    terminal's ``^C``) before ``xla-lint: interrupted``: click's ``main`` catches the
    KeyboardInterrupt there and echoes a newline to standard error before our handler."""
    import signal

    write_tree(tmp_path, {"a.py": CLEAN})
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_PARSE, *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"parsing\n"  # it is in the parse now, however loaded
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert (proc.returncode, err, out) == (130, b"xla-lint: interrupted\n", b"")
