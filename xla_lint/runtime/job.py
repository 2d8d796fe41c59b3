"""The training job: build the mesh and the FSDPv2 model, train, checkpoint, and record it all.

:func:`run_job` produces ONE :class:`RunRecord` per host: the mesh, the partition spec
and per-device shard shape of every parameter and of the input batch, the number of
graphs compiled at each step, the losses, a parameter checksum, the checkpoint
round trip and timings. The checks (``xla_lint.runtime.checks``) only read records.

torch_xla must be configured (``PJRT_DEVICE``, ``CPU_NUM_DEVICES``) before this module
is imported: see :func:`xla_lint.runtime.env.configure_device_env`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from torch.nn import functional as F

from .model import DecoderLayer, DecoderOnlyModel, load_user_model, synthetic_tokens
from .options import OptionsError, RuntimeOptions, mesh_device_problem
from .progress import HostLost, JobInterrupted, Progress
from .spec import parse_sharding, sharded_axes, uneven_dims

#: Stages of the job in order; an exception in one is recorded with its stage name and
#: the later stages do not run (xla_lint/runtime/checks/__init__.py maps each stage to the
#: check that reports it).
STAGES = ("environment", "mesh", "model", "train", "consistency", "checkpoint")


@dataclass
class RunRecord:
    """Everything one host measured, JSON-ready (plain dicts, lists, numbers, strings).

    Units: times in seconds (``*_s``), sizes in bytes (``bytes``), shapes as lists of ints.

    * ``environment``: device kind, addressable/global device counts, XLA process index
      and count, torch/torch_xla versions, SPMD flag, hostname, pid.
    * ``mesh``: ``axis_names``, ``axis_sizes`` ({axis: size}), ``device_ids`` (flattened
      logical mesh), ``kind`` (``Mesh`` or ``HybridMesh``), ``note``.
    * ``parameters``: one dict per parameter: ``name``, ``shape``, ``dtype``, ``bytes``,
      ``sharding_spec`` (HloSharding text), ``shard_shape`` (per device), ``axes``
      ({tensor dim: mesh axis}).
    * ``batch``: ``global_batch``, ``per_device_batch``, ``devices``, ``shape``,
      ``sharding_spec``, ``shard_shape``, ``axes``.
    * ``steps``: one dict per training step: ``step`` (1-based), ``compiles`` (graphs
      compiled during the step), ``compile_s``, ``time_s``, ``input_shape``.
    * ``losses``: float per step; ``checksum``: ``abs_sum``/``sq_sum`` of all parameters.
    * ``checkpoint``: ``dir``, ``mode``, ``tensors``, ``bytes``, ``max_abs_diff``,
      ``mismatches``, ``sharding_mismatches``, ``save_s``, ``load_s``.
    * ``errors``: ``{"stage", "error", "traceback"}`` for an exception caught in a stage.
    * ``probe``: with ``--fast-forward-step``, what :func:`fast_forward` did.
    * ``compile_cache``: with ``--compile-cache``, what :func:`probe_compile_cache` measured.
    * ``interrupted``: after Ctrl-C, ``{"stage", "step", "steps"}`` where the job stopped
      (``completed`` lists the stages it finished); empty otherwise.
    """

    host_index: int = 0
    num_hosts: int = 1
    simulated: bool = False
    environment: dict = field(default_factory=dict)
    mesh: dict = field(default_factory=dict)
    parameters: list = field(default_factory=list)
    batch: dict = field(default_factory=dict)
    steps: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    checksum: dict = field(default_factory=dict)
    checkpoint: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    errors: list = field(default_factory=list)
    completed: list = field(default_factory=list)
    probe: dict = field(default_factory=dict)
    compile_cache: dict = field(default_factory=dict)
    interrupted: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """The record as a plain dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> RunRecord:
        """Inverse of :meth:`to_json` (unknown keys are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @property
    def failed_stage(self) -> str | None:
        """The stage whose exception stopped the job, or None."""
        return self.errors[0]["stage"] if self.errors else None


# --- small torch_xla helpers ----------------------------------------------------------


def compile_counters() -> tuple[int, float]:
    """``(graphs compiled so far, seconds spent compiling so far)`` in this process.

    Reads the ``UncachedCompile`` counter and the ``CompileTime`` metric (nanoseconds)
    of torch_xla/debug/metrics.py; both are None until the first compilation.
    """
    count = met.counter_value("UncachedCompile") or 0
    data = met.metric_data("CompileTime")
    seconds = (data[1] / 1e9) if data else 0.0
    return int(count), float(seconds)


def sharding_info(t: torch.Tensor, mesh: Any) -> dict:
    """Partition spec facts of one XLA tensor.

    Returns ``{"sharding_spec": str, "shard_shape": [int], "axes": {dim: axis}}``: the
    HloSharding text from ``torch_xla._XLAC._get_xla_sharding_spec`` (the call FSDPv2
    itself uses in torch_xla/experimental/spmd_fully_sharded_data_parallel.py), the
    per-device shard shape and which mesh axis each split dimension follows.
    """
    spec = torch_xla._XLAC._get_xla_sharding_spec(t)
    parsed = parse_sharding(spec, t.dim())
    axes = (
        sharded_axes(parsed, np.asarray(mesh.get_logical_mesh()), tuple(mesh.axis_names))
        if mesh is not None
        else {}
    )
    return {
        "sharding_spec": spec,
        "shard_shape": list(parsed.shard_shape(tuple(t.shape))),
        "axes": {str(d): a for d, a in axes.items()},
    }


def strip_wrapper_names(name: str) -> str:
    """``layers.0._orig_module.mlp.up_proj.weight`` -> ``layers.0.mlp.up_proj.weight``."""
    return name.replace("_orig_module.", "")


# --- the stages -----------------------------------------------------------------------


def describe_environment(opts: RuntimeOptions) -> dict:
    """Device kind and counts, XLA process index/count, versions, SPMD flag (torch_xla/runtime.py)."""
    device = torch_xla.device()
    return {
        "device_kind": xr.device_type(),
        "device_hw": xm.xla_device_hw(device),
        "addressable_devices": xr.addressable_runtime_device_count(),
        "global_devices": xr.global_runtime_device_count(),
        "xla_process_index": xr.process_index(),
        "xla_process_count": xr.process_count(),
        "torch": torch.__version__,
        "torch_xla": torch_xla.__version__,
        "spmd": bool(xr.is_spmd()),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "python": sys.version.split()[0],
        "pjrt_device": os.environ.get("PJRT_DEVICE"),
        "cpu_num_devices": os.environ.get("CPU_NUM_DEVICES"),
    }


def build_mesh(opts: RuntimeOptions) -> tuple[Any, dict]:
    """The SPMD device mesh over all global devices, and its description.

    ``--mesh fsdp``: ``xs.Mesh(range(n), (n,), ('fsdp',))``; ``--mesh fsdp,tensor
    --mesh-shape 4,2``: a 2-D mesh; ``--mesh data``: ``('data',)``. With
    ``--dcn-mesh-shape`` it is ``xs.HybridMesh(ici_mesh_shape=..., dcn_mesh_shape=...,
    axis_names=...)`` (keywords: positional arguments are the XLA001 bug). HybridMesh
    needs multi-slice TPU device attributes (``slice_index``; torch_xla/distributed/spmd/
    xla_sharding.py raises ``ValueError('Invalid dcn_mesh_shape for single slice mesh')``
    otherwise), so off TPU the same logical shape is built with a plain ``xs.Mesh`` and
    the record says so. Raises AssertionError/ValueError from torch_xla when the shape does
    not cover the global device count (XLA011).
    """
    n = xr.global_runtime_device_count()
    axes = tuple(opts.mesh_axes)
    ici = opts.mesh_shape or (n,) + (1,) * (len(axes) - 1)
    note = ""
    kind = "Mesh"
    if opts.dcn_mesh_shape is not None:
        dcn = opts.dcn_mesh_shape
        if opts.mesh_shape is None:
            per_slice = n // max(1, math.prod(dcn))
            ici = (per_slice,) + (1,) * (len(axes) - 1)
        shape = tuple(i * d for i, d in zip(ici, dcn, strict=False))
        mesh: xs.Mesh
        if xr.device_type() == "TPU":
            mesh = xs.HybridMesh(
                ici_mesh_shape=tuple(ici), dcn_mesh_shape=tuple(dcn), axis_names=axes
            )
            kind = "HybridMesh"
        else:
            note = (
                f"HybridMesh needs multi-slice TPU device attributes (slice_index); on "
                f"{xr.device_type()} the same logical shape {shape} is built with xs.Mesh"
            )
            if math.prod(shape) != n:
                raise ValueError(
                    f"ici mesh shape {tuple(ici)} x dcn mesh shape {tuple(dcn)} = {shape} covers "
                    f"{math.prod(shape)} devices, but there are {n} global devices"
                )
            mesh = xs.Mesh(np.arange(n), shape, axes)
    else:
        if math.prod(ici) != n:
            raise ValueError(
                f"mesh shape {tuple(ici)} covers {math.prod(ici)} devices, but there are {n} global devices"
            )
        mesh = xs.Mesh(np.arange(n), tuple(ici), axes)
    xs.set_global_mesh(mesh)
    names = mesh.axis_names
    assert names is not None  # every mesh above is built with axis_names=axes
    desc = {
        "kind": kind,
        "axis_names": list(names),
        "axis_sizes": {a: int(s) for a, s in zip(names, mesh.mesh_shape, strict=True)},
        "device_ids": [int(d) for d in np.asarray(mesh.get_logical_mesh()).reshape(-1)],
        "global_devices": n,
        "ici_mesh_shape": list(ici),
        "dcn_mesh_shape": list(opts.dcn_mesh_shape) if opts.dcn_mesh_shape else None,
        "note": note,
    }
    return mesh, desc


def build_model(
    opts: RuntimeOptions, mesh: Any, seed: int, user_model: torch.nn.Module | None = None
) -> torch.nn.Module:
    """The model on the XLA device, wrapped for SPMD.

    Default: :class:`DecoderOnlyModel` with every :class:`DecoderLayer` wrapped in
    ``SpmdFullyShardedDataParallel`` (FSDPv2, torch_xla/experimental/
    spmd_fully_sharded_data_parallel.py: shards each parameter's largest dimension on
    the ``fsdp`` axis) and an outer FSDPv2 for the embedding, final norm and LM head.
    ``--mesh data`` keeps every parameter replicated (plain data parallelism);
    ``--inject replicated-params`` skips the FSDPv2 wrap (the fault the sharding check
    must catch). A ``--model`` is wrapped as a whole; ``user_model`` is the one the
    preflight already built with this ``seed`` (xla_lint/runtime/preflight.py), else the
    builder is called here.
    """
    from torch_xla.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from torch_xla.experimental.spmd_fully_sharded_data_parallel import (
        SpmdFullyShardedDataParallel as FSDPv2,
    )

    torch.manual_seed(seed)
    if opts.model:
        model = user_model if user_model is not None else load_user_model(opts.model, seed)
        policy = None
    else:
        model = DecoderOnlyModel(opts.vocab, opts.dim, opts.layers, opts.heads)
        policy = functools.partial(
            transformer_auto_wrap_policy, transformer_layer_cls={DecoderLayer}
        )
    if opts.data_parallel or opts.injected("replicated-params"):
        return model.to(torch_xla.device())
    return FSDPv2(model, mesh=mesh, auto_wrap_policy=policy)


def make_optimizer(opts: RuntimeOptions, params: Any) -> torch.optim.Optimizer:
    """``adamw`` (torch.optim.AdamW), ``sgd`` (momentum 0.9) or ``syncfree-adamw``
    (torch_xla/amp/syncfree/adamw.py), with ``--betas`` and ``--weight-decay`` when given
    (else each optimizer's own defaults: betas (0.9, 0.999), weight decay 0.01 for AdamW, 0 for SGD)."""
    extra: dict[str, Any] = {}
    if opts.weight_decay is not None:
        extra["weight_decay"] = opts.weight_decay
    if opts.optimizer == "sgd":
        return torch.optim.SGD(params, lr=opts.lr, momentum=0.9, **extra)
    if opts.betas is not None:
        extra["betas"] = tuple(opts.betas)
    if opts.optimizer == "syncfree-adamw":
        from torch_xla.amp import syncfree

        return syncfree.AdamW(params, lr=opts.lr, **extra)
    return torch.optim.AdamW(params, lr=opts.lr, **extra)


#: Optimizer steps the probe leaves between the fast-forwarded counter and the predicted
#: recompile at most: the step that compiles is then well inside ``--steps``.
FAST_FORWARD_MARGIN = 4


def optimizer_step(optimizer: torch.optim.Optimizer) -> int | None:
    """The step counter of the optimizer's first parameter (``state[p]["step"]``), or None when
    it has none (SGD) or it lives on the XLA device (``capturable=True``: reading it would sync)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            step = optimizer.state.get(p, {}).get("step")
            if isinstance(step, torch.Tensor) and step.device.type == "cpu":
                return int(step.item())
            if isinstance(step, (int, float)):
                return int(step)
            return None
    return None


def fast_forward(opts: RuntimeOptions, optimizer: torch.optim.Optimizer, run_step: int) -> dict:
    """``--fast-forward-step``: set every parameter's Adam step counter a few steps below the
    step whose bias correction ``(1 - beta2**step) ** 0.5`` rounds to 1.0 in the parameters'
    dtype (:func:`xla_lint.scalars.recompile_step`; torch 2.9.0 torch/optim/adam.py
    ``_single_tensor_adam`` passes it as a Python number, which torch_xla turns into the
    constant 1.0 once it is exactly 1: one more graph, XLA204).

    Called after ``run_step`` steps; the predicted step is reached about halfway through the
    remaining ``--steps``. Returns what the recompilation check needs: ``beta2``,
    ``dtypes``, ``predicted_step``, ``set_to`` (None when the counter is already past or
    close), ``at_run_step``, ``expected_run_step`` (the run step that should compile)."""
    from ..scalars import recompile_step

    beta2 = float(optimizer.param_groups[0]["betas"][1])
    dtypes = sorted(
        {str(p.dtype).removeprefix("torch.") for g in optimizer.param_groups for p in g["params"]}
    )
    predicted = [s for s in (recompile_step(beta2, d) for d in dtypes) if s is not None]
    info: dict[str, Any] = {
        "beta2": beta2,
        "dtypes": dtypes,
        "predicted_step": min(predicted) if predicted else None,
        "at_run_step": run_step,
        "set_to": None,
        "expected_run_step": None,
    }
    current = optimizer_step(optimizer)
    if info["predicted_step"] is None or current is None or info["predicted_step"] <= 1:
        return info  # 1: the constant is in the graph from the first step, nothing changes later
    ahead = min(FAST_FORWARD_MARGIN, max(1, (opts.steps - run_step) // 2))
    target = info["predicted_step"] - ahead  # the counter after the last step run so far
    if target > current:
        for group in optimizer.param_groups:
            for p in group["params"]:
                state = optimizer.state.get(p)
                if state and isinstance(state.get("step"), torch.Tensor):
                    old = state["step"]
                    state["step"] = torch.tensor(float(target), dtype=old.dtype, device=old.device)
        info["set_to"] = target
        current = target
    info["expected_run_step"] = run_step + (info["predicted_step"] - current)
    return info


def global_batch_size(opts: RuntimeOptions) -> int:
    """``--batch-per-device`` x global device count: the batch ONE SPMD program sees."""
    return opts.batch_per_device * xr.global_runtime_device_count()


class BatchMaker:
    """Synthetic global batches on the CPU, identical on every host for a given ``--seed``.

    ``make(step)`` returns ``(inputs, targets)``: token ids ``(B, S)``/``(B, S)`` int64 for
    the built-in decoder, or ``(B, *input_shape)`` and None for a ``--model``.
    ``--inject shape-change-at:K`` halves the sequence length (or the first example
    dimension) from step K on - the classic cause of a late recompilation.
    """

    def __init__(self, opts: RuntimeOptions, global_batch: int) -> None:
        self.opts = opts
        self.global_batch = global_batch
        self.gen = torch.Generator().manual_seed(opts.seed + 1)
        inj = opts.injected("shape-change-at")
        self.change_at = inj.arg if inj else None

    def make(self, step: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        opts = self.opts
        shrink = self.change_at is not None and step >= self.change_at
        if opts.model:
            shape = list(opts.input_shape or ())
            if shrink and shape:
                shape[0] = max(1, shape[0] // 2)
            if opts.input_dtype == "int64":
                return torch.randint(
                    0, opts.vocab, (self.global_batch, *shape), generator=self.gen
                ), None
            dtype = torch.bfloat16 if opts.input_dtype == "bfloat16" else torch.float32
            return torch.randn((self.global_batch, *shape), generator=self.gen).to(dtype), None
        seq = max(1, opts.seq_len // 2) if shrink else opts.seq_len
        tokens = synthetic_tokens(self.global_batch, seq, opts.vocab, self.gen)
        return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def to_sharded(t: torch.Tensor, mesh: Any, axis: str) -> torch.Tensor:
    """Move a CPU batch to the XLA device and shard its batch dimension (dim 0) on ``axis``.

    Uses ``xs.mark_sharding(t, mesh, (axis, None, ...))`` - the partition spec
    ``pl.MpDeviceLoader(..., input_sharding=xs.ShardingSpec(mesh, ('fsdp', None)))`` uses
    in examples/fsdp/train_decoder_only_fsdp_v2.py.
    """
    x = t.to(torch_xla.device())
    xs.mark_sharding(x, mesh, (axis,) + (None,) * (x.dim() - 1))
    return x


def compute_loss(
    opts: RuntimeOptions, model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor | None
) -> torch.Tensor:
    """Next-token cross entropy for the decoder; for a ``--model``, the mean square of its
    first output tensor (any differentiable scalar exercises the same sharding and
    compilation paths)."""
    out = model(inputs)
    if isinstance(out, (tuple, list)):
        out = next(o for o in out if isinstance(o, torch.Tensor))
    elif isinstance(out, dict):
        out = (
            out["loss"]
            if "loss" in out
            else next(o for o in out.values() if isinstance(o, torch.Tensor))
        )
    if targets is None:
        return out.float().square().mean()
    return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), targets.reshape(-1))


class Stage:
    """Context manager that records an exception of one stage in the record and suppresses it.

    It publishes the stage to ``progress`` on entry. Not suppressed: KeyboardInterrupt,
    SystemExit, :class:`~xla_lint.runtime.options.OptionsError` (a usage error found once
    the runtime runs) and :class:`~xla_lint.runtime.progress.HostLost` (another host is
    gone: the runner reports it). An exception in ``train`` also records the step.
    """

    def __init__(self, record: RunRecord, name: str, progress: Progress) -> None:
        self.record, self.name, self.progress = record, name, progress

    def __enter__(self) -> Stage:
        self.t0 = time.perf_counter()
        self.progress.update(self.name)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.record.timings[f"{self.name}_s"] = round(time.perf_counter() - self.t0, 4)
        if exc is None:
            self.record.completed.append(self.name)
            return False
        if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit, OptionsError, HostLost)):
            return False
        # not only Exception: torch.distributed.checkpoint's CheckpointException derives
        # from BaseException (torch/distributed/checkpoint/api.py)
        error = {
            "stage": self.name,
            "host": self.record.host_index,
            "error": f"{type(exc).__name__}: {exc}".strip(),
            "traceback": "".join(traceback.format_exception(exc_type, exc, tb))[-4000:],
        }
        if self.name == "train" and self.progress.step is not None:
            error["step"] = self.progress.step
        self.record.errors.append(error)
        return True


def run_job(
    opts: RuntimeOptions,
    host_index: int = 0,
    num_hosts: int = 1,
    spans_hosts: bool = False,
    process_group: Any = None,
    progress: Progress | None = None,
    user_model: torch.nn.Module | None = None,
) -> RunRecord:
    """Run every stage on this host and return its :class:`RunRecord`. Never raises for
    an ``Exception`` inside a stage: it is recorded in ``record.errors`` with its stage.

    ``spans_hosts`` is True when one SPMD program spans all hosts (a real multi-host
    pod: PJRT sees ``num_hosts`` processes) and False for a single host or simulated
    hosts, where every process is its own SPMD world of CPU devices. It decides how the
    checkpoint is written: one ``torch.distributed.checkpoint`` over ``process_group``
    (shared storage) or one per host under ``<dir>/host-<i>`` with ``no_dist=True``.

    ``progress`` receives every stage and training step; ``user_model`` is the ``--model``
    the preflight built. Raises :class:`~xla_lint.runtime.options.OptionsError` when the
    mesh shape does not hold the global device count (known only now on TPU), and
    :class:`~xla_lint.runtime.progress.JobInterrupted` (a KeyboardInterrupt) carrying the
    record so far, with ``interrupted`` set, on Ctrl-C.
    """
    rec = RunRecord(host_index=host_index, num_hosts=num_hosts, simulated=opts.simulated)
    progress = progress or Progress(host_index, opts.steps)
    try:
        return _run_stages(
            opts, rec, progress, host_index, num_hosts, spans_hosts, process_group, user_model
        )
    except KeyboardInterrupt:  # Ctrl-C: the record so far goes into the partial report
        rec.interrupted = {"stage": progress.stage, "step": progress.step, "steps": opts.steps}
        raise JobInterrupted(rec) from None


def _run_stages(
    opts: RuntimeOptions,
    rec: RunRecord,
    progress: Progress,
    host_index: int,
    num_hosts: int,
    spans_hosts: bool,
    process_group: Any,
    user_model: torch.nn.Module | None,
) -> RunRecord:
    """The stages of :func:`run_job`, filling ``rec``."""
    state: dict[str, Any] = {}
    t_start = time.perf_counter()

    def stage(name: str) -> Stage:
        return Stage(rec, name, progress)

    with stage("environment"):
        if opts.compile_cache:
            start_compile_cache(opts.compile_cache)
        xr.use_spmd()
        rec.environment = describe_environment(opts)
    if rec.errors:
        return rec
    problem = mesh_device_problem(
        opts, rec.environment["global_devices"], "global devices (xr.global_runtime_device_count())"
    )
    if problem:
        raise OptionsError(problem)
    with stage("mesh"):
        mesh, rec.mesh = build_mesh(opts)
        state["mesh"] = mesh
    if rec.errors:
        return rec
    with stage("model"):
        model = build_model(opts, mesh, opts.seed_for(host_index), user_model)
        state["model"] = model
        for name, p in model.named_parameters():
            info = sharding_info(p, mesh)
            rec.parameters.append(
                {
                    "name": strip_wrapper_names(name),
                    "shape": list(p.shape),
                    "dtype": str(p.dtype).replace("torch.", ""),
                    "bytes": p.numel() * p.element_size(),
                    **info,
                }
            )
    if rec.errors:
        return rec
    with stage("train"):
        _train(opts, rec, state, progress)
    if rec.errors:
        return rec
    if opts.compile_cache:
        rec.compile_cache = {"first_process": cache_counters(opts.compile_cache)}
        if num_hosts == 1 and not opts.simulated:
            try:
                rec.compile_cache["second_process"] = probe_compile_cache(opts)
            except Exception as exc:
                rec.compile_cache["second_process"] = {
                    "counters": {},
                    "error": f"{type(exc).__name__}: {exc}",
                }
        else:
            rec.compile_cache["not_measured"] = (
                f"{num_hosts} hosts: a second process would have to join them; "
                "run --compile-cache on one host"
            )
    with stage("consistency"):
        with torch.no_grad():
            params = [p.detach().float() for p in state["model"].parameters()]
            abs_sum = torch.stack([p.abs().sum() for p in params]).sum()
            sq_sum = torch.stack([p.square().sum() for p in params]).sum()
            values = torch.stack([abs_sum, sq_sum]).cpu().tolist()
        rec.checksum = {
            "abs_sum": values[0],
            "sq_sum": values[1],
            "parameters": sum(p.numel() for p in params),
            # the same sum over the shards this host's devices hold, read back one by one
            "local_shard_abs_sum": local_shard_abs_sum(list(state["model"].parameters())),
            "spans_hosts": xr.process_count() > 1,
        }
    if rec.errors:
        return rec
    with stage("checkpoint"):
        rec.checkpoint = checkpoint_round_trip(
            opts, state["model"], host_index, spans_hosts, process_group
        )
    rec.timings["job_s"] = round(time.perf_counter() - t_start, 4)
    return rec


def _train(opts: RuntimeOptions, rec: RunRecord, state: dict, progress: Progress) -> None:
    """The instrumented training loop: per step, graphs compiled and seconds spent."""
    mesh, model = state["mesh"], state["model"]
    optimizer = make_optimizer(opts, model.parameters())
    gb = global_batch_size(opts)
    batches = BatchMaker(opts, gb)
    crash = opts.injected("crash-at")
    kill = opts.injected("sigkill")
    loss_tensors = []
    for step in range(1, opts.steps + 1):
        progress.update("train", step)
        if kill and kill.host == rec.host_index and kill.arg == step:
            os.kill(os.getpid(), signal.SIGKILL)  # --inject sigkill:H@S: no cleanup, no last words
        t0 = time.perf_counter()
        c0, s0 = compile_counters()
        inputs, targets = batches.make(step)
        x = to_sharded(inputs, mesh, opts.batch_axis)
        y = to_sharded(targets, mesh, opts.batch_axis) if targets is not None else None
        if step == 1:
            n = xr.global_runtime_device_count()
            rec.batch = {
                "global_batch": gb,
                "per_device_batch": opts.batch_per_device,
                "devices": n,
                "shape": list(x.shape),
                **sharding_info(x, mesh),
            }
        if crash and crash.arg == step:
            raise RuntimeError(f"injected crash at step {step} (--inject crash-at:{step})")
        optimizer.zero_grad(set_to_none=True)
        loss = compute_loss(opts, model, x, y)
        loss.backward()
        optimizer.step()
        torch_xla.sync(wait=True)
        c1, s1 = compile_counters()
        loss_tensors.append(loss.detach())
        rec.steps.append(
            {
                "step": step,
                "compiles": c1 - c0,
                "compile_s": round(s1 - s0, 4),
                "time_s": round(time.perf_counter() - t0, 4),
                "input_shape": list(inputs.shape),
                "optimizer_step": optimizer_step(optimizer),
            }
        )
        if opts.fast_forward and step == max(opts.warmup, 1):
            rec.probe = fast_forward(opts, optimizer, step)
    rec.losses = [float(v) for v in torch.stack(loss_tensors).cpu().tolist()]
    after = [s["time_s"] for s in rec.steps[opts.warmup :]]
    rec.timings["step_s_median"] = round(statistics.median(after), 5) if after else None
    # tokens for the decoder; examples for a --model (its input need not be tokens)
    rec.timings["unit"] = "examples" if opts.model else "tokens"
    rec.timings["tokens_per_step"] = gb if opts.model else gb * opts.seq_len
    rec.timings["compile_s_total"] = round(sum(s["compile_s"] for s in rec.steps), 4)


def local_shard_abs_sum(params: list[torch.Tensor]) -> float:
    """Sum of ``|p|`` over the shards held by this process's devices, each counted once.

    Reads every addressable shard with ``torch_xla._XLAC._get_local_shards`` and its
    replica id and index slices with ``_get_local_shard_replica_and_indices`` (what
    ``XLAShardedTensor.local_shards`` does, torch_xla/distributed/spmd/
    xla_sharded_tensor.py); only replica 0 of each shard counts, padding is cut off. A
    tensor without a sharding annotation is read whole. Units: the parameters' own.
    On one SPMD world this equals the device-side ``abs_sum``; on a pod the hosts' sums add
    up to it.
    """
    total = 0.0
    for p in params:
        if not torch_xla._XLAC._get_xla_sharding_spec(p):
            if xr.process_index() == 0:
                total += float(p.detach().cpu().double().abs().sum())
            continue
        shards = torch_xla._XLAC._get_local_shards([p])[0]
        replicas = torch_xla._XLAC._get_local_shard_replica_and_indices([p])[0]
        for (data, _dev), (replica, indices) in zip(shards, replicas, strict=True):
            if replica != 0:
                continue
            if indices is not Ellipsis:
                data = data[tuple(slice(0, s.stop - s.start) for s in indices)]
            total += float(data.double().abs().sum())
    return total


def checkpoint_round_trip(
    opts: RuntimeOptions,
    model: torch.nn.Module,
    host_index: int,
    spans_hosts: bool,
    process_group: Any,
) -> dict:
    """Save the sharded state dict with ``torch.distributed.checkpoint`` + ``SPMDSavePlanner``,
    load it into zeroed tensors of the same sharding with ``SPMDLoadPlanner``, compare.

    Returns ``{"dir", "mode", "tensors", "bytes", "max_abs_diff", "diff_before_load",
    "mismatches": [names], "not_written", "uneven", "sharding_mismatches": [names],
    "save_s", "load_s"}``. ``diff_before_load`` > 0 proves the comparison could fail (the
    targets start at zero). ``uneven`` (``[{"name", "shape", "sharding_spec", "dims"}]``,
    :func:`~xla_lint.runtime.spec.uneven_dims`) are the tensors split into shards that do
    not divide a dimension: torch_xla 2.9's ``SPMDLoadPlanner`` raises on them, so they are
    left out of the round trip and the checkpoint check names them.
    The sharding of each target is copied from the saved tensor with
    ``torch_xla._XLAC._get_xla_op_sharding`` / ``_xla_mark_sharding`` (what
    ``xs.mark_sharding`` calls, torch_xla/distributed/spmd/xla_sharding.py).
    """
    import torch.distributed.checkpoint as dist_cp
    from torch_xla.experimental.distributed_checkpoint import SPMDLoadPlanner, SPMDSavePlanner

    base = opts.checkpoint_dir
    made_base = base is None
    if base is None:
        base = tempfile.mkdtemp(prefix="xla-lint-ckpt-")
    run_dir = os.path.join(base, f"xla-lint-runtime-{opts.seed}")
    if not spans_hosts:
        run_dir = os.path.join(run_dir, f"host-{host_index}")
    os.makedirs(run_dir, exist_ok=True)
    dist_kwargs: dict[str, Any] = (
        {"no_dist": True} if not spans_hosts else {"process_group": process_group}
    )
    try:
        sd = {k: v for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
        uneven = []
        for k, v in sd.items():
            spec = torch_xla._XLAC._get_xla_sharding_spec(v)
            dims = uneven_dims(spec, tuple(v.shape))
            if dims:
                uneven.append(
                    {
                        "name": strip_wrapper_names(k),
                        "shape": list(v.shape),
                        "sharding_spec": spec,
                        "dims": dims,
                        "key": k,
                    }
                )
        left_out = {u.pop("key") for u in uneven}
        sd = {k: v for k, v in sd.items() if k not in left_out}
        if not sd:  # nothing the SPMD planners can load: no round trip at all
            return {
                "dir": run_dir,
                "mode": "not written: no tensor the SPMD checkpoint planners can load",
                "tensors": len(uneven),
                "bytes": 0,
                "max_abs_diff": 0.0,
                "diff_before_load": 0.0,
                "mismatches": [],
                "not_written": [],
                "uneven": uneven,
                "sharding_mismatches": [],
                "save_s": 0.0,
                "load_s": 0.0,
            }
        t0 = time.perf_counter()
        metadata = dist_cp.save(
            state_dict={"model": sd},
            storage_writer=dist_cp.FileSystemWriter(run_dir),
            planner=SPMDSavePlanner(),
            **dist_kwargs,
        )
        save_s = time.perf_counter() - t0
        # Tensors the save silently left out of the checkpoint metadata. torch_xla 2.9's
        # dedup_tensors (torch_xla/experimental/distributed_checkpoint/_helpers.py) drops
        # EVERY copy of a shard that one process holds twice (partial replication, e.g. a
        # 2-D mesh whose second axis does not shard the tensor): MetadataIndex compares
        # fqn and offset only, so replica 1 marks replica 0's item as a duplicate too.
        written = (
            set(metadata.state_dict_metadata)
            if metadata is not None
            else {f"model.{k}" for k in sd}
        )
        not_written = sorted(k for k in sd if f"model.{k}" not in written)
        not_written_info = [
            {
                "name": strip_wrapper_names(k),
                "sharding_spec": torch_xla._XLAC._get_xla_sharding_spec(sd[k]),
            }
            for k in not_written
        ]
        sd = {k: v for k, v in sd.items() if k not in not_written}
        targets = {}
        for k, v in sd.items():
            t = torch.zeros(v.shape, dtype=v.dtype, device=v.device)
            op = torch_xla._XLAC._get_xla_op_sharding(v)
            if op is not None:
                torch_xla._XLAC._xla_mark_sharding(t, op)
            targets[k] = t
        keys = sorted(sd)
        with torch.no_grad():
            before = (
                torch.stack([(targets[k].float() - sd[k].float()).abs().max() for k in keys])
                .cpu()
                .tolist()
                if keys
                else []
            )
        t0 = time.perf_counter()
        if keys:
            dist_cp.load(
                state_dict={"model": targets},
                storage_reader=dist_cp.FileSystemReader(run_dir),
                planner=SPMDLoadPlanner(),
                **dist_kwargs,
            )
        load_s = time.perf_counter() - t0
        with torch.no_grad():
            after = (
                torch.stack([(targets[k].float() - sd[k].float()).abs().max() for k in keys])
                .cpu()
                .tolist()
                if keys
                else []
            )
        sharding_mismatches = [
            strip_wrapper_names(k)
            for k in keys
            if torch_xla._XLAC._get_xla_sharding_spec(targets[k])
            != torch_xla._XLAC._get_xla_sharding_spec(sd[k])
        ]
        size = sum(
            os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(run_dir) for f in fs
        )
        return {
            "dir": run_dir,
            "mode": "one checkpoint over the host process group"
            if spans_hosts
            else "one checkpoint per SPMD world (no_dist)",
            "tensors": len(keys) + len(not_written) + len(uneven),
            "bytes": size,
            "max_abs_diff": max(after) if after else 0.0,
            "diff_before_load": max(before) if before else 0.0,
            "mismatches": [
                strip_wrapper_names(k) for k, d in zip(keys, after, strict=True) if d != 0.0
            ],
            "not_written": not_written_info,
            "uneven": uneven,
            "sharding_mismatches": sharding_mismatches,
            "save_s": round(save_s, 4),
            "load_s": round(load_s, 4),
        }
    finally:
        if not spans_hosts or host_index == 0:
            shutil.rmtree(run_dir if not made_base else base, ignore_errors=True)
            if not made_base and not spans_hosts:
                try:  # the per-run folder above host-N, once the last host has removed its own
                    os.rmdir(os.path.dirname(run_dir))
                except OSError:
                    pass


#: torch_xla counters of the persistent compilation cache (torch_xla/csrc/runtime/
#: pjrt_computation_client / xla_graph_executor.cpp), and the compile counter.
CACHE_COUNTERS = (
    "PersistentCacheHit",
    "PersistentCacheMiss",
    "PersistentCacheDeserializeFailure",
    "UncachedCompile",
)


def start_compile_cache(path: str) -> None:
    """``xr.initialize_cache(path, readonly=False)`` (torch_xla/runtime.py), creating ``path``.

    It only sets ``XLA_PERSISTENT_CACHE_PATH``/``_READ_ONLY``, read when the computation
    cache is built, and asserts that no graph ran before: call it before any device work."""
    os.makedirs(path, exist_ok=True)
    xr.initialize_cache(path, readonly=False)


def cache_counters(path: str) -> dict:
    """:data:`CACHE_COUNTERS` in this process (0 when never incremented) and ``files`` in ``path``."""
    out: dict[str, Any] = {name: int(met.counter_value(name) or 0) for name in CACHE_COUNTERS}
    out["files"] = len(os.listdir(path)) if os.path.isdir(path) else 0
    return out


def probe_compile_cache(opts: RuntimeOptions) -> dict:
    """Run the warm-up steps of the same job in a second process (``--bare``, same options and
    ``--compile-cache``) and return its :func:`cache_counters`, exit code and whether torch_xla
    logged ``UNIMPLEMENTED`` (the CPU client cannot deserialize executables: PJRT's
    ``DeserializeExecutable`` is not implemented there, counter ``PersistentCacheDeserializeFailure``).

    Bounded by ``--job-timeout`` (at most 600 s). Returns ``{"counters", "returncode",
    "unimplemented", "error", "seconds", "timeout_s"}``."""
    child = dataclasses.replace(
        opts,
        steps=max(opts.warmup, 1),
        warmup_steps=None,
        fast_forward=False,
        inject=(),
        json_path=None,
        quiet=True,
        bare=True,
        simulated=False,
        simulate_hosts=None,
        coordinator=None,
        num_hosts=None,
        host_index=None,
        checkpoint_dir=None,
    )
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "0",
    }  # keep the UNIMPLEMENTED line (captured, not shown)
    for name in ("XLA_PERSISTENT_CACHE_PATH", "XLA_PERSISTENT_CACHE_READ_ONLY"):
        env.pop(name, None)  # the child calls xr.initialize_cache itself
    timeout = min(opts.job_timeout, 600.0)
    t0 = time.perf_counter()
    out: dict[str, Any] = {
        "counters": {},
        "returncode": None,
        "unimplemented": False,
        "error": "",
        "timeout_s": timeout,
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "xla_lint.runtime", *child.to_argv()],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
            cwd=os.getcwd(),
        )
    except subprocess.TimeoutExpired:
        out["error"] = f"the second process did not finish within {timeout:.0f} s"
    else:
        out["returncode"] = proc.returncode
        out["unimplemented"] = (
            "UNIMPLEMENTED" in proc.stderr
            or "Deserializing serialized executable not supported" in proc.stderr
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('{"bare"')]
        if lines:
            out["counters"] = json.loads(lines[-1])["bare"].get("cache", {})
        else:
            tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-1:] or [
                "no output"
            ]
            out["error"] = f"the second process exited {proc.returncode}: {tail[0][:300]}"
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def run_bare(opts: RuntimeOptions) -> dict:
    """The same mesh, model, data and loop with no instrumentation: no per-step wait, no
    metrics reads, no sharding inspection, no checkpoint. Returns timings in seconds:
    ``{"build_s", "train_s", "first_steps_s", "steady_s_per_step", "steps"}``, and with
    ``--compile-cache`` the cache counters (``"cache"``, :func:`cache_counters`)."""
    t0 = time.perf_counter()
    if opts.compile_cache:
        start_compile_cache(opts.compile_cache)
    xr.use_spmd()
    mesh, _ = build_mesh(opts)
    model = build_model(opts, mesh, opts.seed)
    optimizer = make_optimizer(opts, model.parameters())
    batches = BatchMaker(opts, global_batch_size(opts))
    t1 = time.perf_counter()
    mark = t1
    for step in range(1, opts.steps + 1):
        inputs, targets = batches.make(step)
        x = to_sharded(inputs, mesh, opts.batch_axis)
        y = to_sharded(targets, mesh, opts.batch_axis) if targets is not None else None
        optimizer.zero_grad(set_to_none=True)
        loss = compute_loss(opts, model, x, y)
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        if step == opts.warmup:
            xm.wait_device_ops()
            mark = time.perf_counter()
    xm.wait_device_ops()
    t2 = time.perf_counter()
    steady = opts.steps - opts.warmup
    return {
        "build_s": round(t1 - t0, 4),
        "train_s": round(t2 - t1, 4),
        "first_steps_s": round(mark - t1, 4),
        "steady_s_per_step": round((t2 - mark) / steady, 5) if steady else None,
        "steps": opts.steps,
        "final_loss": float(loss.detach().cpu()),
        **({"cache": cache_counters(opts.compile_cache)} if opts.compile_cache else {}),
    }
