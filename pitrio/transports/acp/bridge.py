"""One ACP session: a pitrio session run in this process behind an RPC server on in-memory
pipes (as the terminal chat runs one), driven with RPC commands, its event lines turned into
ACP updates (:mod:`mapping`) and its extension dialogs into permission requests.

Why RPC lines and not the session handle: every command then behaves exactly as in
``pitrio --mode rpc`` (prompt funnel, dispositions, dialogs, errors, shutdown), which the RPC
tests already hold to pi's behaviour; the bridge only translates.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs
import orjson
import trio
from trio_websocket import ConnectionClosed

from pitrio.errors import PitrioError, collapse_groups
from pitrio.sdk.models import ModelRouterHandle
from pitrio.sdk.session import SessionOptions, SessionRuntime
from pitrio.transports.acp.jsonrpc import INTERNAL_ERROR, RpcError
from pitrio.transports.acp.mapping import Translator, commands_update, history_updates
from pitrio.transports.acp.messages import ImageBlock, PlanUpdate, StopReason, Update
from pitrio.transports.acp.relink import Connect, Relink
from pitrio.transports.chat import RpcLink, byte_pipe
from pitrio.transports.rpc.server import SHUTDOWN_SECONDS, RpcServer


class Link(Protocol):
    """Lines to and from a session: the chat's in-memory pipes or a daemon's websocket."""

    async def send_message(self, message: str) -> None:
        """Send one command line."""

    async def get_message(self) -> str | bytes:
        """The next line (``ConnectionClosed`` at the end)."""

    async def aclose(self) -> None:
        """End both ways."""


Notify = Callable[[Update], Awaitable[None]]
"""Sends one ``session/update`` of this session to the client."""
Ask = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""Sends a request to the client and returns its result (raises :class:`RpcError`)."""


@attrs.frozen(slots=True)
class Config:
    """What a session's config options show: its model (``provider/id``) and the models to
    choose from, its thinking level and the levels its model offers."""

    model: str
    models: tuple[tuple[str, str], ...]
    level: str
    levels: tuple[str, ...]


@attrs.define
class _Settle:
    """A prompt waiting for the run it joined to settle."""

    done: trio.Event = attrs.Factory(trio.Event)
    reason: StopReason = "end_turn"
    error: str | None = None


