"""Check 2, ``rendezvous``: every expected host joined within ``--timeout`` with the same
options, indices unique, and every host stayed until the end.

Reads the :class:`~xla_lint.runtime.hosts.RendezvousResult` host 0 built from the
TCPStore ``join/<i>`` keys (xla_lint/runtime/hosts.py), plus ``died``: the hosts that
died or never reached the gather, with the last stage and step they reached (from the
``--simulate-hosts`` launcher, host 0, or a host that lost host 0).
"""

from __future__ import annotations

from . import FAIL, PASS, CheckContext, CheckResult


def check(ctx: CheckContext) -> CheckResult:
    """FAIL names every host index that did not join, or that two processes claimed."""
    rv = ctx.rendezvous
    expected, joined = rv.get("expected", 1), rv.get("joined", [0])
    values = {
        k: rv.get(k)
        for k in (
            "expected",
            "joined",
            "missing",
            "duplicates",
            "elapsed_s",
            "timeout_s",
            "source",
            "coordinator",
            "hosts",
        )
    }
    source = rv.get("source")
    where = (
        {
            "single": "one host",
            "cli": "--coordinator",
            "env": "MASTER_ADDR/WORLD_SIZE/RANK",
            "simulated": "simulated hosts on 127.0.0.1",
            "xla": "init_method='xla://'",
        }.get(source, source)
        if source is not None
        else None
    )
    values["died"] = rv.get("died") or []
    if values["died"]:
        return CheckResult(
            "rendezvous",
            FAIL,
            rv.get("message") or "a host died",
            values,
            explanation=(
                "a host ended before the run was over, so the others stopped instead of waiting for it; that host's own "
                "output (stderr) may say why"
                + (
                    "; SIGKILL (signal 9) usually comes from the kernel's out-of-memory killer or from a scheduler "
                    "reclaiming the machine"
                    if any("SIGKILL" in d.get("how", "") for d in values["died"])
                    else ""
                )
            ),
        )
    if not rv.get("ok", True):
        different = "different options" in (rv.get("message") or "")
        return CheckResult(
            "rendezvous",
            FAIL,
            rv.get("message") or "the hosts did not all join",
            values,
            explanation=(
                "every host must run the same command; only --host-index (and --json, --quiet, --timeout, "
                "--job-timeout) may differ"
                if different
                else "a host that never joins is a host where the command was not started, crashed before joining, or cannot "
                f"reach the coordinator {rv.get('coordinator')}: start the same command on every host with its own "
                "--host-index (0..N-1) and the same --num-hosts"
            ),
        )
    missing_records = [i for i, r in enumerate(ctx.records) if r is None]
    if missing_records and not ctx.interrupted:  # after Ctrl-C the records were not gathered
        return CheckResult(
            "rendezvous",
            FAIL,
            f"host(s) {', '.join(map(str, missing_records))} joined but never delivered a run record",
            values,
            explanation="the host died or hung after joining (see its own output); every host must run the job to the end",
        )
    return CheckResult(
        "rendezvous",
        PASS,
        f"{len(joined)} of {expected} host(s) joined in {rv.get('elapsed_s', 0):.2f} s ({where}); process indices {joined}",
        values,
    )
