"""XLA033 spawn-fn-arity: the function given to ``xmp.spawn``/``torch_xla.launch`` cannot take
the process index followed by ``args``."""

from __future__ import annotations

import libcst as cst

from ...analysis import apis
from ...analysis.context import find_arg
from ...analysis.functions import LocalFunctions
from ...diagnostics import Severity
from ...rule import Invalid, Rule, Valid

_HEAD = "import torch_xla\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"


class SpawnFnArity(Rule):
    code = "XLA033"
    name = "spawn-fn-arity"
    summary = (
        "xmp.spawn/torch_xla.launch given a function that cannot take the process index and then "
        "each of `args`: every replica raises TypeError."
    )
    message = (
        "`{fn}` takes {takes}, but `{api}` calls it with {given} (the process index, then each "
        "of `args`): every replica raises TypeError; {fix}"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `xmp.spawn(fn, args=(...))` and `torch_xla.launch(fn, args=(...))` when `fn` is a
function or `lambda` of the same file whose parameters cannot take one positional argument more
than `args` holds: `def main():` spawned without `args`, `def _mp_fn(index):` given
`args=(cfg,)`, or a function whose required parameters outnumber them. Not flagged: a function
with `*args`, a decorated function, a `functools.partial`, a method, an imported function,
`args` that is not a tuple or list display (or holds a starred item), and a name bound more
than once.

## Why is this bad
In torch_xla 2.9.0 `xmp.spawn` wraps the function in `_SpawnFn`
(`torch_xla/_internal/pjrt.py`), whose `__call__` runs `fn(runtime.global_ordinal(), *args)`
in every process, with `nprocs=1` too; `torch_xla.launch` calls `xmp.spawn`, or, under
torchrun, `fn(LOCAL_RANK, *args)` (`torch_xla/torch_xla.py` `launch`). A function that takes
no index (`def main():`) or the wrong number of arguments raises `TypeError: main() takes 0
positional arguments but 1 was given` in every replica, after the runtime has started.

## Example
```python
import torch_xla.distributed.xla_multiprocessing as xmp

def main():
    train()

xmp.spawn(main)
```

## Use instead
```python
import torch_xla.distributed.xla_multiprocessing as xmp

def main(index):
    train()

xmp.spawn(main)
```

## References
- torch_xla 2.9.0 `torch_xla/_internal/pjrt.py` (`_SpawnFn`, `spawn`), `torch_xla/torch_xla.py`
  (`launch`)
"""
    valid = (
        Valid(_HEAD + "def _mp_fn(index, cfg):\n    pass\nxmp.spawn(_mp_fn, args=(1,))\n"),
        Valid(
            _HEAD + "def _mp_fn(index, cfg=None, *, debug=False):\n    pass\nxmp.spawn(_mp_fn)\n"
        ),
        Valid(_HEAD + "def _mp_fn(*a):\n    pass\ntorch_xla.launch(_mp_fn, args=(1, 2))\n"),
        Valid(_HEAD + "xmp.spawn(lambda index, cfg: None, args=(cfg,))\n"),
        # Not seen: decorated, args not a display, starred args, a name bound twice.
        Valid(
            _HEAD + "import functools\n@functools.wraps(f)\ndef main():\n    pass\n"
            "xmp.spawn(main)\n"
        ),
        Valid(_HEAD + "def _mp_fn(index):\n    pass\nxmp.spawn(_mp_fn, args=ARGS)\n"),
        Valid(_HEAD + "def _mp_fn(index):\n    pass\nxmp.spawn(_mp_fn, args=(*rest,))\n"),
        Valid(
            _HEAD + "if fast:\n    def run(i):\n        pass\nelse:\n    def run(i, c):\n"
            "        pass\nxmp.spawn(run, args=(1,))\n"
        ),
        Valid(_HEAD + "from train import main\nxmp.spawn(main)\n"),
        Valid("import torch.multiprocessing as mp\ndef main():\n    pass\nmp.spawn(main)\n"),
    )
    invalid = (
        # unseen7 Waifu4x: the spawn target takes no index.
        Invalid(_HEAD + "def main():\n    train()\nxmp.spawn(main, nprocs=1)\n", (5,)),
        Invalid(_HEAD + "def _mp_fn(index):\n    pass\nxmp.spawn(_mp_fn, args=(cfg,))\n", (5,)),
        Invalid(
            _HEAD + "def _mp_fn(index, a, b):\n    pass\n"
            "def run():\n    torch_xla.launch(_mp_fn, args=[1])\n",
            (6,),
        ),
        Invalid(_HEAD + "xmp.spawn(lambda: None)\n", (3,)),
    )

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        if ctx.is_call_to(node, apis.SPAWN):
            api = "xmp.spawn"
        elif ctx.is_call_to(node, apis.LAUNCH):
            api = "torch_xla.launch"
        else:
            return
        fn = find_arg(node, "fn", 0)
        if fn is None:
            return
        args = find_arg(node, "args", 1)
        if args is None:
            count = 0
        elif isinstance(args.value, (cst.Tuple, cst.List)):
            if any(type(e) is not cst.Element for e in args.value.elements):
                return  # a starred item: the count is not known
            count = len(args.value.elements)
        else:
            return
        params = self._parameters(fn.value)
        if params is None:
            return
        required, positional, star = params
        given = count + 1
        if star or required <= given <= positional:
            return
        written = " ".join(ctx.module.code_for_node(fn.value).split())
        if len(written) > 40:
            written = written[:37] + "..."
        if positional == required:
            takes = _count(positional, "positional argument")
        elif given < required:
            takes = f"at least {_count(required, 'positional argument')}"
        else:
            takes = f"at most {_count(positional, 'positional argument')}"
        fix = (
            "give it the index as its first parameter: `def f(index, ...)`"
            if positional < given
            else "pass every other argument in `args`"
        )
        self.report(
            node,
            self.message.format(
                fn=written, takes=takes, api=api, given=_count(given, "argument"), fix=fix
            ),
        )

    def _parameters(self, expr: cst.BaseExpression) -> tuple[int, int, bool] | None:
        """``(required positional, all positional, has *args)`` of the launched function: a
        ``lambda``, or a Name bound by exactly one undecorated ``def`` of this module
        (:meth:`~xla_lint.analysis.functions.LocalFunctions.named`); else None."""
        if type(expr) is cst.Lambda:
            return _shape(expr.params)
        if type(expr) is not cst.Name:
            return None
        found = LocalFunctions.of(self.ctx).named(expr, self.ctx.scope, once=True)
        if found is None or found.node.decorators or found.node.asynchronous is not None:
            return None
        return _shape(found.node.params)


def _shape(params: cst.Parameters) -> tuple[int, int, bool]:
    positional = [*params.posonly_params, *params.params]
    required = sum(1 for p in positional if p.default is None)
    return required, len(positional), isinstance(params.star_arg, cst.Param)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
