"""The language server (``xla-lint server``), driven by pygls's own LanguageClient.

Most tests run the server in this process, in a thread, connected to the client by two
pipes carrying real JSON-RPC (the bytes an editor would send), with no debounce. One test
starts ``python -m xla_lint server`` as an editor does and talks to it over its standard
input and output.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pygls")

from lsprotocol import types as lsp
from pygls.io_ import StdinAsyncReader, StdoutWriter, run_async
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

from xla_lint.server import XlaLintServer

TIMEOUT = 60  # seconds for any one message (a loaded machine parses slowly)

TRAIN = """\
import torch_xla.runtime as xr

import model

xr.use_spmd()
model.run()
"""

MODEL = """\
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr


def run():
    if xr.global_ordinal() == 0:
        print("host 0", flush=True)
    device = xm.xla_device()
    return device
"""


class Recorder:
    """Wraps a transport to keep every JSON-RPC message that goes through it."""

    def __init__(self, log: list[tuple[str, dict]], direction: str, inner: Any) -> None:
        self.log, self.direction, self.inner = log, direction, inner

    def write(self, data: bytes) -> None:
        self.log.append((self.direction, json.loads(data.split(b"\r\n\r\n", 1)[1])))
        self.inner.write(data)

    def close(self) -> None:
        self.inner.close()

    def readline(self):  # reader side: headers pass through
        return self.inner.readline()

    async def readexactly(self, n: int) -> bytes:
        body = await self.inner.readexactly(n)
        if body:
            self.log.append((self.direction, json.loads(body)))
        return body


class Session:
    """An in-process xla-lint server and a pygls LanguageClient over two pipes."""

    def __init__(
        self,
        root: Path | None,
        debounce: float = 0.0,
        capabilities: lsp.ClientCapabilities | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.root = root
        self.options = options
        self.capabilities = capabilities or lsp.ClientCapabilities()
        self.registrations: list[lsp.Registration] = []
        self.server = XlaLintServer(debounce=debounce)
        self.client = LanguageClient("xla-lint-tests", "1")
        self.log: list[tuple[str, dict]] = []
        self.published: dict[str, list[lsp.PublishDiagnosticsParams]] = {}
        self.messages: list[lsp.ShowMessageParams] = []
        self._changed = asyncio.Condition()
        self.versions: dict[str, int] = {}

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        async def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
            self.published.setdefault(params.uri, []).append(params)
            async with self._changed:
                self._changed.notify_all()

        @self.client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
        def on_register(params: lsp.RegistrationParams) -> None:
            self.registrations.extend(params.registrations)

        @self.client.feature(lsp.WINDOW_SHOW_MESSAGE)
        async def on_message(params: lsp.ShowMessageParams) -> None:
            self.messages.append(params)
            async with self._changed:
                self._changed.notify_all()

    async def __aenter__(self) -> Session:
        to_server, from_client = os.pipe()
        to_client, from_server = os.pipe()
        self._client_out = os.fdopen(from_client, "wb")
        self.thread = threading.Thread(
            target=self.server.start_io,
            args=(os.fdopen(to_server, "rb"), os.fdopen(from_server, "wb")),
            daemon=True,
        )
        self.thread.start()
        self.client.protocol.set_writer(Recorder(self.log, "->", StdoutWriter(self._client_out)))
        reader = Recorder(self.log, "<-", StdinAsyncReader(os.fdopen(to_client, "rb")))
        self._reading = asyncio.ensure_future(
            run_async(
                stop_event=self.client._stop_event, reader=reader, protocol=self.client.protocol
            )
        )
        folders = (
            [lsp.WorkspaceFolder(uri=from_fs_path(str(self.root)), name=self.root.name)]
            if self.root is not None
            else None
        )
        await asyncio.wait_for(
            self.client.initialize_async(
                lsp.InitializeParams(
                    capabilities=self.capabilities,
                    root_uri=folders[0].uri if folders else None,
                    workspace_folders=folders,
                    initialization_options=self.options,
                )
            ),
            TIMEOUT,
        )
        self.client.initialized(lsp.InitializedParams())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.wait_for(self.client.shutdown_async(None), TIMEOUT)
        self.client.exit(None)
        self._client_out.close()  # the server's reader thread sees the end of its input
        await asyncio.get_running_loop().run_in_executor(None, self.thread.join, TIMEOUT)
        assert not self.thread.is_alive()
        self.client._stop_event.set()
        await asyncio.wait_for(self._reading, TIMEOUT)

    # ---- documents ------------------------------------------------------------------

    def uri(self, path: Path) -> str:
        return from_fs_path(str(path))

    def open(self, path: Path, text: str | None = None) -> str:
        uri = self.uri(path)
        self.versions[uri] = 1
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri, "python", 1, path.read_text() if text is None else text)
            )
        )
        return uri

    def change(self, uri: str, text: str) -> int:
        self.versions[uri] += 1
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(self.versions[uri], uri),
                [lsp.TextDocumentContentChangeWholeDocument(text)],
            )
        )
        return self.versions[uri]

    def save(self, uri: str) -> None:
        self.client.text_document_did_save(
            lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri))
        )

    async def diagnostics(
        self, uri: str, version: int | None = None, count: int = 1
    ) -> list[lsp.Diagnostic]:
        """The diagnostics of the ``count``-th publication for ``uri`` (at ``version``)."""

        def ready() -> bool:
            got = [
                p for p in self.published.get(uri, []) if version is None or p.version == version
            ]
            return len(got) >= count

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(ready), TIMEOUT)
        got = [p for p in self.published[uri] if version is None or p.version == version]
        return list(got[count - 1].diagnostics)

    async def actions(
        self, uri: str, diagnostic: lsp.Diagnostic, only=None
    ) -> list[lsp.CodeAction]:
        result = await asyncio.wait_for(
            self.client.text_document_code_action_async(
                lsp.CodeActionParams(
                    lsp.TextDocumentIdentifier(uri),
                    diagnostic.range,
                    lsp.CodeActionContext([diagnostic], only=only),
                )
            ),
            TIMEOUT,
        )
        return [a for a in result or [] if isinstance(a, lsp.CodeAction)]


def offset(text: str, position: lsp.Position) -> int:
    """The character offset of an LSP position (columns in UTF-16 code units)."""
    lines = text.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: position.line])
    units = 0
    column = 0
    line = lines[position.line] if position.line < len(lines) else ""
    while units < position.character:
        units += 2 if ord(line[column]) > 0xFFFF else 1
        column += 1
    return start + column


def apply(text: str, edit: lsp.WorkspaceEdit, uri: str) -> str:
    """``text`` with the workspace edit's changes for ``uri`` applied (as an editor does)."""
    assert edit.changes is not None and set(edit.changes) == {uri}
    spans = [
        (offset(text, e.range.start), offset(text, e.range.end), e.new_text)
        for e in edit.changes[uri]
    ]
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def codes(diagnostics: list[lsp.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


def workspace(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "ws"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def run(coroutine) -> Any:
    return asyncio.run(coroutine)


# ---- tests -------------------------------------------------------------------------------


def test_open_publishes_diagnostics_with_the_facts_of_the_workspace(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"train.py": TRAIN, "model.py": MODEL})

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "model.py")
            found = await s.diagnostics(uri, 1)
            assert codes(found) == ["XLA005", "XLA301"]
            spmd = next(d for d in found if d.code == "XLA005")
            # Reported only because train.py, which imports model.py, calls use_spmd().
            assert spmd.message.endswith("(SPMD is enabled in train.py)"), spmd.message
            assert spmd.range == lsp.Range(lsp.Position(5, 7), lsp.Position(5, 26))
            assert spmd.severity == lsp.DiagnosticSeverity.Warning  # an `if` that only prints
            assert spmd.source == "xla-lint"
            device = next(d for d in found if d.code == "XLA301")
            assert device.range == lsp.Range(lsp.Position(7, 13), lsp.Position(7, 28))
            assert device.severity == lsp.DiagnosticSeverity.Warning
            assert device.code_description is not None
            assert device.code_description.href == (
                "https://github.com/xla-lint/xla-lint/blob/main/docs/rules.md"
                "#xla301-deprecated-xla-device"
            )
            assert s.messages == []

    run(scenario())


def test_without_the_entry_the_spmd_finding_is_not_made(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"model.py": MODEL})

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "model.py")
            assert codes(await s.diagnostics(uri, 1)) == ["XLA301"]

    run(scenario())


