"""The result cache: one JSON entry per linted file, in ``.xla_lint_cache/`` (or ``--cache-dir``).

What is cached is a file's own result (:class:`~xla_lint.results.FileResult`: its
diagnostics with the program facts they still ``require``, its :class:`~xla_lint.program.facts.FileFacts`
and its suppression comments), never the final report. That result depends only on

- the file's bytes (its content hash),
- the tool (its version, and the size and modification time of its own source files, so
  an edited rule in a development install is never answered from a stale entry),
- the configuration (:meth:`~xla_lint.config.Settings.fingerprint`, plus the rule codes
  enabled for this path after ``per-file-ignores``),
- the file's module name and whether it is a package ``__init__`` (relative imports
  resolve against them), its path and its kind (Python file or document),

because a rule never looks at another file: what other files contribute (SPMD enabled
by the entry script, sharding done by an imported module, ...) is joined after every
file is read, in :func:`~xla_lint.pipeline.run.program_facts`, and applied in
:func:`~xla_lint.pipeline.run.finalize`. So an entry stays right when *other* files change, and
a warm run redoes only the join.

The files the prefilter rules out (most of a tree) have no entry of their own: their results
(the facts of their import scan) are kept, with the program model, in one run index per folder
a run starts from (:class:`RunIndex`, :func:`load_model`), so a warm run over an unchanged
tree reads a few files besides the tree and neither scans imports nor builds the model again.

Layout: ``<dir>/v1/<2 hex>/<sha256 of (path, settings, tool)>.json``. One entry per path and
configuration, overwritten when the file changes, so the cache does not grow with edits.
The entry repeats its full key (content hash included); an entry that does not parse,
belongs to another key or version, or holds malformed data is ignored and rewritten,
never trusted. Writes go to a temporary file in the same folder and are renamed into
place, so a reader (another ``xla-lint`` process sharing the folder) sees a whole entry
or none. Errors writing the cache (read-only folder, full disk) are ignored: the cache
only ever saves time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from .. import __version__

FORMAT = 1
_TAG = "xla-lint result cache"


@functools.lru_cache(maxsize=1)
def _tool_stamp() -> str:
    """The version plus (size, mtime) of every source file of the package."""
    root = Path(__file__).parent
    h = hashlib.sha256(f"{__version__}/{FORMAT}".encode())
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "runtime"))
        for name in sorted(files):
            if name.endswith(".py"):
                try:
                    st = os.stat(os.path.join(folder, name))
                except OSError:
                    continue
                h.update(f"{folder}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


def content_hash(data: bytes) -> str:
    """The hash of a file's bytes in its key (:meth:`ResultCache.key`)."""
    return hashlib.blake2b(data, digest_size=32).hexdigest()


