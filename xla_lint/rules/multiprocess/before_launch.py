"""XLA018: the XLA runtime used in the parent before xmp.spawn / torch_xla.launch."""

from __future__ import annotations

import libcst as cst

from ...analysis import apis
from ...analysis.context import find_arg, literal_string
from ...analysis.devices import (
    DEVICE_APIS,
    DeviceUse,
    function_key,
)
from ...analysis.functions import Arms, LocalFunctions, exclusive
from ...analysis.guards import runs_on_xla
from ...analysis.seeds import (
    launch_calls,
    launched_functions,
)
from ...analysis.seeds import short as quoted_source
from ...analysis.values import (
    Known,
    definition,
    value_of,
)
from ...diagnostics import Severity
from ...rule import Invalid, Rule, Valid
from .common import _LAUNCH, LIGHTNING_ROOTS, TRAINER_METHODS, _is_one

# Calls that initialise the PJRT runtime in the calling process (torch_xla/runtime.py:
# they read the device list or ordinals from the PJRT client).
RUNTIME_QUERIES = frozenset(
    {
        f"{apis.XR}.{n}"
        for n in (
            "global_runtime_device_count",
            "global_device_count",
            "world_size",
            "global_ordinal",
            "local_ordinal",
            "addressable_device_count",
            "addressable_runtime_device_count",
            "local_device_count",
            "global_runtime_device_attributes",
            "runtime_device_attributes",
            "process_index",
            "process_count",
        )
    }
    | {
        f"{apis.XM}.{n}"
        for n in (
            "xrt_world_size",
            "get_ordinal",
            "get_local_ordinal",
            "is_master_ordinal",
            "get_xla_supported_devices",
            "xla_real_devices",  # with no argument it lists the devices: measured, the client starts
            "set_rng_state",
        )
    }
    | {
        "torch_xla.devices",
        "torch_xla.device_count",
        "torch_xla.real_devices",
        "torch_xla.manual_seed",
    }
)


_DEVICE_OR_RUNTIME = DEVICE_APIS | RUNTIME_QUERIES


