"""XLA019: an nprocs other than 1 or None given to xmp.spawn."""

from __future__ import annotations

import libcst as cst

from ...analysis import apis
from ...analysis.context import find_arg
from ...analysis.values import (
    Known,
    Unknown,
    parts_of,
    value_of,
)
from ...diagnostics import OptionCheck, Severity
from ...rule import Invalid, Rule, Valid
from .common import _is_one


class SpawnNprocs(Rule):
    code = "XLA019"
    name = "spawn-nprocs"
    summary = "xmp.spawn with nprocs other than 1/None raises ValueError; torch_xla.launch takes no nprocs at all."
    message = (
        "`nprocs={value}` raises ValueError in torch_xla 2.x: spawn uses every local device; "
        "drop `nprocs` (limit devices with `TPU_NUM_DEVICES`/`CPU_NUM_DEVICES`), or pass 1 to debug"
    )
    known_message = (
        "`nprocs={text}` is {value} ({origin}), and any nprocs other than 1 or None raises "
        "ValueError in torch_xla 2.x: spawn uses every local device; drop `nprocs` (limit devices "
        "with `TPU_NUM_DEVICES`/`CPU_NUM_DEVICES`), or pass 1 to debug"
    )
    unknown_message = (
        "`nprocs={text}` comes from {origin}: `xmp.spawn` raises ValueError in torch_xla 2.x "
        "unless it is 1 or None; drop `nprocs` (spawn uses every local device; limit them with "
        "`TPU_NUM_DEVICES`/`CPU_NUM_DEVICES`), or pass 1 to debug"
    )
    launch_message = (
        "`nprocs={text}` is {value}: {where} passes `{given}`, and any nprocs other than 1 or "
        "None raises ValueError in torch_xla 2.x: spawn uses every local device; drop `nprocs` "
        "(limit devices with `TPU_NUM_DEVICES`/`CPU_NUM_DEVICES`), or pass 1 to debug"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `xmp.spawn(fn, nprocs=N)` (positional or keyword) unless `N` is provably `1` or
`None`, and `torch_xla.launch(..., nprocs=...)` with any value: `launch(fn, args=(),
start_method='spawn', debug_single_process=False)` has no `nprocs` parameter
(`torch_xla/torch_xla.py`, 2.9.0), so the call raises TypeError.

`N` is followed through the file (`xla_lint/analysis/values.py`): a literal, a module constant
(`NPROCS = 8`), a variable assigned once before the call, or the default of an argparse
option (`nprocs=args.num_cores` with `parser.add_argument("--num_cores", type=int,
default=8)`). A value the file fixes to something other than 1 or None is an error, and
the message says where it comes from. A value the file cannot fix (a function parameter,
an environment variable, an option without a default, the result of a call) is a
warning: it raises unless whoever runs the program passes 1.

An option's value is also read from the commands that launch the program: a shell script
in the tree running `python xla_spawn.py --num_cores 8 train.py` makes
`nprocs=args.num_cores` 8 whatever the option's default, an error at the spawn call whose
message names the script's line (a value the shell expands, `--num_cores $N`, proves
nothing). A Markdown/reST shell block counts only for a file no script in the tree runs.

