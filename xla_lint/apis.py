"""Canonical names of the torch_xla APIs the rules ask about.

torch_xla re-exports most of its public API from private modules; a rule asks for
the public name and :func:`canonical` maps every other path to it. Checked against
the installed torch_xla 2.9.0:

- ``torch_xla/distributed/spmd/__init__.py`` re-exports ``Mesh``, ``HybridMesh``,
  ``mark_sharding``, ``set_global_mesh``, ``ShardingSpec``, ... from ``.xla_sharding``;
- ``torch_xla/__init__.py`` does ``from .torch_xla import *`` (``device``, ``sync``,
  ``step``, ``compile``, ``launch``, ``manual_seed``);
- ``torch_xla.experimental.xla_sharding`` was the home of the sharding API before
  it moved to ``torch_xla.distributed.spmd`` (gone in 2.9, see rule XLA013).
"""

from __future__ import annotations

# Old or private prefix -> public prefix. Order matters: longest first.
_PREFIX_REWRITES: tuple[tuple[str, str], ...] = (
    ("torch_xla.distributed.spmd.xla_sharding.", "torch_xla.distributed.spmd."),
    ("torch_xla.distributed.spmd.xla_sharded_tensor.", "torch_xla.distributed.spmd."),
    ("torch_xla.experimental.xla_sharding.", "torch_xla.distributed.spmd."),
    ("torch_xla.experimental.xla_sharded_tensor.", "torch_xla.distributed.spmd."),
    ("torch_xla.torch_xla.", "torch_xla."),
    ("torch_xla.experimental.pjrt.", "torch_xla.runtime."),
    ("torch.distributed.distributed_c10d.", "torch.distributed."),
    ("torch.nn.parallel.distributed.", "torch.nn.parallel."),
    ("torch.utils.data.dataloader.", "torch.utils.data."),
)

XM = "torch_xla.core.xla_model"
XR = "torch_xla.runtime"
XS = "torch_xla.distributed.spmd"
XMP = "torch_xla.distributed.xla_multiprocessing"
PL = "torch_xla.distributed.parallel_loader"
FSDPV2 = "torch_xla.experimental.spmd_fully_sharded_data_parallel.SpmdFullyShardedDataParallel"

USE_SPMD = f"{XR}.use_spmd"
IS_SPMD = f"{XR}.is_spmd"
MESH = f"{XS}.Mesh"
HYBRID_MESH = f"{XS}.HybridMesh"
MARK_SHARDING = f"{XS}.mark_sharding"
MARK_SHARDING_WITH_GRADIENTS = f"{XS}.mark_sharding_with_gradients"
SET_GLOBAL_MESH = f"{XS}.set_global_mesh"
SHARDING_SPEC = f"{XS}.ShardingSpec"
MP_DEVICE_LOADER = f"{PL}.MpDeviceLoader"
PARALLEL_LOADER = f"{PL}.ParallelLoader"
LAUNCH = "torch_xla.launch"
SPAWN = f"{XMP}.spawn"
TORCH_SAVE = "torch.save"
XM_SAVE = f"{XM}.save"
PRINT = "builtins.print"
INIT_PROCESS_GROUP = "torch.distributed.init_process_group"

# Calls that only make sense with SPMD on (rule XLA002 reports them when it is off).
SPMD_APIS = frozenset({MESH, HYBRID_MESH, MARK_SHARDING, MARK_SHARDING_WITH_GRADIENTS,
                       SET_GLOBAL_MESH, FSDPV2, f"{XS}.get_1d_mesh"})
# Calls that make a program shard its tensors (rule XLA003 and others).
SHARDING_APIS = frozenset({MESH, HYBRID_MESH, MARK_SHARDING, MARK_SHARDING_WITH_GRADIENTS,
                           SET_GLOBAL_MESH, FSDPV2, f"{XS}.get_1d_mesh"})
LAUNCH_APIS = frozenset({LAUNCH, SPAWN})


def canonical(name: str) -> str:
    """The public dotted name of ``name`` (``torch_xla.distributed.spmd.xla_sharding.Mesh`` -> ``torch_xla.distributed.spmd.Mesh``)."""
    for old, new in _PREFIX_REWRITES:
        if name.startswith(old):
            return new + name[len(old):]
    return name
