"""Saving and loading the state of sharded programs."""

from __future__ import annotations

import libcst as cst

from .. import apis
from ..diagnostics import Severity
from ..rule import Invalid, Rule, Valid


class TorchSaveSharded(Rule):
    code = "XLA003"
    name = "torch-save-sharded"
    summary = "torch.save/xm.save in a sharded program loses the sharding; use torch.distributed.checkpoint."
    message = ("`{api}` in a program that shards tensors gathers them, drops their sharding and has "
               "every host write the same path; save with `torch.distributed.checkpoint` and "
               "`SPMDSavePlanner`")
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `torch.save(...)` and `xm.save(...)` in a module that imports torch_xla, in a
program that shards (calls `mark_sharding`, builds a `Mesh`/`HybridMesh`, sets a global
mesh or wraps a model in FSDPv2).

## Why is this bad
`torch.save` and `xm.save` write ordinary tensors. A sharded XLA tensor is first
gathered to the host as a whole tensor (every shard copied to one host's memory: for a
large model it does not fit), the partition spec is not recorded, and in an SPMD job
every host runs the same line and writes the same path, so the hosts overwrite each
other on shared storage. `xm.save` only picks a "master ordinal", which in SPMD is true
on every host (`torch_xla/core/xla_model.py`, `save` and `is_master_ordinal`, 2.9.0).
The right tool is `torch.distributed.checkpoint` with torch_xla's SPMD planners, which
write each host's shards and the sharding metadata, and reshard on load
(`torch_xla/experimental/distributed_checkpoint/planners.py`).

## Example
```python
model = FSDPv2(model)
torch.save(model.state_dict(), "ckpt.pt")
```

## Use instead
```python
import torch.distributed.checkpoint as dist_cp
from torch_xla.experimental.distributed_checkpoint import SPMDLoadPlanner, SPMDSavePlanner

dist_cp.save(state_dict={"model": model.state_dict()},
             storage_writer=dist_cp.FileSystemWriter(ckpt_dir),
             planner=SPMDSavePlanner())
state = {"model": model.state_dict()}
dist_cp.load(state_dict=state, storage_reader=dist_cp.FileSystemReader(ckpt_dir),
             planner=SPMDLoadPlanner())
model.load_state_dict(state["model"])
```
On a pod, `ckpt_dir` must be storage every host can reach, and the hosts need a CPU
process group (`dist.init_process_group("gloo", init_method="xla://")`).
`torch_xla.experimental.distributed_checkpoint.CheckpointManager` wraps the same for
periodic checkpoints. `python -m xla_lint.runtime` checks a save/load round trip.

## References
- https://docs.pytorch.org/xla/master/perf/spmd_distributed_checkpoint.html
- torch_xla 2.9.0 `torch_xla/experimental/distributed_checkpoint/`
"""
    valid = (
        Valid("import torch\n\ndef save_table(table, path):\n    torch.save(table, path)\n"),
        Valid("import torch\nimport torch_xla\nmodel = torch.nn.Linear(2, 2).to('xla')\n"
              "torch.save(model.state_dict(), 'm.pt')\n"),
    )
    invalid = (
        Invalid("import torch\nimport torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
                "xr.use_spmd()\nxs.mark_sharding(w, mesh, ('fsdp', None))\n"
                "torch.save(model.state_dict(), 'ckpt.pt')\n", (6,)),
        Invalid("import torch_xla.core.xla_model as xm\n"
                "from torch_xla.experimental.spmd_fully_sharded_data_parallel import "
                "SpmdFullyShardedDataParallel as FSDPv2\n"
                "model = FSDPv2(net)\nxm.save(model.state_dict(), 'ckpt.pt')\n", (4,)),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.imports_torch_xla:
            return
        names = self.ctx.qnames(node.func)
        for api, short in ((apis.TORCH_SAVE, "torch.save"), (apis.XM_SAVE, "xm.save")):
            if api in names:
                self.report(node, self.message.format(api=short), requires=[("shards", True)])
                return
