"""``pitrio`` on a terminal: a chat with a session run in this process (pi's interactive mode).

The screen is ``pitrio attach``'s (:class:`~pitrio.transports.attach_screen.ChatScreen`); the
session behind it is the one ``pitrio --mode rpc`` would run with the same command line: an
:class:`~pitrio.transports.rpc.server.RpcServer` over a pair of in-memory byte pipes, so every
flag reaches the session exactly as in RPC mode, and the frames are RPC's event lines (the
attach renderer reads those: the daemon's frames are the same lines with a ``seq``). What the
chat adds: the project-trust question asked on the terminal, the conversation so far shown
when a session is reopened, the prompts of the command line sent first, and a few ``/``
commands of pi's terminal UI (:mod:`chat_commands`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
from trio_websocket import ConnectionClosed

from pitrio.errors import PitrioError, collapse_groups
from pitrio.sdk.models import FauxProvider, ModelRouterHandle, start_model_router
from pitrio.sdk.session import ModelScope, SessionOptions, SessionRuntime
from pitrio.sdk.store import list_sessions, session_dir
from pitrio.transports.attach_render import Chunk, Style, tool_summary
from pitrio.transports.attach_screen import PROMPT, ChatScreen
from pitrio.transports.attach_terminal import Keyboard, Terminal, escape_ends_lines, stdio_terminal
from pitrio.transports.chat_commands import (
    CHAT_COMMANDS,
    PICK_MOST,
    LocalCommand,
    fork_rows,
    match_models,
    model_ref,
    model_rows,
    parse_command,
    picked,
    session_rows,
    session_text,
)
from pitrio.transports.chat_keyboard import EditingKeyboard, prompt_line_mode
from pitrio.transports.interrupt import INTERRUPTED, cancel_on_signal
from pitrio.transports.rpc.commands import ScopedModel
from pitrio.transports.rpc.scope import resolve_scope
from pitrio.transports.rpc.server import SHUTDOWN_SECONDS, RpcServer

PIPE_CHUNKS = 64
"""Writes a pipe holds before its writer waits (back-pressure, never dropped): the server's
output waits for the screen, the screen's commands for the server."""


class PipeWriter(trio.abc.SendStream):
    """The writing end of an in-memory byte pipe (:func:`byte_pipe`)."""

    def __init__(self, channel: trio.MemorySendChannel[bytes]) -> None:
        self._channel = channel

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Queue ``data`` (waits while the pipe is full); ``BrokenResourceError`` once the
        reader is gone."""
        if data:
            await self._channel.send(bytes(data))
        else:
            await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        """No useful answer here: returns at once."""
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        """The reader sees the end of the stream."""
        await self._channel.aclose()


class PipeReader(trio.abc.ReceiveStream):
    """The reading end of an in-memory byte pipe."""

    def __init__(self, channel: trio.MemoryReceiveChannel[bytes]) -> None:
        self._channel = channel
        self._pending = b""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """The next bytes written (``b""`` at the end of the stream)."""
        if not self._pending:
            try:
                self._pending = await self._channel.receive()
            except trio.EndOfChannel:
                return b""
        else:
            await trio.lowlevel.checkpoint()
        size = max_bytes or len(self._pending)
        data, self._pending = self._pending[:size], self._pending[size:]
        return data

    async def aclose(self) -> None:
        """No more reading: the writer's next write fails."""
        await self._channel.aclose()


def byte_pipe(capacity: int = PIPE_CHUNKS) -> tuple[PipeWriter, PipeReader]:
    """A one-way byte stream between two tasks of this process."""
    send, receive = trio.open_memory_channel[bytes](capacity)
    return PipeWriter(send), PipeReader(receive)