def test_edit_relints_the_unsaved_text(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"train.py": TRAIN, "model.py": MODEL})

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "model.py")
            await s.diagnostics(uri, 1)
            edited = MODEL.replace("    return device\n", "    xm.mark_step()\n    return device\n")
            version = s.change(uri, edited)
            found = await s.diagnostics(uri, version)
            assert codes(found) == ["XLA005", "XLA301", "XLA302"]
            step = next(d for d in found if d.code == "XLA302")
            assert step.range == lsp.Range(lsp.Position(8, 4), lsp.Position(8, 18))
            version = s.change(uri, "import torch_xla\n")
            assert await s.diagnostics(uri, version) == []

    run(scenario())


def test_code_action_fix_applied_gives_the_fixed_text(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"train.py": TRAIN, "model.py": MODEL})

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "model.py")
            device = next(d for d in await s.diagnostics(uri, 1) if d.code == "XLA301")
            actions = await s.actions(uri, device)
            titles = [a.title for a in actions]
            assert titles == [
                "xla-lint (XLA301): call `torch_xla.device()`",
                "xla-lint (XLA301): add `# noqa: XLA301`",
            ], titles
            fix, noqa = actions
            assert fix.kind == lsp.CodeActionKind.QuickFix and fix.is_preferred
            assert fix.diagnostics is not None and fix.diagnostics[0].code == "XLA301"
            fixed = apply(MODEL, fix.edit, uri)
            assert fixed == (
                MODEL.replace(
                    "    device = xm.xla_device()", "    device = torch_xla.device()"
                ).replace("as xr\n", "as xr\nimport torch_xla\n")
            )
            silenced = apply(MODEL, noqa.edit, uri)
            assert silenced == MODEL.replace(
                "xm.xla_device()\n", "xm.xla_device()  # noqa: XLA301\n"
            )
            # The editor applies the fix: the next lint no longer reports it.
            version = s.change(uri, fixed)
            assert codes(await s.diagnostics(uri, version)) == ["XLA005"]
            version = s.change(uri, silenced)
            assert codes(await s.diagnostics(uri, version)) == ["XLA005"]

    run(scenario())


