"""SPMD mode: turning it on, and the APIs that mean something else once it is on."""

from __future__ import annotations

import libcst as cst

from .. import apis
from ..context import find_arg
from ..diagnostics import Severity
from ..rule import Invalid, Rule, Valid


class SpmdNotEnabled(Rule):
    code = "XLA002"
    name = "spmd-not-enabled"
    summary = "SPMD APIs used in a program that never calls torch_xla.runtime.use_spmd()."
    message = ("SPMD API used but this program never calls `torch_xla.runtime.use_spmd()`; "
               "call it once at start-up, before any tensor is placed on the XLA device")
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags the first use, per file, of an SPMD API (`Mesh`/`HybridMesh` construction,
`mark_sharding`, `set_global_mesh`, `SpmdFullyShardedDataParallel`,
`MpDeviceLoader(..., input_sharding=...)`) in a program that never calls
`torch_xla.runtime.use_spmd()` and never sets `XLA_USE_SPMD` in code. The program is
the file plus the linted files that import it or that it imports: an entry script that
calls `use_spmd()` covers the modules it imports.

## Why is this bad
Without `use_spmd()` the runtime is not in SPMD mode: every process drives its devices
as independent replicas, `mark_sharding` annotations do not partition anything the way
the mesh describes, and FSDPv2 fails or runs replicated. `use_spmd()` switches the
runtime to one virtual device that spans all devices (in torch_xla 2.9.0 it sets
`XLA_USE_SPMD=1` and, if tensors already exist, replicates them onto the SPMD device
with a warning: `torch_xla/runtime.py`, `use_spmd`).

## Example
```python
import numpy as np
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

n = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(n), (n, 1), ("data", "model"))
```

## Use instead
```python
import torch_xla.runtime as xr

xr.use_spmd()  # first thing, before tensors or modules go to the XLA device
n = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(n), (n, 1), ("data", "model"))
```

## References
- https://docs.pytorch.org/xla/master/perf/spmd_basic.html
- torch_xla 2.9.0 `torch_xla/runtime.py`, `use_spmd`
"""
    valid = (
        Valid("import numpy as np\nimport torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
              "xr.use_spmd()\nmesh = xs.Mesh(np.arange(8), (8,), ('data',))\n"),
        Valid("import os\nos.environ['XLA_USE_SPMD'] = '1'\nimport numpy as np\n"
              "import torch_xla.distributed.spmd as xs\nmesh = xs.Mesh(np.arange(8), (8,), ('data',))\n"),
        Valid("import torch_xla.distributed.spmd as xs\nfrom mypkg.model import build\n",
              files=(("mypkg/model.py", "import torch_xla.runtime as xr\ndef setup():\n    xr.use_spmd()\n"),)),
        Valid("class Mesh:\n    pass\nimport torch_xla\nm = Mesh()\n"),
    )
    invalid = (
        Invalid("import numpy as np\nimport torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
                "n = xr.global_runtime_device_count()\n"
                "mesh = xs.Mesh(np.arange(n), (n, 1), ('data', 'model'))\n"
                "xs.mark_sharding(t, mesh, ('data', None))\n", (5,)),
        Invalid("import torch_xla.distributed.parallel_loader as pl\nimport torch_xla.distributed.spmd as xs\n"
                "loader = pl.MpDeviceLoader(loader, dev, input_sharding=spec)\n", (3,)),
        Invalid("from torch_xla.experimental.spmd_fully_sharded_data_parallel import "
                "SpmdFullyShardedDataParallel as FSDPv2\nmodel = FSDPv2(model)\n", (2,)),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.done = False

    def visit_Call(self, node: cst.Call) -> None:
        if self.done:
            return
        names = self.ctx.qnames(node.func)
        if not names:
            return
        if names.isdisjoint(apis.SPMD_APIS):
            if apis.MP_DEVICE_LOADER not in names or find_arg(node, "input_sharding") is None:
                return
        self.done = self.report(node, requires=[("spmd", False)])


PROCESS_IDENTITY = {
    f"{apis.XR}.global_ordinal": "`xr.process_index()`",
    f"{apis.XR}.world_size": "`xr.process_count()`",
    f"{apis.XR}.local_ordinal": "`xr.process_index()` (one SPMD process per host)",
    f"{apis.XM}.get_local_ordinal": "`xr.process_index()` (one SPMD process per host)",
    f"{apis.XM}.is_master_ordinal": "`xr.process_index() == 0`",
    f"{apis.XM}.master_print": "`if xr.process_index() == 0: print(..., flush=True)`",
}


class SpmdProcessIdentity(Rule):
    code = "XLA005"
    name = "spmd-process-identity"
    summary = "global_ordinal/world_size/is_master_ordinal are constants in SPMD; use process_index/process_count."
    message = "in SPMD `{api}` is the same on every host; use {use}"
    severity = Severity.ERROR
    explanation = """\
