"""``xla-lint migrate``: the sites of a tree under its program model, and their rewrites applied.

:func:`migrate_paths` runs the linter's one composition (:func:`~xla_lint.pipeline.workspace.lint_paths`:
discovery, configuration, the program model) with the migration visitor as its only rule, so each
file is parsed once, in the lint's worker processes; adds the sites of the launchers (from the
program model's launches) and of the requirement pins, and places each site in the programs that
run it. A site whose class depends on the mode
(:attr:`~xla_lint.migrate.table.Entry.by_mode`: ``xr.global_ordinal()`` is the
``torch.distributed`` rank only where one process drives one device) is mechanical only when every
program running its file launches one process per device, else a decision.

:func:`fix_paths` applies the rewrites as ``--fix`` does (rounds until none is left, each result
parsed: :func:`xla_lint.pipeline.fixes.fix_loop`; written with
:func:`~xla_lint.pipeline.fixes.write_atomic`'s ``expected=`` check, so an edit made meanwhile is
not lost), or returns the unified diff. Nothing of the linted code is imported or run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..config import Settings
from ..diagnostics import Diagnostic, Severity
from ..pipeline.discover import is_manifest
from ..pipeline.fixes import FixOutcome, WriteError, applies, fix_loop, unified_diff, write_atomic
from ..pipeline.workspace import lint_paths
from ..program.model import Program, ProgramModel
from ..program.modules import module_of
from ..results import FileResult
from ..sources.target import DOC_SUFFIXES, NOTEBOOK_SUFFIX, Target
from ..sources.text import SourceError, decode_with_encoding, read_source
from . import table
from .launches import launch_sites
from .pins import pin_sites
from .sites import MigrationVisitor, Site, file_sites, may_name_xla, sites_of_diagnostics


@dataclass(frozen=True)
class ProgramInfo:
    """The program a site runs in: ``entry`` (None: library code no program reaches),
    ``kind`` (script, test, document, library), ``mode`` (``spmd``, ``multiprocess``,
    ``spmd or multiprocess``, ``single``, ``none``) and ``others``, how many more programs run
    the file."""

    entry: str | None
    kind: str
    mode: str
    others: int = 0

    def to_json(self) -> dict:
        return {"entry": self.entry, "kind": self.kind, "mode": self.mode, "others": self.others}

    def describe(self) -> str:
        if self.entry is None:
            if self.kind == "launcher":
                return "a launcher command whose program is not in the tree"
            if self.kind == "requirements":
                return "the project's requirements"
            return "library code (no program reaches it)"
        more = f" and {self.others} more" if self.others else ""
        return f"{self.entry} ({self.kind}, {self.mode}){more}"


@dataclass(frozen=True)
class PlacedSite:
    """A :class:`~xla_lint.migrate.sites.Site` with the program that runs it."""

    site: Site
    program: ProgramInfo

    def to_json(self) -> dict:
        s = self.site
        return {
            "path": s.path,
            "line": s.line,
            "column": s.column,
            "api": s.api,
            "class": s.cls,
            "target": s.target,
            "program": self.program.to_json(),
            "fixable": s.fixable,
            "safe": s.fix.safe if s.fix is not None else None,
            "phase": s.phase,
            "map_row": s.row,
            "source": s.source,
            **({"cell": s.cell} if s.cell is not None else {}),
        }


@dataclass
class Migration:
    """A finished ``migrate`` run: the sites in path and position order, the program model,
    the targets read, the settings used and the manifests read for pins."""

    sites: list[PlacedSite]
    program: ProgramModel
    targets: list[Target]
    settings: Settings
    manifests: list[str] = field(default_factory=list)  # the dependency files read for pins

    @property
    def files_read(self) -> int:
        """How many files were read: the linted targets, then the manifests that are not one
        (``setup.py`` is both), then the launchers whose commands the program model holds."""
        paths = {t.path for t in self.targets} | set(self.manifests)
        paths |= {launch.path for launch in self.program.launches}
        return len(paths)


def mode_of(p: Program) -> str:
    """The mode a program runs in, as the report names it."""
    if p.alternative:
        return "spmd or multiprocess"
    if p.satisfies("spmd", True):
        return "spmd"
    if p.satisfies("multiprocess", True):
        return "multiprocess"
    return "single"


def program_info(model: ProgramModel, path: str) -> ProgramInfo:
    programs = sorted(model.programs_of(path), key=lambda p: (p.kind != "script", p.entry))
    if not programs:
        return ProgramInfo(None, "library", "none")
    first = programs[0]
    return ProgramInfo(first.entry, first.kind, mode_of(first), len(programs) - 1)


def one_process_per_device(model: ProgramModel, path: str) -> bool:
    """True when every program running ``path`` launches one process per device and none is SPMD."""
    programs = model.programs_of(path)
    return bool(programs) and all(
        p.satisfies("multiprocess", True) and not p.satisfies("spmd", True) and not p.alternative
        for p in programs
    )


def settle(site: Site, model: ProgramModel) -> Site:
    """``site`` with its mode-dependent class decided for its programs."""
    if not site.by_mode or one_process_per_device(model, site.path):
        return site
    return replace(
        site,
        cls=table.DECISION,
        target=f"a rank or not? in code not run one process per device, {site.target}",
        fix=None,
    )


def python_targets(targets: Sequence[Target]) -> list[Target]:
    """The Python files among ``targets`` (documents and notebooks are never rewritten)."""
    return [
        t
        for t in targets
        if t.kind == "python" and t.error is None and not t.path.lower().endswith(NOTEBOOK_SUFFIX)
    ]


def sites_of_text(text: str, path: str, model: ProgramModel) -> list[Site]:
    module, is_package = module_of(path)
    return [settle(s, model) for s in file_sites(text, path, module, is_package)]


def source_kind(path: str) -> str:
    """What kind of file a site is in: ``python``, ``notebook``, ``document`` (a Markdown or
    reST page), ``shell`` or ``requirements``."""
    lower = path.lower()
    if lower.endswith(NOTEBOOK_SUFFIX):
        return "notebook"
    if lower.endswith(DOC_SUFFIXES):
        return "document"
    if is_manifest(path) and not lower.endswith(".py"):
        return "requirements"
    return "python" if lower.endswith(".py") else "shell"


def _read_text(path: str) -> str | None:
    try:
        return decode_with_encoding(read_source(path))[0]
    except (OSError, SourceError):
        return None  # the lint run reports it (XLA000)


def _target_sites(target: Target, result: FileResult | None, model: ProgramModel) -> list[Site]:
    """The sites of one linted file: from the lint's own traversal when it parsed the file
    (the visitor ran among its rules), else, for a Python file the prefilter skipped that may
    still hold a site (``device="xla"``, ``PJRT_DEVICE``), from a parse of its own."""
    kind = source_kind(target.path)
    python = kind == "python"
    if result is not None and result.parsed:
        found = [d for d in result.diagnostics if d.code == MigrationVisitor.code]
        text = _read_text(target.path) if python and any(d.fix for d in found) else None
        sites = sites_of_diagnostics(found, text if python else None)
    elif python and result is not None and result.skipped_reason == "no torch_xla":
        text = _read_text(target.path)
        if text is None or not may_name_xla(text):
            return []
        module, is_package = module_of(target.path)
        sites = file_sites(text, target.path, module, is_package)
    else:
        return []
    return [replace(settle(s, model), source=kind) for s in sites]


def migrate_paths(paths: Sequence[str], settings: Settings, *, jobs: int = 1) -> Migration:
    """The migration sites of the files and folders ``paths`` (empty: the current folder).

    One lint run (:func:`~xla_lint.pipeline.workspace.lint_paths`) with
    :class:`~xla_lint.migrate.sites.MigrationVisitor` among its rules finds the sites of every
    file it parses (Python files, notebooks' code cells, documents' Python blocks with
    ``docs`` on), each parsed once; then the launches of its program model give the shell
    sites (:func:`~xla_lint.migrate.launches.launch_sites`) and the manifests discovery found
    the requirement pins (:func:`~xla_lint.migrate.pins.pin_sites`). Raises
    :class:`~xla_lint.pipeline.discover.DiscoveryError` for a path that does not exist and
    :class:`~xla_lint.config.ConfigError` for an invalid nested configuration."""
    manifests: list[str] = []
    with_visitor = replace(settings, extra_rules=(*settings.extra_rules, MigrationVisitor))
    targets, result = lint_paths(paths, with_visitor, jobs=jobs, manifests=manifests)
    model = result.program
    results = {r.path: r for r in result.files}
    placed: list[PlacedSite] = []
    for target in targets:
        if target.error is not None:
            continue
        sites = _target_sites(target, results.get(target.path), model)
        if sites:
            info = program_info(model, target.path)
            placed.extend(PlacedSite(s, info) for s in sites)
    for site, launch in launch_sites(model, source_kind):
        runs = [path for one, path in model.launched.get(launch.where, ()) if one is launch]
        info = program_info(model, runs[0]) if runs else ProgramInfo(None, "launcher", "none")
        placed.append(PlacedSite(site, info))
    for path in manifests:
        placed.extend(PlacedSite(s, MANIFEST) for s in pin_sites(path))
    placed.sort(key=lambda p: (p.site.path, p.site.line, p.site.column, p.site.api))
    return Migration(placed, model, targets, result.settings or settings, manifests)


MANIFEST = ProgramInfo(None, "requirements", "none")


def _as_diagnostics(sites: list[Site]) -> list[Diagnostic]:
    """Sites as findings with their fixes, the shape :func:`~xla_lint.pipeline.fixes.fix_loop` takes."""
    return [
        Diagnostic(
            "MIGRATE",
            s.api,
            s.target,
            s.path,
            s.line,
            s.column,
            s.line,
            s.column,
            Severity.WARNING,
            s.fix,
        )
        for s in sites
    ]


@dataclass
class FixResult:
    """What ``--fix``/``--diff`` did: the files' outcomes, the diff (``--diff``), the files that
    could not be read or written (with why)."""

    outcomes: list[FixOutcome]
    diff: bytes
    failed: list[str]

    @property
    def applied(self) -> int:
        return sum(o.applied for o in self.outcomes)


def fix_paths(migration: Migration, *, unsafe: bool, write: bool) -> FixResult:
    """Apply the rewrites of ``migration``'s sites (safe ones; behaviour-changing ones too with
    ``unsafe``): written to the files (``write``) or returned as a unified diff. Decision sites
    have no rewrite; a file changed since it was read is left alone (WriteError)."""
    model = migration.program
    paths = sorted(
        {
            p.site.path
            for p in migration.sites
            if p.site.fix is not None and (p.site.fix.safe or unsafe)
        }
    )
    outcomes: list[FixOutcome] = []
    diff: list[bytes] = []
    failed: list[str] = []
    for path in paths:
        try:
            original = read_source(path)
            text, encoding = decode_with_encoding(original)
        except (OSError, SourceError) as exc:
            failed.append(f"{path}: cannot read for fixing: {exc}")
            continue

        def relint(version: str, path: str = path) -> list[Diagnostic]:
            return [
                d
                for d in _as_diagnostics(sites_of_text(version, path, model))
                if applies(d, unsafe)
            ]

        outcome = fix_loop(path, text, relint, unsafe)
        if outcome.fixed == text:
            continue
        if write:
            try:
                write_atomic(path, outcome.fixed, encoding, expected=original)
            except WriteError as exc:
                failed.append(str(exc))
                continue
        else:
            diff.append(unified_diff(text, outcome.fixed, path, encoding))
        outcomes.append(outcome)
    return FixResult(outcomes, b"".join(diff), failed)
