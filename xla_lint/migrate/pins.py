"""Requirement pins of torch_xla and libtpu: one :class:`~xla_lint.migrate.sites.Site` each.

What is read (the files discovery found, :func:`xla_lint.pipeline.discover.is_manifest`):

- requirement files (``requirements*.txt``, ``*.in``, a ``requirements/`` folder's ``.txt``):
  each requirement line (``torch_xla[tpu]==2.9.0``, ``torch-xla>=2.5``, ``libtpu==0.0.21``),
  ``-f``/``--find-links``/``-i``/``--index-url``/``--extra-index-url`` lines and wheel URLs
  that point at torch_xla or libtpu releases (``https://storage.googleapis.com/libtpu-releases/
  index.html``); comments and ``\\`` continuations as pip reads them;
- ``pyproject.toml`` (:mod:`tomllib`): ``[project] dependencies``,
  ``[project.optional-dependencies]`` and ``[dependency-groups]``;
- ``setup.cfg`` (:mod:`configparser`): ``[options] install_requires`` and
  ``[options.extras_require]``;
- ``setup.py`` (:mod:`ast`, never run): the ``install_requires=[...]`` and
  ``extras_require={...: [...]}`` of a ``setup(...)`` call when they are written as literal
  lists of strings (a list built in code is not followed).

The pins a site is made for: ``torch_xla``/``torch-xla`` (any extras: the move to
``torch-tpu==0.2.0``, a decision because torch itself moves from 2.9 to 2.11-2.15), ``libtpu``
(and ``libtpu-nightly``: torch-tpu requires its own ``libtpu>=0.0.50``), and ``torch`` in a file
that also pins torch_xla (the pin written for torch_xla). The versions named come from the
wheel's ``METADATA`` as the data file records it (``metadata`` of
``xla_lint/data/torchtpu_api.json``). Nothing is rewritten: a version range is not mechanical.
"""

from __future__ import annotations

import ast
import configparser
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass

from ..sources.text import MAX_CONFIG_BYTES, read_source
from . import table
from .sites import Site

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?")
_INDEX_OPTIONS = ("-f", "--find-links", "-i", "--index-url", "--extra-index-url")
# A URL of torch_xla's or libtpu's own releases (pip's -f/-i pages, or a wheel file).
_XLA_URL = re.compile(r"libtpu|pytorch-xla|tpu-pytorch|torch_xla-|torch-xla", re.IGNORECASE)


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): ``Torch_XLA`` -> ``torch-xla``."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Requirement:
    """One requirement as written (``text``), at 1-based ``line`` and ``column`` of its file."""

    text: str
    line: int
    column: int


def _metadata() -> dict:
    return table.torchtpu_api().get("metadata", {})


def _requires(name: str) -> str:
    return _metadata().get("requires_dist", {}).get(name, name)


def pin_sites(path: str) -> list[Site]:
    """The sites of the manifest ``path`` (see the module docstring); none for a file that
    cannot be read or parsed, or that is not a manifest kind this reads."""
    try:
        text = read_source(path, MAX_CONFIG_BYTES).decode("utf-8", "replace")
    except OSError:
        return []
    name = os.path.basename(path).lower()
    if name == "pyproject.toml":
        found = list(_pyproject(text))
    elif name == "setup.cfg":
        found = list(_setup_cfg(text))
    elif name == "setup.py":
        if "torch_xla" not in text and "torch-xla" not in text and "libtpu" not in text:
            return []
        found = list(_setup_py(text))
    else:
        found = list(_requirements_txt(text))
    return _sites(path, found)


def install_sites(path: str, line: int, column: int, argv: Iterable[str]) -> list[Site]:
    """The sites of a ``python -m pip install ARGV`` command at ``path:line`` (the launcher
    model's words, quotes removed): its requirements and its ``-f``/``-i`` options."""
    words = list(argv)
    if words[:1] != ["install"]:
        return []
    found: list[Requirement] = []
    i = 1
    while i < len(words):
        word = words[i]
        if word in _INDEX_OPTIONS and i + 1 < len(words):
            found.append(Requirement(f"{word} {words[i + 1]}", line, column))
            i += 2
            continue
        if word in ("-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-t"):
            i += 2
            continue
        if not word.startswith("-"):
            found.append(Requirement(word, line, column))
        i += 1
    return _sites(path, found, source="shell")