class ResultCache:
    """Per-file results of one configuration, stored under ``directory``.

    ``fingerprint`` is :meth:`Settings.fingerprint`. :meth:`load` returns None for any
    missing, corrupt or foreign entry; :meth:`store` never raises.
    """

    def __init__(self, directory: str | os.PathLike, fingerprint: str) -> None:
        self.directory = Path(directory)
        self.root = self.directory / f"v{FORMAT}"
        self.salt = hashlib.sha256(f"{_tool_stamp()}\0{fingerprint}".encode()).hexdigest()
        self.writable = True
        self.hits = 0
        self.misses = 0
        self._cwd = os.getcwd()  # one run's: abspath() asks the system for it each time
        self._codes: dict[frozenset[str], str] = {}  # the sorted codes of each set, joined

    # -- keys ----------------------------------------------------------------
    def entry_path(self, path: str) -> Path:
        """Where the entry of ``path`` lives. The path as written is part of the name, beside
        the absolute one: the CLI names files relative to where it runs and the editor server
        absolutely, and one shared entry made each evict the other's."""
        name = hashlib.sha256(f"{self.salt}\0{os.path.abspath(path)}\0{path}".encode()).hexdigest()
        return self.root / name[:2] / f"{name}.json"

    def key(
        self,
        path: str,
        kind: str,
        data: bytes,
        codes: frozenset[str],
        module: str,
        is_package: bool,
    ) -> str:
        """The full key of a file's result: content hash, tool, settings, codes, module."""
        return self.key_of_content(path, kind, content_hash(data), codes, module, is_package)

    def key_of_content(
        self,
        path: str,
        kind: str,
        content: str,
        codes: frozenset[str],
        module: str,
        is_package: bool,
    ) -> str:
        """:meth:`key`, given the :func:`content_hash` of the file's bytes."""
        joined = self._codes.get(codes)
        if joined is None:  # most files of a run share one set of codes
            joined = self._codes[codes] = ",".join(sorted(codes))
        parts = [
            self.salt,
            os.path.normpath(os.path.join(self._cwd, path)),  # os.path.abspath, without getcwd()
            kind,
            content,
            joined,
            module,
            "package" if is_package else "module",
        ]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    # -- entries ---------------------------------------------------------------
    def load(self, path: str, key: str):
        """The cached :class:`~xla_lint.results.FileResult` for ``key``, or None."""
        from ..results import result_from_json

        try:
            with open(self.entry_path(path), "rb") as handle:
                entry = json.loads(handle.read())
            if (
                not isinstance(entry, dict)
                or entry.get("tag") != _TAG
                or entry.get("key") != key
                or entry.get("version") != __version__
            ):
                raise ValueError("foreign entry")
            result = result_from_json(entry["result"])
            if result.path != path:
                raise ValueError("entry for another path")
        except Exception:  # missing, unreadable, not JSON, foreign or malformed: recompute
            self.misses += 1
            return None
        self.hits += 1
        return result

    def store(self, path: str, key: str, result) -> None:
        """Write ``result`` atomically; failures are ignored (and stop further writes)."""
        if not self.writable:
            return
        from ..results import result_to_json

        try:
            payload = json.dumps(
                {"tag": _TAG, "version": __version__, "key": key, "result": result_to_json(result)},
                separators=(",", ":"),
            )
        except (TypeError, ValueError):
            self.writable = False
            return
        self.write(self.entry_path(path), payload.encode("utf-8"))

    def write(self, target: Path, payload: bytes) -> None:
        """Put ``payload`` at ``target`` atomically (a temporary file in the same folder, renamed);
        failures are ignored (and stop further writes)."""
        if not self.writable:
            return
        try:
            self._prepare(target.parent)
            import tempfile

            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=target.suffix, dir=target.parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(payload)
                os.replace(tmp, target)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError:
            self.writable = False

    def _prepare(self, folder: Path) -> None:
        if folder.is_dir():
            return
        fresh = not self.directory.exists()
        folder.mkdir(parents=True, exist_ok=True)
        if fresh:
            # Like Ruff's and pytest's caches: never committed, skipped by backup tools.
            for name, text in (
                (".gitignore", "# Created by xla-lint\n*\n"),
                (
                    "CACHEDIR.TAG",
                    "Signature: 8a477f597d28d172789f06886806bc55\n"
                    "# This file is a cache directory tag created by xla-lint.\n",
                ),
            ):
                try:
                    with open(self.directory / name, "x", encoding="utf-8") as handle:
                        handle.write(text)
                except OSError:
                    pass


# ---- the run index: what a warm run over an unchanged tree reads instead of redoing it ----------
#
# Beside the per-file entries, a run keeps, per configuration and folder it runs in, one index
# file (``<dir>/v1/runs/<sha256 of (tool, settings, folder)>.index``, JSON) of
#
# - the results of the files that were not parsed (those the prefilter rules out: their import
#   facts) and of those that were (as their entries hold them), each with its full key, so a
#   warm run reads one file instead of one entry per parsed file;
# - each file's status when it was read (modification and change times in nanoseconds, size,
#   inode) with the hash of its bytes and the prefilter's answer (:meth:`RunIndex.known`): a
#   later run whose ``stat`` of the file gives the same four numbers neither reads nor hashes
#   it, as Ruff's cache decides "unchanged" from the modification time. Writing a file's
#   content sets both times, so every edit is seen; a status is recorded only once both times
#   are :data:`RACY_NS` older than the run (a write in the same clock tick as the read that
#   recorded it would keep them: git's "racily clean" entries), and otherwise the file is
#   read and hashed again next time. What is not seen: a content change that restores both
#   times and the size and keeps the inode, which needs a changed system clock (the change
#   time cannot be set from user space).
#
# and one file with the program model (``.../runs/<same>.model``) and the key of everything it
# was built from (:func:`model_key`). A warm run then reads two files and the status of each
# file of the tree, and neither scans imports nor builds the model again. Both are written like
# the entries (a temporary file renamed into place) and ignored when foreign, stale or damaged.
#
# The model is a pickle, read back with an unpickler that makes only this package's data classes
# and the builtin containers (:class:`_ModelUnpickler`): a cache folder shipped inside a linted
# checkout cannot run code. The files' facts are not in it: they are the run's own, put back by
# path (pickle's persistent ids), so the pickle holds only the graph and the programs.

