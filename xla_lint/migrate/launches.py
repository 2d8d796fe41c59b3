"""The torch_xla sites of launch scripts: environment variables and ``python -m torch_xla...``.

Nothing is parsed here: the program model's launches
(:attr:`xla_lint.program.model.ProgramModel.launches`, read by
:mod:`xla_lint.program.launchers` from the tree's shell scripts, shell blocks of docs and
``[project.scripts]``) say what each command runs and with which environment, and the line that
set each variable (``export PJRT_DEVICE=TPU`` above, or the command's own ``XLA_USE_BF16=1
python train.py``). One site per variable torch_xla reads (:func:`xla_lint.migrate.table.env_entry`:
``PJRT_DEVICE``, ``XLA_*``, ``PT_XLA_*``, ``PJRT_*``, the ``TPU_*`` torch_xla 2.9.0 reads or
sets) at the line that sets it, once however many commands it reaches, and one per command that
runs a torch_xla module (``python -m torch_xla.distributed.xla_dist``), and the torch_xla and
libtpu requirements of ``python -m pip install ...`` (:func:`~xla_lint.migrate.pins.install_sites`;
a bare ``pip install`` is not a command the launcher model reads). A variable set for a
tool (``python -m pip``) is not a site, nor one set where no Python command follows (the
launcher model keeps a variable only in the environment of a command it reads).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from ..program.model import Launch, ProgramModel
from ..sources.text import read_source
from . import table
from .pins import install_sites
from .sites import Site

# python -m MODULE of a tool, never a program (as xla_lint/pipeline/shell.py's TOOL_MODULES).
_TOOLS = frozenset({"pip", "venv", "ensurepip", "http.server", "json.tool", "site", "build"})


def _tool(launch: Launch) -> bool:
    return launch.module and launch.runs.split(".", 1)[0] in _TOOLS


def _where(where: str) -> tuple[str, int] | None:
    path, _, line = where.rpartition(":")
    return (path, int(line)) if path and line.isdigit() and int(line) > 0 else None


class _Lines:
    """The lines of the launcher files, read once each (for a site's column)."""

    def __init__(self) -> None:
        self._files: dict[str, list[str]] = {}

    def column(self, path: str, line: int, word: str) -> int:
        if path not in self._files:
            try:
                self._files[path] = read_source(path).decode("utf-8", "replace").splitlines()
            except OSError:
                self._files[path] = []
        lines = self._files[path]
        if not 1 <= line <= len(lines):
            return 1
        text = lines[line - 1]
        m = re.search(rf"(?<![\w-]){re.escape(word)}", text)
        if m is not None:
            return m.start() + 1
        return len(text) - len(text.lstrip()) + 1


def launch_sites(
    model: ProgramModel, source_of: Callable[[str], str] = lambda path: "shell"
) -> list[tuple[Site, Launch]]:
    """The sites of every launch of ``model``, each with the launch it belongs to (the first
    one a variable reaches); ``source_of(path)`` names what kind of file ``path`` is."""
    out: list[tuple[Site, Launch]] = []
    seen: set[tuple[str, int, str]] = set()
    lines = _Lines()
    for launch in model.launches:
        place = _where(launch.where)
        if launch.module and (launch.runs == "torch_xla" or launch.runs.startswith("torch_xla.")):
            found = table.entry_for(launch.runs)
            entry = table.LAUNCH_MODULE
            if found is not None and found[1] is not table.UNMAPPED:
                entry = found[1]
            api = f"python -m {launch.runs}"
            if place is not None and (place[0], place[1], api) not in seen:
                seen.add((place[0], place[1], api))
                site = _site(place, api, entry, lines.column(*place, launch.runs), source_of)
                out.append((site, launch))
        if launch.module and launch.runs == "pip" and place is not None:
            for site in install_sites(place[0], place[1], 1, launch.argv):
                key = (place[0], place[1], site.target)
                if key not in seen:
                    seen.add(key)
                    column = lines.column(*place, site.target.split("`")[1].split()[-1])
                    out.append((replace(site, column=column, source=source_of(place[0])), launch))
        if _tool(launch):
            continue
        for name, _value, where in launch.env:
            variable = table.env_entry(name)
            at = _where(where)
            if variable is None or at is None or (at[0], at[1], name) in seen:
                continue
            seen.add((at[0], at[1], name))
            site = _site(at, f"env:{name}", variable, lines.column(*at, name + "="), source_of)
            out.append((site, launch))
    return out


def _site(
    place: tuple[str, int],
    api: str,
    entry: table.Entry,
    column: int,
    source_of: Callable[[str], str],
) -> Site:
    path, line = place
    return Site(
        path,
        line,
        column,
        api,
        entry.cls,
        entry.target,
        entry.phase,
        entry.row,
        source=source_of(path),
    )
