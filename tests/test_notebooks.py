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
    diagnostics = found(tmp_path, {"train.ipynb": KAGGLE})
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


def test_a_cell_stored_as_one_string_counts_lines_from_its_string():
    text = json.dumps({"cells": [{"cell_type": "code", "source": "import torch_xla\nx = 1\n", "metadata": {},
                                  "outputs": [], "execution_count": None}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if '"source"' in t)
    (block,) = notebook_blocks(text)
    assert (block.code, block.line_offset, block.indent) == ("import torch_xla\nx = 1\n", line - 1, 0)


def test_other_kernels_give_no_blocks_and_broken_json_is_an_error():
    assert notebook_blocks(notebook(cell("xm.mark_step()\n"), language="R")) == []
    with pytest.raises(SourceError, match="invalid JSON"):
        notebook_blocks('{"cells": [')
    with pytest.raises(SourceError, match="no list of `cells`"):
        notebook_blocks('["torch_xla"]')


def test_folders_include_notebooks_and_fix_leaves_them_untouched(tmp_path):
    (tmp_path / "nb.ipynb").write_text(KAGGLE, encoding="utf-8")
    (tmp_path / "broken.ipynb").write_text('{"cells": [ torch_xla', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "xla_lint", "--isolated", "--no-cache", "--fix", "."],
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
