"""Rule.report: the report policy every rule shares (program facts by name, SPMD branches,
code that does not run on XLA), asked of the FileContext and applied in one place."""

from __future__ import annotations

import libcst as cst
import pytest

from xla_lint.linter import lint_text
from xla_lint.program.facts import Fact
from xla_lint.rule import Rule


def _rule(requires):
    class CallsReported(Rule):
        code = "XLA999"
        name = "calls-reported"
        summary = message = "a call"

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value in ("f", "g"):
                self.report(node, requires=requires)

    return CallsReported


def test_a_misspelt_fact_is_an_error_not_a_silent_match():
    with pytest.raises(ValueError, match="'spdm' is not a valid Fact"):
        lint_text("import torch_xla\nf()\n", "a.py", [_rule([("spdm", True)])])


def test_facts_are_members_and_compare_as_their_names():
    diags, _ = lint_text("import torch_xla\nf()\n", "a.py", [_rule([("spmd", True)])])
    assert [d.requires for d in diags] == [((Fact.SPMD, True),)]
    assert diags[0].requires == (("spmd", True),)


def test_an_is_spmd_branch_answers_the_spmd_fact():
    code = (
        "import torch_xla\nimport torch_xla.runtime as xr\n"
        "if xr.is_spmd():\n    f()\nelse:\n    g()\n"
    )
    diags, _ = lint_text(code, "a.py", [_rule([(Fact.SPMD, True), (Fact.SHARDS, True)])])
    # f() runs in SPMD: the fact is answered and dropped; g() runs without it: no finding.
    assert [(d.line, d.requires) for d in diags] == [(4, ((Fact.SHARDS, True),))]


def test_code_for_another_platform_is_not_reported():
    code = "import torch_xla\nif torch.cuda.is_available():\n    f()\nelse:\n    g()\n"
    diags, _ = lint_text(code, "a.py", [_rule(())])
    assert [d.line for d in diags] == [5]
