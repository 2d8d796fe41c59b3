"""The runtime checker's options as one frozen dataclass.

This module is torch-free: the CLI, the simulated-host launcher and the job all
share :class:`RuntimeOptions`, and the launcher turns it back into a command line
(:meth:`RuntimeOptions.to_argv`) for every simulated host process.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ..scalars import recompile_step

#: Axis names a 1-D or 2-D mesh may use. ``fsdp`` is the axis FSDPv2 shards
#: parameters on (torch_xla/experimental/spmd_fully_sharded_data_parallel.py
#: raises ``ValueError("The mesh must have an axis named 'fsdp'.")`` without it);
#: ``data`` alone means plain SPMD data parallelism (parameters replicated).
KNOWN_AXES = ("fsdp", "tensor", "data")

#: Fault-injection kinds accepted by ``--inject`` (developer option, used by the
#: tests to prove every check can fail).
INJECT_KINDS = (
    "replicated-params",
    "shape-change-at",
    "diverge-seeds",
    "missing-host",
    "crash-at",
    "sigkill",
)

#: Default number of steps allowed to compile (the first two: the step itself, then the
#: step with the optimizer state that step 1 created); capped at ``--steps``.
DEFAULT_WARMUP_STEPS = 2

#: Options that may differ between hosts: where a host is, what it prints, how long it
#: waits. Every other option must be the same on every host (compared at the rendezvous).
PER_HOST_OPTIONS = (
    "host_index",
    "num_hosts",
    "coordinator",
    "simulated",
    "simulate_hosts",
    "json_path",
    "quiet",
    "timeout",
    "job_timeout",
)

OPTIMIZERS = ("adamw", "sgd", "syncfree-adamw")
#: Optimizers with Adam's betas and host-side bias correction (the XLA204 step-counter probe).
ADAM_OPTIMIZERS = ("adamw", "syncfree-adamw")


class OptionsError(ValueError):
    """An invalid combination of options (the CLI turns it into exit status 2)."""


@dataclass(frozen=True)
class Injection:
    """One injected fault: ``kind`` from :data:`INJECT_KINDS`, ``arg`` its integer argument.

    ``shape-change-at:S`` (1-based step S), ``missing-host:H`` (host index H is
    never started by ``--simulate-hosts``), ``crash-at:S`` (raise inside step S on
    every host), ``sigkill:H@S`` (host H sends itself SIGKILL at the start of step S;
    ``host`` is H, ``arg`` S), ``replicated-params`` and ``diverge-seeds`` (seed = seed +
    host index) take no argument.
    """

    kind: str
    arg: int | None = None
    host: int | None = None

    @classmethod
    def parse(cls, text: str) -> Injection:
        """Parse ``kind``, ``kind:N`` or ``sigkill:H@S``; raises :class:`OptionsError`
        (one line naming the accepted forms) otherwise."""
        kind, _, arg = text.partition(":")
        if kind not in INJECT_KINDS:
            raise OptionsError(
                f"--inject {text!r} is not a known fault; known: "
                "replicated-params, shape-change-at:STEP, diverge-seeds, missing-host:H, crash-at:STEP, sigkill:H@STEP"
            )
        if kind == "sigkill":
            host, at, step = arg.partition("@")
            if not (host.isdigit() and at and step.isdigit()):
                raise OptionsError(
                    f"--inject {text!r}: sigkill needs a host index and a step, sigkill:H@STEP (e.g. sigkill:1@3)"
                )
            return cls(kind, int(step), int(host))
        if kind in ("shape-change-at", "missing-host", "crash-at"):
            if not arg.isdigit():
                raise OptionsError(
                    f"--inject {text!r}: {kind} needs an integer argument, e.g. {kind}:1"
                )
            return cls(kind, int(arg))
        if arg:
            raise OptionsError(f"--inject {text!r}: {kind} takes no argument")
        return cls(kind, None)

    def __str__(self) -> str:
        if self.host is not None:
            return f"{self.kind}:{self.host}@{self.arg}"
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
    warmup_steps: int | None = (
        None  # None: the default, min(DEFAULT_WARMUP_STEPS, steps); see .warmup
    )
    batch_per_device: int = 2
    optimizer: str = "adamw"
    lr: float = 3e-3
    betas: tuple[float, float] | None = None  # None: the optimizer's default, (0.9, 0.999)
    weight_decay: float | None = None  # None: the optimizer's default (AdamW 0.01, SGD 0)
    fast_forward: bool = False  # --fast-forward-step: jump the step counter near the XLA204 step
    compile_cache: str | None = None  # --compile-cache DIR: xr.initialize_cache(DIR) first
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
        problems = [
            *self._mesh_problems(),
            *self._size_problems(),
            *self._host_problems(),
            *self._inject_problems(),
        ]
        if problems:
            raise OptionsError("; ".join(problems))

    def _mesh_problems(self) -> list[str]:
        problems = []
        axes = ",".join(self.mesh_axes)
        if not self.mesh_axes or len(set(self.mesh_axes)) != len(self.mesh_axes):
            problems.append(f"--mesh needs distinct axis names, got {axes}")
        for axis in self.mesh_axes:
            if axis not in KNOWN_AXES:
                problems.append(f"--mesh axis {axis!r} is not one of {', '.join(KNOWN_AXES)}")
        if "data" in self.mesh_axes and len(self.mesh_axes) > 1:
            problems.append("--mesh data is plain data parallelism and takes no other axis")
        if self.mesh_axes and "data" not in self.mesh_axes and "fsdp" not in self.mesh_axes:
            problems.append(
                f"--mesh {axes} has no 'fsdp' axis: FSDPv2 shards along 'fsdp' (use fsdp, fsdp,tensor or data)"
            )
        if self.mesh_shape is not None and len(self.mesh_shape) != len(self.mesh_axes):
            problems.append(
                f"--mesh-shape {fmt_shape(self.mesh_shape)} has {len(self.mesh_shape)} entries but "
                f"--mesh {axes} has {len(self.mesh_axes)} axes"
            )
        if self.dcn_mesh_shape is not None and len(self.dcn_mesh_shape) != len(self.mesh_axes):
            problems.append(
                f"--dcn-mesh-shape {fmt_shape(self.dcn_mesh_shape)} needs one entry per mesh axis ({axes})"
            )
        return problems

    def _size_problems(self) -> list[str]:
        problems = []
        for name in ("dim", "layers", "heads", "vocab", "seq_len", "steps", "batch_per_device"):
            if getattr(self, name) < 1:
                problems.append(
                    f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}"
                )
        if self.heads >= 1 and self.dim % self.heads:
            problems.append(f"--dim {self.dim} must be divisible by --heads {self.heads}")
        if (
            self.warmup_steps is not None
            and self.steps >= 1
            and not 0 <= self.warmup_steps < self.steps
        ):
            problems.append(
                f"--warmup-steps {self.warmup_steps} must be in 0..{self.steps - 1} (below --steps {self.steps}; "
                f"the default is min({DEFAULT_WARMUP_STEPS}, --steps))"
            )
        if self.optimizer not in OPTIMIZERS:
            problems.append(f"--optimizer must be one of {', '.join(OPTIMIZERS)}")
        problems += self._optimizer_problems()
        if self.model is not None:
            module, _, fn = self.model.partition(":")
            if not module or not fn:
                problems.append(
                    f"--model {self.model!r} must be module:function (e.g. mypkg.model:build)"
                )
            if self.input_shape is None:
                problems.append(
                    "--model needs --input-shape (the shape of one example, without the batch dimension)"
                )
        if self.input_dtype not in ("float32", "bfloat16", "int64"):
            problems.append("--input-dtype must be float32, bfloat16 or int64")
        if not (
            self.timeout > 0
            and self.job_timeout > 0
            and math.isfinite(self.timeout)
            and math.isfinite(self.job_timeout)
        ):
            problems.append(
                "--timeout and --job-timeout must be positive, finite numbers of seconds"
            )
        if not (self.lr > 0 and math.isfinite(self.lr)):
            problems.append(f"--lr must be a positive, finite number, got {self.lr}")
        if self.cpu_devices is not None and self.cpu_devices < 1:
            problems.append("--cpu-devices must be at least 1")
        if self.shard_threshold_bytes < 0:
            problems.append("--shard-threshold-bytes must be at least 0")
        return problems

    def _optimizer_problems(self) -> list[str]:
        problems = []
        adam = self.optimizer in ADAM_OPTIMIZERS
        if self.betas is not None:
            if len(self.betas) != 2:
                problems.append(f"--betas needs two numbers B1,B2, got {len(self.betas)}")
            elif not all(0.0 <= b < 1.0 for b in self.betas):
                problems.append(
                    f"--betas {fmt_betas(self.betas)}: each must be in [0, 1) (torch.optim.AdamW raises otherwise)"
                )
            if not adam:
                problems.append(
                    f"--betas is for {', '.join(ADAM_OPTIMIZERS)}; --optimizer {self.optimizer} has none"
                )
        if self.weight_decay is not None and not (
            self.weight_decay >= 0 and math.isfinite(self.weight_decay)
        ):
            problems.append(f"--weight-decay must be at least 0, got {self.weight_decay}")
        if self.fast_forward:
            if not adam:
                problems.append(
                    f"--fast-forward-step probes Adam's bias correction; use --optimizer "
                    f"{' or '.join(ADAM_OPTIMIZERS)} (got {self.optimizer})"
                )
            elif (
                step := recompile_step(self.betas[1] if self.betas else 0.999)
            ) is None or step <= 1:
                beta2 = self.betas[1] if self.betas else 0.999
                problems.append(
                    f"--fast-forward-step: with beta2={beta2!r} Adam's bias correction never becomes a "
                    "new constant (it is 1.0 from the first step or never), so there is no recompile "
                    "to probe"
                )
            elif self.steps >= 1 and self.steps - max(self.warmup, 1) < 4:
                problems.append(
                    f"--fast-forward-step needs at least 4 steps after the warm-up to see the recompile "
                    f"(--steps {self.steps}, --warmup-steps {self.warmup}); e.g. --steps {max(self.warmup, 1) + 10}"
                )
        if self.compile_cache is not None and not self.compile_cache.strip():
            problems.append("--compile-cache needs a folder")
        return problems

    def _host_problems(self) -> list[str]:
        problems = []
        if self.num_hosts is not None and self.num_hosts < 1:
            problems.append("--num-hosts must be at least 1")
        if self.host_index is not None and self.host_index < 0:
            problems.append("--host-index must be at least 0")
        elif (
            self.host_index is not None
            and self.num_hosts is not None
            and not self.host_index < self.num_hosts
        ):
            problems.append(
                f"--host-index {self.host_index} is outside 0..{self.num_hosts - 1} (--num-hosts {self.num_hosts})"
            )
        if self.coordinator is not None:
            host, _, port = self.coordinator.rpartition(":")
            if not host or not port.isdigit():
                problems.append(f"--coordinator must be HOST:PORT, got {self.coordinator!r}")
            elif not 1 <= int(port) <= 65535:
                problems.append(f"--coordinator {self.coordinator}: the port must be in 1..65535")
        if self.simulate_hosts is not None:
            if self.simulate_hosts < 1:
                problems.append("--simulate-hosts must be at least 1")
            if self.coordinator or self.num_hosts or self.host_index is not None:
                problems.append(
                    "--simulate-hosts starts its own hosts; drop --coordinator/--num-hosts/--host-index"
                )
        return problems

    def _inject_problems(self) -> list[str]:
        problems = []
        hosts = (
            self.simulate_hosts or self.num_hosts
        )  # None: not known yet (one host, or MASTER_ADDR/WORLD_SIZE)
        missing = {inj.arg for inj in self.inject if inj.kind == "missing-host"}
        for inj in self.inject:
            if inj.kind == "missing-host":
                if self.simulate_hosts is None:
                    problems.append(f"--inject {inj} needs --simulate-hosts")
                elif not 0 <= (inj.arg or 0) < self.simulate_hosts:
                    problems.append(
                        f"--inject {inj}: host {inj.arg} is not in 0..{self.simulate_hosts - 1} (--simulate-hosts)"
                    )
            if (
                inj.kind in ("crash-at", "sigkill")
                and self.steps >= 1
                and not 1 <= (inj.arg or 0) <= self.steps
            ):
                problems.append(
                    f"--inject {inj} must name a step in 1..{self.steps} (--steps {self.steps})"
                )
            if inj.kind == "shape-change-at" and self.steps >= 1:
                first, last = self.warmup + 1, self.steps
                if first > last:
                    problems.append(
                        f"--inject {inj}: every one of the {self.steps} steps is a warm-up step (allowed to "
                        f"compile), so the change cannot be caught; run more --steps than --warmup-steps"
                    )
                elif not first <= (inj.arg or 0) <= last:
                    problems.append(
                        f"--inject {inj} must name a step after the warm-up, in {first}..{last} (steps "
                        f"1..{self.warmup} may compile, so a change there is never reported)"
                    )
            if inj.kind == "diverge-seeds" and hosts == 1:
                problems.append(
                    f"--inject {inj} needs at least 2 hosts (--simulate-hosts 2): one host has nothing to disagree with"
                )
            if inj.kind == "sigkill":
                if not hosts or hosts < 2:
                    problems.append(
                        f"--inject {inj} needs at least 2 hosts (--simulate-hosts N or --num-hosts N): "
                        "another host or the launcher must survive to report the death"
                    )
                elif not 0 <= (inj.host or 0) < hosts:
                    problems.append(f"--inject {inj}: host {inj.host} is not in 0..{hosts - 1}")
                elif inj.host in missing:
                    problems.append(
                        f"--inject {inj}: host {inj.host} is never started (--inject missing-host:{inj.host})"
                    )
        return problems

    # -- derived values -------------------------------------------------------------
    @property
    def warmup(self) -> int:
        """Steps allowed to compile: ``--warmup-steps`` if given, else min(2, ``--steps``)."""
        return (
            self.warmup_steps
            if self.warmup_steps is not None
            else min(DEFAULT_WARMUP_STEPS, max(self.steps, 0))
        )

    def injected(self, kind: str) -> Injection | None:
        """The injection of ``kind`` if one was requested, else None."""
        for inj in self.inject:
            if inj.kind == kind:
                return inj
        return None

    def seed_for(self, host_index: int) -> int:
        """The model seed of a host: ``--seed``, plus the host index under ``--inject diverge-seeds``."""
        return self.seed + (host_index if self.injected("diverge-seeds") else 0)

    def comparable(self) -> dict:
        """The options every host must share (:meth:`to_json` without :data:`PER_HOST_OPTIONS`)."""
        return {k: v for k, v in self.to_json().items() if k not in PER_HOST_OPTIONS}

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
            elif f.name == "warmup_steps":
                value = self.warmup
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
            "--betas": fmt_betas(self.betas) if self.betas else None,
            "--weight-decay": repr(self.weight_decay) if self.weight_decay is not None else None,
            "--compile-cache": self.compile_cache,
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
        if self.fast_forward:
            argv.append("--fast-forward-step")
        if self.bare:
            argv.append("--bare")
        if self.quiet:
            argv.append("--quiet")
        return argv


def fmt_shape(shape: tuple[int, ...] | None) -> str:
    """``(4, 2)`` -> ``"4,2"``."""
    return ",".join(str(s) for s in shape or ())


def fmt_betas(betas: tuple[float, ...]) -> str:
    """``(0.9, 0.95)`` -> ``"0.9,0.95"`` (``repr`` of each, so it parses back exactly)."""
    return ",".join(repr(float(b)) for b in betas)


def parse_betas(text: str) -> tuple[float, float]:
    """``"0.9,0.95"`` -> ``(0.9, 0.95)``; raises :class:`OptionsError` (one line) otherwise.

    The range, ``0 <= b < 1``, is checked by :class:`RuntimeOptions`."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        raise OptionsError(
            f"--betas must be two comma-separated numbers B1,B2 (e.g. 0.9,0.95), got {text!r}"
        ) from None
    if len(values) != 2:
        raise OptionsError(f"--betas needs two numbers B1,B2 (e.g. 0.9,0.95), got {text!r}")
    return values[0], values[1]