class XlaBeforeLaunch(Rule):
    code = "XLA018"
    name = "xla-before-launch"
    summary = "The XLA runtime is used in the parent process before torch_xla.launch/xmp.spawn."
    message = (
        "{what} uses the XLA runtime in the parent process before `{launch}`: the parent takes the "
        "devices and the launch fails with 'Runtime is already initialized'; move it into the "
        "spawned function"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
In a file that calls `torch_xla.launch(...)` or `xmp.spawn(...)`, flags the first use of
the XLA runtime at module level, or in the function that calls launch before the launch
call: `torch_xla.device()`, `xm.xla_device()`, `.to('xla')`/`.to(dev)`, `device=dev`,
runtime queries (`xr.global_runtime_device_count()`, `xr.world_size()`,
`xr.global_ordinal()`, `xm.is_master_ordinal()`, `xm.xla_real_devices()`...) and RNG seeding
(`xm.set_rng_state`, `torch_xla.manual_seed`). `xr.device_type()` and
`xr.local_process_count()` only read the environment and are fine. Launches with
`nprocs=1` or `debug_single_process=True` run in the same process and are skipped. A use in
the other arm of an `if` that holds the launch (`if args.tpu: xmp.spawn(_mp_fn) else:
main(args)`, an `elif`, at any depth under `if __name__ == "__main__":`) never runs before
it and is not flagged, unless a loop holds it (the next pass may launch).

A notebook is one program run in one kernel process, cell after cell: a runtime use in an
earlier cell is flagged at its cell and line when a later cell launches; a use in a cell after
the launch is not (the launch has returned, and a child process never re-imports a notebook).

It also flags a launch inside a function the file already launches (`torch_xla.launch(outer)`
where `outer` calls `torch_xla.launch`/`xmp.spawn` again, or calls `fit`/`validate`/`test`/
`predict` of a Lightning `Trainer(strategy="xla")`, whose `_XLALauncher` calls `xmp.spawn`).

## Why is this bad
These calls create the PJRT client in the calling process, which opens the host's
devices. `xmp.spawn` then refuses to start (torch_xla 2.9.0
`torch_xla/_internal/pjrt.py`, `run_multiprocess`: `RuntimeError: Runtime is already
initialized. Do not use the XLA device before calling xmp.spawn.`), and
`torch_xla.launch` calls `xmp.spawn`. Module-level code also runs again in every child
when the start method is `spawn` (the main module is re-imported as `__mp_main__`), so
each child initialises the runtime at import, before its per-device setup. Inside a
spawned process the runtime is always up before the function runs
(`torch_xla/_internal/pjrt.py`, `initialize_multiprocess` calls `torch_xla.device()`), so a
second launch from there raises the same error (measured on CPU: `torch_xla.launch(outer)`
with `outer` calling `torch_xla.launch(inner)`).

## Example
```python
device = torch_xla.device()

def _mp_fn(index):
    model = Model().to(device)

if __name__ == "__main__":
    torch_xla.launch(_mp_fn)
```

## Use instead
```python
def _mp_fn(index):
    device = torch_xla.device()
    model = Model().to(device)

if __name__ == "__main__":
    torch_xla.launch(_mp_fn)
```

## References
- https://docs.pytorch.org/xla/master/learn/pjrt.html
- torch_xla 2.9.0 `torch_xla/_internal/pjrt.py` (`run_multiprocess`), `torch_xla/torch_xla.py` (`launch`)
"""
    valid = (
        Valid(
            _LAUNCH + "def _mp_fn(i):\n    device = torch_xla.device()\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch_xla\nimport torch_xla.runtime as xr\nif xr.device_type() == 'TPU':\n    pass\n"
            "torch_xla.launch(fn)\n"
        ),
        Valid(
            _LAUNCH
            + "def main():\n    torch_xla.launch(fn)\n    print(xm.xla_device(), flush=True)\n"
        ),
        Valid(_LAUNCH + "def helper():\n    return torch_xla.device()\ntorch_xla.launch(fn)\n"),
        # younjoo0614/DyLLM_tpu: the CPU fallback runs the test in the branch without XLA.
        Valid(
            _LAUNCH + "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def run(rank):\n    print(torch_xla.device(), flush=True)\n"
            "def _mp_fn(rank, flags):\n    run(rank)\n"
            "if __name__ == '__main__':\n    if HAS_XLA:\n        xmp.spawn(_mp_fn, args=({},))\n"
            "    else:\n        run(0)\n"
        ),
        # danielkunin/neural-mechanics train.py: the other arm of the launch's `if` never
        # runs before it (and an arm of an `elif`, and an `if` nested in `__main__`'s).
        Valid(
            _LAUNCH + "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def main(args):\n    if args.tpu:\n        print(xm.xla_device(), flush=True)\n"
            "if __name__ == '__main__':\n    if ARGS.tpu:\n"
            "        def _mp_fn(rank, args):\n            main(args)\n"
            "        xmp.spawn(_mp_fn, args=(ARGS,), start_method='fork')\n"
            "    elif ARGS.cpu:\n        main(ARGS)\n    else:\n        print(torch_xla.device(), flush=True)\n"
        ),
        Valid(
            _LAUNCH + "def run(flags):\n    if flags.tpu:\n        torch_xla.launch(_mp_fn)\n"
            "    else:\n        print(xm.xla_device(), flush=True)\n"
        ),
        # A helper that launches (main) or is launched, called before another launch.
        Valid(
            _LAUNCH + "def _mp_fn(i):\n    print(torch_xla.device(), flush=True)\n"
            "def main():\n    torch_xla.launch(_mp_fn)\n    print(xm.xla_device(), flush=True)\n"
            "main()\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH + "device = xm.xla_device()\ntorch_xla.launch(fn, debug_single_process=True)\n"
        ),
        # A Trainer of another strategy, a single-process launch inside, a Trainer in the parent.
        Valid(
            "import lightning as L\nimport torch_xla\n"
            "def inner(i):\n    pass\n"
            "def train(rank):\n    L.Trainer(strategy='ddp').fit(model)\n"
            "    torch_xla.launch(inner, debug_single_process=True)\n"
            "if __name__ == '__main__':\n    torch_xla.launch(train)\n"
            "    L.Trainer(strategy='xla').fit(model)\n"
        ),
    )
    invalid = (
        Invalid(
            _LAUNCH + "device = torch_xla.device()\ndef _mp_fn(i):\n    pass\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
            (3,),
        ),
        # xm.xla_real_devices() lists the devices, which starts the client (measured on CPU:
        # _xla_runtime_is_initialized() is then True); xr.device_type() reads PJRT_DEVICE only.
        Invalid(
            _LAUNCH + "import torch_xla.runtime as xr\ndef _mp_fn(i):\n    pass\n"
            "if __name__ == '__main__':\n    print(xr.device_type(), flush=True)\n"
            "    print(xm.xla_real_devices(), flush=True)\n    torch_xla.launch(_mp_fn)\n",
            (8,),
        ),
        # Through a helper of the file (a fresh user's log_devices()).
        Invalid(
            _LAUNCH + "def log_devices():\n    print(torch_xla.device(), flush=True)\n"
            "def _mp_fn(i):\n    pass\n"
            "if __name__ == '__main__':\n    log_devices()\n    torch_xla.launch(_mp_fn)\n",
            (8,),
        ),
        Invalid(
            "import torch_xla.runtime as xr\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def main():\n    n = xr.global_runtime_device_count()\n    xmp.spawn(train, args=(n,))\n",
            (4,),
        ),
        # In the launch's own arm, before the `if`, or in a loop whose next pass launches: it runs
        # before the launch (the other arm's use is not the one reported).
        Invalid(
            _LAUNCH + "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def main(args):\n    print(xm.xla_device(), flush=True)\n"
            "if __name__ == '__main__':\n    if ARGS.tpu:\n        n = xm.xrt_world_size()\n"
            "        xmp.spawn(_mp_fn, args=(n,))\n    else:\n        main(ARGS)\n",
            (8,),
        ),
        Invalid(
            _LAUNCH
            + "def run(flags):\n    if flags.cpu:\n        print(xm.xla_device(), flush=True)\n"
            "    print(torch_xla.device(), flush=True)\n"
            "    if flags.tpu:\n        torch_xla.launch(_mp_fn)\n"
            "def sweep(configs):\n    for c in configs:\n"
            "        if c.cpu:\n            print(xm.xla_device(), flush=True)\n"
            "        else:\n            torch_xla.launch(_mp_fn)\n",
            (5, 12),
        ),
        Invalid(
            "import torch\nfrom torch_xla.distributed import xla_multiprocessing as xmp\n"
            "def main():\n    w = torch.zeros(2).to('xla')\n    xmp.spawn(train)\nmain()\n",
            (4,),
        ),
        Invalid(
            _LAUNCH + "def inner(i):\n    pass\ndef outer(i):\n    torch_xla.launch(inner)\n"
            "if __name__ == '__main__':\n    torch_xla.launch(outer)\n",
            (6,),
        ),
        # JungyongHan/kobart_tpu train.py: Lightning's XLA strategy inside xmp.spawn's function
        Invalid(
            "import lightning as L\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def train(rank, args):\n    trainer = L.Trainer(devices='auto', strategy='xla')\n"
            "    trainer.fit(model, dm)\n"
            "if __name__ == '__main__':\n    xmp.spawn(train, args=(args,))\n",
            (5,),
        ),
    )

    nested_message = (
        "{launch} inside `{fn}`, which this file already runs in each spawned process: the "
        "child's XLA runtime is up before `{fn}` starts, so this launch fails with 'Runtime is "
        "already initialized'; launch once, from the parent"
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.devices = DeviceUse(ctx)
        # Per function (or the module): the runtime uses seen, in order, each with the ifs
        # around it (:meth:`LocalFunctions.arms`; none when a loop holds it), and the launches.
        self.uses: dict[cst.CSTNode, list[tuple[cst.Call, Arms]]] = {}
        self.launches: dict[cst.CSTNode, list[cst.Call]] = {}
        self.settled: set[cst.CSTNode] = set()  # a use outside any if: later ones change nothing
        self.reported: set[cst.CSTNode] = set()
        self.launch: str | None = None

    def leave_Assign(self, node: cst.Assign) -> None:
        self.devices.on_assign(node)

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qnames(node.func)
        key = function_key(self.ctx)
        nested = self._nested_launch(node, names)
        if nested is not None:
            self.report(node, self.nested_message.format(launch=nested[0], fn=nested[1]))
            return
        if names & apis.LAUNCH_APIS:
            if self._single_process(node):
                return
            launch = "torch_xla.launch" if apis.LAUNCH in names else "xmp.spawn"
            self.launch = self.launch or launch
            self.launches.setdefault(key, []).append(node)
            if key is not self.ctx.module and key not in self.reported:
                first = self._first_before(key, [node])
                if first is not None:
                    self.reported.add(key)
                    self._report(first, launch)
            return
        if key in self.settled:
            return
        if not (
            names & _DEVICE_OR_RUNTIME
            or self.devices.placement(node)
            or self._runtime_helper(node, names)
        ):
            return
        # Reported when the launch is seen (or at the module's end): where the use stands
        # decides, so a use in another platform's branch (`else:` of `if HAS_XLA:`) is none.
        if self.ctx.notebook and key is self.ctx.module and self.launch is not None:
            return  # a later cell of the kernel: the launch has run (no child re-imports a notebook)
        if self.ctx.spmd_branch() is not True and runs_on_xla(self.ctx):
            arms = () if self._in_loop() else LocalFunctions.of(self.ctx).arms(node)
            self.uses.setdefault(key, []).append((node, arms))
            if not arms:
                self.settled.add(key)

    def _in_loop(self) -> bool:
        """A ``for``/``while`` of the function (or module) being read holds the call: an arm
        taken in one iteration may run before a launch in the next."""
        for node in reversed(self.ctx.stack[:-1]):
            if isinstance(node, (cst.For, cst.While)):
                return True
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
        return False

    def _first_before(self, key: cst.CSTNode, launches: list[cst.Call]) -> cst.Call | None:
        """The first runtime use of ``key`` that can run in the same pass as one of
        ``launches``: a use in the other arm of an ``if`` that holds the launch (``if tpu:
        xmp.spawn(...) else: main()``) never runs before it (:func:`exclusive`)."""
        functions = LocalFunctions.of(self.ctx)
        for use, arms in self.uses.get(key, ()):
            if not all(exclusive(arms, functions.arms(launch)) for launch in launches):
                return use
        return None

    def _runtime_helper(self, node: cst.Call, names: frozenset[str]) -> bool:
        """A call of a module-level function of this file that uses the runtime itself
        (``log_devices()`` calling ``torch_xla.device()``) and launches nothing."""
        func = node.func
        if type(func) is not cst.Name or names:  # a local name resolves to no import
            return False
        return func.value in self._helpers()

    def _helpers(self) -> dict[str, cst.Call]:
        """Module-level functions of this file (not launched ones) that use the runtime and
        launch nothing, with the first runtime call in each."""
        return self.ctx.memo((XlaBeforeLaunch, "helpers"), self._find_helpers)

    def _find_helpers(self) -> dict[str, cst.Call]:
        found: dict[str, cst.Call] = {}
        if not launch_calls(self.ctx):
            return found  # no launch in the file: nothing to use the runtime before
        launched = launched_functions(self.ctx)
        flat = self.ctx.flat
        nodes, ends = flat.nodes, flat.ends
        index = {id(nodes[i]): i for i in flat.of_types(frozenset({cst.FunctionDef}))}
        for stmt in self.ctx.module.body:
            if type(stmt) is not cst.FunctionDef or stmt.name.value in launched:
                continue
            start = index.get(id(stmt))
            if start is None:
                continue
            use: cst.Call | None = None
            launches = False
            scope = self.ctx.scopes.get(stmt)
            for n in nodes[start + 1 : ends[start]]:
                if type(n) is cst.Call:
                    called = self.ctx.qnames(n.func, scope)
                    if use is None and called & _DEVICE_OR_RUNTIME:
                        use = n
                    launches = launches or bool(called & apis.LAUNCH_APIS)
            if use is not None and not launches:
                found[stmt.name.value] = use
        return found

    def leave_Module(self, node: cst.Module) -> None:
        if self.launch is None:
            return
        launches = self.launches.get(node, [])
        if launches and all(key is node for key in self.launches):
            first = self._first_before(node, launches)
        else:  # a function launches: module code runs at import, before any call of it
            uses = self.uses.get(node)
            first = uses[0][0] if uses else None
        if first is not None:
            self._report(first, self.launch)

    def _nested_launch(self, node: cst.Call, names: frozenset[str]) -> tuple[str, str] | None:
        """``(what launches, the launched function)`` when ``node`` starts processes inside a
        function this file already runs in spawned processes: ``torch_xla.launch``/``xmp.spawn``
        (not single-process), or ``fit``/``validate``/``test``/``predict`` of a Lightning
        ``Trainer(strategy="xla")``, whose launcher calls ``xmp.spawn``."""
        func = node.func
        launches = bool(names & apis.LAUNCH_APIS)
        if not launches and not (
            type(func) is cst.Attribute and func.attr.value in TRAINER_METHODS
        ):
            return None  # most calls: no need to find the launched functions
        outer = None
        for function in self.ctx.enclosing(cst.FunctionDef):
            outer = function
        if outer is None or outer.name.value not in launched_functions(self.ctx):
            return None
        if launches:
            if self._single_process(node):
                return None
            launch = "torch_xla.launch" if apis.LAUNCH in names else "xmp.spawn"
            return f"`{launch}`", outer.name.value
        if type(func) is cst.Attribute and func.attr.value in TRAINER_METHODS:
            trainer = func.value
            if type(trainer) is cst.Name:
                found = definition(self.ctx, trainer)
                trainer = found[0] if found is not None else trainer
            if type(trainer) is cst.Call and self._xla_trainer(trainer):
                return f'`Trainer(strategy="xla").{func.attr.value}()`', outer.name.value
        return None

    def _xla_trainer(self, call: cst.Call) -> bool:
        """A Lightning ``Trainer(...)`` whose ``strategy`` is ``"xla"``/``"xla_fsdp"`` (or an
        ``XLAStrategy``/``XLAFSDPStrategy`` instance): its launcher is ``_XLALauncher``
        (lightning/pytorch/strategies/launchers/xla.py), which calls ``xmp.spawn``."""
        if not any(
            n.split(".")[0] in LIGHTNING_ROOTS and n.endswith(".Trainer")
            for n in self.ctx.qnames(call.func)
        ):
            return False
        strategy = find_arg(call, "strategy")
        if strategy is None:
            return False
        value = strategy.value
        if literal_string(value) in ("xla", "xla_fsdp"):
            return True
        return type(value) is cst.Call and any(
            n.endswith((".XLAStrategy", ".XLAFSDPStrategy")) for n in self.ctx.qnames(value.func)
        )

    def _report(self, node: cst.Call, launch: str) -> None:
        text = quoted_source(self.ctx, node)
        func = node.func
        inner = self._helpers().get(func.value) if type(func) is cst.Name else None
        if inner is not None and not self.ctx.qnames(func):
            text = f"{text} (through {quoted_source(self.ctx, inner)})"
        self.report(node, self.message.format(what=text, launch=launch))

    def _single_process(self, node: cst.Call) -> bool:
        """``nprocs`` is 1 (``spawn`` tests ``nprocs == 1``) or ``debug_single_process`` is true,
        as literals or values the file fixes (``NPROCS = 1``; :mod:`xla_lint.analysis.values`)."""
        nprocs = find_arg(node, "nprocs", 2)
        if nprocs is not None and _is_one(value_of(self.ctx, nprocs.value)):
            return True
        debug = find_arg(node, "debug_single_process", 3)
        if debug is None:
            return False
        value = value_of(self.ctx, debug.value)
        return isinstance(value, Known) and bool(value.value) is True
