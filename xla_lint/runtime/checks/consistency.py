"""Check 7, ``consistency``: one shared model, not N private ones.

Two comparisons, from the run records gathered over the gloo group:

* across hosts: the final loss and the parameter checksum (sum of ``|p|`` and of
  ``p**2`` over all parameters, reduced on the devices) must agree on every host;
* within the SPMD program: the device-side sum of ``|p|`` must equal the sum over the
  shards the devices actually hold, read back shard by shard (each shard counted once),
  i.e. the devices' shards form the model the program computes with.
"""

from __future__ import annotations

import math

from . import FAIL, PASS, CheckContext, CheckResult, gate

RTOL = 1e-5


def _close(a: float, b: float, rtol: float = RTOL) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-6)


def check(ctx: CheckContext) -> CheckResult:
    """FAIL when hosts disagree on the loss or checksum, or shards do not add up."""
    blocked = gate(ctx, "consistency")
    if blocked:
        return blocked
    recs = ctx.present
    per_host = {
        str(r["host_index"]): {
            "final_loss": r["losses"][-1] if r["losses"] else None,
            "abs_sum": r["checksum"]["abs_sum"],
            "sq_sum": r["checksum"]["sq_sum"],
            "local_shard_abs_sum": r["checksum"]["local_shard_abs_sum"],
        }
        for r in recs
    }
    ref = per_host[str(recs[0]["host_index"])]
    problems, rules = [], []
    disagree = [
        h
        for h, v in per_host.items()
        if not (
            _close(v["final_loss"], ref["final_loss"])
            and _close(v["abs_sum"], ref["abs_sum"])
            and _close(v["sq_sum"], ref["sq_sum"])
        )
    ]
    max_rel = max(
        (
            abs(v[k] - ref[k]) / max(abs(ref[k]), 1e-12)
            for v in per_host.values()
            for k in ("final_loss", "abs_sum", "sq_sum")
        ),
        default=0.0,
    )
    explanation = ""
    if disagree:
        problems.append(
            f"host(s) {', '.join(disagree)} disagree with host {recs[0]['host_index']}: "
            + "; ".join(
                f"host {h}: loss {v['final_loss']:.6g}, checksum {v['abs_sum']:.8g}"
                for h, v in per_host.items()
            )
        )
        explanation = (
            "the hosts trained different models: they started from different seeds or each built and stepped its own "
            "replica without synchronising. Seed identically on every host (torch.manual_seed(seed), not seed + "
            "process index), build the model the same way everywhere and let ONE SPMD program (xr.use_spmd() before "
            "any XLA tensor) own the parameters; in SPMD do not pick data or seeds by xm.get_ordinal()"
        )
        rules += ["XLA005", "XLA002"]
    spans = bool(recs[0]["checksum"].get("spans_hosts"))
    if spans:
        shard_total = sum(v["local_shard_abs_sum"] for v in per_host.values())
        shard_pairs = [("all hosts", shard_total, ref["abs_sum"])]
    else:
        shard_pairs = [
            (f"host {h}", v["local_shard_abs_sum"], v["abs_sum"]) for h, v in per_host.items()
        ]
    bad_shards = [(who, a, b) for who, a, b in shard_pairs if not _close(a, b, 1e-4)]
    if bad_shards:
        problems.append(
            "; ".join(
                f"{who}: shards add up to {a:.8g} but the program's parameters sum to {b:.8g}"
                for who, a, b in bad_shards
            )
        )
        explanation = (explanation + "; " if explanation else "") + (
            "the devices' shards do not form the model the program computes with: a parameter was modified outside "
            "the traced step or re-sharded inconsistently"
        )
    values = {
        "hosts": per_host,
        "max_relative_difference": max_rel,
        "rtol": RTOL,
        "spans_hosts": spans,
        "shard_sums": [{"who": w, "shards": a, "program": b} for w, a, b in shard_pairs],
    }
    if problems:
        return CheckResult(
            "consistency", FAIL, "; ".join(problems), values, explanation=explanation, rules=rules
        )
    n = len(per_host)
    who = f"{n} hosts agree" if n > 1 else "1 host"
    summary = (
        f"{who}: final loss {ref['final_loss']:.6g}, parameter checksum {ref['abs_sum']:.8g}"
        + (f" (max relative difference {max_rel:.1e}, gathered over gloo)" if n > 1 else "")
        + f"; device shards add up to the program's parameters ({shard_pairs[0][1]:.8g})"
    )
    return CheckResult("consistency", PASS, summary, values)
