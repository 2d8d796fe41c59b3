"""The checks: each module holds one function ``check(ctx) -> CheckResult``.

A check reads the run records of every host (:class:`CheckContext`) and never touches
torch, so the same functions judge a live run and a saved JSON report. Order matters
only for the report: :data:`CHECK_ORDER`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"

CHECK_ORDER = (
    "environment",
    "rendezvous",
    "mesh",
    "sharding",
    "recompilation",
    "consistency",
    "convergence",
    "checkpoint",
    "throughput",
)

#: job stage -> the check that reports an exception raised in it
#: (xla_lint/runtime/job.py STAGES; "train" failures mean training did not finish).
STAGE_TO_CHECK = {
    "environment": "environment",
    "mesh": "mesh",
    "model": "sharding",
    "train": "convergence",
    "consistency": "consistency",
    "checkpoint": "checkpoint",
}
STAGE_ORDER = ("environment", "mesh", "model", "train", "consistency", "checkpoint")
#: check -> the job stage whose output it needs.
CHECK_NEEDS = {
    "environment": "environment",
    "mesh": "mesh",
    "sharding": "model",
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
    ``fatal``: host-level errors outside the job stages (e.g. the gather failed).
    """

    options: dict
    records: list
    rendezvous: dict
    device_env: dict = field(default_factory=dict)
    fatal: list = field(default_factory=list)

    @property
    def present(self) -> list[dict]:
        """Records of the hosts that delivered one."""
        return [r for r in self.records if r is not None]

    @property
    def first(self) -> dict | None:
        """Host 0's record (or the first present one)."""
        return self.present[0] if self.present else None

    @property
    def simulated(self) -> bool:
        return bool(self.first and self.first.get("simulated"))

    def stage_errors(self) -> list[dict]:
        """All caught exceptions, each with ``host`` and ``stage``."""
        return [e for r in self.present for e in r.get("errors", [])]


# Errors of torch_xla itself whose cause is known, by stage: (text in the error, explanation).
KNOWN_ERRORS = {
    "checkpoint": [(
        "'ellipsis' object is not iterable",
        "This TypeError is raised inside torch_xla 2.9's SPMD checkpoint planner "
        "(torch_xla/experimental/distributed_checkpoint) for shards that are padded: a parameter whose sharded "
        "dimension is not a multiple of the fsdp axis size (e.g. Linear(128, 10) on 8 devices). The checker already "
        "uses torch.distributed.checkpoint with SPMDSavePlanner; make those dimensions multiples of the axis size "
        "(or pad them) to checkpoint this model with the SPMD planners.",
    )],
}


def _known_error(err: dict) -> str | None:
    for needle, why in KNOWN_ERRORS.get(err["stage"], []):
        if needle in err.get("error", ""):
            return why
    return None


def _hint(err: dict) -> str:
    return _known_error(err) or STAGE_HINTS.get(err["stage"], "")


def gate(ctx: CheckContext, name: str) -> CheckResult | None:
    """The FAIL/SKIP a check gets because a job stage raised, or None if it may run.

    The check that owns the failed stage FAILs, naming the host index and the error;
    checks needing a later stage are SKIPped with the reason.
    """
    if not ctx.rendezvous.get("ok", True):
        return CheckResult(name, SKIP, "not run: the hosts did not all join (see rendezvous)")
    if ctx.fatal:
        first = ctx.fatal[0]
        return CheckResult(name, SKIP, f"not run: {first['error']}")
    missing = [i for i, r in enumerate(ctx.records) if r is None]
    if missing and name != "rendezvous":
        return CheckResult(name, SKIP, f"not run: no run record from host(s) {', '.join(map(str, missing))}")
    needed = STAGE_ORDER.index(CHECK_NEEDS[name])
    for err in sorted(ctx.stage_errors(), key=lambda e: (STAGE_ORDER.index(e["stage"]), e["host"])):
        pos = STAGE_ORDER.index(err["stage"])
        if STAGE_TO_CHECK[err["stage"]] == name:
            hosts = sorted({e["host"] for e in ctx.stage_errors() if e["stage"] == err["stage"]})
            return CheckResult(
                name,
                FAIL,
                f"host {err['host']} raised in the {err['stage']} stage: {one_line(err['error'])}",
                {"errors": [e for e in ctx.stage_errors() if e["stage"] == err["stage"]], "hosts": hosts},
                explanation=f"an exception on host {err['host']} stopped the job in its {err['stage']} stage; "
                "the traceback is in the JSON report (errors). " + _hint(err),
                rules=[] if _known_error(err) else STAGE_RULES.get(err["stage"], []),
                details=[line for line in err.get("traceback", "").strip().splitlines()[-3:]],
            )
        if pos <= needed:
            return CheckResult(name, SKIP, f"not run: host {err['host']} failed in the {err['stage']} stage")
    return None


STAGE_HINTS = {
    "environment": "Check that torch and torch_xla are the pinned pair and PJRT finds the devices (PJRT_DEVICE).",
    "mesh": "The mesh shape must multiply to the global device count and name each axis once "
    "(XLA011 mesh-shape-mismatch); pass HybridMesh arguments as keywords (XLA001).",
    "model": "FSDPv2 needs a global mesh with an 'fsdp' axis (XLA009 fsdpv2-mesh) and SPMD enabled "
    "before the model reaches the device (XLA002).",
    "train": "The training step itself raised: read the traceback; a shape error usually means the batch "
    "or sequence length does not fit the model.",
    "consistency": "Reading the parameters back from the devices failed.",
    "checkpoint": "Save sharded state with torch.distributed.checkpoint and SPMDSavePlanner, not torch.save "
    "(XLA003); on a pod --checkpoint-dir must be storage every host sees.",
}
STAGE_RULES = {"mesh": ["XLA011", "XLA001"], "model": ["XLA009", "XLA002"], "checkpoint": ["XLA003"]}


def run_all(ctx: CheckContext) -> list[CheckResult]:
    """Run every check in :data:`CHECK_ORDER`; a check that raises becomes a FAIL."""
    from . import (
        checkpoint,
        consistency,
        convergence,
        environment,
        mesh,
        recompilation,
        rendezvous,
        sharding,
        throughput,
    )

    funcs: dict[str, Callable[[CheckContext], CheckResult]] = {
        "environment": environment.check,
        "rendezvous": rendezvous.check,
        "mesh": mesh.check,
        "sharding": sharding.check,
        "recompilation": recompilation.check,
        "consistency": consistency.check,
        "convergence": convergence.check,
        "checkpoint": checkpoint.check,
        "throughput": throughput.check,
    }
    out = []
    for name in CHECK_ORDER:
        try:
            out.append(funcs[name](ctx))
        except Exception as exc:  # noqa: BLE001 - a broken check must not hide the others
            out.append(CheckResult(name, FAIL, f"the check itself raised {type(exc).__name__}: {exc}"))
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


__all__ = ["PASS", "FAIL", "SKIP", "CheckResult", "CheckContext", "run_all", "gate", "CHECK_ORDER", "fmt_bytes"]
