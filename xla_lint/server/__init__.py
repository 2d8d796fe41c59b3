"""The language server: ``xla-lint server`` speaks LSP over standard input and output.

What it does (``docs/editors.md`` says how editors start it):

- publishes diagnostics for an open Python document when it is opened, after each change
  (debounced: :data:`DEBOUNCE` seconds without a new change) and on save, linted from the
  editor's unsaved text with the program facts of its workspace folder
  (:class:`~xla_lint.server.project.Project`): a fact set in ``train.py`` reaches the module
  being edited, as in a run of ``xla-lint`` over the folder;
- offers code actions: each safe fix of a diagnostic, "add ``# noqa: CODE``" on its line
  (:func:`xla_lint.pipeline.noqa.add_noqa`), and, when asked for ``source.fixAll``, every safe fix;
- shows the rule's summary and a link to its explanation on hover (over a diagnostic, or
  over a code in a ``# noqa`` comment);
- reads ``[tool.xla-lint]`` from the folder's ``pyproject.toml``; a configuration error is
  shown in the editor (``window/showMessage``) and the defaults are used;
- follows files changed on disk (``workspace/didChangeWatchedFiles``, when the client can
  register file watchers): a changed file's facts, a changed ``pyproject.toml``'s settings.

Linting runs in one worker thread, so the server keeps answering while a file is linted.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from .. import __version__
from ..diagnostics import Diagnostic
from ..pipeline.fixes import applies, apply_fixes, fix_loop
from ..pipeline.noqa import add_noqa
from ..pipeline.run import TOO_LARGE
from ..results import FileResult
from ..sources.suppress import find_suppressions
from .convert import SOURCE, Text, hover_text, to_lsp
from .project import PYTHON_SUFFIXES, Linted, Project
from .protocol import Protocol, describe

DEBOUNCE = 0.15  # seconds without a change before a document is linted again
FIX_ALL = f"{lsp.CodeActionKind.SourceFixAll.value}.{SOURCE}"
SYNTAX_ERROR = "XLA000"  # no noqa comment silences it, so none is offered

T = TypeVar("T")


class XlaLintServer(LanguageServer):
    """The xla-lint language server; ``debounce``: seconds to wait after a change (0 in tests),
    ``jobs``: worker processes for a workspace folder's first run."""

    protocol: Protocol

    def __init__(self, debounce: float = DEBOUNCE, jobs: int = 1) -> None:
        super().__init__(
            SOURCE,
            __version__,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Full,
            protocol_cls=Protocol,
        )
        self.debounce = debounce
        self.jobs = jobs
        self.projects: dict[tuple[bool, str], Project] = {}
        self.linted: dict[str, Linted] = {}  # uri -> the last lint of an open document
        self._open: set[str] = set()  # the open documents' URIs, as the client writes them
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._running: dict[str, tuple[int | None, str, asyncio.Future[Linted]]] = {}
        # Messages found by the worker (configuration errors, files too large), to show.
        self._messages: list[tuple[str, lsp.MessageType]] = []
        self._too_large: set[str] = set()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xla-lint")
        self._on(lsp.INITIALIZE, self.initialize)
        self._on(lsp.INITIALIZED, self.initialized)
        self._on(lsp.TEXT_DOCUMENT_DID_OPEN, self.did_open)
        self._on(lsp.TEXT_DOCUMENT_DID_CHANGE, self.did_change)
        self._on(lsp.TEXT_DOCUMENT_DID_SAVE, self.did_save)
        self._on(lsp.TEXT_DOCUMENT_DID_CLOSE, self.did_close)
        self._on(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES, self.did_change_watched_files)
        kinds = [lsp.CodeActionKind.QuickFix, FIX_ALL]
        self._on(
            lsp.TEXT_DOCUMENT_CODE_ACTION,
            self.code_action,
            lsp.CodeActionOptions(code_action_kinds=kinds),
        )
        self._on(lsp.TEXT_DOCUMENT_HOVER, self.hover)

    def _on(self, method: str, handler: Callable[[Any], Any], options: Any = None) -> None:
        """Register a method of this server as the handler of an LSP ``method`` (pygls marks
        its handlers with attributes, which a bound method cannot carry)."""

        async def run_async(params: Any) -> Any:
            return await handler(params)

        def run(params: Any) -> Any:
            return handler(params)

        self.feature(method, options)(run_async if asyncio.iscoroutinefunction(handler) else run)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """An exception in a handler, or a message that did not parse: pygls's default shows
        it to the user (``window/showMessage``, a popup); here it goes to the client's log
        (a request's error is also in its response)."""
        self.protocol.log(*describe(error))

    def shutdown(self) -> None:
        """Stop the worker thread too (a lint under way finishes; queued ones are dropped)."""
        self._worker.shutdown(wait=False, cancel_futures=True)
        super().shutdown()

    # ---- notifications -------------------------------------------------------------------

    def initialize(self, params: lsp.InitializeParams) -> None:
        """Read the client's ``initializationOptions``: ``{"debounce": SECONDS}``."""
        options = params.initialization_options
        debounce = options.get("debounce") if isinstance(options, dict) else None
        if isinstance(debounce, (int, float)) and not isinstance(debounce, bool) and debounce >= 0:
            self.debounce = float(debounce)

    def initialized(self, params: lsp.InitializedParams) -> None:
        """Ask the client to report ``*.py`` and ``pyproject.toml`` files changed on disk."""
        capability = self.client_capabilities.workspace
        watched = capability.did_change_watched_files if capability else None
        if watched is None or not watched.dynamic_registration:
            return
        watchers = [
            lsp.FileSystemWatcher(glob_pattern=pattern)
            for pattern in ("**/*.py", "**/pyproject.toml")
        ]
        self.client_register_capability(
            lsp.RegistrationParams(
                registrations=[
                    lsp.Registration(
                        id=f"{SOURCE}-watched-files",
                        method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                        register_options=lsp.DidChangeWatchedFilesRegistrationOptions(watchers),
                    )
                ]
            )
        )

    def did_open(self, params: lsp.DidOpenTextDocumentParams) -> None:
        """Lint a document as soon as it is opened."""
        self._open.add(params.text_document.uri)
        self._schedule(params.text_document.uri, 0)

    def did_change(self, params: lsp.DidChangeTextDocumentParams) -> None:
        """Lint a changed document once no change came for :attr:`debounce` seconds."""
        self._schedule(params.text_document.uri, self.debounce)

    async def did_save(self, params: lsp.DidSaveTextDocumentParams) -> None:
        """The saved text's facts become the workspace's: when they changed (``use_spmd()``
        added to ``train.py``), every open document of the folder is shown again."""
        uri = params.text_document.uri
        linted = await self._current(uri)
        path = self._path(uri)
        if path is None:
            return
        result = linted.result if linted is not None else None
        if await self._run(self._refresh, [(path, result)]):
            await self._refinish_all()

    def did_close(self, params: lsp.DidCloseTextDocumentParams) -> None:
        """Forget a closed document and clear its diagnostics."""
        uri = params.text_document.uri
        self._open.discard(uri)
        task = self._pending.pop(uri, None)
        if task is not None:
            task.cancel()
        self.linted.pop(uri, None)
        path = self._path(uri)
        if path is not None:
            self._worker.submit(self._forget, path)
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[])
        )

    async def did_change_watched_files(self, params: lsp.DidChangeWatchedFilesParams) -> None:
        """Files changed on disk: a ``pyproject.toml`` reloads the settings (every document is
        linted again); a Python file's facts are read again."""
        paths = [p for p in (to_fs_path(c.uri) for c in params.changes) if p is not None]
        if any(os.path.basename(p) == "pyproject.toml" for p in paths):
            await self._run(self.projects.clear)
            self.linted.clear()
            for uri in list(self._open):
                self._schedule(uri, 0)
            return
        changed: list[tuple[str, FileResult | None]] = [
            (os.path.normpath(p), None) for p in paths if p.endswith(PYTHON_SUFFIXES)
        ]
        if not changed:
            return
        if await self._run(self._refresh, changed):
            await self._refinish_all()

    # ---- requests ------------------------------------------------------------------------

    async def code_action(self, params: lsp.CodeActionParams) -> list[lsp.CodeAction] | None:
        """Quick fixes for the diagnostics in the range (each safe fix, and ``# noqa``), and
        ``source.fixAll.xla-lint`` when the client asks for source actions."""
        uri = params.text_document.uri
        linted = await self._current(uri)
        path = self._path(uri)
        if linted is None or linted.result is None or path is None:
            return None
        only = params.context.only

        def wanted(kind: str) -> bool:
            return only is None or any(kind == k or kind.startswith(f"{k}.") for k in only)

        project = await self._run(self._project, path)
        unsafe = project.settings.unsafe_fixes  # unsafe fixes are offered only when enabled
        text = Text(linted.text, self.workspace.position_codec)
        start, end = text.place(params.range.start), text.place(params.range.end)
        actions: list[lsp.CodeAction] = []
        if wanted(lsp.CodeActionKind.QuickFix):
            for d in linted.diagnostics:
                if not ((d.line, d.column) <= end and start <= (d.end_line, d.end_column)):
                    continue
                shown = [to_lsp(d, text)]
                if d.fix is not None and applies(d, unsafe):
                    fixed, applied = await self._run(apply_fixes, linted.text, [d.fix], unsafe)
                    if applied:
                        actions.append(
                            self._action(
                                f"{SOURCE} ({d.code}): {d.fix.description}"
                                + ("" if d.fix.safe else " (unsafe)"),
                                lsp.CodeActionKind.QuickFix,
                                uri,
                                text.edits_to(fixed),
                                shown,
                                preferred=d.fix.safe,
                            )
                        )
                if d.code != SYNTAX_ERROR:
                    noqa = _with_noqa(linted.text, d.line, d.code)
                    if noqa is not None:
                        actions.append(
                            self._action(
                                f"{SOURCE} ({d.code}): add `# noqa: {d.code}`",
                                lsp.CodeActionKind.QuickFix,
                                uri,
                                text.edits_to(noqa),
                                shown,
                            )
                        )
        if (
            only is not None
            and wanted(FIX_ALL)
            and any(applies(d, unsafe) for d in linted.diagnostics)
        ):

            def relint(version: str) -> list[Diagnostic]:
                return project.lint(path, version)[1]

            outcome = await self._run(fix_loop, path, linted.text, relint, unsafe)
            if outcome.applied:
                actions.append(
                    self._action(
                        f"{SOURCE}: fix all auto-fixable problems",
                        FIX_ALL,
                        uri,
                        text.edits_to(outcome.fixed),
                    )
                )
        return actions

    async def hover(self, params: lsp.HoverParams) -> lsp.Hover | None:
        """The summary of each rule reported at the position, or named in a ``# noqa`` there,
        with a link to its explanation."""
        linted = await self._current(params.text_document.uri)
        if linted is None or linted.result is None:
            return None
        text = Text(linted.text, self.workspace.position_codec)
        line, column = text.place(params.position)
        codes = [
            d.code
            for d in linted.diagnostics
            if (d.line, d.column) <= (line, column) <= (d.end_line, d.end_column)
        ]
        if line <= len(text.lines) and "noqa" in text.lines[line - 1]:
            suppressions = (
                linted.result.suppressions
                if linted.result.parsed
                else find_suppressions(linted.text)
            )
            comment = suppressions.noqa.get(line)
            if comment is not None:
                codes += [c for c, a, b in comment.code_spans if a <= column <= b]
        parts = [h for h in (hover_text(c) for c in dict.fromkeys(codes)) if h]
        if not parts:
            return None
        return lsp.Hover(
            contents=lsp.MarkupContent(
                kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)
            )
        )

    # ---- linting -------------------------------------------------------------------------

    def _schedule(self, uri: str, delay: float) -> None:
        """Lint ``uri`` after ``delay`` seconds, instead of any lint of it still waiting."""
        task = self._pending.pop(uri, None)
        if task is not None:
            task.cancel()
        task = asyncio.ensure_future(self._lint_and_publish(uri, delay))
        self._pending[uri] = task
        task.add_done_callback(
            lambda done: self._pending.pop(uri, None) if self._pending.get(uri) is done else None
        )

    async def _lint_and_publish(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        linted = await self._current(uri)
        document = self._document(uri)
        if linted is not None and document is not None and document.version == linted.version:
            self._publish(uri, linted)

    async def _current(self, uri: str) -> Linted | None:
        """The lint of the open document's current text (made now if it is not yet): None
        for a document that is not open, or not a file."""
        document = self._document(uri)
        path = self._path(uri)
        if document is None or path is None:
            return None
        version, text = document.version, document.source
        linted = self.linted.get(uri)
        if linted is not None and linted.version == version and linted.text == text:
            return linted
        running = self._running.get(uri)  # a lint of this text asked for by another request
        if running is None or running[0] != version or running[1] != text:
            future = asyncio.ensure_future(self._run(self._lint_now, uri, path, version, text))
            running = self._running[uri] = (version, text, future)
        try:
            linted = await asyncio.shield(running[2])
        except _Stale:  # edited again before its turn came: the newer text is linted instead
            return None
        except Exception as exc:  # a bug of ours: shown, and the server goes on
            self._show(f"{SOURCE}: internal error linting {path} (please report): {exc!r}")
            return None
        finally:
            if self._running.get(uri) is running and running[2].done():
                del self._running[uri]
            while self._messages:
                self._show(*self._messages.pop(0))
        if uri in self._open:
            self.linted[uri] = linted
        return linted

    def _lint_now(self, uri: str, path: str, version: int | None, text: str) -> Linted:
        """Lint ``text`` (version ``version`` of ``uri``) in the worker; raises :class:`_Stale`
        when the document changed while this lint waited its turn (typing queues one lint per
        pause: each would otherwise run, one after another, seconds behind the keyboard)."""
        document = self._document(uri)
        if document is not None and document.version != version:
            raise _Stale
        project = self._project(path)
        if not project.lints(path):
            return Linted(version, text, None)
        result, diagnostics = project.lint(path, text)
        reason = result.skipped_reason
        if reason and reason.startswith(TOO_LARGE) and path not in self._too_large:
            self._too_large.add(path)  # said once per file, as the command line says it once a run
            self._messages.append(
                (f"{SOURCE}: {path} is not linted ({reason})", lsp.MessageType.Warning)
            )
        return Linted(version, text, result, diagnostics)

    def _project(self, path: str) -> Project:
        """The project of ``path``: its workspace folder's (loaded the first time), or for a
        file outside every folder, its folder's (each file there linted alone)."""
        root = self._root_of(path)
        key = (True, root) if root is not None else (False, os.path.dirname(path))
        project = self.projects.get(key)
        if project is None:
            project = self.projects[key] = Project(root, os.path.dirname(path), self.jobs)
            if project.error:
                self._messages.append(
                    (
                        f"{SOURCE}: {project.error} (using the default settings until it is fixed)",
                        lsp.MessageType.Error,
                    )
                )
        return project

    def _root_of(self, path: str) -> str | None:
        """The innermost workspace folder holding ``path``."""
        folders = [to_fs_path(f.uri) for f in self.workspace.folders.values()]
        folders.append(self.workspace.root_path)
        best = None
        for folder in folders:
            if not folder:
                continue
            folder = os.path.normpath(folder)
            inside = (path + os.sep).startswith(folder.rstrip(os.sep) + os.sep)
            if inside and (best is None or len(folder) > len(best)):
                best = folder
        return best

    def _forget(self, path: str) -> None:
        for project in self.projects.values():
            project.forget(path)

    def _refresh(self, changes: list[tuple[str, FileResult | None]]) -> bool:
        """Take each ``(path, result or None: read the disk)`` into the projects holding it."""
        changed = False
        for path, result in changes:
            for project in list(self.projects.values()):
                if project.contains(path):
                    changed = project.refresh(path, result) or changed
        return changed

    async def _refinish_all(self) -> None:
        """Show every open document again under the projects' new program facts (its
        engine result is kept: only the facts and suppressions are applied again)."""
        for uri, linted in list(self.linted.items()):
            path = self._path(uri)
            if linted.result is None or path is None:
                continue
            project = await self._run(self._project, path)
            diagnostics = await self._run(project.finish, path, linted.result, linted.text)
            if self.linted.get(uri) is linted:
                linted.diagnostics = diagnostics
                document = self._document(uri)
                if document is not None and document.version == linted.version:
                    self._publish(uri, linted)

    # ---- helpers -------------------------------------------------------------------------

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in the worker thread (one at a time: projects are not thread-safe)."""
        return await asyncio.get_running_loop().run_in_executor(self._worker, function, *args)

    def _document(self, uri: str) -> TextDocument | None:
        """The open document ``uri`` (pygls keeps documents by their unquoted URI)."""
        return self.workspace.text_documents.get(unquote(uri)) if uri in self._open else None

    def _path(self, uri: str) -> str | None:
        """The file of a ``file:`` URI with a Python suffix; None for anything else."""
        path = to_fs_path(uri) if uri.startswith("file:") else None
        return os.path.normpath(path) if path and path.endswith(PYTHON_SUFFIXES) else None

    def _publish(self, uri: str, linted: Linted) -> None:
        text = Text(linted.text, self.workspace.position_codec)
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(
                uri=uri,
                diagnostics=[to_lsp(d, text) for d in linted.diagnostics],
                version=linted.version,
            )
        )

    def _show(self, message: str, kind: lsp.MessageType = lsp.MessageType.Error) -> None:
        self.window_show_message(lsp.ShowMessageParams(kind, message))

    @staticmethod
    def _action(
        title: str,
        kind: str,
        uri: str,
        edits: list[lsp.TextEdit],
        diagnostics: list[lsp.Diagnostic] | None = None,
        preferred: bool = False,
    ) -> lsp.CodeAction:
        return lsp.CodeAction(
            title=title,
            kind=kind,
            diagnostics=diagnostics,
            edit=lsp.WorkspaceEdit(changes={uri: edits}),
            is_preferred=preferred or None,
        )


class _Stale(Exception):
    """A queued lint whose document has changed since: dropped for the newer text's lint."""


def _with_noqa(text: str, line: int, code: str) -> str | None:
    """``text`` with ``# noqa: code`` on ``line``; None when it cannot go there (the line ends
    inside a string, or the text does not tokenize)."""
    try:
        edit = add_noqa(text, {line: {code}})
    except (SyntaxError, ValueError):
        return None
    return edit.text if edit.added else None


def serve(debounce: float = DEBOUNCE) -> int:
    """Run the server over standard input and output until the client exits it.

    Standard output carries the protocol, so anything else printed there (a warning from a
    library) goes to standard error instead. The garbage collector runs less often.
    """
    # The process's own standard output: the command line's (xla_lint.stdout) drops what is
    # written after the reader left, where the server has to see that its client is gone.
    stdin, stdout = sys.stdin.buffer, (sys.__stdout__ or sys.stdout).buffer
    sys.stdout = sys.stderr
    # A lint makes ~10^5 LibCST nodes: with the default threshold (700 allocations) the cyclic
    # collector runs hundreds of times a lint, a fifth to a quarter of its time (measured on a
    # 1,000-line file: 257 -> 190 ms). The nodes form no cycles (reference counts free them).
    gc.set_threshold(100_000, 50, 100)
    # Ctrl-C in the terminal running the server: the signal's default action ends the process
    # at once. Python's KeyboardInterrupt did nothing: pygls swallows it, then the interpreter
    # waits for ever for its thread blocked reading standard input (and a LibCST parse holds
    # the interpreter for seconds). Nothing is left half-written (the cache is written to a
    # temporary file and renamed); a shell reports 130. SIGTERM keeps its default action too.
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    XlaLintServer(debounce).start_io(stdin, stdout)
    return 0
