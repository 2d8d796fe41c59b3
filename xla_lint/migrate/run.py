"""``xla-lint migrate``: the sites of a tree under its program model, and their rewrites applied.

:func:`migrate_paths` runs the linter's one composition (:func:`~xla_lint.pipeline.workspace.lint_paths`:
discovery, configuration, the program model; no rule runs, so a migration costs one extra parse of
the files that name XLA), then :func:`~xla_lint.migrate.sites.file_sites` on every Python file, and
places each site in the programs that run it. A site whose class depends on the mode
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
from dataclasses import dataclass, replace

from ..config import Settings
from ..diagnostics import Diagnostic, Severity
from ..pipeline.fixes import FixOutcome, WriteError, applies, fix_loop, unified_diff, write_atomic
from ..pipeline.workspace import lint_paths
from ..program.model import Program, ProgramModel
from ..program.modules import module_of
from ..sources.target import NOTEBOOK_SUFFIX, Target
from ..sources.text import SourceError, decode_with_encoding, read_source
from . import table
from .sites import Site, file_sites


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
        }


@dataclass
class Migration:
    """A finished ``migrate`` run: the sites in path and position order, the program model,
    the targets read and the settings used."""

    sites: list[PlacedSite]
    program: ProgramModel
    targets: list[Target]
    settings: Settings


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


def migrate_paths(paths: Sequence[str], settings: Settings, *, jobs: int = 1) -> Migration:
    """The migration sites of the files and folders ``paths`` (empty: the current folder).
    Raises :class:`~xla_lint.pipeline.discover.DiscoveryError` for a path that does not exist
    and :class:`~xla_lint.config.ConfigError` for an invalid nested configuration."""
    targets, result = lint_paths(paths, settings, jobs=jobs)
    model = result.program
    placed: list[PlacedSite] = []
    for target in python_targets(targets):
        try:
            text = decode_with_encoding(read_source(target.path))[0]
        except (OSError, SourceError):
            continue  # the lint run reports it (XLA000)
        info = program_info(model, target.path)
        placed.extend(PlacedSite(s, info) for s in sites_of_text(text, target.path, model))
    placed.sort(key=lambda p: (p.site.path, p.site.line, p.site.column))
    return Migration(placed, model, targets, result.settings or settings)


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