INDEX_TAG = "xla-lint run index"
INDEX_FORMAT = 2

# A file's status is trusted by a later run only when its times are this much older than the
# run that read it: coarser file-system clocks (FAT's 2 s) still tick between a write and it.
RACY_NS = 2_000_000_000


def index_name(salt: str) -> str:
    """The index's file stem for the settings ``salt`` and the current folder."""
    return hashlib.sha256(f"{salt}\0{os.getcwd()}".encode()).hexdigest()


def _facts_row(facts) -> list | None:
    """An import scan's facts as ``[module, imports, entry, defines_tests]``, or None when they
    carry anything else (then the file is not indexed: the row could not give them back)."""

    row = [facts.module, sorted(facts.imports), facts.entry, facts.defines_tests]
    if _facts_of_row(row) != facts:
        return None
    return row


def _facts_of_row(row: list):
    from ..program.facts import FileFacts

    module, imports, entry, defines_tests = row
    if not (
        isinstance(module, str)
        and isinstance(imports, list)
        and all(isinstance(i, str) for i in imports)
    ):
        raise TypeError("malformed facts row")
    return FileFacts(
        module=module,
        imports=frozenset(imports),
        entry=bool(entry),
        defines_tests=bool(defines_tests),
    )


def _status(info: os.stat_result) -> list[int]:
    """The numbers of a file's status the index compares: mtime and ctime (ns), size, inode."""
    return [info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino]


