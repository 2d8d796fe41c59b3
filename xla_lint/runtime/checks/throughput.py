"""Check 10, ``throughput`` (information only, never FAILs): compile time, step time, tokens/s."""

from __future__ import annotations

from . import PASS, SKIP, CheckContext, CheckResult, gate


def check(ctx: CheckContext) -> CheckResult:
    """Compile seconds (sum of ``CompileTime``), median step seconds after warm-up, tokens per second."""
    blocked = gate(ctx, "throughput")
    if blocked:
        return (
            blocked if blocked.status == SKIP else CheckResult("throughput", SKIP, blocked.summary)
        )
    t = ctx.first_record["timings"]
    step = t.get("step_s_median")
    tokens = t.get("tokens_per_step")
    tps = tokens / step if step else None
    unit = t.get("unit", "tokens")
    values = {
        "compile_s": t.get("compile_s_total"),
        "step_s_median": step,
        "tokens_per_step": tokens,
        "tokens_per_s": round(tps, 1) if tps else None,
        "unit": unit,  # "tokens" (decoder) or "examples" (--model): what tokens_per_* count
        "timings": t,
    }
    if not step:
        return CheckResult(
            "throughput",
            SKIP,
            "not run: no step after the warm-up to time (run more --steps than --warmup-steps)",
            values,
        )
    summary = (
        f"compile {t.get('compile_s_total', 0):.2f} s total; step {step * 1000:.1f} ms (median after warm-up); "
        f"{tokens} {unit}/step -> {tps:,.0f} {unit}/s"
    )
    return CheckResult("throughput", PASS, summary, values)
