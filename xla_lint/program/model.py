"""The program model: which files are programs, what each reaches, and the mode each runs in.

A repository is not one program. It holds entry scripts of different modes (an SPMD
trainer, a multi-process example), tests that are programs of their own, libraries that
no entry in the tree reaches, and launch scripts that set the environment. Rules ask
this model "which programs run this line, and in which mode?"; they never work it out.

Entries (:class:`Program`, ``kind``):

- ``script``: a file with ``if __name__ == "__main__":``, a ``__main__.py``, a module
  that does work at import time (:func:`xla_lint.analysis.context.is_entry_module`), a file a
  launcher runs (``python FILE``, ``python -m PKG`` (its ``__main__.py``), ``torchrun FILE``
  in a shell script or a shell block of the docs: :mod:`xla_lint.program.launchers`), a
  ``[project.scripts]`` target, or a file the configuration's ``entry-points`` names;
- ``test``: a file pytest collects (``test_*.py``, ``*_test.py``) or an entry in a test
  folder (:func:`is_test_file`), a program of its own that includes the ``conftest.py``
  files above it; other modules of test folders are test code without a program;
- ``document``: the code blocks of one Markdown/reST page or notebook.

A program is its entry and every module the entry reaches through imports that may run
(not under ``if TYPE_CHECKING:``), resolved as Python would from the importing file's folder
and each folder above it (so namespace packages without ``__init__.py`` and ``src/``
layouts resolve), see :func:`import_edges`; reach is memoised per strongly connected part of
the import graph (:class:`_Closure`).

Facts of a program: ``spmd`` (``use_spmd()`` anywhere it reaches, ``XLA_USE_SPMD`` turned
on in its code or by its launcher, or declared), ``multiprocess`` (``torch_xla.launch``,
``xmp.spawn``, ``init_process_group("xla")``, or run by ``torchrun``), ``spawn`` (its code calls
``xmp.spawn``/``torch_xla.launch``), ``torchrun`` (a launcher runs it with torchrun, which
exports ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``), ``shards``,
``global_mesh`` (``xs.set_global_mesh``), ``unbuffered`` (``python -u``,
``PYTHONUNBUFFERED``, stdout reconfigured to line buffering), ``torchax`` (torchax, and so
JAX, imported at module level: :func:`own_facts`), ``test`` (a test program), ``unattended``
(what it prints may be lost, on the tree's evidence that its output is no terminal: a launcher
pipes or redirects it, runs it under ``nohup``, over ssh or as a scheduler's job
(:attr:`Launch.output`), or a notebook starts replicas, whose output goes to the kernel's),
``possibly_unattended`` (``unattended``, or inferred: it runs replicas, ``spawn``,
``xla_launch``, ``multiprocess``, ``torchrun``, or ``spmd``, one process per host that a remote
command may start on every host of a pod; XLA004 rests on it only in preview mode:
:func:`_unattended`).
The entry's own facts count wherever they are set; a fact that a reached module sets only
inside a function counts when some module of the program calls or passes that function by
name; a fact set behind an ``if`` inside a function of a reached module (``if config.fsdp_v2:``) may
hold (:attr:`Program.maybe`), and so do ``spmd`` and ``multiprocess`` when the entry sets them only
under exclusive ``if option == LITERAL`` branches (alternative modes:
:meth:`ProgramModel._alternative_modes`); facts set in code for another platform
(``if is_sagemaker_dp_enabled():``) were never recorded (:func:`xla_lint.analysis.guards.runs_on_xla`).

Which programs a module belongs to (:meth:`ProgramModel.programs_of`): the script
programs that reach it, and for a test file or a document its own program. A test's mode
stays in the test: it never spreads into the library it imports. A module no program
reaches is library code and has no mode: a finding that needs a mode is reported there
only when the module sets that mode itself. torch_xla's own modules (linted in a checkout
of pytorch/xla) implement the modes and take none from the programs that import them.

A finding's ``requires`` (``(("spmd", True),)``) holds for a module when one program it
belongs to satisfies all of them (a finding that only says a mode or mesh is absent needs
every program, or the module being the entry: :meth:`ProgramModel.witness`); that program
is named in the message, with the others that run the module in another mode.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..sources.text import SourceError, read_source
from .facts import Condition, Fact, FileFacts
from .flow import LoaderFlows

# Folders whose entry files are tests (pytest collects test_*.py anywhere; suites run from these).
TEST_FOLDERS = frozenset({"test", "tests", "testing", "test_utils", "unittests"})
# Facts a library module (no program reaches it) is taken to lack, so that a finding needing
# their absence is reported there as it would be in any program: print buffering and tests.
LIBRARY_LACKS = frozenset({Fact.UNBUFFERED, Fact.TEST})
# Facts a library module is taken to have: the programs that import it, and how they are launched,
# are not in the tree, so its prints are taken as possibly lost (XLA004 in preview mode; the case
# c06-print-flush). Inferred, never evidence: LIBRARY_ASSUMES holds no Fact.UNATTENDED.
LIBRARY_ASSUMES = frozenset({Fact.POSSIBLY_UNATTENDED})
# The facts from which a program's output is inferred to be possibly lost
# (Fact.POSSIBLY_UNATTENDED), in the order their source is named, with what each says of it.
_UNATTENDED_BY = (
    (Fact.TORCHRUN, "torchrun starts its processes"),
    (Fact.SPAWN, "`xmp.spawn`/`torch_xla.launch` starts its replicas"),
    (Fact.XLA_LAUNCH, "it calls `torch_xla.launch`"),
    (Fact.MULTIPROCESS, "it runs one process per device"),
    (Fact.SPMD, "it is SPMD (one process per host, started on every host of a pod remotely)"),
)
# Facts that are a program's mode (what the message names when other programs differ).
MODE_FACTS = (Fact.SPMD, Fact.MULTIPROCESS)
DECLARABLE = frozenset({"spmd", "multiprocess", "unbuffered", "single"})

# The two modes exclude each other: a doc block's mode is dropped where the code sets the other.
# A word of a source file (runs_at) and a star import (which may bring any name).
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_STAR_IMPORT = re.compile(rb"\bimport\s+\*")

_OTHER_MODE: dict[str, str] = {Fact.SPMD: Fact.MULTIPROCESS, Fact.MULTIPROCESS: Fact.SPMD}

_PHRASES: dict[str, tuple[str, str]] = {
    Fact.SPMD: ("SPMD is enabled in {}", "never enables SPMD"),
    Fact.SHARDS: ("the program shards in {}", "does not shard"),
    Fact.MULTIPROCESS: (
        "the program launches one process per device in {}",
        "runs a single process",
    ),
    Fact.SPAWN: (
        "the program starts its replicas with `xmp.spawn`/`torch_xla.launch` in {}",
        "does not start replicas itself",
    ),
    Fact.TORCHRUN: ("torchrun starts the program in {}", "is not started by torchrun"),
    Fact.XLA_LAUNCH: (
        "the program calls `torch_xla.launch` in {}",
        "does not call `torch_xla.launch`",
    ),
    Fact.GLOBAL_MESH: ("a global mesh is set in {}", "sets no global mesh"),
    Fact.UNBUFFERED: ("output is unbuffered in {}", "leaves output buffered"),
    Fact.TORCHAX: ("torchax is imported in {}", "does not import torchax"),
    Fact.UNATTENDED: ("its output may be lost: {}", "prints to a terminal"),
    Fact.POSSIBLY_UNATTENDED: ("its output may be lost: {}", "prints to a terminal"),
}


def _unattended(sources: dict[str, str], notebook: str = "") -> None:
    """Add ``unattended`` and ``possibly_unattended`` to a program's ``sources`` (fact -> where it
    is set).

    ``unattended`` rests on evidence that the output is no terminal: a launch's output (set by
    the caller: it names the launcher's line), or, for the program of ``notebook`` (its path),
    replicas its own code starts (``xmp.spawn``, ``torch_xla.launch``, which spawns: no torchrun
    starts a kernel; the kernel's standard output is a pipe, and the replicas inherit it). A
    library the notebook reaches that spawns in some function proves nothing of the notebook.
    ``possibly_unattended`` is ``unattended`` where that holds, else the first fact of
    :data:`_UNATTENDED_BY` that does: an inference only. Verified with torch_xla 2.9.0 under a
    pseudo-terminal: the replicas ``xmp.spawn`` starts (torch_xla/_internal/pjrt.py
    ``run_multiprocess``, a ``ProcessPoolExecutor`` with the ``spawn`` context) inherit the parent's
    descriptors 0-2 (``multiprocessing.popen_spawn_posix`` passes them to the child), so from a
    terminal their ``sys.stdout.line_buffering`` is True and each printed line is written at once;
    torchrun's workers inherit its standard output too (unless ``--redirects``/``--tee``)."""
    spawn = sources.get(Fact.SPAWN) or sources.get(Fact.XLA_LAUNCH)  # no torchrun in a kernel
    if Fact.UNATTENDED not in sources and notebook and spawn == notebook:
        sources[Fact.UNATTENDED] = (
            "a notebook's replicas write to the kernel's output, no terminal: "
            f"`xmp.spawn`/`torch_xla.launch` starts them in {spawn}"
        )
    if Fact.POSSIBLY_UNATTENDED in sources:
        return
    if Fact.UNATTENDED in sources:
        sources[Fact.POSSIBLY_UNATTENDED] = sources[Fact.UNATTENDED]
        return
    for fact, why in _UNATTENDED_BY:
        where = sources.get(fact)
        if where is not None:
            sources[Fact.POSSIBLY_UNATTENDED] = f"{why} in {where}"
            return


def _is_torch_xla(module: str) -> bool:
    return module == "torch_xla" or module.startswith("torch_xla.")


def _is_test_name(path: str) -> bool:
    """``test_*.py`` or ``*_test.py``: a file pytest collects wherever it is."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or name == "tests.py"


def _conftests(path: str) -> list[str]:
    """The ``conftest.py`` paths pytest loads for a test file: in its folder and each above."""
    return [
        os.path.normpath(os.path.join(folder, "conftest.py"))
        for folder in _folders_up(os.path.dirname(path))
    ]


def is_test_file(path: str) -> bool:
    """True for ``test_*.py``, ``*_test.py``, ``conftest.py`` and files in a test folder
    (``tests/``, ``test/``, ``testing/``, ``test_utils/``)."""
    return _is_test_name(path.replace("\\", "/")) or _in_test_folder(path)


def _in_test_folder(path: str) -> bool:
    """``conftest.py``, or a file under a test folder (``tests/``, ``test/``, ...)."""
    norm = path.replace("\\", "/")
    return norm.rsplit("/", 1)[-1] == "conftest.py" or any(
        part in TEST_FOLDERS for part in norm.split("/")[:-1]
    )


def is_test_code(path: str, f: FileFacts | None) -> bool:
    """:func:`is_test_file`, except that a file only *named* like a test (``test_eval.py``
    outside a test folder) that defines no test (:attr:`FileFacts.defines_tests`) is not test
    code: pytest collects nothing from it, and it is usually a script run with python."""
    if not is_test_file(path):
        return False
    return _in_test_folder(path) or f is None or f.defines_tests


def own_facts(f: FileFacts) -> dict[str, bool]:
    """The facts ``f`` makes true on its own.

    ``torchax``: the file imports torchax at module level (:attr:`FileFacts.imports_torchax`);
    for a file that was not parsed (it never names torch_xla) or a document's merged facts, an
    import of ``torchax`` anywhere in it. torchax's and torch_xla's own modules (torch_xla loads
    torchax itself, after starting its runtime: ``torch_xla/_internal/jax_workarounds.py``) never set it.
    """
    torchax = f.imports_torchax or (
        "torchax" in f.imports and (not f.imports_torch_xla or f.group is not None)
    )
    if torchax and (
        _is_torch_xla(f.module) or f.module == "torchax" or f.module.startswith("torchax.")
    ):
        torchax = False
    return {
        Fact.SPMD: f.enables_spmd,
        Fact.SHARDS: f.shards,
        Fact.MULTIPROCESS: f.multiprocess,
        Fact.SPAWN: f.spawns,
        Fact.XLA_LAUNCH: f.xla_launches,
        Fact.GLOBAL_MESH: f.sets_global_mesh,
        Fact.UNBUFFERED: f.unbuffered,
        Fact.TORCHAX: torchax,
    }


@dataclass(frozen=True)
class Launch:
    """A command that runs one of the tree's files: ``XLA_USE_SPMD=1 python train.py``.

    ``where`` is the launcher's place (``scripts/run.sh:3``), ``runs`` the file or module
    as written, ``module`` whether it is ``-m MODULE``, ``folder`` the launcher's folder,
    ``facts`` what the command sets (``spmd``, ``multiprocess``, ``unbuffered``) and
    ``why`` how it sets them (``XLA_USE_SPMD=1``). ``tests``: a pytest run, whose facts go to
    the test files ``runs`` names or holds.

    What the command gives the program, as its tools read it: ``line`` (the launcher's line,
    0 for ``[project.scripts]``), ``argv`` (the words after the script or module: what its
    ``argparse`` reads), ``env`` (``(name, value, where)`` of each variable the launcher sets
    in the program's environment, ``where`` being the line that set it: an ``export`` above,
    or the command's own ``VAR=value``), ``document`` (a shell block of a Markdown/reST page,
    which counts for less than the code and the tree's scripts: see :class:`ProgramModel`),
    ``launcher`` (``python``, ``torchrun``, ``accelerate``, ``pytest``) and ``processes``
    (``"per-device"``: one process per local device, as ``accelerate launch --tpu`` starts
    them through ``xmp.spawn``; for ``torchrun`` its ``--nproc-per-node``, ``"1"`` by default).
    """

    where: str
    runs: str
    module: bool = False
    folder: str = ""
    facts: frozenset[str] = frozenset()
    why: str = ""
    tests: bool = False  # a pytest run: ``runs`` is a test file or a folder of tests
    line: int = 0
    argv: tuple[str, ...] = ()
    env: tuple[tuple[str, str, str], ...] = ()
    document: bool = False
    launcher: str = ""
    processes: str = ""
    # Where the command's standard output goes when it is not the caller's terminal ("" when it
    # is), as a phrase: ``output piped to `tee` `` (``| tee log``, ``2>&1 |``), ``output redirected
    # to a file`` (``> log``), ``run under `nohup` ``, ``run over ssh`` (a remote command has no
    # terminal unless ``ssh -t``), ``run as a job of a scheduler`` (a script with ``#SBATCH``
    # lines). It makes the program ``unattended``.
    output: str = ""

    @property
    def path(self) -> str:
        """The launcher file (``scripts/run.sh``)."""
        return self.where.rpartition(":")[0] if self.line else self.where


@dataclass
class Program:
    """One program: ``entry`` (a path), ``kind`` (``script``, ``test``, ``document``),
    ``members`` (every path it reaches, the entry included) and, for each fact that holds,
    ``sources[fact]``: the file (or launcher place, or ``configuration``) that makes it true."""

    entry: str
    kind: str
    members: frozenset[str]
    sources: dict[str, str] = field(default_factory=dict)
    # Facts a reached module sets only in functions that no other module of the program calls
    # by name (Trainer's own methods): they may hold, so they neither hold nor are absent.
    maybe: frozenset[str] = frozenset()
    # An XLA program: one of its modules imports torch_xla unconditionally.
    xla: bool = True
    # SPMD and one process per device are alternative modes chosen by an option of the entry
    # (``if config.mode == "spmd":``); both facts are in :attr:`maybe`.
    alternative: bool = False
    # For a library pseudo-program, the facts it is taken to have (:data:`LIBRARY_ASSUMES`):
    # only in a tree with no script of its own, whose launches cannot be known. In a tree with
    # scripts, a module none of them reaches runs in none of them (a dead debugging module).
    assumes: frozenset[str] = LIBRARY_ASSUMES

    def satisfies(self, fact: str, value: bool) -> bool:
        """Whether ``fact`` is ``value`` in this program (a library pseudo-program is taken
        to lack only the facts in :data:`LIBRARY_LACKS`; its other missing facts are unknown;
        a fact in :attr:`maybe` is neither true nor false)."""
        if value:
            return fact in self.sources or (self.kind == "library" and fact in self.assumes)
        if self.kind == "library":
            return fact in LIBRARY_LACKS and fact not in self.sources
        return fact not in self.sources and fact not in self.maybe


class ProgramModel:
    """Programs of a set of files and the programs each file belongs to.

    ``files`` maps a path to its facts (documents: one merged entry per page with ``group``
    set); ``launches`` are the launchers' commands; ``declared`` maps a path to the facts the
    configuration declares for it (``{"spmd"}``; ``{"single"}`` makes it an entry and adds
    nothing); ``entries`` names more paths that are entries (``[project.scripts]``, standard
    input); ``references(path)`` gives the names a file calls when its facts do not carry them
    (a file the engine did not parse; None: use the facts). Building costs O(files x imports)
    for the edges and O(entries x reach) for programs.
    """

    def __init__(
        self,
        files: Mapping[str, FileFacts],
        launches: Iterable[Launch] = (),
        declared: Mapping[str, Iterable[str]] | None = None,
        entries: Iterable[str] = (),
        references: Callable[[str], set[str] | None] | None = None,
    ) -> None:
        self.files = dict(files)
        self._read_references = references
        self._references: dict[str, set[str]] = {}
        # Importer path -> the words of its source (None: it star-imports), for runs_at.
        self._words: dict[str, frozenset[str] | None] = {}
        index = _Index(p for p in self.files if p.endswith(".py"))
        self.edges = import_edges(self.files, index)
        # Files named like tests (test_eval.py) that a script imports: modules, not test programs.
        self._imported_by_code = {
            dst
            for src, dsts in self.edges.items()
            if not is_test_file(src) and self.files[src].group is None
            for dst in dsts
            if dst != src
        }
        extra: dict[str, dict[str, str]] = {}  # entry path -> fact -> source
        documented: dict[str, dict[str, str]] = {}  # the same, from documentation blocks
        entry_paths: set[str] = {p for p in entries if p in self.files}
        self.unresolved: list[Launch] = []
        self.launches: list[Launch] = []  # every launcher command read, in the order read
        # Each launch's place -> (the launch, the file it runs): what a finding at a launcher's
        # line rests on (witness_of_launch), and the arguments a program is given (launches_of).
        self.launched: dict[str, list[tuple[Launch, str]]] = {}
        self._launches_by_target: dict[str, list[Launch]] = {}
        launches = list(launches)
        self.launches = launches
        for launch in launches:
            if launch.tests:
                tested = _tests_run_by(launch, self.files, index)
                if not tested:
                    self.unresolved.append(launch)
                for path in tested:
                    facts = extra.setdefault(path, {})
                    for fact in sorted(launch.facts):
                        facts.setdefault(
                            fact, f"{launch.where} ({launch.why})" if launch.why else launch.where
                        )
                continue
            target = resolve_launch(launch, self.files, index)
            if target is None:
                self.unresolved.append(launch)
                continue
            entry_paths.add(target)
            self.launched.setdefault(launch.where, []).append((launch, target))
            self._launches_by_target.setdefault(target, []).append(launch)
            facts = (documented if launch.document else extra).setdefault(target, {})
            for fact in sorted(launch.facts):
                facts.setdefault(
                    fact, f"{launch.where} ({launch.why})" if launch.why else launch.where
                )
            if launch.output:
                facts.setdefault(Fact.UNATTENDED, f"{launch.output} in {launch.where}")
        for path, declared_facts in (declared or {}).items():
            if path in self.files:
                entry_paths.add(path)
                for fact in declared_facts:
                    if fact != "single":
                        extra.setdefault(path, {}).setdefault(fact, "configuration (entry-points)")
        self.programs: list[Program] = []
        self._entries: dict[str, Program] | None = None
        self._containing: dict[str, list[Program]] = {}
        self._own: dict[str, Program] = {}
        self._closure = _Closure(self.edges, self.files)
        for path in sorted(self.files):
            f = self.files[path]
            if f.group is not None:
                kind = "document"
            elif self._is_test_code(path, f):
                if not (_is_test_name(path) or f.entry or path in entry_paths):
                    continue  # a helper module of the tests, or conftest.py (part of each test program)
                kind = "test"
            elif f.entry or path in entry_paths or os.path.basename(path) == "__main__.py":
                kind = "script"
            else:
                continue
            program = self._build(path, kind, extra.get(path, {}), documented.get(path, {}))
            self.programs.append(program)
            if kind == "script":
                for member in program.members:
                    if not _is_torch_xla(self.files[member].module):  # the runtime, not user code
                        self._containing.setdefault(member, []).append(program)
            else:
                self._own[path] = program

    def _build(
        self, entry: str, kind: str, extra: dict[str, str], documented: Mapping[str, str] = {}
    ) -> Program:
        """The program of ``entry``: what it reaches (memoised per strongly connected part of
        the import graph) and, for each fact, its first source: the launcher or configuration,
        the entry itself (any of its code), for a test the ``conftest.py`` files above it (pytest
        runs their fixtures), then the modules it reaches (module-level facts; a fact set only in
        a function counts when the program calls or passes that function by name)."""
        heads = [entry]
        if kind == "test":
            heads += [c for c in _conftests(entry) if c in self.files]
        members = frozenset().union(*(self._closure.reach(h) for h in heads))
        sources = dict(extra)
        for head in heads:  # the entry's (and conftests') own facts, wherever they are set
            for fact, value in own_facts(self.files[head]).items():
                if value:
                    sources.setdefault(fact, head)
        for head in heads:
            for fact, member in self._closure.sources(head).items():
                sources.setdefault(fact, member)
        if documented and not any(
            not launch.document for launch in self._launches_by_target.get(entry, ())
        ):
            # A documentation block counts for the file it names only, below the code and the
            # tree's scripts (a script that runs the file decides it alone), and never against
            # the code: a doc's mode is dropped where the program itself sets the other one.
            for fact, where in documented.items():
                other = _OTHER_MODE.get(fact)
                if other is not None and other in sources and other not in extra:
                    continue
                sources.setdefault(fact, where)
        pending = sorted(
            p
            for head in heads
            for p in self._closure.pending(head)
            if p[0] not in sources and p[1] not in heads
        )
        maybe = set()
        for fact, member, functions in pending:
            if fact in sources:
                continue
            # Called from another module of the program (a method calling its sibling proves
            # nothing: the library may never be asked to); not behind an `if` in that function
            # (`?name`: an option the program may not set).
            if any(not functions.isdisjoint(self._called(m)) for m in members if m != member):
                sources[fact] = member
            else:
                maybe.add(fact)
        if Fact.XLA_LAUNCH in sources and Fact.SPAWN not in sources:
            # torch_xla.launch spawns only when torchrun did not start the process: the program
            # starts its replicas itself when the tree's own scripts run it with plain python.
            plain = [
                launch
                for launch in self._launches_by_target.get(entry, ())
                if launch.launcher == "python"
                and not launch.document
                and "torchrun" not in launch.facts
            ]
            if plain and Fact.TORCHRUN not in sources:
                sources[Fact.SPAWN] = plain[0].where
        if kind == "test":
            sources["test"] = entry
        alternative = (
            kind == "script"
            and all(fact in sources for fact in MODE_FACTS)
            and self._alternative_modes(entry, members, extra)
        )
        if (
            alternative
        ):  # SPMD or one process per device, by an option of the entry: either may hold
            for fact in MODE_FACTS:
                del sources[fact]
                maybe.add(fact)
        _unattended(
            sources, notebook=entry if kind == "document" and entry.endswith(".ipynb") else ""
        )
        xla = any(self.files[m].requires_torch_xla for m in members)
        return Program(
            entry, kind, members, sources, frozenset(maybe - set(sources)), xla, alternative
        )

    def _alternative_modes(
        self, entry: str, members: frozenset[str], extra: dict[str, str]
    ) -> bool:
        """True when ``entry`` turns on SPMD and launches one process per device only under
        exclusive conditions (``if config.mode == "spmd": xr.use_spmd()`` and ``elif config.mode ==
        "multi": xmp.spawn(...)``): every way each mode fact holds is a site of the entry, or the
        entry's call of a function of a reached module that sets it, under ``if SUBJECT ==
        LITERAL`` tests, and every site of one mode tests a subject the other's site tests
        against another literal. A launcher, a declaration, a module-level site of a reached
        module or a function some other module calls keeps both facts."""
        found = [self._mode_conditions(entry, members, fact, extra) for fact in MODE_FACTS]
        spmd, multi = found
        if not spmd or not multi:
            return False
        return all(
            any(
                subject == other and literal != value
                for subject, literal in a
                for other, value in b
            )
            for a in spmd
            for b in multi
        )

    def _mode_conditions(
        self, entry: str, members: frozenset[str], fact: str, extra: dict[str, str]
    ) -> list[Condition] | None:
        """The conditions of every site through which the entry makes ``fact`` hold (see
        :meth:`_alternative_modes`), or None when it may hold without one."""
        f = self.files[entry]
        if fact in extra:
            return None
        sites: list[Condition] = []
        if own_facts(f)[fact]:
            sites += f.fact_conditions.get(fact, [()])
        for member in sorted(members - {entry}):
            g = self.files[member]
            if not own_facts(g)[fact]:
                continue
            functions = g.fact_functions.get(fact)
            if not functions or "" in functions:
                return None  # set at module level (or a file that was not parsed)
            for name in sorted(functions):
                if name.startswith("?"):
                    continue  # guarded inside the function: it may hold only (Program.maybe)
                if any(name in self._called(m) for m in members if m not in (entry, member)):
                    return None
                if name in self._called(entry):
                    sites += f.call_conditions.get(name, [()])
        return None if any(not site for site in sites) else sites

    def __getstate__(self) -> dict:
        """What a stored model keeps (:func:`~xla_lint.pipeline.cache.store_model`): all but what
        only building it uses, the import closure and the names each file calls (read again
        from disk on demand, as ``references`` gives them): 60% of the pickle of the synthetic
        2,401-file tree, which a warm run reads back."""
        state = dict(self.__dict__)
        state["_references"] = {}
        state.pop("_closure", None)
        return state

    def _called(self, path: str) -> set[str]:
        found = self._references.get(path)
        if found is None:
            found = self._read_references(path) if self._read_references is not None else None
            if found is None:
                found = self.files[path].references
            self._references[path] = found
        return found

    @functools.cached_property
    def loader_flows(self) -> LoaderFlows:
        """Every file's device-loader flow joined (:class:`~xla_lint.program.flow.LoaderFlows`),
        with the names each file calls; built on first use."""
        return LoaderFlows(self.files, {path: self._called(path) for path in self.files})

    def may_be_loader(self, path: str, keys: tuple[str, ...]) -> bool:
        """True when a value a finding at ``path`` assumes is no device loader (its flow ``keys``:
        :attr:`~xla_lint.diagnostics.Diagnostic.unless`) may be one: some caller passes one to that
        parameter, the function returns one, or the value is unknown (a function no linted file
        calls) in a program that makes a device loader (the programs ``path`` runs in; for library
        code, any linted file)."""
        programs = self.programs_of(path)
        if programs:
            makes = any(self.files[m].makes_device_loader for p in programs for m in p.members)
        else:
            makes = any(f.makes_device_loader for f in self.files.values())
        return self.loader_flows.may_be_loader(keys, makes)

    def _is_test_code(self, path: str, f: FileFacts | None) -> bool:
        """:func:`is_test_code`, except for a file only *named* like a test (outside a test
        folder) that a non-test module of the tree imports: the script calls its functions
        (``from process.test_1_1 import test``), so it is a module of that program, not a
        test program of its own whose lack of ``use_spmd()`` is reported."""
        if not is_test_code(path, f):
            return False
        return _in_test_folder(path) or path not in self._imported_by_code

    # -- questions -------------------------------------------------------
    def programs_of(self, path: str) -> list[Program]:
        """The programs ``path`` runs in: script programs reaching it, and its own test or
        document program. Empty for library code (see :meth:`holds`)."""
        out = list(self._containing.get(path, ()))
        own = self._own.get(path)
        if own is not None:
            out.append(own)
        return out

    def launches_of(self, path: str) -> list[Launch]:
        """The launches that give ``path``'s programs their arguments: those that run the entry
        of a script program ``path`` belongs to (or ``path`` itself). The tree's scripts outrank
        documentation blocks: a doc's launch counts only for an entry no script runs."""
        entries = {p.entry for p in self.programs_of(path) if p.kind == "script"} | {path}
        out: list[Launch] = []
        for entry in sorted(entries):
            found = self._launches_by_target.get(entry, [])
            scripts = [launch for launch in found if not launch.document]
            out.extend(scripts or found)
        return out

    def witness_of_launch(
        self, where: str, requires: tuple[tuple[str, bool], ...]
    ) -> Program | None:
        """The program run by the launch at ``where`` (``run.sh:3``) that satisfies every
        ``(fact, value)`` of ``requires``, or None (a launch of no linted file has no program)."""
        for _, target in self.launched.get(where, ()):
            program = self._by_entry().get(target)
            if program is not None and all(
                program.satisfies(fact, value) for fact, value in requires
            ):
                return program
        return None

    def _by_entry(self) -> dict[str, Program]:
        """Entry path -> its program (made on first use)."""
        if self._entries is None:
            self._entries = {p.entry: p for p in self.programs}
        return self._entries

    def launch_note(
        self, where: str, requires: tuple[tuple[str, bool], ...], witness: Program | None = None
    ) -> str:
        """What a finding at the launch ``where`` says of the program it rests on:
        `` (train.py: SPMD is enabled in train.py)``, or ``""``. ``witness``: that program, when
        the caller has it already (:meth:`witness_of_launch`)."""
        program = witness if witness is not None else self.witness_of_launch(where, requires)
        if program is None:
            return ""
        notes = []
        for fact, value in requires:
            phrases = _PHRASES.get(fact)
            if phrases is not None and value:
                notes.append(phrases[0].format(program.sources[fact]))
        text = "; ".join(notes)
        return f" (the program {program.entry}{': ' + text if text else ''})"

    @functools.cached_property
    def _name_counts(self) -> dict[str, int]:
        """Word -> its occurrences in the tree's files (:meth:`count_names`), made on first use."""
        return {}

    def count_names(self, names: Iterable[str]) -> None:
        """Count, for :meth:`never_named`, how often each of ``names`` occurs as a word in the
        tree's files (every file of the model, read again from disk, and the ``pyproject.toml``
        and ``setup.cfg`` of the current folder, which name entry points): one scan for all the
        names not counted yet, only when some finding asks."""
        todo = sorted({n for n in names if n.isidentifier()} - self._name_counts.keys())
        if not todo:
            return
        pattern = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in todo) + rb")\b")
        counts = dict.fromkeys(todo, 0)
        for path in [*sorted(self.files), "pyproject.toml", "setup.cfg"]:
            try:
                data = read_source(path)
            except (OSError, SourceError):
                continue
            for found in pattern.findall(data):
                counts[found.decode()] += 1
        self._name_counts.update(counts)

    def never_named(self, path: str, functions: Iterable[str]) -> bool:
        """True when ``path`` is a module some script program of the tree reaches and one of
        ``functions`` (plain functions its finding is in) occurs as a word nowhere in the tree but
        once, in its own ``def`` (:meth:`count_names`): nothing calls it, passes it, exports it
        in ``__all__`` or names it in a string, so no program of the tree runs it (a debugging
        helper nobody uses). A module no script reaches keeps its functions: its users are not
        in the tree."""
        if not self._containing.get(path):
            return False
        functions = list(functions)
        self.count_names(functions)
        return any(self._name_counts.get(name, 2) <= 1 for name in functions)

    def _candidates(self, path: str) -> list[Program]:
        programs = self.programs_of(path)
        if programs:
            return programs
        f = self.files.get(path)
        sources = {k: path for k, v in own_facts(f).items() if v} if f is not None else {}
        if self._is_test_code(path, f):  # a helper of the tests (tests/helpers.py): no program
            sources["test"] = path
        _unattended(sources)
        assumes = frozenset() if self._has_scripts else LIBRARY_ASSUMES
        return [Program(path, "library", frozenset({path}), sources, assumes=assumes)]

    @functools.cached_property
    def _has_scripts(self) -> bool:
        """Whether the tree has a script program (not only tests and documents)."""
        return any(p.kind == "script" for p in self.programs)

    def holds(self, path: str, requires: tuple[tuple[str, bool], ...]) -> bool:
        """True when one program ``path`` belongs to satisfies every ``(fact, value)``."""
        return self.witness(path, requires) is not None

    def runs_at(self, program: Program, path: str, reach: tuple[str, ...]) -> bool:
        """Whether ``program`` runs a line of ``path`` that needs one of the top-level definitions
        ``reach`` (:class:`xla_lint.analysis.reach.ImportReach`; ``()``: the line runs whenever the
        file is imported; :data:`~xla_lint.analysis.reach.ENTRY_ONLY`: only as the entry).

        True for the program's own entry, a test, document or library program, and when some
        module of the program that imports ``path`` names one of ``reach`` as a word of its
        source, or star-imports it (or none is found: ``path`` is reached some way the import
        edges do not show). Reads each such importer's source once (memoised)."""
        if not reach or program.entry == path or program.kind != "script":
            return True
        importers = [m for m in program.members if m != path and path in self.edges.get(m, ())]
        if not importers:
            return True
        return any(self._names_one_of(m, reach) for m in importers)

    def _names_one_of(self, path: str, names: tuple[str, ...]) -> bool:
        words = self._words.get(path)
        if words is None:
            try:
                data = read_source(path)
            except (OSError, SourceError):
                data = b""
            words = self._words[path] = (
                frozenset(w.decode() for w in _WORD.findall(data))
                if _STAR_IMPORT.search(data) is None
                else None  # a star import may bring any of them
            )
            if words is None:
                return True
        return not words.isdisjoint(names)

    def witness(
        self, path: str, requires: tuple[tuple[str, bool], ...], reach: tuple[str, ...] = ()
    ) -> Program | None:
        """The program that makes ``requires`` hold for ``path``, or None. ``reach``: the
        definitions the finding's line needs (:meth:`runs_at`): when some program of ``path`` runs
        the line, a program that does not is neither a witness nor, for an absence, a program
        that must lack the fact (when none is seen to run it, a YAML ``_target_`` or a user
        outside the tree may: every program importing the file counts, as without ``reach``).

        With a fact required true (``("spmd", True)``): the first program (by entry) that
        satisfies every requirement. With only absences required and one of them a mode or
        mesh fact (``("spmd", False)``: the finding says the program lacks something it needs,
        XLA002, XLA009), the finding must not rest on a program that merely imports the module:
        it holds when every XLA program (:attr:`Program.xla`) ``path`` belongs to satisfies them,
        or when ``path`` is itself the entry of one that does; a fact that may hold
        (:attr:`Program.maybe`) is not absent. The absence of ``unbuffered`` or ``test`` (XLA004)
        needs one program, as a positive fact does: a print is lost in any buffered program.
        """
        candidates = self._candidates(path)
        if reach:  # only the programs that run the line, when some program is seen to run it
            candidates = [p for p in candidates if self.runs_at(p, path, reach)] or candidates
        satisfied = [
            p for p in candidates if all(p.satisfies(fact, value) for fact, value in requires)
        ]
        if not satisfied:
            return None
        if any(value for _, value in requires) or all(
            fact in LIBRARY_LACKS for fact, _ in requires
        ):
            return satisfied[0]
        # A mode or mesh said to be absent: only XLA programs count (a GPU example importing
        # one helper of a library is no witness), and all of them must lack it, or the module
        # must be the entry of one that does.
        xla = [p for p in candidates if p.xla]
        satisfied = [p for p in satisfied if p.xla]
        if satisfied and len(satisfied) == len(xla):
            return satisfied[0]
        return next((p for p in satisfied if p.entry == path), None)

    def note(
        self, path: str, requires: tuple[tuple[str, bool], ...], witness: Program | None = None
    ) -> str:
        """What a finding at ``path`` that needs ``requires`` says of the program it rests on:
        `` (SPMD is enabled in train.py; main.py runs this module in another mode)``, or ``""``.
        ``witness``: that program, when the caller has it already (:meth:`witness`)."""
        program = witness if witness is not None else self.witness(path, requires)
        if program is None or not requires:
            return ""
        notes = []
        for fact, value in requires:
            phrases = _PHRASES.get(fact)
            if phrases is None:
                continue
            if value:
                src = program.sources.get(fact)
                if src is None or src == path:
                    continue  # None: a fact a library is taken to have (LIBRARY_ASSUMES)
                text = phrases[0].format(src)
                if program.entry not in (path, src):
                    text += f" for the program {program.entry}"
                if text not in notes:  # unattended and possibly_unattended from one launch
                    notes.append(text)
            elif program.entry != path and program.kind != "library" and fact in MODE_FACTS:
                notes.append(f"in the program {program.entry}, which {phrases[1]}")
        if any(value and fact in MODE_FACTS for fact, value in requires):
            others = sorted(
                {
                    p.entry
                    for p in self.programs_of(path)
                    if not all(p.satisfies(f, v) for f, v in requires)
                }
            )
            if others:
                shown = ", ".join(others[:2]) + (
                    f" and {len(others) - 2} more" if len(others) > 2 else ""
                )
                notes.append(
                    f"{shown} {'runs' if len(others) == 1 else 'run'} this module in another mode"
                )
        return f" ({'; '.join(notes)})" if notes else ""

    def to_json(self) -> dict:
        """The programs as JSON data (``--show-programs --output-format json``): each program's
        entry, kind, the facts that hold with their sources, and the modules it reaches; and the
        launcher commands whose file is not among the linted files."""
        return {
            "programs": [
                {
                    "entry": p.entry,
                    "kind": p.kind,
                    "facts": dict(sorted(p.sources.items())),
                    "reaches": sorted(p.members - {p.entry}),
                }
                for p in sorted(self.programs, key=lambda p: (p.kind != "script", p.entry))
            ],
            "unresolved_launches": [
                {"where": u.where, "runs": u.runs} for u in self.unresolved if not u.module
            ],
        }

    def describe(self) -> list[str]:
        """One line per program for ``xla-lint --show-programs``: its entry, kind, mode and
        where each fact comes from, then the launches whose file is not among the linted ones::

            train.py: script, SPMD (scripts/run.sh:3 (XLA_USE_SPMD=1)), 4 modules
        """
        lines = []
        for p in sorted(self.programs, key=lambda p: (p.kind != "script", p.entry)):
            modes = []
            for fact, label in (("spmd", "SPMD"), ("multiprocess", "one process per device")):
                if fact in p.sources:
                    modes.append(f"{label} ({p.sources[fact]})")
            if p.alternative:
                modes.append(f"SPMD or one process per device by an option of {p.entry}")
            if not modes:
                modes.append("single process")
            for fact, label in (
                ("unbuffered", "unbuffered"),
                ("shards", "shards"),
                ("global_mesh", "global mesh"),
                ("torchax", "torchax"),
            ):
                if fact in p.sources:
                    modes.append(f"{label} ({p.sources[fact]})")
            count = len(p.members) - 1
            lines.append(
                f"{p.entry}: {p.kind}, {', '.join(modes)}, reaches {count} module{'s' * (count != 1)}"
            )
        for launch in self.unresolved:
            if launch.module:  # python -m pytest, pip, a module installed from elsewhere
                continue
            lines.append(f"{launch.where}: runs {launch.runs}, which is not among the linted files")
        return lines


