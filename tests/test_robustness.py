"""Hostile inputs through the real command line: each gives a clear diagnostic or message,
a defined exit code (0 clean, 1 findings, 2 usage/configuration error) and no traceback;
``--fix`` never loses a byte of user data."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import LOST, LOST_NOTE, preview_args, without_file_powers

from xla_lint.diagnostics import Edit, Fix
from xla_lint.pipeline.fixes import WriteError, apply_fixes, write_atomic

PRINT = "import torch_xla\nprint('a')\n" + LOST  # a print XLA004 reports (helpers.LOST)
PRINT_FIXED = "import torch_xla\nprint('a', flush=True)\n" + LOST


def xla(
    cwd: Path, *args: str, timeout: float = 120, prefix: list[str] = ()
) -> subprocess.CompletedProcess:
    """Run ``python -m xla_lint ARGS`` in ``cwd`` (isolated from config unless a test says
    otherwise), after the command ``prefix`` (see :func:`helpers.without_file_powers`)."""
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "xla_lint", *preview_args(args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    assert proc.returncode in (0, 1, 2), (proc.returncode, proc.stderr)
    return proc


def rows(proc) -> list[str]:
    return proc.stdout.splitlines()


@pytest.mark.parametrize(
    "source, message",
    [
        ("import torch_xla\ndef train(:\n    pass\n", "XLA000 cannot parse"),
        ("import torch_xla\nif True:\nprint('x')\n", "XLA000 cannot parse"),
        ("import torch_xla\nx = (1,\n", "XLA000 cannot parse"),
        ("import torch_xla\nx = 1 $ 2\n", "XLA000 cannot parse"),
        ("import torch_xla\n  x = 1\n", "XLA000 cannot parse"),
        ("import torch_xla\nx = 'unterminated\n", "XLA000 cannot parse"),
        ("import torch_xla\n\tif x:\n        pass\n", "XLA000 cannot parse"),
    ],
)
def test_syntax_errors_give_xla000(tmp_path, source, message):
    (tmp_path / "bad.py").write_text(source)
    (tmp_path / "good.py").write_text(PRINT)
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", ".")
    assert proc.returncode == 1
    assert any(r.startswith("bad.py:") and message in r for r in rows(proc)), proc.stdout
    assert any(r.startswith("good.py:2:1: XLA004") for r in rows(proc))  # the run goes on


def test_nul_byte(tmp_path):
    (tmp_path / "nul.py").write_bytes(b"import torch_xla\nx = 1\0\n")
    proc = xla(tmp_path, "--isolated", "--no-cache", "nul.py")
    assert proc.returncode == 1
    assert rows(proc)[0] == "nul.py:2:6: XLA000 cannot parse: source contains a NUL byte"


def test_latin1_without_cookie_is_reported(tmp_path):
    (tmp_path / "l1.py").write_bytes(b"import torch_xla\n# caf\xe9\nprint('a')\n")
    proc = xla(tmp_path, "--isolated", "--no-cache", "l1.py")
    assert proc.returncode == 1
    assert rows(proc)[0].startswith("l1.py:2:6: XLA000 cannot parse: bytes are not valid utf-8")


def test_latin1_in_the_first_two_lines_names_the_byte_not_an_encoding_declaration(tmp_path):
    """tokenize's "invalid or missing encoding declaration" was passed on as "bad encoding
    declaration" for a file (or a notebook's JSON) that declares nothing."""
    (tmp_path / "l1.py").write_bytes(b"# caf\xe9\nimport torch_xla\n")
    (tmp_path / "c.py").write_bytes(b"# -*- coding: bogus -*-\nimport torch_xla\n")
    proc = xla(tmp_path, "--output-format", "concise", "l1.py", "c.py")
    assert rows(proc)[:2] == [
        "c.py:1:1: XLA000 cannot parse: bad encoding declaration: unknown encoding: bogus",
        "l1.py:1:6: XLA000 cannot parse: bytes are not valid utf-8: invalid continuation byte",
    ]


def test_latin1_with_cookie_is_linted_and_fixed_as_latin1(tmp_path):
    data = (
        b"# -*- coding: latin-1 -*-\nimport torch_xla\n# caf\xe9\nprint('\xe9')\n" + LOST.encode()
    )
    (tmp_path / "l1.py").write_bytes(data)
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", "l1.py")
    assert proc.returncode == 1 and rows(proc)[0].startswith("l1.py:4:1: XLA004")
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", "--fix", "l1.py")
    assert proc.returncode == 0, proc.stdout
    assert (tmp_path / "l1.py").read_bytes() == data.replace(
        b"print('\xe9')", b"print('\xe9', flush=True)"
    )


