"""Output that users see (or do not see) from a running job."""

from __future__ import annotations

import libcst as cst

from ..analysis import apis
from ..analysis.context import find_arg, parse_expression
from ..diagnostics import Severity
from ..program.facts import Fact
from ..rule import Invalid, PendingFix, Replacement, Rule, Valid


class PrintWithoutFlush(Rule):
    code = "XLA004"
    name = "print-without-flush"
    summary = "print() without flush= in torch_xla code: the output may never show up."
    message = "`print` without `flush=True` in torch_xla code: the line may sit in a buffer and never appear"
    severity = Severity.WARNING
    fixable = True
    repl_quiet = True  # not run on `>>>` examples (xla_lint/linter.py, `repl_rules`)
    explanation = """\
## What it does
Flags `print(...)` calls without a `flush=` argument in modules that import torch_xla.
Calls that pass `**kwargs` are left alone (they may carry `flush`), and so are
prints to `sys.stderr`, which Python 3.9+ line-buffers even when redirected. A local function or
parameter named `print` is not the builtin and is not flagged. In a Jupyter notebook only
prints inside functions are flagged: at a cell's top level they run in the kernel, whose
output the notebook shows, while a function may run in processes that `torch_xla.launch`
or `xmp.spawn` start, whose output is lost the same way. Examples written as an
interactive session are not checked: `>>>` examples in docstrings, and Markdown or
reStructuredText code blocks whose lines start with `>>> ` (a `pycon` block): typed at a
prompt, each line's output shows at once.

A print followed, later in the same function (or module body), by `sys.stdout.flush()` is
written out there and is not flagged either.

## Why is this bad
On TPU VMs a training job's standard output is usually a pipe or a file (`nohup`,
`gcloud ... ssh --command`, `tee`, a job scheduler), so Python buffers it in blocks of
several kilobytes. A job that hangs at a collective, is killed by the watchdog or dies
inside the runtime's C++ code never flushes that buffer: the last lines you printed,
often the ones that say where it stopped, are lost. Multi-host SPMD makes this worse,
since one host's silence looks exactly like one host hanging.

## Example
```python
print(f"step {step} loss {loss.item():.4f}")
```

## Use instead
```python
print(f"step {step} loss {loss.item():.4f}", flush=True)
```
or run Python unbuffered (`python -u`, `PYTHONUNBUFFERED=1`) on every host, and use
`logging` with a handler that flushes. Wrap the training function in `try/except` that
prints the traceback with `flush=True` before re-raising. The fix adds `flush=True`.

## References
- https://docs.python.org/3/library/functions.html#print
- https://docs.python.org/3/using/cmdline.html#cmdoption-u
"""
    valid = (
        Valid("import torch_xla\nprint('x', flush=True)\n"),
        Valid("print('no torch_xla here')\n"),
        Valid("import torch_xla\nprint(*args, **kwargs)\n"),
        Valid("import sys\nimport torch_xla\nprint('warning', file=sys.stderr)\n"),
        Valid("import torch_xla\ndef log(print):\n    print('x')\n"),
        # flushed by hand after it, in the same function (a progress bar's idiom, seen in real code)
        Valid(
            "import sys\nimport torch_xla\ndef progress(n):\n    for i in range(n):\n"
            "        print('\\r%d' % i, end=' ')\n        sys.stdout.flush()\n"
        ),
    )
    invalid = (
        Invalid(  # a flush before the print, or in another function, writes nothing of it
            "import sys\nimport torch_xla\nsys.stdout.flush()\nprint('a')\n"
            "def f():\n    print('b')\ndef g():\n    sys.stdout.flush()\n",
            (4, 6),
            fixed="import sys\nimport torch_xla\nsys.stdout.flush()\nprint('a', flush=True)\n"
            "def f():\n    print('b', flush=True)\ndef g():\n    sys.stdout.flush()\n",
        ),
        Invalid(
            "import torch_xla\nprint('step', 1)\n",
            (2,),
            fixed="import torch_xla\nprint('step', 1, flush=True)\n",
        ),
        Invalid(
            "import torch_xla\nprint(\n    'step',\n    step\n)\n",
            (2,),
            fixed="import torch_xla\nprint(\n    'step',\n    step, flush=True\n)\n",
        ),
        Invalid(
            "import torch_xla\nprint('a',\n      'b')\n",
            (2,),
            fixed="import torch_xla\nprint('a',\n      'b', flush=True)\n",
        ),
        Invalid(
            "import torch_xla\nx = (print('a'))\n",
            (2,),
            fixed="import torch_xla\nx = (print('a', flush=True))\n",
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\nprint()\n",
            (2,),
            fixed="import torch_xla.core.xla_model as xm\nprint(flush=True)\n",
        ),
        Invalid(
            "import torch_xla\nprint('a', file=log,)\n",
            (2,),
            fixed="import torch_xla\nprint('a', file=log, flush=True,)\n",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.imports_torch_xla:
            return
        if find_arg(node, "flush") is not None or any(a.star == "**" for a in node.args):
            return
        target = find_arg(node, "file")
        if target is not None and "sys.stderr" in self.ctx.qnames(target.value):
            return  # stderr is line-buffered even when redirected (Python 3.9+)
        if not self.ctx.is_call_to(node, apis.PRINT):
            return
        function = next(iter(self.ctx.enclosing(cst.FunctionDef)), None)
        if self.ctx.notebook and function is None:
            return  # a cell's top level runs in the kernel, whose output the notebook shows
        if _flushed_after(self.ctx, node, function):
            return  # `sys.stdout.flush()` follows in the same function: the line is written
        # Silent in test files (pytest captures output) and in programs whose output is
        # unbuffered (`python -u`, PYTHONUNBUFFERED, stdout reconfigured): xla_lint/program/model.py.
        self.report(
            node,
            fix=PendingFix(
                "add `flush=True`", [Replacement(node, add_keyword(node, "flush", "True"))]
            ),
            requires=[(Fact.UNBUFFERED, False), (Fact.TEST, False)],
        )


_FLUSH_TYPES = frozenset({cst.Call, cst.FunctionDef})


def _flushed_after(ctx, call: cst.Call, function: cst.FunctionDef | None) -> bool:
    """True when a ``sys.stdout.flush()`` call comes after ``call`` in the body of ``function``
    (the module, for None), outside nested functions of its own: what the print wrote is then
    written out there, as ``flush=True`` would have."""
    where = ctx.memo("xla_lint.rules.output.flushes", lambda: _flushes(ctx))
    index, flushes = where
    i = index.get(id(call))
    if i is None:
        return False
    owner = id(function) if function is not None else None
    return any(j > i and o == owner for j, o in flushes)


def _flushes(ctx) -> tuple[dict[int, int], list[tuple[int, int | None]]]:
    """The flat index of every call, and each ``sys.stdout.flush()`` call's index with the id of
    the function whose body it is directly in (None: the module)."""
    flat = ctx.flat
    index: dict[int, int] = {}
    flushes: list[tuple[int, int | None]] = []
    functions: list[tuple[int, int]] = []  # (end of subtree, id) of the open functions
    for i in flat.of_types(_FLUSH_TYPES):
        while functions and functions[-1][0] <= i:
            functions.pop()
        node = flat.nodes[i]
        if type(node) is cst.FunctionDef:
            functions.append((flat.ends[i], id(node)))
            continue
        index[id(node)] = i
        assert isinstance(node, cst.Call)
        if "sys.stdout.flush" in ctx.qnames(node.func):
            flushes.append((i, functions[-1][1] if functions else None))
    return index, flushes


def add_keyword(call: cst.Call, keyword: str, value: str) -> cst.Call:
    """``call`` with ``keyword=value`` appended, keeping a trailing comma where there was one."""
    new = cst.Arg(
        keyword=cst.Name(keyword),
        value=parse_expression(value),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    args = list(call.args)
    if args:
        last = args[-1]
        # The new argument goes right after the last one's value: it takes over the last
        # argument's trailing comma and the whitespace (a newline before `)`) that followed it.
        new = new.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
        args[-1] = last.with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
    return call.with_changes(args=[*args, new])
