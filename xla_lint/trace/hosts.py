"""``xla-lint trace --simulate-hosts N``: run N copies of the script, each a simulated host of
a pod (on CPU, each its own XLA client with ``--cpu-devices`` devices), and compare them.

Each copy is a full single-process trace (:func:`~xla_lint.trace.runner.run_child`) writing
``events.hostI.jsonl``; the hook makes ``xr.process_index()`` the host's index and
``xr.process_count()`` N (``HOST_ENV``) and writes a ``graph`` event for every graph the host
compiled or ran. The hosts of one SPMD pod must run the same graphs at each step, in the same
order: the collectives inside them pair up across hosts, and a host running another graph
leaves the others waiting in theirs (the pod hangs). The first step where a host's graphs
differ from host 0's is reported, and so is every host that raised, exited or stopped without
reaching a step boundary.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from dataclasses import replace

from . import hook
from .events import Location, Trace
from .phases import EVALUATION, TRAINING, PhaseMap, label, place
from .report import _crash_json, _short, rule_name, status_of
from .runner import RunResult, Target, TraceOptions, run_child

#: Statuses of a host that did not run its steps to the end asked for.
FAILED = ("error", "crashed", "no-boundary", "timeout", "exited")
DIVERGE_FIX = (
    "run the same computation on every host: no branch on xr.process_index() around code "
    "that builds the step's graph (keep per-host differences in the data)"
)
SEED_FIX = (
    "seed torch with the same value on every host before the model is built (a per-host "
    "seed after it, for the data only)"
)
FAILED_FIX = "every host of a pod must run every step: a host that stops leaves the others waiting in their collectives"


def host_events_path(events_path: str, host: int) -> str:
    """The events file of one host: ``events.jsonl`` -> ``events.host1.jsonl``."""
    base = events_path[: -len(".jsonl")] if events_path.endswith(".jsonl") else events_path
    return f"{base}.host{host}.jsonl"


def run_hosts(opts: TraceOptions, target: Target) -> tuple[dict[int, RunResult], float]:
    """Run ``opts.simulate_hosts`` copies of the script at once, each with its host identity;
    return each host's result and the wall time of the whole run."""
    count = opts.simulate_hosts or 2
    base = (
        os.path.abspath(opts.events)
        if opts.events
        else os.path.join(tempfile.mkdtemp(prefix="xla-lint-trace-hosts-"), "events.jsonl")
    )
    results: dict[int, RunResult] = {}

    def run(host: int) -> None:
        host_opts = replace(opts, events=host_events_path(base, host))
        results[host] = run_child(host_opts, target, extra_env={hook.HOST_ENV: f"{host}/{count}"})

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(h,), daemon=True) for h in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return dict(sorted(results.items())), time.perf_counter() - started


def graphs_by_step(trace: Trace) -> dict[int, list[dict]]:
    """The ``graph`` events of one host, by step, in the order they were run."""
    steps: dict[int, list[dict]] = {}
    for event in trace.other:
        if event.get("event") == "graph":
            steps.setdefault(int(event["step"]), []).append(event)
    return steps


def _graph_text(event: dict | None) -> str:
    if event is None:
        return "no graph"
    where = Location.from_json(event.get("location"))
    at = f" (triggered at {_short(where.path)}:{where.line})" if where else ""
    return f"graph {str(event.get('graph_hash') or '?')[:16]}{at}"


def _finding(title: str, message: str, location: dict | None, steps: list[int], fix: str) -> dict:
    return {
        "code": None,
        "name": "host-divergence" if steps else "host-failed",
        "title": title,
        "message": message,
        "fix": fix,
        "location": location,
        "related": [],
        "steps": steps,
        "cost_s": 0.0,
    }


