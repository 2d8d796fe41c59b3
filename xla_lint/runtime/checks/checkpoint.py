"""Check 9, ``checkpoint``: a sharded save/load round trip gives back what was saved.

The job saves ``model.state_dict()`` with ``torch.distributed.checkpoint.save`` and
``SPMDSavePlanner``, loads it into zeroed tensors of the same sharding with
``SPMDLoadPlanner`` (torch_xla/experimental/distributed_checkpoint/planners.py) and
compares every tensor on the devices and every sharding spec.
"""

from __future__ import annotations

from . import FAIL, PASS, CheckContext, CheckResult, fmt_bytes, gate

#: why a tensor whose sharded dimension the shards do not divide cannot be checkpointed
UNEVEN_CAUSE = (
    "XLA pads the last shard of a dimension its mesh axis does not divide (64 rows on 3 devices: shards of 22, "
    "the last padded), so training runs; but torch_xla 2.9 reports the local shards of such a tensor like "
    "replicated data, with Ellipsis indices (torch_xla._XLAC._get_local_shard_replica_and_indices), and "
    "SPMDLoadPlanner iterates those indices (_create_chunk_from_shard_index in "
    "torch_xla/experimental/distributed_checkpoint/planners.py), so dist_cp.load raises CheckpointException "
    "wrapping TypeError: 'ellipsis' object is not iterable. The checker left these tensors out of the round trip. "
    "Fix: make every sharded dimension a multiple of its mesh axis size (for the built-in decoder, a device "
    "count that divides --dim and --vocab, e.g. --cpu-devices 2, 4 or 8), or pad those parameters"
)


def check(ctx: CheckContext) -> CheckResult:
    """FAIL names the tensors whose values or shardings differ after the round trip."""
    blocked = gate(ctx, "checkpoint")
    if blocked:
        return blocked
    per_host = {str(r["host_index"]): r["checkpoint"] for r in ctx.present}
    problems, causes = [], []
    for h, c in per_host.items():
        uneven = c.get("uneven") or []
        if uneven:
            first = uneven[0]
            dim = first["dims"][0]
            problems.append(
                f"host {h}: {len(uneven)} of {c['tensors']} tensors have a sharded dimension their shards do not "
                f"divide, e.g. {first['name']} {first['shape']}: dim {dim['dim']} of {dim['size']} in "
                f"{dim['shards']} shards; torch_xla 2.9's SPMD checkpoint planners cannot load them"
            )
            causes.append(UNEVEN_CAUSE)
        lost = c.get("not_written") or []
        if lost:
            partial = [x for x in lost if "last_tile_dim_replicate" in x["sharding_spec"]]
            problems.append(
                f"host {h}: {len(lost)} of {c['tensors']} tensors were not written to the checkpoint at all: "
                + ", ".join(x["name"] for x in lost[:5])
                + (" ..." if len(lost) > 5 else "")
            )
            if partial:
                causes.append(
                    f"these tensors are partially replicated ({partial[0]['sharding_spec']}: split on 'fsdp', copied along "
                    "the other mesh axis), so one process holds two copies of each shard; torch_xla's SPMDSavePlanner "
                    "dedup (dedup_tensors in torch_xla/experimental/distributed_checkpoint/_helpers.py) compares "
                    "MetadataIndex by name and offset only and removes every copy, so dist_cp.save succeeds and "
                    "writes nothing for them; loading then fails with KeyError. Fix: shard such parameters over every "
                    "mesh axis (or use a 1-D fsdp mesh), or subclass SPMDSavePlanner so create_local_plan keeps the "
                    "first write item per (fqn, offset) - see docs/runtime.md"
                )
        if c["mismatches"]:
            problems.append(
                f"host {h}: {len(c['mismatches'])} tensor(s) differ after loading (max |diff| {c['max_abs_diff']:.3g}): {', '.join(c['mismatches'][:5])}"
            )
        if c["sharding_mismatches"]:
            problems.append(
                f"host {h}: sharding changed for {', '.join(c['sharding_mismatches'][:5])}"
            )
        if c["diff_before_load"] == 0.0 and c["tensors"] > len(lost) + len(uneven):
            problems.append(
                f"host {h}: the load targets already equalled the saved tensors, so the round trip proves nothing"
            )
    c0 = per_host[str(ctx.first_record["host_index"])]
    values = {"hosts": per_host}
    if problems:
        generic = (
            "the checker saved with torch.distributed.checkpoint and SPMDSavePlanner and loaded with SPMDLoadPlanner "
            "into tensors that already carry the target sharding, so the difference comes from the storage (on a pod "
            "--checkpoint-dir must be storage every host can see) or from torch_xla's planners, not from your save code"
        )
        return CheckResult(
            "checkpoint",
            FAIL,
            "; ".join(problems),
            values,
            explanation="; ".join(dict.fromkeys(causes)) if causes else generic,
        )
    summary = (
        f"{c0['tensors']} tensors ({fmt_bytes(c0['bytes'])} on disk) saved with SPMDSavePlanner and loaded with SPMDLoadPlanner "
        f"are identical, shardings kept (save {c0['save_s']:.2f} s, load {c0['load_s']:.2f} s; {c0['mode']})"
    )
    return CheckResult("checkpoint", PASS, summary, values)
