"""Check 3, ``mesh``: the device mesh holds every global device exactly once; axis sizes.

``xs.Mesh`` asserts the device count itself (torch_xla/distributed/spmd/xla_sharding.py);
this check re-reads the logical mesh from every host's run record.
"""

from __future__ import annotations

from . import FAIL, PASS, CheckContext, CheckResult, gate


def check(ctx: CheckContext) -> CheckResult:
    """PASS when sorted(mesh device ids) == range(global devices) on every host."""
    blocked = gate(ctx, "mesh")
    if blocked:
        return blocked
    problems = []
    for r in ctx.present:
        m, n = r["mesh"], r["mesh"]["global_devices"]
        ids = m["device_ids"]
        if sorted(ids) != list(range(n)):
            dup = sorted({d for d in ids if ids.count(d) > 1})
            absent = sorted(set(range(n)) - set(ids))
            problems.append(
                f"host {r['host_index']}: mesh devices {ids} (duplicated {dup}, absent {absent}) for {n} global devices"
            )
    m = ctx.first_record["mesh"]
    axes = " x ".join(f"{a}={s}" for a, s in m["axis_sizes"].items())
    values = {
        "axis_sizes": m["axis_sizes"],
        "kind": m["kind"],
        "device_ids": m["device_ids"],
        "global_devices": m["global_devices"],
        "note": m.get("note", ""),
        "dcn_mesh_shape": m.get("dcn_mesh_shape"),
    }
    if problems:
        return CheckResult(
            "mesh",
            FAIL,
            "; ".join(problems),
            values,
            explanation="build the mesh from np.arange(xr.global_runtime_device_count()) reshaped to the mesh shape",
            rules=["XLA011"],
        )
    summary = f"{m['kind']} ({axes}) holds all {m['global_devices']} global devices once"
    details = [m["note"]] if m.get("note") else []
    return CheckResult("mesh", PASS, summary, values, details=details)