## Why is this bad
Under PJRT, `xmp.spawn` starts one process per local device and takes no count. In
torch_xla 2.9.0, `torch_xla/distributed/xla_multiprocessing.py` `spawn(fn, args=(),
nprocs=None, join=True, daemon=False, start_method='spawn')` passes `nprocs` straight to
`torch_xla/_internal/pjrt.py` `spawn`, which runs `fn` in the calling process when
`nprocs == 1`, starts one process per device when it is `None`, and otherwise raises
`ValueError: Unsupported nprocs (8). Please use nprocs=1 or None (default)...` (a
string `"1"` is not 1 there either: the message's `%d` then raises TypeError). Old
XRT-era scripts (`xmp.spawn(_mp_fn, nprocs=8)`, `nprocs=FLAGS.num_cores` with a
`--num_cores` option defaulting to 8) fail at start-up on every host.

## Example
```python
import torch_xla.distributed.xla_multiprocessing as xmp

parser.add_argument("--num_cores", type=int, default=8)
args = parser.parse_args()
xmp.spawn(_mp_fn, args=(args,), nprocs=args.num_cores, start_method="fork")
```

## Use instead
```python
import torch_xla

torch_xla.launch(_mp_fn, args=(args,))  # one process per local device
```
To use fewer devices, set `TPU_NUM_DEVICES` (or `CPU_NUM_DEVICES`) before start-up;
`nprocs=1` (or `torch_xla.launch(..., debug_single_process=True)`) runs one process for
debugging.

## References
- https://docs.pytorch.org/xla/master/learn/pjrt.html
- torch_xla 2.9.0 `torch_xla/_internal/pjrt.py` (`spawn`), `torch_xla/distributed/xla_multiprocessing.py` (`spawn`)
"""
    valid = (
        Valid("import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(fn, args=())\n"),
        Valid(
            "import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(fn, args=(), nprocs=1)\n"
        ),
        Valid("import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(fn, (), None)\n"),
        Valid("import torch_xla\nimport torch.multiprocessing as mp\nmp.spawn(fn, nprocs=8)\n"),
        # Values the file fixes to 1 or None: a constant, an argparse default, both arms of a choice.
        Valid(
            "import argparse\nimport torch_xla.distributed.xla_multiprocessing as xmp\nNPROCS = 1\n"
            "def main():\n    parser = argparse.ArgumentParser()\n"
            "    parser.add_argument('--num-cores', type=int, default=None)\n"
            "    args = parser.parse_args()\n    xmp.spawn(fn, nprocs=args.num_cores)\n"
            "    xmp.spawn(fn, nprocs=NPROCS)\n    xmp.spawn(fn, nprocs=1 if args.num_cores else None)\n"
        ),
        # Lightning's XLA launcher passes nprocs only when it is 1 (lightning/fabric/strategies/launchers/xla.py).
        Valid(
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def launch(self, function):\n    spawn_kwargs = {}\n    nprocs = self._strategy.num_processes\n"
            "    if nprocs == 1:\n        spawn_kwargs['nprocs'] = nprocs\n"
            "    xmp.spawn(self._wrapping_function, args=(function,), **spawn_kwargs)\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "xmp.spawn(_mp_fn, nprocs=8, start_method='fork')\n",
            (2,),
        ),
        Invalid("import torch_xla\ntorch_xla.launch(_mp_fn, args=(), nprocs=4)\n", (2,)),
        Invalid(
            "from torch_xla.distributed import xla_multiprocessing\n"
            "xla_multiprocessing.spawn(_mp_fn, (), 4)\n",
            (2,),
        ),
        # Known values: a module constant, an argparse default (huggingface transformers'
        # old xla_spawn.py, pytorch/xla's XRT-era tests: `nprocs=FLAGS.num_cores`).
        Invalid(
            "import argparse\nimport torch_xla.distributed.xla_multiprocessing as xmp\nNPROCS = 8\n"
            "def main():\n    parser = argparse.ArgumentParser()\n"
            "    parser.add_argument('--num_cores', type=int, default=8, help='1 or 8')\n"
            "    args = parser.parse_args()\n    xmp.spawn(_mp_fn, args=(args,), nprocs=args.num_cores)\n"
            "    xmp.spawn(_mp_fn, nprocs=NPROCS)\n",
            (8, 9),
        ),
        # Values the file cannot fix (warnings): a parameter, the environment, an option without default.
        Invalid(
            "import os\nimport argparse\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "parser = argparse.ArgumentParser()\nparser.add_argument('--cores', type=int)\n"
            "def run(n):\n    xmp.spawn(_mp_fn, nprocs=n)\n"
            "xmp.spawn(_mp_fn, nprocs=int(os.environ['NUM_CORES']))\n"
            "xmp.spawn(_mp_fn, nprocs=parser.parse_args().cores)\n",
            (7, 8, 9),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        keyword = find_arg(node, "nprocs")
        if keyword is not None and self.ctx.is_call_to(node, apis.LAUNCH):
            self.report(
                node,
                "`torch_xla.launch` takes no `nprocs` (TypeError): it starts one process per "
                "local device; use `debug_single_process=True` for one process",
            )
            return
        arg = find_arg(node, "nprocs", 2)
        if arg is None or not self.ctx.is_call_to(node, apis.SPAWN):
            return
        value = value_of(self.ctx, arg.value)
        bad, unknown = _nprocs_verdict(self.ctx, value)
        text = " ".join(self.ctx.module.code_for_node(arg.value).split())
        text = text if len(text) <= 40 else text[:37] + "..."
        if bad is not None:
            if bad.origin == "a literal" and bad is value:
                self.report(node, self.message.format(value=text))
            else:
                self.report(
                    node,
                    self.known_message.format(text=text, value=repr(bad.value), origin=bad.origin),
                )
        elif unknown is not None:
            self.report(
                node,
                self.unknown_message.format(text=text, origin=unknown.origin),
                severity=Severity.WARNING,
                option=self._option_check(value, text, keep=True),
            )
        elif (check := self._option_check(value, text, keep=False)) is not None:
            # The option's default is right; a launch in the tree may pass another value.
            self.report(node, check.message, option=check)

    def _option_check(self, value, text: str, keep: bool) -> OptionCheck | None:
        """The check of an ``nprocs`` read straight from an argparse option against what the
        program's launches pass (``python xla_spawn.py --num_cores 8``); None for other values."""
        option = getattr(value, "option", None)
        if option is None:
            return None
        spelling, kind = option
        good = {"int": ("1",), "float": ("1.0",)}.get(kind or "", ())
        escaped = text.replace("{", "{{").replace("}", "}}")
        return OptionCheck(
            spelling,
            kind,
            good,
            self.launch_message.replace("{text}", escaped),
            keep,
        )


def _nprocs_verdict(ctx, value, depth: int = 0) -> tuple[Known | None, Unknown | None]:
    """``(bad, unknown)`` for an ``nprocs`` value: the first known value that is neither 1 nor
    None, else the first value that cannot be known; ``(None, None)`` when every value it may
    take is 1 or None (a conditional expression is followed into both arms)."""
    if isinstance(value, Known):
        if value.value is None or _is_one(value):
            return None, None
        return value, None
    if value.kind == "several" and value.parts and depth < 4:
        unknown = None
        for part in parts_of(ctx, value):
            bad, maybe = _nprocs_verdict(ctx, part, depth + 1)
            if bad is not None:
                return bad, None
            unknown = unknown or maybe
        return None, unknown
    return None, value
