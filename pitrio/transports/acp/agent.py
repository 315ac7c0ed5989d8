"""The ACP agent's trio shell: stdin's lines to method handlers, their answers and every
session's updates to stdout, and the agent's own requests to the editor.

Bounds: at most :data:`MAX_IN_FLIGHT` requests are handled at once (the reader waits for a
free slot: back-pressure on the client, nothing dropped); every line out goes through one
bounded channel (:data:`OUT_LINES`), whose senders wait while the client is not reading, so a
client that stops reading holds the sessions' output where each session's own buffer
coalesces or drops it (the session, not this process, bounds the memory).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from pitrio.sdk.models import ModelRouterHandle
from pitrio.sdk.session import SessionOptions
from pitrio.transports.acp.backends import Daemon, DaemonSessions, LocalSessions, Sessions
from pitrio.transports.acp.bridge import Bridge
from pitrio.transports.acp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    Invalid,
    LineFramer,
    Notification,
    Outbox,
    Request,
    Response,
    RpcError,
    decode,
    encode_error,
    encode_notification,
    encode_result,
)
from pitrio.transports.acp.messages import Update, session_update
from pitrio.transports.rpc.server import SHUTDOWN_SECONDS

MAX_IN_FLIGHT = 32
EOF_GRACE_SECONDS = 2.0
"""After the end of input: how long open requests may take to answer, and the answers to be
written (a client that stopped reading gets no more)."""
OUT_LINES = 256

Handler = Callable[[Any], Awaitable[Any]]


@attrs.define
class _Asked:
    done: trio.Event = attrs.Factory(trio.Event)
    response: Response | None = None


class AcpServer:
    """Serves one client on a byte stream pair (stdin/stdout, or pipes in tests)."""

    def __init__(
        self,
        router: ModelRouterHandle,
        options: SessionOptions,
        output: trio.abc.SendStream,
        *,
        daemon: Daemon | None = None,
        editor_files: bool = True,
    ) -> None:
        from pitrio.transports.acp.methods import Methods  # the handlers need this shell

        self.router, self.options, self._output = router, options, output
        self._editor_files = editor_files
        self.backend: Sessions = (
            LocalSessions(lambda: self.session_nursery, router, options, self.notify, self.ask)
            if daemon is None
            else DaemonSessions(lambda: self.session_nursery, daemon, self.notify, self.ask)
        )
        self._out_send, self._out_receive = trio.open_memory_channel[bytes](OUT_LINES)
        self._outbox = Outbox()
        self._asked: dict[int, _Asked] = {}
        self._limit = trio.CapacityLimiter(MAX_IN_FLIGHT)
        self.sessions: dict[str, Bridge] = {}
        self.methods = Methods(self)

    def client_files(self, declared: bool) -> None:
        """The client said (at ``initialize``) whether it serves ``fs/read_text_file`` and
        ``fs/write_text_file``: the sessions started from now on use them when allowed."""
        if isinstance(self.backend, LocalSessions):
            self.backend.editor_files = declared and self._editor_files

    # -- output ----------------------------------------------------------------------------

    async def write(self, line: bytes) -> None:
        """Queue one line for the client (waits while the client is behind)."""
        await self._out_send.send(line)

    async def notify(self, bridge: Bridge, update: Update) -> None:
        """One ``session/update`` of ``bridge``'s session."""
        await self.write(
            encode_notification("session/update", session_update(bridge.session_id, update))
        )

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        """A request to the client: its result, or :class:`RpcError` with its error."""
        request_id, line = self._outbox.request(method, params)
        asked = self._asked[request_id] = _Asked()
        try:
            await self.write(line)
            await asked.done.wait()
        finally:
            self._asked.pop(request_id, None)
            self._outbox.forget(request_id)
        response = asked.response
        assert response is not None
        if response.error is not None:
            error = response.error
            code = error.get("code")
            raise RpcError(
                code if isinstance(code, int) else INTERNAL_ERROR, str(error.get("message"))
            )
        return response.result

    async def _writer(self) -> None:
        async for line in self._out_receive:
            try:
                await self._output.send_all(line)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the client is gone: the reader sees its end too

    # -- input -----------------------------------------------------------------------------

    async def serve(self, stdin: trio.abc.ReceiveStream) -> None:
        """Serve until the end of ``stdin``; then every session is closed, the requests still
        open are answered (a prompt: ``cancelled``) and written, within a grace period."""
        async with trio.open_nursery() as outer:
            outer.start_soon(self._writer)
            async with trio.open_nursery() as handlers:
                async with trio.open_nursery() as sessions:
                    self.session_nursery = sessions
                    try:
                        await self._read(stdin, handlers)
                    finally:
                        with trio.CancelScope(shield=True), trio.move_on_after(SHUTDOWN_SECONDS):
                            await self.methods.close_all()
                        sessions.cancel_scope.cancel()
                # A request waiting on the client (a permission asked) will get no answer.
                handlers.cancel_scope.deadline = trio.current_time() + EOF_GRACE_SECONDS
            await self._out_send.aclose()  # the writer ends once what is queued is written
            outer.cancel_scope.deadline = trio.current_time() + EOF_GRACE_SECONDS

    async def _read(self, stdin: trio.abc.ReceiveStream, nursery: trio.Nursery) -> None:
        framer = LineFramer()
        while True:
            try:
                data = await stdin.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            lines = framer.feed(bytes(data)) if data else [framer.end()]
            for line in lines:
                if line is None and data:
                    await self.write(
                        encode_error(
                            None, RpcError(INVALID_REQUEST, "Invalid Request: line too long")
                        )
                    )
                elif line is not None:
                    await self._dispatch(line, nursery)
            if not data:
                return

    async def _dispatch(self, line: bytes, nursery: trio.Nursery) -> None:
        message = decode(line)
        if isinstance(message, Invalid):
            await self.write(encode_error(message.id, message.error))
        elif isinstance(message, Response):
            request_id = self._outbox.answered(message)
            asked = self._asked.get(request_id) if request_id is not None else None
            if asked is not None:
                asked.response = message
                asked.done.set()
        elif isinstance(message, Notification):
            await self.methods.notification(message.method, message.params)
        else:
            token = object()  # a request is unhashable (its params): the slot's borrower
            await self._limit.acquire_on_behalf_of(token)
            self.methods.read(message)
            nursery.start_soon(self._answer, message, token)

    async def _answer(self, request: Request, token: object) -> None:
        try:
            handler = self.methods.handler(request.method)
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {request.method}")
            result, after = await handler(request.params)
            await self.write(encode_result(request.id, result))
            if after is not None:
                await after()
        except RpcError as exc:
            await self.write(encode_error(request.id, exc))
        except Exception as exc:  # a bug: the client is told, the agent keeps serving
            from pitrio.transports.rpc.commands import describe

            sys.stderr.write(f"pitrio acp: internal error in {request.method}: {describe(exc)}\n")
            await self.write(encode_error(request.id, RpcError(INTERNAL_ERROR, "Internal error")))
        finally:
            self._limit.release_on_behalf_of(token)
