"""The report: text for the terminal (host 0 only, every line flushed) and JSON.

The JSON schema (``"schema": "xla-lint-runtime/1"``) is documented in docs/runtime.md.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

from .checks import FAIL, PASS, SKIP, CheckContext, CheckResult, run_all
from .progress import EXIT_INTERRUPTED, describe_death

SCHEMA = "xla-lint-runtime/1"

#: error stages whose message already appears in a check line ("died": a host that died,
#: named by the rendezvous check)
SHOWN_IN_CHECKS = (
    "rendezvous",
    "environment",
    "mesh",
    "model",
    "train",
    "consistency",
    "checkpoint",
    "died",
)


def exit_code(results: list[CheckResult]) -> int:
    """0 when no check failed (SKIPs allowed), else 1."""
    return 1 if any(r.status == FAIL for r in results) else 0


def build_report(
    results: list[CheckResult],
    options: dict,
    rendezvous: dict,
    records: list,
    errors: list,
    device_env: dict,
    wall_s: float,
    interrupted: dict | None = None,
) -> dict:
    """The full JSON-ready report (see docs/runtime.md for every field). ``interrupted``
    (after Ctrl-C) makes it a partial report: status ``interrupted``, exit code 130."""
    code = EXIT_INTERRUPTED if interrupted else exit_code(results)
    counts = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, SKIP)}
    status = "interrupted" if interrupted else "fail" if code else "pass"
    return {
        "schema": SCHEMA,
        "status": status,
        "exit_code": code,
        "summary": counts,
        "wall_s": round(wall_s, 3),
        "options": options,
        "device_env": device_env,
        "hosts": {
            "expected": rendezvous.get("expected", 1),
            "joined": rendezvous.get("joined", []),
            "missing": rendezvous.get("missing", []),
            "simulated": bool(options.get("simulated") or options.get("simulate_hosts")),
            "died": rendezvous.get("died", []),
        },
        "rendezvous": rendezvous,
        "checks": [r.to_json() for r in results],
        "errors": errors,
        "records": records,
        **({"interrupted": interrupted} if interrupted else {}),
    }


def header_line(report: dict) -> str:
    """One line: device kind and count, hosts, mesh, steps."""
    recs = [r for r in report["records"] if r]
    rec = recs[0] if recs else {}
    env, mesh = rec.get("environment") or {}, rec.get("mesh") or {}
    hosts = report["hosts"]
    cpu = (report.get("device_env") or {}).get("cpu_devices")
    devices = (
        f"{env.get('global_devices', '?')} {env.get('device_kind', '?')} devices"
        if env
        else f"{cpu} CPU devices"
        if cpu
        else "devices unknown"
    )
    host_txt = f"{hosts['expected']} host(s)" + (
        " simulated on 127.0.0.1, one SPMD world each" if hosts["simulated"] else ""
    )
    axes = " x ".join(f"{a}={s}" for a, s in (mesh.get("axis_sizes") or {}).items()) or ",".join(
        report["options"].get("mesh_axes", [])
    )
    return f"xla-lint runtime check: {devices}, {host_txt}, mesh {axes}, {report['options'].get('steps')} steps"


def format_text(report: dict) -> str:
    """The human report: a header, one line per check, cause/fix and details under FAILs."""
    lines = [header_line(report), ""]
    width = max(len(c["name"]) for c in report["checks"]) if report["checks"] else 10
    for c in report["checks"]:
        lines.append(f"{c['status']:<4}  {c['name']:<{width}}  {c['summary']}")
        indent = " " * (8 + width)
        for d in c.get("details") or []:
            lines.append(f"{indent}{d}")
        if c["status"] == FAIL and c.get("explanation"):
            rules = f" [{', '.join(c['rules'])}]" if c.get("rules") else ""
            lines.append(f"{indent}cause and fix{rules}: {c['explanation']}")
    for e in report["errors"]:
        if e.get("stage") not in SHOWN_IN_CHECKS:
            lines.append(f"error on host {e.get('host')} ({e.get('stage')}): {e.get('error')}")
    if report.get("interrupted"):
        lines.append(
            f"interrupted (Ctrl-C) {report['interrupted'].get('where', '')}: the checks the run had not "
            "reached are not run"
        )
    s = report["summary"]
    lines += [
        "",
        f"{s[PASS]} passed, {s[FAIL]} failed, {s[SKIP]} skipped in {report['wall_s']:.1f} s (exit {report['exit_code']})",
    ]
    return "\n".join(lines)


def emit(
    report: dict, json_path: str | None, quiet: bool = False, stream: IO[str] | None = None
) -> None:
    """Print the text report (flushed) and write ``json_path`` atomically if given."""
    out = stream or sys.stdout
    if not quiet:
        for line in format_text(report).splitlines():
            print(line, file=out, flush=True)
    if json_path:
        write_json(report, json_path)


def write_json(report: dict, path: str) -> None:
    """Write the report as JSON (via a temporary file and rename)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (set, tuple)):
        return list(obj)
    return str(obj)


def report_lost_hosts(
    options: dict,
    rendezvous: dict,
    deaths: list[dict],
    device_env: dict,
    wall_s: float,
    json_path: str | None,
    quiet: bool = False,
    records: list | None = None,
    note: str = "",
) -> int:
    """Print (and write as JSON) the report of a run that lost hosts; returns its exit status (1).

    ``deaths`` (:func:`xla_lint.runtime.progress.death` dicts) go into
    ``rendezvous["died"]`` and its message, which the rendezvous check FAILs with; the
    other checks are SKIPped. ``records``: the run records there are (default: none).
    Used by the ``--simulate-hosts`` launcher, by host 0 when hosts never reached the
    gather, and by a host that lost host 0.
    """
    rv = {**rendezvous, "ok": False, "died": deaths}
    rv["message"] = "; ".join([describe_death(d) for d in deaths] + ([note] if note else []))
    records = records if records is not None else [None] * int(rv.get("expected") or 1)
    results = run_all(CheckContext(options, records, rv, device_env))
    errors = [e for r in records if r for e in r.get("errors", [])]
    errors += [{"host": d["host"], "stage": "died", "error": describe_death(d)} for d in deaths]
    report = build_report(results, options, rv, records, errors, device_env, wall_s)
    emit(report, json_path, quiet)
    return report["exit_code"]


def report_interrupted(
    options: dict,
    rendezvous: dict,
    records: list,
    device_env: dict,
    wall_s: float,
    interrupted: dict,
    json_path: str | None,
    quiet: bool = False,
) -> int:
    """Print (and write as JSON) the partial report of a run stopped by Ctrl-C; returns
    its exit status, 130. The checks the run reached run on the records there are
    (``records``: one per expected host, None for a host that delivered none); the others
    are SKIPped as not run (:func:`xla_lint.runtime.checks.not_reached`)."""
    ctx = CheckContext(options, records, rendezvous, device_env, interrupted=interrupted)
    results = run_all(ctx)
    errors = [e for r in records if r for e in r.get("errors", [])]
    report = build_report(
        results, options, rendezvous, records, errors, device_env, wall_s, interrupted
    )
    emit(report, json_path, quiet)
    return report["exit_code"]