def test_fix_all_source_action(tmp_path: Path) -> None:
    text = "import torch_xla.core.xla_model as xm\n\na = xm.xla_device()\nxm.mark_step()\n"
    root = workspace(tmp_path, {"script.py": text})

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "script.py")
            found = await s.diagnostics(uri, 1)
            assert codes(found) == ["XLA301", "XLA302"]
            # The lightbulb (no kind asked for) does not compute the whole-file fix.
            quick = await s.actions(uri, found[0])
            assert all(a.kind == lsp.CodeActionKind.QuickFix for a in quick)
            actions = await s.actions(uri, found[0], only=[lsp.CodeActionKind.SourceFixAll])
            assert [a.kind for a in actions] == ["source.fixAll.xla-lint"]
            assert apply(text, actions[0].edit, uri) == (
                "import torch_xla.core.xla_model as xm\nimport torch_xla\n\n"
                "a = torch_xla.device()\ntorch_xla.sync()\n"
            )

    run(scenario())


def test_syntax_error_gives_xla000_and_the_server_goes_on(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"broken.py": "import torch_xla\n\ndef f(:\n    pass\n"})

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "broken.py")
            (error,) = await s.diagnostics(uri, 1)
            assert error.code == "XLA000"
            assert error.severity == lsp.DiagnosticSeverity.Error
            assert error.range.start == lsp.Position(2, 6)
            # No noqa comment for a syntax error (none silences it), and no fix.
            assert await s.actions(uri, error) == []
            version = s.change(uri, "import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
            assert codes(await s.diagnostics(uri, version)) == ["XLA302"]

    run(scenario())


def test_workspace_without_configuration_uses_the_defaults(tmp_path: Path) -> None:
    text = "import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\n"
    root = workspace(tmp_path, {"script.py": text})

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "script.py")
            assert codes(await s.diagnostics(uri, 1)) == ["XLA301"]
            assert s.messages == []

    run(scenario())


def test_configuration_is_read(tmp_path: Path) -> None:
    text = "import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\nxm.mark_step()\n"
    root = workspace(
        tmp_path,
        {"pyproject.toml": '[tool.xla-lint]\nignore = ["XLA301"]\n', "script.py": text},
    )

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "script.py")
            assert codes(await s.diagnostics(uri, 1)) == ["XLA302"]

    run(scenario())


def test_configuration_error_is_shown_and_the_defaults_used(tmp_path: Path) -> None:
    text = "import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\n"
    root = workspace(
        tmp_path,
        {"pyproject.toml": '[tool.xla-lint]\nselect = ["NOPE1"]\n', "script.py": text},
    )

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "script.py")
            assert codes(await s.diagnostics(uri, 1)) == ["XLA301"]
            (message,) = s.messages
            assert message.type == lsp.MessageType.Error
            assert "unknown rule code 'NOPE1' in select" in message.message
            assert "default settings" in message.message

    run(scenario())


def test_hover_shows_the_rule_summary_and_link(tmp_path: Path) -> None:
    text = (
        "import torch_xla.core.xla_model as xm\n\n"
        "device = xm.xla_device()\n"
        "xm.mark_step()  # noqa: XLA302\n"
    )
    root = workspace(tmp_path, {"script.py": text})

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "script.py")
            await s.diagnostics(uri, 1)

            async def hover(line: int, character: int) -> lsp.Hover | None:
                return await asyncio.wait_for(
                    s.client.text_document_hover_async(
                        lsp.HoverParams(
                            lsp.TextDocumentIdentifier(uri), lsp.Position(line, character)
                        )
                    ),
                    TIMEOUT,
                )

            over = await hover(2, 15)
            assert over is not None and isinstance(over.contents, lsp.MarkupContent)
            assert over.contents.kind == lsp.MarkupKind.Markdown
            assert over.contents.value == (
                "**XLA301** `deprecated-xla-device` (warning)\n\n"
                "xm.xla_device() is deprecated; use torch_xla.device().\n\n"
                "[Explanation](https://github.com/xla-lint/xla-lint/blob/main/docs/rules.md"
                "#xla301-deprecated-xla-device) · `xla-lint rule XLA301`"
            )
            on_noqa = await hover(3, 26)  # on "XLA302" in the comment
            assert on_noqa is not None and "**XLA302** `deprecated-mark-step`" in str(
                on_noqa.contents.value  # type: ignore[union-attr]
            )
            assert await hover(0, 0) is None

    run(scenario())


def test_save_updates_the_facts_of_other_documents(tmp_path: Path) -> None:
    plain = TRAIN.replace("xr.use_spmd()\n", "")
    root = workspace(tmp_path, {"train.py": plain, "model.py": MODEL})

    async def scenario() -> None:
        async with Session(root) as s:
            model = s.open(root / "model.py")
            assert codes(await s.diagnostics(model, 1)) == ["XLA301"]
            train = s.open(root / "train.py")
            await s.diagnostics(train, 1)
            s.change(train, TRAIN)  # typed, not saved: model.py keeps the facts on disk
            await s.diagnostics(train, 2)
            assert len(s.published[model]) == 1
            (root / "train.py").write_text(TRAIN)
            s.save(train)
            assert codes(await s.diagnostics(model, 1, count=2)) == ["XLA005", "XLA301"]

    run(scenario())


