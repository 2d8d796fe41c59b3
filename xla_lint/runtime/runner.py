"""One process's flow: devices -> rendezvous -> job -> gather -> checks -> report.

Imported only after the CLI has checked that torch and torch_xla are installed; it
imports torch itself lazily, after :func:`~xla_lint.runtime.env.configure_device_env`
has set ``PJRT_DEVICE``/``CPU_NUM_DEVICES`` (torch_xla reads them at import).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
import warnings

from .env import configure_device_env
from .options import RuntimeOptions


def run(opts: RuntimeOptions) -> int:
    """Run the checker in this process (or launch the simulated hosts). Returns the exit
    status: 0 all checks passed, 1 a check failed or a host broke.

    Raises :class:`~xla_lint.runtime.options.OptionsError` for an inconsistent host layout.
    """
    t0 = time.perf_counter()
    if opts.simulate_hosts:
        from .hosts import launch_simulated_hosts

        return launch_simulated_hosts(opts)
    device_env = configure_device_env(opts)
    from .hosts import HostGroup, RendezvousError, resolve_layout

    layout = resolve_layout(opts)
    _quiet_library_warnings()
    if opts.bare:
        return _run_bare(opts, t0)

    from .checks import CheckContext, run_all
    from .report import build_report, emit

    group_timeout = max(opts.timeout, opts.job_timeout)
    try:
        group = HostGroup.join(layout, opts.timeout, group_timeout)
    except RendezvousError as exc:
        if layout.host_index != 0:
            print(f"host {layout.host_index}: rendezvous failed: {exc}", file=sys.stderr, flush=True)
            return 1
        rv = exc.result.to_json() if exc.result else {"ok": False, "message": str(exc), "expected": layout.num_hosts}
        rv["ok"] = False
        ctx = CheckContext(opts.to_json(), [], rv, device_env)
        results = run_all(ctx)
        report = build_report(results, opts.to_json(), rv, [], [{"host": 0, "stage": "rendezvous", "error": str(exc)}], device_env, time.perf_counter() - t0)
        emit(report, opts.json_path, opts.quiet)
        return 1

    me = group.host_index
    try:
        from .job import run_job

        record = run_job(opts, me, group.num_hosts, process_group=group.pg).to_json()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - e.g. torch_xla failing to import or to start PJRT
        record = {
            "host_index": me,
            "num_hosts": group.num_hosts,
            "simulated": opts.simulated,
            "environment": {},
            "errors": [{"stage": "environment", "host": me, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]}],
        }
    record.setdefault("timings", {})["process_s"] = round(time.perf_counter() - t0, 3)
    fatal: list[dict] = []
    try:
        records = group.gather(record)
    except Exception as exc:  # noqa: BLE001 - a host died after joining: name it instead of hanging
        done = group.hosts_done()
        lost = [i for i in range(group.num_hosts) if i not in done]
        msg = f"gathering the run records failed ({type(exc).__name__}: {exc})" + (f"; host(s) {lost} never reached it" if lost else "")
        fatal.append({"host": me, "stage": "gather", "error": msg})
        records = [record if i == me else None for i in range(group.num_hosts)]
    for e in record.get("errors", []):
        if me != 0:
            print(f"host {me}: {e['stage']} failed: {e['error']}", file=sys.stderr, flush=True)
    if me != 0:
        code = group.share_status(None, timeout=opts.timeout + 60)
        group.close()
        return code

    rv = group.result.to_json()
    ctx = CheckContext(opts.to_json(), records, rv, device_env, fatal)
    results = run_all(ctx)
    errors = [e for r in records if r for e in r.get("errors", [])] + fatal
    report = build_report(results, opts.to_json(), rv, records, errors, device_env, time.perf_counter() - t0)
    emit(report, opts.json_path, opts.quiet)
    code = report["exit_code"]
    group.share_status(code)
    group.close()
    return code


def _run_bare(opts: RuntimeOptions, t0: float) -> int:
    """``--bare``: the same training loop without the checker; prints one JSON line of timings."""
    from .job import run_bare

    timings = run_bare(opts)
    timings["process_s"] = round(time.perf_counter() - t0, 3)
    line = json.dumps({"bare": timings})
    print(line, flush=True)
    if opts.json_path:
        with open(opts.json_path, "w", encoding="utf-8") as f:
            f.write(line + "\n")
    return 0


def _quiet_library_warnings() -> None:
    """Silence torch/torch_xla Python warnings (deprecations, FSDPv2's tuple-output notice)
    so host 0's output is the report."""
    for module in ("torch", "torch_xla", "torch.distributed"):
        warnings.filterwarnings("ignore", module=module)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
