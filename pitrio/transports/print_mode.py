"""Print and JSON modes: run the prompts given on the command line, then exit (pi's ``-p``).

Print mode writes the text blocks of the final assistant message (one line each) and exits 1
with the error on stderr when that message is an error or abort. JSON mode writes the session
header, then every event as one JSON line, and exits 0 whatever the reply.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any, BinaryIO, TextIO

import attrs
import orjson
import trio

import pitrio
from pitrio import Sequenced
from pitrio.errors import unwrap_group
from pitrio.messages.agent import AssistantMessage
from pitrio.messages.codec import to_json
from pitrio.messages.content import ImageContent, TextContent
from pitrio.messages.events import (
    AgentSessionEvent,
    AgentSettled,
    BashExecutionUpdate,
    EntriesMerged,
    EntryRecorded,
    ExtensionError,
    ExtensionUiRequest,
    MessageStart,
    SessionReadOnly,
)
from pitrio.transports.interrupt import INTERRUPTED, cancel_on_signal
from pitrio.transports.rpc.events import encode_event

EXTENSION_RECORDS = (ExtensionError, ExtensionUiRequest)
"""RPC-only records: JSON mode leaves them out; extension errors go to stderr instead."""

PITRIO_ONLY_EVENTS = (EntryRecorded, BashExecutionUpdate, SessionReadOnly, EntriesMerged)
"""Events pi 1.6.0's JSON mode does not print: entries it does not announce, the RPC ``bash``
command's output, and pitrio's read-only and other-writer notices."""


def _silence_stdout() -> None:
    from pitrio.transports.cli_pipe import quiet_stream

    quiet_stream(sys.stdout)


def build_prompts(
    messages: Sequence[str], stdin_text: str | None, file_text: str = ""
) -> list[str]:
    """The prompts to run: piped stdin (trimmed), then the ``@file`` arguments' text, then the
    first message make the first prompt, as pi 1.6.0 makes it; a blank line follows the stdin
    part (pi glues it to what follows with nothing between: a documented difference)."""
    prompts = list(messages)
    head = ""
    if stdin_text:
        head = stdin_text + ("\n\n" if file_text or prompts else "")
    first = head + file_text + (prompts[0] if prompts else "")
    return [first, *prompts[1:]] if first else prompts


TRUNCATED = "Response was truncated: the model reached its output token limit."
"""pi 1.6.0's stderr line (exit 1) after a reply cut by its output limit."""


def final_reply(messages: Sequence[object]) -> tuple[list[str], str | None]:
    """What print mode shows for a transcript: (stdout lines, stderr error or None)."""
    if not messages or not isinstance(messages[-1], AssistantMessage):
        return [], None
    last = messages[-1]
    if last.stop_reason in ("error", "aborted"):
        fallback = "Request aborted" if last.stop_reason == "aborted" else "Request error"
        return [], last.error_message or fallback
    texts = [block.text for block in last.content if isinstance(block, TextContent)]
    if last.stop_reason == "length":
        return texts, TRUNCATED  # the text still prints: pi 1.6.0 shows what came
    return texts, None


def pi_event(event: AgentSessionEvent) -> AgentSessionEvent | None:
    """The event as pi 1.6.0 prints it in JSON mode; ``None`` for one it does not print.

    JSON mode prints RPC's session events (``agent_settled``, ``agent_end.willRetry``, the
    ``summarization_retry_*`` events, the entries pi announces) without the RPC-only records
    and pitrio's own additions (:data:`PITRIO_ONLY_EVENTS`, ``message_start.queueId``).
    """
    if isinstance(event, PITRIO_ONLY_EVENTS + EXTENSION_RECORDS):
        return None
    if isinstance(event, MessageStart) and event.queue_id is not None:
        return attrs.evolve(event, queue_id=None)
    return event


def report_extension_error(error: ExtensionError, err: TextIO | None) -> None:
    """An extension's failure as print and JSON modes show it (stderr, pi's wording)."""
    stream = err or sys.stderr
    stream.write(f"Extension error ({error.extension_path}): {error.error}\n")
    stream.flush()