def test_files_changed_on_disk(tmp_path: Path) -> None:
    plain = TRAIN.replace("xr.use_spmd()\n", "")
    root = workspace(tmp_path, {"train.py": plain, "model.py": MODEL})
    watching = lsp.ClientCapabilities(
        workspace=lsp.WorkspaceClientCapabilities(
            did_change_watched_files=lsp.DidChangeWatchedFilesClientCapabilities(
                dynamic_registration=True
            )
        )
    )

    async def scenario() -> None:
        async with Session(root, capabilities=watching) as s:

            def changed(path: Path) -> None:
                event = lsp.FileEvent(s.uri(path), lsp.FileChangeType.Changed)
                s.client.workspace_did_change_watched_files(
                    lsp.DidChangeWatchedFilesParams([event])
                )

            model = s.open(root / "model.py")
            assert codes(await s.diagnostics(model, 1)) == ["XLA301"]
            (registration,) = s.registrations
            assert registration.method == "workspace/didChangeWatchedFiles"
            # `git checkout` brings a train.py that enables SPMD.
            (root / "train.py").write_text(TRAIN)
            changed(root / "train.py")
            assert codes(await s.diagnostics(model, 1, count=2)) == ["XLA005", "XLA301"]
            # A new configuration: every open file is linted again with it.
            (root / "pyproject.toml").write_text('[tool.xla-lint]\nignore = ["XLA3"]\n')
            changed(root / "pyproject.toml")
            assert codes(await s.diagnostics(model, 1, count=3)) == ["XLA005"]

    run(scenario())


def test_changes_are_debounced(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"model.py": MODEL})

    async def scenario() -> None:
        async with Session(root, debounce=0.3) as s:
            uri = s.open(root / "model.py")
            await s.diagnostics(uri, 1)
            for _ in range(3):
                version = s.change(uri, MODEL + "xm.mark_step()\n")
            assert codes(await s.diagnostics(uri, version)) == ["XLA301", "XLA302"]
            await asyncio.sleep(0.4)
            assert [p.version for p in s.published[uri]] == [1, 4]

    run(scenario())


def test_debounce_is_an_initialization_option(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with Session(workspace(tmp_path, {}), 0.15, options={"debounce": 0.05}) as s:
            assert s.server.debounce == 0.05
        async with Session(workspace(tmp_path, {}), 0.15, options={"debounce": "fast"}) as s:
            assert s.server.debounce == 0.15

    run(scenario())


def test_columns_are_utf16_code_units(tmp_path: Path) -> None:
    text = 'import torch_xla.core.xla_model as xm\n\nx = "😀"; device = xm.xla_device()\n'
    root = workspace(tmp_path, {"script.py": text})

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "script.py")
            (found,) = await s.diagnostics(uri, 1)
            # "😀" is one character but two UTF-16 code units.
            assert found.range.start == lsp.Position(2, 19)
            assert text[offset(text, found.range.start) :].startswith("xm.xla_device()")
            (fix, _) = await s.actions(uri, found)
            assert apply(text, fix.edit, uri).endswith('x = "😀"; device = torch_xla.device()\n')

    run(scenario())


def test_a_module_without_torch_xla_that_an_xla_program_imports(tmp_path: Path) -> None:
    """``data.py`` names no torch_xla, but ``train.py`` (an XLA program) imports it: the
    engine lints it with the rules about such modules (XLA202 here, a preview rule), from the
    buffer."""
    data = "import torch\n\n\ndef loader(ds):\n    return torch.utils.data.DataLoader(ds)\n"
    train = "import torch_xla\n\nimport data\n\nfor batch in data.loader([]):\n    pass\n"
    preview = "[tool.xla-lint]\npreview = true\n"
    root = workspace(tmp_path, {"train.py": train, "data.py": data, "pyproject.toml": preview})

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "data.py")
            assert await s.diagnostics(uri, 1) == []
            typed = data.replace("DataLoader(ds)", "DataLoader(ds, batch_size=8)")
            version = s.change(uri, typed)  # not saved: the disk still has the first text
            (found,) = await s.diagnostics(uri, version)
            assert found.code == "XLA202"
            assert found.range.start == lsp.Position(4, 11)

    run(scenario())


def test_paths_that_uris_quote(tmp_path: Path) -> None:
    root = tmp_path / "my work#1"
    (root / "sub dir").mkdir(parents=True)
    (root / "sub dir" / "train é.py").write_text(
        "import torch_xla.core.xla_model as xm\nxm.mark_step()\n"
    )

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "sub dir" / "train é.py")
            assert "%20" in uri
            assert codes(await s.diagnostics(uri, 1)) == ["XLA302"]
            version = s.change(uri, "import torch_xla\n")
            assert await s.diagnostics(uri, version) == []

    run(scenario())


