"""One process's flow: devices -> preflight -> rendezvous -> job -> gather -> checks -> report.

Imported only after the CLI has checked that torch and torch_xla are installed; it
imports torch itself lazily, after :func:`~xla_lint.runtime.env.configure_device_env`
has set ``PJRT_DEVICE``/``CPU_NUM_DEVICES`` (torch_xla reads them at import).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any

from .env import configure_device_env
from .options import OptionsError, RuntimeOptions
from .preflight import preflight, remove_created
from .progress import (
    BEFORE_JOINING,
    EXIT_INTERRUPTED,
    HostLost,
    JobInterrupted,
    Progress,
    describe_progress,
    first_line,
)


@dataclass
class _Run:
    """What this process has so far, for the partial report after Ctrl-C."""

    opts: RuntimeOptions
    progress: Progress
    t0: float
    device_env: dict | None = None
    layout: Any = None
    rendezvous: dict | None = None  # the RendezvousResult, once the hosts joined
    record: dict | None = None  # this host's run record, complete or (interrupted) partial
    reported: bool = False  # the report is out: Ctrl-C now only changes the exit status

    def host_file(self) -> str | None:
        """Where a simulated host leaves its record for the launcher (beside its progress file)."""
        return f"{self.progress.path}.record.json" if self.progress.path else None

    def leave_record(self, interrupted: str | None = None) -> None:
        """A simulated host writes what the launcher needs to report if the run is interrupted."""
        path = self.host_file()
        if not path or not self.opts.simulated:
            return
        data = {
            "record": self.record,
            "rendezvous": self.rendezvous,
            "interrupted": interrupted,
            "reported": self.reported,
        }
        try:
            with open(f"{path}.tmp", "w", encoding="utf-8") as f:
                json.dump(data, f, default=str)
            os.replace(f"{path}.tmp", path)
        except OSError:
            pass


def _interrupt_once(signum, frame) -> None:
    """A simulated host's SIGINT handler: Ctrl-C reaches it from the terminal and from the
    launcher; the second must not interrupt the first one's partial record."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def run(opts: RuntimeOptions) -> int:
    """Run the checker in this process (or launch the simulated hosts). Returns the exit
    status: 0 all checks passed, 1 a check failed or a host broke, 130 after Ctrl-C (the
    partial report printed: :func:`_report_interrupted`).

    Raises :class:`~xla_lint.runtime.options.OptionsError` for an option found wrong
    before any device work (mesh shape vs. CPU device count, ``--checkpoint-dir``,
    ``--model``, the coordinator port) or, on TPU, once the device count is known.
    """
    t0 = time.perf_counter()
    if opts.simulate_hosts:
        return _launch(opts)
    progress = Progress.from_env(opts.host_index or 0, opts.steps)
    if opts.simulated:
        # the launcher stops a surviving host with SIGTERM when another died: exit through
        # Python so `finally` blocks run (the job removes its temporary checkpoint)
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        signal.signal(signal.SIGINT, _interrupt_once)
    state = _Run(opts, progress, t0)
    status: int | str = "error"
    try:
        status = _run_host(state)
        return status
    except OptionsError:
        status = 2
        raise
    except KeyboardInterrupt:
        status = "interrupted"
        return _report_interrupted(state)
    except SystemExit:
        status = "stopped"
        raise
    finally:
        if status != "stopped":
            progress.finish(status)