class RunIndex:
    """The results of the files of a run, by path, each under its full key
    (:meth:`ResultCache.key`), and the files' status when read (:meth:`known`); read once, written
    once (:meth:`save`) when anything changed."""

    def __init__(self, cache: ResultCache) -> None:
        self.cache = cache
        self.path = cache.root / "runs" / f"{index_name(cache.salt)}.index"
        self._data: dict[str, dict[str, list]] | None = None  # read on first use
        self.changed = False
        self.seen: set[str] = set()

    @property
    def data(self) -> dict[str, dict[str, list]]:
        """The index file's tables: ``files`` (not parsed: path -> ``[key, skipped reason, facts
        row]``), ``parsed`` (path -> ``[key, result as JSON]``) and ``stats`` (path ->
        ``[mtime_ns, ctime_ns, size, inode, content hash, prefilter's answer]``)."""
        if self._data is None:
            self._data = self._read()
        return self._data

    @property
    def rows(self) -> dict[str, list]:
        """Path -> ``[key, skipped reason, facts row]`` of the files that were not parsed."""
        return self.data["files"]

    def _read(self) -> dict[str, dict[str, list]]:
        empty: dict[str, dict[str, list]] = {"files": {}, "parsed": {}, "stats": {}}
        try:
            with open(self.path, "rb") as handle:
                data = json.loads(handle.read())
            if (
                isinstance(data, dict)
                and data.get("tag") == INDEX_TAG
                and data.get("version") == __version__
                and data.get("format") == INDEX_FORMAT
                and all(isinstance(data.get(table), dict) for table in empty)
            ):
                return {table: data[table] for table in empty}
        except Exception:  # missing, unreadable or damaged: every file is looked at again
            pass
        return empty

    # -- status ----------------------------------------------------------------
    def known(self, path: str, info: os.stat_result) -> tuple[str, bool, int] | None:
        """``(content hash, prefilter's answer, size)`` recorded for ``path`` when its status
        ``info`` (of ``os.stat``) is the one recorded, else None (read and hash it)."""
        row = self.data["stats"].get(path)
        if (
            not isinstance(row, list)
            or len(row) != 6
            or row[:4] != _status(info)
            or not isinstance(row[4], str)
            or not isinstance(row[5], bool)
        ):
            return None
        self.seen.add(path)
        return row[4], row[5], info.st_size

    def note(
        self, path: str, info: os.stat_result, content: str, wanted: bool, started_ns: int
    ) -> None:
        """Record that ``path``, of status ``info`` (taken before its bytes were read), has the
        content hash ``content`` and the prefilter's answer ``wanted``; nothing when a time of
        ``info`` is within :data:`RACY_NS` of ``started_ns`` (when the run started) or later."""
        self.seen.add(path)
        stats = self.data["stats"]
        if max(info.st_mtime_ns, info.st_ctime_ns) > started_ns - RACY_NS:
            if stats.pop(path, None) is not None:
                self.changed = True
            return
        row = [*_status(info), content, wanted]
        if stats.get(path) != row:
            stats[path] = row
            self.changed = True

    # -- results ---------------------------------------------------------------
    def load(self, path: str, key: str):
        """The :class:`~xla_lint.results.FileResult` stored for ``path`` under ``key``, or None."""
        from ..results import FileResult

        self.seen.add(path)
        row = self.rows.get(path)
        try:
            if not isinstance(row, list) or len(row) != 3 or row[0] != key:
                raise ValueError("stale row")
            reason, facts = row[1], row[2]
            if not isinstance(reason, str):
                raise TypeError("malformed row")
            result = FileResult(path, skipped_reason=reason)
            if facts is not None:
                result.facts.append(_facts_of_row(facts))
        except Exception:
            self.cache.misses += 1
            return None
        self.cache.hits += 1
        return result

    def store(self, path: str, key: str, result) -> None:
        """Keep ``result`` (of a file that was not parsed: a skipped reason, at most the facts of
        its import scan, no diagnostics) for ``path`` under ``key``; anything else is not kept."""
        self.seen.add(path)
        if result.diagnostics or result.skipped_reason is None or len(result.facts) > 1:
            return
        facts = _facts_row(result.facts[0]) if result.facts else None
        if result.facts and facts is None:
            return
        self.rows[path] = [key, result.skipped_reason, facts]
        self.changed = True

    def load_parsed(self, path: str, key: str):
        """The result of a file that needs parsing stored for ``path`` under ``key`` (as
        :meth:`ResultCache.load` gives it), or None; a hit or miss of the cache is not counted
        (the caller asks the file's entry next)."""
        from ..results import result_from_json

        self.seen.add(path)
        row = self.data["parsed"].get(path)
        try:
            if not isinstance(row, list) or len(row) != 2 or row[0] != key:
                raise ValueError("stale row")
            result = result_from_json(row[1])
            if result.path != path:
                raise ValueError("row for another path")
        except Exception:
            return None
        self.cache.hits += 1
        return result

    def store_parsed(self, path: str, key: str, result) -> None:
        """Keep the result of a file that needed parsing for ``path`` under ``key``."""
        from ..results import result_to_json

        self.seen.add(path)
        try:
            row = [key, result_to_json(result)]
            json.dumps(row)  # what the index file cannot hold is not kept
        except (TypeError, ValueError):
            return
        self.data["parsed"][path] = row
        self.changed = True

    def save(self) -> None:
        """Write the index when it changed: this run's rows, and the earlier rows of files this
        run did not look at that still exist (another run from this folder linted them)."""
        if self._data is None:  # never asked: nothing to write
            return
        stale = 0
        for table in self._data.values():
            for p in [p for p in table if p not in self.seen and not os.path.exists(p)]:
                del table[p]
                stale += 1
        if not self.changed and not stale:
            return
        payload = json.dumps(
            {"tag": INDEX_TAG, "version": __version__, "format": INDEX_FORMAT, **self._data},
            separators=(",", ":"),
        )
        self.cache.write(self.path, payload.encode("utf-8"))


