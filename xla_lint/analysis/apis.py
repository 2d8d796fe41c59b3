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
# `dp.DataParallel(model, device_ids)(loop_fn, loader)` runs `loop_fn(model, per_device_loader,
# device, context)` on each device (torch_xla 2.9.0 distributed/data_parallel.py `__call__`,
# `_module_runner`): the loop function's second argument is a device loader.
DATA_PARALLEL = "torch_xla.distributed.data_parallel.DataParallel"
PARALLEL_LOADER = f"{PL}.ParallelLoader"
LAUNCH = "torch_xla.launch"
SPAWN = f"{XMP}.spawn"
TORCH_SAVE = "torch.save"
XM_SAVE = f"{XM}.save"
PRINT = "builtins.print"
INIT_PROCESS_GROUP = "torch.distributed.init_process_group"

# Calls whose result is a host value, not a device tensor: torch_xla 2.9.0
# `torch_xla/core/xla_model.py` `mesh_reduce` copies `data` to the CPU (`_maybe_convert_to_cpu`),
# exchanges it through `rendezvous` and returns `reduce_fn` applied to the host copies.
HOST_RESULT_FUNCTIONS = frozenset({f"{XM}.mesh_reduce"})

# Calls that only make sense with SPMD on (rule XLA002 reports them when it is off).
SPMD_APIS = frozenset(
    {
        MESH,
        HYBRID_MESH,
        MARK_SHARDING,
        MARK_SHARDING_WITH_GRADIENTS,
        SET_GLOBAL_MESH,
        FSDPV2,
        f"{XS}.get_1d_mesh",
    }
)
# Calls that make a program shard its tensors (rule XLA003 and others).
SHARDING_APIS = frozenset(
    {
        MESH,
        HYBRID_MESH,
        MARK_SHARDING,
        MARK_SHARDING_WITH_GRADIENTS,
        SET_GLOBAL_MESH,
        FSDPV2,
        f"{XS}.get_1d_mesh",
    }
)
LAUNCH_APIS = frozenset({LAUNCH, SPAWN})


def canonical(name: str) -> str:
    """The public dotted name of ``name`` (``torch_xla.distributed.spmd.xla_sharding.Mesh`` -> ``torch_xla.distributed.spmd.Mesh``)."""
    for old, new in _PREFIX_REWRITES:
        if name.startswith(old):
            return new + name[len(old) :]
    return name


# ---- removed APIs (rule XLA013; guards.py reads them for `hasattr` tests) ------------------

SPMD_EXPORTS = frozenset(
    {
        "XLAShard",
        "XLAShardedTensor",
        "Mesh",
        "HybridMesh",
        "ShardingType",
        "ShardingSpec",
        "XLAPatchedLinear",
        "mark_sharding",
        "mark_sharding_with_gradients",
        "clear_sharding",
        "get_1d_mesh",
        "wrap_if_sharded",
        "xla_patched_nn_linear_forward",
        "set_global_mesh",
        "get_global_mesh",
        "enable_manual_sharding",
        "disable_manual_sharding",
        "apply_backward_optimization_barrier",
        "shard_as",
        "annotate_custom_sharding",
        "xla_distribute_tensor",
        "xla_distribute_module",
        "auto_policy",
    }
)  # torch_xla 2.9.0 torch_xla/distributed/spmd/__init__.py
RUNTIME_EXPORTS = frozenset(
    {
        "addressable_device_count",
        "addressable_runtime_device_count",
        "device_type",
        "get_master_ip",
        "global_device_count",
        "global_ordinal",
        "global_runtime_device_attributes",
        "global_runtime_device_count",
        "host_index",
        "initialize_cache",
        "is_bf16_supported",
        "is_spmd",
        "local_device_count",
        "local_ordinal",
        "local_process_count",
        "process_count",
        "process_index",
        "runtime_device_attributes",
        "set_device_type",
        "use_spmd",
        "world_size",
    }
)  # torch_xla 2.9.0 torch_xla/runtime.py


class Removed:
    """A removed module or attribute: the release that removed it, where it went, the commit."""

    def __init__(
        self,
        removed_in: tuple[int, int],
        use: str | None,
        exports: frozenset[str] = frozenset(),
        exact: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.removed_in = removed_in
        self.use = use  # public replacement (module or callable), None when there is no single one
        self.exports = exports  # names the replacement module has (module rewrites only)
        self.exact = (
            exact  # the module the old one re-exported with `import *` (always a correct rewrite)
        )
        self.hint = hint  # what to do instead when there is no replacement to name


REMOVED_MODULES = {
    # d028176a0c "Remove SPMD stale files in experimental (#7499)", first in v2.5.0
    "torch_xla.experimental.xla_sharding": Removed(
        (2, 5),
        "torch_xla.distributed.spmd",
        SPMD_EXPORTS,
        "torch_xla.distributed.spmd.xla_sharding",
    ),
    "torch_xla.experimental.xla_sharded_tensor": Removed(
        (2, 5),
        "torch_xla.distributed.spmd",
        SPMD_EXPORTS,
        "torch_xla.distributed.spmd.xla_sharded_tensor",
    ),
    # ed15ea1e7f "Clean up experimental (#7579)", first in v2.5.0
    "torch_xla.experimental.pjrt": Removed((2, 5), "torch_xla.runtime", RUNTIME_EXPORTS),
    # f6409de358 "Delete XRT from the main branch (#5240)", first in v2.1.0: the XRT pod launcher
    "torch_xla.distributed.xla_dist": Removed(
        (2, 1),
        None,
        hint="under PJRT there is no launcher to call: run the script on every host "
        '(`gcloud compute tpus tpu-vm ssh NAME --worker=all --command="PJRT_DEVICE=TPU python '
        'train.py"`)',
    ),
}
REMOVED_ATTRS = {
    # da7fdca2d2 "Clean up deprecated APIs (#8927) (#8939)", first in v2.7.0; 2.5/2.6 aliased them
    f"{XM}.xrt_world_size": Removed((2, 7), f"{XR}.world_size"),
    f"{XM}.get_ordinal": Removed((2, 7), f"{XR}.global_ordinal"),
    f"{XM}.parse_xla_device": Removed((2, 7), None),
    "torch_xla.experimental.compile": Removed((2, 7), "torch_xla.compile"),  # same signature (f)
    # 1784a081d3 "Refactor call_jax to allow implementing ops in python (#9354)", first in v2.8.0
    # (added in 2.7 by 53b3ab8140, #8789): the computation is built inside call_jax now
    "torch_xla.core.xla_builder.jax_func_to_xla_computation": Removed(
        (2, 8),
        None,
        hint="run the JAX function with `xb.call_jax(jax_func, args, kwargs)` "
        "(torch_xla.core.xla_builder), which builds and caches the computation itself",
    ),
}
