"""Rules about xla-lint's own comments.

XLA900 has no visitor: whether a ``# noqa`` silenced something is known only once every
file is read and the program facts are applied, so :func:`xla_lint.pipeline.run.finalize`
computes it (see :func:`xla_lint.pipeline.run.unused_noqa`). The class holds what every rule
holds: code, name, explanation and the examples the test suite runs.
"""

from __future__ import annotations

from ..diagnostics import Severity
from ..rule import Invalid, Rule, Valid


class UnusedNoqa(Rule):
    code = "XLA900"
    name = "unused-noqa"
    summary = "A `# noqa: XLA...` comment that silences nothing."
    message = "unused `noqa` directive"
    severity = Severity.WARNING
    default_enabled = False
    fixable = True
    examples_need = ("XLA001", "XLA004")
    explanation = """\
## What it does
Flags a `# noqa: CODE` comment naming an xla-lint code (`XLA...`) that silences no
diagnostic on its line. The message says why each code is unused:

- `unused`: the rule is enabled but reports nothing on this line;
- `unknown`: no rule has this code.

Codes of other tools (`# noqa: E501`) and bare `# noqa` comments are left alone, and so is
a directive naming `XLA900` itself. A code whose rule did not run on the file (not
selected, ignored there, a preview rule without `--preview`, a rule for another torch_xla
version) is never reported: only a rule that ran and found nothing on the line shows the
comment is stale, so `--fix --select XLA900` does not delete suppressions for the rest. A finding that a rule made but that the program facts
dropped (for example an SPMD-only finding in a program not seen to use SPMD) still counts as
silenced: the comment is needed when the file is linted with the rest of its program.
Like every rule, it reports only in files that mention `torch_xla` or `XLA_`. Off by
default: enable it with `--extend-select XLA900`.

The fix removes the directive, or only its unused codes when others remain
(`# noqa: XLA004, E501` becomes `# noqa: E501`).

## Why is this bad
A stale suppression hides the next real finding on that line: after the code changed, the
comment silences a diagnostic nobody has looked at. It also tells readers the line has a
problem that it no longer has.

## Example
```python
import torch_xla

print("step", step, flush=True)  # noqa: XLA004
```

## Use instead
```python
import torch_xla

print("step", step, flush=True)
```

## References
- https://docs.astral.sh/ruff/rules/unused-noqa/ (the same check in Ruff, RUF100)
"""
    valid = (
        Valid("import torch_xla\nx = 1  # noqa: E501\n"),
        Valid("import torch_xla\nx = 1  # noqa\n"),
        Valid("import torch_xla\nx = 1  # noqa: XLA900\n"),
        # XLA203 is not run with these examples: its suppression may be needed, never reported.
        Valid("import torch_xla\nfor batch in loader:\n    step(batch)  # noqa: XLA203\n"),
        Valid("x = 1  # noqa: XLA004 (a file that never names the library is not linted)\n"),
        Valid("import torch_xla\ns = '# noqa: XLA004'\n"),
    )
    invalid = (
        Invalid(
            "import torch_xla\nx = 1  # noqa: XLA004\n", (2,), fixed="import torch_xla\nx = 1\n"
        ),
        Invalid(
            "import torch_xla\nx = 1  # noqa: XLA004, E501\n",
            (2,),
            fixed="import torch_xla\nx = 1  # noqa: E501\n",
        ),
        Invalid(
            "import torch_xla\nx = 1  # noqa: XLA004 -- flushed elsewhere\n",
            (2,),
            fixed="import torch_xla\nx = 1  # -- flushed elsewhere\n",
        ),
        Invalid(
            "import torch_xla\nx = 1  # type: ignore  # noqa:XLA123\n",
            (2,),
            fixed="import torch_xla\nx = 1  # type: ignore\n",
        ),
        Invalid(
            "import torch_xla\n\ndef f():\n    # noqa: XLA001\n    return 1\n",
            (4,),
            fixed="import torch_xla\n\ndef f():\n\n    return 1\n",
        ),
    )