def stable(value) -> object:
    """``value`` (dataclasses, sets, tuples, dicts of them) as JSON data that is the same in
    every process (sets sorted): what :func:`model_key` hashes."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__] + [
            stable(getattr(value, f.name)) for f in dataclasses.fields(value)
        ]
    if isinstance(value, (set, frozenset)):
        return sorted((stable(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [stable(v) for v in value]
    if isinstance(value, dict):
        return sorted(([stable(k), stable(v)] for k, v in value.items()), key=repr)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def model_key(salt: str, members: list[tuple[str, str]], context: object) -> str:
    """The key of a program model built from ``members`` (``(path, key of its result or its facts
    as JSON)`` of every file with facts) and ``context`` (launches, declared and named entries)."""
    h = hashlib.sha256(f"{salt}\0{os.getcwd()}\0".encode())
    for path, key in sorted(members):
        h.update(f"{path}\0{key}\0".encode())
    h.update(json.dumps(stable(context), separators=(",", ":")).encode())
    return h.hexdigest()


# Builtins a pickled program model is made of, beside this package's classes.
_SAFE_BUILTINS = frozenset({"set", "frozenset", "dict", "list", "tuple", "str", "int", "bool"})
_MODEL_MODULES = ("xla_lint.program.", "xla_lint.diagnostics")


class _ModelUnpickler:
    """Reads a pickled program model, refusing every global that is not a class of
    :mod:`xla_lint.program` (or :mod:`xla_lint.diagnostics`) or a builtin container, so a
    damaged or hostile file fails to load instead of calling anything."""

    @staticmethod
    def load(data: bytes, persistent: dict[str, object]):
        import importlib
        import io
        import pickle

        class Unpickler(pickle.Unpickler):
            def find_class(self, module: str, name: str):
                if module == "builtins" and name in _SAFE_BUILTINS:
                    return super().find_class(module, name)
                if module.startswith(_MODEL_MODULES):
                    found = getattr(importlib.import_module(module), name, None)
                    if isinstance(found, type):
                        return found
                raise pickle.UnpicklingError(f"refused global {module}.{name}")

            def persistent_load(self, pid):
                if not isinstance(pid, str) or pid not in persistent:
                    raise pickle.UnpicklingError("unknown persistent id")
                return persistent[pid]

        return Unpickler(io.BytesIO(data)).load()


MODEL_TAG = b"xla-lint program model\n"


def model_path(cache: ResultCache) -> Path:
    """Where the program model of runs from this folder with ``cache``'s settings is kept."""
    return cache.root / "runs" / f"{index_name(cache.salt)}.model"


def load_model(cache: ResultCache, key: str, persistent: dict[str, object]):
    """The program model stored under ``key``, with its files' facts and its references reader
    taken from ``persistent`` (``"f:" + path`` -> facts, ``"references"`` -> the reader); None
    when there is none, it is stale, or it does not load."""
    from ..program.model import ProgramModel

    try:
        with open(model_path(cache), "rb") as handle:
            head = MODEL_TAG + f"{__version__}\n{key}\n".encode()
            if handle.read(len(head)) != head:  # another model: not read further
                raise ValueError("stale model")
            data = handle.read()
        model = _ModelUnpickler.load(data, persistent)
        if not isinstance(model, ProgramModel):
            raise TypeError("not a program model")
    except Exception:
        return None
    return model


def store_model(cache: ResultCache, key: str, model, persistent: dict[int, str]) -> None:
    """Write ``model`` under ``key``, each object whose ``id`` is in ``persistent`` (the files'
    facts, the references reader) replaced by its name there; failures are ignored."""
    import io
    import pickle

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return persistent.get(id(obj))

    buffer = io.BytesIO()
    try:
        Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(model)
    except Exception:  # something in the model does not pickle: build it next time
        return
    cache.write(
        model_path(cache), MODEL_TAG + f"{__version__}\n{key}\n".encode() + buffer.getvalue()
    )