def test_bom_and_crlf_are_kept_by_fix(tmp_path):
    data = (
        b"\xef\xbb\xbfimport torch_xla\r\nprint('a')\r\nprint('b')\r\nimport os\r\nos._exit(0)\r\n"
    )
    (tmp_path / "bom.py").write_bytes(data)
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", "bom.py")
    assert [r.split(": ")[0] for r in rows(proc)[:2]] == ["bom.py:2:1", "bom.py:3:1"]
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", "--fix", "bom.py")
    assert proc.returncode == 0
    assert (tmp_path / "bom.py").read_bytes() == (
        b"\xef\xbb\xbfimport torch_xla\r\nprint('a', flush=True)\r\nprint('b', flush=True)\r\n"
        b"import os\r\nos._exit(0)\r\n"
    )


def test_form_feed_does_not_shift_fixes(tmp_path):
    # str.splitlines() cuts at \x0c; Python and LibCST do not: a fix must land on the same text.
    data = "import torch_xla\n\x0c\nx = '\x1c'  # \u2028 odd\nprint('a')\n" + LOST
    (tmp_path / "ff.py").write_text(data, newline="")
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", "--fix", "ff.py")
    assert proc.returncode == 0, proc.stdout
    assert (tmp_path / "ff.py").read_bytes().decode() == data.replace(
        "print('a')", "print('a', flush=True)"
    )


def test_lone_cr_file_keeps_its_final_line_end_when_a_fix_adds_an_import(tmp_path):
    # LibCST's code generation of a lone-CR module drops the final \r; only the lines the
    # import changes may come from LibCST, the rest from the file.
    data = b"import torch_xla.core.xla_model as xm\rxm.mark_step()\rx = 1\r"
    (tmp_path / "cr.py").write_bytes(data)
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA302", "--fix", "cr.py")
    assert proc.returncode == 0, proc.stdout
    assert (tmp_path / "cr.py").read_bytes() == (
        b"import torch_xla.core.xla_model as xm\rimport torch_xla\r\rtorch_xla.sync()\rx = 1\r"
    )


def test_noqa_counts_in_a_lone_cr_file(tmp_path):
    # tokenize cut the file only at \n: a CR file was one line, its noqa comments ignored,
    # and XLA900's fix removed the user's comment while the finding was fixed.
    data = b'import torch_xla\rprint("a")  # noqa: XLA004\rprint("b")  # noqa: XLA302\rimport os\ros._exit(0)\r'
    (tmp_path / "cr.py").write_bytes(data)
    proc = xla(tmp_path, "--isolated", "--no-cache", "--extend-select", "XLA900", "cr.py")
    assert [r.split(" ")[0:2] for r in rows(proc)[:2]] == [
        ["cr.py:3:1:", "XLA004"],
        ["cr.py:3:13:", "XLA900"],
    ]
    proc = xla(tmp_path, "--isolated", "--no-cache", "--extend-select", "XLA900", "--fix", "cr.py")
    assert (
        (tmp_path / "cr.py").read_bytes()
        == b'import torch_xla\rprint("a")  # noqa: XLA004\rprint("b", flush=True)\rimport os\ros._exit(0)\r'
    )


def test_form_feed_before_a_statement_is_kept_and_placed_as_python_places_it(tmp_path):
    # LibCST drops a form feed in front of a line's first token: columns on that line are
    # CPython's (one further right per form feed), the fix lands on the call, and the form
    # feeds survive the import LibCST adds.
    data = (
        "import torch_xla.core.xla_model as xm\n\x0c\x0cy = xm.mark_step(); xm.mark_step()\n"
        "\x0c\nxm.mark_step()\n"
    )
    (tmp_path / "ff.py").write_text(data, newline="")
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA302", "ff.py")
    assert [r.split(": ")[0] for r in rows(proc)[:3]] == ["ff.py:2:7", "ff.py:2:23", "ff.py:4:1"]
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA302", "--fix", "ff.py")
    assert proc.returncode == 0, proc.stdout
    assert (tmp_path / "ff.py").read_bytes().decode() == (
        "import torch_xla.core.xla_model as xm\nimport torch_xla\n\n"
        "\x0c\x0cy = torch_xla.sync(); torch_xla.sync()\n\x0c\ntorch_xla.sync()\n"
    )


