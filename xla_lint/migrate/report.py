"""The migration report: text (default), JSON and Markdown, from one summary and one order.

- :func:`summary`: sites by class, by phase and by file; how many a rewrite covers (safe, and
  behaviour-changing ones ``--unsafe-fixes`` adds); the programs and their modes.
- :func:`order`: the steps to migrate in (:data:`xla_lint.migrate.table.PHASES`), each with its
  files and its sites by class.
- :func:`render`: ``text`` (grouped by file, then by class), ``json``
  (``{"sites": [...], "summary": {...}, "order": [...]}``) or ``markdown``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable

from . import table
from .run import Migration, PlacedSite

FORMATS = ("text", "json", "markdown")


def summary(migration: Migration) -> dict:
    """Counts of the run: sites, files, per class, per phase, fixable (safe / unsafe), and
    the programs (entry, kind, mode) that run the files with sites."""
    sites = migration.sites
    by_class = Counter(p.site.cls for p in sites)
    by_phase = Counter(p.site.phase for p in sites)
    programs = {
        (p.program.entry, p.program.kind, p.program.mode)
        for p in sites
        if p.program.entry is not None
    }
    return {
        "to": "torchtpu 0.2.0",
        "sites": len(sites),
        "files": len({p.site.path for p in sites}),
        "files_read": migration.files_read,
        "by_class": {c: by_class.get(c, 0) for c in table.CLASSES},
        "by_phase": {k: by_phase[k] for k, _ in table.PHASES if by_phase.get(k)},
        "fixable": sum(1 for p in sites if p.site.fix is not None and p.site.fix.safe),
        "fixable_unsafe": sum(1 for p in sites if p.site.fix is not None and not p.site.fix.safe),
        "unmapped": sum(1 for p in sites if p.site.target == table.UNMAPPED.target),
        "programs": [{"entry": e, "kind": k, "mode": m} for e, k, m in sorted(programs, key=str)],
    }


def order(migration: Migration) -> list[dict]:
    """The steps to migrate in: for each phase with sites, its title, files and counts by class."""
    out: list[dict] = []
    for key, title in table.PHASES:
        members = [p for p in migration.sites if p.site.phase == key]
        if not members:
            continue
        counts = Counter(p.site.cls for p in members)
        out.append(
            {
                "step": len(out) + 1,
                "phase": key,
                "title": title,
                "sites": len(members),
                "by_class": {c: counts[c] for c in table.CLASSES if counts.get(c)},
                "files": sorted({p.site.path for p in members}),
            }
        )
    return out


def to_json(migration: Migration) -> dict:
    return {
        "sites": [p.to_json() for p in migration.sites],
        "summary": summary(migration),
        "order": order(migration),
    }


def _by_file(sites: Iterable[PlacedSite]) -> dict[str, list[PlacedSite]]:
    files: dict[str, list[PlacedSite]] = {}
    for p in sites:
        files.setdefault(p.site.path, []).append(p)
    return files


def _fix_mark(p: PlacedSite) -> str:
    if p.site.fix is None:
        return ""
    return " [fix]" if p.site.fix.safe else " [unsafe fix]"


def text(migration: Migration) -> str:
    """The report as text: each file (with its program) and its sites grouped by class, the
    counts, then the order to migrate in."""
    lines: list[str] = []
    for path, sites in _by_file(migration.sites).items():
        lines.append(f"{path}  (runs in {sites[0].program.describe()})")
        for cls in table.CLASSES:
            members = [p for p in sites if p.site.cls == cls]
            if not members:
                continue
            lines.append(f"  {cls} ({len(members)})")
            for p in members:
                s = p.site
                lines.append(f"    {s.line}:{s.column} {s.api}{_fix_mark(p)}")
                lines.append(f"        -> {s.target}")
        lines.append("")
    info = summary(migration)
    counts = ", ".join(f"{n} {c}" for c, n in info["by_class"].items())
    lines.append(
        f"{info['sites']} torch_xla sites in {info['files']} of {info['files_read']} files: {counts}"
    )
    lines.append(
        f"{info['fixable']} rewritten by --fix, {info['fixable_unsafe']} more with "
        f"--unsafe-fixes; {info['by_class']['decision']} decisions are never rewritten"
    )
    if info["unmapped"]:
        lines.append(f"{info['unmapped']} sites use torch_xla names no row of the map covers")
    steps = order(migration)
    if steps:
        lines.append("")
        lines.append("Order to migrate:")
        for step in steps:
            counts = ", ".join(f"{n} {c}" for c, n in step["by_class"].items())
            lines.append(
                f"  {step['step']}. {step['title']}: {step['sites']} sites ({counts}) in "
                f"{len(step['files'])} file{'s' * (len(step['files']) != 1)}"
            )
    lines.append("")
    lines.append(
        "Checked statically only: rewrites parse and their TorchTPU names exist in torch-tpu "
        "0.2.0; nothing of TorchTPU ran (it needs a TPU)."
    )
    return "\n".join(lines)


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def markdown(migration: Migration) -> str:
    """The report as Markdown: the summary, the order, then one table per file."""
    info = summary(migration)
    out = ["# Migration to TorchTPU 0.2.0", ""]
    out.append(
        f"{info['sites']} torch_xla sites in {info['files']} of {info['files_read']} files; "
        f"{info['fixable']} rewritten by `--fix`, {info['fixable_unsafe']} more with "
        "`--unsafe-fixes`."
    )
    out += ["", "| class | sites |", "|---|---|"]
    out += [f"| {c} | {n} |" for c, n in info["by_class"].items()]
    steps = order(migration)
    if steps:
        out += ["", "## Order to migrate", ""]
        for step in steps:
            counts = ", ".join(f"{n} {c}" for c, n in step["by_class"].items())
            out.append(f"{step['step']}. **{step['title']}**: {step['sites']} sites ({counts})")
    for path, sites in _by_file(migration.sites).items():
        out += ["", f"## `{path}`", "", f"Runs in {sites[0].program.describe()}.", ""]
        out += ["| line | class | api | target | fix |", "|---|---|---|---|---|"]
        for cls in table.CLASSES:
            for p in sites:
                if p.site.cls != cls:
                    continue
                s = p.site
                fix = "" if s.fix is None else ("safe" if s.fix.safe else "unsafe")
                out.append(
                    f"| {s.line}:{s.column} | {cls} | `{_cell(s.api)}` | {_cell(s.target)} | {fix} |"
                )
    out += [
        "",
        "Checked statically only: the rewrites parse and their TorchTPU names exist in "
        "torch-tpu 0.2.0; nothing of TorchTPU ran (it needs a TPU).",
    ]
    return "\n".join(out)


def render(migration: Migration, output_format: str) -> str:
    """The report in ``output_format`` (one of :data:`FORMATS`). Raises ValueError for another."""
    if output_format == "json":
        return json.dumps(to_json(migration), indent=2)
    if output_format == "markdown":
        return markdown(migration)
    if output_format == "text":
        return text(migration)
    raise ValueError(f"unknown format {output_format!r}")
