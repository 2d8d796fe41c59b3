"""Check 6, ``recompilation``: no graph is compiled after the warm-up steps.

Per step the job reads torch_xla/debug/metrics.py: the ``UncachedCompile`` counter
(graphs compiled) and the ``CompileTime`` metric (nanoseconds), before and after
the step's ``torch_xla.sync(wait=True)``, and the optimizer's step counter after it.

A late compile at the optimizer step where Adam's host-side bias correction
``(1 - beta2**step) ** 0.5`` rounds to 1.0 in the parameters' dtype
(:func:`xla_lint.scalars.recompile_step`) is named as XLA204; ``--fast-forward-step``
moves the counter next to that step so the check sees it in seconds.
"""

from __future__ import annotations

from ...scalars import recompile_step
from ..options import ADAM_OPTIMIZERS
from . import FAIL, PASS, SKIP, CheckContext, CheckResult, gate

DEFAULT_BETA2 = 0.999  # torch 2.9.0 torch/optim/adamw.py: betas=(0.9, 0.999)


def adam_recompile_steps(options: dict, record: dict) -> set[int]:
    """The optimizer steps at which this run's Adam changes its graph once (XLA204): one per
    parameter dtype of ``record``; empty for SGD. The parameters' dtype is the one torch_xla
    rounds the bias correction to (default single-tensor path of torch 2.9.0's Adam)."""
    if options.get("optimizer") not in ADAM_OPTIMIZERS:
        return set()
    betas = options.get("betas") or (0.9, DEFAULT_BETA2)
    dtypes = {p.get("dtype", "float32") for p in record.get("parameters") or []} or {"float32"}
    steps = {recompile_step(float(betas[1]), d) for d in dtypes}
    return {s for s in steps if s is not None and s > 1}


def _xla204_explanation(options: dict, x: dict, probe: dict) -> str:
    beta2 = (options.get("betas") or (0.9, DEFAULT_BETA2))[1]
    moved = (
        f" (--fast-forward-step set the counter to {probe['set_to']} after run step {probe['at_run_step']})"
        if probe.get("set_to")
        else ""
    )
    return (
        f"the compile at run step {x['step']} is optimizer step {x['optimizer_step']}{moved}: there Adam's host-side bias "
        f"correction (1 - beta2**step) ** 0.5 with beta2={beta2} rounds to 1.0, and torch_xla bakes the scalar 1.0 into "
        "the graph as a constant instead of a device input, so the step graph changes once (torch/optim/adam.py "
        "_single_tensor_adam; torch_xla special scalars). It compiles once more at that step of every run. Fix: "
        "torch.optim.AdamW(..., capturable=True) keeps the step count and the bias correction on the device; "
        "xla-lint's XLA204 finds the optimizer statically"
    )


def check(ctx: CheckContext) -> CheckResult:
    """FAIL names every step after ``--warmup-steps`` that compiled, with its graph count."""
    blocked = gate(ctx, "recompilation")
    if blocked:
        return blocked
    warmup = int(ctx.options.get("warmup_steps", 2))
    per_host = {}
    late_all = []
    for r in ctx.present:
        steps = r["steps"]
        per_host[str(r["host_index"])] = [s["compiles"] for s in steps]
        for prev, s in zip([None, *steps[:-1]], steps, strict=True):
            if s["step"] > warmup and s["compiles"] > 0:
                late_all.append(
                    {
                        "host": r["host_index"],
                        "step": s["step"],
                        "graphs": s["compiles"],
                        "compile_s": s["compile_s"],
                        "input_shape": s["input_shape"],
                        "previous_input_shape": prev["input_shape"] if prev else None,
                        "optimizer_step": s.get("optimizer_step"),
                    }
                )
    steps0 = ctx.first_record["steps"]
    warm = sum(s["compiles"] for s in steps0[:warmup])
    values = {
        "warmup_steps": warmup,
        "compiles_per_step": per_host,
        "warmup_graphs": warm,
        "late": late_all,
        "steps": len(steps0),
    }
    if late_all:
        first_host = late_all[0]["host"]
        late = [x for x in late_all if x["host"] == first_host]
        named = ", ".join(
            f"step {x['step']} compiled {x['graphs']} graph(s) ({x['compile_s']:.2f} s)"
            for x in late[:6]
        )
        summary = (
            f"after {warmup} warm-up step(s): {named}"
            + (" ..." if len(late) > 6 else "")
            + (f" on host {first_host}" if len(ctx.records) > 1 else "")
        )
        shape_changes = [
            x
            for x in late
            if x["previous_input_shape"] and x["input_shape"] != x["previous_input_shape"]
        ]
        adam_steps = adam_recompile_steps(ctx.options, ctx.first_record)
        scalar = [x for x in late if x.get("optimizer_step") in adam_steps]
        if scalar and not shape_changes:
            explanation = _xla204_explanation(
                ctx.options, scalar[0], ctx.first_record.get("probe") or {}
            )
            rules = ["XLA204"]
            summary += f"; optimizer step {scalar[0]['optimizer_step']} is the XLA204 scalar-constant recompile"
        elif shape_changes:
            x = shape_changes[0]
            explanation = (
                f"the input shape changed at step {x['step']} from {x['previous_input_shape']} to {x['input_shape']}; every new "
                "shape is a new graph. Keep shapes static: drop_last=True on the DataLoader (the last partial batch), pad "
                "sequences to fixed buckets"
            )
            rules = ["XLA202"]
        else:
            explanation = (
                "the same step traced a different graph: a host sync inside the step (.item(), print(tensor), "
                "tensor-dependent Python control flow) cuts the graph differently, or a Python scalar / optimizer "
                "state changes the traced program (compare --optimizer sgd|adamw|syncfree-adamw); run longer with "
                "--steps to find late recompiles and PT_XLA_DEBUG_LEVEL=2 to see why each compile happened"
            )
            rules = ["XLA201", "XLA202"]
        return CheckResult(
            "recompilation",
            FAIL,
            summary,
            values,
            explanation=explanation,
            rules=rules,
            details=[f"graphs compiled per step: {per_host[str(first_host)]}"],
        )
    if len(steps0) <= warmup:
        return CheckResult(
            "recompilation",
            SKIP,
            f"not run: all {len(steps0)} step(s) were warm-up steps, which may compile; "
            "run more --steps than --warmup-steps to look for recompiles",
            values,
            details=[f"graphs compiled per step: {per_host[str(ctx.first_record['host_index'])]}"],
        )
    summary = f"{warm} graph(s) compiled in the {warmup} warm-up step(s), none in the {len(steps0) - warmup} step(s) after"
    return CheckResult(
        "recompilation",
        PASS,
        summary,
        values,
        details=[f"graphs compiled per step: {per_host[str(ctx.first_record['host_index'])]}"],
    )
