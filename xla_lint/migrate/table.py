"""What each torch_xla 2.9.0 API becomes on TorchTPU 0.2.0: a class, a target and the step it belongs to.

The rows follow ``shared/reference/torchtpu-migration-map.md`` §3 (row numbers in :attr:`Entry.row`),
each checked against the torch-tpu 0.2.0 wheel's sources where the row names TorchTPU code; where
the map and the wheel disagree the wheel wins, and where the map's target does not keep what the
program computes, the class here says so (``xm.xla_device_hw`` returns ``"TPU"``, not the
``"TPU v7"`` of ``torch.tpu.get_device_name()``: a decision, not the map's rename). The TorchTPU
names a target suggests (:attr:`Entry.names`) are checked by the test suite against
``xla_lint/data/torchtpu_api.json`` (written by ``tools/torchtpu_api.py`` from the wheel): every
``torch.tpu`` name must be public and not internal (``torch.tpu.device_count()`` and
``is_available()`` raise from user code on torch >= 2.11, so ``torch.accelerator.*`` is
suggested), and every other name must exist in the installed torch.

Classes (:data:`CLASSES`, in the order a team plans them):

- ``mechanical``: a rename that keeps what the code computes; ``--fix`` writes it;
- ``behaviour-change``: an equivalent that changes when or how the work runs (a step boundary
  that becomes nothing in eager mode); ``--fix --unsafe-fixes`` writes it;
- ``decision``: a person must choose (a mesh's shape, a rank or a host, a launcher); never
  rewritten;
- ``no-equivalent``: TorchTPU has nothing in its place; the target says what to do instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.apis import INIT_PROCESS_GROUP, XM, XR, XS
from ..analysis.torchtpu import torchtpu_api as _torchtpu_api

MECHANICAL = "mechanical"
BEHAVIOUR = "behaviour-change"
DECISION = "decision"
NO_EQUIVALENT = "no-equivalent"
CLASSES = (MECHANICAL, BEHAVIOUR, DECISION, NO_EQUIVALENT)

# The order to migrate in: launch and processes first (everything else runs inside them), the
# device and step scaffolding, identities, sharding, collectives, data, kernels, debugging,
# and last the torch_xla imports, which go once nothing uses them.
PHASES: tuple[tuple[str, str], ...] = (
    ("launch", "launch, processes and process groups"),
    ("device", "device, step boundaries and compilation"),
    ("identity", "ranks, world size and hosts"),
    ("sharding", "meshes, sharding and FSDP"),
    ("collectives", "collectives, optimizer steps and checkpoints"),
    ("data", "data loading"),
    ("kernels", "kernels and compiled loops"),
    ("debug", "metrics, profiling, caches and debug variables"),
    ("imports", "torch_xla imports (remove once nothing uses them)"),
)


@dataclass(frozen=True)
class Entry:
    """One torch_xla API's migration.

    ``cls``: one of :data:`CLASSES`; ``target``: the TorchTPU code or the instruction;
    ``phase``: a key of :data:`PHASES`; ``row``: the map's row (None: not in the map);
    ``rewrite``: the name of the rewrite in :mod:`xla_lint.migrate.rewrites` (None: not
    rewritten); ``names``: the public names ``target`` suggests (checked by the tests);
    ``by_mode``: mechanical only in a program that runs one process per device (``xmp.spawn``,
    ``torch_xla.launch``, ``torchrun``), where a torch_xla ordinal is a ``torch.distributed``
    rank; a decision in an SPMD, single-process or library module (one process drives many
    devices there, so a rank is not what the code meant).
    """

    cls: str
    target: str
    phase: str
    row: int | None = None
    rewrite: str | None = None
    names: tuple[str, ...] = ()
    by_mode: bool = False


_SYNC_TARGET = (
    "delete it: TorchTPU runs ops eagerly (EagerMode.DEFER_NEVER, the default) and has no "
    "pending graph to cut; do not put torch.accelerator.synchronize() there (a blocking wait "
    "every step)"
)

APIS: dict[str, Entry] = {
    # -- launch ------------------------------------------------------------------------------
    "torch_xla.distributed.xla_multiprocessing.spawn": Entry(
        DECISION,
        "torch.tpu.distributed.set_tpu_launch_env(nproc_per_node=N) in the parent, then "
        'torch.multiprocessing.spawn(fn, args=..., nprocs=N) (start method "spawn" only), or '
        "python -m torch.tpu.distributed + torchrun; each worker calls "
        'dist.init_process_group("tpu") and needs RANK/WORLD_SIZE; nprocs=None has no default',
        "launch",
        26,
        names=("torch.tpu.distributed.set_tpu_launch_env", "torch.multiprocessing.spawn"),
    ),
    "torch_xla.launch": Entry(
        DECISION,
        "as xmp.spawn: torch.tpu.distributed.set_tpu_launch_env(nproc_per_node=N) + "
        "torch.multiprocessing.spawn, or torchrun; debug_single_process has no equivalent",
        "launch",
        26,
        names=("torch.tpu.distributed.set_tpu_launch_env", "torch.multiprocessing.spawn"),
    ),
    INIT_PROCESS_GROUP: Entry(
        MECHANICAL,
        'dist.init_process_group("tpu") (init_method="xla://" dropped: the default env:// '
        "reads RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT)",
        "launch",
        27,
        rewrite="process_group",
        names=("torch.distributed.init_process_group",),
    ),
    f"{XR}.use_spmd": Entry(
        NO_EQUIVALENT,
        "delete it: TorchTPU is multi-controller (one process per device) and has no "
        "single-controller SPMD mode; move the sharding to DTensor/DeviceMesh/FSDP2",
        "launch",
        17,
        rewrite="delete_statement",
    ),
    f"{XR}.is_spmd": Entry(
        DECISION,
        "no SPMD mode on TorchTPU: keep the branch the migrated program takes (DTensor "
        "sharding), delete the other",
        "launch",
        17,
    ),
    # -- device and step ---------------------------------------------------------------------
    "torch_xla.device": Entry(
        MECHANICAL,
        'torch.device("tpu") (each process owns one device, seen as tpu:0)',
        "device",
        1,
        rewrite="device",
        names=("torch.device",),
    ),
    f"{XM}.xla_device": Entry(
        MECHANICAL,
        'torch.device("tpu") (each process owns one device, seen as tpu:0)',
        "device",
        1,
        rewrite="device",
        names=("torch.device",),
    ),
    "torch.device": Entry(
        MECHANICAL,
        'torch.device("tpu") (the PrivateUse1 backend is renamed "tpu")',
        "device",
        1,
        rewrite="device_string",
        names=("torch.device",),
    ),
    "torch_xla.devices": Entry(
        DECISION,
        "torch.accelerator.device_count() for this host's devices (not TorchTPU's own "
        "device_count, internal: it raises from user code), or dist.get_world_size() for the "
        "job's; each process sees only its own device",
        "device",
        50,
        names=("torch.accelerator.device_count", "torch.distributed.get_world_size"),
    ),
    "torch_xla.device_count": Entry(
        DECISION,
        "torch.accelerator.device_count() (local) or dist.get_world_size() (global)",
        "device",
        50,
        names=("torch.accelerator.device_count", "torch.distributed.get_world_size"),
    ),
    f"{XR}.global_runtime_device_count": Entry(
        DECISION,
        "dist.get_world_size() (one process per device), or torch.accelerator.device_count() "
        "for this host",
        "device",
        50,
        names=("torch.accelerator.device_count", "torch.distributed.get_world_size"),
    ),
    f"{XR}.local_device_count": Entry(
        DECISION,
        "torch.accelerator.device_count() (this host's devices)",
        "device",
        50,
        names=("torch.accelerator.device_count",),
    ),
    f"{XR}.addressable_device_count": Entry(
        DECISION,
        "1: a TorchTPU process addresses one device",
        "device",
        50,
    ),
    f"{XR}.global_device_count": Entry(
        DECISION,
        "dist.get_world_size() (one process per device)",
        "device",
        50,
        names=("torch.distributed.get_world_size",),
    ),
    f"{XM}.get_xla_supported_devices": Entry(
        DECISION,
        "torch.accelerator.device_count() (local devices); each process uses tpu:0",
        "device",
        50,
        names=("torch.accelerator.device_count",),
    ),
    f"{XM}.xla_device_hw": Entry(
        DECISION,
        "the hardware type: always a TPU on TorchTPU; torch.tpu.get_device_name() gives its "
        'generation ("TPU v7"), not "TPU", so comparisons must change',
        "device",
        49,
        names=("torch.tpu.get_device_name",),
    ),
    f"{XM}.xla_device_kind": Entry(
        DECISION,
        'torch.tpu.get_device_name() ("TPU v7"; the wording differs from torch_xla\'s kind)',
        "device",
        49,
        names=("torch.tpu.get_device_name",),
    ),
    "torch_xla.sync": Entry(BEHAVIOUR, _SYNC_TARGET, "device", 2, rewrite="delete_statement"),
    f"{XM}.mark_step": Entry(BEHAVIOUR, _SYNC_TARGET, "device", 2, rewrite="delete_statement"),
    "torch_xla.step": Entry(
        BEHAVIOUR,
        "unwrap the with (keep its body): ops run eagerly, there is no step graph",
        "device",
        2,
        rewrite="unwrap_with",
    ),
    f"{XM}.wait_device_ops": Entry(
        MECHANICAL,
        "torch.accelerator.synchronize()",
        "device",
        41,
        rewrite="wait_device_ops",
        names=("torch.accelerator.synchronize",),
    ),
    f"{XM}.add_step_closure": Entry(
        BEHAVIOUR,
        "call fn(*args) where it stands: ops are eager (it materialises if it reads "
        "tensors; keep it out of hot loops)",
        "device",
        47,
        rewrite="step_closure",
    ),
    f"{XM}.optimization_barrier_": Entry(
        BEHAVIOUR,
        "tensors = torch.tpu.ops.optimization_barrier(tensors): it returns new tensors, "
        "it does not work in place",
        "device",
        44,
        names=("torch.tpu.ops.optimization_barrier",),
    ),
    # The map's row 48 says torch.manual_seed(s); that also reseeds the CPU generator (a
    # checkpoint's restored CPU state would be lost), where torch_xla seeds the device only
    # (torch_xla/core/xla_model.py set_rng_state): torch.tpu.manual_seed seeds this process's TPU.
    "torch_xla.manual_seed": Entry(
        MECHANICAL,
        "torch.tpu.manual_seed(seed) (this process's TPU only, as torch_xla seeded its device)",
        "device",
        48,
        rewrite="manual_seed",
        names=("torch.tpu.manual_seed",),
    ),
    f"{XM}.set_rng_state": Entry(
        MECHANICAL,
        "torch.tpu.manual_seed(seed) (this process's TPU only)",
        "device",
        48,
        rewrite="manual_seed",
        names=("torch.tpu.manual_seed",),
    ),
    f"{XM}.get_rng_state": Entry(
        DECISION,
        "torch.get_rng_state() or a torch.Generator (TorchTPU's own get_rng_state is internal "
        "on torch >= 2.13: it raises from user code)",
        "device",
        48,
        names=("torch.get_rng_state",),
    ),
    "torch.autocast": Entry(
        MECHANICAL,
        'torch.autocast("tpu", ...)',
        "device",
        35,
        rewrite="autocast",
        names=("torch.autocast",),
    ),
    "torch.amp.autocast": Entry(
        MECHANICAL,
        'torch.autocast("tpu", ...)',
        "device",
        35,
        rewrite="autocast",
        names=("torch.autocast",),
    ),
    "torch_xla.amp.autocast": Entry(
        MECHANICAL,
        'torch.autocast("tpu", ...) (bf16 is the TPU autocast dtype)',
        "device",
        35,
        rewrite="xla_autocast",
        names=("torch.autocast",),
    ),
    "torch.compile": Entry(
        MECHANICAL,
        'torch.compile(..., backend="tpu")',
        "device",
        42,
        rewrite="compile_backend",
        names=("torch.compile",),
    ),
    "torch_xla.compile": Entry(
        DECISION,
        'torch.compile(f, backend="tpu", fullgraph=full_graph) (dynamic=False is injected); '
        "name has no equivalent, max_different_graphs becomes "
        "torch._dynamo.config.recompile_limit; Dynamo captures with graph breaks where "
        "torch_xla traced lazily",
        "device",
        3,
        names=("torch.compile",),
    ),
    "torch_xla.experimental.eager_mode": Entry(
        NO_EQUIVALENT,
        "delete it: eager (EagerMode.DEFER_NEVER) is TorchTPU's default",
        "device",
        52,
        rewrite="delete_statement",
    ),
    "torch_xla.backends.set_mat_mul_precision": Entry(
        MECHANICAL,
        'torch.set_float32_matmul_precision("medium" | "high" | "highest") ("default" '
        'becomes "medium", 1-pass bf16), or with torch.tpu.precision(torch.tpu.Precision.X)',
        "device",
        43,
        rewrite="mat_mul_precision",
        names=("torch.set_float32_matmul_precision", "torch.tpu.precision", "torch.tpu.Precision"),
    ),
    f"{XR}.is_bf16_supported": Entry(
        NO_EQUIVALENT, "True: bf16 is always supported on TPU", "device", 51
    ),
    # -- identity ----------------------------------------------------------------------------
    f"{XR}.global_ordinal": Entry(
        MECHANICAL,
        "torch.distributed.get_rank() (after init_process_group)",
        "identity",
        12,
        rewrite="rank",
        names=("torch.distributed.get_rank",),
        by_mode=True,
    ),
    f"{XM}.get_ordinal": Entry(
        MECHANICAL,
        "torch.distributed.get_rank() (after init_process_group)",
        "identity",
        12,
        rewrite="rank",
        names=("torch.distributed.get_rank",),
        by_mode=True,
    ),
    f"{XR}.world_size": Entry(
        MECHANICAL,
        "torch.distributed.get_world_size() (after init_process_group)",
        "identity",
        13,
        rewrite="world_size",
        names=("torch.distributed.get_world_size",),
        by_mode=True,
    ),
    f"{XM}.xrt_world_size": Entry(
        MECHANICAL,
        "torch.distributed.get_world_size() (after init_process_group)",
        "identity",
        13,
        rewrite="world_size",
        names=("torch.distributed.get_world_size",),
        by_mode=True,
    ),
    f"{XR}.local_ordinal": Entry(
        DECISION,
        'int(os.environ["LOCAL_RANK"]) under torchrun; with torch.multiprocessing.spawn, the '
        "spawn index",
        "identity",
        16,
    ),
    f"{XM}.get_local_ordinal": Entry(
        DECISION,
        'int(os.environ["LOCAL_RANK"]) under torchrun; with torch.multiprocessing.spawn, the '
        "spawn index",
        "identity",
        16,
    ),
    f"{XM}.is_master_ordinal": Entry(
        DECISION,
        'int(os.environ["LOCAL_RANK"]) == 0 (local=True, the default) or '
        "torch.distributed.get_rank() == 0 (local=False)",
        "identity",
        11,
        names=("torch.distributed.get_rank",),
    ),
    f"{XR}.process_index": Entry(
        DECISION,
        "a rank or a host? torch.distributed.get_rank() (one process per device), or "
        'int(os.environ["NODE_RANK"]) for the host index SPMD code meant',
        "identity",
        14,
        names=("torch.distributed.get_rank",),
    ),
    f"{XR}.process_count": Entry(
        DECISION,
        'torch.distributed.get_world_size(), or int(os.environ["NNODES"]) for hosts',
        "identity",
        15,
        names=("torch.distributed.get_world_size",),
    ),
    f"{XR}.host_index": Entry(
        DECISION,
        'int(os.environ["NODE_RANK"]) (set by python -m torch.tpu.distributed)',
        "identity",
        14,
    ),
    # -- sharding ----------------------------------------------------------------------------
    f"{XS}.Mesh": Entry(
        DECISION,
        'DeviceMesh("tpu", torch.tpu.distributed.topology_aware_mesh(mesh_shape), '
        'mesh_dim_names=axis_names) or init_device_mesh("tpu", mesh_shape, '
        "mesh_dim_names=axis_names); custom device_ids orders do not carry over; needs a "
        "process group",
        "sharding",
        18,
        names=(
            "torch.distributed.device_mesh.DeviceMesh",
            "torch.distributed.device_mesh.init_device_mesh",
            "torch.tpu.distributed.topology_aware_mesh",
        ),
    ),
    f"{XS}.HybridMesh": Entry(
        DECISION,
        "topology_aware_mesh(mesh_shape=tuple(i * d for i, d in zip(ici, dcn)), "
        "dcn_mesh_shape=dcn) + DeviceMesh: mesh_shape is the whole job's shape (HybridMesh "
        "took the per-slice ICI shape)",
        "sharding",
        19,
        names=(
            "torch.tpu.distributed.topology_aware_mesh",
            "torch.distributed.device_mesh.DeviceMesh",
        ),
    ),
    f"{XS}.get_1d_mesh": Entry(
        DECISION,
        'init_device_mesh("tpu", (dist.get_world_size(),), mesh_dim_names=(axis_name,)); '
        "its users change with it (DTensor placements, not partition specs)",
        "sharding",
        22,
        names=("torch.distributed.device_mesh.init_device_mesh",),
    ),
    f"{XS}.set_global_mesh": Entry(
        DECISION, "no global mesh: pass the DeviceMesh where it is used", "sharding", 18
    ),
    f"{XS}.get_global_mesh": Entry(
        DECISION, "no global mesh: pass the DeviceMesh where it is used", "sharding", 18
    ),
    f"{XS}.mark_sharding": Entry(
        DECISION,
        "DTensor: distribute_tensor(t, mesh, [Shard(i) or Replicate() per mesh dim]) or "
        "DTensor.from_local(local, mesh, placements, shape=, stride=); every rank now holds "
        "a local shard, not one global tensor",
        "sharding",
        20,
        names=(
            "torch.distributed.tensor.distribute_tensor",
            "torch.distributed.tensor.DTensor",
            "torch.distributed.tensor.Shard",
            "torch.distributed.tensor.Replicate",
        ),
    ),
    f"{XS}.mark_sharding_with_gradients": Entry(
        DECISION,
        "DTensor placements (distribute_tensor / DTensor.from_local); gradients follow "
        "the parameter's placements",
        "sharding",
        20,
        names=("torch.distributed.tensor.distribute_tensor",),
    ),
    f"{XS}.clear_sharding": Entry(
        DECISION,
        "dt.full_tensor() or dt.redistribute(mesh, [Replicate()])",
        "sharding",
        21,
        names=("torch.distributed.tensor.DTensor", "torch.distributed.tensor.Replicate"),
    ),
    "torch_xla.experimental.spmd_fully_sharded_data_parallel.SpmdFullyShardedDataParallel": Entry(
        DECISION,
        "torch.distributed.fsdp.fully_shard(module, mesh=...) (FSDP2) per layer; "
        "shard_output and auto_wrap_policy must be rethought",
        "sharding",
        23,
        names=("torch.distributed.fsdp.fully_shard",),
    ),
    "torch_xla.distributed.fsdp.XlaFullyShardedDataParallel": Entry(
        DECISION,
        "torch.distributed.fsdp.fully_shard (FSDP2) or DistributedDataParallel",
        "sharding",
        24,
        names=("torch.distributed.fsdp.fully_shard", "torch.nn.parallel.DistributedDataParallel"),
    ),
    # -- collectives -------------------------------------------------------------------------
    f"{XM}.optimizer_step": Entry(
        DECISION,
        "optimizer.step() on averaged gradients: wrap the model in DistributedDataParallel "
        "(no device_ids) or dist.all_reduce each grad and divide by the world size",
        "collectives",
        4,
        names=("torch.nn.parallel.DistributedDataParallel", "torch.distributed.all_reduce"),
    ),
    f"{XM}.all_reduce": Entry(
        DECISION,
        "dist.all_reduce(t, op=dist.ReduceOp.SUM, group=pg): in place, returns Work/None, "
        "not a tensor; map the reduce type to ReduceOp, apply scale yourself, groups -> "
        "dist.new_group",
        "collectives",
        5,
        names=("torch.distributed.all_reduce", "torch.distributed.new_group"),
    ),
    f"{XM}.all_gather": Entry(
        DECISION,
        "torch.tpu.ops.all_gather_dim(t, dim, group) (no autograd), or "
        "dist.all_gather_into_tensor / functional collectives when gradients must flow",
        "collectives",
        6,
        names=("torch.tpu.ops.all_gather_dim", "torch.distributed.all_gather_into_tensor"),
    ),
    f"{XM}.reduce_scatter": Entry(
        DECISION,
        'torch.tpu.ops.reduce_scatter_dim(t, dim, group, reduce_op="sum") (no autograd), or '
        "dist.reduce_scatter_tensor; scale and shard_count by hand",
        "collectives",
        7,
        names=("torch.tpu.ops.reduce_scatter_dim", "torch.distributed.reduce_scatter_tensor"),
    ),
    f"{XM}.all_to_all": Entry(
        DECISION,
        "dist.all_to_all_single (split/concat dimensions by hand)",
        "collectives",
        None,
        names=("torch.distributed.all_to_all_single",),
    ),
    f"{XM}.rendezvous": Entry(
        DECISION,
        "dist.barrier() (no tag); a payload goes through dist.all_gather_object",
        "collectives",
        8,
        names=("torch.distributed.barrier", "torch.distributed.all_gather_object"),
    ),
    f"{XM}.mesh_reduce": Entry(
        DECISION,
        "out = [None] * world_size; dist.all_gather_object(out, data); reduce_fn(out)",
        "collectives",
        9,
        names=("torch.distributed.all_gather_object",),
    ),
    f"{XM}.save": Entry(
        DECISION,
        "move to CPU on every rank, then torch.save on rank 0 (LOCAL_RANK == 0 per host), or "
        "torch.distributed.checkpoint; saving is a materialisation point every rank must reach",
        "collectives",
        10,
        names=("torch.save", "torch.distributed.checkpoint.save"),
    ),
    f"{XM}.reduce_gradients": Entry(
        DECISION,
        "DistributedDataParallel, or dist.all_reduce of each gradient / world size",
        "collectives",
        4,
        names=("torch.nn.parallel.DistributedDataParallel", "torch.distributed.all_reduce"),
    ),
    "torch_xla.amp.syncfree.Adam": Entry(
        MECHANICAL,
        "torch.optim.Adam",
        "collectives",
        34,
        rewrite="optimizer",
        names=("torch.optim.Adam",),
    ),
    "torch_xla.amp.syncfree.AdamW": Entry(
        MECHANICAL,
        "torch.optim.AdamW",
        "collectives",
        34,
        rewrite="optimizer",
        names=("torch.optim.AdamW",),
    ),
    "torch_xla.amp.syncfree.SGD": Entry(
        MECHANICAL,
        "torch.optim.SGD",
        "collectives",
        34,
        rewrite="optimizer",
        names=("torch.optim.SGD",),
    ),
    # -- data --------------------------------------------------------------------------------
    "torch_xla.distributed.parallel_loader.MpDeviceLoader": Entry(
        NO_EQUIVALENT,
        'a plain DataLoader(..., drop_last=True) and x.to("tpu", non_blocking=True) per batch '
        "(no background prefetch thread, no per-batch step boundary)",
        "data",
        25,
        names=("torch.utils.data.DataLoader",),
    ),
    "torch_xla.distributed.parallel_loader.ParallelLoader": Entry(
        NO_EQUIVALENT,
        'a plain DataLoader(..., drop_last=True) and x.to("tpu", non_blocking=True) per batch',
        "data",
        25,
        names=("torch.utils.data.DataLoader",),
    ),
    # -- kernels -----------------------------------------------------------------------------
    "torch_xla.experimental.scan.scan": Entry(
        DECISION,
        "torch._higher_order_ops.scan.scan(fn, init, xs) (same (carry, x) -> (carry, y) "
        "contract, a prototype upstream; partition_fn and is_fn_pure are dropped)",
        "kernels",
        31,
    ),
    "torch_xla.experimental.scan_layers.scan_layers": Entry(
        NO_EQUIVALENT,
        "a plain loop over the layers (optionally under torch.compile)",
        "kernels",
        32,
    ),
    "torch_xla.experimental.assume_pure.assume_pure": Entry(
        NO_EQUIVALENT,
        "drop it: no lazy tracing to skip in eager mode; torch.compile caches graphs",
        "kernels",
        33,
        names=("torch.compile",),
    ),
    "torch_xla.experimental.custom_kernel.flash_attention": Entry(
        DECISION,
        "torch.tpu.ops.splash_sdpa(q, k, v, is_causal=...) (needs jax; is_causal defaults to "
        "True) or F.scaled_dot_product_attention",
        "kernels",
        45,
        names=("torch.tpu.ops.splash_sdpa", "torch.nn.functional.scaled_dot_product_attention"),
    ),
    "torch_xla.experimental.splash_attention": Entry(
        DECISION,
        "torch.tpu.ops.splash_sdpa(q, k, v, is_causal=...) (needs jax; is_causal defaults to "
        "True) or F.scaled_dot_product_attention",
        "kernels",
        45,
        names=("torch.tpu.ops.splash_sdpa", "torch.nn.functional.scaled_dot_product_attention"),
    ),
    "torch_xla.experimental.custom_kernel.make_kernel_from_pallas": Entry(
        DECISION,
        "torch.tpu.pallas.jax_op(name, fn, donate_argnums=, mesh=, input_partition_specs=, "
        "output_partition_specs=)",
        "kernels",
        46,
        names=("torch.tpu.pallas.jax_op",),
    ),
    "torch_xla.core.xla_builder.call_jax": Entry(
        DECISION,
        "torch.tpu.pallas.jax_op(name, fn, ...)",
        "kernels",
        46,
        names=("torch.tpu.pallas.jax_op",),
    ),
    # -- helpers real trainers use (pytorch/xla examples, accelerate) ---------------------------
    f"{XM}.master_print": Entry(
        DECISION,
        "print only where torch.distributed.get_rank() == 0 (or LOCAL_RANK == 0 per host)",
        "identity",
        None,
        names=("torch.distributed.get_rank",),
    ),
    f"{XM}._fetch_gradients": Entry(
        DECISION,
        "a private torch_xla helper: [p.grad for g in opt.param_groups for p in g['params'] "
        "if p.grad is not None], then dist.all_reduce each (or DistributedDataParallel)",
        "collectives",
        4,
        names=("torch.distributed.all_reduce",),
    ),
    f"{XM}._maybe_convert_to_cpu": Entry(
        DECISION,
        "a private torch_xla helper: t.cpu() for each tensor (torch.utils._pytree.tree_map "
        "for nested data)",
        "collectives",
        None,
    ),
    f"{XM}.RateTracker": Entry(
        NO_EQUIVALENT, "measure samples per second with time.perf_counter()", "debug", None
    ),
    "torch_xla.utils.utils.SampleGenerator": Entry(
        NO_EQUIVALENT,
        'a synthetic batch built with torch (torch.randn(..., device="tpu")) repeated per step',
        "data",
        None,
    ),
    f"{XR}.device_type": Entry(
        DECISION,
        'torch.accelerator.current_accelerator().type ("tpu", lower case; torch_xla said "TPU")',
        "device",
        None,
        names=("torch.accelerator.current_accelerator",),
    ),
    f"{XM}.send_cpu_data_to_device": Entry(
        DECISION,
        'x.to("tpu") for each tensor (torch.utils._pytree.tree_map for nested data)',
        "data",
        None,
    ),
    f"{XM}.collective_broadcast": Entry(
        DECISION,
        "dist.broadcast(t, src=0) for each tensor (in place)",
        "collectives",
        None,
        names=("torch.distributed.broadcast",),
    ),
    f"{XM}.REDUCE_SUM": Entry(
        DECISION,
        "torch.distributed.ReduceOp.SUM with dist.all_reduce",
        "collectives",
        5,
        names=("torch.distributed.ReduceOp",),
    ),
    f"{XM}.REDUCE_MAX": Entry(
        DECISION,
        "torch.distributed.ReduceOp.MAX with dist.all_reduce",
        "collectives",
        5,
        names=("torch.distributed.ReduceOp",),
    ),
    f"{XM}.REDUCE_MIN": Entry(
        DECISION,
        "torch.distributed.ReduceOp.MIN with dist.all_reduce",
        "collectives",
        5,
        names=("torch.distributed.ReduceOp",),
    ),
    f"{XM}.set_replication": Entry(
        NO_EQUIVALENT,
        'none: the process group (dist.init_process_group("tpu")) is the replication',
        "launch",
        None,
    ),
    "torch_xla.distributed.xla_multiprocessing.MpModelWrapper": Entry(
        NO_EQUIVALENT,
        "none: each spawned process builds its own model and moves it to tpu:0",
        "launch",
        26,
    ),
    "torch_xla.amp.GradScaler": Entry(
        DECISION,
        "drop it when training in bf16 (no scaling needed); for float16, torch.amp.GradScaler "
        "(not verified on TPU)",
        "collectives",
        None,
        names=("torch.amp.GradScaler",),
    ),
    # -- debug -------------------------------------------------------------------------------
    f"{XR}.initialize_cache": Entry(
        DECISION,
        "environment TORCH_TPU_TIER2_COMPILATION_CACHE=<name> (host-local) and "
        "TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT=<dir or gs://>, set before import torch; no "
        "readonly",
        "debug",
        30,
    ),
}

DEVICE_STRING = Entry(
    MECHANICAL,
    'the "tpu" device (the PrivateUse1 backend TorchTPU names "tpu")',
    "device",
    1,
    names=("torch.device",),
)
DEVICE_INDEX = Entry(
    DECISION,
    'each process owns one device, "tpu" (tpu:0); an index other than 0 means the process '
    "layout changes",
    "device",
    1,
)

# Modules whose every member shares one migration (names not in APIS resolve here, longest first).
MODULES: dict[str, Entry] = {
    "torch_xla.debug.metrics": Entry(
        NO_EQUIVALENT,
        "no public equivalent: TORCH_LOGS=recompiles, torch._dynamo.utils.counters under "
        "torch.compile",
        "debug",
        28,
    ),
    "torch_xla.debug.profiler": Entry(
        DECISION,
        "torch.profiler.profile(..., experimental_config=torch.tpu.profiler.TpuProfilerConfig("
        "run_dir=..., worker_rank=str(rank))); xp.Trace(name) -> "
        "torch.profiler.record_function(name); start_server is internal only",
        "debug",
        29,
        names=(
            "torch.profiler.profile",
            "torch.tpu.profiler.TpuProfilerConfig",
            "torch.profiler.record_function",
        ),
    ),
    "torch_xla.distributed.spmd": Entry(
        DECISION,
        "DTensor / DeviceMesh / FSDP2 (torch.distributed.tensor): no TorchTPU SPMD API",
        "sharding",
        20,
        names=("torch.distributed.tensor.DTensor",),
    ),
    "torch_xla.experimental.custom_kernel": Entry(
        DECISION,
        "torch.tpu.pallas.jax_op for Pallas kernels, torch.tpu.ops.* for TorchTPU's own",
        "kernels",
        46,
        names=("torch.tpu.pallas.jax_op",),
    ),
    "torch_xla.distributed.fsdp": Entry(
        DECISION,
        "torch.distributed.fsdp.fully_shard (FSDP2)",
        "sharding",
        24,
        names=("torch.distributed.fsdp.fully_shard",),
    ),
    "torch_xla.distributed.xla_dist": Entry(
        NO_EQUIVALENT,
        "torchrun, or python -m torch.tpu.distributed to print the launch environment",
        "launch",
        26,
    ),
    "torch_xla._XLAC": Entry(
        NO_EQUIVALENT,
        "torch_xla's C++ bindings: nothing in their place; find the public PyTorch API for "
        "what the call did",
        "debug",
        None,
    ),
    "torch_xla.distributed.xla_backend": Entry(
        MECHANICAL,
        'nothing to import: the "tpu" process-group backend registers itself',
        "launch",
        27,
    ),
}

# What is left: a torch_xla name no row covers.
UNMAPPED = Entry(
    DECISION,
    "no verified TorchTPU equivalent: rewrite with upstream PyTorch (torch.distributed, "
    "DTensor, torch.compile) or drop it",
    "device",
)

IMPORT = Entry(
    MECHANICAL,
    "remove the import once nothing in the file uses it",
    "imports",
    rewrite="delete_import",
)

ENV: dict[str, Entry] = {
    "PJRT_DEVICE": Entry(
        NO_EQUIVALENT,
        "delete it: the TPU is found at import torch (TORCH_DEVICE_BACKEND_AUTOLOAD=0 opts "
        'out); PJRT_DEVICE=CPU has no equivalent, use the "cpu" device',
        "launch",
        36,
    ),
    "XLA_USE_SPMD": Entry(
        NO_EQUIVALENT, "delete it: no single-controller SPMD mode on TorchTPU", "launch", 17
    ),
    "XLA_USE_BF16": Entry(
        NO_EQUIVALENT,
        'none: model.to(torch.bfloat16) or torch.autocast("tpu")',
        "device",
        37,
    ),
    "XLA_DOWNCAST_BF16": Entry(
        NO_EQUIVALENT,
        'none: model.to(torch.bfloat16) or torch.autocast("tpu")',
        "device",
        37,
    ),
    "XLA_IR_DEBUG": Entry(
        NO_EQUIVALENT,
        'none: XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text" and '
        "TORCH_SHOW_CPP_STACKTRACES=1",
        "debug",
        38,
    ),
    "XLA_HLO_DEBUG": Entry(
        NO_EQUIVALENT,
        'none: XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text"',
        "debug",
        38,
    ),
    "PT_XLA_DEBUG_LEVEL": Entry(
        NO_EQUIVALENT,
        'none: TORCH_LOGS="recompiles,graph_breaks", torch._dynamo.explain, '
        "TORCH_TPU_LAUNCH_BLOCKING=1",
        "debug",
        39,
    ),
    "PT_XLA_DEBUG": Entry(NO_EQUIVALENT, 'none: TORCH_LOGS="recompiles,graph_breaks"', "debug", 39),
    "XLA_FLAGS": Entry(MECHANICAL, "keep it: TorchTPU passes XLA_FLAGS to XLA", "debug", 53),
    "LIBTPU_INIT_ARGS": Entry(
        MECHANICAL,
        "keep it: TorchTPU passes it to libtpu (it rewrites "
        "--xla_tpu_use_enhanced_launch_barrier=true to false)",
        "debug",
        53,
    ),
    "XLA_PERSISTENT_CACHE_PATH": Entry(
        DECISION,
        "TORCH_TPU_TIER2_COMPILATION_CACHE / TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT",
        "debug",
        30,
    ),
}
# TPU_* variables torch_xla 2.9.0 reads or sets (torch_xla/__init__.py, _internal/tpu.py,
# core/xla_env_vars.py): the wheel of torch-tpu 0.2.0 spells only TPU_WORKER_HOSTNAMES (multi-host
# detection, torch_tpu/_internal/distributed/distributed.py); libtpu, a separate package, may read
# the others, which is not verified here. TPU_WORKER_ID and TPU_ACCELERATOR_TYPE are not listed:
# the platform (GKE, the TPU VM's metadata) sets them and programs read them for their own ends
# (torchprime's launcher names its worker by TPU_WORKER_ID), not a torch_xla setting.
_TPU_LAYOUT = Entry(
    DECISION,
    "a torch_xla process-layout variable (one process per chip): TorchTPU sets the layout with "
    "torch.tpu.distributed.set_tpu_launch_env (TORCH_TPU_TOPOLOGY, ...) or python -m "
    "torch.tpu.distributed; delete it unless libtpu needs it (not verified)",
    "launch",
    26,
    names=("torch.tpu.distributed.set_tpu_launch_env",),
)
ENV.update(
    {
        name: _TPU_LAYOUT
        for name in (
            "TPU_VISIBLE_CHIPS",
            "TPU_PROCESS_BOUNDS",
            "TPU_CHIPS_PER_PROCESS_BOUNDS",
            "TPU_HOST_BOUNDS",
            "TPU_CHIPS_PER_HOST_BOUNDS",
            "TPU_NUM_DEVICES",
            "TPU_PROCESS_PORT",
            "TPU_PROCESS_ADDRESSES",
            "TPU_MESH_CONTROLLER_ADDRESS",
            "TPU_MESH_CONTROLLER_PORT",
        )
    }
)
ENV.update(
    {
        "TPU_WORKER_HOSTNAMES": Entry(
            MECHANICAL,
            "keep it: TorchTPU reads it to detect a multi-host job",
            "launch",
            None,
        ),
        "TPU_SKIP_MDS_QUERY": Entry(
            MECHANICAL,
            "keep it: libtpu reads it (without it libtpu queries the GCE metadata server first)",
            "launch",
            None,
        ),
        "TPU_LIBRARY_PATH": Entry(
            NO_EQUIVALENT,
            "torch_xla's way to find libtpu; torch-tpu 0.2.0 never reads it (it requires the "
            "libtpu package, libtpu>=0.0.50): delete it",
            "launch",
            None,
        ),
        "TPU_MEGACORE": Entry(
            NO_EQUIVALENT,
            "torch_xla sets it for v4 megacore; TorchTPU does not read it: delete it",
            "launch",
            None,
        ),
    }
)

# Other variables torch_xla reads (XLA_*, PT_XLA_*, PJRT_*): TorchTPU reads none of them.
ENV_PREFIXES = ("XLA_", "PT_XLA_", "PJRT_")
ENV_UNMAPPED = Entry(
    NO_EQUIVALENT,
    "a torch_xla variable: TorchTPU does not read it; delete it or find the TorchTPU setting",
    "debug",
)


def entry_for(qname: str) -> tuple[str, Entry] | None:
    """The API and entry a torch_xla name migrates by: its own row, else its module's (the
    longest module prefix in :data:`MODULES`), else :data:`UNMAPPED`; None for a name that is
    not torch_xla's."""
    if qname in APIS:
        return qname, APIS[qname]
    if not (qname == "torch_xla" or qname.startswith("torch_xla.")):
        return None
    parts = qname.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        if module in MODULES:
            return qname, MODULES[module]
    return qname, UNMAPPED