## What it does
In a program that enables SPMD, flags `xr.global_ordinal()`, `xr.world_size()`,
`xr.local_ordinal()`, `xm.get_local_ordinal()`, `xm.is_master_ordinal(...)` and
`xm.master_print(...)`. Code under `if xr.is_spmd():`'s other branch is not flagged.

## Why is this bad
These functions answer for a *device replica*. In SPMD each host runs one process that
drives all of its devices through one virtual device, so there is one replica per
process and the answers are constants: measured on torch_xla 2.9.0 with 8 devices,
`global_ordinal()` is 0, `world_size()` is 1, `local_ordinal()` is 0 and
`is_master_ordinal(local=False)` is True on every host (`torch_xla/runtime.py`:
`global_ordinal` returns the default device's ordinal, `world_size` the replication
device count; `torch_xla/core/xla_model.py`: `is_master_ordinal` compares them with 0).
So "only host 0 logs" logs on every host, "rank" based data splits read the same data
everywhere, and `master_print` prints once per host.

## Example
```python
xr.use_spmd()
if xr.global_ordinal() == 0:
    save_samples()
```

## Use instead
```python
xr.use_spmd()
if xr.process_index() == 0:          # host index, 0 .. xr.process_count() - 1
    save_samples()
```
`xr.process_index()` and `xr.process_count()` number the hosts (processes) of the job;
`xr.global_runtime_device_count()` counts all devices.

## References
- https://docs.pytorch.org/xla/master/perf/spmd_basic.html
- torch_xla 2.9.0 `torch_xla/runtime.py` (`global_ordinal`, `world_size`, `process_index`)
"""
    valid = (
        Valid("import torch_xla.runtime as xr\nxr.use_spmd()\nif xr.process_index() == 0:\n    pass\n"),
        Valid("import torch_xla\nimport torch_xla.runtime as xr\n"
              "def _mp_fn(i):\n    return xr.global_ordinal()\n"
              "torch_xla.launch(_mp_fn, args=())\n"),
        Valid("import torch_xla.runtime as xr\nxr.use_spmd()\n"
              "if not xr.is_spmd():\n    rank = xr.global_ordinal()\n"),
    )
    invalid = (
        Invalid("import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\nxr.use_spmd()\n"
                "if xr.global_ordinal() == 0:\n    pass\nchief = xm.is_master_ordinal(local=False)\n", (4, 6)),
        Invalid("from torch_xla import runtime\nruntime.use_spmd()\nn = runtime.world_size()\n", (3,)),
        Invalid("import torch_xla.runtime as xr\nimport torch_xla.core.xla_model as xm\n"
                "if xr.is_spmd():\n    xm.master_print('hello')\n", (4,)),
    )

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qnames(node.func)
        for api, use in PROCESS_IDENTITY.items():
            if api in names:
                short = api.replace(apis.XR + ".", "xr.").replace(apis.XM + ".", "xm.") + "()"
                self.report(node, self.message.format(api=short, use=use), requires=[("spmd", True)])
                return
