"""Messages the server cannot take: a body that is not JSON or not a JSON-RPC object, parameters
that are not LSP's (a negative position), a change to a document that is not open.

pygls shows each such error to the user (``window/showMessage``: a popup in most editors),
and a request whose parameters do not parse is never answered (the editor waits for it).
Here a request is answered with a JSON-RPC error (``InvalidParams``, -32602, naming the
field), everything goes to the client's log (``window/logMessage``) and the server goes on.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from .convert import SOURCE


class Ignored:
    """A message that is not handled, and why (for the log)."""

    def __init__(self, why: str) -> None:
        self.why = why


class Protocol(LanguageServerProtocol):
    """pygls's LSP protocol, except for the messages it cannot take (see the module)."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        """A message as LSP's types; :class:`Ignored` for one whose fields are not LSP's,
        after answering it with ``InvalidParams`` when it is a request."""
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            method, msg_id = data.get("method"), data.get("id")
            problem = _problem(exc)
            if not isinstance(method, str):
                return Ignored(f"ignored a message whose fields are not JSON-RPC's: {problem}")
            if isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool):
                error = JsonRpcInvalidParams(message=f"Invalid params of {method}: {problem}")
                self._send_response(msg_id, error=error.to_response_error())
                return Ignored(f"answered {method} (id {msg_id!r}) with an error: {problem}")
            return Ignored(f"ignored {method}: {problem}")

    def handle_message(self, message: Any) -> None:
        if isinstance(message, Ignored):
            self.log(message.why, lsp.MessageType.Warning)
        elif not hasattr(message, "jsonrpc"):  # a list, a number, an object without "jsonrpc"
            self.log(f"ignored a message that is not a JSON-RPC object: {_short(message)}")
        else:
            super().handle_message(message)

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(
        self, params: lsp.DidChangeTextDocumentParams
    ) -> Generator[Any, Any, None]:
        """pygls's, for an open document; a change to any other is logged and dropped."""
        uri = params.text_document.uri
        if self._workspace is None or unquote(uri) not in self._workspace.text_documents:
            self.log(f"ignored textDocument/didChange of {uri}: the document is not open")
            return
        yield from super().lsp_text_document__did_change(params)

    def log(self, message: str, kind: lsp.MessageType = lsp.MessageType.Warning) -> None:
        """Write ``message`` to the client's log (``window/logMessage``)."""
        self.notify(lsp.WINDOW_LOG_MESSAGE, lsp.LogMessageParams(kind, f"{SOURCE}: {message}"))


def describe(error: BaseException) -> tuple[str, lsp.MessageType]:
    """What pygls reports (an exception in a handler, a body that did not parse), for the log."""
    if isinstance(error, json.JSONDecodeError):
        return f"ignored a message that is not JSON: {error}", lsp.MessageType.Warning
    if isinstance(error, JsonRpcInternalError):
        where = error.data.get("traceback") if isinstance(error.data, dict) else None
        trace = "".join(where) if isinstance(where, list) else ""
        text = f"internal error (please report): {error.message}"
        return (f"{text}\n{trace}" if trace else text), lsp.MessageType.Error
    if isinstance(error, JsonRpcException):
        return error.message, lsp.MessageType.Warning
    return f"internal error (please report): {type(error).__name__}: {error}", (
        lsp.MessageType.Error
    )


def _problem(exc: JsonRpcException) -> str:
    """The fields that did not structure and why (``Position.line should be in range
    [0:2147483647], but was -1. @ $.params.position``), or pygls's message."""
    cause = exc.__cause__
    if cause is None:
        return exc.message
    try:
        from cattrs import transform_error
        from cattrs.v import format_exception

        def explain(error: BaseException, type_: Any) -> str:
            if isinstance(error, ValueError) and type_ is None:  # a validator's own words
                return str(error)
            return format_exception(error, type_)

        return "; ".join(transform_error(cause, path="$", format_exception=explain))
    except Exception:  # an exception transform_error does not know, another cattrs
        return f"{type(cause).__name__}: {cause}"


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value) if isinstance(value, (list, dict, int, float, str)) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