# ``python -m MODULE`` of a torch_xla module in a launcher (an unlisted one: LAUNCH_MODULE).
LAUNCH_MODULE = Entry(
    DECISION,
    "a torch_xla module run as a program: launch with torchrun (after python -m "
    "torch.tpu.distributed's environment) or torch.multiprocessing.spawn after "
    "set_tpu_launch_env",
    "launch",
    26,
    names=("torch.tpu.distributed.set_tpu_launch_env",),
)

# Requirement pins (xla_lint/migrate/pins.py): the torch-tpu 0.2.0 wheel's METADATA
# (Requires-Dist, Requires-Python), recorded in the data file by tools/torchtpu_api.py.
PIN_TORCH_XLA = Entry(
    DECISION,
    "torch-tpu==0.2.0, which requires {requires}: torch moves from 2.9 to 2.11-2.15 with it, so "
    "the torch pin and what is built against torch (torchvision, torchaudio) change too; "
    "torch_xla and torch_tpu cannot share an environment",
    "launch",
    None,
)
PIN_LIBTPU = Entry(
    DECISION,
    "torch-tpu 0.2.0 requires {libtpu} itself: drop this pin or make it satisfy that",
    "launch",
    None,
)
PIN_TORCH = Entry(
    DECISION,
    "torch-tpu 0.2.0 requires {torch}: this pin, written for torch_xla, must move",
    "launch",
    None,
)
PIN_INDEX = Entry(
    NO_EQUIVALENT,
    "a package index or wheel of torch_xla/libtpu releases: torch-tpu and libtpu are on PyPI; "
    "delete the line unless another pin needs it",
    "launch",
    None,
)


def env_entry(name: str) -> Entry | None:
    """The entry of an environment variable torch_xla reads, or None."""
    if name in ENV:
        return ENV[name]
    if name.startswith(ENV_PREFIXES):
        return ENV_UNMAPPED
    return None


def torchtpu_api() -> dict:
    """``xla_lint/data/torchtpu_api.json``: TorchTPU 0.2.0's public names with their stages
    (``tools/torchtpu_api.py`` writes it from the wheel; read by
    :func:`xla_lint.analysis.torchtpu.torchtpu_api`, which the TorchTPU rules share)."""
    return _torchtpu_api()


def suggestable(name: str) -> bool:
    """True when ``name`` (``torch.tpu.X``) is a public TorchTPU 0.2.0 name that user code may
    call: in the data file and neither internal (raising) nor deprecated."""
    info = torchtpu_api()["names"].get(name)
    return info is not None and info["stage"] not in ("internal", "deprecated")