class _JsonLines:
    """Writes events as JSON lines and counts the runs whose ``agent_settled`` it has seen."""

    def __init__(self, out: BinaryIO, err: TextIO | None = None, *, json: bool = True) -> None:
        self.out = out
        self.err = err
        self.json = json
        self.settled = 0
        self.seen = 0  # the seq of the last event taken
        self._advanced = trio.Event()

    async def write_all(self, events: trio.MemoryReceiveChannel[Sequenced]) -> None:
        async with events:
            async for item in events:
                if isinstance(item.event, ExtensionError):
                    report_extension_error(item.event, self.err)
                event = pi_event(item.event) if self.json else None
                if event is not None:
                    # The same line RPC writes (message_update in pi 1.6.0's form).
                    self.out.write(encode_event(event))
                    self.out.flush()
                if isinstance(item.event, AgentSettled):
                    self.settled += 1
                self.seen = item.seq
                self._advanced.set()
                self._advanced = trio.Event()

    async def wait_seen(self, seq: int) -> None:
        """Return once the event numbered ``seq`` (and every one before it) was written."""
        while self.seen < seq:
            await self._advanced.wait()


async def run_print_mode(
    prompts: Sequence[str],
    *,
    json_mode: bool,
    model: str | None,
    persist: bool,
    session_dir: str | None,
    thinking_level: str | None = None,
    stdout: BinaryIO | None = None,
    stderr: TextIO | None = None,
    faux: pitrio.FauxProvider | None = None,
    session_options: dict[str, Any] | None = None,
    sigint: bool = False,
    images: Sequence[ImageContent] = (),
) -> int:
    """Run ``prompts`` one after another; returns the process exit code.

    ``images`` go with the first prompt (the ``@file`` arguments' images).

    ``faux`` scripts the replies of the built-in ``faux/*`` models (default: they echo).
    With ``sigint``, SIGINT stops the prompts, the session shuts down cleanly (run aborted,
    store flushed) and :data:`~pitrio.transports.interrupt.INTERRUPTED` is returned.
    """
    out = stdout or sys.stdout.buffer
    err = stderr or sys.stderr
    options: dict[str, Any] = {
        "model": model,
        "persist": persist,
        "session_dir": session_dir,
        "thinking_level": thinking_level,
        "faux": faux,
        "mode": "json" if json_mode else "print",  # the extensions' ctx.mode
        **(session_options or {}),
    }
    if not sigint:
        return await _print_mode(prompts, images, json_mode, out, err, options, None)
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        return await _print_mode(prompts, images, json_mode, out, err, options, signals)


async def _print_mode(
    prompts: Sequence[str],
    images: Sequence[ImageContent],
    json_mode: bool,
    out: BinaryIO,
    err: TextIO,
    options: dict[str, Any],
    signals: AsyncIterator[int] | None,
) -> int:
    """:func:`run_print_mode`'s work: ``options`` for the session; ``signals`` (SIGINT)
    cancel the prompts, never the session's actors (they abort the run and flush)."""
    work = trio.CancelScope()
    try:
        async with (
            pitrio.create_session(**options) as session,
            trio.open_nursery() as nursery,
        ):
            for notice in session.notices:
                err.write(notice + "\n")
            writer = _JsonLines(out, err, json=json_mode)
            if json_mode:
                out.write(orjson.dumps(to_json(session.header)) + b"\n")
                out.flush()
            # Text mode reads the stream too: extension errors go to stderr in both modes.
            nursery.start_soon(writer.write_all, await session.subscribe())
            if signals is not None:
                nursery.start_soon(cancel_on_signal, signals, work)
            with work:
                subscribed = await session.handle.emitted_seq()  # the stream has all after
                for index, prompt in enumerate(prompts):
                    # returns once its run (if any) settled
                    await session.prompt(prompt, images=() if index else images)
                # Wait for the events emitted so far, not for one agent_settled a prompt: an
                # extension command (``/stats``) runs no agent, so none would come (issue 21).
                last = await session.handle.emitted_seq()
                if last > subscribed:
                    await writer.wait_seen(last)
                messages = await session.messages()
            nursery.cancel_scope.cancel()
    except Exception as exc:
        leaf = unwrap_group(exc)  # a nursery's group: the error inside it (issue 21)
        if isinstance(leaf, BrokenPipeError):
            # The reader went away (``pitrio --mode json ... | head``): stop quietly, and
            # give stdout a pipe of our own so the interpreter's final flush does not complain.
            _silence_stdout()
            return 0
        if isinstance(leaf, pitrio.PitrioError):
            from pitrio.transports.cli_hints import startup_error_text

            err.write(f"Error: {startup_error_text(leaf)}\n")
        else:
            err.write(f"Error: internal error: {type(leaf).__name__}: {leaf}\n")
        err.flush()
        return 1
    if work.cancelled_caught:
        return INTERRUPTED  # the session is closed and flushed by now
    if json_mode:
        return 0
    lines, error = final_reply(messages)
    for line in lines:
        out.write(line.encode() + b"\n")
    out.flush()
    if error is not None:
        err.write(error + "\n")
        err.flush()
        return 1
    return 0
