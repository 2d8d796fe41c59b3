"""The runtime checker's options as one frozen dataclass.

This module is torch-free: the CLI, the simulated-host launcher and the job all
share :class:`RuntimeOptions`, and the launcher turns it back into a command line
(:meth:`RuntimeOptions.to_argv`) for every simulated host process.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

#: Axis names a 1-D or 2-D mesh may use. ``fsdp`` is the axis FSDPv2 shards
#: parameters on (torch_xla/experimental/spmd_fully_sharded_data_parallel.py
#: raises ``ValueError("The mesh must have an axis named 'fsdp'.")`` without it);
#: ``data`` alone means plain SPMD data parallelism (parameters replicated).
KNOWN_AXES = ("fsdp", "tensor", "data")

#: Fault-injection kinds accepted by ``--inject`` (developer option, used by the
#: tests to prove every check can fail).
INJECT_KINDS = ("replicated-params", "shape-change-at", "diverge-seeds", "missing-host", "crash-at")

OPTIMIZERS = ("adamw", "sgd", "syncfree-adamw")


class OptionsError(ValueError):
    """An invalid combination of options (the CLI turns it into exit status 2)."""


@dataclass(frozen=True)
class Injection:
    """One injected fault: ``kind`` from :data:`INJECT_KINDS`, ``arg`` its integer argument.

    ``shape-change-at:S`` (1-based step S), ``missing-host:H`` (host index H is
    never started by ``--simulate-hosts``), ``crash-at:S`` (raise inside step S on
    every host), ``replicated-params`` and ``diverge-seeds`` (seed = seed + host index)
    take no argument.
    """

    kind: str
    arg: int | None = None

    @classmethod
    def parse(cls, text: str) -> "Injection":
        """Parse ``kind`` or ``kind:N``; raises :class:`OptionsError` on an unknown kind."""
        kind, _, arg = text.partition(":")
        if kind not in INJECT_KINDS:
            raise OptionsError(f"unknown --inject {text!r}; known: {', '.join(INJECT_KINDS)}")
        needs_arg = kind in ("shape-change-at", "missing-host", "crash-at")
        if needs_arg:
            if not arg.isdigit():
                raise OptionsError(f"--inject {kind} needs an integer argument, e.g. {kind}:1")
            return cls(kind, int(arg))
        if arg:
            raise OptionsError(f"--inject {kind} takes no argument")
        return cls(kind, None)

    def __str__(self) -> str:
        return self.kind if self.arg is None else f"{self.kind}:{self.arg}"


@dataclass(frozen=True)
class RuntimeOptions:
    """Everything one run of ``python -m xla_lint.runtime`` needs.

    Sizes are counts (devices, steps, tokens), times are seconds, thresholds bytes.
    ``mesh_axes``/``mesh_shape``/``dcn_mesh_shape`` describe the SPMD device mesh;
    ``mesh_shape`` None means "all global devices on the first axis, 1 on the others".
    Host fields: ``coordinator`` is ``HOST:PORT`` of host 0's TCPStore, ``num_hosts``
    and ``host_index`` the host (process) count and this process's index.
    """

    mesh_axes: tuple[str, ...] = ("fsdp",)
    mesh_shape: tuple[int, ...] | None = None
    dcn_mesh_shape: tuple[int, ...] | None = None
    # model
    dim: int = 64
    layers: int = 2
    heads: int = 4
    vocab: int = 256
    seq_len: int = 32
    model: str | None = None
    input_shape: tuple[int, ...] | None = None
    input_dtype: str = "float32"
    # training
    steps: int = 10
    warmup_steps: int = 2
    batch_per_device: int = 2
    optimizer: str = "adamw"
    lr: float = 3e-3
    seed: int = 0
    shard_threshold_bytes: int = 1024
    # devices and hosts
    device: str = "auto"
    cpu_devices: int | None = None
    coordinator: str | None = None
    num_hosts: int | None = None
    host_index: int | None = None
    simulate_hosts: int | None = None
    simulated: bool = False
    timeout: float = 120.0
    job_timeout: float = 900.0
    # output
    checkpoint_dir: str | None = None
    json_path: str | None = None
    bare: bool = False
    quiet: bool = False
    inject: tuple[Injection, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        problems = []
        if not self.mesh_axes or len(set(self.mesh_axes)) != len(self.mesh_axes):
            problems.append(f"--mesh needs distinct axis names, got {','.join(self.mesh_axes)}")
        for axis in self.mesh_axes:
            if axis not in KNOWN_AXES:
                problems.append(f"--mesh axis {axis!r} is not one of {', '.join(KNOWN_AXES)}")
        if "data" in self.mesh_axes and len(self.mesh_axes) > 1:
            problems.append("--mesh data is plain data parallelism and takes no other axis")
        if self.mesh_axes and "data" not in self.mesh_axes and "fsdp" not in self.mesh_axes:
            problems.append(f"--mesh {','.join(self.mesh_axes)} has no 'fsdp' axis: FSDPv2 shards along 'fsdp' "
                            "(use fsdp, fsdp,tensor or data)")
        if self.mesh_shape is not None and len(self.mesh_shape) != len(self.mesh_axes):
            problems.append(
                f"--mesh-shape {fmt_shape(self.mesh_shape)} has {len(self.mesh_shape)} entries but "
                f"--mesh {','.join(self.mesh_axes)} has {len(self.mesh_axes)} axes"
            )
        if self.dcn_mesh_shape is not None and len(self.dcn_mesh_shape) != len(self.mesh_axes):
            problems.append(
                f"--dcn-mesh-shape {fmt_shape(self.dcn_mesh_shape)} needs one entry per mesh axis "
                f"({','.join(self.mesh_axes)})"
            )
        for name in ("dim", "layers", "heads", "vocab", "seq_len", "steps", "batch_per_device"):
            if getattr(self, name) < 1:
                problems.append(f"--{name.replace('_', '-')} must be at least 1")
        if self.dim % self.heads:
            problems.append(f"--dim {self.dim} must be divisible by --heads {self.heads}")
        if self.warmup_steps < 0 or self.warmup_steps >= self.steps:
            problems.append(f"--warmup-steps must be in [0, --steps) = [0, {self.steps})")
        if self.optimizer not in OPTIMIZERS:
            problems.append(f"--optimizer must be one of {', '.join(OPTIMIZERS)}")
        if self.model is not None and ":" not in self.model:
            problems.append("--model must be module:function")
        if self.model is not None and self.input_shape is None:
            problems.append("--model needs --input-shape (the shape of one example, without the batch dimension)")
        if self.input_dtype not in ("float32", "bfloat16", "int64"):
            problems.append("--input-dtype must be float32, bfloat16 or int64")
        if self.timeout <= 0 or self.job_timeout <= 0:
            problems.append("--timeout and --job-timeout must be positive")
        if self.num_hosts is not None and self.num_hosts < 1:
            problems.append("--num-hosts must be at least 1")
        if self.host_index is not None and self.num_hosts is not None and not 0 <= self.host_index < self.num_hosts:
            problems.append(f"--host-index {self.host_index} is outside [0, --num-hosts {self.num_hosts})")
        if self.coordinator is not None:
            host, _, port = self.coordinator.rpartition(":")
            if not host or not port.isdigit():
                problems.append(f"--coordinator must be HOST:PORT, got {self.coordinator!r}")
        if self.simulate_hosts is not None:
            if self.simulate_hosts < 1:
                problems.append("--simulate-hosts must be at least 1")
            if self.coordinator or self.num_hosts or self.host_index is not None:
                problems.append("--simulate-hosts starts its own hosts; drop --coordinator/--num-hosts/--host-index")
        if self.cpu_devices is not None and self.cpu_devices < 1:
            problems.append("--cpu-devices must be at least 1")
        for inj in self.inject:
            if inj.kind == "missing-host":
                if self.simulate_hosts is None:
                    problems.append("--inject missing-host:H needs --simulate-hosts")
                elif not 0 <= (inj.arg or 0) < self.simulate_hosts:
                    problems.append(f"--inject missing-host:{inj.arg} is not a host index of --simulate-hosts")
            if inj.kind in ("shape-change-at", "crash-at") and not 1 <= (inj.arg or 0) <= self.steps:
                problems.append(f"--inject {inj} must name a step in 1..{self.steps}")
        if problems:
            raise OptionsError("; ".join(problems))

    # -- derived values -------------------------------------------------------------
    def injected(self, kind: str) -> Injection | None:
        """The injection of ``kind`` if one was requested, else None."""
        for inj in self.inject:
            if inj.kind == kind:
                return inj
        return None

    @property
    def data_parallel(self) -> bool:
        """True for ``--mesh data``: plain SPMD data parallelism, parameters replicated."""
        return self.mesh_axes == ("data",)

    @property
    def batch_axis(self) -> str:
        """The mesh axis the input batch dimension is sharded on (``fsdp`` or ``data``)."""
        return "data" if self.data_parallel else "fsdp"

    def to_json(self) -> dict:
        """The options as a JSON-ready dict (tuples become lists, injections strings)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "inject":
                value = [str(i) for i in value]
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    def to_argv(self) -> list[str]:
        """A command line that parses back to these options (used to start simulated hosts)."""
        argv = ["--mesh", ",".join(self.mesh_axes)]
        pairs = {
            "--mesh-shape": fmt_shape(self.mesh_shape) if self.mesh_shape else None,
            "--dcn-mesh-shape": fmt_shape(self.dcn_mesh_shape) if self.dcn_mesh_shape else None,
            "--dim": self.dim,
            "--layers": self.layers,
            "--heads": self.heads,
            "--vocab": self.vocab,
            "--seq-len": self.seq_len,
            "--model": self.model,
            "--input-shape": fmt_shape(self.input_shape) if self.input_shape else None,
            "--input-dtype": self.input_dtype,
            "--steps": self.steps,
            "--warmup-steps": self.warmup_steps,
            "--batch-per-device": self.batch_per_device,
            "--optimizer": self.optimizer,
            "--lr": repr(self.lr),
            "--seed": self.seed,
            "--shard-threshold-bytes": self.shard_threshold_bytes,
            "--device": self.device,
            "--cpu-devices": self.cpu_devices,
            "--coordinator": self.coordinator,
            "--num-hosts": self.num_hosts,
            "--host-index": self.host_index,
            "--timeout": repr(self.timeout),
            "--job-timeout": repr(self.job_timeout),
            "--checkpoint-dir": self.checkpoint_dir,
            "--json": self.json_path,
        }
        for flag, value in pairs.items():
            if value is not None:
                argv += [flag, str(value)]
        for inj in self.inject:
            argv += ["--inject", str(inj)]
        if self.simulated:
            argv.append("--simulated-host")
        if self.bare:
            argv.append("--bare")
        if self.quiet:
            argv.append("--quiet")
        return argv


def fmt_shape(shape: tuple[int, ...] | None) -> str:
    """``(4, 2)`` -> ``"4,2"``."""
    return ",".join(str(s) for s in shape or ())


def parse_shape(text: str, what: str) -> tuple[int, ...]:
    """``"4,2"`` -> ``(4, 2)``; raises :class:`OptionsError` naming ``what`` otherwise."""
    try:
        shape = tuple(int(p) for p in text.split(","))
    except ValueError:
        raise OptionsError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not shape or any(s < 1 for s in shape):
        raise OptionsError(f"{what} entries must be positive, got {text!r}")
    return shape