def _sites(path: str, found: list[Requirement], source: str = "requirements") -> list[Site]:
    names = {}
    for r in found:
        m = _NAME.match(r.text)
        if m and not r.text.lstrip().startswith("-") and "://" not in r.text:
            names[id(r)] = canonical(m.group(1))
    has_xla = "torch-xla" in names.values()
    out: list[Site] = []
    for r in found:
        name = names.get(id(r))
        if name is None:
            if _XLA_URL.search(r.text):
                out.append(_site(path, r, "pin:index", table.PIN_INDEX, source))
            continue
        if name == "torch-xla":
            entry = table.PIN_TORCH_XLA
            requires = ", ".join(
                [_requires("torch"), _requires("libtpu")]
                + (
                    [f"Python{_metadata()['requires_python']}"]
                    if _metadata().get("requires_python")
                    else []
                )
            )
            out.append(_site(path, r, "pin:torch-xla", entry, source, requires=requires))
        elif name in ("libtpu", "libtpu-nightly"):
            libtpu = _requires("libtpu")
            out.append(_site(path, r, f"pin:{name}", table.PIN_LIBTPU, source, libtpu=libtpu))
        elif name == "torch" and has_xla:
            torch = _requires("torch")
            out.append(_site(path, r, "pin:torch", table.PIN_TORCH, source, torch=torch))
    return out


def _site(
    path: str, r: Requirement, api: str, entry: table.Entry, source: str, **values: str
) -> Site:
    return Site(
        path,
        r.line,
        r.column,
        api,
        entry.cls,
        f"`{r.text.strip()}`: " + entry.target.format(**values),
        entry.phase,
        entry.row,
        source=source,
    )


def _requirements_txt(text: str) -> Iterable[Requirement]:
    """Each requirement or index option of a pip requirements file, with its place."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        line = lines[i]
        while line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        body = re.split(r"(?:^|\s)#", line, maxsplit=1)[0].strip()
        if not body:
            continue
        column = len(lines[start]) - len(lines[start].lstrip()) + 1
        words = body.split()
        if words[0] in ("-r", "--requirement", "-c", "--constraint", "-e", "--editable"):
            continue
        if words[0] in _INDEX_OPTIONS or words[0].startswith(
            tuple(o + "=" for o in _INDEX_OPTIONS if o.startswith("--"))
        ):
            yield Requirement(body, start + 1, column)
            continue
        if words[0].startswith("-"):
            continue  # another pip option (--pre, --no-binary ...)
        yield Requirement(body, start + 1, column)


def _place(text: str, value: str, after: int = 0) -> tuple[int, int]:
    """The 1-based line and column of the string ``value`` quoted in ``text`` (first at or
    after offset ``after``), else of its first bare occurrence; (1, 1) when not found."""
    for needle in (f'"{value}"', f"'{value}'", value):
        at = text.find(needle, after)
        if at >= 0:
            line = text.count("\n", 0, at) + 1
            column = at - (text.rfind("\n", 0, at) + 1) + 1 + (needle != value)
            return line, column
    return 1, 1


def _placed(text: str, values: Iterable[object]) -> Iterable[Requirement]:
    for value in values:
        if isinstance(value, str):
            line, column = _place(text, value)
            yield Requirement(value, line, column)


def _pyproject(text: str) -> Iterable[Requirement]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    project = data.get("project", {})
    if not isinstance(project, dict):
        return
    lists = [project.get("dependencies", [])]
    for group in (project.get("optional-dependencies", {}), data.get("dependency-groups", {})):
        if isinstance(group, dict):
            lists.extend(group.values())
    for values in lists:
        if isinstance(values, list):
            yield from _placed(text, values)


def _setup_cfg(text: str) -> Iterable[Requirement]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return
    values: list[str] = []
    if parser.has_option("options", "install_requires"):
        values += parser.get("options", "install_requires").splitlines()
    if parser.has_section("options.extras_require"):
        for _, value in parser.items("options.extras_require"):
            values += value.splitlines()
    yield from _placed(text, [v.strip() for v in values if v.strip()])


def _setup_py(text: str) -> Iterable[Requirement]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name != "setup":
            continue
        for keyword in node.keywords:
            if keyword.arg == "install_requires":
                yield from _literal_strings(keyword.value)
            elif keyword.arg == "extras_require" and isinstance(keyword.value, ast.Dict):
                for value in keyword.value.values:
                    yield from _literal_strings(value)


def _literal_strings(node: ast.expr) -> Iterable[Requirement]:
    if isinstance(node, (ast.List, ast.Tuple)):
        for item in node.elts:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                yield Requirement(item.value, item.lineno, item.col_offset + 2)
