"""Runs the stages for a set of files and returns diagnostics.

::

    discover ─► read + decode ─► prefilter ─► parse (LibCST) ─► one traversal: facts + rules
             ─► program facts (all files) ─► keep findings whose facts hold ─► suppressions ─► sort

A file's own work (:func:`lint_file`) depends on nothing but the file and the settings,
so it runs in parallel worker processes and can be cached; only the cheap program-facts
join and the filtering run after every file is done. Parsing and the traversal live in
:mod:`xla_lint.linter`, the only part that needs LibCST, imported when a file needs a parse.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .. import timings
from ..catalogue import BY_CODE
from ..config import Settings
from ..diagnostics import Diagnostic, Edit, Fix, Severity
from ..program.facts import FileFacts
from ..program.launchers import option_value
from ..program.model import Launch, ProgramModel
from ..program.modules import called_names, import_facts, module_of
from ..results import FileResult, syntax_error
from ..sources.prefilter import needs_parse
from ..sources.target import DOC_SUFFIXES, Target
from ..sources.text import (
    SourceError,
    decode,
    decode_with_encoding,
    read_source,
    read_source_stat,
)
from .fixes import with_fix_policy

if TYPE_CHECKING:
    from .cache import ResultCache, RunIndex


def lint_file(target: Target, settings: Settings, text: str | None = None) -> FileResult:
    """Read, decode and lint one file (``text`` given: lint that instead of the file's bytes).

    Never raises for bad input: unreadable or undecodable files give an XLA000 diagnostic.
    A Python file whose bytes name neither torch_xla nor an ``XLA_`` variable is not
    parsed (see :data:`PREFILTER`): it yields only the imports that tie it into programs.
    """
    if text is not None:
        from ..linter import lint_decoded  # LibCST, imported only when something is parsed

        return lint_decoded(target, settings, text)
    try:
        data = read_source(target.path)
    except OSError as exc:
        result = FileResult(target.path)
        result.diagnostics.append(
            syntax_error(target.path, f"cannot read file: {exc.strerror or exc}", 1, 1)
        )
        return result
    return lint_bytes(target, settings, data)


TOO_LARGE = "too large"  # the start of the skipped_reason of a file above max-file-size


def too_large(settings: Settings, data: bytes) -> str | None:
    """The skipped reason for a file of ``data`` bytes above ``max-file-size`` (0: no limit), else None."""
    return too_large_size(settings, len(data))


def too_large_size(settings: Settings, size: int) -> str | None:
    """:func:`too_large` for a file of ``size`` bytes."""
    limit = settings.max_file_size
    if not limit or size <= limit:
        return None
    return f"{TOO_LARGE}: {format_size(size)}, above max-file-size {format_size(limit)}"


def format_size(size: int) -> str:
    """``size`` bytes for a person: ``640 bytes``, ``812 KB``, ``5.1 MB`` (units of 1,000)."""
    if size < 10_000:
        return f"{size} bytes"
    return f"{size / 1e6:.1f} MB" if size >= 1_000_000 else f"{round(size / 1e3)} KB"


def lint_bytes(
    target: Target, settings: Settings, data: bytes, wanted: bool | None = None
) -> FileResult:
    """Lint a file given its bytes; see :func:`lint_file`. A file that would need parsing but
    is above ``max-file-size`` is skipped (its imports still read, as for a file without
    torch_xla): LibCST takes ~30 s and ~1 GB per MB of source. ``wanted``: what
    :func:`~xla_lint.sources.prefilter.needs_parse` said of ``data`` (None: ask it here)."""
    settings = settings.for_path(target.path)  # the file's nearest configuration
    if wanted is None:
        with timings.timed("prefilter"):
            wanted = needs_parse(data)
    large = too_large(settings, data) if wanted else None
    if large or not wanted:
        result = FileResult(target.path, skipped_reason=large or "no torch_xla")
        if target.kind == "python":
            with timings.timed("import scan"):
                facts = import_facts(target.path, data)
            if facts is not None:
                result.facts.append(facts)
        return result
    try:
        text, encoding = decode_with_encoding(data)
    except SourceError as exc:
        result = FileResult(target.path)
        result.diagnostics.append(syntax_error(target.path, exc.message, exc.line, exc.column))
        return result
    from ..linter import lint_decoded  # LibCST, imported only when something is parsed

    # In UTF-8 the words the prefilter found in the bytes are in the text: not searched again.
    return lint_decoded(target, settings, text, prefiltered=encoding.startswith("utf-8"))


@dataclass
class RunResult:
    """A finished run: ``diagnostics`` kept after facts and suppressions, sorted by path and position."""

    diagnostics: list[Diagnostic]
    files: list[FileResult]
    program: ProgramModel
    suppressed: int = 0
    # The settings the run used: the run's own, with the folders' nested configurations
    # (:meth:`~xla_lint.config.Settings.nest`); what a later ``--fix`` round lints with.
    settings: Settings | None = None


# Parallel linting pays only when there is real parsing to share out: starting a worker
# costs ~20 ms (fork) and LibCST parses ~30-100 KB of source per second per core.
PARALLEL_MIN_BYTES = 48 * 1024


PARALLEL_MIN_FILES = 4


# A file this large goes to a worker process even alone: the parse takes seconds, others can
# share the cores, and Ctrl-C stops the run at once (LibCST's native parser holds the GIL, so
# a parse in this process delays the interrupt until it returns: ~20 s for 5 MB).
LARGE_FILE_BYTES = 256 * 1024


_worker_state: dict = {}


PARENT_CHECK_SECONDS = 0.5  # how often a worker looks for its parent


def _exit_with_parent(parent: int, interval: float = PARENT_CHECK_SECONDS) -> None:
    """End this worker process once ``parent`` (a process id) is gone, checked every ``interval`` seconds.

    A pool worker waits on a queue whose write end it holds itself, so it would never see
    the parent die (``kill -9`` of ``xla-lint``, a CI runner killing the job) and would wait
    forever. A daemon thread notices that the worker was re-parented and exits it.
    """
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, name="xla-lint-parent-watch", daemon=True).start()


def _worker_init(settings: Settings, cache_dir: str | None, parent: int | None = None) -> None:
    import signal

    # Ctrl-C reaches the whole process group: the parent stops the run (exit 130) and the
    # pool; a worker interrupted mid-import or mid-file would only print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent is not None:
        _exit_with_parent(parent)
    from .. import linter  # noqa: F401  LibCST and the rules: inherited from the parent on fork

    timings.take()  # the parent's totals so far, inherited by the fork: counted there

    _worker_state["settings"] = settings
    _worker_state["cache"] = None
    if cache_dir is not None:
        from .cache import ResultCache

        _worker_state["cache"] = ResultCache(cache_dir, settings.fingerprint())


def _worker_lint(
    job: tuple[int, Target, bytes, str | None],
) -> tuple[int, FileResult, dict[str, tuple[float, int]] | None]:
    """Lint one job; ``(index, result, the stage timings it took or None when they are off)``."""
    index, target, data, key = job
    result = lint_bytes(target, _worker_state["settings"], data, True)
    cache = _worker_state["cache"]
    if cache is not None and key is not None:
        with timings.timed("cache"):
            cache.store(target.path, key, result)
    return index, result, timings.take() if timings.ENABLED else None


def lint_targets(
    targets: list[Target],
    settings: Settings,
    jobs: int = 1,
    cache_dir: str | None = None,
    keys: dict[str, str] | None = None,
) -> list[FileResult]:
    """Lint every target; results in the order of ``targets``.

    Each file is read once and the prefilter asked once. With a result cache in ``cache_dir``
    (None: no cache, see :mod:`xla_lint.pipeline.cache`) and at least
    :data:`MODEL_CACHE_MIN_FILES` targets, a file whose status the run index recorded is not
    read (:func:`_unchanged`), and results come from the index (the import facts of the files
    the prefilter rules out, the results of the others), else from the files' entries; a run
    of fewer files uses the entries alone. ``keys`` (when given) gets each cached file's key
    (path -> key), what :func:`run` keys the program model with. The rest are linted, in up to ``jobs``
    worker processes once there is enough source to parse (at least
    :data:`PARALLEL_MIN_FILES` files and :data:`PARALLEL_MIN_BYTES` bytes, or one file of
    :data:`LARGE_FILE_BYTES`), else in this process. The workers start (and import the
    linter) while the tree is read; once it is, they get the files largest first, so no large
    file is left to one worker at the end while the other idles (on pytorch/xla the largest
    file costs a worker 1.3 s), and this process scans the imports of the files that are not
    parsed while they lint.
    """
    cache = None
    index = None
    started_ns = time.time_ns()
    if cache_dir is not None:
        from .cache import ResultCache, RunIndex, content_hash

        cache = ResultCache(cache_dir, settings.fingerprint())
        if len(targets) >= MODEL_CACHE_MIN_FILES:
            # Not for a run of a few files (pre-commit's, after an edit): reading and rewriting
            # the tree's index cost it 50 ms for one file; its files' entries answer it.
            with timings.timed("cache"):
                index = RunIndex(cache)
    results: list[FileResult | None] = [None] * len(targets)
    queued: list[tuple[int, Target, bytes, str | None]] = []
    queued_bytes = 0
    pool: _Pool | None = None
    scans: list[tuple[int, Target, bytes, bool, str | None]] = []  # not parsed: imports only
    try:
        for number, target in enumerate(targets):
            if target.error is not None:  # found by discovery: a folder it could not search
                results[number] = FileResult(
                    target.path, [syntax_error(target.path, target.error, 1, 1)]
                )
                continue
            if index is not None and cache is not None:
                # The file's status as the index recorded it: its stored result, unread.
                hit, key = _unchanged(target, settings, cache, index)
                if hit is not None and key is not None:
                    if keys is not None:
                        keys[target.path] = key
                    results[number] = hit
                    continue
            try:
                with timings.timed("read"):
                    data, info = read_source_stat(target.path)
            except OSError as exc:
                result = FileResult(target.path)
                result.diagnostics.append(
                    syntax_error(target.path, f"cannot read file: {exc.strerror or exc}", 1, 1)
                )
                results[number] = result
                continue
            with timings.timed("prefilter"):
                wanted = needs_parse(data)
            parse = wanted and not too_large(settings.for_path(target.path), data)
            key = None
            if cache is not None:
                cache_started = timings.clock() if timings.ENABLED else 0.0
                content = content_hash(data)
                if index is not None:
                    index.note(target.path, info, content, wanted, started_ns)
                key = _key(target, settings, cache, content)
                if keys is not None:
                    keys[target.path] = key
                hit = _stored(target.path, key, parse, cache, index)
                if timings.ENABLED:
                    timings.add("cache", timings.clock() - cache_started)
                if hit is not None:
                    results[number] = hit
                    continue
            if not parse:
                scans.append((number, target, data, wanted, key))
                continue
            queued.append((number, target, data, key))
            queued_bytes += len(data)
            if (
                pool is None
                and jobs > 1
                and queued_bytes >= PARALLEL_MIN_BYTES
                and (len(queued) >= PARALLEL_MIN_FILES or len(data) >= LARGE_FILE_BYTES)
            ):
                # The workers start (fork, import the linter) at the first job: the largest so
                # far goes now, and the rest of the tree is read meanwhile.
                pool = _Pool(settings, cache_dir, jobs)
                pool.submit(queued.pop(max(range(len(queued)), key=lambda k: len(queued[k][2]))))
        if pool is not None:
            for job in sorted(queued, key=lambda j: -len(j[2])):  # largest first
                pool.submit(job)
            queued = []
        for number, target, data, wanted, key in scans:
            results[number] = lint_bytes(target, settings, data, wanted)
            if index is not None and key is not None:
                index.store(target.path, key, results[number])
        if pool is not None:
            for number, result in pool.results():
                results[number] = result
                stored_key = pool.keys.get(number)
                if index is not None and stored_key is not None:
                    index.store_parsed(targets[number].path, stored_key, result)
    except BaseException:  # Ctrl-C: do not wait for the workers' parses to finish
        if pool is not None:
            pool.close(abort=True)
            pool = None
        raise
    finally:
        if pool is not None:
            pool.close()
    for number, target, data, key in queued:  # too little to be worth worker processes
        results[number] = lint_bytes(target, settings, data, True)
        if cache is not None and key is not None:
            with timings.timed("cache"):
                cache.store(target.path, key, results[number])
                if index is not None:
                    index.store_parsed(target.path, key, results[number])
    if index is not None:
        with timings.timed("cache"):
            index.save()
    linted = [r for r in results if r is not None]
    assert len(linted) == len(results)  # every target's index was filled above
    return linted


def _key(target: Target, settings: Settings, cache: ResultCache, content: str) -> str:
    """The cache key of ``target`` (:meth:`~xla_lint.pipeline.cache.ResultCache.key`) whose
    bytes have the hash ``content``."""
    module, is_package = module_of(target.path) if target.kind == "python" else ("", False)
    return cache.key_of_content(
        target.path, target.kind, content, settings.codes_for(target.path), module, is_package
    )


def _stored(path: str, key: str, parse: bool, cache: ResultCache, index: RunIndex | None):
    """The stored result of ``path`` under ``key``, or None: from the run index (None: a run of a
    few files, which has none), or for a file that needs parsing from its entry (then put in
    the index too)."""
    if not parse:
        return index.load(path, key) if index is not None else None
    hit = index.load_parsed(path, key) if index is not None else None
    if hit is None:
        hit = cache.load(path, key)
        if hit is not None and index is not None:
            index.store_parsed(path, key, hit)
    return hit


def _unchanged(
    target: Target, settings: Settings, cache: ResultCache, index: RunIndex
) -> tuple[FileResult | None, str | None]:
    """``(stored result, key)`` of ``target`` when the run index knows its current status
    (:meth:`~xla_lint.pipeline.cache.RunIndex.known`: the file is not read), else ``(None, None)``."""
    started = timings.clock() if timings.ENABLED else 0.0
    try:
        info = os.stat(target.path)
    except OSError:
        return None, None
    known = index.known(target.path, info)
    if timings.ENABLED:
        timings.add("read", timings.clock() - started)
    if known is None:
        return None, None
    started = timings.clock() if timings.ENABLED else 0.0
    content, wanted, size = known
    parse = wanted and not too_large_size(settings.for_path(target.path), size)
    key = _key(target, settings, cache, content)
    hit = _stored(target.path, key, parse, cache, index)
    if timings.ENABLED:
        timings.add("cache", timings.clock() - started)
    return hit, key


class _Pool:
    """Worker processes linting jobs ``(index, target, bytes, cache key)`` as they are submitted.

    A worker that dies (out of memory, a crash in native code) does not take the run
    with it: each file it may have held is linted again alone in a fresh process, and
    one that kills that process too is reported as XLA000.
    """

    def __init__(self, settings: Settings, cache_dir: str | None, workers: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing.context import BaseContext

        self._context: BaseContext
        try:  # fork: workers inherit the imported rules instead of importing them again
            self._context = multiprocessing.get_context("fork")
        except ValueError:  # pragma: no cover - not on Linux/macOS
            self._context = multiprocessing.get_context()
        if self._context.get_start_method() == "fork":
            # LibCST and the rules (0.3 s of CPU), imported once here and inherited by every
            # worker, instead of once per worker and once more here for the modules XLA
            # programs reach (lint_reached), after the workers are done.
            from .. import linter  # noqa: F401
        self._initargs = (settings, cache_dir, os.getpid())
        self._executor = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=self._context,
            initializer=_worker_init,
            initargs=self._initargs,
        )
        self._jobs: list = []
        self._futures: list = []
        self.keys: dict[int, str | None] = {}  # job index -> its cache key

    def submit(self, job: tuple[int, Target, bytes, str | None]) -> None:
        from concurrent.futures.process import BrokenProcessPool

        self._jobs.append(job)
        self.keys[job[0]] = job[3]
        try:
            self._futures.append(self._executor.submit(_worker_lint, job))
        except (BrokenProcessPool, RuntimeError):  # the pool died already: results() redoes it
            self._futures.append(None)

    def results(self) -> list[tuple[int, FileResult]]:
        """``(index, result)`` of every submitted job, sorted by index."""
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        done: dict[int, FileResult] = {}
        for future in self._futures:
            if future is None:
                continue
            try:
                index, result, spent = future.result()
                done[index] = result
                if spent is not None:
                    timings.merge(spent)
            except BrokenProcessPool:
                pass
        for job in self._jobs:
            if job[0] in done:
                continue
            try:
                with ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=self._context,
                    initializer=_worker_init,
                    initargs=self._initargs,
                ) as alone:
                    _, done[job[0]], spent = alone.submit(_worker_lint, job).result()
                if spent is not None:
                    timings.merge(spent)
            except BrokenProcessPool:
                result = FileResult(job[1].path)
                result.diagnostics.append(
                    syntax_error(job[1].path, "the parser crashed on this file", 1, 1)
                )
                done[job[0]] = result
        return sorted(done.items())

    def close(self, abort: bool = False) -> None:
        """Stop the workers: after their jobs, or with ``abort`` at once (SIGTERM; a worker in
        the middle of a parse holds the GIL and would finish the file first)."""
        if abort:
            for process in list(getattr(self._executor, "_processes", {}).values()):
                process.terminate()
            self._executor.shutdown(wait=False, cancel_futures=True)
            return
        self._executor.shutdown(wait=True, cancel_futures=True)


def program_facts(
    results: list[FileResult],
    settings: Settings | None = None,
    launches: Sequence[Launch] = (),
    entries: tuple[str, ...] = (),
    cache: ResultCache | None = None,
    keys: Mapping[str, str] | None = None,
    stores: list[Callable[[], None]] | None = None,
) -> ProgramModel:
    """The program model of every linted file (:mod:`xla_lint.program.model`): a document's code
    blocks are one program; ``launches`` and the configuration's ``entry-points`` add entries
    and the facts their launchers set; ``entries`` names more entry paths (standard input).

    With ``cache`` and ``keys`` (path -> the key of its result, from :func:`lint_targets`), the
    model is read from the cache when it was built from the same files (each file's key, or
    its facts when it has none: a shell script; every file the model reads again on demand
    has facts from the import scan), launches and entries, and stored there when it was
    not (:func:`~xla_lint.pipeline.cache.load_model`). With ``stores`` the storing is appended
    there instead, for the caller to run once the run has asked the model what it computes
    on demand (the names unparsed files call, word counts, the joined loader flow), which are
    stored with it: a warm run over an unchanged tree reads them instead of every file."""
    table = fact_table(results)
    declared = settings.declared_entries(table) if settings is not None else {}
    references = _Unparsed(frozenset(r.path for r in results if r.skipped_reason == "no torch_xla"))
    key = None
    if cache is not None and keys is not None and len(table) >= MODEL_CACHE_MIN_FILES:
        from .cache import load_model, model_key, stable

        with timings.timed("cache"):
            key = model_key(
                cache.salt,
                [
                    (p, keys.get(p) or json.dumps(stable(f), separators=(",", ":")))
                    for p, f in table.items()
                ],
                (launches, declared, entries, _setup_cfg()),
            )
            persistent: dict[str, object] = {f"f:{p}": f for p, f in table.items()}
            persistent["references"] = references
            model = load_model(cache, key, persistent)
        if model is not None:
            return model
    model = ProgramModel(table, launches, declared, entries, references=references)
    if cache is not None and key is not None:
        from .cache import store_model

        ids = {id(f): f"f:{p}" for p, f in table.items()}
        ids[id(references)] = "references"
        stored_key = key

        def store() -> None:
            with timings.timed("cache"):
                store_model(cache, stored_key, model, ids)

        if stores is not None:
            stores.append(store)
        else:
            store()
    return model


def _setup_cfg() -> str:
    """The ``setup.cfg`` of the current folder, which :meth:`ProgramModel.count_names` reads
    (entry points), as part of the stored model's key ("" when there is none)."""
    try:
        with open("setup.cfg", "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return ""


# A model of fewer files is built again each run (it takes milliseconds): one run of a few files
# (pre-commit's) does not replace the stored model of the whole tree, run from the same folder.
MODEL_CACHE_MIN_FILES = 64


class _Unparsed:
    """The program model's ``references`` reader: the names a file the run did not parse calls
    (:func:`~xla_lint.program.modules.called_names`, read from disk), None for the others."""

    def __init__(self, paths: frozenset[str]) -> None:
        self.paths = paths

    def __call__(self, path: str) -> set[str] | None:
        return called_names(path) if path in self.paths else None


def fact_table(results: list[FileResult]) -> dict[str, FileFacts]:
    """Path -> facts of every result with facts; a document's blocks merged into one entry."""
    table: dict[str, FileFacts] = {}
    for r in results:
        if not r.facts:
            continue
        if len(r.facts) == 1 and r.facts[0].group is None:
            table[r.path] = r.facts[0]
            continue
        first = r.facts[0]
        table[r.path] = FileFacts(
            module="",
            imports=frozenset().union(*(f.imports for f in r.facts)),
            enables_spmd=any(f.enables_spmd for f in r.facts),
            shards=any(f.shards for f in r.facts),
            multiprocess=any(f.multiprocess for f in r.facts),
            spawns=any(f.spawns for f in r.facts),
            xla_launches=any(f.xla_launches for f in r.facts),
            imports_torch_xla=any(f.imports_torch_xla for f in r.facts),
            requires_torch_xla=any(f.requires_torch_xla for f in r.facts),
            sets_global_mesh=any(f.sets_global_mesh for f in r.facts),
            group=first.group or r.path,
            unbuffered=any(f.unbuffered for f in r.facts),
            fact_functions={
                k: set().union(*(f.fact_functions.get(k, set()) for f in r.facts))
                for k in {k for f in r.facts for k in f.fact_functions}
            },
            references=set().union(*(f.references for f in r.facts)),
            flows={
                k: sorted(set().union(*(f.flows.get(k, ()) for f in r.facts)))
                for k in {k for f in r.facts for k in f.flows}
            },
            flow_functions=frozenset().union(*(f.flow_functions for f in r.facts)),
            # Blocks before torch_xla is imported record no calls: the others' are the page's.
            flow_calls=None
            if all(f.flow_calls is None for f in r.facts)
            else frozenset().union(*(f.flow_calls or () for f in r.facts)),
            makes_device_loader=any(f.makes_device_loader for f in r.facts),
        )
    return table


# The rules that also run on a module without torch_xla that an XLA program imports (the
# loader an XLA training loop iterates is often built in a plain data.py, its optimizer in a
# plain trainer module), each with the bytes a file must contain for the rule to find anything
# there: a cheap test before the file is parsed.
PROGRAM_RULES_NEED: dict[str, bytes] = {
    "XLA202": b"DataLoader",
    "XLA017": b"DataLoader",
    "XLA204": b"Adam",
    "XLA024": b"checkpoint",
    "XLA027": b"seed",  # manual_seed, set_seed, seed_everything in a plain entry script
    "XLA028": b"seed",
    "XLA031": b"RANK",  # os.environ.get("LOCAL_RANK", 0) in a plain helper of a spawned program
}


PROGRAM_RULES = frozenset(PROGRAM_RULES_NEED)


def lint_reached(
    results: list[FileResult],
    program: ProgramModel,
    settings: Settings,
    texts: Mapping[str, str] | None = None,
    cache: ResultCache | None = None,
    keys: Mapping[str, str] | None = None,
) -> list[FileResult]:
    """``results``, with the files the prefilter skipped linted again by :data:`PROGRAM_RULES`
    where an XLA program reaches them: a script program one of whose modules imports torch_xla
    unconditionally (a library's optional import does not make its users XLA programs). A
    cheap byte test first: each rule runs only on a file that contains its
    :data:`PROGRAM_RULES_NEED` bytes. Their findings then depend on that program's facts.
    ``texts``: path -> the text to lint instead of the file on disk (an editor's buffer).
    ``cache`` and ``keys`` (path -> the key of its result): each such file's second result is
    cached too, under its key and the codes run (never for a ``texts`` buffer)."""
    xla_members: set[str] = set()
    for p in program.programs:
        if p.kind == "script" and any(program.files[m].requires_torch_xla for m in p.members):
            xla_members |= p.members
    out = list(results)
    for i, r in enumerate(results):
        if (
            r.skipped_reason != "no torch_xla"
            or r.path not in xla_members
            or not r.path.endswith(".py")
        ):
            continue
        codes = settings.codes_for(r.path) & PROGRAM_RULES
        if not codes:
            continue
        given = texts.get(r.path) if texts is not None else None
        reached_key = None
        if cache is not None and keys is not None and given is None and r.path in keys:
            reached_key = hashlib.sha256(
                f"{keys[r.path]}\0reached\0{','.join(sorted(codes))}".encode()
            ).hexdigest()
            with timings.timed("cache"):
                hit = cache.load(r.path, reached_key)
            if hit is not None:
                out[i] = hit
                continue
        try:
            data = read_source(r.path) if given is None else given.encode("utf-8", "replace")
            codes = frozenset(c for c in codes if PROGRAM_RULES_NEED[c] in data)
            if not codes or too_large(settings.for_path(r.path), data):
                continue
            text = decode(data) if given is None else given
        except (OSError, SourceError):
            continue
        from ..linter import lint_in_xla_program

        own = settings.for_path(r.path)  # (nested settings have no nested ones of their own)
        out[i] = lint_in_xla_program(
            Target(r.path, "python"), replace(own, selected=frozenset(codes)), text
        )
        if reached_key is not None:
            with timings.timed("cache"):
                cache.store(r.path, reached_key, out[i])  # type: ignore[union-attr]
    return out


def finalize(
    results: list[FileResult], program: ProgramModel, settings: Settings | None = None
) -> tuple[list[Diagnostic], int]:
    """Keep the diagnostics whose facts hold and that no comment suppresses; sort them.

    With ``settings`` given, each fix is as the run treats it (``unfixable``,
    ``extend-safe-fixes``: :func:`~xla_lint.pipeline.fixes.with_fix_policy`).

    With ``settings`` given, files for which XLA900 is enabled also get a diagnostic for
    each ``# noqa`` naming XLA codes that silence nothing (see :func:`unused_noqa`).

    Outside preview mode (``settings`` None, or its ``preview`` off) a finding needs its
    ``stable_requires`` too: without them it is its rule's preview behaviour. A finding in a
    function the tree never names (``runs_in``: :meth:`ProgramModel.never_named`) is dropped; a
    program that imports the finding's file without naming a definition its line needs
    (``reach``) is no witness for it.
    """
    kept: list[Diagnostic] = []
    suppressed = 0
    preview = settings is not None and settings.preview
    program.count_names({name for r in results for d in r.diagnostics for name in d.runs_in})
    for r in results:
        for d in r.diagnostics:
            # Outside preview mode a finding needs its stable facts too (without them it is its
            # rule's preview behaviour).
            requires = d.requires if preview else d.requires + d.stable_requires
            # The program each finding rests on is found once, and its note made from it.
            if d.launch:  # at a launcher's line: it rests on the program that command runs
                witness = program.witness_of_launch(d.launch, requires)
                if witness is None:
                    continue
                note = program.launch_note(d.launch, requires, witness)
            elif requires:
                witness = program.witness(r.path, requires, d.reach)
                if witness is None:  # no program of the file has the facts it needs
                    continue
                note = program.note(r.path, requires, witness)
            else:
                note = ""  # it needs no fact: nothing to say of a program
            if d.runs_in and program.never_named(r.path, d.runs_in):
                continue  # in a function the tree never calls nor names: no program runs it
            if d.option is not None:
                checked = option_verdict(d, program.launches_of(r.path))
                if checked is None:
                    continue
                d = checked
            if d.unless and program.may_be_loader(r.path, d.unless):
                continue  # a value the finding takes for no device loader may be one
            if r.suppressions.suppresses(d.code, d.line):
                suppressed += 1
                continue
            d = replace(
                d,
                message=d.message + note,
                requires=(),
                launch="",
                option=None,
                unless=(),
                stable_requires=(),
                runs_in=(),
                reach=(),
            )
            kept.append(d if settings is None else with_fix_policy(d, settings.for_path(r.path)))
        if settings is not None and UNUSED_NOQA in settings.codes_for(r.path):
            for d in unused_noqa(r, settings):
                if r.suppressions.suppresses(d.code, d.line):
                    suppressed += 1
                else:
                    kept.append(with_fix_policy(d, settings.for_path(r.path)))
    kept.sort(key=lambda d: d.sort_key)
    return kept, suppressed


def option_verdict(d: Diagnostic, launches: Sequence[Launch]) -> Diagnostic | None:
    """``d`` (a finding with an :class:`~xla_lint.diagnostics.OptionCheck`) as the launches of
    its program make it: an error naming the first launch that passes a value outside the check's
    good values (a value the shell would expand, ``$N``, is not known and proves nothing), else
    ``d`` as reported when the check keeps it, else None (dropped)."""
    check = d.option
    assert check is not None
    for launch in launches:
        given = option_value(launch.argv, check.option)
        if given is None or "$" in given or "`" in given:
            continue
        value: object = given
        if check.type in ("int", "float"):
            try:
                value = int(given) if check.type == "int" else float(given)
            except ValueError:
                continue  # argparse exits with a usage error: not this finding
        if repr(value) in check.good:
            continue
        message = check.message.format(
            value=given, where=launch.where, given=f"{check.option} {given}"
        )
        return replace(d, message=message, severity=Severity.ERROR)
    return d if check.keep else None


# ---- XLA900 unused-noqa: which noqa comments naming XLA codes silenced nothing ----------------

UNUSED_NOQA = "XLA900"


def unused_noqa(result: FileResult, settings: Settings) -> list[Diagnostic]:
    """XLA900 diagnostics for ``result``'s ``# noqa: CODES`` comments naming XLA codes that silence nothing.

    A code counts as used when a diagnostic of that code was made on the comment's line,
    before the program-facts filter, or when its rule did not run on the file (not selected,
    ignored, preview, another torch_xla version): only a rule that ran and found nothing there
    shows that the comment is stale (``--fix --select XLA900`` used to delete them all) (the comment is needed when the file is linted with its
    whole program). Bare ``# noqa``, other tools' codes and ``XLA900`` itself are never
    reported. The fix (none for documents) removes the directive, or only its unused codes.
    """
    from ..sources.target import DOCUMENT_SUFFIXES

    covered = result.suppressions.comment_line  # a multi-line string's lines: its last line
    used = {(covered(d.line), d.code) for d in result.diagnostics}
    enabled = {
        c
        for c in settings.codes_for(result.path)
        if (rule := BY_CODE.get(c)) is not None
        and rule.applies_to(settings.for_path(result.path).target_version)
    }
    is_doc = result.path.lower().endswith(DOCUMENT_SUFFIXES) or result.shell
    out = []
    for comment in sorted(result.suppressions.noqa.values(), key=lambda c: c.line):
        if comment.codes is None:
            continue
        reasons: dict[str, list[str]] = {"unused": [], "unknown": []}
        unused: set[str] = set()
        for code, _, _ in comment.code_spans:
            if not code.startswith("XLA") or code == UNUSED_NOQA or code in unused:
                continue
            if code not in BY_CODE:
                reasons["unknown"].append(code)
            elif code not in enabled:
                continue  # not run here (select, ignore, preview, target version): it may be needed when it is
            elif (comment.line, code) not in used:
                reasons["unused"].append(code)
            else:
                continue
            unused.add(code)
        if not unused:
            continue
        detail = "; ".join(
            f"{kind}: {', '.join(codes)}" for kind, codes in reasons.items() if codes
        )
        fix = None
        if not is_doc:
            kept_codes = [c for c, _, _ in comment.code_spans if c not in unused]
            if kept_codes:
                first, last = comment.code_spans[0][1], comment.code_spans[-1][2]
                edit = Edit(
                    comment.line, first, comment.line, last, ", ".join(dict.fromkeys(kept_codes))
                )
                description = f"remove unused {', '.join(sorted(unused))} from `noqa`"
            else:
                edit = Edit(
                    comment.line,
                    comment.remove_column,
                    comment.line,
                    comment.remove_end_column,
                    comment.replacement,
                )
                description = "remove unused `noqa` directive"
            fix = Fix(description, (edit,))
        out.append(
            Diagnostic(
                UNUSED_NOQA,
                "unused-noqa",
                f"unused `noqa` directive ({detail})",
                result.path,
                comment.line,
                comment.column,
                comment.line,
                comment.end_column,
                Severity.WARNING,
                fix,
            )
        )
    return out


def run(
    targets: list[Target],
    settings: Settings,
    jobs: int = 1,
    cache: bool = False,
    launchers: Sequence[str] = (),
    folders: Sequence[str] = (),
) -> RunResult:
    """Lint ``targets`` in up to ``jobs`` processes and return the diagnostics to report.

    ``cache``: answer unchanged files from (and store new results in) ``settings.cache_dir``.
    ``launchers``: shell scripts and docs to read for the commands that run the tree's files;
    ``folders``: the folders named on the command line (their ``[project.scripts]``).
    """
    keys: dict[str, str] = {}
    results = lint_targets(targets, settings, jobs, settings.cache_dir if cache else None, keys)
    scripts, launches = lint_launchers(launchers, folders, settings)
    results += scripts
    stored = None
    if cache and settings.cache_dir is not None:
        from .cache import ResultCache

        stored = ResultCache(settings.cache_dir, settings.fingerprint())
    stores: list[Callable[[], None]] = []
    with timings.timed("program model"):
        program = program_facts(results, settings, launches, cache=stored, keys=keys, stores=stores)
    with timings.timed("reached modules"):
        results = lint_reached(results, program, settings, cache=stored, keys=keys)
    with timings.timed("join"):
        diagnostics, suppressed = finalize(results, program, settings)
    for store in stores:
        store()  # the model with what finalize computed on demand
    return RunResult(diagnostics, results, program, suppressed, settings)


def lint_launchers(
    launchers: Sequence[str], folders: Sequence[str], settings: Settings
) -> tuple[list[FileResult], list[Launch]]:
    """The launchers' commands, and the findings of those that are shell scripts (``*.sh``,
    ``*.bash``, a ``#!/bin/bash`` first line: :func:`xla_lint.pipeline.shell.lint_shell`); docs
    and ``pyproject.toml`` only give their launches. ``folders``: the folders named on the
    command line (their ``[project.scripts]``). An unreadable launcher is skipped."""
    from ..program.launchers import MAX_LAUNCHER_BYTES, is_shell_script, read_launches
    from .shell import lint_shell

    results: list[FileResult] = []
    launches: list[Launch] = []
    others: list[str] = []
    for path in launchers:
        if os.path.basename(path) == "pyproject.toml" or path.lower().endswith(DOC_SUFFIXES):
            others.append(path)
            continue
        try:
            text = read_source(path, MAX_LAUNCHER_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        if not is_shell_script(path, text[:128]):
            others.append(path)
            continue
        result, found = lint_shell(path, text, settings)
        results.append(result)
        launches.extend(found)
    return results, launches + read_launches(others, list(folders))


def default_jobs() -> int:
    """The number of cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1
