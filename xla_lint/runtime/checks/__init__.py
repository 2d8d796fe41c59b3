"""The checks: each module holds one function ``check(ctx) -> CheckResult``.

A check reads the run records of every host (:class:`CheckContext`) and never touches
torch, so the same functions judge a live run and a saved JSON report. Order matters
only for the report: :data:`CHECK_ORDER`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"

CHECK_ORDER = (
    "environment",
    "rendezvous",
    "mesh",
    "sharding",
    "training",
    "recompilation",
    "consistency",
    "convergence",
    "checkpoint",
    "throughput",
)

#: job stage -> the check that reports an exception raised in it
#: (xla_lint/runtime/job.py STAGES; an exception in a training step is the training check's).
STAGE_TO_CHECK = {
    "environment": "environment",
    "mesh": "mesh",
    "model": "sharding",
    "train": "training",
    "consistency": "consistency",
    "checkpoint": "checkpoint",
}
STAGE_ORDER = ("environment", "mesh", "model", "train", "consistency", "checkpoint")
#: check -> the job stage whose output it needs.
CHECK_NEEDS = {
    "environment": "environment",
    "mesh": "mesh",
    "sharding": "model",
    "training": "train",
    "recompilation": "train",
    "consistency": "consistency",
    "convergence": "train",
    "checkpoint": "checkpoint",
    "throughput": "train",
}


@dataclass
class CheckResult:
    """One check's verdict.

    ``status`` is PASS, FAIL or SKIP; ``summary`` one line with the measured values;
    ``values`` the measurements (JSON-ready); ``explanation`` on FAIL the likely cause
    and the fix; ``rules`` the xla-lint rule codes that catch the cause statically;
    ``details`` extra report lines (e.g. the replicated parameters).
    """

    name: str
    status: str
    summary: str
    values: dict = field(default_factory=dict)
    explanation: str = ""
    rules: list = field(default_factory=list)
    details: list = field(default_factory=list)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class CheckContext:
    """What the checks read.

    ``records``: one run-record dict per expected host, in host index order (None for a
    host that never delivered one); ``rendezvous``: the RendezvousResult dict;
    ``options``: the RuntimeOptions dict; ``device_env``: how PJRT_DEVICE was chosen;
    ``fatal``: host-level errors outside the job stages (e.g. the gather failed);
    ``interrupted``: after Ctrl-C, ``{"where": "in step 3 of 10 (train stage)", "joined":
    bool, ...}`` (the checks the run did not reach are SKIPped, :func:`not_reached`).
    """

    options: dict
    records: list
    rendezvous: dict
    device_env: dict = field(default_factory=dict)
    fatal: list = field(default_factory=list)
    interrupted: dict | None = None

    @property
    def present(self) -> list[dict]:
        """Records of the hosts that delivered one."""
        return [r for r in self.records if r is not None]

    @property
    def first(self) -> dict | None:
        """Host 0's record (or the first present one)."""
        return self.present[0] if self.present else None

    @property
    def first_record(self) -> dict:
        """:attr:`first` for a check that :func:`gate` lets run: gate SKIPs every check when
        the rendezvous failed or a host delivered no record."""
        first = self.first
        if first is None:
            raise LookupError("no host delivered a run record")
        return first

    @property
    def simulated(self) -> bool:
        return bool(self.first and self.first.get("simulated"))

    def stage_errors(self) -> list[dict]:
        """All caught exceptions, each with ``host`` and ``stage``."""
        return [e for r in self.present for e in r.get("errors", [])]


# Errors of torch_xla itself whose cause is known, by stage: (text in the error, explanation).
KNOWN_ERRORS = {
    "checkpoint": [
        (
            "'ellipsis' object is not iterable",
            "This TypeError is raised inside torch_xla 2.9's SPMD checkpoint planner "
            "(torch_xla/experimental/distributed_checkpoint) for shards that are padded: a parameter whose sharded "
            "dimension is not a multiple of the fsdp axis size (e.g. Linear(128, 10) on 8 devices). The checker already "
            "uses torch.distributed.checkpoint with SPMDSavePlanner; make those dimensions multiples of the axis size "
            "(or pad them) to checkpoint this model with the SPMD planners.",
        )
    ],
}


def _known_error(err: dict) -> str | None:
    for needle, why in KNOWN_ERRORS.get(err["stage"], []):
        if needle in err.get("error", ""):
            return why
    return None


def _hint(err: dict) -> str:
    return _known_error(err) or STAGE_HINTS.get(err["stage"], "")


def _traceback_note(ctx: CheckContext) -> str:
    """Where the full traceback is: the ``--json`` file if one is written, else nowhere yet."""
    path = ctx.options.get("json_path")
    if path:
        return f'the full traceback is in the JSON report ({path}, "errors").'
    return "the last lines of the traceback are above; rerun with --json PATH to keep the whole traceback."