class _Closure:
    """What each module reaches through imports, memoised per strongly connected part of the
    import graph (Tarjan's algorithm, iterative: a chain of 10,000 imports is no recursion),
    with the first source of each module-level fact there and the facts set only inside
    functions (``(fact, module, function names)``), which need the program's calls to count."""

    def __init__(self, edges: Mapping[str, set[str]], files: Mapping[str, FileFacts]) -> None:
        self.files = files
        self.component: dict[str, int] = {}
        self._reach: list[frozenset[str]] = []
        self._sources: list[dict[str, str]] = []
        self._pending: list[frozenset[tuple[str, str, frozenset[str]]]] = []
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        on_stack: set[str] = set()
        stack: list[str] = []
        counter = 0
        for root in sorted(edges):
            if root in index:
                continue
            work = [(root, iter(sorted(edges.get(root, ()))))]
            index[root] = low[root] = counter
            counter += 1
            stack.append(root)
            on_stack.add(root)
            while work:
                node, children = work[-1]
                advanced = False
                for child in children:
                    if child not in index:
                        index[child] = low[child] = counter
                        counter += 1
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, iter(sorted(edges.get(child, ())))))
                        advanced = True
                        break
                    if child in on_stack:
                        low[node] = min(low[node], index[child])
                if advanced:
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    self._close(sorted(members), edges)

    def _close(self, members: list[str], edges: Mapping[str, set[str]]) -> None:
        """Record one strongly connected part; every part it imports is recorded already."""
        number = len(self._reach)
        for m in members:
            self.component[m] = number
        successors = sorted(
            {self.component[t] for m in members for t in edges.get(m, ())} - {number}
        )
        reach = frozenset(members).union(*(self._reach[c] for c in successors))
        sources: dict[str, str] = {}
        pending: set[tuple[str, str, frozenset[str]]] = set()
        for m in members:
            f = self.files.get(m)
            if f is None:
                continue
            for fact, value in own_facts(f).items():
                if not value:
                    continue
                where = f.fact_functions.get(fact)
                if where and "" not in where:
                    pending.add((fact, m, frozenset(where)))
                else:
                    sources.setdefault(fact, m)
        for c in successors:
            for fact, m in self._sources[c].items():
                sources.setdefault(fact, m)
            pending |= self._pending[c]
        self._reach.append(reach)
        self._sources.append(sources)
        self._pending.append(frozenset(pending))

    def reach(self, path: str) -> frozenset[str]:
        """``path`` and every module it reaches."""
        return self._reach[self.component[path]] if path in self.component else frozenset({path})

    def sources(self, path: str) -> dict[str, str]:
        """Module-level fact -> the first module setting it, over :meth:`reach`."""
        return self._sources[self.component[path]] if path in self.component else {}

    def pending(self, path: str) -> frozenset[tuple[str, str, frozenset[str]]]:
        """Facts set only inside functions, over :meth:`reach`."""
        return self._pending[self.component[path]] if path in self.component else frozenset()


