"""What is true of a program, not of one file: is SPMD on, does it shard, is it multi-process?

Each linted file yields :class:`FileFacts` from its own traversal. A *program* is an entry
file together with every linted file it imports, transitively. A file takes the facts of
every program it belongs to: an entry script that calls ``use_spmd()`` enables SPMD for
the modules it imports, and a module that shards makes its importers shard.

``global_mesh`` is true when some program containing the file calls ``xs.set_global_mesh``
(rule XLA009 needs it false before flagging FSDPv2 built without ``mesh=``).

The facts are "may" facts: ``spmd`` is true when some program containing the file enables
SPMD. A finding that needs ``("spmd", False)`` is therefore only reported when no program
containing the file can be in SPMD mode.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

FACT_NAMES = ("spmd", "shards", "multiprocess", "global_mesh")


@dataclass
class FileFacts:
    """Facts one file contributes to its programs.

    ``module`` is the file's dotted module name (``mypkg.model``), ``imports`` every
    module its imports name (prefixes included), ``group`` the document a code block
    came from (all blocks of one Markdown file are one program).
    """

    module: str = ""
    imports: frozenset[str] = frozenset()
    enables_spmd: bool = False
    shards: bool = False
    multiprocess: bool = False
    imports_torch_xla: bool = False
    sets_global_mesh: bool = False  # calls xs.set_global_mesh (fact "global_mesh")
    group: str | None = None

    def to_json(self) -> dict:
        return {
            "module": self.module,
            "imports": sorted(self.imports),
            "enables_spmd": self.enables_spmd,
            "shards": self.shards,
            "multiprocess": self.multiprocess,
            "imports_torch_xla": self.imports_torch_xla,
            "sets_global_mesh": self.sets_global_mesh,
            "group": self.group,
        }

    @classmethod
    def from_json(cls, data: dict) -> "FileFacts":
        """Inverse of :meth:`to_json`; raises KeyError/TypeError on a malformed object
        (values are checked, never converted: ``"yes"`` is not a flag)."""
        def flag(value: object) -> bool:
            if type(value) is not bool:
                raise TypeError(f"expected true or false, got {type(value).__name__}")
            return value

        module, imports, group = data["module"], data["imports"], data.get("group")
        if not isinstance(module, str) or not all(isinstance(m, str) for m in imports) \
                or not (group is None or isinstance(group, str)):
            raise TypeError("malformed file facts")
        return cls(
            module=module,
            imports=frozenset(imports),
            enables_spmd=flag(data["enables_spmd"]),
            shards=flag(data["shards"]),
            multiprocess=flag(data["multiprocess"]),
            imports_torch_xla=flag(data["imports_torch_xla"]),
            sets_global_mesh=flag(data.get("sets_global_mesh", False)),
            group=group,
        )


def module_name(path: str | os.PathLike) -> tuple[str, bool]:
    """Dotted module name of a ``.py`` file and whether it is a package ``__init__``.

    Walks up the folders that hold an ``__init__.py``: ``src/mypkg/model.py`` with
    ``src/mypkg/__init__.py`` is ``mypkg.model``; a script outside a package is its stem.
    """
    p = Path(path)
    is_package = p.name == "__init__.py"
    parts = [] if is_package else [p.stem]
    folder = p.parent
    while (folder / "__init__.py").is_file():
        parts.append(folder.name)
        if folder.parent == folder:
            break
        folder = folder.parent
    return ".".join(reversed(parts)), is_package


@dataclass
class ProgramFacts:
    """The facts each file takes from the programs it belongs to.

    ``per_file[path][fact]`` is the truth of a fact for ``path``; ``because[path][fact]``
    names a file that made it true (the file itself when it says so on its own).
    """

    per_file: dict[str, dict[str, bool]] = field(default_factory=dict)
    because: dict[str, dict[str, str]] = field(default_factory=dict)

    def holds(self, path: str, requires: tuple[tuple[str, bool], ...]) -> bool:
        """True when every ``(fact, value)`` of ``requires`` holds for ``path``."""
        facts = self.per_file.get(path)
        if facts is None:
            return not any(value for _, value in requires)
        return all(facts.get(name, False) == value for name, value in requires)

    def source_of(self, path: str, fact: str) -> str | None:
        """Another file that made ``fact`` true for ``path``, or None (false, or true on its own)."""
        src = self.because.get(path, {}).get(fact)
        return src if src is not None and src != path else None


def _own(f: FileFacts) -> dict[str, bool]:
    own = {"spmd": f.enables_spmd, "shards": f.shards, "multiprocess": f.multiprocess}
    if f.sets_global_mesh:  # absent means false (ProgramFacts.holds reads missing facts as False)
        own["global_mesh"] = True
    return own


def _import_names(path: str, f: FileFacts) -> list[str]:
    """Names an import may use for the file: its package-qualified name and, for scripts
    run from their folder (``import test_base`` beside ``test_base.py``), each shorter tail."""
    parts = f.module.split(".")
    return [".".join(parts[i:]) for i in range(len(parts))]


def compute_program_facts(files: dict[str, FileFacts]) -> ProgramFacts:
    """Join per-file facts along the imports between linted files.

    ``files`` maps a path to its facts. Files of one ``group`` (code blocks of one
    document) form one program. An import that names several linted files prefers the
    ones in the importer's folder. Runs in O(files x files reachable).
    """
    by_module: dict[str, list[str]] = {}
    for path, f in files.items():
        if f.group is None and f.module:
            for name in _import_names(path, f):
                by_module.setdefault(name, []).append(path)

    # Edges: path -> paths it imports.
    edges: dict[str, set[str]] = {p: set() for p in files}
    groups: dict[str, list[str]] = {}
    for path, f in files.items():
        if f.group is not None:
            groups.setdefault(f.group, []).append(path)
            continue
        folder = os.path.dirname(path)
        for name in f.imports:
            targets = by_module.get(name)
            if not targets:
                continue
            same_dir = [t for t in targets if os.path.dirname(t) == folder]
            exact = [t for t in targets if files[t].module == name]
            for t in same_dir or exact or targets:
                if t != path:
                    edges[path].add(t)
    for members in groups.values():
        for m in members:
            edges[m].update(x for x in members if x != m)

    per_file: dict[str, dict[str, bool]] = {p: dict(_own(f)) for p, f in files.items()}
    because: dict[str, dict[str, str]] = {p: {k: p for k, v in _own(f).items() if v} for p, f in files.items()}
    for start in files:
        # closure(start): every file the program that starts here runs.
        seen = {start}
        todo = [start]
        while todo:
            cur = todo.pop()
            for nxt in edges[cur]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        sources: dict[str, str] = {}
        for m in sorted(seen):
            for k, v in _own(files[m]).items():
                if v and k not in sources:
                    sources[k] = m
        for m in seen:
            mine, why = per_file[m], because[m]
            for k, src in sources.items():
                if not mine.get(k, False):
                    mine[k] = True
                    why[k] = src
    return ProgramFacts(per_file, because)