class Bridge:
    """The ACP side of one running session (made by :func:`run_bridge`)."""

    def __init__(self, link: Link, cwd: str, notify: Notify, ask: Ask) -> None:
        self.link, self.cwd, self.notify, self.ask = link, cwd, notify, ask
        self.translator = Translator(cwd)
        self.session_id = ""
        self.closed = trio.Event()
        self.finished = trio.Event()
        """Set once the session's actors have stopped (its file is complete)."""
        self._ids = 0
        self._id_prefix = f"acp-{secrets.token_hex(4)}"
        """Command ids of this bridge: a daemon session applies an id once and remembers
        it, so another ACP process's ``acp-1`` must not pass for a repeat of this one's."""
        self._dialogs: set[Any] = set()
        """Dialogs being asked (a resumed link shows a waiting one again: asked once)."""
        self._calls: dict[str, tuple[trio.Event, list[dict[str, Any]]]] = {}
        self._settles: list[_Settle] = []
        self._cancelled = False
        self._unaccepted = 0
        """Prompt requests read (:meth:`hold`) and not yet taken or refused by the session."""
        self._accepted = trio.Event()
        self.closing = False
        """Set by :func:`close_bridge`: prompts still waiting answer ``cancelled``."""
        self._send_lock = trio.Lock()

    # -- RPC commands ------------------------------------------------------------------------

    async def call(self, command: dict[str, Any]) -> Any:
        """Send an RPC command and wait for its response: its data; :class:`RpcError` with
        the RPC error's text when it failed."""
        self._ids += 1
        request_id = f"{self._id_prefix}-{self._ids}"
        answered, box = self._calls[request_id] = (trio.Event(), [])
        try:
            await self._send({**command, "id": request_id})
            await answered.wait()
        finally:
            self._calls.pop(request_id, None)
        if not box:  # the link ended first (see read_frames)
            raise RpcError(INTERNAL_ERROR, "the session has ended")
        frame = box[0]
        if not frame.get("success"):
            raise RpcError(INTERNAL_ERROR, str(frame.get("error") or "the session refused"))
        return frame.get("data")

    async def _send(self, command: dict[str, Any]) -> None:
        async with self._send_lock:
            try:
                await self.link.send_message(orjson.dumps(command).decode())
            except ConnectionClosed as exc:
                raise RpcError(INTERNAL_ERROR, "the session has ended") from exc

    # -- frames from the session ---------------------------------------------------------

    async def read_frames(self, nursery: trio.Nursery) -> None:
        """Route every line the RPC server writes, until it ends."""
        try:
            while True:
                line = await self.link.get_message()
                try:
                    frame = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # not a frame (neither server writes such a line)
                if isinstance(frame, dict):
                    await self._frame(frame, nursery)
        except ConnectionClosed:
            pass
        finally:
            for answered, _ in self._calls.values():
                answered.set()  # no response will come: the callers fail
            for settle in self._settles:
                if self.closing:
                    settle.reason = "cancelled"  # session/close ends the run it was in
                else:
                    settle.error = "the session has ended"
                settle.done.set()
            self._settles.clear()
            self.closed.set()

    async def _frame(self, frame: dict[str, Any], nursery: trio.Nursery) -> None:
        kind = frame.get("type")
        if kind == "response":
            waiting = self._calls.get(str(frame.get("id")))
            if waiting is not None:
                waiting[1].append(frame)
                waiting[0].set()
            return
        if kind == "extension_ui_request":
            if frame.get("method") == "setPlan":  # in order with the run's updates
                await self.notify(PlanUpdate.from_frame(frame.get("planEntries")))
            else:
                nursery.start_soon(self._dialog, frame)
            return
        if kind == "resync":  # events were lost with a dropped link: is a run still going?
            nursery.start_soon(self._resynced)
            return
        for update in self.translator.updates(frame):
            await self.notify(update)
        if kind == "agent_settled":
            reason = self.translator.settled_reason(
                aborted=bool(frame.get("aborted")) or self._cancelled
            )
            error = self.translator.error if reason == "end_turn" else None
            self._cancelled = False
            for settle in self._settles:
                settle.reason, settle.error = reason, error
                settle.done.set()
            self._settles.clear()

    async def _resynced(self) -> None:
        """The daemon no longer held the events a resumed link missed: a prompt waiting for
        a settle that was among them ends now if no run is going (else at the run's)."""
        with contextlib.suppress(RpcError):
            state = await self.call({"type": "get_state"})
            if isinstance(state, dict) and not state.get("isStreaming"):
                for settle in self._settles:
                    settle.done.set()
                self._settles.clear()

    # -- ACP methods ---------------------------------------------------------------------------

    async def prompt(self, text: str, images: tuple[ImageBlock, ...], *, steer: bool) -> StopReason:
        """Send a prompt and wait for the run it started or joined to settle (while a run is
        in progress a prompt is a follow-up, or steers when asked): the run's stop reason.
        The caller holds the bridge (:meth:`hold`); the hold ends at acceptance."""
        settle = _Settle()
        self._settles.append(settle)  # before sending: the settle may come first
        command: dict[str, Any] = {
            "type": "prompt",
            "message": text,
            "streamingBehavior": "steer" if steer else "followUp",
        }
        if images:
            command["images"] = [
                {"type": "image", "data": image.data, "mimeType": image.mime_type}
                for image in images
            ]
        try:
            accepted = await self.call(command)
        except RpcError:
            self._forget(settle)
            raise
        finally:
            self.release()
        if isinstance(accepted, dict) and accepted.get("disposition") == "handled":
            self._forget(settle)  # an extension command: no run
            return "end_turn"
        await settle.done.wait()
        if settle.error is not None:
            raise RpcError(INTERNAL_ERROR, settle.error)
        return settle.reason

    def hold(self) -> None:
        """A prompt request for this session has been read: a ``session/cancel`` read after
        it waits until the session has taken that prompt (see :meth:`cancel`). Each hold is
        ended by :meth:`prompt` (at the prompt's acceptance) or :meth:`release`."""
        self._unaccepted += 1

    def release(self) -> None:
        """End one :meth:`hold`."""
        self._unaccepted -= 1
        if not self._unaccepted:
            self._accepted.set()
            self._accepted = trio.Event()

    def _forget(self, settle: _Settle) -> None:
        if settle in self._settles:
            self._settles.remove(settle)

    async def cancel(self) -> None:
        """``session/cancel``: abort the run (its prompts answer ``cancelled``)."""
        # A prompt still on its way would start its run after the abort: wait until the
        # session has taken it, so the abort stops that run too.
        while self._unaccepted and not self.closed.is_set():
            await self._accepted.wait()
        self._cancelled = bool(self._settles) or self.translator.running
        with contextlib.suppress(RpcError):  # the session has ended: nothing runs
            await self.call({"type": "abort"})

    async def replay(self) -> None:
        """Every message and tool call so far, as updates (``session/load``)."""
        data = await self.call({"type": "get_messages"})
        messages = data.get("messages") if isinstance(data, dict) else None
        for update in history_updates(self.cwd, messages if isinstance(messages, list) else []):
            await self.notify(update)

    async def send_commands(self) -> None:
        """``available_commands_update`` with the session's commands now."""
        data = await self.call({"type": "get_commands"})
        commands = data.get("commands") if isinstance(data, dict) else None
        await self.notify(commands_update(commands if isinstance(commands, list) else []))

    async def config(self) -> Config:
        """The session's model and thinking level, and the choices of each."""
        state = await self.call({"type": "get_state"})
        models = await self.call({"type": "get_available_models"})
        levels = await self.call({"type": "get_available_thinking_levels"})
        model = state.get("model") if isinstance(state, dict) else None
        current = f"{model.get('provider')}/{model.get('id')}" if isinstance(model, dict) else ""
        listed = models.get("models") if isinstance(models, dict) else None
        choices = [
            (f"{m.get('provider')}/{m.get('id')}", str(m.get("name") or m.get("id")))
            for m in (listed if isinstance(listed, list) else [])
            if isinstance(m, dict)
        ]
        if current and all(value != current for value, _ in choices):
            choices.insert(0, (current, current))
        level = str(state.get("thinkingLevel") or "off") if isinstance(state, dict) else "off"
        offered = levels.get("levels") if isinstance(levels, dict) else None
        names = tuple(str(name) for name in offered) if isinstance(offered, list) else ()
        return Config(current, tuple(choices), level, names or (level,))

    async def set_model(self, value: str) -> None:
        """Switch the session's model (``provider/id``)."""
        provider, _, model_id = value.partition("/")
        await self.call({"type": "set_model", "provider": provider, "modelId": model_id})

    async def set_thinking(self, level: str) -> None:
        """Set the thinking level."""
        await self.call({"type": "set_thinking_level", "level": level})

    async def _dialog(self, frame: dict[str, Any]) -> None:
        """An extension's dialog: ``confirm`` and ``select`` asked of the editor as a
        permission request; a dialog ACP cannot show is cancelled, a notice ignored."""
        method, dialog_id = frame.get("method"), frame.get("id")
        if method not in ("confirm", "select", "input", "editor"):
            return  # fire-and-forget UI (status, widgets, notices): nothing to answer
        if dialog_id in self._dialogs:
            return
        self._dialogs.add(dialog_id)
        answer: dict[str, Any] = {"cancelled": True}
        if method in ("confirm", "select"):
            answer = await self._ask_permission(frame)
        with contextlib.suppress(RpcError):  # the session ended meanwhile
            await self._send({"type": "extension_ui_response", "id": dialog_id, **answer})

    async def _ask_permission(self, frame: dict[str, Any]) -> dict[str, Any]:
        title = str(frame.get("title") or "")
        message = frame.get("message")
        if frame.get("method") == "confirm":
            labels = [("yes", "Yes", "allow_once"), ("no", "No", "reject_once")]
        else:
            options = frame.get("options") if isinstance(frame.get("options"), list) else []
            labels = [(str(i), str(o), "allow_once") for i, o in enumerate(options or [])]
        params = {
            "sessionId": self.session_id,
            "toolCall": {
                "toolCallId": f"dialog-{frame.get('id')}",
                "title": f"{title}\n{message}" if isinstance(message, str) and message else title,
                "kind": "other",
                "status": "pending",
            },
            "options": [{"optionId": i, "name": n, "kind": k} for i, n, k in labels],
        }
        try:
            result = await self.ask("session/request_permission", params)
        except RpcError:
            return {"cancelled": True}
        outcome = result.get("outcome") if isinstance(result, dict) else None
        chosen = outcome.get("optionId") if isinstance(outcome, dict) else None
        if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
            return {"cancelled": True}
        if frame.get("method") == "confirm":
            return {"confirmed": chosen == "yes"}
        for option_id, name, _ in labels:
            if option_id == chosen:
                return {"value": name}
        return {"cancelled": True}