def gate(ctx: CheckContext, name: str) -> CheckResult | None:
    """The FAIL/SKIP a check gets because a job stage raised, or None if it may run.

    The check that owns the failed stage FAILs, naming the host index and the error;
    checks needing a later stage are SKIPped with the reason.
    """
    if not ctx.rendezvous.get("ok", True):
        died = sorted({d["host"] for d in ctx.rendezvous.get("died") or []})
        if died:
            return CheckResult(
                name,
                SKIP,
                f"not run: host {', '.join(map(str, died))} did not finish the run (see rendezvous)",
            )
        return CheckResult(name, SKIP, "not run: the rendezvous failed (see rendezvous)")
    if ctx.fatal:
        first = ctx.fatal[0]
        return CheckResult(name, SKIP, f"not run: {first['error']}")
    missing = [i for i, r in enumerate(ctx.records) if r is None]
    if missing and name != "rendezvous":
        return CheckResult(
            name, SKIP, f"not run: no run record from host(s) {', '.join(map(str, missing))}"
        )
    needed = STAGE_ORDER.index(CHECK_NEEDS[name])
    for err in sorted(ctx.stage_errors(), key=lambda e: (STAGE_ORDER.index(e["stage"]), e["host"])):
        pos = STAGE_ORDER.index(err["stage"])
        if STAGE_TO_CHECK[err["stage"]] == name:
            hosts = sorted({e["host"] for e in ctx.stage_errors() if e["stage"] == err["stage"]})
            where = (
                f"in step {err['step']} ({err['stage']} stage)"
                if err.get("step")
                else f"in the {err['stage']} stage"
            )
            return CheckResult(
                name,
                FAIL,
                f"host {err['host']} raised {where}: {one_line(err['error'])}",
                {
                    "errors": [e for e in ctx.stage_errors() if e["stage"] == err["stage"]],
                    "hosts": hosts,
                },
                explanation=f"an exception on host {err['host']} stopped the job {where}; {_traceback_note(ctx)} "
                + _hint(err),
                rules=[],
                details=[line for line in err.get("traceback", "").strip().splitlines()[-3:]],
            )
        if pos <= needed:
            return CheckResult(
                name, SKIP, f"not run: host {err['host']} failed in the {err['stage']} stage"
            )
    return None


#: What to look at when a job stage raises. They name no lint rule: the options are
#: checked before the job starts (mesh shape, mesh axes, --model, --checkpoint-dir), and the
#: job itself avoids every pitfall the rules describe, so a rule's pitfall is not the cause.
STAGE_HINTS = {
    "environment": "Check that torch and torch_xla are the pinned pair and PJRT finds the devices (PJRT_DEVICE).",
    "mesh": "torch_xla could not build the mesh from --mesh/--mesh-shape/--dcn-mesh-shape on these devices; "
    "the traceback says why.",
    "model": "Building the model or wrapping it in FSDPv2 (SpmdFullyShardedDataParallel) failed; with --model, the "
    "module is wrapped whole and must be movable to the XLA device.",
    "train": "The training step itself raised: read the traceback; a shape error usually means the batch "
    "or sequence length does not fit the model (--input-shape with --model).",
    "consistency": "Reading the parameters back from the devices failed.",
    "checkpoint": "Saving or loading the sharded checkpoint failed: --checkpoint-dir needs room for the state dict "
    "and, on a pod, must be storage every host sees.",
}


def not_reached(ctx: CheckContext, name: str) -> str | None:
    """After Ctrl-C (``ctx.interrupted``): why check ``name`` is not run, or None when the
    run got far enough for it - the hosts joined (rendezvous), every host delivered a run
    record that completed the stage the check needs (:data:`CHECK_NEEDS`; ``sharding``
    also needs the first batch, ``compile-cache`` the probe after training)."""
    if not ctx.interrupted:
        return None
    why = f"not run: interrupted (Ctrl-C) {ctx.interrupted.get('where', '')}".rstrip()
    if name == "rendezvous":
        return None if ctx.interrupted.get("joined") else why
    missing = [i for i, r in enumerate(ctx.records) if r is None]
    if len(ctx.records) <= 1 and (missing or not ctx.records):
        return why
    if missing:
        return f"{why}; no run record from host(s) {', '.join(map(str, missing))}"
    needed = "consistency" if name == "compile-cache" else CHECK_NEEDS[name]
    for r in ctx.records:
        if needed not in (r.get("completed") or []) or (name == "sharding" and not r.get("batch")):
            return why
    return None


def run_all(ctx: CheckContext) -> list[CheckResult]:
    """Run every check in :data:`CHECK_ORDER` (and ``compile-cache`` after ``recompilation``
    with ``--compile-cache``); a check that raises becomes a FAIL."""
    from . import (
        checkpoint,
        compile_cache,
        consistency,
        convergence,
        environment,
        mesh,
        recompilation,
        rendezvous,
        sharding,
        throughput,
        training,
    )

    funcs: dict[str, Callable[[CheckContext], CheckResult]] = {
        "environment": environment.check,
        "rendezvous": rendezvous.check,
        "mesh": mesh.check,
        "sharding": sharding.check,
        "training": training.check,
        "recompilation": recompilation.check,
        "consistency": consistency.check,
        "convergence": convergence.check,
        "checkpoint": checkpoint.check,
        "throughput": throughput.check,
    }
    names = list(CHECK_ORDER)
    if ctx.options.get("compile_cache"):  # only when asked for: --compile-cache DIR
        funcs[compile_cache.NAME] = compile_cache.check
        names.insert(names.index("recompilation") + 1, compile_cache.NAME)
    out = []
    for name in names:
        reason = not_reached(ctx, name)
        if reason:
            out.append(CheckResult(name, SKIP, reason))
            continue
        try:
            out.append(funcs[name](ctx))
        except Exception as exc:
            out.append(
                CheckResult(name, FAIL, f"the check itself raised {type(exc).__name__}: {exc}")
            )
    return out


def one_line(text: str, limit: int = 300) -> str:
    """Collapse a multi-line error message into one line of at most ``limit`` characters."""
    flat = " / ".join(line.strip() for line in str(text).splitlines() if line.strip())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def fmt_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


__all__ = [
    "PASS",
    "FAIL",
    "SKIP",
    "CheckResult",
    "CheckContext",
    "run_all",
    "gate",
    "CHECK_ORDER",
    "fmt_bytes",
]
