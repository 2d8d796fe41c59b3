"""Jupyter notebooks: code cells linted as one program, placed on the lines of the .ipynb file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import lint_tree

from xla_lint.notebooks import notebook_blocks
from xla_lint.source import SourceError


def cell(source: str, kind: str = "code", outputs: list[str] | None = None) -> dict:
    """A cell as nbformat writes it: the source split into lines, each keeping its line end."""
    out = {"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True)}
    if kind == "code":
        out["execution_count"] = None
        out["outputs"] = [{"name": "stdout", "output_type": "stream", "text": outputs or []}]
    return out


def notebook(*cells: dict, language: str = "python") -> str:
    """Notebook JSON laid out as Jupyter saves it (indent 1, non-ASCII kept)."""
    data = {"cells": list(cells), "metadata": {"kernelspec": {"language": language, "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


KAGGLE = notebook(
    cell("# Training on a TPU VM\n", kind="markdown"),
    cell("!pip install torch_xla\n%env PJRT_DEVICE=TPU\nimport torch_xla.core.xla_model as xm\n"
         "import torch_xla.distributed.xla_multiprocessing as xmp\n",
         outputs=["def _mp_fn(index):\n"]),  # an output equal to the next cell's first line
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
    assert [code for code, _, _ in got] == ["XLA301", "XLA004", "XLA303"]  # names imported in cell 2 resolve in 3 and 4
    # Each position is the notebook file's line holding that code, at its column.
    for d, text in zip(diagnostics, ["xm.xla_device()", "print(", "xmp.spawn("]):
        assert file_lines[d.line - 1][d.column - 1:].startswith(text), (d, file_lines[d.line - 1])
    assert all(d.fix is None for d in diagnostics)  # notebooks are never rewritten


def test_ipython_syntax_is_masked_line_for_line():
    blocks = notebook_blocks(KAGGLE)
    assert [b.code for b in blocks] == [
        "pass\npass\nimport torch_xla.core.xla_model as xm\nimport torch_xla.distributed.xla_multiprocessing as xmp\n",
        "def _mp_fn(index):\n    device = xm.xla_device()\n    print('ordinal', index, \"é\")\n",
        "\nxmp.spawn(_mp_fn, args=())\n",
        "xm.mark_step()  # noqa: XLA302\n",
    ]


def test_a_cell_stored_as_one_string_is_reported_where_its_source_starts(tmp_path):
    text = json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                  "source": "import torch_xla.core.xla_model as xm\nx = 1\nxm.mark_step()\n"}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if '"source"' in t)
    (d,) = found(tmp_path, {"one.ipynb": text}, select=["XLA302"])
    assert (d.line, d.column) == (line, 1) and d.message.endswith("(cell 1, line 3)")
    # The same as compact JSON (one line): the top of the file, never a line past its end.
    (d,) = found(tmp_path, {"one.ipynb": json.dumps(json.loads(text))}, select=["XLA302"])
    assert (d.line, d.column, d.end_line) == (1, 1, 1) and d.message.endswith("(cell 1, line 3)")


def test_an_output_that_repeats_the_code_is_not_taken_for_it(tmp_path):
    """Jupyter sorts keys, so a cell's outputs come before its source in the file."""
    text = json.dumps({"cells": [cell("import torch_xla.core.xla_model as xm\nxm.mark_step()\n",
                                      outputs=["xm.mark_step()\n"])],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1, sort_keys=True)
    (d,) = found(tmp_path, {"sorted.ipynb": text}, select=["XLA302"])
    lines = text.splitlines()
    assert '"source"' in "".join(lines[:d.line - 1]) and lines[d.line - 1][d.column - 1:].startswith("xm.mark_step")


@pytest.mark.parametrize("ascii_only", [False, True])
def test_columns_count_escapes_as_written(tmp_path, ascii_only):
    code = "import torch_xla.core.xla_model as xm\ns = \"caf\u00e9 \\t \U0001F600\"; xm.mark_step()\n"
    text = json.dumps({"cells": [cell(code)], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
                      indent=1, ensure_ascii=ascii_only)
    (d,) = found(tmp_path, {"esc.ipynb": text}, select=["XLA302"])
    line = text.splitlines()[d.line - 1]
    assert line[d.column - 1:d.end_column - 1] == "xm.mark_step()"


@pytest.mark.parametrize("source", [
    "files = !ls\nxm.mark_step()\n", "xm.mark_step?\nxm.mark_step()\n", "env = %env\nxm.mark_step()\n",
    "a, b = !echo 1 2\nxm.mark_step()\n",
])
def test_more_ipython_syntax_is_masked(tmp_path, source):
    text = notebook(cell("import torch_xla.core.xla_model as xm\n"), cell(source))
    assert [d.code for d in found(tmp_path, {"nb.ipynb": text}, select=["XLA302", "XLA000"])] == ["XLA302"]


def test_a_cell_that_does_not_parse_is_reported(tmp_path):
    """Unlike a documentation snippet, a cell is code that runs: XLA000 at its line, the rest linted."""
    text = notebook(cell("import torch_xla.core.xla_model as xm\n"), cell("def f(:\n    pass\n"),
                    cell("xm.mark_step()\n"))
    diagnostics = found(tmp_path, {"nb.ipynb": text}, select=["XLA302", "XLA000"])
    assert [d.code for d in diagnostics] == ["XLA000", "XLA302"]
    assert text.splitlines()[diagnostics[0].line - 1].strip().startswith('"def f(:')


def test_other_kernels_give_no_blocks_and_broken_json_is_an_error():
    assert notebook_blocks(notebook(cell("xm.mark_step()\n"), language="R")) == []
    with pytest.raises(SourceError, match="invalid JSON"):
        notebook_blocks('{"cells": [')
    with pytest.raises(SourceError, match="no list of `cells`"):
        notebook_blocks('["torch_xla"]')
    with pytest.raises(SourceError, match="nbformat 3"):
        notebook_blocks('{"worksheets": [{"cells": []}], "nbformat": 3}')
    with pytest.raises(SourceError, match="nested too deeply"):
        notebook_blocks("[" * 100_000 + "]" * 100_000)


def test_folders_include_notebooks_and_fix_leaves_them_untouched(tmp_path):
    (tmp_path / "nb.ipynb").write_text(KAGGLE, encoding="utf-8")
    (tmp_path / "broken.ipynb").write_text('{"cells": [ torch_xla', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "xla_lint", "--isolated", "--no-cache", "--fix",
                           "--extend-select", "XLA303", "."],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "broken.ipynb:1:13: XLA000 cannot parse: not a notebook: invalid JSON" in proc.stdout
    assert sum(line.startswith("nb.ipynb:") for line in proc.stdout.splitlines()) == 3
    assert (tmp_path / "nb.ipynb").read_text(encoding="utf-8") == KAGGLE


def test_print_is_flagged_in_notebooks_only_inside_functions(tmp_path):
    """A cell's top level runs in the kernel (its output shows); a function may run in
    processes torch_xla.launch starts, whose buffered output is lost."""
    text = notebook(cell("import torch_xla\nprint('devices')\n"),
                    cell("def _mp_fn(index):\n    print('ordinal', index)\n\ntorch_xla.launch(_mp_fn)\n"))
    diagnostics = found(tmp_path, {"nb.ipynb": text}, select=["XLA004"])
    assert [(d.code, text.splitlines()[d.line - 1].strip()) for d in diagnostics] == [
        ("XLA004", '"    print(\'ordinal\', index)\\n",')]


def test_only_lines_that_start_a_statement_are_masked():
    """`% x` continuing a bracket or a backslash line, and `!` inside a string spanning
    lines, are Python: masking them broke valid cells (XLA000)."""
    code = ('msg = ("value: %d"\n       % 3)\ntotal = 10 \\\n    % 3\ns = """\n!important\n?why\n"""\n'
            "!pip install x\n")
    (block,) = notebook_blocks(notebook(cell(code)))
    assert block.code == code.replace("!pip install x", "pass")


def test_a_vscode_shell_cell_in_a_python_notebook_is_not_python(tmp_path):
    shell = cell("git clone https://example.invalid/x.git\ncd x && pip install -e .\n")
    shell["metadata"] = {"vscode": {"languageId": "shellscript"}}
    text = notebook(shell, cell("import torch_xla.core.xla_model as xm\nxm.mark_step()\n"))
    got = [(d.code, d.line) for d in found(tmp_path, {"nb.ipynb": text}, select=["XLA000", "XLA302"])]
    assert [code for code, _ in got] == ["XLA302"]  # no XLA000 for the shell cell; the Python cell is linted