def test_files_outside_the_workspace_and_excluded_files(tmp_path: Path) -> None:
    root = workspace(
        tmp_path,
        {
            "pyproject.toml": '[tool.xla-lint]\nexclude = ["vendored"]\n',
            "vendored/lib.py": "import torch_xla.core.xla_model as xm\nxm.mark_step()\n",
        },
    )
    alone = tmp_path / "elsewhere" / "alone.py"
    alone.parent.mkdir()
    alone.write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n")

    async def scenario() -> None:
        async with Session(root) as s:
            excluded = s.open(root / "vendored" / "lib.py")
            assert await s.diagnostics(excluded, 1) == []
            outside = s.open(alone)
            assert codes(await s.diagnostics(outside, 1)) == ["XLA302"]
            s.client.text_document_did_close(
                lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(outside))
            )
            assert await s.diagnostics(outside, None, count=2) == []

    run(scenario())


def test_session_transcript(tmp_path: Path) -> None:
    """One open -> diagnostics -> edit -> diagnostics -> code action -> apply cycle, message by
    message (``XLA_LINT_LSP_LOG=FILE`` writes it there as well)."""
    root = workspace(tmp_path, {"train.py": TRAIN, "model.py": MODEL})

    async def scenario() -> list[tuple[str, dict]]:
        async with Session(root) as s:
            uri = s.open(root / "model.py")
            await s.diagnostics(uri, 1)
            edited = MODEL + "\n\ndef step():\n    xm.mark_step()\n"
            version = s.change(uri, edited)
            found = await s.diagnostics(uri, version)
            step = next(d for d in found if d.code == "XLA302")
            fix = (await s.actions(uri, step))[0]
            version = s.change(uri, apply(edited, fix.edit, uri))
            assert codes(await s.diagnostics(uri, version)) == ["XLA005", "XLA301"]
        return s.log

    log = run(scenario())
    methods = [(d, m.get("method", "result" if "result" in m else "error")) for d, m in log]
    expected = [
        ("->", "initialize"),
        ("<-", "result"),
        ("->", "initialized"),
        ("->", "textDocument/didOpen"),
        ("<-", "textDocument/publishDiagnostics"),
        ("->", "textDocument/didChange"),
        ("<-", "textDocument/publishDiagnostics"),
        ("->", "textDocument/codeAction"),
        ("<-", "result"),
        ("->", "textDocument/didChange"),
        ("<-", "textDocument/publishDiagnostics"),
        ("->", "shutdown"),
        ("<-", "result"),
        ("->", "exit"),
    ]
    assert methods == expected
    target = os.environ.get("XLA_LINT_LSP_LOG")
    if target:
        folder = from_fs_path(str(root))

        def short(value: Any) -> Any:
            """The message with the workspace folder left out and document texts cut short."""
            if isinstance(value, dict):
                return {short(k): short(v) for k, v in value.items() if k != "jsonrpc"}
            if isinstance(value, list):
                return [short(v) for v in value]
            if isinstance(value, str):
                value = value.replace(folder, "file://WS").replace(f"{root}{os.sep}", "")
                return value if len(value) <= 70 else f"{value[:60]}... ({len(value)} chars)"
            return value

        with open(target, "w", encoding="utf-8") as handle:
            for direction, message in log:
                if message.get("method") == "initialize" or "capabilities" in str(message):
                    message = {**message, "params" if "params" in message else "result": "..."}
                handle.write(f"{direction} {json.dumps(short(message), ensure_ascii=False)}\n")


def test_server_command_over_stdio(tmp_path: Path) -> None:
    """``xla-lint server`` as an editor starts it: a process talking LSP on its standard streams."""
    root = workspace(
        tmp_path, {"script.py": "import torch_xla.core.xla_model as xm\nxm.mark_step()\n"}
    )

    async def scenario() -> None:
        client = LanguageClient("xla-lint-tests", "1")
        published: asyncio.Queue[lsp.PublishDiagnosticsParams] = asyncio.Queue()

        @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
            published.put_nowait(params)

        await client.start_io(sys.executable, "-m", "xla_lint", "server", "--stdio", cwd=str(root))
        await asyncio.wait_for(
            client.initialize_async(
                lsp.InitializeParams(
                    capabilities=lsp.ClientCapabilities(), root_uri=from_fs_path(str(root))
                )
            ),
            TIMEOUT,
        )
        client.initialized(lsp.InitializedParams())
        uri = from_fs_path(str(root / "script.py"))
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri, "python", 1, (root / "script.py").read_text())
            )
        )
        params = await asyncio.wait_for(published.get(), TIMEOUT)
        assert params.uri == uri and codes(list(params.diagnostics)) == ["XLA302"]
        await asyncio.wait_for(client.shutdown_async(None), TIMEOUT)
        client.exit(None)
        await asyncio.wait_for(client.stop(), TIMEOUT)
        assert client._server is not None and client._server.returncode == 0

    run(scenario())


def test_server_command_without_the_lsp_extra() -> None:
    code = (
        "import sys; sys.modules['pygls'] = None\nfrom xla_lint.cli import main\nmain(['server'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        "xla-lint: error: xla-lint server needs the lsp extra: pip install -e '.[lsp]' in a "
        "clone of xla-lint, or pip install 'xla-lint[lsp] @ git+REPOSITORY-URL' "
        "(docs/editors.md)\n"
    )


# ---- parsing again around an edit (xla_lint/server/incremental.py) -----------------------

