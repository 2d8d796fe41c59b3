"""TorchTPU code, linted too (XLA4xx, preview): mistakes in programs that already run on Google's
TorchTPU (``torch-tpu`` 0.2.0), each checked against that wheel's Python source.

Every rule here first asks :func:`xla_lint.analysis.torchtpu.is_torchtpu_program`: a file that
uses SOPHGO's unrelated ``torch_tpu``, or whose evidence is neither (``import torch_tpu`` and
``torch.device("tpu")`` alone), gets no finding. The facts the rules rest on come from the
committed data file ``xla_lint/data/torchtpu_api.json`` (``tools/torchtpu_api.py`` reads the
wheel), never from TorchTPU itself, which is not installed and needs a TPU to run.
"""

from __future__ import annotations

import functools

import libcst as cst

from ..analysis.context import find_arg, literal_string
from ..analysis.names import dotted_name
from ..analysis.torchtpu import (
    caught,
    in_import_fallback,
    is_torchtpu_program,
    runs_on_torchtpu,
    signals,
    torchtpu_api,
)
from ..diagnostics import Severity
from ..rule import Invalid, PendingFix, Replacement, Rule, Valid
from .output import add_keyword


class _TorchTpuRule(Rule):
    """What the XLA4xx rules share: preview, silent outside Google TorchTPU files, and reported
    only where TorchTPU code runs (:func:`xla_lint.analysis.torchtpu.runs_on_torchtpu`)."""

    preview = True
    platform = "torchtpu"

    def report(self, node: cst.CSTNode, message: str | None = None, **kwargs) -> bool:
        """:meth:`Rule.report`, in files that use Google's TorchTPU only, where TorchTPU code runs."""
        if not is_torchtpu_program(self.ctx) or not runs_on_torchtpu(self.ctx):
            return False
        return super().report(node, message, **kwargs)


# A TorchTPU program's opening lines in the examples: init_process_group("tpu") is a Google signal.
_TPU = "import torch\nimport torch.distributed as dist\n\ndist.init_process_group('tpu')\n"
_SOPHGO = "import torch\nimport torch_tpu\n\ntorch.tpu.OpTimer_reset()\n"


# ---- XLA401 -----------------------------------------------------------------------------------


