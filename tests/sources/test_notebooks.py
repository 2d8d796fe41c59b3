"""Jupyter notebooks: code cells linted as one program, placed on the lines of the .ipynb file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import lint_tree

from xla_lint.sources.notebooks import NotPython, notebook_blocks
from xla_lint.sources.text import SourceError


def cell(source: str, kind: str = "code", outputs: list[str] | None = None) -> dict:
    """A cell as nbformat writes it: the source split into lines, each keeping its line end."""
    out = {"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True)}
    if kind == "code":
        out["execution_count"] = None
        out["outputs"] = [{"name": "stdout", "output_type": "stream", "text": outputs or []}]
    return out


def notebook(*cells: dict, language: str = "python") -> str:
    """Notebook JSON laid out as Jupyter saves it (indent 1, non-ASCII kept)."""
    data = {
        "cells": list(cells),
        "metadata": {"kernelspec": {"language": language, "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


KAGGLE = notebook(
    cell("# Training on a TPU VM\n", kind="markdown"),
    cell(
        "!pip install torch_xla\n%env PJRT_DEVICE=TPU\nimport torch_xla.core.xla_model as xm\n"
        "import torch_xla.distributed.xla_multiprocessing as xmp\n",
        outputs=["def _mp_fn(index):\n"],
    ),  # an output equal to the next cell's first line
    cell("def _mp_fn(index):\n    device = xm.xla_device()\n    print('ordinal', index, \"é\")\n"),
    cell("%%time\nxmp.spawn(_mp_fn, args=())\n"),
    cell("%%bash\nxm.mark_step()\n"),  # a shell cell: not Python
    cell("xm.mark_step()  # noqa: XLA302\n"),
)


def found(tmp_path: Path, files: dict[str, str], select=None):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    result, _, _ = lint_tree(tmp_path, select=select)
    return result.diagnostics


def test_code_cells_are_linted_as_one_program_on_the_notebook_s_lines(tmp_path):
    # XLA303 is off by default; it is selected for its position in the fourth cell.
    diagnostics = found(tmp_path, {"train.ipynb": KAGGLE}, select=["XLA301", "XLA004", "XLA303"])
    file_lines = KAGGLE.splitlines()
    got = [(d.code, d.line, d.column) for d in diagnostics]
    assert [code for code, _, _ in got] == [
        "XLA301",
        "XLA004",
        "XLA303",
    ]  # names imported in cell 2 resolve in 3 and 4
    # Each position is the notebook file's line holding that code, at its column.
    for d, text in zip(diagnostics, ["xm.xla_device()", "print(", "xmp.spawn("], strict=True):
        assert file_lines[d.line - 1][d.column - 1 :].startswith(text), (d, file_lines[d.line - 1])
    assert all(d.fix is None for d in diagnostics)  # notebooks are never rewritten


def test_cells_are_transformed_as_ipython_runs_them_line_for_line():
    blocks = notebook_blocks(KAGGLE)
    assert [b.code for b in blocks] == [
        "get_ipython().system('pip install torch_xla')\n"
        "get_ipython().run_line_magic('env', 'PJRT_DEVICE=TPU')\n"
        "import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.xla_multiprocessing as xmp\n",
        "def _mp_fn(index):\n    device = xm.xla_device()\n    print('ordinal', index, \"é\")\n",
        "\nxmp.spawn(_mp_fn, args=())\n",  # %%time runs its body as Python, in the kernel
        "xm.mark_step()  # noqa: XLA302\n",
    ]  # the %%bash cell is not Python
    assert [b.number for b in blocks] == [2, 3, 4, 6]  # counted over all cells, markdown too


def test_a_cell_stored_as_one_string_is_reported_where_its_source_starts(tmp_path):
    text = json.dumps(
        {
            "cells": [
                {
                    "cell_type": "code",
                    "metadata": {},
                    "outputs": [],
                    "execution_count": None,
                    "source": "import torch_xla.core.xla_model as xm\nx = 1\nxm.mark_step()\n",
                }
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
    )
    line = next(i for i, t in enumerate(text.splitlines(), 1) if '"source"' in t)
    (d,) = found(tmp_path, {"one.ipynb": text}, select=["XLA302"])
    assert (d.line, d.column) == (line, 1) and (d.cell, d.cell_line, d.cell_column) == (1, 3, 1)
    # The same as compact JSON (one line): the top of the file, never a line past its end.
    (d,) = found(tmp_path, {"one.ipynb": json.dumps(json.loads(text))}, select=["XLA302"])
    assert (d.line, d.column, d.end_line) == (1, 1, 1) and (d.cell, d.cell_line) == (1, 3)


def test_an_output_that_repeats_the_code_is_not_taken_for_it(tmp_path):
    """Jupyter sorts keys, so a cell's outputs come before its source in the file."""
    text = json.dumps(
        {
            "cells": [
                cell(
                    "import torch_xla.core.xla_model as xm\nxm.mark_step()\n",
                    outputs=["xm.mark_step()\n"],
                )
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
        sort_keys=True,
    )
    (d,) = found(tmp_path, {"sorted.ipynb": text}, select=["XLA302"])
    lines = text.splitlines()
    assert '"source"' in "".join(lines[: d.line - 1]) and lines[d.line - 1][
        d.column - 1 :
    ].startswith("xm.mark_step")


@pytest.mark.parametrize("ascii_only", [False, True])
def test_columns_count_escapes_as_written(tmp_path, ascii_only):
    code = 'import torch_xla.core.xla_model as xm\ns = "caf\u00e9 \\t \U0001f600"; xm.mark_step()\n'
    text = json.dumps(
        {"cells": [cell(code)], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
        indent=1,
        ensure_ascii=ascii_only,
    )
    (d,) = found(tmp_path, {"esc.ipynb": text}, select=["XLA302"])
    line = text.splitlines()[d.line - 1]
    assert line[d.column - 1 : d.end_column - 1] == "xm.mark_step()"


@pytest.mark.parametrize(
    "source",
    [
        "files = !ls\nxm.mark_step()\n",
        "xm.mark_step?\nxm.mark_step()\n",
        "env = %env\nxm.mark_step()\n",
        "a, b = !echo 1 2\nxm.mark_step()\n",
    ],
)
def test_more_ipython_syntax_is_transformed(tmp_path, source):
    text = notebook(cell("import torch_xla.core.xla_model as xm\n"), cell(source))
    assert [d.code for d in found(tmp_path, {"nb.ipynb": text}, select=["XLA302", "XLA000"])] == [
        "XLA302"
    ]


def test_a_cell_that_does_not_parse_is_reported(tmp_path):
    """Unlike a documentation snippet, a cell is code that runs: XLA000 at its line, the rest linted."""
    text = notebook(
        cell("import torch_xla.core.xla_model as xm\n"),
        cell("def f(:\n    pass\n"),
        cell("xm.mark_step()\n"),
    )
    diagnostics = found(tmp_path, {"nb.ipynb": text}, select=["XLA302", "XLA000"])
    assert [d.code for d in diagnostics] == ["XLA000", "XLA302"]
    assert text.splitlines()[diagnostics[0].line - 1].strip().startswith('"def f(:')


def test_other_kernels_are_not_python_and_broken_json_is_an_error():
    with pytest.raises(NotPython, match=r"^not a Python notebook \(kernel: R\)$"):
        notebook_blocks(notebook(cell("xm.mark_step()\n"), language="R"))
    julia = json.loads(notebook(cell("using Flux\n")))
    julia["metadata"] = {"language_info": {"name": "julia"}, "kernelspec": {"language": "python"}}
    with pytest.raises(
        NotPython, match="kernel: julia"
    ):  # language_info, what the kernel reports, wins
        notebook_blocks(json.dumps(julia, indent=1))
    for language in ("python", "Python", "python3", "ipython3", ""):
        assert len(notebook_blocks(notebook(cell("x = 1\n"), language=language))) == 1
    with pytest.raises(SourceError, match="invalid JSON"):
        notebook_blocks('{"cells": [')
    with pytest.raises(SourceError, match="no list of `cells`"):
        notebook_blocks('["torch_xla"]')
    with pytest.raises(SourceError, match="nested too deeply"):
        notebook_blocks("[" * 100_000 + "]" * 100_000)


def test_a_cell_whose_source_is_not_text_makes_the_notebook_xla000(tmp_path):
    """Jupyter will not open such a file either; it was skipped without a word, so a broken
    notebook passed as clean."""
    broken = json.loads(notebook(cell("import torch_xla\n"), cell("xm.mark_step()\n")))
    broken["cells"][1]["source"] = ["xm.mark_step()\n", 7]
    with pytest.raises(SourceError, match="the `source` of cell 2 is not text"):
        notebook_blocks(json.dumps(broken, indent=1))
    diagnostics = found(tmp_path, {"nb.ipynb": json.dumps(broken, indent=1)}, select=["XLA000"])
    assert [(d.code, d.line) for d in diagnostics] == [("XLA000", 1)]
    assert "cell 2" in diagnostics[0].message


def run_verbose(tmp_path: Path, files: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """``xla-lint -v`` on ``files`` written in ``tmp_path``."""
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "xla_lint", "--isolated", "--no-cache", "-v", *args, *files],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_notebook_of_another_kernel_is_skipped_with_its_reason_not_counted_as_xla000(tmp_path):
    """As Ruff does: an R notebook holds no Python; it was "could not parse" under -v and
    counted as XLA000, with no XLA000 printed."""
    text = notebook(cell("library(torch_xla)\nx <- torch_xla$ones(2)\n"), language="R")
    proc = run_verbose(tmp_path, {"r.ipynb": text})
    assert proc.returncode == 0 and proc.stdout.startswith("All checks passed"), proc.stdout
    assert "xla-lint: skipped r.ipynb (not a Python notebook (kernel: R))" in proc.stderr
    assert "could not parse" not in proc.stderr and "XLA000" not in proc.stderr


def test_a_notebook_in_another_nbformat_than_4_is_xla000_at_its_version(tmp_path):
    """nbformat 3 (IPython 2) keeps cells in `worksheets` and code in `input`; a notebook
    saying nbformat 3 was linted as if it were 4. Both are XLA000 naming the upgrade."""
    worksheets = json.dumps(
        {
            "metadata": {"name": ""},
            "nbformat": 3,
            "nbformat_minor": 0,
            "worksheets": [
                {
                    "cells": [
                        {
                            "cell_type": "code",
                            "input": ["import torch_xla\n"],
                            "language": "python",
                            "outputs": [],
                        }
                    ]
                }
            ],
        },
        indent=1,
    )
    cells = json.loads(notebook(cell("import torch_xla\n")))
    cells["nbformat"] = 3
    cells = json.dumps(cells, indent=1)
    diagnostics = found(
        tmp_path, {"v3.ipynb": worksheets, "cells3.ipynb": cells}, select=["XLA000"]
    )
    assert [(d.path, d.code) for d in diagnostics] == [
        ("cells3.ipynb", "XLA000"),
        ("v3.ipynb", "XLA000"),
    ]
    for d, text in zip(diagnostics, [cells, worksheets], strict=True):
        assert d.message == (
            "cannot parse: nbformat 3 is not read, only nbformat 4 "
            "(`jupyter nbconvert --to notebook --inplace FILE` upgrades it)"
        )
        assert text.splitlines()[d.line - 1][d.column - 1 :] == '"nbformat": 3,'
    with pytest.raises(SourceError, match="nbformat 2 is not read"):
        notebook_blocks('{"nbformat": 2, "worksheets": []}')


README_WITH_A_BROKEN_BLOCK = """# Training

```python
import torch_xla.core.xla_model as xm
model = Net(<your config>).to(xm.xla_device())
```

```python
import torch_xla.core.xla_model as xm
xm.mark_step()
```
"""


def test_a_doc_block_that_does_not_parse_is_skipped_and_named_for_verbose(tmp_path):
    """A page's block that does not parse is an excerpt more often than a bug: not XLA000,
    but no longer silent: the result names it (path:line:column, the parser's reason) for -v."""
    (tmp_path / "README.md").write_text(README_WITH_A_BROKEN_BLOCK, encoding="utf-8")
    result, _, _ = lint_tree(tmp_path, select=["XLA000", "XLA302"], docs=True)
    assert [(d.code, d.line) for d in result.diagnostics] == [
        ("XLA302", 10)
    ]  # the other block is linted
    (page,) = [r for r in result.files if r.path == "README.md"]
    assert page.parsed and page.skipped_reason is None
    assert page.notes == ["README.md:5:13: Python block skipped, it does not parse: invalid syntax"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "# torch_xla\n\n```python\nimport torch_xla\ndef f(:\n```\n",
            "no Python code block parses",
        ),
        ("# torch_xla\n\n```bash\npip install torch_xla\n```\n", "no Python code blocks"),
    ],
)
def test_a_page_with_nothing_linted_is_skipped_with_its_reason_not_counted_as_xla000(
    tmp_path, text, reason
):
    proc = run_verbose(tmp_path, {"page.md": text})
    assert proc.returncode == 0 and "XLA000" not in proc.stdout, proc.stdout
    assert (
        f"xla-lint: skipped page.md ({reason})" in proc.stderr
        and "could not parse" not in proc.stderr
    )


def test_a_notebook_without_code_cells_is_skipped(tmp_path):
    from xla_lint.config import build_settings
    from xla_lint.pipeline.run import lint_file
    from xla_lint.sources.target import Target

    text = notebook(
        cell("# torch_xla on a TPU\n", kind="markdown"), cell("%%bash\npip install torch_xla\n")
    )
    result = lint_file(
        Target("nb.ipynb", "doc"), build_settings(cwd=tmp_path, isolated=True), text=text
    )
    assert (result.skipped_reason, result.parsed, result.diagnostics) == (
        "no Python code cells",
        False,
        [],
    )


def test_folders_include_notebooks_and_fix_leaves_them_untouched(tmp_path):
    (tmp_path / "nb.ipynb").write_text(KAGGLE, encoding="utf-8")
    (tmp_path / "broken.ipynb").write_text('{"cells": [ torch_xla', encoding="utf-8")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "xla_lint",
            "--isolated",
            "--no-cache",
            "--fix",
            "--extend-select",
            "XLA303",
            ".",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "broken.ipynb:1:13: XLA000 cannot parse: not a notebook: invalid JSON" in proc.stdout
    assert sum(line.startswith("nb.ipynb:") for line in proc.stdout.splitlines()) == 3
    assert (tmp_path / "nb.ipynb").read_text(encoding="utf-8") == KAGGLE


def test_print_is_flagged_in_notebooks_only_inside_functions(tmp_path):
    """A cell's top level runs in the kernel (its output shows); a function may run in
    processes torch_xla.launch starts, whose buffered output is lost."""
    text = notebook(
        cell("import torch_xla\nprint('devices')\n"),
        cell("def _mp_fn(index):\n    print('ordinal', index)\n\ntorch_xla.launch(_mp_fn)\n"),
    )
    diagnostics = found(tmp_path, {"nb.ipynb": text}, select=["XLA004"])
    assert [(d.code, text.splitlines()[d.line - 1].strip()) for d in diagnostics] == [
        ("XLA004", "\"    print('ordinal', index)\\n\",")
    ]


def test_only_lines_that_start_a_statement_are_transformed():
    """`% x` continuing a bracket or a backslash line, and `!` inside a string spanning
    lines, are Python: masking them broke valid cells (XLA000)."""
    code = (
        'msg = ("value: %d"\n       % 3)\ntotal = 10 \\\n    % 3\ns = """\n!important\n?why\n"""\n'
        "!pip install x\n"
    )
    (block,) = notebook_blocks(notebook(cell(code)))
    assert block.code == code.replace("!pip install x", "get_ipython().system('pip install x')")


def test_a_vscode_shell_cell_in_a_python_notebook_is_not_python(tmp_path):
    shell = cell("git clone https://example.invalid/x.git\ncd x && pip install -e .\n")
    shell["metadata"] = {"vscode": {"languageId": "shellscript"}}
    text = notebook(shell, cell("import torch_xla.core.xla_model as xm\nxm.mark_step()\n"))
    got = [
        (d.code, d.line) for d in found(tmp_path, {"nb.ipynb": text}, select=["XLA000", "XLA302"])
    ]
    assert [code for code, _ in got] == [
        "XLA302"
    ]  # no XLA000 for the shell cell; the Python cell is linted


def test_verbose_names_each_skipped_doc_block_and_the_summary_counts_what_it_printed(tmp_path):
    """Needs FileResult.notes (engine.py) and _log_run printing them (cli.py)."""
    r_notebook = notebook(cell("library(torch_xla)\n"), language="R")
    proc = run_verbose(tmp_path, {"README.md": README_WITH_A_BROKEN_BLOCK, "r.ipynb": r_notebook})
    lines = proc.stderr.splitlines()
    assert lines[:3] == [
        "xla-lint: linted README.md",
        "xla-lint: README.md:5:13: Python block skipped, it does not parse: invalid syntax",
        "xla-lint: skipped r.ipynb (not a Python notebook (kernel: R))",
    ]
    assert lines[3].startswith(
        "xla-lint: 2 files read (1 linted, 1 skipped (1 not a Python notebook), "
        "1 doc block skipped) in "
    )
    assert proc.stdout.count("XLA302") == 1 and "XLA000" not in proc.stdout


# -- notebooks as IPython runs them: one program, one kernel process ------------------------

CASES_FLOW = Path("/work/shared/cases-flow")


@pytest.mark.parametrize(
    "case", ["c24-notebook-ipython-syntax", "c25-notebook-runtime-before-spawn"]
)
def test_shared_notebook_cases(tmp_path, case):
    """The shared cases, copied to tmp and linted as check_cases.py does (lines of the
    notebook file): c24 (`!` with a `\\` continuation, `%%time`, a cell indented as a whole
    are linted; a real SyntaxError stays XLA000), c25 (a runtime use in cell 1 before
    `xmp.spawn` in cell 4 is XLA018)."""
    folder = CASES_FLOW / case
    if not folder.is_dir():
        pytest.skip(f"{folder} is not here")
    shutil.copytree(folder, tmp_path / case)
    spec = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    result, _, _ = lint_tree(tmp_path / case, select=spec["select"], preview=True)
    got = {(d.path, d.line, d.code) for d in result.diagnostics if d.code in spec["select"]}
    assert got == {(d["path"], d["line"], d["code"]) for d in spec["diagnostics"]}


def test_a_runtime_use_in_an_earlier_cell_is_xla018_at_its_cell(tmp_path):
    text = notebook(
        cell("import torch_xla\nimport torch_xla.runtime as xr\n"),
        cell("# Setup", kind="markdown"),
        cell("n = xr.world_size()\n"),
        cell("def _mp_fn(index):\n    print(torch_xla.device(), flush=True)\n"),
        cell("torch_xla.launch(_mp_fn)\n"),
    )
    (d,) = found(tmp_path, {"nb.ipynb": text}, select=["XLA018"])
    assert (d.cell, d.cell_line, d.cell_column) == (3, 1, 5)
    assert text.splitlines()[d.line - 1].strip() == '"n = xr.world_size()\\n"'


@pytest.mark.parametrize(
    "cells",
    [
        # the launch runs first; what later cells do is after it
        ["torch_xla.launch(_mp_fn)\n", "print(torch_xla.device(), flush=True)\n"],
        # a %%writefile script runs in its own process (`!python train.py`), not the kernel's
        [
            "print(torch_xla.device(), flush=True)\n",
            "%%writefile train.py\nimport torch_xla\ndef _mp_fn(i):\n    pass\n"
            "torch_xla.launch(_mp_fn)\n",
            "!python train.py\n",
        ],
        # a %%bash cell is not Python
        ["print(torch_xla.device(), flush=True)\n", "%%bash\npython -c 'torch_xla.launch(f)'\n"],
    ],
)
def test_what_is_not_a_runtime_use_before_the_launch_in_the_kernel(tmp_path, cells):
    text = notebook(
        cell("import torch_xla\ndef _mp_fn(index):\n    pass\n"), *(cell(c) for c in cells)
    )
    assert found(tmp_path, {"nb.ipynb": text}, select=["XLA018"]) == []


def test_values_of_earlier_cells_reach_later_ones(tmp_path):
    """nprocs set in one cell and passed in another: spawn raises ValueError (XLA019)."""
    text = notebook(
        cell("import torch_xla.distributed.xla_multiprocessing as xmp\nNPROCS = 8\n"),
        cell("def _mp_fn(i):\n    pass\n"),
        cell("xmp.spawn(_mp_fn, nprocs=NPROCS)\n"),
    )
    (d,) = found(tmp_path, {"nb.ipynb": text}, select=["XLA019"])
    assert (d.code, d.cell, d.cell_line) == ("XLA019", 3, 1)


def test_a_cell_indented_as_a_whole_is_linted_at_its_columns(tmp_path):
    """IPython dedents it: no XLA000, and the column is the cell's (and the file's) own."""
    text = notebook(
        cell("import torch_xla.core.xla_model as xm\n"),
        cell("    x = 1\n    xm.mark_step()  # noqa: XLA302\n    xm.mark_step()\n"),
    )
    (d,) = found(tmp_path, {"nb.ipynb": text}, select=["XLA000", "XLA302"])
    assert (d.code, d.cell, d.cell_line, d.cell_column) == ("XLA302", 2, 3, 5)
    line = text.splitlines()[d.line - 1]
    assert line[d.column - 1 : d.end_column - 1] == "xm.mark_step()"


def test_a_cell_ipython_cannot_run_is_xla000_at_its_line_and_column(tmp_path):
    text = notebook(
        cell("import torch_xla.core.xla_model as xm\n"),
        cell("!pip install x \\\n  -q\nfor step in range(3)\n    xm.mark_step()\n"),
        cell("xm.mark_step()\n"),  # later cells still run (and are linted)
    )
    got = found(tmp_path, {"nb.ipynb": text}, select=["XLA000", "XLA302"])
    assert [(d.code, d.cell, d.cell_line, d.cell_column) for d in got] == [
        ("XLA000", 2, 3, 21),  # CPython's place: past `range(3)`, where the colon is missing
        ("XLA302", 3, 1, 1),
    ]


def test_a_script_cell_is_linted_alone_and_skipped_when_it_does_not_parse(tmp_path):
    text = notebook(
        cell("import torch_xla.core.xla_model as xm\n"),
        cell("%%writefile train.py\nimport torch_xla.core.xla_model as xm\nxm.mark_step()\n"),
        cell("%%writefile other.py\ndef f(:\n"),  # written, perhaps never run: not XLA000
        cell("%%writefile run.sh\nxm.mark_step()\n"),  # not a Python file
    )
    got = found(tmp_path, {"nb.ipynb": text}, select=["XLA000", "XLA302"])
    assert [(d.code, d.cell, d.cell_line) for d in got] == [("XLA302", 2, 3)]
    # its names are its own: without the import it is no torch_xla call
    text = notebook(
        cell("import torch_xla.core.xla_model as xm\n"),
        cell("%%writefile train.py\nxm.mark_step()\n"),
    )
    (tmp_path / "two").mkdir()
    assert found(tmp_path / "two", {"nb2.ipynb": text}, select=["XLA302"]) == []
    (tmp_path / "three").mkdir()
    proc = run_verbose(
        tmp_path / "three",
        {"nb3.ipynb": notebook(cell("import torch_xla\n"), cell("%%python\ndef f(:\n"))},
    )
    assert "nb3.ipynb:" in proc.stderr and "does not parse" in proc.stderr, proc.stderr


def test_text_output_names_the_cell(tmp_path):
    text = notebook(
        cell("# Title", kind="markdown"),
        cell("import torch_xla.core.xla_model as xm\n\n    \nxm.mark_step()\n"),
    )
    proc = run_verbose(tmp_path, {"nb.ipynb": text}, "--select", "XLA302")
    assert proc.stdout.splitlines()[0].startswith("nb.ipynb:cell 2:4:1: XLA302 "), proc.stdout


def test_a_cell_only_libcst_refuses_is_xla000_and_the_others_are_linted(tmp_path, monkeypatch):
    """Cells are checked with CPython's parser and LibCST parses their join once; when LibCST
    refuses the join (grammar it lacks), each cell is parsed to find which."""
    import xla_lint.linter as linter

    real = linter.parse_source

    def refusing(text, path, *args):
        if "LIBCST_REFUSES" in text:
            return linter.syntax_error(path, "LibCST refuses", 1, 1)
        return real(text, path, *args)

    monkeypatch.setattr(linter, "parse_source", refusing)
    text = notebook(
        cell("import torch_xla.core.xla_model as xm\n"),
        cell("LIBCST_REFUSES = 1\n"),
        cell("xm.mark_step()\n"),
    )
    got = found(tmp_path, {"nb.ipynb": text}, select=["XLA000", "XLA302"])
    assert [(d.code, d.cell) for d in got] == [("XLA000", 2), ("XLA302", 3)]


def test_a_function_no_launched_replica_reaches_runs_in_the_kernel(tmp_path):
    """SIIM-ISIC's notebook: `run_test` is called by a later cell after `xmp.spawn(_mp_fn)`,
    so its print is the kernel's (shown); `_mp_fn` and what it names run in the replicas."""
    text = notebook(
        cell(
            "import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
        ),
        cell("def log(msg):\n    print('replica', msg)\n\ndef train_fold(i):\n    log(i)\n"),
        cell(
            "def _mp_fn(index, flags):\n    for i in range(2):\n        train_fold(i)\n\nxmp.spawn(_mp_fn, args=({},))\n"
        ),
        cell("def run_test(model):\n    print('average:')\n    return model\n\nrun_test(None)\n"),
    )
    diagnostics = found(tmp_path, {"nb.ipynb": text}, select=["XLA004"])
    assert [(d.code, text.splitlines()[d.line - 1].strip()) for d in diagnostics] == [
        ("XLA004", "\"    print('replica', msg)\\n\",")
    ]
