"""XLA032 rank-function-not-called: ``if xm.is_master_ordinal:``, a rank or world-size function
of torch_xla tested or compared without being called."""

from __future__ import annotations

import libcst as cst

from ...analysis import apis
from ...analysis.ranks import RANK_APIS
from ...diagnostics import Severity
from ...rule import Invalid, PendingFix, Replacement, Rule, Valid

# torch_xla functions whose result programs test: the ranks and sizes (analysis/ranks.py) and
# `xr.is_spmd`, `xr.host_index`. All are plain functions in torch_xla 2.9.0 (core/xla_model.py,
# runtime.py), so the name alone is a function object; `xm.get_ordinal` and `xm.xrt_world_size`
# are gone there (XLA013: reading the name raises AttributeError).
FUNCTIONS: frozenset[str] = frozenset(
    {name for name in RANK_APIS if name.startswith("torch_xla")}
    - {f"{apis.XM}.get_ordinal", f"{apis.XM}.xrt_world_size"}
    | {f"{apis.XR}.is_spmd", f"{apis.XR}.host_index"}
)

_HEAD = "import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"


class RankFunctionNotCalled(Rule):
    code = "XLA032"
    name = "rank-function-not-called"
    summary = (
        "A torch_xla rank or mode function tested without being called: `if xm.is_master_ordinal:`."
    )
    message = "`{name}` without `()` is the function itself: {consequence}; call it: `{name}()`"
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags a torch_xla function that tells a replica's identity or the mode,
`xm.is_master_ordinal`, `xm.get_local_ordinal`, `xr.global_ordinal`, `xr.local_ordinal`,
`xr.process_index`, `xr.world_size`, `xr.local_process_count`, `xr.process_count`,
`xr.host_index`, `xr.is_spmd` (through any import spelling; `xm.get_ordinal` and
`xm.xrt_world_size` are gone in 2.9.0: XLA013), used without being called where its value is
tested: the test of an `if`, `while`, `assert` or conditional expression, an operand of
`not`/`and`/`or`, or a side of `==`, `!=`, `is`, `is not`.

## Why is this bad
In torch_xla 2.9.0 these are plain functions (`torch_xla/core/xla_model.py`,
`torch_xla/runtime.py`). A function object is always true, and never equal to `True`, `0`
or any number: `if xm.is_master_ordinal:` runs its branch on every replica (every replica
writes the checkpoint, logs, or enters a master-only collective), and
`xm.is_master_ordinal() == True` written as `xm.is_master_ordinal == True` never runs it (the
master's summary writer is never made). Python raises nothing; the program silently does
something else on every replica.

## Example
```python
if xm.is_master_ordinal:
    writer.add_scalar("loss", loss.item(), step)
```

## Use instead
```python
if xm.is_master_ordinal():
    writer.add_scalar("loss", loss.item(), step)
```

## References
- torch_xla 2.9.0 `torch_xla/core/xla_model.py` (`is_master_ordinal`), `torch_xla/runtime.py`
  (`global_ordinal`, `world_size`, `is_spmd`)
"""
    valid = (
        Valid(_HEAD + "if xm.is_master_ordinal():\n    print('m', flush=True)\n"),
        Valid(
            _HEAD + "rank = xr.global_ordinal\nprint(rank(), flush=True)\n"
        ),  # kept to call later
        Valid(_HEAD + "fn = xm.is_master_ordinal if local else other\n"),  # a value, not a test
        Valid(
            _HEAD + "class T:\n    is_master_ordinal = True\nif T.is_master_ordinal:\n    pass\n"
        ),
        Valid("import torch\nif torch.distributed.get_rank:\n    pass\n"),  # not torch_xla's
        Valid(_HEAD + "if hasattr(xr, 'is_spmd') and xr.is_spmd():\n    pass\n"),
    )
    invalid = (
        Invalid(
            _HEAD + "if xm.is_master_ordinal:\n    save()\n",
            (3,),
            fixed=_HEAD + "if xm.is_master_ordinal():\n    save()\n",
        ),
        # Kaggle SIIM-ISIC: `== True` of the function is never true
        Invalid(
            _HEAD + "def train(log):\n    if xm.is_master_ordinal == True and log == True:\n"
            "        writer = make_writer()\n",
            (4,),
            fixed=_HEAD
            + "def train(log):\n    if xm.is_master_ordinal() == True and log == True:\n"
            "        writer = make_writer()\n",
        ),
        Invalid(
            "from torch_xla import runtime as R\nfrom torch_xla.runtime import global_ordinal\n"
            "x = 1 if not R.is_spmd else 2\nassert global_ordinal != 0\nwhile R.world_size:\n    break\n",
            (3, 4, 5),
            fixed="from torch_xla import runtime as R\nfrom torch_xla.runtime import global_ordinal\n"
            "x = 1 if not R.is_spmd() else 2\nassert global_ordinal() != 0\nwhile R.world_size():\n"
            "    break\n",
        ),
    )

    def visit_If(self, node: cst.If) -> None:
        self._test(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._test(node.test)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._test(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._test(node.test)

    def _test(self, test: cst.BaseExpression) -> None:
        """Check a tested expression: itself, the operands of ``not``/``and``/``or`` in it, and
        the sides of its equality and identity comparisons."""
        kind = type(test)
        if kind is cst.UnaryOperation and isinstance(test.operator, cst.Not):  # type: ignore[attr-defined]
            self._test(test.expression)  # type: ignore[attr-defined]
        elif kind is cst.BooleanOperation:
            self._test(test.left)  # type: ignore[attr-defined]
            self._test(test.right)  # type: ignore[attr-defined]
        elif kind is cst.Comparison:
            comparisons = test.comparisons  # type: ignore[attr-defined]
            if all(
                isinstance(c.operator, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot))
                for c in comparisons
            ):
                for side in (test.left, *(c.comparator for c in comparisons)):  # type: ignore[attr-defined]
                    self._check(side, compared=True)
        else:
            self._check(test, compared=False)

    def _check(self, node: cst.BaseExpression, *, compared: bool) -> None:
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return
        names = self.ctx.qnames(node)
        found = sorted(names & FUNCTIONS)
        if not found or len(names) != len(found):
            return  # not (only) one of torch_xla's functions: a name bound elsewhere too
        written = " ".join(self.ctx.module.code_for_node(node).split())
        consequence = (
            "it equals no value, so this comparison has the same result on every replica"
            if compared
            else "a function is always true, so this branch runs on every replica"
        )
        call = cst.Call(func=node.with_changes(lpar=[], rpar=[]))
        if getattr(node, "lpar", None):
            call = call.with_changes(lpar=node.lpar, rpar=node.rpar)
        self.report(
            node,
            self.message.format(name=written, consequence=consequence),
            fix=PendingFix(f"call `{written}()`", [Replacement(node, call)]),
        )