@pytest.mark.parametrize(
    "data",
    [
        # each ends with os._exit, so that XLA004 reports its prints (helpers.LOST)
        b'import torch_xla\nprint("hi")\nimport os\nos._exit(0)',  # no line end at the end
        b'import torch_xla\n\x0cprint("hi")\n'
        + LOST.encode(),  # a form feed (str.splitlines cuts there)
        b'import torch_xla\nprint("a\xe2\x80\xa8b")\n' + LOST.encode(),  # U+2028 inside a string
        b'# -*- coding: latin-1 -*-\nimport torch_xla\nprint("caf\xe9")\n'
        + LOST.encode(),  # the diff is in the file's encoding
        b"\xef\xbb\xbfimport torch_xla\r\nprint(1)\r\nimport os\r\nos._exit(0)\r\n",  # BOM and CRLF
        b"import torch_xla\r\nprint(1)\nprint(2)\r\nimport os\nos._exit(0)\r\n",  # mixed line ends
        b"import torch_xla\rprint(1)\rprint(2)\rimport os\ros._exit(0)\r",  # lone CR: one line for git
        b"import torch_xla\nimport torch_xla.core.xla_model as xm\nprint(1)\rimport os\nos._exit(0)\r",  # ... and mixed with \n
    ],
    ids=[
        "no-eol",
        "form-feed",
        "u2028",
        "latin-1",
        "bom-crlf",
        "mixed",
        "lone-cr",
        "lone-cr-mixed",
    ],
)
@pytest.mark.parametrize("name", ["t.py", "été.py", "日本.py"])
def test_diff_applies_and_gives_what_fix_writes(tmp_path, data, name):
    (tmp_path / name).write_bytes(data)
    diff = subprocess.run(
        [sys.executable, "-m", "xla_lint", "--preview", "--isolated", "--no-cache", "--diff", name],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    assert diff.returncode == 1 and diff.stdout.startswith(b"--- a/" + os.fsencode(name) + b"\n"), (
        diff.stderr
    )
    stdin = subprocess.run(
        [
            sys.executable,
            "-m",
            "xla_lint",
            "--preview",
            "--isolated",
            "--no-cache",
            "--diff",
            "--stdin-filename",
            name,
            "-",
        ],
        input=data,
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    assert stdin.stdout == diff.stdout
    (tmp_path / "t.diff").write_bytes(diff.stdout)
    subprocess.run(
        ["git", "apply", "t.diff"], cwd=tmp_path, check=True, capture_output=True, timeout=60
    )
    patched = (tmp_path / name).read_bytes()
    (tmp_path / name).write_bytes(data)
    xla(tmp_path, "--isolated", "--no-cache", "--fix", name)
    assert patched == (tmp_path / name).read_bytes() != data


def test_empty_file(tmp_path):
    (tmp_path / "empty.py").write_bytes(b"")
    proc = xla(tmp_path, "--isolated", "--no-cache", "empty.py")
    assert proc.returncode == 0 and rows(proc) == ["All checks passed (1 file)."]


@pytest.mark.slow
def test_fifty_thousand_lines(tmp_path):
    lines = ["import torch_xla"] + [f"x{i} = {i}" for i in range(49_998)] + ["print(x1)"]
    (tmp_path / "big.py").write_text("\n".join(lines) + "\n" + LOST)
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", "big.py", timeout=600)
    assert proc.returncode == 1 and rows(proc)[0].startswith("big.py:50000:1: XLA004")


@pytest.mark.parametrize(
    "expr",
    [
        "(" * 1000 + "1" + ")" * 1000,
        "[" * 1000 + "]" * 1000,
        "-" * 1000 + "1",
        "not " * 1000 + "x",
        "+".join(["1"] * 5000),
        "a" + ".b" * 5000,
        "f" + "()" * 3000,
        "lambda: " * 1000 + "1",
        "1 if x else " * 3000 + "1",
    ],
)
def test_deep_nesting_never_crashes(tmp_path, expr):
    (tmp_path / "deep.py").write_text(f"import torch_xla\nx = {expr}\n")
    (tmp_path / "good.py").write_text(PRINT)
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", "-j", "1", ".")
    assert "good.py:2:1: XLA004" in proc.stdout  # the process survived and linted the rest
    deep = [r for r in rows(proc) if r.startswith("deep.py:")]
    assert all(" XLA000 cannot parse: " in r for r in deep)


@pytest.mark.parametrize(
    "expr", ["a" + ".b" * 10_000, "f" + "()" * 50_000, "1 if x else " * 5_000 + "1"]
)
def test_nesting_python_refuses_is_reported_at_once(tmp_path, expr):
    """Depth that `python file.py` refuses is XLA000 before LibCST sees it (10,000 chained
    attributes used to crash the process in LibCST's native parser and lose every result;
    5,000 nested conditionals took 4 GB)."""
    (tmp_path / "deep.py").write_text(f"import torch_xla\nx = {expr}\n")
    (tmp_path / "good.py").write_text(PRINT)
    python = subprocess.run(
        [sys.executable, "deep.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert "RecursionError" in python.stderr  # the interpreter refuses it too
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", ".", timeout=60)
    assert rows(proc)[:2] == [
        "deep.py:1:1: XLA000 cannot parse: nesting too deep (Python refuses it too)",
        "good.py:2:1: XLA004 `print` without `flush=True` in torch_xla code: "
        f"the line may sit in a buffer and never appear{LOST_NOTE}",
    ]


def test_nesting_python_accepts_is_linted(tmp_path):
    (tmp_path / "deep.py").write_text(
        "import torch_xla\nx = a" + ".b" * 2_500 + "\nprint(x)\n" + LOST
    )
    python = subprocess.run(
        [sys.executable, "-c", "import ast; ast.parse(open('deep.py').read())"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert python.returncode == 0
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", "deep.py", timeout=120)
    assert [r.split(" ")[0] for r in rows(proc)[:1]] == ["deep.py:3:1:"]


def test_symlink_loop_and_dangling_symlink(tmp_path):
    (tmp_path / "loop.py").symlink_to(tmp_path / "loop.py")
    (tmp_path / "gone.py").symlink_to(tmp_path / "missing.py")
    (tmp_path / "good.py").write_text(PRINT)
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", ".")
    assert proc.returncode == 1
    out = rows(proc)
    # found on the way, a link to nothing is nothing to lint (it was an XLA000 "cannot parse")
    assert [r.split(" ")[0] for r in out[:-1]] == ["good.py:2:1:"], out
    assert out[-1] == "Found 1 diagnostic in 1 file (1 fixable with --fix)."
    # named, it is an error that says what the link is, like a path that does not exist
    for name, why in (
        ("gone.py", f"a symbolic link to {str(tmp_path / 'missing.py')!r}, which does not exist"),
        ("loop.py", "a symbolic link that loops back on itself"),
    ):
        proc = xla(tmp_path, "--isolated", "--no-cache", name)
        assert (proc.returncode, proc.stderr) == (2, f"xla-lint: error: {name}: {why}\n")
    # A symlinked folder that points at its parent is not followed (no endless walk).
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "up").symlink_to(tmp_path, target_is_directory=True)
    assert (
        xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", ".", timeout=60).returncode
        == 1
    )


def test_directory_named_like_a_python_file(tmp_path):
    (tmp_path / "x.py").mkdir()
    (tmp_path / "x.py" / "inner.py").write_text(PRINT)
    for arg in (".", "x.py"):
        proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", arg)
        assert proc.returncode == 1
        assert rows(proc)[0].startswith("x.py/inner.py:2:1: XLA004")


def test_fifo_is_refused_without_hanging(tmp_path):
    # Root reads any chmod-000 file, so an unreadable source is simulated with a FIFO
    # (open() would block forever waiting for a writer).
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "good.py").write_text(PRINT)
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", ".", timeout=60)
    assert proc.returncode == 1
    assert "pipe.py:1:1: XLA000 cannot parse: cannot read file: not a regular file" in rows(proc)
    proc = xla(tmp_path, "--isolated", "--no-cache", "pipe.py", timeout=60)
    assert rows(proc)[0] == "pipe.py:1:1: XLA000 cannot parse: cannot read file: not a regular file"


def test_unreadable_file(tmp_path):
    prefix = without_file_powers()
    (tmp_path / "secret.py").write_text(PRINT)
    (tmp_path / "secret.py").chmod(0)
    proc = xla(tmp_path, "--isolated", "--no-cache", "secret.py", prefix=prefix)
    assert (
        rows(proc)[0] == "secret.py:1:1: XLA000 cannot parse: cannot read file: Permission denied"
    )


def test_unreadable_folder_is_reported_not_skipped(tmp_path):
    prefix = without_file_powers()
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "a.py").write_text(PRINT)
    (tmp_path / "b.py").write_text(PRINT)
    (tmp_path / "secret").chmod(0)
    try:
        proc = xla(tmp_path, "--isolated", "--no-cache", ".", prefix=prefix)
        assert [r.split(" ")[0:2] for r in rows(proc)[:2]] == [
            ["b.py:2:1:", "XLA004"],
            ["secret:1:1:", "XLA000"],
        ]
        assert rows(proc)[1].endswith("cannot read folder: Permission denied")
        # A file named inside it exists; it cannot be reached (it used to be "no such file").
        proc = xla(tmp_path, "--isolated", "--no-cache", "secret/a.py", prefix=prefix)
        assert proc.returncode == 1
        assert (
            rows(proc)[0]
            == "secret/a.py:1:1: XLA000 cannot parse: cannot access: Permission denied"
        )
        proc = xla(
            tmp_path, "--isolated", "--no-cache", "secret", prefix=prefix
        )  # the folder, named
        assert (
            rows(proc)[0]
            == "secret:1:1: XLA000 cannot parse: cannot read folder: Permission denied"
        )
    finally:
        (tmp_path / "secret").chmod(0o755)


def test_file_deleted_between_discovery_and_reading(tmp_path):
    (tmp_path / "a.py").write_text(PRINT)
    (tmp_path / "b.py").write_text(PRINT)
    script = textwrap.dedent("""
        import os, sys
        import xla_lint.cli as cli
        import xla_lint.pipeline.workspace as workspace
        real = workspace.discover
        def discover(*args, **kwargs):
            found = real(*args, **kwargs)
            os.unlink("a.py")  # gone after discovery, before reading
            return found
        workspace.discover = discover
        cli.main(
            ["--preview", "--isolated", "--no-cache", "--select", "XLA004", "."], prog_name="xla-lint"
        )
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 1
    assert "a.py:1:1: XLA000 cannot parse: cannot read file: No such file or directory" in rows(
        proc
    )
    assert any(r.startswith("b.py:2:1: XLA004") for r in rows(proc))


def test_malformed_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.xla-lint\nselect = [\n")
    (tmp_path / "a.py").write_text(PRINT)
    proc = xla(tmp_path, "a.py")
    assert proc.returncode == 2
    assert (
        proc.stderr.startswith("xla-lint: error: ")
        and "pyproject.toml: not valid TOML" in proc.stderr
    )
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("tool", ["5", '"xla-lint"', '["x"]'])
def test_pyproject_whose_tool_is_not_a_table(tmp_path, tool):
    """Found on the way up it is some other project's file: ignored. Named with --config: a
    one-line error (both were internal errors)."""
    (tmp_path / "pyproject.toml").write_text(f"tool = {tool}\n")
    (tmp_path / "a.py").write_text(PRINT)
    proc = xla(tmp_path, "--no-cache", "a.py")
    assert proc.returncode == 1 and rows(proc)[0].startswith("a.py:2:1: XLA004")
    proc = xla(tmp_path, "--no-cache", "--config", "pyproject.toml", "a.py")
    assert (
        proc.returncode == 2
        and proc.stderr == "xla-lint: error: pyproject.toml: `tool` must be a table\n"
    )


def test_closed_standard_input(tmp_path):
    proc = subprocess.run(
        ["sh", "-c", f"exec '{sys.executable}' -m xla_lint - <&-"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr
        == "xla-lint: error: standard input is closed; name files to lint instead of `-`\n"
    )


def test_unknown_select_code(tmp_path):
    (tmp_path / "a.py").write_text(PRINT)
    proc = xla(tmp_path, "--isolated", "--select", "XLA999X", "a.py")
    assert proc.returncode == 2
    assert "unknown rule code 'XLA999X' in --select" in proc.stderr


# ---- --fix never loses data ------------------------------------------------------------


def test_read_only_file_is_reported_and_untouched(tmp_path):
    path = tmp_path / "ro.py"
    path.write_text(PRINT)
    path.chmod(0o444)  # root could still write it: the mode bits are what counts
    before = path.stat()
    proc = xla(tmp_path, "--isolated", "--no-cache", "--select", "XLA004", "--fix", "ro.py")
    assert proc.returncode == 1
    assert "xla-lint: ro.py: read-only, left unchanged" in proc.stderr
    assert path.read_text() == PRINT and stat.S_IMODE(path.stat().st_mode) == 0o444
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert rows(proc)[0].startswith("ro.py:2:1: XLA004")


def test_fix_twice_equals_fix_once(tmp_path):
    source = (
        "import torch_xla\nimport torch_xla.core.xla_model as xm\nprint('a')\nprint('b', 1)\n"
        "xm.mark_step()\ndevice = xm.xla_device()\n"
    )
    (tmp_path / "a.py").write_text(source)
    first = xla(tmp_path, "--isolated", "--no-cache", "--fix", "a.py")
    once = (tmp_path / "a.py").read_bytes()
    assert once != source.encode() and "Fixed" in first.stdout
    second = xla(tmp_path, "--isolated", "--no-cache", "--fix", "a.py")
    assert (tmp_path / "a.py").read_bytes() == once
    assert "Fixed" not in second.stdout


def test_fix_that_would_not_parse_is_dropped():
    text = "import torch_xla\nprint('a')\n"
    broken = Fix("break it", (Edit(2, 1, 2, 6, "print(("),))
    good = Fix("flush", (Edit(2, 10, 2, 10, ", flush=True"),))
    assert apply_fixes(text, [broken]) == (text, 0)
    assert apply_fixes(text, [broken, good]) == ("import torch_xla\nprint('a', flush=True)\n", 1)


def test_write_atomic_refuses_text_the_encoding_cannot_hold(tmp_path):
    path = tmp_path / "l1.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n")
    with pytest.raises(WriteError, match="cannot be written as iso-8859-1"):
        write_atomic(str(path), "# -*- coding: latin-1 -*-\nx = '\u4e2d'\n", "iso-8859-1")
    assert path.read_bytes() == b"# -*- coding: latin-1 -*-\nx = '\xe9'\n"
    assert [p.name for p in tmp_path.iterdir()] == ["l1.py"]  # no temporary file left behind


def test_deep_stack_calls_nest_without_deadlock():
    """call_with_deep_stack from inside a deep-stack thread runs in place (the language server
    parses in one, then lints in it: a second thread waited for the first's lock forever)."""
    import threading

    from xla_lint.sources.text import call_with_deep_stack

    def inner() -> str:
        return threading.current_thread().name

    def outer() -> tuple[str, str]:
        return threading.current_thread().name, call_with_deep_stack(inner)

    done: list[tuple[str, str]] = []
    runner = threading.Thread(target=lambda: done.append(call_with_deep_stack(outer)), daemon=True)
    runner.start()
    runner.join(timeout=30)
    assert done == [("xla-lint-parse", "xla-lint-parse")]


@pytest.mark.parametrize("name", ["run.sh", "x.bash", "x.md", "x.rst", "pyproject.toml"])
def test_fifo_launcher_document_or_config_does_not_hang(tmp_path, name):
    # A FIFO named like a shell launcher, a document or pyproject.toml blocked the run forever
    # (open() waits for a writer); it is skipped like any file that cannot be read, except the
    # configuration, which is a one-line error (it was skipped silently: the defaults ran).
    os.mkfifo(tmp_path / name)
    (tmp_path / "good.py").write_text(PRINT)
    proc = xla(tmp_path, "--no-cache", "--docs", "--select", "XLA004", ".", timeout=60)
    if name == "pyproject.toml":
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [
            f"xla-lint: error: {tmp_path / name}: not a regular file, so its configuration "
            "cannot be read"
        ]
        return
    assert proc.returncode == 1, proc.stderr
    assert rows(proc)[0].startswith("good.py:2:1: XLA004")


def test_fifo_as_config_is_a_configuration_error(tmp_path):
    os.mkfifo(tmp_path / "other.toml")
    (tmp_path / "good.py").write_text(PRINT)
    proc = xla(tmp_path, "--no-cache", "--config", "other.toml", ".", timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "xla-lint: error: other.toml: cannot read (not a regular file)"
    ]


def test_write_atomic_leaves_a_file_that_changed_since_it_was_read(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(PRINT + "x = 1\n")  # an editor appended a line after the read
    with pytest.raises(WriteError, match="changed while it was being fixed, left unchanged"):
        write_atomic(str(path), PRINT_FIXED, expected=PRINT.encode())
    assert path.read_text() == PRINT + "x = 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]  # no temporary file left
    write_atomic(str(path), PRINT_FIXED, expected=(PRINT + "x = 1\n").encode())
    assert path.read_text() == PRINT_FIXED


def test_fix_keeps_a_hard_linked_file_one_file(tmp_path):
    # The rename gave a.py a new file: the other name (b.py, a hard link) kept the old text.
    path = tmp_path / "a.py"
    path.write_text(PRINT)
    os.link(path, tmp_path / "b.py")
    proc = xla(tmp_path, "--isolated", "--no-cache", "--fix", "a.py")
    assert proc.returncode == 0, proc.stdout
    assert path.read_text() == (tmp_path / "b.py").read_text() == PRINT_FIXED
    assert os.stat(path).st_ino == os.stat(tmp_path / "b.py").st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]
    # in place, the check for an edit made meanwhile still holds
    with pytest.raises(WriteError, match="changed while it was being fixed"):
        write_atomic(str(path), PRINT, expected=PRINT.encode())
    assert path.read_text() == PRINT_FIXED


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_fix_by_root_keeps_the_owner_of_the_file(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(PRINT)
    os.chown(path, 1234, 5678)
    write_atomic(str(path), PRINT_FIXED, expected=PRINT.encode())
    assert (os.stat(path).st_uid, os.stat(path).st_gid) == (1234, 5678)
    assert path.read_text() == PRINT_FIXED


@pytest.mark.parametrize("mode", ["--fix", "--add-noqa"])
def test_fix_never_overwrites_an_edit_made_while_it_ran(tmp_path, monkeypatch, mode):
    # Lines appended between --fix's read and its rename were lost (179 appended, 56 left
    # on a 10,000-line file): the write was atomic, the update was not.
    from click.testing import CliRunner

    from xla_lint import cli
    from xla_lint.pipeline import fixes

    path = tmp_path / "a.py"
    path.write_text(PRINT)
    real = fixes.read_source

    def editor_appends(p, limit=None):  # the check just before the rename sees the edit
        with open(p, "a") as handle:
            handle.write("y = 2\n")
        return real(p, limit)

    monkeypatch.setattr(fixes, "read_source", editor_appends)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.main, ["--preview", "--isolated", "--no-cache", mode, "a.py"])
    assert result.exit_code == 1, result.output
    assert "a.py: changed while it was being fixed, left unchanged (run again)" in result.output
    assert path.read_text() == PRINT + "y = 2\n"


def test_a_folder_named_from_its_parent_uses_its_own_configuration(tmp_path):
    # `xla-lint proj` from the parent folder silently ignored proj/pyproject.toml (Ruff uses
    # the nearest configuration of what it lints).
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text('[tool.xla-lint]\nignore = ["XLA004"]\n')
    (proj / "a.py").write_text(PRINT)
    proc = xla(tmp_path, "--no-cache", "proj")
    assert proc.returncode == 0, proc.stdout
    proc = xla(tmp_path, "--no-cache", "proj/a.py")
    assert proc.returncode == 0, proc.stdout
    # a folder without configuration of its own still takes the one around the run
    (tmp_path / "pyproject.toml").write_text('[tool.xla-lint]\nignore = ["XLA004"]\n')
    other = tmp_path / "other"
    other.mkdir()
    (other / "b.py").write_text(PRINT)
    assert xla(tmp_path, "--no-cache", "other").returncode == 0


REMOVED = "import torch_xla.core.xla_model as xm\nd = xm.xla_device()\nn = xm.xrt_world_size()\n"


def codes_by_file(proc) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for row in rows(proc):
        if ": XLA" in row:
            path, rest = row.split(":", 1)
            out.setdefault(path, []).append(rest.split(" ")[1])
    return out


def test_each_file_is_linted_with_its_nearest_configuration(tmp_path):
    # A folder below the one linted that has its own [tool.xla-lint] was linted with the
    # outer configuration (Ruff lints each file with its nearest one).
    proj, sub = tmp_path / "proj", tmp_path / "proj" / "sub"
    (sub / "vendor").mkdir(parents=True)
    (proj / "pyproject.toml").write_text('[tool.xla-lint]\nignore = ["XLA013"]\n')
    (sub / "pyproject.toml").write_text(
        '[tool.xla-lint]\nselect = ["XLA013"]\nexclude = ["vendor"]\n'
    )
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')  # no table: no say
    for path in (tmp_path / "top.py", proj / "a.py", sub / "b.py", sub / "vendor" / "c.py"):
        path.write_text(REMOVED)
    proc = xla(tmp_path, "--no-cache", ".")
    assert codes_by_file(proc) == {
        "proj/a.py": ["XLA301"],  # proj: XLA013 ignored
        "proj/sub/b.py": ["XLA013"],  # sub: only XLA013; vendor/ excluded there
        "top.py": ["XLA301", "XLA013"],  # no configuration: the defaults
    }, proc.stdout
    # a file named explicitly is linted although its folder's configuration excludes it
    proc = xla(proj, "--no-cache", "sub/vendor/c.py", "sub")
    assert codes_by_file(proc) == {"sub/b.py": ["XLA013"], "sub/vendor/c.py": ["XLA013"]}
    # command-line options apply to every configuration, as in Ruff
    proc = xla(tmp_path, "--no-cache", "--extend-select", "XLA301", "proj")
    assert codes_by_file(proc) == {
        "proj/a.py": ["XLA301"],
        "proj/sub/b.py": ["XLA301", "XLA013"],
    }, proc.stdout
    # --config: that one file for every file
    proc = xla(tmp_path, "--no-cache", "--config", "proj/pyproject.toml", "proj")
    assert set(codes_by_file(proc)) == {"proj/a.py", "proj/sub/b.py", "proj/sub/vendor/c.py"}
    assert all(codes == ["XLA301"] for codes in codes_by_file(proc).values())
    # --fix applies each file's own rules
    proc = xla(tmp_path, "--no-cache", "--fix", "proj")
    assert proc.returncode == 0, proc.stdout
    assert "torch_xla.device()" in (proj / "a.py").read_text()
    assert "xm.xrt_world_size()" in (proj / "a.py").read_text()
    assert "torch_xla.runtime.world_size()" in (sub / "b.py").read_text()
    assert "xm.xla_device()" in (sub / "b.py").read_text()


def test_an_invalid_nested_configuration_is_a_one_line_error(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text('[tool.xla-lint]\nselect = ["NOPE"]\n')
    (tmp_path / "a.py").write_text(PRINT)
    proc = xla(tmp_path, "--no-cache", ".")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "sub/pyproject.toml" in lines[0] and "NOPE" in lines[0], lines


@pytest.mark.parametrize(
    "table, message",
    [
        ('cache-dir = ""', "cache-dir must name a folder (it is empty)"),
        ("select = []", "select = [] turns every rule off"),
    ],
)
def test_configuration_values_that_silently_did_the_wrong_thing(tmp_path, table, message):
    # cache-dir = "" wrote cache files into the project's root; select = [] checked nothing.
    (tmp_path / "pyproject.toml").write_text(f"[tool.xla-lint]\n{table}\n")
    (tmp_path / "a.py").write_text(PRINT)
    proc = xla(tmp_path, ".")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "pyproject.toml"]


def test_config_file_without_an_xla_lint_table_is_an_error(tmp_path):
    # --config other.toml without [tool.xla-lint] silently used the defaults.
    (tmp_path / "other.toml").write_text("[tool.ruff]\nline-length = 90\n")
    (tmp_path / "a.py").write_text(PRINT)
    proc = xla(tmp_path, "--no-cache", "--config", "other.toml", ".")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "xla-lint: error: other.toml: no [tool.xla-lint] table (the file --config names must have one)"
    ]


def test_a_file_python_compiles_but_libcst_cannot_parse_is_linted_around_its_strings(tmp_path):
    # 5,000 adjacent string literals (a long prompt): Python compiles the file, LibCST's parser
    # fails; it was reported as a plain syntax error ("expected one of STRING"), then as
    # "nothing in it was linted". The run of strings is blanked for LibCST, the rest is linted
    # at its own lines, and no fix is offered (one computed from the blanked text would lose it).
    lines = "".join(f'    "line {i} of a long prompt"\n' for i in range(5000))
    text = f"import torch_xla\nPROMPT = (\n{lines})\nprint(PROMPT)\n{LOST}"
    (tmp_path / "p.py").write_text(text)
    compile(text, "p.py", "exec")  # Python accepts it
    proc = xla(tmp_path, "--isolated", "--no-cache", "p.py")
    assert proc.returncode == 1
    assert rows(proc) == [
        "p.py:5004:1: XLA004 `print` without `flush=True` in torch_xla code: the line may sit "
        f"in a buffer and never appear{LOST_NOTE}",
        "Found 1 diagnostic in 1 file.",
    ]
    assert xla(tmp_path, "--isolated", "--no-cache", "--fix", "p.py").returncode == 1
    assert (tmp_path / "p.py").read_text() == text


def test_long_string_runs_are_blanked_in_place():
    from xla_lint.sources.text import mask_string_runs

    text = 'x = (\n    "a"  # one\n    """b\nc"""\n    "d"\n)\ny = "e" "f"\n'
    assert mask_string_runs(text, longest=5) is None  # no run that long: nothing to do
    masked = mask_string_runs(text, longest=2)
    assert masked == 'x = (\n    "a"  # one\n' + " " * 8 + "\n" + " " * 4 + "\n" + " " * 7 + (
        '\n)\ny = "e" "f"\n'
    )
    assert [len(line) for line in masked.splitlines()] == [len(line) for line in text.splitlines()]
    compile(masked, "m.py", "exec")
    assert mask_string_runs("x = (", longest=0) is None  # does not tokenize


def test_a_checkout_s_own_copy_py_does_not_shadow_the_standard_library(tmp_path):
    """unseen8 tz_kaggle: `python -m xla_lint .` in a folder with a copy.py crashed (-m puts
    the current folder first on sys.path); the linter never imports the code it checks."""
    (tmp_path / "copy.py").write_text('raise SystemExit("the checkout\'s copy.py was imported")\n')
    (tmp_path / "typing.py").write_text(
        'raise SystemExit("the checkout\'s typing.py was imported")\n'
    )
    (tmp_path / "train.py").write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "--isolated", "--no-cache", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "was imported" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 1 and "train.py:2:1: XLA302" in proc.stdout, proc.stdout + proc.stderr