SAMPLES = sorted(Path(__file__).resolve().parent.parent.glob("examples/**/*.py"))


def _edits(text: str, rng) -> list[str]:
    """Texts a keystroke or a line operation away from ``text``, one after another; each is
    made from the last one that parses (a typo is typed, then fixed)."""
    import libcst as cst

    out = []
    base = text
    for _ in range(60):
        text = base
        lines = text.splitlines(keepends=True)
        i = rng.randrange(len(lines))
        kind = rng.randrange(6)
        if kind == 0:  # a new statement line, indented as the line it goes before
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            lines.insert(i, f"{indent}value_{rng.randrange(99)} = xm.xla_device()\n")
        elif kind == 1 and len(lines) > 1:  # a line deleted
            del lines[i]
        elif kind == 2:  # a character typed somewhere in a line
            line = lines[i]
            j = rng.randrange(len(line))
            lines[i] = line[:j] + rng.choice("x(): #\n'") + line[j:]
        elif kind == 3:  # a comment line, at the margin
            lines.insert(i, "# note\n")
        elif kind == 4:  # a blank line
            lines.insert(i, "\n")
        else:  # a line copied elsewhere
            lines.insert(rng.randrange(len(lines)), lines[i])
        text = "".join(lines)
        out.append(text)
        try:
            cst.parse_module(text)
            base = text
        except Exception:
            pass
    return out


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_reparse_around_an_edit_equals_a_full_parse(sample: Path) -> None:
    import random

    import libcst as cst

    from xla_lint.server.incremental import parsed, reparse

    rng = random.Random(sample.name)
    text = sample.read_text(encoding="utf-8")
    state = parsed(text, cst.parse_module(text))
    assert state is not None
    reused = parses = 0
    for edited in _edits(text, rng):
        try:
            full = cst.parse_module(edited)
        except Exception:
            full = None
        again = reparse(state, edited) if state is not None else None
        if again is not None:
            reused += 1
            assert full is not None, "a text that does not parse was parsed around the edit"
            assert again.module.code == edited
            assert again.module.deep_equals(full)
            expected = parsed(edited, full)
            assert expected is not None and again.starts == expected.starts
        parses += full is not None
        if full is not None:
            state = again or parsed(edited, full)
    assert reused >= parses * 0.6  # most edits are parsed around the edit, not whole


def test_lint_after_edits_equals_the_engine(tmp_path: Path) -> None:
    """The server's lint of a sequence of edits (parsed around each edit) gives the diagnostics
    and facts of the engine's lint of each text from scratch."""
    import random
    from dataclasses import replace

    from xla_lint.pipeline.run import finalize, lint_file
    from xla_lint.server.project import Project
    from xla_lint.sources.target import Target

    root = workspace(tmp_path, {"train.py": TRAIN, "model.py": MODEL})
    project = Project(str(root), str(root))
    path = str(root / "model.py")
    text = (SAMPLES[0].read_text(encoding="utf-8") if SAMPLES else MODEL) + MODEL
    rng = random.Random(0)
    for edited in [text, *_edits(text, rng)[:25]]:
        result, diagnostics = project.lint(path, edited)
        expected = lint_file(Target(path, "python"), project.settings, text=edited)
        assert result.facts == expected.facts
        assert result.diagnostics == expected.diagnostics
        shown = finalize([expected], project.program_for(path, expected), project.settings)[0]
        prefix = f"{root}{os.sep}"  # other files are named relative to the folder
        assert diagnostics == [replace(d, message=d.message.replace(prefix, "")) for d in shown]


def test_rapid_edits_lint_the_last_text_not_every_one(tmp_path: Path, monkeypatch) -> None:
    """Typing queues a lint per pause; one whose document has changed since is dropped, so the
    last text's diagnostics come one lint after the last edit, not one lint per edit later
    (a fresh user typed 20 edits at 4 a second and waited 10.7 s)."""
    from xla_lint.server import project as project_module

    root = workspace(tmp_path, {"train.py": TRAIN, "model.py": MODEL})
    linted: list[str] = []
    real = project_module.Project.lint

    def slow_lint(self, path, text):  # a lint as slow as a big file's
        linted.append(text)
        threading.Event().wait(0.2)
        return real(self, path, text)

    monkeypatch.setattr(project_module.Project, "lint", slow_lint)

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "model.py")
            await s.diagnostics(uri, 1)
            before = len(linted)
            for i in range(20):
                version = s.change(uri, MODEL + f"x = {i}\n")
                await asyncio.sleep(0.01)
            edited = MODEL + "x = 19\nxm.mark_step()\n"
            version = s.change(uri, edited)
            found = await s.diagnostics(uri, version)
            assert "XLA302" in codes(found)
            assert linted[-1] == edited
            assert len(linted) - before <= 4, len(linted) - before

    run(scenario())