# ---- resolving imports and launches to files --------------------------------------------


@functools.lru_cache(maxsize=4096)
def _folders_up(folder: str) -> tuple[str, ...]:
    """``a/b`` -> ``["a/b", "a", ""]``: where an import may be found from a file in ``folder``."""
    out = []
    while True:
        out.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            return tuple(out)
        folder = parent


class _Index:
    """Known paths keyed by where an import finds them: ``(folder, "pkg.mod")`` for
    ``folder/pkg/mod.py`` (or ``folder/pkg/mod/__init__.py``, which wins as in Python), and the
    same under ``folder/src/``; ``tops``: the top-level names each folder (or its ``src/``)
    gives Python's path search, a module, a package or a namespace folder (one without
    ``__init__.py``); and a fallback for imports whose top-level name no folder above the
    importer explains (a ``sys.path`` edit): the one file whose path ends with the module's parts,
    unless that name is the standard library's or the folder it needs on ``sys.path`` is a package
    inside a package (:meth:`guess`)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = set(paths)
        self.parts: set[str] = set()
        self.direct: dict[tuple[str, str], str] = {}
        self.src: dict[tuple[str, str], str] = {}
        self.tops: set[tuple[str, str]] = (
            set()
        )  # (folder, "llama"): folder/llama(.py|/) or folder/src/llama
        self._by_tail: dict[str, list[str]] | None = None
        for p in sorted(self.paths, key=lambda p: not p.endswith("__init__.py")):  # packages first
            folder, file = os.path.split(p)
            name = None if file == "__init__.py" else file[:-3]
            while True:
                parent, base = os.path.split(folder)
                if name is not None:
                    top = name.split(".", 1)[0]
                    self.parts.add(top)
                    self.direct.setdefault((folder, name), p)
                    self.tops.add((folder, top))
                    if base == "src":
                        self.src.setdefault((parent, name), p)
                        self.tops.add((parent, top))
                if parent == folder or not base:
                    break
                name = base if name is None else f"{base}.{name}"
                folder = parent

    def by_tail(self, tail: str) -> list[str]:
        if self._by_tail is None:
            self._by_tail = {}
            for p in self.paths:
                parts = p.replace("\\", "/")[:-3].split("/")
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                for i in range(len(parts)):
                    self._by_tail.setdefault("/".join(parts[i:]), []).append(p)
        return self._by_tail.get(tail, [])

    def find(self, name: str, start: str) -> str | None:
        """The file ``import name`` loads for a file in folder ``start``, or None.

        Python's search first: ``start`` and each folder above it (and its ``src/``), nearest
        first; ``pkg.mod`` is ``pkg/mod.py`` in the nearest of them that holds it, so the
        portions of a namespace package join. The unique path tail is guessed only when no such
        folder has the top-level name at all: a namespace folder ``llama/`` beside ``run.py``
        makes ``from llama import model`` ``llama/model.py`` and ``llama`` itself no file (a
        namespace package has none), never another tree's ``llama/__init__.py``.
        """
        top = name.split(".", 1)[0]
        if top not in self.parts:
            return None  # torch, numpy, os: not in the tree
        explained = False  # Python's search finds `top` (a module, package or namespace folder)
        for folder in _folders_up(start):
            found = self.direct.get((folder, name)) or self.src.get((folder, name))
            if found is not None:
                return found
            explained = explained or (folder, top) in self.tops
        if explained:
            return None  # an attribute of that module, a namespace package, or not in the tree
        return self.guess(name)

    def guess(self, name: str) -> str | None:
        """The one file whose path ends with ``name``'s parts, for an import that only a
        ``sys.path`` edit explains (``sys.path.append("../examples")``, ``PYTHONPATH=benchmarks``);
        None when several do, when ``name`` is the standard library's (``import logging`` is not
        ``utils/logging.py``), or when the folder that would have to be on ``sys.path`` is a
        package inside a package: ``import deepspeed`` is the installed package, not
        ``accelerate/utils/deepspeed.py``, and nobody puts ``accelerate/utils/`` on the path."""
        found = self.by_tail(name.replace(".", "/"))
        if len(found) != 1 or name.split(".", 1)[0] in sys.stdlib_module_names:
            return None
        folder = found[0]
        for _ in range(name.count(".") + 1 + (os.path.basename(folder) == "__init__.py")):
            folder = os.path.dirname(folder)
        if (
            folder
            and {
                os.path.join(folder, "__init__.py"),
                os.path.join(os.path.dirname(folder), "__init__.py"),
            }
            <= self.paths
        ):
            return None
        return found[0]


def import_edges(
    files: Mapping[str, FileFacts], index: _Index | None = None
) -> dict[str, set[str]]:
    """``path -> paths it imports``: each imported name is looked up as Python's import
    system would find it with the importing file's folder, or a folder above it (or its
    ``src/``), on ``sys.path``; nearest first. Names no folder explains resolve to the one
    file whose path ends with them, if there is exactly one. Documents' blocks import too."""
    if index is None:
        index = _Index(p for p in files if p.endswith(".py"))
    edges: dict[str, set[str]] = {}
    for path, f in files.items():
        out: set[str] = set()
        start = os.path.dirname(path)
        for name in f.imports:
            target = index.find(name, start)
            if target is not None and target != path:
                out.add(target)
        edges[path] = out
    return edges


