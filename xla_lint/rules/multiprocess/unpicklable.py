"""XLA029 spawn-unpicklable: a lambda, nested function or multiprocessing primitive given to the launch."""

from __future__ import annotations

import libcst as cst

from ...analysis import apis
from ...analysis.context import find_arg, literal_string
from ...analysis.values import (
    Known,
    Value,
    definition,
    parts_of,
    value_of,
)
from ...analysis.walk import iter_nodes
from ...diagnostics import OptionCheck, Severity
from ...rule import Invalid, Rule, Valid
from .common import _is_one

# Multiprocessing objects that refuse to be pickled ("... should only be shared between processes
# through inheritance": multiprocessing/synchronize.py, queues.py, sharedctypes.py), by factory name.
# A Pipe's connections and a Manager's proxies pickle; measured with torch 2.9.0's multiprocessing.
_INHERIT_ONLY = frozenset(
    {
        "Queue",
        "SimpleQueue",
        "JoinableQueue",
        "Lock",
        "RLock",
        "Event",
        "Condition",
        "Semaphore",
        "BoundedSemaphore",
        "Barrier",
        "Value",
        "Array",
    }
)


_MP_ROOTS = ("multiprocessing", "torch.multiprocessing")


class SpawnUnpicklable(Rule):
    code = "XLA029"
    name = "spawn-unpicklable"
    summary = (
        "xmp.spawn/torch_xla.launch given a lambda, a nested function or a multiprocessing "
        "Queue/Lock/Event: they cannot be pickled to the worker processes."
    )
    message = (
        "{what} cannot be pickled, and `{api}` pickles its function and `args` to send them to "
        "the worker processes: it raises {error} before training starts; {fix}"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `xmp.spawn(fn, args=...)` and `torch_xla.launch(fn, args=...)` when `fn` is a
`lambda`, a function defined inside another function (or a name assigned one, or a
`functools.partial` of one), a function defined only under `if __name__ == "__main__":`
(unless `xmp.spawn(..., start_method="fork")`: a forked worker's `__main__` is the parent's
and holds it; a spawned one imports the script as `__mp_main__`, where the block does not
run), or when an element of `args` is a `multiprocessing` /
`torch.multiprocessing` `Queue`, `SimpleQueue`, `JoinableQueue`, `Lock`, `RLock`, `Event`,
`Condition`, `Semaphore`, `BoundedSemaphore`, `Barrier`, `Value` or `Array` (made there, or
a name assigned one, also through `mp.get_context(...)`). Not flagged: `xmp.spawn(...,
nprocs=1)` and `torch_xla.launch(..., debug_single_process=True)`, which run `fn` in the
calling process; a `Manager()`'s queues and a `Pipe()`'s connections, which pickle.

`xmp.spawn` is flagged when `nprocs` is absent or `None`, or when the code fixes it to
another value (a literal, a module constant, an argparse default: `xla_lint/analysis/values.py`;
then `xmp.spawn` raises XLA019's ValueError first, and this error once `nprocs` is dropped).
A count the code cannot fix (an environment variable, a function parameter, an option
without a default) is not flagged: a runner that sets it to 1 runs `fn` in place (a test
suite's `nprocs=int(os.environ["NUM_TPU_WORKERS"])`); an option is flagged when a launch of
the program in the tree passes it another value (`python train.py --num_cores 8`).

## Why is this bad
In torch_xla 2.9.0, `torch_xla.launch` calls `xmp.spawn` (`nprocs=None`, or 1 with
`debug_single_process=True`), which calls `torch_xla/_internal/pjrt.py` `spawn`: with
`nprocs == 1` it calls the function in the calling process (`_run_singleprocess`), nothing
pickled; with any other number it raises ValueError; with `None` it calls
`run_multiprocess`: the function and its `args` are wrapped in `_SpawnFn` ("Pickle-able
wrapper") and handed to a `concurrent.futures.ProcessPoolExecutor`, which pickles every task
to send it to a worker process, whatever the start method (`fork` too), and on every device
type (on CPU too, with one worker). A local function or a lambda is pickled by name and cannot be found
(`AttributeError: Can't pickle local object 'main.<locals>.nested'`); a multiprocessing
synchronisation object refuses (`RuntimeError: Queue objects should only be shared between
processes through inheritance`). Measured with torch_xla 2.9.0 on CPU for each of them;
`xmp.spawn(..., nprocs=1)` (`_run_singleprocess`) and a `Manager().Queue()` run. Under
`torchrun`, `torch_xla.launch` calls `fn` directly and nothing is pickled: a program
started only that way does not raise.

## Example
```python
import torch.multiprocessing as mp
import torch_xla

def main():
    results = mp.Queue()
    def _mp_fn(index, results):
        results.put(train(index))
    torch_xla.launch(_mp_fn, args=(results,))
```

## Use instead
```python
import torch.multiprocessing as mp
import torch_xla

def _mp_fn(index, results):          # at module level: pickled by name
    results.put(train(index))

def main():
    results = mp.Manager().Queue()   # a proxy, which pickles
    torch_xla.launch(_mp_fn, args=(results,))
```

## References
- torch_xla 2.9.0 `torch_xla/_internal/pjrt.py` (`spawn`, `_run_singleprocess`,
  `run_multiprocess`, `_SpawnFn`), `torch_xla/torch_xla.py` (`launch`)
- https://docs.python.org/3/library/multiprocessing.html#programming-guidelines ("Explicitly
  pass resources to child processes", picklability)
"""
    valid = (
        # Defined under the main guard, but the workers are forked (unseen7 neural-mechanics).
        Valid(
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "if __name__ == '__main__':\n    if ARGS.tpu:\n"
            "        def _mp_fn(rank, args):\n            main(args)\n"
            "        xmp.spawn(_mp_fn, args=(ARGS,), start_method='fork')\n"
        ),
        Valid(
            "import torch_xla\nimport torch.multiprocessing as mp\n"
            "def _mp_fn(index, q):\n    q.put(index)\n"
            "if __name__ == '__main__':\n    q = mp.Manager().Queue()\n"
            "    torch_xla.launch(_mp_fn, args=(q,))\n"
        ),
        Valid(
            "import torch_xla\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def main():\n    def nested(index):\n        pass\n"
            "    xmp.spawn(nested, nprocs=1)\n"
            "    torch_xla.launch(lambda i: None, debug_single_process=True)\n"
        ),
        Valid(
            "import multiprocessing\nimport torch_xla\n"
            "def _mp_fn(index, conn):\n    conn.send(index)\n"
            "def main():\n    parent, child = multiprocessing.Pipe()\n"
            "    torch_xla.launch(_mp_fn, args=(child,))\n"
        ),
        # A module-level function, a method of an instance, a partial of a module-level function.
        Valid(
            "import functools\nimport torch_xla\n"
            "def _mp_fn(index, cfg):\n    pass\n"
            "class Launcher:\n    def run(self, index):\n        pass\n"
            "    def go(self):\n        torch_xla.launch(self.run)\n"
            "def main(cfg):\n    torch_xla.launch(functools.partial(_mp_fn, cfg=cfg))\n"
            "    torch_xla.launch(_mp_fn, args=(cfg,))\n"
        ),
        # A count the code does not fix: pytorch/ignite tests/ignite/conftest.py reads it from
        # NUM_TPU_WORKERS, which its runner sets to 1 (then `fn` runs in place); a parameter;
        # an option without a default that no launch in the tree passes.
        Valid(
            "import os\nimport argparse\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def xla_worker(index, fn):\n    fn()\n"
            "def distributed(fn):\n    def xla_worker(index, fn):\n        fn()\n"
            "    xmp.spawn(xla_worker, args=(fn,), nprocs=int(os.environ['NUM_TPU_WORKERS']))\n"
            "def run(n):\n    xmp.spawn(lambda i: None, nprocs=n)\n"
            "parser = argparse.ArgumentParser()\nparser.add_argument('--nprocs', type=int)\n"
            "args = parser.parse_args()\nxmp.spawn(lambda i: None, nprocs=args.nprocs)\n"
        ),
        # torch's own mp.spawn is not torch_xla's (it starts processes itself, by inheritance).
        Valid(
            "import torch.multiprocessing as mp\nimport torch_xla\n"
            "def main():\n    q = mp.Queue()\n    mp.spawn(lambda i, q: None, args=(q,), nprocs=2)\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch.multiprocessing as mp\nimport torch_xla\n"
            "def main():\n    results = mp.Queue()\n"
            "    def _mp_fn(index, results):\n        results.put(index)\n"
            "    torch_xla.launch(_mp_fn, args=(results,))\n",
            (7, 7),
        ),
        # nreimers/se-pytorch-xla train_many_data_files_v1.py: a Queue through xmp.spawn's args
        Invalid(
            "import multiprocessing as mp\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def _mp_fn(index, queue):\n    pass\n"
            "if __name__ == '__main__':\n    ctx = mp.get_context('spawn')\n"
            "    xmp.spawn(_mp_fn, args=(ctx.Queue(),))\n"
            "    lock = mp.Lock()\n    xmp.spawn(_mp_fn, (lock,))\n",
            (7, 9),
        ),
        Invalid("import torch_xla\ntorch_xla.launch(lambda index: print(index))\n", (2,)),
        # A function defined under the main guard, a queue inside a dict of args.
        Invalid(
            "import torch.multiprocessing as mp\nimport torch_xla\n"
            "if __name__ == '__main__':\n    def _mp_fn(index, box):\n        pass\n"
            "    torch_xla.launch(_mp_fn, args=({'queue': mp.Queue()},))\n",
            (6, 6),
        ),
        # The same function under `start_method="fork"` is in the forked workers' __main__: no
        # error from it (unseen7 neural-mechanics); a closure still fails, fork or not.
        Invalid(
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def main(args):\n    def nested(index):\n        pass\n"
            "    xmp.spawn(nested, args=(), start_method='fork')\n",
            (5,),
        ),
        # nreimers/se-pytorch-xla train_many_data_files_v1.py: a list of queues
        Invalid(
            "import torch.multiprocessing as mp\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def main(files):\n    queues = []\n    for f in files:\n"
            "        queue = mp.Queue(maxsize=8)\n        queues.append(queue)\n"
            "    xmp.spawn(train, args=(files, queues), start_method='fork')\n",
            (8,),
        ),
        Invalid(
            "import functools\nimport torch_xla\n"
            "def main(cfg):\n    def train(index, cfg):\n        pass\n"
            "    fn = functools.partial(train, cfg=cfg)\n    torch_xla.launch(fn)\n",
            (7,),
        ),
        # nprocs=None, a count that is None on one branch, a constant other than 1 (ValueError
        # first, then this), an argparse default of 8.
        Invalid(
            "import argparse\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "NPROCS = 8\n"
            "def main(debug):\n    xmp.spawn(lambda i: None, nprocs=None)\n"
            "    n = 1 if debug else None\n    xmp.spawn(lambda i: None, nprocs=n)\n"
            "    xmp.spawn(lambda i: None, nprocs=NPROCS)\n"
            "parser = argparse.ArgumentParser()\nparser.add_argument('--num_cores', type=int, default=8)\n"
            "args = parser.parse_args()\nxmp.spawn(lambda i: None, nprocs=args.num_cores)\n",
            (5, 7, 8, 12),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        first = ""  # what raises before the pickling error
        check: tuple[tuple[str, str | None], str] | None = None  # nprocs read from an option
        if ctx.is_call_to(node, apis.LAUNCH):
            api = "torch_xla.launch"
            single = find_arg(node, "debug_single_process", 3)
            if single is not None and _is_true_literal(single.value):
                return
        elif ctx.is_call_to(node, apis.SPAWN):
            api = "xmp.spawn"
            nprocs = find_arg(node, "nprocs", 2)
            if nprocs is not None:
                count_value = value_of(ctx, nprocs.value)
                count = _spawn_count(ctx, count_value)
                text = " ".join(ctx.module.code_for_node(nprocs.value).split())
                if count == _RAISES:
                    first = (
                        f" (`nprocs={text}` makes `xmp.spawn` raise ValueError even before that, "
                        "XLA019; this error comes once `nprocs` is dropped)"
                    )
                elif count != _MANY:
                    # One process (nprocs == 1 runs `fn` in place), or a count the code does not
                    # fix (an environment variable, a parameter): reported only when a launch of
                    # the program passes the option another value.
                    option = getattr(count_value, "option", None)
                    if option is None:
                        return
                    check = (option, text)
        else:
            return
        fn = find_arg(node, "fn", 0)
        method = find_arg(node, "start_method", 5) if api == "xmp.spawn" else None
        fork = method is not None and literal_string(method.value) == "fork"
        if fn is not None:
            what = self._unpicklable_function(fn.value, 0, fork)
            if what is not None:
                self._report(
                    node,
                    self.message.format(
                        what=what,
                        api=api,
                        error="a pickling error (`Can't pickle local object`, `Can't get "
                        "attribute ... on <module '__mp_main__'>`)",
                        fix="define the function at module level, outside `if __name__ == "
                        "'__main__':`",
                    )
                    + first,
                    check,
                )
        args = find_arg(node, "args", 1)
        if args is None:
            return
        value = args.value
        if type(value) is cst.Name:
            found = definition(ctx, value)
            value = found[0] if found is not None else value
        if not isinstance(value, (cst.Tuple, cst.List)):
            return
        for item in _contents(value):
            kind = self._inherit_only(item) or self._collects_inherit_only(item)
            if kind is not None:
                self._report(
                    node,
                    self.message.format(
                        what=f"a multiprocessing `{kind}`",
                        api=api,
                        error="`RuntimeError: ... objects should only be shared between "
                        "processes through inheritance`",
                        fix="pass a `Manager().Queue()`-style proxy (`mp.Manager()` makes "
                        "queues, locks and events that pickle), or create it in each process",
                    )
                    + first,
                    check,
                )

    def _report(
        self,
        node: cst.Call,
        message: str,
        check: tuple[tuple[str, str | None], str] | None,
    ) -> None:
        """Report ``message`` at ``node``; with ``check`` (an ``nprocs`` read from an argparse
        option whose own value runs one process or is unknown: ``((spelling, type), text)``),
        only when a launch of the program passes the option a value other than 1."""
        if check is None:
            self.report(node, message)
            return
        (spelling, kind), text = check
        template = message.replace("{", "{{").replace("}", "}}") + (
            f" (`nprocs={text}` is {{value}}: {{where}} passes `{{given}}`, and `xmp.spawn` "
            "raises ValueError for it even before that, XLA019; this error comes once `nprocs` "
            "is dropped)"
        )
        self.report(node, message, option=OptionCheck(spelling, kind, ("1",), template))

    def _unpicklable_function(
        self, expr: cst.BaseExpression, depth: int, fork: bool = False
    ) -> str | None:
        """What makes ``expr`` (the launched function) unpicklable: "a `lambda`", "the nested
        function `name`", or None. Follows a name assigned once and a ``functools.partial``.
        ``fork``: the workers are forked (``start_method="fork"``), so a function defined under
        the main guard is in their ``__main__`` and unpickles by name."""
        ctx = self.ctx
        if type(expr) is cst.Lambda:
            return "a `lambda`"
        if type(expr) is cst.Call and ctx.is_call_to(expr, "functools.partial") and expr.args:
            return (
                self._unpicklable_function(expr.args[0].value, depth + 1, fork)
                if depth < 3
                else None
            )
        if type(expr) is not cst.Name:
            return None
        if _local_function(ctx, expr.value, fork):
            return f"the nested function `{expr.value}`"
        found = definition(ctx, expr)
        if found is not None and depth < 3:
            return self._unpicklable_function(found[0], depth + 1, fork)
        return None

    def _inherit_only(self, expr: cst.BaseExpression) -> str | None:
        """The class name (``Queue``) when ``expr`` makes or names a multiprocessing object
        that only pickles for a child started by inheritance, else None. A name is read at
        the node being visited (the launch call)."""
        ctx = self.ctx
        if type(expr) is cst.Name:
            found = definition(ctx, expr)
            if found is None:
                return None
            expr = found[0]
        if type(expr) is not cst.Call:
            return None
        func = expr.func
        if type(func) is not cst.Attribute or func.attr.value not in _INHERIT_ONLY:
            return None
        kind = func.attr.value
        for name in ctx.qnames(func):
            if any(name == f"{root}.{kind}" for root in _MP_ROOTS):
                return kind
        owner = func.value  # ctx.Queue() with ctx = mp.get_context(...)
        if type(owner) is cst.Name:
            found = definition(ctx, owner)
            owner = found[0] if found is not None else owner
        if type(owner) is cst.Call and any(
            name in (f"{root}.get_context" for root in _MP_ROOTS) for name in ctx.qnames(owner.func)
        ):
            return kind
        return None

    def _collects_inherit_only(self, expr: cst.BaseExpression) -> str | None:
        """The class name when ``expr`` is a list the enclosing function (or the module)
        fills with such objects: ``queues.append(mp.Queue())`` or ``q = mp.Queue()`` then
        ``queues.append(q)`` (nreimers/se-pytorch-xla passes the list to ``xmp.spawn``)."""
        if type(expr) is not cst.Name:
            return None
        body = next(iter(self.ctx.enclosing(cst.FunctionDef)), self.ctx.module)
        made: dict[str, str] = {}  # local name -> the class of the object assigned to it
        added: list[cst.BaseExpression] = []  # what is appended to the list
        for node in iter_nodes(body):
            if type(node) is cst.Assign and len(node.targets) == 1:
                target = node.targets[0].target
                if type(target) is cst.Name and type(node.value) is cst.Call:
                    kind = self._inherit_only(node.value)
                    if kind is not None:
                        made[target.value] = kind
            elif (
                type(node) is cst.Call
                and type(node.func) is cst.Attribute
                and node.func.attr.value in ("append", "insert")
                and type(node.func.value) is cst.Name
                and node.func.value.value == expr.value
                and node.args
            ):
                added.append(node.args[-1].value)
        for item in added:
            kind = made.get(item.value) if type(item) is cst.Name else self._inherit_only(item)
            if kind is not None:
                return kind
        return None


# How many processes `xmp.spawn(..., nprocs=N)` starts, as torch_xla 2.9.0 `_internal/pjrt.py`
# `spawn` reads N: 1 runs `fn` in the calling process (`_run_singleprocess`), None one process per
# device (`run_multiprocess`, which pickles), anything else raises ValueError before anything runs.
_ONE, _MANY, _RAISES, _UNKNOWN = "one", "many", "raises", "unknown"


def _spawn_count(ctx, value: Value, depth: int = 0) -> str:
    """:data:`_ONE`, :data:`_MANY`, :data:`_RAISES` or :data:`_UNKNOWN` for an ``nprocs`` value
    (:func:`~xla_lint.analysis.values.value_of`); a conditional expression or several assignments
    is :data:`_MANY` when one of its values is, :data:`_RAISES` when one raises, :data:`_ONE` when
    all run one process, else unknown (an environment variable, a parameter, a call)."""
    if isinstance(value, Known):
        if value.value is None:
            return _MANY
        return _ONE if _is_one(value) else _RAISES
    if value.kind == "several" and value.parts and depth < 4:
        found = {_spawn_count(ctx, part, depth + 1) for part in parts_of(ctx, value)}
        for verdict in (_MANY, _RAISES, _UNKNOWN):
            if verdict in found:
                return verdict
        return _ONE
    return _UNKNOWN


def _contents(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values a tuple, list or dict display holds, nested displays opened (``args=(cfg,
    {"queue": q})`` gives ``cfg`` and ``q``); any other expression is itself."""
    if isinstance(node, (cst.Tuple, cst.List)):
        return [v for e in node.elements for v in _contents(e.value)]
    if isinstance(node, cst.Dict):
        return [
            v for e in node.elements if isinstance(e, cst.DictElement) for v in _contents(e.value)
        ]
    return [node]


def _is_true_literal(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Name and node.value == "True"


def _defined_under_main_guard(module: cst.Module, name: str) -> bool:
    """True when the module defines function ``name`` only inside ``if __name__ ==
    "__main__":``: a spawned worker imports the script as ``__mp_main__``, where that block
    does not run, so unpickling the function by name fails (measured with torch_xla 2.9.0)."""
    inside = outside = False
    for stmt in module.body:
        if type(stmt) is cst.FunctionDef and stmt.name.value == name:
            outside = True
        elif type(stmt) is cst.If and _is_main_guard(stmt.test):
            inside = inside or any(
                type(n) is cst.FunctionDef and n.name.value == name for n in iter_nodes(stmt.body)
            )
    return inside and not outside


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    words = {
        n.value if type(n) is cst.Name else literal_string(n)
        for n in (test.left, target.comparator)
    }
    return type(target.operator) is cst.Equal and words == {"__name__", "__main__"}


def _local_function(ctx, name: str, fork: bool = False) -> bool:
    """True when ``name``, read in the scope being visited, is a function defined inside
    another function's body (a closure: pickle looks it up by ``__qualname__`` and fails), or
    only under the main guard when the workers are not forked (``fork``: a forked worker's
    ``__main__`` is the parent's, which holds it; a spawned one re-imports the script)."""
    scope = ctx.scope
    while scope is not None and name not in scope.bindings:
        scope = scope.parent
    if scope is not None and scope.kind == "module":
        return not fork and _defined_under_main_guard(ctx.module, name)
    if scope is None or scope.kind != "function" or scope.node is None:
        return False
    return any(
        type(n) is cst.FunctionDef and n.name.value == name
        for n in iter_nodes(scope.node.body)
        if n is not scope.node
    )
