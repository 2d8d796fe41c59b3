"""Check 5, ``training``: every training step ran on every host without raising.

An exception inside a step (``--inject crash-at:S`` raises one) is recorded by the job
with its host, step and traceback (xla_lint/runtime/job.py, stage ``train``); this check
FAILs naming them. The checks that read the steps (recompilation, convergence,
throughput) are then SKIPped.
"""

from __future__ import annotations

from . import PASS, CheckContext, CheckResult, gate


def check(ctx: CheckContext) -> CheckResult:
    """PASS with the number of steps each host ran; FAIL names the host and step that raised."""
    blocked = gate(ctx, "training")
    if blocked:
        return blocked
    steps = {str(r["host_index"]): len(r["steps"]) for r in ctx.present}
    n = len(steps)
    where = f" on each of the {n} hosts" if n > 1 else ""
    summary = f"{min(steps.values())} of {ctx.options.get('steps')} step(s) ran{where}, none raised"
    return CheckResult(
        "training", PASS, summary, {"steps_per_host": steps, "steps": ctx.options.get("steps")}
    )