def _tests_run_by(launch: Launch, files: Mapping[str, FileFacts], index: _Index) -> list[str]:
    """The test files a pytest launch runs: the file it names, or the test files under the
    folder it names (relative to the launcher's folder, else the current one)."""
    if launch.module:
        found = index.find(launch.runs, launch.folder)
        if found is None:
            return []
        if os.path.basename(found) != "__init__.py":
            return [found]
        written = os.path.dirname(found)
    else:
        written = launch.runs.replace("\\", "/")
    for base in (launch.folder, ""):
        target = os.path.normpath(os.path.join(base, written))
        if target in files:
            return [target]
        prefix = "" if target == "." else target.rstrip("/") + "/"
        under = [
            p for p in files if p.startswith(prefix) and _is_test_name(p) and files[p].group is None
        ]
        if under:
            return sorted(under)
    return []


def resolve_launch(
    launch: Launch, files: Mapping[str, FileFacts], index: _Index | None = None
) -> str | None:
    """The path of the file ``launch`` runs: relative to the launcher's folder, to the
    current folder, or the one known file whose path ends with what the command names."""
    if launch.module:
        if index is None:
            index = _Index(p for p in files if p.endswith(".py"))
        found = index.find(launch.runs, launch.folder)
        if found is not None and os.path.basename(found) == "__init__.py":
            main = os.path.join(
                os.path.dirname(found), "__main__.py"
            )  # python -m pkg runs pkg/__main__.py
            return main if main in files else found
        return found
    written = launch.runs.replace("\\", "/")
    for base in (launch.folder, ""):
        candidate = os.path.normpath(os.path.join(base, written))
        if candidate in files:
            return candidate
    parts = [
        p for p in written.split("/") if p not in ("", ".", "..") and "$" not in p and "{" not in p
    ]
    if len(parts) < 2:  # a bare `train.py` not beside the launcher: any train.py is a guess
        return None
    tail = "/".join(parts)
    matches = [
        p
        for p in files
        if p.replace("\\", "/") == tail or p.replace("\\", "/").endswith("/" + tail)
    ]
    return matches[0] if len(matches) == 1 else None
