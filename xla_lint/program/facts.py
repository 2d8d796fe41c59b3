"""What one file contributes to the programs it belongs to (:class:`FileFacts`).

Each linted file yields :class:`FileFacts` from its own traversal (or, for a file that
is not parsed, from a cheap scan of its imports); :mod:`xla_lint.program.model` joins them
into programs (an entry and every module it reaches) and modes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path


class Fact(StrEnum):
    """A program fact a finding may rest on (a rule's ``requires=``), and the only spelling of it.

    A program satisfies ``(fact, True)`` when one of its modules (or its launch) sets the fact,
    ``(fact, False)`` when none does (:meth:`xla_lint.program.model.ProgramModel.holds`). Members
    compare and hash equal to their strings, so findings read back from the cache (plain strings)
    are the same findings; :meth:`xla_lint.rule.Rule.report` turns what it is given into members,
    so a misspelt fact raises ``ValueError`` instead of quietly matching nothing.
    """

    SPMD = "spmd"  # `xr.use_spmd()` runs (or XLA_USE_SPMD=1 in the launch)
    SHARDS = "shards"  # a tensor is sharded (mark_sharding, FSDPv2, an input sharding)
    MULTIPROCESS = "multiprocess"  # one process per device: xmp.spawn, torch_xla.launch, torchrun
    GLOBAL_MESH = "global_mesh"  # `xs.set_global_mesh(...)` runs
    UNBUFFERED = "unbuffered"  # python -u, PYTHONUNBUFFERED, stdout reconfigured
    TORCHAX = "torchax"  # the program runs on torchax
    TEST = "test"  # the program is a test (pytest/unittest collects it)
    # The program's code starts its replicas itself: `xmp.spawn` or `torch_xla.launch` runs (one
    # process per device, torch_xla/_internal/pjrt.py `run_multiprocess`; `torch_xla.launch` calls the
    # function in place when torchrun started the process: torch_xla/torch_xla.py `launch`).
    SPAWN = "spawn"
    # The program's code calls `torch_xla.launch`, which spawns one process per device unless torchrun
    # started the process (then it calls the function in place: torch_xla/torch_xla.py `launch`). It
    # makes the program start its replicas itself (SPAWN) only when a launcher of the tree runs the
    # entry with plain `python` (ProgramModel._build).
    XLA_LAUNCH = "xla_launch"
    # A launcher of the tree runs the program with torchrun (`torchrun`, `python -m
    # torch.distributed.run`/`launch`), which exports RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
    # GROUP_RANK, MASTER_ADDR, MASTER_PORT to each worker (torch/distributed/elastic/agent/server/
    # local_elastic_agent.py `_start_workers`).
    TORCHRUN = "torchrun"
    # What the program prints may be lost, on the tree's evidence that its standard output is not a
    # terminal: Python then buffers it in blocks (sys.stdout is line-buffered only on a terminal), and
    # a process that is killed, hangs or aborts in the runtime never writes the buffer. Holds when a
    # launcher of the tree pipes or redirects the output, runs it under `nohup`, over ssh or as a
    # job scheduler's job (Launch.output), or when a notebook starts replicas (the kernel's output
    # is no terminal). Derived in ProgramModel._build; read by XLA004 (xla_lint/rules/output.py).
    UNATTENDED = "unattended"
    # UNATTENDED, or inferred without evidence of where the output goes: the program starts replicas
    # (SPAWN, XLA_LAUNCH), torchrun or `accelerate launch --tpu` starts it (MULTIPROCESS,
    # TORCHRUN), or it is SPMD (on a pod, one process per host started remotely). Replicas and
    # torchrun's workers inherit the parent's standard output, so from a terminal they line-buffer
    # and lose nothing: XLA004 rests on this fact only in preview mode.
    POSSIBLY_UNATTENDED = "possibly_unattended"


# The equality tests that guard one site: ``(("config.tpu_cores", "'spmd'"),)`` for a call under
# ``if config.tpu_cores == "spmd":`` (the subject's source text, the literal's ``repr``); ``()``: none.
Condition = tuple[tuple[str, str], ...]

# A test that pytest or unittest collects, at the start of a line: `def test...`, `class Test...`,
# a TestCase subclass. Read by the CST facts and the line scan alike.
TEST_DEFINITION = re.compile(
    rb"^(?:async[ \t]+)?def[ \t]+test|^class[ \t]+(?:Test|\w+\([^)]*TestCase)", re.M
)

# Module-level calls that libraries make at import time without being programs: logging and
# warnings set-up, registration, sys.path edits, collection updates, dotenv loading. Shared by
# the CST entry test (xla_lint.analysis.context.is_entry_module) and the line scan (xla_lint.pipeline.run).
LIBRARY_CALL_ROOTS = frozenset(
    {
        "warnings",
        "logging",
        "logger",
        "_logger",
        "log",
        "LOGGER",
        "__all__",
        "sys",
        "os",
        "typing",
        "atexit",
        "setattr",
        "torch",
        "np",
        "numpy",
        "collections",
        "copyreg",
        "dataclasses",
        "functools",
        "abc",
    }
)
LIBRARY_CALL_METHODS = frozenset(
    {
        "update",
        "extend",
        "append",
        "add",
        "define",
        "wrap",
        "allow_in_graph",
        "setLevel",
        "load_dotenv",
    }
)


def is_library_call(name: str) -> bool:
    """True when a module-level call of the dotted callee ``name`` (``logger.setLevel``) is a
    library idiom rather than a program's work (an empty name: not a plain callee)."""
    root = name.split(".", 1)[0]
    last = name.rsplit(".", 1)[-1]
    return (
        not name
        or root in LIBRARY_CALL_ROOTS
        or "register" in last.lower()
        or "log" in root.lower()
        or last in LIBRARY_CALL_METHODS
    )


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
    # Calls `xmp.spawn` (fact "spawn"; a subset of ``multiprocess``).
    spawns: bool = False
    # Calls `torch_xla.launch` (fact "xla_launch"): spawns only when the program is not run by torchrun.
    xla_launches: bool = False
    imports_torch_xla: bool = False
    sets_global_mesh: bool = False  # calls xs.set_global_mesh (fact "global_mesh")
    # Imports torchax (and so JAX) at module level, before anything in the file starts the torch_xla
    # runtime (fact "torchax"; xla_lint/analysis/context.py FactsCollector). A file that is not parsed has
    # only its imports: xla_lint.program.model.own_facts reads "torchax" among them.
    imports_torchax: bool = False
    group: str | None = None
    # Runs as a program of its own: `if __name__ == "__main__":`, `__main__.py`, or work done
    # at import time (a call, a loop or a `with` at module level); see xla_lint/program/model.py.
    entry: bool = False
    # Defines a test pytest or unittest would collect (a top-level `def test...`, `class Test...`
    # or a TestCase subclass). A `test_*.py` without one is a module (often an evaluation script
    # run with python), not a test; see xla_lint.program.model.is_test_code. True when not known.
    defines_tests: bool = True
    # Imports torch_xla unconditionally at module level (not under `if`/`try`, not in a function):
    # a program reaching it is an XLA program (an optional import in a library is not enough).
    requires_torch_xla: bool = False
    # Makes its own output unbuffered: `sys.stdout.reconfigure(line_buffering=True)` and the like.
    unbuffered: bool = False
    # Where each fact above is set: "" at module level, else the innermost function's name. A
    # fact set in a function counts for a program only if the program calls that function by
    # name (a library's `notebook_launcher` calling xmp.spawn does not make its users launch).
    fact_functions: dict[str, set[str]] = field(default_factory=dict)
    # Names called, or passed to a call, in this file (`main()`, `torch_xla.launch(_mp_fn)`).
    references: set[str] = field(default_factory=set)
    # The conditions of each site setting a fact (``fact_conditions``) and of each call or pass of a
    # name (``call_conditions``), kept only when some site has one: a name or fact missing here is
    # set or called unconditionally. The program model reads them to tell alternative modes of an
    # entry (``if config.mode == "spmd": ... elif config.mode == "multi": xmp.spawn(...)``).
    fact_conditions: dict[str, list[Condition]] = field(default_factory=dict)
    call_conditions: dict[str, list[Condition]] = field(default_factory=dict)
    # The device-loader value flow into call slots and returns: target key -> its sources
    # (``{"loop.run_epoch#2": ["loader"], "ret:data.get_loader": ["loader"]}``; the keys are
    # described in xla_lint/analysis/loaders.py), the keys of the file's functions, and whether
    # it makes a device loader (MpDeviceLoader, ParallelLoader, per_device_loader). Joined by
    # xla_lint/program/flow.py; empty for a file that does not import torch_xla.
    flows: dict[str, list[str]] = field(default_factory=dict)
    flow_functions: frozenset[str] = frozenset()
    flow_calls: frozenset[str] | None = None  # functions it calls or passes (None: not known)
    makes_device_loader: bool = False

    def to_json(self) -> dict:
        return {
            "module": self.module,
            "imports": sorted(self.imports),
            "enables_spmd": self.enables_spmd,
            "shards": self.shards,
            "multiprocess": self.multiprocess,
            "spawns": self.spawns,
            "xla_launches": self.xla_launches,
            "imports_torch_xla": self.imports_torch_xla,
            "sets_global_mesh": self.sets_global_mesh,
            "imports_torchax": self.imports_torchax,
            "group": self.group,
            "entry": self.entry,
            "defines_tests": self.defines_tests,
            "unbuffered": self.unbuffered,
            "requires_torch_xla": self.requires_torch_xla,
            "fact_functions": {k: sorted(v) for k, v in sorted(self.fact_functions.items())},
            "references": sorted(self.references),
            "fact_conditions": _conditions_to_json(self.fact_conditions),
            "call_conditions": _conditions_to_json(self.call_conditions),
            "flows": {k: sorted(v) for k, v in sorted(self.flows.items())},
            "flow_functions": sorted(self.flow_functions),
            "flow_calls": None if self.flow_calls is None else sorted(self.flow_calls),
            "makes_device_loader": self.makes_device_loader,
        }

    @classmethod
    def from_json(cls, data: dict) -> FileFacts:
        """Inverse of :meth:`to_json`; raises KeyError/TypeError on a malformed object
        (values are checked, never converted: ``"yes"`` is not a flag)."""

        def flag(value: object) -> bool:
            if type(value) is not bool:
                raise TypeError(f"expected true or false, got {type(value).__name__}")
            return value

        module, imports, group = data["module"], data["imports"], data.get("group")
        functions, references = data.get("fact_functions", {}), data.get("references", [])
        flows, flow_functions = data.get("flows", {}), data.get("flow_functions", [])
        flow_calls = data.get("flow_calls")
        if (
            not isinstance(module, str)
            or not all(isinstance(m, str) for m in imports)
            or not (group is None or isinstance(group, str))
            or not isinstance(functions, dict)
            or not all(
                isinstance(v, list) and all(isinstance(n, str) for n in v)
                for v in functions.values()
            )
            or not isinstance(references, list)
            or not all(isinstance(n, str) for n in references)
            or not isinstance(flows, dict)
            or not all(
                isinstance(v, list) and all(isinstance(n, str) for n in v) for v in flows.values()
            )
            or not isinstance(flow_functions, list)
            or not all(isinstance(n, str) for n in flow_functions)
            or not (
                flow_calls is None
                or isinstance(flow_calls, list)
                and all(isinstance(n, str) for n in flow_calls)
            )
        ):
            raise TypeError("malformed file facts")
        return cls(
            module=module,
            imports=frozenset(imports),
            enables_spmd=flag(data["enables_spmd"]),
            shards=flag(data["shards"]),
            multiprocess=flag(data["multiprocess"]),
            spawns=flag(data.get("spawns", False)),
            xla_launches=flag(data.get("xla_launches", False)),
            imports_torch_xla=flag(data["imports_torch_xla"]),
            sets_global_mesh=flag(data.get("sets_global_mesh", False)),
            imports_torchax=flag(data.get("imports_torchax", False)),
            group=group,
            entry=flag(data.get("entry", False)),
            defines_tests=flag(data.get("defines_tests", True)),
            unbuffered=flag(data.get("unbuffered", False)),
            requires_torch_xla=flag(data.get("requires_torch_xla", False)),
            fact_functions={k: set(v) for k, v in functions.items()},
            references=set(references),
            fact_conditions=_conditions_from_json(data.get("fact_conditions", {})),
            call_conditions=_conditions_from_json(data.get("call_conditions", {})),
            flows={k: list(v) for k, v in flows.items()},
            flow_functions=frozenset(flow_functions),
            flow_calls=None if flow_calls is None else frozenset(flow_calls),
            makes_device_loader=flag(data.get("makes_device_loader", False)),
        )


def _conditions_to_json(conditions: dict[str, list[Condition]]) -> dict:
    return {k: [[list(pair) for pair in site] for site in v] for k, v in sorted(conditions.items())}


def _conditions_from_json(data: object) -> dict[str, list[Condition]]:
    """Inverse of :func:`_conditions_to_json`; raises TypeError on a malformed object."""
    if not isinstance(data, dict):
        raise TypeError("malformed conditions")
    out: dict[str, list[Condition]] = {}
    for key, sites in data.items():
        if not isinstance(key, str) or not isinstance(sites, list):
            raise TypeError("malformed conditions")
        out[key] = []
        for site in sites:
            if not isinstance(site, list) or not all(
                isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
                for pair in site
            ):
                raise TypeError("malformed conditions")
            out[key].append(tuple((pair[0], pair[1]) for pair in site))
    return out


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


def import_prefixes(names: Iterable[str], anchors: Mapping[str, int] | None = None) -> set[str]:
    """Every module ``names`` import, with the packages Python imports first: ``a.b.c`` gives
    ``a``, ``a.b`` and ``a.b.c``. ``anchors``: for a name only relative imports gave, the number
    of dotted parts of the package the import's dots name; the packages above that one are left
    out. They are the file's own enclosing packages, loaded already when the file is imported as
    their member, and not at all when it is imported under a shorter name: a script that puts
    ``sparsity/`` on ``sys.path`` and imports ``permutation_search_kernels`` runs that package's
    ``from .utils import x`` as ``permutation_search_kernels.utils``, never ``apex/__init__.py``."""
    anchors = anchors or {}
    out: set[str] = set()
    for name in names:
        parts = name.split(".")
        for i in range(max(1, anchors.get(name, 1)), len(parts) + 1):
            out.add(".".join(parts[:i]))
    return out


def resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    """Absolute module for ``from {'.' * level}{target} import ...`` written in ``module``."""
    parts = module.split(".") if module else []
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: max(0, len(parts) - (level - 1))]
    if target:
        parts.append(target)
    return ".".join(parts)