class LeftoverTorchXla(_TorchTpuRule):
    code = "XLA401"
    name = "torch-xla-in-torchtpu-program"
    summary = "A TorchTPU program imports torch_xla, which cannot be installed beside torch_tpu."
    message = (
        "torch_xla imported in a TorchTPU program: torch-tpu 0.2.0 needs torch>=2.11,<=2.15 and "
        "torch_xla 2.9.0 is built against torch 2.9, so one environment cannot hold both; port "
        "what this import is used for (`xla-lint migrate --to torchtpu`) and delete it"
    )
    explanation = """\
## What it does
Flags each `import torch_xla...` / `from torch_xla... import ...` in a file that uses Google's
TorchTPU (`torch.tpu.*` names only TorchTPU has, `init_process_group("tpu")`,
`DeviceMesh("tpu", ...)`, `torch.compile(backend="tpu")`, `torch_tpu._internal`, `TORCH_TPU_*`
variables). Silent for an optional import (in a `try` whose handler catches `ImportError`, or in
that handler: `try: import torch_tpu` / `except ImportError: import torch_xla`), under
`if TYPE_CHECKING:`, in the branch of a torch_xla check (`if is_torch_xla_available():`), and in
files whose `torch_tpu` is SOPHGO's or undecided.

## Why is this bad
The two stacks cannot share an interpreter. The torch_tpu 0.2.0 wheel's metadata
(`torch_tpu-0.2.0.dist-info/METADATA`) requires `torch>=2.11.0,<=2.15.0`; torch_xla 2.9.0 loads
its `_XLAC` extension at import (`torch_xla/__init__.py` `import _XLAC`), compiled against the
torch 2.9 build named in `torch_xla/version.py` (`__torch_gitrev__`). In the environment where
TorchTPU runs the import fails (`ModuleNotFoundError`, or an undefined symbol from `_XLAC`), so
a leftover import is a crash at start-up, and a leftover `xm.mark_step()` or `xr.world_size()`
behind it is a half-done port.

## Example
```python
import torch
import torch.distributed as dist
import torch_xla.core.xla_model as xm

dist.init_process_group("tpu")
xm.mark_step()
```

## Use instead
```python
import torch
import torch.distributed as dist

dist.init_process_group("tpu")
# eager by default: nothing to flush
```
`xla-lint migrate --to torchtpu` names the TorchTPU equivalent of every torch_xla use.

## References
- torch_tpu 0.2.0: `torch_tpu-0.2.0.dist-info/METADATA` (`Requires-Dist: torch>=2.11.0,<=2.15.0`)
- torch_xla 2.9.0: `torch_xla/__init__.py`, `torch_xla/version.py`
- docs/migrate.md
"""
    valid = (
        Valid(_TPU + "x = torch.ones(2, device='tpu')\n"),
        # a torch_xla program: not a TorchTPU one
        Valid("import torch_xla.core.xla_model as xm\nxm.mark_step()\n"),
        # SOPHGO's torch_tpu
        Valid(_SOPHGO + "import torch_xla\n"),
        # undecided: `import torch_tpu` and the "tpu" device say nothing about whose it is
        Valid("import torch\nimport torch_tpu\nimport torch_xla\nx = torch.ones(2).to('tpu')\n"),
        # optional imports and their fallback
        Valid(
            _TPU + "try:\n    import torch_xla.core.xla_model as xm\nexcept ImportError:\n"
            "    xm = None\n"
        ),
        Valid("try:\n    import torch_tpu._internal\nexcept ImportError:\n    import torch_xla\n"),
        # dual-backend code: the torch_xla branch
        Valid(
            _TPU + "def is_torch_xla_available():\n    return False\n"
            "if is_torch_xla_available():\n    import torch_xla\n"
        ),
        Valid(_TPU + "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch_xla\n"),
    )
    invalid = (
        Invalid(
            "import torch\nimport torch.distributed as dist\n"
            "import torch_xla.core.xla_model as xm\n\n"
            "dist.init_process_group('tpu')\nxm.mark_step()\n",
            (3,),
        ),
        Invalid(
            "import torch\nfrom torch_xla import runtime as xr\n"
            "with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):\n    pass\n",
            (2,),
        ),
        Invalid(  # inside a function: an import that runs when the step does
            _TPU + "def step():\n    import torch_xla\n    torch_xla.sync()\n",
            (6,),
        ),
    )

    def visit_Import(self, node: cst.Import) -> None:
        if any(_is_torch_xla(dotted_name(a.name)) for a in node.names):
            self._report(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        if _is_torch_xla(dotted_name(node.module)):
            self._report(node)

    def _report(self, node: cst.CSTNode) -> None:
        if in_import_fallback(self.ctx):
            return
        self.report(node)


def _is_torch_xla(name: str | None) -> bool:
    return name is not None and (name == "torch_xla" or name.startswith("torch_xla."))


# ---- XLA402 -----------------------------------------------------------------------------------


@functools.cache
def _internal_names() -> dict[str, dict]:
    """The 0.2.0 public names that are internal (raising from user code): name -> its entry."""
    return {n: i for n, i in torchtpu_api()["names"].items() if i["stage"] == "internal"}


class RaisingTpuDeviceApi(_TorchTpuRule):
    code = "XLA402"
    name = "raising-torch-tpu-device-api"
    summary = "torch.tpu.device_count()/is_available()/... raise RuntimeError from user code on torch >= 2.11."
    message = "`{name}()` raises RuntimeError when user code calls it ({when}): use `{prefer}()`"
    fixable = False
    explanation = """\
## What it does
Flags calls of the `torch.tpu` device functions that torch_tpu 0.2.0 makes internal:
`device_count`, `is_available`, `current_device`, `set_device`, `synchronize`, `current_stream`,
`set_stream` and `device` on torch >= 2.11, `initial_seed` and `get_rng_state` on torch >= 2.13
(the names whose stage is "internal" in `xla_lint/data/torchtpu_api.json`), in files that use
Google's TorchTPU. Silent in a `try` whose handler catches `RuntimeError` or `Exception`. When
the file spells `TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS` the call only warns, and so is reported as
a warning.

## Why is this bad
In torch_tpu 0.2.0 `torch_tpu/_internal/device/_device_module.py` decorates these
`TpuDeviceModule` methods with `@annotations.internal_or_experimental(internal_when=
get_torch_version() >= (2, 11), prefer="torch.accelerator.device_count", strict=
_STRICT_INTERNAL_DEVICE_APIS)`; `_STRICT_INTERNAL_DEVICE_APIS` is true unless
`TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS=1`. `torch_tpu/_internal/utils/annotations.py`
`_create_warning_wrapper` then checks the caller's module (`_is_framework_caller_frame`: only
`torch.*` and `torch_tpu.*` pass) and, for any other caller, raises
`RuntimeError("device_count is internal to TorchTPU and can only be called by the PyTorch
framework (torch and torch_tpu). Use torch.accelerator.device_count instead.")` on every call
(not while Dynamo traces). TorchTPU needs torch >= 2.11, so on every supported torch these
calls raise; guides written for the CUDA-like API still teach them.

## Example
```python
import torch
import torch.distributed as dist

dist.init_process_group("tpu")
if torch.tpu.is_available():
    print(torch.tpu.device_count())
```

## Use instead
```python
if torch.accelerator.is_available():
    print(torch.accelerator.device_count())
```
`torch.accelerator.current_device_index()`, `set_device_index(i)`, `device_index(i)`,
`synchronize()`, `current_stream()`, `set_stream(s)` replace the others (each rule message names
the `prefer=` of the wheel).

## References
- torch_tpu 0.2.0: `torch_tpu/_internal/device/_device_module.py` (`TpuDeviceModule.device_count`, `is_available`, ...)
- torch_tpu 0.2.0: `torch_tpu/_internal/utils/annotations.py` (`internal_or_experimental`, `_create_warning_wrapper`)
- https://docs.pytorch.org/docs/stable/accelerator.html
"""
    valid = (
        Valid(
            _TPU
            + "if torch.accelerator.is_available():\n    n = torch.accelerator.device_count()\n"
        ),
        # SOPHGO's torch_tpu: its torch.tpu.device_count() is an ordinary function
        Valid(_SOPHGO + "n = torch.tpu.device_count()\n"),
        # undecided
        Valid("import torch\nimport torch_tpu\nn = torch.tpu.device_count()\n"),
        # guarded: the RuntimeError is caught
        Valid(_TPU + "try:\n    n = torch.tpu.device_count()\nexcept RuntimeError:\n    n = 1\n"),
        # experimental (not internal) names are fine
        Valid(_TPU + "name = torch.tpu.get_device_name()\n"),
    )
    invalid = (
        Invalid(
            _TPU
            + "if torch.tpu.is_available():\n    print(torch.tpu.device_count(), flush=True)\n",
            (5, 6),
        ),
        Invalid(  # an ImportError handler does not catch the RuntimeError
            "import torch\ntry:\n    import torch_tpu._internal\n"
            "    HAS_TPU = torch.tpu.is_available()\nexcept ImportError:\n    HAS_TPU = False\n",
            (4,),
        ),
        Invalid(
            _TPU + "from torch.tpu import synchronize\nsynchronize()\n"
            "with torch.tpu.device(0):\n    pass\n",
            (6, 7),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qnames(node.func)
        if not names:
            return
        internal = _internal_names()
        name = next((n for n in sorted(names) if n in internal), None)
        if name is None or caught(self.ctx, frozenset({"RuntimeError"})):
            return
        info = internal[name]
        since = info.get("internal_from_torch", "2.11")
        allowed = repr("TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS") in signals(self.ctx)[0]
        when = (
            "only a warning here: the file sets TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS"
            if allowed
            else f"torch_tpu 0.2.0 on torch >= {since}"
        )
        self.report(
            node,
            self.message.format(
                name=name, when=when, prefer=info.get("prefer", "torch.accelerator")
            ),
            severity=Severity.WARNING if allowed else None,
        )


# ---- XLA403 -----------------------------------------------------------------------------------

# Variables spelled by older TorchTPU documentation whose 0.2.0 spelling differs: the old name
# appears nowhere in the wheel (Python sources and compiled libraries, ``environment`` in the
# data file), the new one does. tests/rules/test_torchtpu.py checks both against the data file.
RENAMED_ENV = {
    "TORCH_TPU_INTERNAL_ENABLE_DEBUG_CHECKS": "TORCH_TPU_ENABLE_DEBUG_CHECKS",
    "TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE": "TORCH_TPU_TIER2_COMPILATION_CACHE",
}


@functools.cache
def _deprecated() -> dict[str, str]:
    """Deprecated dotted names -> what the wheel says to use: the deprecated public names, and the
    deprecated module-level functions of the wheel's modules (``deprecated_defs``)."""
    data = torchtpu_api()
    out: dict[str, str] = {}
    for name, info in data["names"].items():
        if info["stage"] == "deprecated":
            defined = data["deprecated_defs"].get(info["defined"], {})
            out[name] = defined.get("reason") or f"deprecated since {info.get('since')}"
    for where, info in data["deprecated_defs"].items():
        module, _, qual = where.partition(":")
        if "." not in qual:  # a module-level function, reachable by its dotted name
            out[f"{module}.{qual}"] = info.get("reason") or info.get("message", "deprecated")
    return out


def _not_a_module(name: str) -> bool:
    """True for a dotted ``torch_tpu.*`` name that is not a module of torch_tpu 0.2.0
    (``torch_tpu.api``, ``torch_tpu._internal.distributed.launchers.singlehost_wrapper``): what
    ``import NAME`` and ``from NAME import x`` need it to be."""
    return name.startswith("torch_tpu.") and name not in _wheel_modules()


def _not_in_package(attr: str) -> bool:
    """True when ``torch_tpu.ATTR`` is neither a module of the wheel nor a name
    ``torch_tpu/__init__.py`` binds (``tpu_device``, ``api``)."""
    return (
        f"torch_tpu.{attr}" not in _wheel_modules() and attr not in torchtpu_api()["package_attrs"]
    )


@functools.cache
def _wheel_modules() -> frozenset[str]:
    """The wheel's modules and the folders above them (``torch_tpu._internal`` has no
    ``__init__.py``: a namespace package, importable all the same)."""
    out: set[str] = set()
    for name in torchtpu_api()["wheel_modules"]:
        parts = name.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return frozenset(out)


class PreZeroTwoName(_TorchTpuRule):
    code = "XLA403"
    name = "pre-0-2-torchtpu-name"
    summary = "A TorchTPU name or variable that torch_tpu 0.2.0 deprecated, does not have, or no longer reads."
    message = "`{name}` {what}"
    explanation = """\
## What it does
In files that use Google's TorchTPU, flags what the torch_tpu 0.2.0 wheel shows to be gone or
going (the wheel's facts are in `xla_lint/data/torchtpu_api.json`):

- deprecated names: `torch.tpu.topology_aware_mesh` (`@deprecated(version="0.2.0", reason="Use
  torch.tpu.distributed.topology_aware_mesh instead.")`), `torch_tpu._internal.pallas.pallas`'s
  `get_pallas_mesh` (use `torch.tpu.pallas.get_pallas_mesh`) and `custom_jax_kernel` ("Please use
  `jax_op` instead."), reported as warnings: they run and warn;
- modules and names the wheel does not have, reported as errors: imports of a `torch_tpu`
  module that is not in the wheel (`from torch_tpu import api`, the older beta's
  `torch_tpu._internal.distributed.launchers.singlehost_wrapper`) and `torch_tpu.X` where `X` is
  neither a module nor a name `torch_tpu/__init__.py` binds (`torch_tpu.tpu_device()`);
- environment variables spelled the older way, reported as warnings: `TORCH_TPU_INTERNAL_ENABLE_DEBUG_CHECKS`
  (0.2.0 reads `TORCH_TPU_ENABLE_DEBUG_CHECKS`) and `TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE`
  (`TORCH_TPU_TIER2_COMPILATION_CACHE`), as any string literal of the file.

Silent in a `try` whose handler catches `ImportError`/`AttributeError` (for the missing names)
and in its handler.

## Why is this bad
A missing module or attribute raises `ImportError`/`AttributeError` at once. A deprecated name
warns (`<TorchTpu/ApiStage/DeprecatedApi/>`, `torch_tpu/_internal/utils/annotations.py`) and goes
away in a later release. A variable the wheel never reads is silently ignored: the old names
appear nowhere in torch_tpu 0.2.0, neither in its Python sources nor in the strings of its
compiled libraries (`torch_tpu/csrc/common/glue_2_*/libpywrap_2_*_common.so`), while the new
ones do, so setting the old one leaves debug checks off or the compilation cache unused.
What this rule does not claim: that these names were renamed on purpose (the wheel keeps no
changelog), and anything about `TPU_LAUNCH_BLOCKING` (older docs; 0.2.0 reads
`TORCH_TPU_LAUNCH_BLOCKING`, but libtpu, a separate package, was not checked).

## Example
```python
import torch
from torch_tpu import api

mesh = torch.tpu.topology_aware_mesh((4, 2))
```

## Use instead
```python
import torch

mesh = torch.tpu.distributed.topology_aware_mesh((4, 2))
```

## References
- torch_tpu 0.2.0: `torch_tpu/_internal/device/_device_module.py` (`TpuDeviceModule.topology_aware_mesh`)
- torch_tpu 0.2.0: `torch_tpu/_internal/pallas/pallas.py` (`get_pallas_mesh`, `custom_jax_kernel`)
- torch_tpu 0.2.0: `torch_tpu/__init__.py`, `torch_tpu/_internal/public_api.py`
"""
    valid = (
        Valid(_TPU + "mesh = torch.tpu.distributed.topology_aware_mesh((4, 2))\n"),
        Valid(
            "import torch\nfrom torch.tpu.pallas import get_pallas_mesh, jax_op\nget_pallas_mesh('x')\n"
        ),
        # SOPHGO's torch_tpu has modules Google's has not
        Valid(_SOPHGO + "from torch_tpu import api\nimport torch_tpu.tpu\n"),
        # guarded: the missing module is an optional import
        Valid(_TPU + "try:\n    from torch_tpu import api\nexcept ImportError:\n    api = None\n"),
        Valid(_TPU + "import os\nos.environ['TORCH_TPU_ENABLE_DEBUG_CHECKS'] = '1'\n"),
    )
    invalid = (
        Invalid(
            "import torch\nfrom torch_tpu import api\n\n"
            "mesh = torch.tpu.topology_aware_mesh((4, 2))\n",
            (2, 4),
        ),
        Invalid(
            _TPU + "import torch_tpu\ndev = torch_tpu.tpu_device()\n"
            "import torch_tpu._internal.distributed.launchers.singlehost_wrapper\n"
            "from torch_tpu._internal.pallas import pallas\nm = pallas.get_pallas_mesh('x')\n"
            "k = pallas.custom_jax_kernel(f)\n",
            (6, 7, 9, 10),
        ),
        Invalid(
            "import os\nos.environ['TORCH_TPU_INTERNAL_TIER2_COMPILATION_CACHE'] = '/tmp/c'\n",
            (2,),
        ),
    )

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is not None and _not_a_module(name):
                self._gone(node, name, "is not a module of torch_tpu 0.2.0 (ImportError)")
                return

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        base = dotted_name(node.module)
        if base is None or not (base == "torch_tpu" or base.startswith("torch_tpu.")):
            return
        if _not_a_module(base):
            self._gone(node, base, "is not a module of torch_tpu 0.2.0 (ImportError)")
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            full = f"{base}.{name}"
            if base == "torch_tpu" and _not_in_package(name):
                self._gone(node, full, "is not in torch_tpu 0.2.0 (ImportError)")
                return
            if full in _deprecated():
                self._deprecated(node, full)
                return

    def visit_Attribute(self, node: cst.Attribute) -> None:
        parent = self.ctx.parent()
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return  # the whole dotted name is looked at once, at its outermost attribute
        if next(self.ctx.enclosing(cst.Import, cst.ImportFrom), None) is not None:
            return
        names = self.ctx.qnames(node)
        for name in sorted(names):
            if name in _deprecated():
                self._deprecated(node, name)
                return
            parts = name.split(".")
            if len(parts) >= 2 and parts[0] == "torch_tpu" and _not_in_package(parts[1]):
                self._gone(node, ".".join(parts[:2]), "is not in torch_tpu 0.2.0 (AttributeError)")
                return

    def _deprecated(self, node: cst.CSTNode, name: str) -> None:
        self.report(
            node,
            self.message.format(
                name=name, what=f"is deprecated in torch_tpu 0.2.0: {_deprecated()[name]}"
            ),
            severity=Severity.WARNING,
        )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = literal_string(node)
        if value in RENAMED_ENV:
            self.report(
                node,
                self.message.format(
                    name=value,
                    what=f"is read nowhere in torch_tpu 0.2.0, which reads `{RENAMED_ENV[value]}`: "
                    "setting it does nothing",
                ),
                severity=Severity.WARNING,
            )

    def _gone(self, node: cst.CSTNode, name: str, what: str) -> None:
        if in_import_fallback(self.ctx) or caught(self.ctx, frozenset({"AttributeError"})):
            return
        self.report(node, self.message.format(name=name, what=what))


# ---- XLA404 -----------------------------------------------------------------------------------


class InductorOnTpu(_TorchTpuRule):
    code = "XLA404"
    name = "inductor-backend-on-tpu"
    summary = 'torch.compile(backend="inductor") in a TorchTPU program raises on TPU inputs.'
    message = (
        '`torch.compile(backend="inductor")` raises RuntimeError on TPU inputs under torch_tpu '
        '0.2.0: pass `backend="tpu"` or leave `backend` out'
    )
    explanation = """\
## What it does
Flags `torch.compile(..., backend="inductor")` (a call or a decorator) in files that use
Google's TorchTPU, unless `options` is a dict literal with `"tpu_backend": "pallas"` (TorchTPU's
escape hatch) or is not a literal. Silent in branches for another platform
(`if torch.cuda.is_available():`).

## Why is this bad
On import torch_tpu 0.2.0 replaces `torch._TorchCompileInductorWrapper.__call__`
(`torch_tpu/_loader.py` `_tpu_inductor_wrapper_call`): when any example input is a tensor on
the "tpu" device and `tpu_backend` is not `"pallas"`, it raises `RuntimeError(_INDUCTOR_TPU_ERROR)`:
"torch.compile(..., backend='inductor') on TPU is experimental and does not yet have full TPU
support ... Pass backend='tpu' or do not specify `backend` in torch.compile to use TorchTPU".
The same file patches `torch.compile` (`_default_tpu_compile`) so that a call without `backend`
picks the "tpu" Dynamo backend (`torch_tpu/_internal/compile/__init__.py` registers it) for TPU
inputs and `dynamic=False`. Whether the inputs are on the TPU is not known statically: in a
TorchTPU program they usually are.

## Example
```python
model = torch.compile(model, backend="inductor")
```

## Use instead
```python
model = torch.compile(model)            # TorchTPU picks "tpu" for TPU inputs
model = torch.compile(model, backend="tpu")
```

## References
- torch_tpu 0.2.0: `torch_tpu/_loader.py` (`_INDUCTOR_TPU_ERROR`, `_tpu_inductor_wrapper_call`, `_default_tpu_compile`)
- torch_tpu 0.2.0: `torch_tpu/_internal/compile/__init__.py` (`register_backend(..., name="tpu")`)
"""
    valid = (
        Valid(_TPU + "model = torch.compile(torch.nn.Linear(2, 2), backend='tpu')\n"),
        Valid(_TPU + "model = torch.compile(torch.nn.Linear(2, 2))\n"),
        Valid(
            _TPU + "f = torch.compile(g, backend='inductor', options={'tpu_backend': 'pallas'})\n"
        ),
        # another platform's branch
        Valid(
            _TPU + "if torch.cuda.is_available():\n    f = torch.compile(g, backend='inductor')\n"
        ),
        # not a TorchTPU program
        Valid("import torch\nf = torch.compile(g, backend='inductor')\n"),
        Valid(_SOPHGO + "f = torch.compile(g, backend='inductor')\n"),
    )
    invalid = (
        Invalid(_TPU + "model = torch.compile(torch.nn.Linear(2, 2), backend='inductor')\n", (5,)),
        Invalid(
            _TPU
            + "@torch.compile(backend='inductor', fullgraph=True)\ndef f(x):\n    return x * 2\n",
            (5,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if "torch.compile" not in self.ctx.qnames(node.func):
            return
        backend = find_arg(node, "backend")
        if backend is None or literal_string(backend.value) != "inductor":
            return
        options = find_arg(node, "options")
        if options is not None and (
            not isinstance(options.value, cst.Dict) or _pallas(options.value)
        ):
            return
        if any(a.star == "**" for a in node.args):
            return
        self.report(node)


def _pallas(options: cst.Dict) -> bool:
    """True when the ``options`` dict may set ``"tpu_backend": "pallas"`` (it does, its value is
    not a literal, or a ``**`` entry may)."""
    for element in options.elements:
        if not isinstance(element, cst.DictElement):
            return True  # `**extra`: unknown entries
        if literal_string(element.key) == "tpu_backend":
            return (
                literal_string(element.value) == "pallas" or literal_string(element.value) is None
            )
    return False


# ---- XLA405 -----------------------------------------------------------------------------------

SPLASH_SDPA = "torch.tpu.ops.splash_sdpa"


def splash_is_causal_default() -> str | None:
    """The default of ``is_causal`` in torch_tpu 0.2.0's ``splash_sdpa`` signature, as source text."""
    for param in torchtpu_api()["signatures"].get(SPLASH_SDPA, ()):
        if param["name"] == "is_causal":
            default: str | None = param.get("default")
            return default
    return None


class SplashSdpaImplicitCausal(_TorchTpuRule):
    code = "XLA405"
    name = "splash-sdpa-implicit-causal"
    summary = "torch.tpu.ops.splash_sdpa() without is_causal=: it masks causally by default."
    message = (
        "`splash_sdpa` without `is_causal=`: torch_tpu 0.2.0 defaults it to True (a causal mask), "
        "unlike `F.scaled_dot_product_attention`; say which one you mean"
    )
    severity = Severity.WARNING
    fixable = True
    explanation = """\
## What it does
Flags calls of `torch.tpu.ops.splash_sdpa(q, k, v, ...)` that do not pass `is_causal=` (calls
with `**kwargs` are left alone). The fix writes the default out, `is_causal=True`: the same
behaviour, made visible.

## Why is this bad
In torch_tpu 0.2.0 `torch_tpu/_internal/ops/splash_attention.py` defines
`splash_sdpa(q, k, v, *, scale=None, is_causal=True, local_window_size=None, ...)`, documented as a
"Replacement for F.scaled_dot_product_attention", whose own `is_causal` defaults to False. Code
moved from `F.scaled_dot_product_attention(q, k, v)` for an encoder, a cross-attention or a
diffusion model's attention silently gets a causal mask: no error, wrong outputs. (The default
comes from the signature recorded in `xla_lint/data/torchtpu_api.json`.)

## Example
```python
out = torch.tpu.ops.splash_sdpa(q, k, v)
```

## Use instead
```python
out = torch.tpu.ops.splash_sdpa(q, k, v, is_causal=False)  # bidirectional attention
out = torch.tpu.ops.splash_sdpa(q, k, v, is_causal=True)   # a decoder's causal mask
```

## References
- torch_tpu 0.2.0: `torch_tpu/_internal/ops/splash_attention.py` (`splash_sdpa`)
- https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html
"""
    valid = (
        Valid("import torch\nout = torch.tpu.ops.splash_sdpa(q, k, v, is_causal=False)\n"),
        Valid("import torch\nout = torch.tpu.ops.splash_sdpa(q, k, v, **kw)\n"),
        Valid(
            _TPU
            + "import torch.nn.functional as F\nout = F.scaled_dot_product_attention(q, k, v)\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch\nout = torch.tpu.ops.splash_sdpa(q, k, v)\n",
            (2,),
            fixed="import torch\nout = torch.tpu.ops.splash_sdpa(q, k, v, is_causal=True)\n",
        ),
        Invalid(
            "from torch.tpu.ops import splash_sdpa\nout = splash_sdpa(q, k, v, scale=0.1)\n",
            (2,),
            fixed="from torch.tpu.ops import splash_sdpa\n"
            "out = splash_sdpa(q, k, v, scale=0.1, is_causal=True)\n",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if SPLASH_SDPA not in self.ctx.qnames(node.func):
            return
        if find_arg(node, "is_causal") is not None or any(a.star for a in node.args):
            return
        default = splash_is_causal_default()
        if default != "True":
            return  # the rule rests on the wheel's default
        self.report(
            node,
            fix=PendingFix(
                "pass `is_causal=True` (the default)",
                [Replacement(node, add_keyword(node, "is_causal", "True"))],
            ),
        )


# ---- XLA406 -----------------------------------------------------------------------------------

_START_METHOD_CALLS = frozenset(
    {
        "multiprocessing.set_start_method",
        "multiprocessing.get_context",
        "torch.multiprocessing.set_start_method",
        "torch.multiprocessing.get_context",
    }
)
_SPAWNERS = frozenset(
    {
        "torch.multiprocessing.spawn",
        "torch.multiprocessing.start_processes",
        "torch.multiprocessing.spawn.spawn",
        "torch.multiprocessing.spawn.start_processes",
    }
)
_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})


class ForkStartMethod(_TorchTpuRule):
    code = "XLA406"
    name = "fork-start-method-in-torchtpu-program"
    summary = "A fork start method in a TorchTPU program: forked children cannot use the TPU."
    message = (
        "the `fork` start method in a TorchTPU program: a child forked after the TPU runtime "
        'started raises "cannot access or re-initialize TPU in a forked subprocess"; use '
        '"spawn"'
    )
    explanation = """\
## What it does
In files that use Google's TorchTPU, flags an explicit `"fork"` start method:
`multiprocessing.set_start_method("fork")`, `multiprocessing.get_context("fork")` (also through
`torch.multiprocessing`), `torch.multiprocessing.spawn(..., start_method="fork")` /
`start_processes(...)`, and `DataLoader(..., multiprocessing_context="fork")`.

## Why is this bad
torch_tpu 0.2.0 guards the device like CUDA does: `torch_tpu/_internal/device/_device_module.py`
`TpuDeviceModule._lazy_init` registers a fork handler when the runtime initialises
(`_device_ops_backend._register_fork_handler()`), and in a process forked after that,
`_lazy_init` and `_init_runtime_options` raise `RuntimeError("cannot access or re-initialize TPU in
a forked subprocess. To use TPU with multiprocessing, you must use the 'spawn' start method")`.
A parent that touched the TPU (a tensor on "tpu", a seed, `default_generators`) before forking
therefore breaks every child that uses it; TorchTPU's own launcher spawns
(`torch_tpu/_internal/distributed/multiprocessing.py` `init_spawn`). Whether the parent has
touched the TPU before the fork is not checked statically.

## Example
```python
torch.multiprocessing.spawn(train, nprocs=4, start_method="fork")
```

## Use instead
```python
torch.multiprocessing.spawn(train, nprocs=4)  # start_method="spawn", the default
```

## References
- torch_tpu 0.2.0: `torch_tpu/_internal/device/_device_module.py` (`_lazy_init`, `_init_runtime_options`, `_is_in_bad_fork`)
- https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods
"""
    valid = (
        Valid(_TPU + "import torch.multiprocessing as mp\nmp.spawn(train, nprocs=4)\n"),
        Valid(_TPU + "import multiprocessing\nmultiprocessing.set_start_method('spawn')\n"),
        Valid("import multiprocessing\nmultiprocessing.set_start_method('fork')\n"),
        Valid(_SOPHGO + "import multiprocessing\nmultiprocessing.set_start_method('fork')\n"),
    )
    invalid = (
        Invalid(
            _TPU + "import torch.multiprocessing as mp\n"
            "mp.spawn(train, nprocs=4, start_method='fork')\n",
            (6,),
        ),
        Invalid(
            _TPU + "import multiprocessing as mp\nmp.set_start_method('fork', force=True)\n"
            "ctx = mp.get_context('fork')\n",
            (6, 7),
        ),
        Invalid(
            _TPU + "from torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, num_workers=2, multiprocessing_context='fork')\n",
            (6,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qnames(node.func)
        if not names:
            return
        if not names.isdisjoint(_START_METHOD_CALLS):
            arg = find_arg(node, "method", 0)
        elif not names.isdisjoint(_SPAWNERS):
            arg = find_arg(node, "start_method")
        elif not names.isdisjoint(_LOADERS):
            arg = find_arg(node, "multiprocessing_context")
        else:
            return
        if arg is not None and literal_string(arg.value) == "fork":
            self.report(node)