def parse_shape(text: str, what: str) -> tuple[int, ...]:
    """``"4,2"`` -> ``(4, 2)``; raises :class:`OptionsError` naming ``what`` otherwise."""
    try:
        shape = tuple(int(p) for p in text.split(","))
    except ValueError:
        raise OptionsError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not shape or any(s < 1 for s in shape):
        raise OptionsError(f"{what} entries must be positive, got {text!r}")
    return shape


def mesh_device_problem(opts: RuntimeOptions, devices: int, where: str) -> str | None:
    """Why ``--mesh-shape``/``--dcn-mesh-shape`` cannot hold ``devices`` global devices, or None.

    ``xs.Mesh`` asserts ``len(device_ids) == prod(mesh_shape)``
    (torch_xla/distributed/spmd/xla_sharding.py, ``Mesh.__init__``); checking it here turns
    that assertion into a usage error before any device work. ``where`` names the devices
    and where their count came from, e.g. ``"CPU devices (--cpu-devices)"``.
    """
    axes = ",".join(opts.mesh_axes)
    if opts.dcn_mesh_shape is not None:
        slices = math.prod(opts.dcn_mesh_shape)
        ici = opts.mesh_shape
        if ici is None:
            if devices % slices:
                return (
                    f"--dcn-mesh-shape {fmt_shape(opts.dcn_mesh_shape)} makes {slices} slices, which do not divide the "
                    f"{devices} {where}; the product must divide {devices}"
                )
            return None
        total = math.prod(i * d for i, d in zip(ici, opts.dcn_mesh_shape, strict=False))
        if total != devices:
            return (
                f"--mesh-shape {fmt_shape(ici)} x --dcn-mesh-shape {fmt_shape(opts.dcn_mesh_shape)} covers {total} "
                f"devices, but there are {devices} {where}; the sizes must multiply to {devices}"
            )
        return None
    if opts.mesh_shape is None or math.prod(opts.mesh_shape) == devices:
        return None
    example = ",".join([str(devices)] + ["1"] * (len(opts.mesh_axes) - 1))
    if len(opts.mesh_axes) == 2 and devices % 2 == 0 and devices > 2:
        example = f"{devices // 2},2"
    return (
        f"--mesh-shape {fmt_shape(opts.mesh_shape)} covers {math.prod(opts.mesh_shape)} devices, but there are "
        f"{devices} {where}; the sizes must multiply to {devices}, e.g. --mesh {axes} --mesh-shape {example}"
    )


def option_flag(field_name: str) -> str:
    """The command-line flag of a :class:`RuntimeOptions` field (``mesh_axes`` -> ``--mesh``)."""
    return {"mesh_axes": "--mesh", "json_path": "--json"}.get(
        field_name, "--" + field_name.replace("_", "-")
    )


def option_differences(per_host: dict[int, dict]) -> list[str]:
    """One line per option whose value differs between hosts.

    ``per_host`` maps a host index to its :meth:`RuntimeOptions.comparable` dict; a line
    reads ``--steps 20 on host 0 but 10 on hosts 1, 2`` (hosts with equal values grouped).
    """
    lines = []
    names = sorted({k for opts in per_host.values() for k in opts})
    for name in names:
        groups: dict[str, list[int]] = {}
        for host in sorted(per_host):
            groups.setdefault(_option_text(per_host[host].get(name)), []).append(host)
        if len(groups) > 1:
            parts = [
                f"{value} on host{'s' if len(hosts) > 1 else ''} {', '.join(map(str, hosts))}"
                for value, hosts in groups.items()
            ]
            lines.append(f"{option_flag(name)} {' but '.join(parts)}")
    return lines


def _option_text(value: object) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) if value else "(none)"
    return str(value)