def test_a_file_above_max_file_size_is_named_once(tmp_path: Path) -> None:
    big = MODEL + "".join(f"value_{i} = {i}\n" for i in range(400))
    root = workspace(
        tmp_path,
        {
            "model.py": big,
            "train.py": TRAIN,
            "pyproject.toml": '[tool.xla-lint]\nmax-file-size = "1KB"\n',
        },
    )

    async def scenario() -> None:
        async with Session(root) as s:
            uri = s.open(root / "model.py")
            assert await s.diagnostics(uri, 1) == []
            version = s.change(uri, big + "y = 1\n")
            assert await s.diagnostics(uri, version) == []
            warnings = [m for m in s.messages if m.type == lsp.MessageType.Warning]
            assert len(warnings) == 1
            assert "model.py is not linted (too large" in warnings[0].message

    run(scenario())


# ---- a client that sends what it should not; signals ------------------------------------


class RawServer:
    """``python -m xla_lint server`` over its standard streams, written to as bytes (a body
    that is not JSON cannot go through a LanguageClient). Every wait is bounded by TIMEOUT."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "xla_lint", "server"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.root = root
        self.received: queue.Queue[dict | None] = queue.Queue()
        self.log: list[dict] = []  # every message received, in order
        self.stderr = b""
        self._ids = iter(range(1, 10**6))
        threading.Thread(target=self._read, daemon=True).start()
        self._errors = threading.Thread(target=self._read_stderr, daemon=True)
        self._errors.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            length = 0
            while True:
                header = self.proc.stdout.readline()
                if not header:
                    self.received.put(None)
                    return
                if header.lower().startswith(b"content-length:"):
                    length = int(header.split(b":")[1])
                elif not header.strip():
                    break
            self.received.put(json.loads(self.proc.stdout.read(length)))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def send(self, message: dict | bytes) -> None:
        assert self.proc.stdin is not None
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def until(self, done) -> list[dict]:
        """The messages received up to and with the first that ``done`` accepts."""
        got: list[dict] = []
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = self.received.get(timeout=max(0.01, deadline - time.monotonic()))
            assert message is not None, f"the server closed its output: {self.stderr[-2000:]!r}"
            got.append(message)
            self.log.append(message)
            if done(message):
                return got

    def request(self, method: str, params: Any) -> tuple[dict, list[dict]]:
        """The response to a request, and the messages that came before it."""
        msg_id = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        got = self.until(lambda m: m.get("id") == msg_id and "method" not in m)
        return got[-1], got[:-1]

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def initialize(self) -> None:
        response, _ = self.request(
            "initialize", {"capabilities": {}, "rootUri": from_fs_path(str(self.root))}
        )
        assert "result" in response, response
        self.notify("initialized", {})

    def close(self) -> int:
        """Shut the server down as an editor does (if it is still running); its exit status."""
        try:
            if self.proc.poll() is None:
                self.request("shutdown", None)
                self.notify("exit", None)
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            return self.proc.wait(TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(TIMEOUT)
            self._errors.join(TIMEOUT)


SCRIPT = "import torch_xla.core.xla_model as xm\nxm.mark_step()\n"


def test_malformed_messages_are_logged_and_requests_answered(tmp_path: Path) -> None:
    """A change to a document that is not open, a body that is not JSON or not a JSON-RPC
    object, a position outside LSP's range: each goes to the client's log
    (``window/logMessage``), a request is answered with InvalidParams (-32602), nothing is
    shown to the user (``window/showMessage``) and the server goes on answering."""
    root = workspace(tmp_path, {"script.py": SCRIPT})
    uri = from_fs_path(str(root / "script.py"))
    unopened = from_fs_path(str(root / "other.py"))
    server = RawServer(root)
    try:
        server.initialize()

        def exchange(message: dict | bytes) -> list[dict]:
            """What the server sent for ``message``: up to the answer to a hover of an unopened
            document sent after it (null: messages are taken in order)."""
            server.send(message)
            response, before = server.request(
                "textDocument/hover",
                {"textDocument": {"uri": unopened}, "position": {"line": 0, "character": 0}},
            )
            assert response.get("result", "missing") is None, response
            return before

        def logged(message: dict | bytes) -> list[str]:
            return [m["params"]["message"] for m in exchange(message) if m.get("method") == LOG]

        LOG = "window/logMessage"
        change = {
            "textDocument": {"uri": unopened, "version": 2},
            "contentChanges": [{"text": "x = 1\n"}],
        }
        assert logged({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": change}) == [
            f"xla-lint: ignored textDocument/didChange of {unopened}: the document is not open"
        ]
        for body, said in [
            (b"[1, 2]", "ignored a message that is not a JSON-RPC object: [1, 2]"),
            (b"42", "ignored a message that is not a JSON-RPC object: 42"),
            (b'{"id": 7}', 'ignored a message that is not a JSON-RPC object: {"id": 7}'),
            (b"{not json", "ignored a message that is not JSON: Expecting property name"),
        ]:
            logs = logged(body)
            assert len(logs) == 1 and logs[0].startswith(f"xla-lint: {said}"), (body, logs)

        server.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": SCRIPT}},
        )
        server.until(lambda m: m.get("method") == "textDocument/publishDiagnostics")

        def hover(line: int, character: int) -> dict:
            return {
                "textDocument": {"uri": uri},
                "position": {"line": line, "character": character},
            }

        def actions(start: tuple[int, int], end: tuple[int, int]) -> dict:
            return {
                "textDocument": {"uri": uri},
                "range": {
                    "start": {"line": start[0], "character": start[1]},
                    "end": {"line": end[0], "character": end[1]},
                },
                "context": {"diagnostics": []},
            }

        for method, params, problem in [
            (
                "textDocument/hover",
                hover(-1, 0),
                "Position.line should be in range [0:2147483647], but was -1. @ $.params.position",
            ),
            (
                "textDocument/hover",
                hover(0, 2**31),
                "Position.character should be in range [0:2147483647], but was 2147483648.",
            ),
            (
                "textDocument/codeAction",
                actions((-3, 0), (0, 0)),
                "Position.line should be in range [0:2147483647], but was -3. @ $.params.range",
            ),
            (
                "textDocument/hover",
                {"textDocument": {"uri": uri}},
                "required field missing @ $.params.position",
            ),
        ]:
            sent = exchange({"jsonrpc": "2.0", "id": "bad", "method": method, "params": params})
            responses = [m for m in sent if m.get("id") == "bad"]
            assert len(responses) == 1 and "error" in responses[0], sent
            error = responses[0]["error"]
            assert error["code"] == -32602, error
            assert error["message"].startswith(f"Invalid params of {method}: {problem}"), error
            logs = [m["params"]["message"] for m in sent if m.get("method") == LOG]
            assert len(logs) == 1 and problem in logs[0], logs

        # Past the end of the text, inside LSP's range: nothing there, or the text's end.
        assert server.request("textDocument/hover", hover(1000, 5))[0]["result"] is None
        fixes = server.request("textDocument/codeAction", actions((0, 0), (99, 99)))[0]["result"]
        assert [a["title"] for a in fixes][:1] == ["xla-lint (XLA302): call `torch_xla.sync()`"]
        # Still answering: the rule's summary over the finding.
        found = server.request("textDocument/hover", hover(1, 4))[0]["result"]
        assert "**XLA302**" in found["contents"]["value"]
        assert [m for m in server.log if m.get("method") == "window/showMessage"] == []
    finally:
        status = server.close()
    assert status == 0


def _big_module(functions: int) -> str:
    """A module whose lint takes seconds (LibCST parses ~30 s per MB)."""
    body = "".join(
        f"def step_{i}(x):\n    device = xm.xla_device()\n    return x.to(device) * {i}\n"
        for i in range(functions)
    )
    return "import torch_xla.core.xla_model as xm\n" + body


@pytest.mark.parametrize("name, linting", [("SIGINT", False), ("SIGINT", True), ("SIGTERM", True)])
def test_server_command_ends_on_a_signal(tmp_path: Path, name: str, linting: bool) -> None:
    """Ctrl-C in the terminal running ``xla-lint server`` (SIGINT) or a request to end
    (SIGTERM) ends it at once, idle or in the middle of a lint (whose LibCST parse holds the
    interpreter for seconds): killed by the signal, as a shell reports with status 128 + its
    number (130 for Ctrl-C), without a traceback."""
    signum = getattr(signal, name)
    root = workspace(tmp_path, {"big.py": _big_module(3000)})
    server = RawServer(root)
    try:
        server.initialize()
        if linting:
            server.notify(
                "textDocument/didOpen",
                {
                    "textDocument": {
                        "uri": from_fs_path(str(root / "big.py")),
                        "languageId": "python",
                        "version": 1,
                        "text": (root / "big.py").read_text(),
                    }
                },
            )
            time.sleep(0.5)  # the lint has started; it takes seconds
        sent = time.monotonic()
        server.proc.send_signal(signum)
        status = server.proc.wait(10)
        took = time.monotonic() - sent
    finally:
        server.close()
    assert status == -signum
    assert took < 5, took
    if linting:  # it was still linting: no diagnostics came
        while not server.received.empty():
            message = server.received.get_nowait()
            assert message is None or message.get("method") != "textDocument/publishDiagnostics"
    assert b"Traceback" not in server.stderr, server.stderr.decode(errors="replace")


def test_a_buffer_is_linted_with_its_folders_own_configuration(tmp_path: Path) -> None:
    """A workspace folder below the root with its own [tool.xla-lint]: the editor showed the
    root's rules for its files (the command line now lints each file with its nearest one)."""
    from xla_lint.server.project import Project

    removed = (
        "import torch_xla.core.xla_model as xm\nd = xm.xla_device()\nn = xm.xrt_world_size()\n"
    )
    (tmp_path / "pyproject.toml").write_text('[tool.xla-lint]\nignore = ["XLA013"]\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text('[tool.xla-lint]\nselect = ["XLA013"]\n')
    project = Project(str(tmp_path), str(tmp_path))
    assert project.error is None
    top = [d.code for d in project.lint(str(tmp_path / "a.py"), removed)[1]]
    sub = [d.code for d in project.lint(str(tmp_path / "sub" / "b.py"), removed)[1]]
    assert (top, sub) == (["XLA301"], ["XLA013"])
    (tmp_path / "sub" / "pyproject.toml").write_text('[tool.xla-lint]\nselect = ["NOPE"]\n')
    broken = Project(str(tmp_path), str(tmp_path))  # shown as the folder's error, linted on
    assert broken.error and "NOPE" in broken.error
    assert [d.code for d in broken.lint(str(tmp_path / "sub" / "b.py"), removed)[1]] == ["XLA301"]