def row_names(trace: Trace, phases: PhaseMap | None) -> dict[int, tuple[str, int, str]]:
    """Each row the hook wrote (its events' ``step``) as ``(name, step, key)`` of the row it is
    placed in by the script's phases (:func:`~xla_lint.trace.phases.place`): ``step 3`` /
    ``the evaluation after step 3`` / ``setup``, the training step it counts as, and a short
    key for the hosts table (``3``, ``eval@3``, ``setup@3``, ``setup``). Without a map
    (``--no-static``): the hook's own rows, ``step N``."""
    if phases is None:
        return {s.step: (f"step {s.step}", s.step, str(s.step)) for s in trace.steps}
    placed = place(trace, phases)
    rows = {r.step: r for r in placed.steps}
    out: dict[int, tuple[str, int, str]] = {}
    for raw, index in placed.placed_rows.items():
        row = rows.get(index)
        if row is None:  # after the last step
            out[raw] = ("after the last step", placed.numbered or 0, "end")
            continue
        if row.phase in (None, TRAINING):
            key = str(row.number)
        else:
            key = ("eval" if row.phase == EVALUATION else "setup") + (
                f"@{row.number}" if row.number else ""
            )
        out[raw] = (label(row), row.number, key)
    return out


def seeds(trace: Trace) -> list[dict]:
    """The ``seed`` events of one host (torch's and torch_xla's generators), in order."""
    return [e for e in trace.other if e.get("event") == "seed"]


