"""Check 1, ``environment``: device kind and count, process index/count, versions, SPMD on.

Every host must report the same torch/torch_xla versions and device counts, and SPMD
must be on (``xr.is_spmd()``, torch_xla/runtime.py). On a real pod PJRT's process count
must equal the host count; simulated hosts, and CPU hosts joined with ``--coordinator``
(PJRT's CPU client is one process), are independent SPMD worlds (1 process each).
"""

from __future__ import annotations

from . import FAIL, PASS, CheckContext, CheckResult, gate

FIELDS = (
    "device_kind",
    "addressable_devices",
    "global_devices",
    "xla_process_index",
    "xla_process_count",
    "torch",
    "torch_xla",
    "spmd",
)


def check(ctx: CheckContext) -> CheckResult:
    """PASS when all hosts agree on versions and device counts and SPMD is on."""
    blocked = gate(ctx, "environment")
    if blocked:
        return blocked
    per_host = {
        str(r["host_index"]): {k: r["environment"].get(k) for k in FIELDS} for r in ctx.present
    }
    first = ctx.first_record["environment"]
    n_hosts = len(ctx.records)
    problems, rules, causes = [], [], []
    for key in ("torch", "torch_xla", "device_kind", "addressable_devices", "global_devices"):
        values = {h: v[key] for h, v in per_host.items()}
        if len(set(map(str, values.values()))) > 1:
            problems.append(
                f"{key} differs between hosts: "
                + ", ".join(f"host {h}: {v}" for h, v in values.items())
            )
            causes.append(
                "hosts run different software or see different devices: install the same torch/torch_xla pair "
                "everywhere (pip install 'xla-lint[runtime]') and start every host with the same PJRT_DEVICE"
            )
    off = [h for h, v in per_host.items() if not v["spmd"]]
    if off:
        problems.append(f"SPMD is off on host(s) {', '.join(off)}")
        causes.append(
            "call torch_xla.runtime.use_spmd() before any tensor or model reaches the XLA device"
        )
        rules.append("XLA002")
    counts = {h: v["xla_process_count"] for h, v in per_host.items()}
    separate_worlds = ctx.simulated or (
        all(v["device_kind"] == "CPU" for v in per_host.values()) and set(counts.values()) == {1}
    )
    if not separate_worlds and n_hosts > 1:
        if any(c != n_hosts for c in counts.values()):
            problems.append(
                f"the host group has {n_hosts} hosts but PJRT reports {sorted(set(counts.values()))} process(es)"
            )
            causes.append(
                "the checker's host group and the XLA runtime disagree on the process layout: in SPMD there is one "
                "process per host and xr.process_index() identifies it (not xm.get_ordinal())"
            )
            rules.append("XLA005")
        indices = sorted(v["xla_process_index"] for v in per_host.values())
        if indices != list(range(len(indices))) and "XLA005" not in rules:
            problems.append(f"PJRT process indices are {indices}, not 0..{len(indices) - 1}")
            rules.append("XLA005")
    summary = (
        f"{first['device_kind']} x{first['addressable_devices']} addressable / {first['global_devices']} global devices per process, "
        f"XLA process {first['xla_process_index']} of {first['xla_process_count']}, {n_hosts} host(s), "
        f"torch {first['torch']}, torch_xla {first['torch_xla']}, SPMD {'on' if first['spmd'] else 'OFF'}"
    )
    if ctx.simulated:
        summary += " (simulated hosts: every process is its own SPMD world)"
    elif separate_worlds and n_hosts > 1:
        summary += " (CPU hosts: every process is its own SPMD world)"
    values = {"hosts": per_host, "device_env": ctx.device_env}
    if problems:
        return CheckResult(
            "environment",
            FAIL,
            "; ".join(problems),
            values,
            explanation="; ".join(causes),
            rules=rules,
        )
    return CheckResult("environment", PASS, summary, values)
