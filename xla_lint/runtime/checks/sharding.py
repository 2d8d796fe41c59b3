"""Check 4, ``sharding``: parameters sharded along ``fsdp``, input batch sharded on dim 0.

Reads, per parameter, the HloSharding text from ``torch_xla._XLAC._get_xla_sharding_spec``
and which mesh axis each split dimension follows (xla_lint/runtime/spec.py). FSDPv2
shards each parameter's largest dimension on ``fsdp``
(``_prepare_spmd_partition_spec(..., shard_maximal=True)`` in
torch_xla/experimental/spmd_fully_sharded_data_parallel.py). With ``--mesh data``
parameters are replicated by design and only the input is checked.
"""

from __future__ import annotations

from . import FAIL, PASS, CheckContext, CheckResult, fmt_bytes, gate


def check(ctx: CheckContext) -> CheckResult:
    """FAIL lists every parameter of at least ``--shard-threshold-bytes`` not sharded on fsdp."""
    blocked = gate(ctx, "sharding")
    if blocked:
        return blocked
    opts = ctx.options
    rec = ctx.first_record
    threshold = int(opts.get("shard_threshold_bytes", 0))
    axis_sizes = rec["mesh"]["axis_sizes"]
    data_parallel = list(opts.get("mesh_axes", [])) == ["data"]
    batch_axis = "data" if data_parallel else "fsdp"
    params = rec["parameters"]
    fsdp_size = axis_sizes.get("fsdp", 1)
    on_fsdp = [p for p in params if "fsdp" in p["axes"].values()]
    replicated = [p for p in params if not p["axes"]]
    other = [p for p in params if p["axes"] and "fsdp" not in p["axes"].values()]
    big_unsharded = [
        p for p in params if p["bytes"] >= threshold and "fsdp" not in p["axes"].values()
    ]
    total = sum(p["bytes"] for p in params)
    rep_bytes = sum(p["bytes"] for p in replicated)
    batch = rec.get("batch") or {}
    batch_ok = bool(batch) and batch.get("axes", {}).get("0") == batch_axis
    simulated_note = " per SPMD world" if ctx.simulated else ""
    hosts = len(ctx.records)
    per_host = (
        batch.get("global_batch", 0)
        if (ctx.simulated or hosts == 1)
        else batch.get("global_batch", 0) // max(1, hosts)
    )
    values = {
        "threshold_bytes": threshold,
        "parameters": len(params),
        "parameter_bytes": total,
        "sharded_on_fsdp": len(on_fsdp),
        "replicated": [
            {
                "name": p["name"],
                "bytes": p["bytes"],
                "shape": p["shape"],
                "sharding_spec": p["sharding_spec"],
            }
            for p in replicated
        ],
        "replicated_bytes": rep_bytes,
        "sharded_on_other_axes": [{"name": p["name"], "axes": p["axes"]} for p in other],
        "parameter_specs": {
            p["name"]: {
                "sharding_spec": p["sharding_spec"],
                "shard_shape": p["shard_shape"],
                "axes": p["axes"],
            }
            for p in params
        },
        "input": batch,
        "global_batch": batch.get("global_batch"),
        "per_device_batch": batch.get("per_device_batch"),
        "per_host_batch": per_host,
    }
    details = []
    if replicated:
        details.append(
            f"replicated parameters ({len(replicated)}, {fmt_bytes(rep_bytes)} on every device):"
        )
        details += [
            f"  {p['name']} {p['shape']} {fmt_bytes(p['bytes'])} spec={p['sharding_spec'] or '(none)'}"
            for p in replicated[:12]
        ]
        if len(replicated) > 12:
            details.append(f"  ... and {len(replicated) - 12} more (see the JSON report)")
    batch_line = (
        f"input {batch.get('shape')} sharded on dim 0 along '{batch_axis}' -> {batch.get('shard_shape')} per device; "
        f"global batch {batch.get('global_batch')} = {batch.get('per_device_batch')} per device x {batch.get('devices')} devices{simulated_note}"
        if batch
        else "input batch not recorded"
    )
    problems, causes, rules = [], [], []
    if not data_parallel and fsdp_size > 1 and big_unsharded:
        problems.append(
            f"{len(big_unsharded)} of {len([p for p in params if p['bytes'] >= threshold])} parameters >= {fmt_bytes(threshold)} "
            f"are not sharded along 'fsdp' ({fmt_bytes(sum(p['bytes'] for p in big_unsharded))} held in full on every device): "
            + ", ".join(p["name"] for p in big_unsharded[:5])
            + (" ..." if len(big_unsharded) > 5 else "")
        )
        causes.append(
            "the model was not wrapped in SpmdFullyShardedDataParallel (FSDPv2) or was wrapped before xs.set_global_mesh "
            "with an 'fsdp' axis, so its parameters were never given a partition spec and every device keeps a full copy: "
            "set the global mesh with an 'fsdp' axis, then wrap each decoder layer (auto_wrap_policy="
            "transformer_auto_wrap_policy) and the model in FSDPv2, or xs.mark_sharding the parameters yourself"
        )
        rules.append("XLA009")
    if not batch_ok and (batch.get("devices") or 2) > 1:  # one device: nothing to shard
        problems.append(
            f"the input batch is not sharded on dim 0 along '{batch_axis}' (spec {batch.get('sharding_spec')!r})"
        )
        causes.append(
            f"shard the input: xs.mark_sharding(batch, mesh, ('{batch_axis}', None)) or pl.MpDeviceLoader(loader, device, "
            f"input_sharding=xs.ShardingSpec(mesh, ('{batch_axis}', None))); without it every device computes the whole batch"
        )
    if problems:
        return CheckResult(
            "sharding",
            FAIL,
            "; ".join(problems),
            values,
            explanation="; ".join(causes),
            rules=rules,
            details=details + [batch_line],
        )
    if data_parallel:
        summary = f"data parallel: {len(params)} parameters replicated ({fmt_bytes(total)} per device) by design; {batch_line}"
    elif fsdp_size == 1:
        summary = (
            f"the fsdp axis has size 1, so FSDPv2 sharding is trivially replicated; {batch_line}"
        )
    else:
        small = len(params) - len(on_fsdp) - len(other)
        summary = (
            f"{len(on_fsdp)} of {len(params)} parameters sharded along 'fsdp' ({fmt_bytes(total)} total, ~{fmt_bytes(total / fsdp_size)} per device)"
            + (f", {small} small ones (< {fmt_bytes(threshold)}) replicated" if small else "")
            + f"; {batch_line}"
        )
    return CheckResult("sharding", PASS, summary, values, details=details)