class RpcLink:
    """The screen's :class:`~pitrio.transports.attach_screen.Link` to the in-process RPC
    server: commands as lines one way, event and response lines the other."""

    def __init__(self, commands: PipeWriter, lines: PipeReader) -> None:
        self._commands, self._lines = commands, lines
        self._buffer = b""

    async def send_message(self, message: str) -> None:
        """Send one command line."""
        try:
            await self._commands.send_all(message.encode("utf-8") + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ConnectionClosed(None) from exc

    async def get_message(self) -> bytes:
        """The next line the server wrote."""
        while b"\n" not in self._buffer:
            try:
                data = await self._lines.receive_some()
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise ConnectionClosed(None) from exc
            if not data:
                raise ConnectionClosed(None)
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    async def aclose(self) -> None:
        """End both ways: the server sees the end of its input, and stops writing."""
        await self._commands.aclose()
        await self._lines.aclose()


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [str(b.get("text", "")) for b in content if isinstance(b, dict)]
    return "\n".join(part for part in parts if part)


def history_text(messages: Sequence[Mapping[str, Any]], style: Style) -> str:
    """The conversation so far, as the chat shows it when a session is reopened: prompts
    after the marker, replies' text, tool calls as one line each."""
    lines: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            lines.append(style.bold(PROMPT + _text_of(message.get("content"))))
        elif role == "assistant":
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and block.get("text"):
                    lines.append(str(block["text"]))
                elif block.get("type") == "toolCall":
                    name = str(block.get("name", "?"))
                    lines.append(f"⚙ {name} {tool_summary(name, block.get('arguments'))}")
            if message.get("stopReason") in ("error", "aborted"):
                lines.append(style.dim(f"({message.get('stopReason')})"))
        elif role == "compactionSummary":
            lines.append(style.dim("(the context was compacted here)"))
    return "\n".join(lines) + "\n" if lines else ""


class TerminalChat(ChatScreen):
    """The screen on a session of this process."""

    def __init__(
        self,
        term: Terminal,
        keys: Keyboard,
        prompts: Sequence[str] = (),
        *,
        sessions: Path | None = None,
        images: Sequence[dict[str, Any]] = (),
    ) -> None:
        super().__init__(term, keys)
        self.prompts = list(prompts)
        self.images = list(images)
        """The first prompt's images (the ``@file`` arguments'), in RPC's JSON form."""
        self.sessions = sessions
        """The folder of this directory's session files (what the picker lists)."""
        self.local: dict[str, LocalCommand] = {}
        self.waiters: dict[str, tuple[trio.Event, list[dict[str, Any]]]] = {}
        self.trust_answers: dict[tuple[str, tuple[str, ...]], str | None] = {}
        self.started = False
        self.in_command = False

    async def pick_session(self) -> Path | None:
        """The session picker (``-r``, ``/resume``): this directory's sessions, newest first,
        numbered; the file of the one chosen, ``None`` when cancelled or there is none."""
        folder = self.sessions
        infos = await trio.to_thread.run_sync(list_sessions, folder) if folder else []
        if not infos:
            self.term.text(f"No sessions to resume in {folder}.\n")
            return None
        self.term.text("Sessions of this folder, newest first:\n" + session_rows(infos))
        shown = min(len(infos), PICK_MOST)
        choice = await self._pick(shown, f"Resume 1-{shown} (Enter: cancel): ")
        return None if choice is None else infos[choice].path

    async def _pick(self, shown: int, ask: str) -> int | None:
        """A number typed for one of ``shown`` numbered rows (0-based), asked with ``ask``
        until it is one; ``None`` for an empty line or the end of input."""
        while True:
            self.term.text(ask)
            choice = picked(await self.keys.readline(), shown)
            self.term.renderer.at_line_start = True  # the terminal echoed the Enter
            if choice is None or isinstance(choice, int):
                return choice
            ask = choice

    async def ask_trust(self, title: str, options: Sequence[str]) -> str | None:
        """The project-trust question (a ``SessionOptions.trust_asker``): asked on the
        terminal at start-up; a later session of the same project (``/new``) gets the same
        answer, as pi asks once per project and process."""
        key = (title, tuple(options))
        if key not in self.trust_answers:
            if self.started:
                return None  # the keyboard is the chat's now: not trusted
            self.trust_answers[key] = await self.choose(title, list(options))
        return self.trust_answers[key]

    # -- the session -------------------------------------------------------------------------

    async def session(self) -> int:
        """The chat until its end (a :meth:`screen` connection): the exit code."""
        self.started = True
        link = self.link
        assert link is not None
        await self._call({"type": "set_event_format", "updates": "delta"})
        state = await self._call({"type": "get_state"})
        history = await self._call({"type": "get_messages"})
        messages = history.get("messages") if isinstance(history, dict) else None
        style = self.term.renderer.style
        if isinstance(messages, list) and messages:
            self.term.text(history_text(messages, style))
        await self._know(messages)
        self.term.error(style.dim(_banner(state)))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._first_prompts)
            code = await self.receive(link, None)
            nursery.cancel_scope.cancel()
        return code

    async def _know(self, messages: Any) -> None:
        """Give the keyboard the session's earlier prompts (Up recalls them, as pi's editor
        does for a reopened session) and every ``/`` name Tab completes: the chat's own and
        the session's (extension commands, prompt templates, skills)."""
        prompts = [
            _text_of(m.get("content"))
            for m in (messages if isinstance(messages, list) else [])
            if isinstance(m, dict) and m.get("role") == "user"
        ]
        listed = await self._call({"type": "get_commands"})
        commands = listed.get("commands") if isinstance(listed, dict) else None
        names = [str(c["name"]) for c in commands or [] if isinstance(c, dict) and c.get("name")]
        self.keys.know(history=prompts, commands=[*CHAT_COMMANDS, *names])

    async def _call(self, command: dict[str, Any]) -> Any:
        """Send ``command`` and read up to its response (before the screen reads: frames
        on the way are shown as usual); its data, ``None`` when it failed."""
        assert self.link is not None
        request_id = await self.send(command)
        while True:
            frame = json.loads(await self.link.get_message())
            if frame.get("type") == "response" and frame.get("id") == request_id:
                return frame.get("data") if frame.get("success") else None
            self._frame(frame)

    async def _first_prompts(self) -> None:
        """The prompts of the command line, one after another, as if typed."""
        for index, prompt in enumerate(self.prompts):
            self.term.text(("" if self.asking else PROMPT) + prompt + "\n")
            self.asking = False
            self.idle = trio.Event()
            command: dict[str, Any] = {"type": "prompt", "message": prompt}
            if self.images and not index:
                command["images"] = self.images
            await self.send_awaited(command)
            await self.idle.wait()
        self._changed()

    # -- the chat's own commands -------------------------------------------------------------

    async def command(self, line: str) -> bool:
        """A ``/`` command of the chat's own (:mod:`chat_commands`)."""
        parsed = parse_command(line)
        if parsed is None:
            return False
        self.in_command = True  # no prompt marker until the command is done
        try:
            await self._command(parsed)
        finally:
            self.in_command = False
        self._changed()
        return True

    async def _command(self, parsed: LocalCommand) -> None:
        if parsed.text:
            self.term.text(parsed.text + "\n")
        if parsed.quit:
            await self._end_of_input()
        elif parsed.resume:
            await self._resume()
        elif parsed.fork:
            await self._fork()
        elif parsed.model_query is not None:
            await self._pick_model(parsed.model_query)
        elif parsed.session_info:
            stats = await self._request({"type": "get_session_stats"})
            if not stats.get("success"):
                self.term.error(f"Error: {stats.get('error')}")
                return
            warming = await self._request({"type": "get_cache_warming"})
            self.term.text(session_text(stats.get("data") or {}, warming.get("data")) + "\n")
        elif parsed.request is not None:
            request_id = self.next_id()  # known before its response can come
            self.local[request_id] = parsed
            if parsed.runs:
                self.state.sent(request_id)  # busy until answered (a compaction)
            await self.send(parsed.request, request_id)

    async def _request(self, command: dict[str, Any]) -> dict[str, Any]:
        """Send ``command`` while the screen reads, and wait for its response frame."""
        request_id = self.next_id()
        answered, box = self.waiters[request_id] = (trio.Event(), [])
        await self.send(command, request_id)
        await answered.wait()
        return box[0]

    async def _resume(self) -> None:
        """``/resume``: pick a session, switch to it, show its conversation."""
        path = await self.pick_session()
        if path is None:
            return
        command = {"type": "switch_session", "sessionPath": str(path)}
        if await self._replace(command, "resumed") is not None:
            self.term.error(self.term.renderer.style.dim(f"(resumed {path})"))

    async def _replace(self, command: dict[str, Any], done: str) -> dict[str, Any] | None:
        """Send ``command``, which replaces the session (``switch_session``, ``fork``), and
        show the new session's conversation: the response's data, ``None`` (told as not
        ``done``) when it failed or an extension kept the current session."""
        answer = await self._request(command)
        data: dict[str, Any] = answer.get("data") or {}
        if not answer.get("success") or data.get("cancelled"):
            told = answer.get("error") or "an extension kept the current session"
            self.term.error(f"(not {done}: {told})")
            return None
        history = await self._request({"type": "get_messages"})
        messages = (history.get("data") or {}).get("messages")
        if isinstance(messages, list):
            self.term.text(history_text(messages, self.term.renderer.style))
        return data

    async def _fork(self) -> None:
        """``/fork``: pick an earlier prompt; a new session holds what came before it, and
        the prompt's text waits on the prompt line to be edited and sent (pi's editor)."""
        listed = await self._request({"type": "get_fork_messages"})
        messages = (listed.get("data") or {}).get("messages") or []
        if not messages:
            self.term.text("No prompt to fork from yet.\n")
            return
        messages = messages[-PICK_MOST:]
        self.term.text("Fork from which prompt?\n" + fork_rows(messages))
        choice = await self._pick(len(messages), f"Fork 1-{len(messages)} (Enter: cancel): ")
        if choice is None:
            return
        command = {"type": "fork", "entryId": messages[choice]["entryId"]}
        data = await self._replace(command, "forked")
        if data is None:
            return
        state = (await self._request({"type": "get_state"})).get("data") or {}
        where = state.get("sessionFile") or "not saved"
        self.term.error(self.term.renderer.style.dim(f"(forked: a new session, {where})"))
        self.keys.prefill(str(data.get("text") or ""))

    async def _pick_model(self, query: str) -> None:
        """``/model [text]``: the available models that fit ``text``; one is chosen at once,
        several are numbered to pick from (Enter: keep the current model)."""
        state = (await self._request({"type": "get_state"})).get("data") or {}
        current = model_ref(state)
        listed = await self._request({"type": "get_available_models"})
        models = match_models((listed.get("data") or {}).get("models") or [], query)
        if not models:
            self.term.text(f"No model fits {query!r} (/model lists them all).\n")
            return
        if len(models) > 1:
            self.term.text(model_rows(models, current))
            shown = min(len(models), PICK_MOST)
            choice = await self._pick(shown, f"Model 1-{shown} (Enter: keep {current}): ")
            if choice is None:
                return
            models = [models[choice]]
        model = models[0]
        chosen = {"type": "set_model", "provider": model["provider"], "modelId": model["id"]}
        answer = await self._request(chosen)
        if answer.get("success"):
            self.term.text(f"model: {model['provider']}/{model['id']}\n")
        else:
            self.term.error(f"(model not changed: {answer.get('error')})")

    def own_response(self, frame: dict[str, Any]) -> bool:
        """The response of a command of :meth:`command`: shown here."""
        if frame.get("type") == "response" and frame.get("id") in self.waiters:
            answered, box = self.waiters.pop(str(frame.get("id")))
            box.append(frame)
            answered.set()
            return True
        if frame.get("type") != "response" or frame.get("id") not in self.local:
            return False
        parsed = self.local.pop(str(frame.get("id")))
        renderer = self.term.renderer
        if not frame.get("success"):
            self.term.show([*renderer.newline(), Chunk(f"Error: {frame.get('error')}\n", True)])
            self.asking = False
        elif parsed.show is not None:
            data = frame.get("data")
            told = parsed.show(data if isinstance(data, dict) else {})
            if told:
                self.term.show(renderer.newline())
                self.term.text(told + "\n")
                self.asking = False
        return True

    def _changed(self) -> None:
        """As the screen's, but the prompt marker waits for the answers of the chat's own
        commands (events the command caused come first and must not show it early)."""
        if (self.local or self.waiters or self.in_command) and not self.busy:
            self.idle.set()
            return
        super()._changed()