def divergence(hosts: dict[int, Trace], phases: PhaseMap | None = None) -> dict | None:
    """The first row where a host's graphs differ from the first host's (over the rows every
    host completed), as a finding named by its phase (:func:`row_names`: ``step 3``, ``the
    evaluation after step 3``, ``setup``); None when they agree. When that host also seeded
    torch differently from the first host, the finding is XLA027's (per-host-seed) with the
    seed's line beside it."""
    first = min(hosts)
    ran = {h: graphs_by_step(t) for h, t in hosts.items()}
    common = min(len(t.steps) for t in hosts.values())
    names = row_names(hosts[first], phases)
    for step in range(1, common + 1):
        ours = [g.get("graph_hash") for g in ran[first].get(step, [])]
        for host in sorted(hosts):
            theirs = [g.get("graph_hash") for g in ran[host].get(step, [])]
            if host == first or theirs == ours:
                continue
            i = next(
                (k for k, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
                min(len(ours), len(theirs)),
            )
            mine = ran[host][step][i] if i < len(theirs) else None
            base = ran[first][step][i] if i < len(ours) else None
            name, number, _ = names.get(step, (f"step {step}", step, str(step)))
            where = f"{'at' if name.startswith('step') else 'in'} {name}"
            message = (
                f"hosts diverge {where}: host {host} ran {_graph_text(mine)}, "
                f"host {first} ran {_graph_text(base)}; the collectives of SPMD hosts of one "
                "pod never match and the pod hangs"
            )
            location = (mine or base or {}).get("location")
            finding = _finding(f"hosts diverge {where}", message, location, [number], DIVERGE_FIX)
            values = {h: [e.get("value") for e in seeds(hosts[h])] for h in (first, host)}
            if values[first] != values[host]:
                seeded = next((e for e in seeds(hosts[host]) if e.get("location")), None)
                finding.update(code="XLA027", name=rule_name("XLA027"), fix=SEED_FIX)
                finding["message"] += (
                    f"; host {host} seeded torch with {values[host]}, host {first} with "
                    f"{values[first]}"
                )
                finding["related"] = [seeded["location"]] if seeded else []
            return finding
    return None


def failures(hosts: dict[int, Trace], results: dict[int, RunResult]) -> list[dict]:
    """A finding for each host that raised, exited, was ended or never reached a boundary."""
    out = []
    for host, trace in sorted(hosts.items()):
        result = results.get(host)
        status = status_of(
            trace, bool(result and result.timed_out), bool(result and result.interrupted)
        )
        if status not in FAILED:
            continue
        error = trace.error or {}
        # where the host was: its exception's line, or, when the run was ended around it, the
        # line of its stack (faulthandler on SIGUSR1, the runner's `timeout` event)
        location = (trace.timeout or {}).get("location") if status == "timeout" else None
        crash = (trace.crash or {}) if status == "crashed" else {}
        location = location or error.get("location") or crash.get("location")
        where = Location.from_json(location)
        at = f" at {_short(where.path)}:{where.line}" if where else ""
        what = {
            "error": f"raised {error.get('type')}: {error.get('message')}{at}",
            "crashed": f"died of signal {crash['signal']} ({crash.get('name')}){at}"
            if crash.get("signal")
            else "died without an exception",
            "no-boundary": "never reached a step boundary",
            "timeout": f"was ended by --timeout{' while' + at if at else ''}",
            "exited": f"exited with status {(trace.exit or {}).get('code')}",
        }[status]
        message = f"host {host} {what} after {len(trace.steps)} step(s)"
        out.append(_finding(f"host {host} {status}", message, location, [], FAILED_FIX))
    return out


def host_crash(hosts: dict[int, Trace]) -> dict | None:
    """The report's ``crash`` for the lowest host that died of a signal (the runner's ``crash``
    event of that host's process: signal, Python stack, first user frame) with its ``host``,
    ``pid`` and ``steps_traced``, for the headline; None when no host did."""
    for host, trace in sorted(hosts.items()):
        crash = _crash_json(trace)
        if crash is not None:
            return crash | {
                "host": host,
                "pid": (trace.start or {}).get("pid"),
                "steps_traced": len(trace.steps),
            }
    return None


def host_rows(
    hosts: dict[int, Trace], results: dict[int, RunResult], phases: PhaseMap | None = None
) -> list[dict]:
    """The ``hosts`` list of the report: each host's status, steps (training steps when
    ``phases`` places the rows), graphs by row (keyed as :func:`row_names` says: ``3``,
    ``eval@3``, ``setup``; rows with one key joined in order) and events file."""
    rows = []
    for host, trace in sorted(hosts.items()):
        result = results.get(host)
        names = row_names(trace, phases)
        graphs: dict[str, list[dict]] = {}
        for raw, events in sorted(graphs_by_step(trace).items()):
            key = names.get(raw, ("", raw, str(raw)))[2]
            graphs.setdefault(key, []).extend(events)
        steps = (
            len({n[2] for n in names.values() if n[2].isdigit()}) if phases else len(trace.steps)
        )
        rows.append(
            {
                "host": host,
                "status": status_of(
                    trace, bool(result and result.timed_out), bool(result and result.interrupted)
                ),
                "steps_traced": steps,
                "compiles": len(trace.compiles),
                "graphs": {
                    key: [g.get("graph_hash") for g in events] for key, events in graphs.items()
                },
                "events_file": result.events_file if result else None,
            }
        )
    return rows


def _runs(hashes: list) -> list:
    """``hashes`` without repeats in a row (a graph compiled, then run)."""
    return [h for i, h in enumerate(hashes) if i == 0 or hashes[i - 1] != h]


def render_hosts(rows: list[dict]) -> list[str]:
    """The ``Hosts`` section of the text report."""
    out = ["Hosts", "  host  status      steps  compiles  graphs per step"]
    for r in rows:
        per_step = " ".join(
            f"{step}:{','.join(str(h or '?')[:8] for h in _runs(hashes))}"
            for step, hashes in r["graphs"].items()
        )
        out.append(
            f"  {r['host']:>4}  {r['status']:<10} {r['steps_traced']:>6}  {r['compiles']:>8}  "
            f"{per_step or '-'}"
        )
    files = [r["events_file"] for r in rows if r["events_file"]]
    if files:
        more = f" ... {os.path.basename(files[-1])}" if len(files) > 1 else ""
        out.append(f"  events: {files[0]}{more} (a file per host)")
    out.append("")
    return out
