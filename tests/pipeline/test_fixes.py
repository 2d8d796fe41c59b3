"""Fixes: imports added without LibCST rewriting the rest of the file, and edits only
where the text is the code the rule saw."""

from __future__ import annotations

import libcst as cst

from xla_lint.analysis import positions
from xla_lint.linter import lint_text
from xla_lint.pipeline.fixes import add_imports
from xla_lint.rules import all_rules

XLA302 = [r for r in all_rules() if r.code == "XLA302"]


def test_import_added_to_a_lone_cr_file_keeps_every_other_byte():
    text = "import torch_xla.core.xla_model as xm\rx = 1\r"
    assert cst.parse_module(text).code != text  # LibCST alone would drop the last \r
    assert (
        add_imports(text, [("torch_xla", None)])
        == "import torch_xla.core.xla_model as xm\rimport torch_xla\r\rx = 1\r"
    )


def test_import_merged_into_an_existing_line_is_written_by_libcst():
    text = "from torch_xla.distributed.spmd import Mesh\nx = 1\n"
    assert add_imports(text, [("torch_xla.distributed.spmd", "HybridMesh")]) == (
        "from torch_xla.distributed.spmd import HybridMesh, Mesh\nx = 1\n"
    )


def test_import_that_would_rewrite_a_line_libcst_did_not_reproduce_is_refused():
    # The form feed before `from` is lost by LibCST; merging into that line would lose it.
    text = "import os\n\x0cfrom torch_xla.distributed.spmd import Mesh\nx = 1\n"
    assert add_imports(text, [("torch_xla.distributed.spmd", "HybridMesh")]) is None


def test_a_fix_is_kept_only_where_the_text_is_the_reported_code(monkeypatch):
    text = "import torch_xla.core.xla_model as xm\nxm.mark_step()\n"
    diagnostics, _ = lint_text(text, "t.py", XLA302)
    assert [d.fix is not None for d in diagnostics] == [True]

    real = positions.locate

    def one_column_off(tree, syntax, wanted):  # as when LibCST dropped a character
        found = dict(real(tree, syntax, wanted))
        for node, r in found.items():
            found[node] = positions.CodeRange(
                positions.CodePosition(r.start.line, r.start.column + 1),
                positions.CodePosition(r.end.line, r.end.column + 1),
            )
        return found

    monkeypatch.setattr(positions, "locate", one_column_off)
    diagnostics, _ = lint_text(text, "t.py", XLA302)
    assert [(d.code, d.line, d.fix) for d in diagnostics] == [("XLA302", 2, None)]


def test_fixes_use_an_existing_alias_of_torch_xla_instead_of_adding_an_import(tmp_path):
    from helpers import fix_text, write_tree

    src = (
        "import torch_xla as tx\nimport torch_xla.core.xla_model as xm\n"
        "dev = xm.xla_device()\nxm.mark_step()\nxm.mark_step()\n"
    )
    write_tree(tmp_path, {"a.py": src})
    assert fix_text(tmp_path, "a.py", ["XLA301", "XLA302"]) == (
        "import torch_xla as tx\nimport torch_xla.core.xla_model as xm\n"
        "dev = tx.device()\ntx.sync()\ntx.sync()\n"
    )
