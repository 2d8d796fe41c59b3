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
a warm run redoes only the cheap join.

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

import hashlib
import json
import os
from pathlib import Path

from .. import __version__

FORMAT = 1
_TAG = "xla-lint result cache"


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
        content = hashlib.blake2b(data, digest_size=32).hexdigest()
        parts = [
            self.salt,
            os.path.abspath(path),
            kind,
            content,
            ",".join(sorted(codes)),
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

        target = self.entry_path(path)
        try:
            payload = json.dumps(
                {"tag": _TAG, "version": __version__, "key": key, "result": result_to_json(result)},
                separators=(",", ":"),
            )
            self._prepare(target.parent)
            import tempfile

            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=target.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(payload)
                os.replace(tmp, target)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except (OSError, TypeError, ValueError):
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
