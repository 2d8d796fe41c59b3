"""Check ``compile-cache`` (only with ``--compile-cache DIR``): a second process loads the
training graphs from torch_xla's persistent compilation cache.

The job calls ``xr.initialize_cache(DIR)`` (torch_xla/runtime.py) before any graph, trains,
then runs the warm-up steps of the same job in a second process with the same cache and
reads its counters (torch_xla/debug/metrics.py): ``PersistentCacheHit``,
``PersistentCacheMiss``, ``PersistentCacheDeserializeFailure``, ``UncachedCompile``. The CPU
PJRT client writes the cache but cannot deserialize it (torch_xla logs ``UNIMPLEMENTED:
Deserializing serialized executable not supported``): that is reported as SKIP, "not loadable
on CPU", neither a pass nor a failure.
"""

from __future__ import annotations

from . import FAIL, PASS, SKIP, CheckContext, CheckResult, gate

NAME = "compile-cache"


def check(ctx: CheckContext) -> CheckResult:
    """PASS when the second process hit the cache and compiled nothing, SKIP when it cannot
    load on this device (CPU) or was not measured, FAIL when it missed the cache."""
    blocked = gate(ctx, "recompilation")  # needs the train stage, like the recompilation check
    if blocked:
        return CheckResult(
            NAME, blocked.status if blocked.status == SKIP else SKIP, blocked.summary
        )
    data = ctx.first_record.get("compile_cache") or {}
    first = data.get("first_process") or {}
    values = {"dir": ctx.options.get("compile_cache"), **data}
    wrote = (
        f"first process: {first.get('PersistentCacheMiss', 0)} graph(s) missed the cache and were written "
        f"({first.get('files', 0)} file(s) in {ctx.options.get('compile_cache')})"
    )
    if "not_measured" in data:
        return CheckResult(NAME, SKIP, f"not measured: {data['not_measured']}; {wrote}", values)
    second = data.get("second_process") or {}
    counters = second.get("counters") or {}
    measured = ", ".join(
        f"{k} {counters.get(k, 0)}"
        for k in (
            "PersistentCacheHit",
            "PersistentCacheMiss",
            "PersistentCacheDeserializeFailure",
            "UncachedCompile",
        )
    )
    details = [wrote, f"second process: {measured}" if counters else "second process: no counters"]
    device = (ctx.first_record.get("environment") or {}).get("device_kind", "")
    if counters.get("PersistentCacheDeserializeFailure") or second.get("unimplemented"):
        if str(device).upper().startswith("CPU"):
            return CheckResult(
                NAME,
                SKIP,
                "not loadable on CPU (UNIMPLEMENTED): the CPU client writes the cache but "
                "cannot deserialize executables, so the second process compiled again; run on TPU to "
                "check the cache",
                values,
                details=details,
            )
        return CheckResult(
            NAME,
            FAIL,
            f"the second process could not load the cached graphs ({measured})",
            values,
            explanation="the files are there but the PJRT client failed to deserialize them: the cache was "
            "written by another torch_xla/libtpu version or device kind; clear the folder",
            details=details,
        )
    if second.get("error"):
        return CheckResult(NAME, SKIP, f"not measured: {second['error']}", values, details=details)
    if counters.get("PersistentCacheHit", 0) > 0 and not counters.get("UncachedCompile", 0):
        return CheckResult(
            NAME,
            PASS,
            f"a second process loaded {counters['PersistentCacheHit']} graph(s) from the "
            "cache and compiled none",
            values,
            details=details,
        )
    return CheckResult(
        NAME,
        FAIL,
        f"a second process did not load the training graphs from the cache ({measured})",
        values,
        explanation="xr.initialize_cache(DIR) must run before the first graph in every process, with the "
        "same folder, readonly=False on the process that writes (XLA021 flags a late call)",
        rules=["XLA021"],
        details=details,
    )
