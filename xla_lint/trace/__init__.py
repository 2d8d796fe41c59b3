"""``xla-lint trace``: run the user's own training script for a few steps and show, per step,
what compiled, what was copied to the host and what was sharded, each tied to the user's
source line and to the rule that prevents it.

::

    xla-lint trace [--steps N] [--timeout S] [--device cpu|auto] [--json] -- [python] SCRIPT [ARGS]...
    xla-lint trace -- python -m MODULE [ARGS]...

``--steps N`` counts training steps (optimizer steps); setup and evaluation are rows of their
own, placed by the script's loops (:mod:`xla_lint.trace.phases`).

The script runs unmodified in a child process (:mod:`xla_lint.trace.runner`), by default on
CPU with 8 virtual devices, instrumented by :mod:`xla_lint.trace.hook` (standard library
only until the script imports torch_xla). Events stream to a JSONL file as they happen
(:mod:`xla_lint.trace.events`); :mod:`xla_lint.trace.report` turns them into findings and
the text or JSON report, beside the static diagnostics of the script's program.

Scripts with one process per device (``torch_xla.launch``, ``xmp.spawn``, ``torchrun``) are
traced rank by rank: every Python process the script starts loads the hook, and each rank
writes its own events file (``events.rankN.jsonl``).

Exit status: 0 the traced steps showed no finding; 1 a finding, or the script (or a rank)
raised, exited non-zero, died or hit ``--timeout``; 2 a usage error or a script that cannot be
traced (no such script or module, a program or file that is not Python, torch_xla not
installed, ``accelerate``/``deepspeed`` launchers). This package is never imported by the linter itself.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from .events import REPORT_SCHEMA, Trace, read_events
from .phases import PhaseMap, event_paths
from .report import build_report, render_text
from .runner import (
    RunResult,
    StaticLint,
    Target,
    TraceOptions,
    TraceUsageError,
    rank_files,
    resolve_target,
    run_child,
    sys_path_folders,
    torch_xla_available,
)

__all__ = ["REPORT_SCHEMA", "Trace", "TraceOptions", "TraceUsageError", "read_events", "run_trace"]

#: Exit status after Ctrl-C (128 + SIGINT), as the rest of xla-lint uses.
EXIT_INTERRUPTED = 130


def run_trace(opts: TraceOptions, as_json: bool = False, out=None) -> int:
    """Trace the command of ``opts``, print the report (text, or JSON with ``as_json``) on
    ``out`` (default standard output) and return the exit status (0 or 1; 130 after Ctrl-C).

    Raises :class:`TraceUsageError` (one line, exit status 2) for a command that cannot be
    traced. The script's own output goes to standard error.
    """
    out = sys.stdout if out is None else out
    target = resolve_target(opts.command, opts.cwd)
    if not torch_xla_available():
        raise TraceUsageError(
            f"torch_xla is not installed for {sys.executable}; "
            "install xla-lint[runtime] (torch and torch_xla 2.9)"
        )
    static = StaticLint(target.target if opts.static and target.kind == "path" else None, opts.cwd)
    if opts.simulate_hosts:
        return _run_hosts(opts, target, static, as_json, out)
    result = run_child(opts, target)
    trace = read_events(result.events_file)
    if trace.missing is not None:
        raise TraceUsageError(trace.missing.get("what", "the script does not exist"))
    files = rank_files(result.events_file)
    ranks = {rank: read_events(path) for rank, path in files.items()}
    script = (trace.script or {}).get("path")
    if target.launcher is not None:  # torchrun: the script is what its workers ran
        script = next((t.start.get("target") for t in ranks.values() if t.start), None)
    diagnostics: list = []
    static_error: str | None = None
    if opts.static:
        path = target.target if target.kind == "path" else script
        diagnostics, static_error = static.result(path)
    report = _report(
        opts,
        trace,
        result,
        script or target.target,
        result.wall_s,
        (diagnostics, static_error),
        ranks=ranks,
        rank_files=files,
        phases=phase_map(script, opts.cwd, [trace, *ranks.values()]) if opts.static else None,
    )
    _write(report, as_json, out)
    if result.interrupted:
        return EXIT_INTERRUPTED
    return report["exit_code"]


def phase_map(script: str | None, cwd: str, traces: list[Trace]) -> PhaseMap | None:
    """The loops of the traced script's files (:class:`~xla_lint.trace.phases.PhaseMap`): the
    files of the events' user frames in the script's folder or a folder it puts on
    ``sys.path`` (the folders the static lint reads), the script first; None without a
    script path."""
    if not script or not os.path.isfile(script):
        return None
    script = os.path.abspath(script)
    folders = [os.path.dirname(script), *sys_path_folders(script, cwd)]
    paths = [script]
    for trace in traces:
        for path in event_paths(trace):
            full = os.path.abspath(path)
            if any(full.startswith(f + os.sep) for f in folders) and os.path.isfile(full):
                paths.append(full)
    return PhaseMap.of_files(dict.fromkeys(paths))


def _report(
    opts: TraceOptions,
    trace: Trace,
    result: RunResult,
    target: str,
    wall: float,
    static: tuple[list, str | None],
    **extra: Any,
) -> dict:
    """:func:`~xla_lint.trace.report.build_report` of one traced process (``result``: how
    :func:`~xla_lint.trace.runner.run_child` ran it), with the static diagnostics."""
    return build_report(
        trace,
        command=list(opts.command),
        target=target,
        steps_requested=opts.steps,
        wall_s=wall,
        events_file=result.events_file,
        device=result.env_facts,
        timed_out=result.timed_out,
        interrupted=result.interrupted,
        static=static[0] if opts.static else None,
        static_error=static[1],
        **extra,
    )


def _write(report: dict, as_json: bool, out: TextIO, extra: list[str] | None = None) -> None:
    """The report on ``out``: JSON, or the text (with ``extra`` lines: the hosts' section)."""
    out.write(json.dumps(report, indent=2) + "\n" if as_json else render_text(report, extra))
    out.flush()


def _run_hosts(
    opts: TraceOptions, target: Target, static: StaticLint, as_json: bool, out: TextIO
) -> int:
    """``--simulate-hosts N``: trace N copies of the script, one per simulated host; the report
    is host 0's, with every host's failures, the first step where the hosts' graphs differ and
    a ``hosts`` table."""
    from .hosts import divergence, failures, host_crash, host_rows, render_hosts, run_hosts

    results, wall = run_hosts(opts, target)
    hosts = {h: read_events(r.events_file) for h, r in results.items()}
    first = hosts[min(hosts)]
    if first.missing is not None:
        raise TraceUsageError(first.missing.get("what", "the script does not exist"))
    script = (first.script or {}).get("path")
    diagnostics, static_error = static.result(target.target if target.kind == "path" else script)
    phases = phase_map(script, opts.cwd, list(hosts.values())) if opts.static else None
    report = _report(
        opts,
        first,
        results[min(results)],
        script or target.target,
        wall,
        (diagnostics, static_error),
        phases=phases,
    )
    found = failures(hosts, results)
    diverged = divergence(hosts, phases)
    found += [diverged] if diverged else []
    report["findings"] = found + report["findings"]
    report["hosts"] = host_rows(hosts, results, phases)
    report["device"]["hosts"] = len(hosts)
    crash = host_crash(hosts)
    if crash is not None and report["status"] != "timeout":  # a host's crash is the headline
        report["status"], report["crash"] = "crashed", crash
    if found:
        report["exit_code"] = 1
    _write(report, as_json, out, render_hosts(report["hosts"]))
    if any(r.interrupted for r in results.values()):
        return EXIT_INTERRUPTED
    return report["exit_code"]
