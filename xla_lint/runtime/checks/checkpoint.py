"""Check 8, ``checkpoint``: a sharded save/load round trip gives back what was saved.

The job saves ``model.state_dict()`` with ``torch.distributed.checkpoint.save`` and
``SPMDSavePlanner``, loads it into zeroed tensors of the same sharding with
``SPMDLoadPlanner`` (torch_xla/experimental/distributed_checkpoint/planners.py) and
compares every tensor on the devices and every sharding spec.
"""

from __future__ import annotations

from . import FAIL, PASS, CheckContext, CheckResult, fmt_bytes, gate


def check(ctx: CheckContext) -> CheckResult:
    """FAIL names the tensors whose values or shardings differ after the round trip."""
    blocked = gate(ctx, "checkpoint")
    if blocked:
        return blocked
    per_host = {str(r["host_index"]): r["checkpoint"] for r in ctx.present}
    problems = []
    for h, c in per_host.items():
        if c["mismatches"]:
            problems.append(f"host {h}: {len(c['mismatches'])} tensor(s) differ after loading (max |diff| {c['max_abs_diff']:.3g}): {', '.join(c['mismatches'][:5])}")
        if c["sharding_mismatches"]:
            problems.append(f"host {h}: sharding changed for {', '.join(c['sharding_mismatches'][:5])}")
        if c["diff_before_load"] == 0.0:
            problems.append(f"host {h}: the load targets already equalled the saved tensors, so the round trip proves nothing")
    c0 = per_host[str(ctx.first["host_index"])]
    values = {"hosts": per_host}
    if problems:
        return CheckResult(
            "checkpoint", FAIL, "; ".join(problems), values,
            explanation="save sharded state with torch.distributed.checkpoint and SPMDSavePlanner and load it with SPMDLoadPlanner "
            "into tensors that already carry the target sharding (not torch.save/xm.save on sharded tensors); on a pod "
            "--checkpoint-dir must be storage every host can see",
            rules=["XLA003"],
        )
    summary = (
        f"{c0['tensors']} tensors ({fmt_bytes(c0['bytes'])} on disk) saved with SPMDSavePlanner and loaded with SPMDLoadPlanner "
        f"are identical, shardings kept (save {c0['save_s']:.2f} s, load {c0['load_s']:.2f} s; {c0['mode']})"
    )
    return CheckResult("checkpoint", PASS, summary, values)