def _report_interrupted(state: _Run) -> int:
    """Ctrl-C: host 0 prints the partial report - the checks the run reached, the others
    SKIPped as not run - and every host returns 130. A simulated host leaves its record to
    the launcher, which reports for all; another host says where it was and that host 0
    reports."""
    opts, progress = state.opts, state.progress
    layout = state.layout
    me = layout.host_index if layout is not None else (opts.host_index or 0)
    n = layout.num_hosts if layout is not None else (opts.num_hosts or 1)
    where = describe_progress(progress.as_dict())
    if n == 1 and progress.stage in BEFORE_JOINING:
        where = "before the job started"
    if opts.simulated:
        state.leave_record(where)
        return EXIT_INTERRUPTED
    if state.reported:
        return EXIT_INTERRUPTED
    if me != 0:
        print(
            f"host {me}: interrupted (Ctrl-C) {where}; host 0 prints the report",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_INTERRUPTED
    from .report import report_interrupted

    interrupted = {
        "signal": "SIGINT",
        "where": f"on host 0 {where}" if n > 1 else where,
        "stage": progress.stage,
        "step": progress.step,
        "joined": state.rendezvous is not None,
    }
    rv = state.rendezvous or {
        "ok": False,
        "expected": n,
        "joined": [],
        "missing": [],
        "duplicates": [],
        "source": layout.source if layout is not None else None,
        "message": "interrupted (Ctrl-C) before the hosts joined",
    }
    # the other hosts' records were not gathered: only this host's is there
    records = [state.record] + [None] * (n - 1)
    return report_interrupted(
        opts.to_json(),
        rv,
        records,
        state.device_env or {},
        time.perf_counter() - state.t0,
        interrupted,
        opts.json_path,
        opts.quiet,
    )


def _launch(opts: RuntimeOptions) -> int:
    """``--simulate-hosts N``: check the options once here, then start and watch the hosts."""
    from .hosts import launch_simulated_hosts

    device_env = configure_device_env(opts, dict(os.environ))  # a copy: every host sets up its own
    created, _ = preflight(opts, device_env, opts.seed_for(0))
    try:
        return launch_simulated_hosts(opts, device_env)
    finally:
        remove_created(created)


def _run_host(state: _Run) -> int:
    opts, progress, t0 = state.opts, state.progress, state.t0
    device_env = state.device_env = configure_device_env(opts)
    from .hosts import resolve_layout

    layout = state.layout = resolve_layout(opts)
    progress.host_index = layout.host_index
    _quiet_library_warnings()
    created, user_model = preflight(opts, device_env, opts.seed_for(layout.host_index))
    try:
        if opts.bare:
            return _run_bare(opts, t0)
        return _run_checked(state, layout, device_env, user_model)
    finally:
        remove_created(created)


def _run_checked(state: _Run, layout, device_env: dict, user_model) -> int:
    opts, progress, t0 = state.opts, state.progress, state.t0
    from .checks import CheckContext, run_all
    from .hosts import KEY, HostGroup, RendezvousError
    from .report import build_report, emit

    progress.update("rendezvous")
    try:
        # --timeout: joining; --job-timeout: how long a joined host may keep the others waiting
        group = HostGroup.join(layout, opts.timeout, opts.job_timeout, opts.comparable())
    except RendezvousError as exc:
        progress.update("report")
        if layout.host_index != 0:
            print(
                f"host {layout.host_index}: rendezvous failed: {exc}", file=sys.stderr, flush=True
            )
            return 1
        rv = (
            exc.result.to_json()
            if exc.result
            else {"ok": False, "message": str(exc), "expected": layout.num_hosts}
        )
        rv["ok"] = False
        ctx = CheckContext(opts.to_json(), [], rv, device_env)
        results = run_all(ctx)
        report = build_report(
            results,
            opts.to_json(),
            rv,
            [],
            [
                {"host": 0, "stage": "rendezvous", "error": str(exc)}
                | ({"traceback": exc.native_log} if exc.native_log else {})
            ],
            device_env,
            time.perf_counter() - t0,
        )
        emit(report, opts.json_path, opts.quiet)
        state.reported = True
        return 1

    state.rendezvous = group.result.to_json()
    progress.update("joined")  # until the job's first stage: the hosts joined, nothing ran yet
    state.leave_record()
    if opts.injected("diverge-seeds") and group.num_hosts == 1:
        raise OptionsError(
            "--inject diverge-seeds needs at least 2 hosts (--simulate-hosts 2): one host has nothing to disagree with"
        )
    if group.host_index != layout.host_index:  # joined over xla://: the preflight seeded for host 0
        user_model = None
    try:
        if group.store is not None:
            progress.attach(
                group.store, f"{KEY}progress/{group.host_index}", raise_on_loss=not opts.simulated
            )
        return _run_joined(state, group, device_env, user_model)
    except HostLost as exc:  # host 0 is gone (a real multi-host run): this host reports
        code = _report_coordinator_lost(opts, group, exc, device_env, t0)
        state.reported = True
        return code


def _run_joined(state: _Run, group, device_env: dict, user_model) -> int:
    """Job, gather, checks and report once the hosts have joined; the exit status."""
    from .checks import CheckContext, run_all
    from .report import build_report, emit, report_lost_hosts

    opts, progress, t0 = state.opts, state.progress, state.t0
    me = group.host_index
    try:
        from .job import run_job

        record = run_job(
            opts,
            me,
            group.num_hosts,
            process_group=group.pg,
            progress=progress,
            user_model=user_model,
        ).to_json()
    except JobInterrupted as exc:  # Ctrl-C: the record so far, for the partial report
        state.record = exc.record.to_json()
        raise
    except (KeyboardInterrupt, SystemExit, OptionsError, HostLost):
        raise
    except BaseException as exc:
        record = {
            "host_index": me,
            "num_hosts": group.num_hosts,
            "simulated": opts.simulated,
            "environment": {},
            "errors": [
                {
                    "stage": "environment",
                    "host": me,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc()[-4000:],
                }
            ],
        }
    record.setdefault("timings", {})["process_s"] = round(time.perf_counter() - t0, 3)
    state.record = record
    state.leave_record()
    progress.update("gather")
    fatal: list[dict] = []
    lost: list[dict] = []
    try:
        records = group.gather(record)
    except Exception as exc:
        found = group.lost_hosts()
        if found is None:  # the store is gone with host 0
            if opts.simulated:  # the launcher names host 0 with its exit status
                return 1
            from .progress import COORDINATOR_HUNG, COORDINATOR_LOST, death

            hung = bool(getattr(group.store, "lost", None))  # a BoundedStore that timed out
            how = COORDINATOR_HUNG if hung else COORDINATOR_LOST
            raise HostLost(first_line(exc), [death(0, how, None)], "at the gather") from None
        lost = [d for d in found if d["host"] != me]
        if not lost:
            fatal.append(
                {
                    "host": me,
                    "stage": "gather",
                    "error": f"gathering the run records failed: {first_line(exc)}",
                }
            )
        records = [record if i == me else None for i in range(group.num_hosts)]
    for e in record.get("errors", []):
        if me != 0:
            print(
                f"host {me}: {e['stage']} failed: {first_line(e['error'])}",
                file=sys.stderr,
                flush=True,
            )
    lost_ids = [d["host"] for d in lost]
    if me != 0:
        progress.update("status")
        code = group.share_status(None, timeout=opts.job_timeout)
        group.close()
        return code

    progress.update("report")
    state.reported = True  # from here on, Ctrl-C cuts this report short rather than adding one
    if lost:
        code = report_lost_hosts(
            opts.to_json(),
            group.result.to_json(),
            lost,
            device_env,
            time.perf_counter() - t0,
            opts.json_path,
            opts.quiet,
            records=records,
        )
    else:
        rv = group.result.to_json()
        ctx = CheckContext(opts.to_json(), records, rv, device_env, fatal)
        results = run_all(ctx)
        errors = [e for r in records if r for e in r.get("errors", [])] + fatal
        report = build_report(
            results, opts.to_json(), rv, records, errors, device_env, time.perf_counter() - t0
        )
        emit(report, opts.json_path, opts.quiet)
        code = report["exit_code"]
    group.share_status(code, timeout=opts.job_timeout, lost=lost_ids)
    group.close()
    return code


def _report_coordinator_lost(
    opts: RuntimeOptions, group, exc: HostLost, device_env: dict, t0: float
) -> int:
    """A host that lost host 0 prints the report host 0 can no longer print."""
    from .progress import COORDINATOR_LOST, death
    from .report import report_lost_hosts

    deaths = exc.deaths or [death(0, COORDINATOR_LOST, None)]
    note = f"host {group.host_index} noticed {exc.where or 'at the gather'} and stopped"
    report_lost_hosts(
        opts.to_json(),
        group.result.to_json(),
        deaths,
        device_env,
        time.perf_counter() - t0,
        opts.json_path,
        opts.quiet,
        note=note,
    )
    return 1


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