def _banner(state: Any) -> str:
    data = state if isinstance(state, dict) else {}
    model = data.get("model") if isinstance(data.get("model"), dict) else {}
    assert isinstance(model, dict)
    where = data.get("sessionFile") or "not saved (--no-session)"
    return (
        f"pitrio chat · {model.get('provider')}/{model.get('id')} · session {where}\n"
        "/help for commands · Esc stops a reply · Ctrl-D leaves"
    )


async def _serve(
    runtime: SessionRuntime,
    router: ModelRouterHandle,
    scoped: Sequence[ScopedModel],
    chat: TerminalChat,
) -> int:
    """The RPC server on its pipes and the screen on the other ends, until the chat ends."""
    to_server, server_in = byte_pipe()
    server_out, from_server = byte_pipe()
    server = RpcServer(runtime, router, server_out, scoped_models=scoped)
    link = RpcLink(to_server, from_server)
    chat.link = link
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve, server_in)
        try:
            return await chat.screen(chat.session)
        finally:
            await link.aclose()  # the server aborts a run, answers and ends (see serve)


async def run_chat(
    options: SessionOptions,
    chat: TerminalChat,
    *,
    faux: FauxProvider | None = None,
    model_patterns: Sequence[str] = (),
    warnings: Sequence[str] = (),
    resume: bool = False,
) -> int:
    """Start the session of ``options`` (``resume``: of the picker's choice first) and chat
    with it on the terminal; the exit code."""
    async with trio.open_nursery() as root:
        router = await start_model_router(root, faux=faux)
        runtime = SessionRuntime(root, router)
        try:
            with trio.open_signal_receiver(signal.SIGINT) as signals:
                # Ctrl-C before the screen takes the keys (a picker, the trust question, a
                # slow start) ends the start-up, not the process: the terminal is given back.
                starting = trio.CancelScope()
                with starting:
                    root.start_soon(cancel_on_signal, signals, starting)
                    begun = await _start(runtime, router, options, chat, model_patterns, resume)
            if starting.cancelled_caught:
                code = INTERRUPTED
            elif isinstance(begun, int):
                code = begun
            else:
                notices, scoped = begun
                for line in (*warnings, *notices):
                    chat.term.error(line)
                code = await _serve(runtime, router, scoped, chat)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(SHUTDOWN_SECONDS):
                await runtime.aclose()  # the session file is complete after this
            root.cancel_scope.cancel()
    return code


