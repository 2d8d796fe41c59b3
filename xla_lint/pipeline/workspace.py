"""The one composition of the pipeline: what every entry point calls to lint.

- :func:`lint_paths`: files and folders, as ``xla-lint PATH...`` and the trace's static lint run
  them (discover, lint every file, build the program model, keep the findings whose facts hold).
- :func:`lint_buffer`: one text as a file of its own program (standard input).
- :func:`relinter`: the function that lints each version of a file under a fixed program model,
  as ``--fix`` rounds, ``--fix -`` and the editor's "fix all" run it.
- :func:`scan_folder`: a workspace folder's results and launches before any program model, for the
  editor server, which then lints open buffers against them.

The stages themselves are :mod:`xla_lint.pipeline.discover` and :mod:`xla_lint.pipeline.run`;
this module only puts them in order, once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from .. import timings
from ..config import Settings
from ..diagnostics import Diagnostic
from ..program.launchers import read_launches
from ..program.model import Launch, ProgramModel
from ..results import FileResult
from ..sources.target import Target
from .discover import discover, excluded
from .run import RunResult, finalize, lint_file, lint_targets, program_facts, run


def lint_paths(
    paths: Sequence[str],
    settings: Settings,
    *,
    jobs: int = 1,
    cache: bool = False,
    manifests: list[str] | None = None,
) -> tuple[list[Target], RunResult]:
    """Lint the files and folders ``paths`` (empty: the current folder) as ``xla-lint PATH...``
    does: the targets linted and the finished run. The folders named contribute their
    ``pyproject.toml``'s ``[project.scripts]``; shell scripts and docs found on the way are read
    for the commands that run the tree's files; ``manifests`` (when given) gets the files found
    that declare dependencies (:func:`~xla_lint.pipeline.discover.is_manifest`). Raises
    :class:`~xla_lint.pipeline.discover.DiscoveryError` for a path that does not exist."""
    named = list(paths) or ["."]
    launchers: list[str] = []
    with timings.timed("discover"):
        targets = discover(named, settings, launchers, manifests)
        settings, targets = nearest_configurations(settings, targets, launchers, named)
    result = run(
        targets,
        settings,
        jobs,
        cache=cache,
        launchers=launchers,
        folders=[p for p in named if os.path.isdir(p)],
    )
    return targets, result


def nearest_configurations(
    settings: Settings, targets: list[Target], found: Sequence[str], named: Sequence[str] = ()
) -> tuple[Settings, list[Target]]:
    """``settings`` with the ``[tool.xla-lint]`` of every ``pyproject.toml`` among ``found``
    (the files discovery met on its way) nested below their folders, as Ruff uses each file's
    nearest configuration, and ``targets`` without the files a nested ``exclude`` names
    (those among ``named``, the paths given, only under ``force-exclude``). Raises
    :class:`~xla_lint.config.ConfigError` naming a nested file that is invalid."""
    settings = settings.nest(found)
    if not settings.nested:
        return settings, targets
    given = {os.path.normpath(p) for p in named}
    kept = []
    for t in targets:
        own = settings.for_path(t.path)
        if (
            own is settings
            or (t.path in given and not own.force_exclude)
            or not excluded(t.path, own)
        ):
            kept.append(t)
    return settings, kept


def relinter(
    target: Target, settings: Settings, program: ProgramModel
) -> Callable[[str], list[Diagnostic]]:
    """``relint(text)``: the diagnostics of ``text`` linted as ``target`` under ``program``'s
    facts, after suppressions. The program model is the one the run built, kept as it is for
    every version (a fix does not change which programs run the file)."""

    def relint(text: str) -> list[Diagnostic]:
        return finalize([lint_file(target, settings, text=text)], program, settings)[0]

    return relint


def lint_buffer(
    target: Target, settings: Settings, result: FileResult
) -> tuple[ProgramModel, list[Diagnostic]]:
    """The program model of one buffer run as a program of its own (its ``result``, from
    :func:`~xla_lint.pipeline.run.lint_file` of its text), and its diagnostics under it."""
    program = program_facts([result], settings, entries=(target.path,))
    return program, finalize([result], program, settings)[0]


def scan_folder(
    root: str, settings: Settings, jobs: int = 1
) -> tuple[dict[str, FileResult], list[Launch], Settings]:
    """Every file ``xla-lint ROOT`` would lint, linted (from the result cache where it can), the
    launches of the folder's scripts and docs, and ``settings`` with the nested configurations
    of its folders (:func:`nearest_configurations`): what the editor server builds its program
    model from and lints open buffers with. A folder that is gone gives nothing. Raises
    :class:`~xla_lint.config.ConfigError` naming a nested configuration that is invalid."""
    from .discover import DiscoveryError

    launchers: list[str] = []
    try:
        targets = discover([root], settings, launchers)
    except DiscoveryError:  # the folder is gone
        targets = []
    settings, targets = nearest_configurations(settings, targets, launchers)
    found = lint_targets(targets, settings, jobs, settings.cache_dir)
    return {r.path: r for r in found}, read_launches(launchers, [root]), settings
