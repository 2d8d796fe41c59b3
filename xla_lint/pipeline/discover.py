"""Which files a run lints.

Folders are searched for ``*.py`` and ``*.ipynb`` (and ``*.md``/``*.rst`` when documentation
linting is on), skipping hidden folders, virtualenvs, ``build/``, ``dist/``, ``__pycache__``,
``node_modules``, ``site-packages`` and what ``exclude`` names. A file named explicitly
is always linted, unless ``force-exclude`` is on (as the pre-commit hooks run it). Symlinked folders are not followed (no loops); the order is sorted.

Launchers (read for the commands that run the tree's files, :mod:`xla_lint.program.launchers`) are
collected on the side: ``*.sh``/``*.bash`` scripts, files without a suffix whose first line is a
shell's ``#!`` (``#!/bin/bash``), ``*.md``/``*.markdown``/``*.rst`` pages and ``pyproject.toml``
files, found in the folders searched or named explicitly. Shell scripts are linted as shell
(:mod:`xla_lint.pipeline.shell`: the launch rules' findings at their lines), never as Python; a
``pyproject.toml`` named explicitly is only a launcher; a page named explicitly is linted as a
document and also read as a launcher. Launchers larger than
``xla_lint.program.launchers.MAX_LAUNCHER_BYTES`` (1 MB) are skipped when read: such a file is data,
not a script someone wrote.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ..config import Settings, _path_matches
from ..program.launchers import is_shell_script
from ..sources.target import DOC_SUFFIXES, DOCUMENT_SUFFIXES, NOTEBOOK_SUFFIX, Target

SKIPPED_FOLDERS = frozenset(
    {
        "build",
        "dist",
        "__pycache__",
        "node_modules",
        "site-packages",
        "venv",
        "env",
        ".venv",
        ".xla_lint_cache",
    }
)


class DiscoveryError(Exception):
    """A path named on the command line does not exist."""


def _kind(name: str) -> str:
    return "doc" if name.lower().endswith(DOCUMENT_SUFFIXES) else "python"


def _is_virtualenv(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "pyvenv.cfg"))


LAUNCHER_SUFFIXES = (
    ".sh",
    ".bash",
    ".md",
    ".markdown",
    ".rst",
)  # read for the commands that run files


LAUNCHER_NAMES = ("pyproject.toml",)  # [project.scripts]


LAUNCHER_ONLY_SUFFIXES = (".sh", ".bash")  # launchers that are never linted, even when named


def _launcher_only(path: str) -> bool:
    """Whether ``path`` is a launcher that is not linted as Python (a shell script,
    ``pyproject.toml``)."""
    return path.lower().endswith(LAUNCHER_ONLY_SUFFIXES) or os.path.basename(path) in LAUNCHER_NAMES


def is_shebang_script(path: str) -> bool:
    """Whether ``path``, a file whose name has no suffix (``scripts/train``), is a shell script by
    its first line (``#!/bin/bash``, ``#!/usr/bin/env sh``): read as a launcher. Unreadable: no."""
    try:
        with open(path, "rb") as f:
            head = f.read(128)
    except OSError:
        return False
    return is_shell_script(path, head.decode("utf-8", "replace"))


MANIFEST_NAMES = ("pyproject.toml", "setup.cfg", "setup.py")


def is_manifest(path: str) -> bool:
    """True for a file that can declare a project's dependencies: ``pyproject.toml``,
    ``setup.cfg``, ``setup.py``, and requirement files (``requirements*.txt``,
    ``dev-requirements.in``, any ``.txt``/``.in`` in a ``requirements`` folder)."""
    name = os.path.basename(path).lower()
    if name in MANIFEST_NAMES:
        return True
    if not name.endswith((".txt", ".in")):
        return False
    folder = os.path.basename(os.path.dirname(path)).lower()
    return "requirements" in name or folder in ("requirements", "reqs")


def discover(
    paths: list[str],
    settings: Settings,
    launchers: list[str] | None = None,
    manifests: list[str] | None = None,
) -> list[Target]:
    """Files to lint under ``paths`` (files or folders), sorted, without duplicates.

    With ``launchers`` given, the shell scripts, docs and ``pyproject.toml`` files found in
    the folders searched or named explicitly are appended to it, once each (read for the
    commands that run the tree's files, see :mod:`xla_lint.program.launchers`). With ``manifests``
    given, the files that declare dependencies (:func:`is_manifest`) found or named are appended
    to it (``xla-lint migrate`` reads their pins). A shell script or
    ``pyproject.toml`` named explicitly is not a Target (it is not Python); a doc named
    explicitly is both a doc Target and a launcher.
    Raises DiscoveryError naming the first path that does not exist.
    """
    found: dict[str, Target] = {}
    listed: set[str] = set(launchers or ())

    def add_launcher(path: str) -> None:
        if launchers is not None and path not in listed:
            listed.add(path)
            launchers.append(path)

    for given in paths:
        try:
            os.lstat(given)
        except FileNotFoundError:
            raise DiscoveryError(f"{given}: no such file or directory") from None
        except OSError as exc:  # a folder on the way that may not be searched
            norm = os.path.normpath(given)
            found.setdefault(
                norm, Target(norm, _kind(given), f"cannot access: {exc.strerror or exc}")
            )
            continue
        if os.path.islink(given) and not os.path.exists(given):
            raise DiscoveryError(f"{given}: {_broken_link(given)}")
        if not os.path.isdir(given):
            norm = os.path.normpath(given)
            if settings.force_exclude and excluded(norm, settings):
                continue
            shebang = "." not in os.path.basename(norm) and is_shebang_script(norm)
            if (
                norm.lower().endswith(LAUNCHER_SUFFIXES)
                or os.path.basename(norm) in LAUNCHER_NAMES
                or shebang
            ):
                add_launcher(norm)
            if manifests is not None and is_manifest(norm) and norm not in manifests:
                manifests.append(norm)
            if _launcher_only(norm) or shebang:
                continue
            found.setdefault(norm, Target(norm, _kind(given)))
            continue

        def unreadable(exc: OSError, given: str = given) -> None:
            path = os.path.normpath(exc.filename if exc.filename is not None else given)
            found.setdefault(
                path, Target(path, "python", f"cannot read folder: {exc.strerror or exc}")
            )

        for folder, dirs, files, links in _walk(given, unreadable):
            dirs[:] = sorted(
                d
                for d in dirs
                if not d.startswith(".")
                and d not in SKIPPED_FOLDERS
                and "{{" not in d  # cookiecutter templates
                and not _is_virtualenv(os.path.join(folder, d))
                and not excluded(os.path.join(folder, d), settings)
            )
            for name in sorted(files):
                full = os.path.normpath(os.path.join(folder, name))
                if name in links and not os.path.exists(full):
                    continue  # a dangling symbolic link: nothing there to read
                lower = name.lower()
                if (
                    name.endswith(".py")
                    or lower.endswith(NOTEBOOK_SUFFIX)
                    or (settings.docs and lower.endswith(DOC_SUFFIXES))
                ):
                    if not excluded(full, settings):
                        found.setdefault(full, Target(full, _kind(name)))
                if (
                    launchers is not None
                    and (
                        lower.endswith(LAUNCHER_SUFFIXES)
                        or name in LAUNCHER_NAMES
                        or ("." not in name and is_shebang_script(full))
                    )
                    and not excluded(full, settings)
                ):
                    add_launcher(full)
                if manifests is not None and is_manifest(full) and not excluded(full, settings):
                    manifests.append(full)
    return sorted(found.values(), key=lambda t: t.path)


def _walk(
    top: str, onerror: Callable[[OSError], None]
) -> Iterator[tuple[str, list[str], list[str], set[str]]]:
    """``os.walk(top, onerror=onerror)`` (top down, in the same order; symbolic links to folders
    listed but not followed), each folder's files with the names among them that are symbolic
    links: ``scandir`` tells, where a test of each file costs a ``stat`` (2,400 on a 2,400-file
    tree). The caller may prune ``dirs`` as with ``os.walk``."""
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as found:
                entries = list(found)
        except OSError as exc:
            onerror(exc)
            continue
        dirs: list[str] = []
        files: list[str] = []
        links: set[str] = set()
        linked_dirs: set[str] = set()
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            try:
                is_link = entry.is_symlink()
            except OSError:
                is_link = False
            if is_dir:
                dirs.append(entry.name)
                if is_link:
                    linked_dirs.add(entry.name)
            else:
                files.append(entry.name)
                if is_link:
                    links.add(entry.name)
        yield folder, dirs, files, links
        stack.extend(os.path.join(folder, d) for d in reversed(dirs) if d not in linked_dirs)


def _broken_link(path: str) -> str:
    """Why the symbolic link ``path`` leads to no file."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link that loops back on itself"
    return f"a symbolic link to {os.readlink(path)!r}, which does not exist"


def excluded(path: str, settings: Settings) -> bool:
    """Whether one of ``settings``' ``exclude`` patterns matches ``path``."""
    return any(_path_matches(path, pattern, settings.root) for pattern in settings.exclude)


def display_path(path: str) -> str:
    """``path`` relative to the current folder when it is below it, else as given."""
    p = Path(path)
    if p.is_absolute():
        try:
            return p.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return p.as_posix()
    return p.as_posix()