async def run_bridge(
    router: ModelRouterHandle,
    options: SessionOptions,
    notify: Callable[[Bridge, Update], Awaitable[None]],
    ask: Ask,
    *,
    task_status: trio.TaskStatus[Bridge] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Start the session of ``options`` and serve it until :meth:`Bridge.close` (the
    ``task_status`` gets the bridge once the session runs; a start-up failure is an
    :class:`RpcError`)."""
    made: list[Bridge] = []
    try:
        await _run_bridge(router, options, notify, ask, made, task_status)
    finally:
        for bridge in made:
            bridge.finished.set()


async def _run_bridge(
    router: ModelRouterHandle,
    options: SessionOptions,
    notify: Callable[[Bridge, Update], Awaitable[None]],
    ask: Ask,
    made: list[Bridge],
    task_status: trio.TaskStatus[Bridge],
) -> None:
    async with trio.open_nursery() as nursery:
        runtime = SessionRuntime(nursery, router)
        try:
            try:
                with collapse_groups():
                    await runtime.start(options)
            except PitrioError as exc:
                raise RpcError(INTERNAL_ERROR, f"the session did not start: {exc}") from None
            to_server, server_in = byte_pipe()
            server_out, from_server = byte_pipe()
            server = RpcServer(runtime, router, server_out)
            link = RpcLink(to_server, from_server)
            bridge: Bridge | None = None

            async def to_client(update: Update) -> None:
                assert bridge is not None
                await notify(bridge, update)

            bridge = Bridge(link, runtime.options.cwd or "/", to_client, ask)
            made.append(bridge)
            served = trio.Event()

            async def serve() -> None:
                try:
                    await server.serve(server_in)
                finally:
                    served.set()

            nursery.start_soon(serve)
            nursery.start_soon(bridge.read_frames, nursery)
            await bridge.call({"type": "set_event_format", "updates": "delta"})
            state = await bridge.call({"type": "get_state"})
            bridge.session_id = str(state.get("sessionId"))
            task_status.started(bridge)
            await bridge.closed.wait()
            # The server ends its own way first (a run aborted, answers written), then the
            # session's actors stop.
            with trio.move_on_after(SHUTDOWN_SECONDS):
                await served.wait()
        finally:
            # The session file is complete after this (its actors may have stopped already).
            with (
                trio.CancelScope(shield=True),
                trio.move_on_after(SHUTDOWN_SECONDS),
                contextlib.suppress(PitrioError),
            ):
                await runtime.aclose()
            nursery.cancel_scope.cancel()


async def serve_link(
    connect: Connect,
    session_id: str,
    cwd: str,
    notify: Callable[[Bridge, Update], Awaitable[None]],
    ask: Ask,
    *,
    task_status: trio.TaskStatus[Bridge] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve a daemon's session over the websocket ``connect`` opens (its first frame is the
    daemon's ``attached``), connected again after a drop (:class:`Relink`), until
    :func:`close_bridge`; the daemon's session goes on."""
    made: list[Bridge] = []
    try:
        async with trio.open_nursery() as nursery:
            link = Relink(connect)
            await nursery.start(link.run)
            await link.get_message()  # ``attached``: the session is there

            async def to_client(update: Update) -> None:
                await notify(bridge, update)

            bridge = Bridge(link, cwd, to_client, ask)
            bridge.session_id = session_id
            made.append(bridge)
            nursery.start_soon(bridge.read_frames, nursery)
            task_status.started(bridge)
            await bridge.closed.wait()
            nursery.cancel_scope.cancel()
    finally:
        for bridge in made:
            bridge.finished.set()


async def close_bridge(bridge: Bridge) -> None:
    """End a session: its run is aborted, its file completed (returns when it has ended)."""
    bridge.closing = True
    await bridge.link.aclose()  # the server aborts a run, answers and ends
    await bridge.finished.wait()