async def _start(
    runtime: SessionRuntime,
    router: ModelRouterHandle,
    options: SessionOptions,
    chat: TerminalChat,
    model_patterns: Sequence[str],
    resume: bool,
) -> tuple[tuple[str, ...], tuple[ScopedModel, ...]] | int:
    """The picker (``resume``) and the session's start: the start's notices and the
    ``--models`` scope (its warnings told), or the exit code when there is nothing to chat
    with."""
    if resume:
        path = await chat.pick_session()
        if path is None:
            return 0  # pi: leaving the picker leaves
        options = attrs.evolve(options, session=str(path))
    try:
        with collapse_groups():
            scope = ModelScope()  # extensions' ctx.scoped_models, once resolved
            started = await runtime.start(
                attrs.evolve(options, trust_asker=chat.ask_trust, model_scope=scope)
            )
        scoped, warnings = await resolve_scope(router, model_patterns)
        scope.models = scoped
    except PitrioError as exc:
        from pitrio.transports.cli_hints import startup_error_text

        chat.term.error(f"Error: {startup_error_text(exc)}")
        return 1
    for line in warnings:
        chat.term.error(line)
    return tuple(started.notices), scoped


def chat_main(
    options: SessionOptions,
    prompts: Sequence[str],
    *,
    faux: FauxProvider | None = None,
    model_patterns: Sequence[str] = (),
    resume: bool = False,
    images: Sequence[dict[str, Any]] = (),
) -> int:
    """``pitrio`` on a terminal: chat until Ctrl-D, ``/quit`` or Ctrl-C when idle; ``images``
    go with the first of ``prompts``."""
    term = stdio_terminal()
    fd = sys.stdin.fileno()
    sessions = session_dir(options.cwd or os.getcwd(), override=options.session_dir)
    with escape_ends_lines(fd) as escape, prompt_line_mode(fd if term.tty else -1) as editing:
        # On a terminal each line is edited here (history, Tab, cursor keys); else as before.
        keys = EditingKeyboard(fd, term.out) if editing else Keyboard(fd, escape=escape)
        if isinstance(keys, EditingKeyboard):
            term.overlay = keys  # output moves the half-typed line down, never over it
        chat = TerminalChat(term, keys, prompts, sessions=sessions, images=images)
        try:
            return trio.run(
                lambda: run_chat(
                    options, chat, faux=faux, model_patterns=model_patterns, resume=resume
                )
            )
        except Exception as exc:  # a bug: one line, never a traceback (DESIGN.md)
            from pitrio.transports.rpc.commands import describe

            term.error(f"Error: internal error: {describe(exc)}")
            return 1
