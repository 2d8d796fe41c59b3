"""Check 8, ``convergence``: the loss is finite at every step and falls over the run."""

from __future__ import annotations

import math

from . import FAIL, PASS, SKIP, CheckContext, CheckResult, gate


def check(ctx: CheckContext) -> CheckResult:
    """FAIL on a non-finite loss (naming the step) or a last loss not below the first."""
    blocked = gate(ctx, "convergence")
    if blocked:
        return blocked
    rec = ctx.first_record
    losses = rec["losses"]
    values = {
        "losses": losses,
        "first": losses[0] if losses else None,
        "last": losses[-1] if losses else None,
    }
    if len(losses) < 2 and int(ctx.options.get("steps") or 0) < 2:
        return CheckResult(
            "convergence",
            SKIP,
            f"not run: {len(losses)} step ran; a falling loss needs at least 2 --steps",
            values,
        )
    bad = [i + 1 for i, v in enumerate(losses) if not math.isfinite(v)]
    if bad:
        return CheckResult(
            "convergence",
            FAIL,
            f"the loss is not finite from step {bad[0]} on ({losses[bad[0] - 1]})",
            values,
            explanation="lower the learning rate (--lr), check the data for NaN/inf and, in bf16, keep the loss and norms in float32",
        )
    if len(losses) < 2 or not losses[-1] < losses[0]:
        lr = ctx.options.get("lr")
        own = (
            " (for --model, the checker trains on the mean square of the output, not your objective)"
            if ctx.options.get("model")
            else ""
        )
        if len(losses) < 2:
            explanation = "fewer than 2 steps ran: run more --steps"
        elif losses[-1] > 1.5 * losses[0]:
            explanation = (
                f"the loss rose: the learning rate (--lr {lr}) is too high for this model{own}; "
                "rerun with a smaller --lr (e.g. --lr 1e-4) before suspecting the sharding"
            )
        elif losses[-1] == losses[0]:
            explanation = (
                "the loss did not move: the optimizer does not update the trained parameters; build it from "
                "model.parameters() AFTER wrapping in FSDPv2 (the wrap replaces them)"
            )
        else:
            explanation = (
                f"the loss did not fall over {len(losses)} steps{own}: try a smaller --lr (now {lr}) or more "
                "--steps; if it never moves, build the optimizer AFTER wrapping in FSDPv2 (the wrap replaces "
                "the parameters)"
            )
        return CheckResult(
            "convergence",
            FAIL,
            f"the loss did not fall: {losses[0]:.4g} at step 1, {losses[-1]:.4g} at step {len(losses)}",
            values,
            explanation=explanation,
        )
    values["relative_drop"] = 1 - losses[-1] / losses[0] if losses[0] else None
    return CheckResult(
        "convergence",
        PASS,
        f"loss {losses[0]:.4g} -> {losses[-1]:.4g} over {len(losses)} steps, all finite",
        values,
    )
