"""A paced faux model for load tests (``PITRIO_FAUX_SCRIPT=load``), and the checker of its text.

A load generator drives a daemon with prompts of the form ``load n=120 rate=50 tool=1``:
:class:`LoadFaux` answers such a prompt with ``n`` text chunks at ``rate`` chunks a second (on
an absolute schedule, so a busy event loop does not stretch the reply), after one ``read``
tool call of ``load.txt`` when ``tool=1``. Any other prompt gets the plain faux echo.

Every chunk says when it was handed to the stream and where it belongs, so a client in another
process can measure latency on the one clock every Linux process shares (``CLOCK_MONOTONIC``)
and check order and completeness without a side channel:

* one character: the chunk's index modulo 64;
* five characters: the hand-off time in microseconds modulo 64**5 (17.9 minutes; a client
  unwraps it with its own reading of the clock, as a delta is never that late);
* filler up to the chunk's length, 6 to 9 characters by index.

Four characters (16.7 s) were once enough; an overloaded daemon once delivered chunks 16-17 s
late, their stamps wrapped, and the checker reported them as handed off out of order.

Coalesced deltas hold several whole chunks: :class:`ChunkChecker` reads any split of the text.
The pure helpers carry the format; :meth:`LoadFaux.stream` is the shell that paces and sends.
"""

from __future__ import annotations

import re
import time
from typing import Any

import attrs
import trio

from pitrio.actors.model_router.providers.base import EventSender
from pitrio.actors.model_router.providers.faux import FauxProvider, last_user_text
from pitrio.actors.model_router.providers.faux_pacer import Pacer
from pitrio.actors.model_router.stream_builder import StreamBuilder
from pitrio.actors.model_router.usage import make_usage
from pitrio.messages.agent import ToolResultMessage
from pitrio.messages.model import LlmContext, Model, StreamOptions

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
"""64 characters that JSON writes as themselves."""
STAMP_CHARS = 5
STAMP_MODULO = 64**STAMP_CHARS
"""Microseconds after which an embedded hand-off time wraps (17.9 minutes)."""
TOOL_FILE = "load.txt"
"""What a tool turn reads (relative to the session's working directory)."""

_PROMPT = re.compile(r"^load((?:\s+\w+=[\d.]+)*)\s*$")
_INDEX = {char: value for value, char in enumerate(ALPHABET)}


@attrs.frozen
class LoadRequest:
    """What a ``load ...`` prompt asks for."""

    chunks: int = 100
    rate: float = 50.0
    tool: bool = False


def parse_load_prompt(text: str) -> LoadRequest | None:
    """The request in a ``load n=.. rate=.. tool=0|1`` prompt; ``None`` for any other text."""
    match = _PROMPT.match(text.strip())
    if match is None:
        return None
    fields = dict(part.split("=", 1) for part in match.group(1).split())
    return LoadRequest(
        chunks=max(1, int(float(fields.get("n", 100)))),
        rate=max(0.001, float(fields.get("rate", 50.0))),
        tool=fields.get("tool", "0") not in ("0", ""),
    )


def load_prompt(request: LoadRequest) -> str:
    """The prompt asking for ``request`` (the inverse of :func:`parse_load_prompt`)."""
    return f"load n={request.chunks} rate={request.rate:g} tool={int(request.tool)}"


def chunk_length(index: int) -> int:
    """The length of chunk ``index``: 6 to 9 characters."""
    return 6 + index % 4


def _make_filler(index: int) -> str:
    count = chunk_length(index) - 1 - STAMP_CHARS
    return "".join(ALPHABET[(index * 7 + k) % 64] for k in range(count))


_FILLERS = tuple(_make_filler(index) for index in range(64))
"""A chunk's filler depends on its index modulo 64 only (its length on the index modulo 4,
its letters on ``7 * index`` modulo 64): made once, not per chunk (issue 38, the daemon
benchmark's model side)."""
_PAIRS = tuple(first + second for first in ALPHABET for second in ALPHABET)
"""Two letters of a stamp for each 12-bit value."""


def _filler(index: int) -> str:
    return _FILLERS[index % 64]


def encode_stamp(micros: int) -> str:
    """``micros`` modulo :data:`STAMP_MODULO` as :data:`STAMP_CHARS` letters of :data:`ALPHABET`
    (most significant first: two letters per 12 bits, then the last six bits)."""
    value: int = micros % STAMP_MODULO
    return _PAIRS[value >> 18] + _PAIRS[(value >> 6) & 4095] + ALPHABET[value & 63]


_PAIR_VALUES = {pair: value for value, pair in enumerate(_PAIRS)}


def decode_stamp(text: str) -> int:
    """The inverse of :func:`encode_stamp` (``KeyError`` for a character outside the set)."""
    if len(text) == STAMP_CHARS:  # every stamp read back: three look-ups (issue 38)
        return (_PAIR_VALUES[text[:2]] << 18) | (_PAIR_VALUES[text[2:4]] << 6) | _INDEX[text[4]]
    value = 0
    for char in text:
        value = value * 64 + _INDEX[char]
    return value


def load_chunk(index: int, micros: int) -> str:
    """Chunk ``index`` of a reply, handed off at ``micros`` (CLOCK_MONOTONIC)."""
    return ALPHABET[index % 64] + encode_stamp(micros) + _filler(index)


def chunk_deadline(start: float, interval: float, index: int) -> float:
    """When chunk ``index`` of a reply started at ``start`` is due (trio's clock)."""
    return start + (index + 1) * interval


def chunks_due(start: float, interval: float, sent: int, total: int, now: float) -> int:
    """How many chunks after the ``sent`` already handed off are due at ``now`` (at most the
    ``total - sent`` left). Computed with :func:`chunk_deadline`, the same float expression
    the sleeps use, so a chunk whose deadline a sleep reached counts as due."""
    due = 0
    while sent + due < total and chunk_deadline(start, interval, sent + due) <= now:
        due += 1
    return due


def monotonic_micros() -> int:
    """CLOCK_MONOTONIC in microseconds: the clock every process of the machine shares."""
    return time.monotonic_ns() // 1000


class ChunkChecker:
    """One reply's text read back, delta by delta: each chunk's latency, and every fault.

    :meth:`feed` takes a received delta and the time it arrived; a fault (a chunk out of
    place, a character that is not ours, time running backwards) is recorded in
    :attr:`errors` and stops the reading of this reply. :meth:`finish` checks the count and the
    final text.
    """

    def __init__(self) -> None:
        self.index = 0
        self.text: list[str] = []
        self._pending = ""
        self._last_sent: int | None = None
        self.errors: list[str] = []
        self.latencies_us: list[int] = []
        self.sent_us: list[int] = []

    def feed(self, delta: str, arrived_us: int) -> None:
        """Read the whole chunks ``delta`` completes (a delta may hold several)."""
        self.text.append(delta)
        if self.errors:
            return
        if not self._pending and len(delta) == 6 + self.index % 4:
            # The usual delta, one whole chunk (chunk_length inlined): checked as it is,
            # without the buffer's copies (the load generator's CPU counts against the daemon).
            fault = self._check(delta, arrived_us)
            if fault is not None:
                self.errors.append(f"chunk {self.index}: {fault}")
            else:
                self.index += 1
            return
        buffer = self._pending + delta
        position = 0
        while len(buffer) - position >= chunk_length(self.index):
            size = chunk_length(self.index)
            chunk = buffer[position : position + size]
            position += size
            fault = self._check(chunk, arrived_us)
            if fault is not None:
                self.errors.append(f"chunk {self.index}: {fault}")
                return
            self.index += 1
        self._pending = buffer[position:]

    def _check(self, chunk: str, arrived_us: int) -> str | None:
        if chunk[0] != ALPHABET[self.index % 64] or chunk[1 + STAMP_CHARS :] != _filler(self.index):
            return f"expected chunk {self.index}, got {chunk!r} (missing or out of order)"
        try:
            stamp = decode_stamp(chunk[1 : 1 + STAMP_CHARS])
        except KeyError:
            return f"not a load chunk: {chunk!r}"
        latency = (arrived_us - stamp) % STAMP_MODULO
        sent = arrived_us - latency
        if self._last_sent is not None and sent < self._last_sent:
            return "handed off before the chunk ahead of it (out of order)"
        self._last_sent = sent
        self.latencies_us.append(latency)
        self.sent_us.append(sent)
        return None

    def finish(self, expected_chunks: int, final_text: str | None) -> list[str]:
        """Every fault of the reply: those met while reading, a count short or long, leftover
        characters, a final message whose text is not what the deltas built."""
        faults = list(self.errors)
        if not self.errors:
            if self._pending:
                faults.append(f"{len(self._pending)} characters after chunk {self.index}")
            if self.index != expected_chunks:
                faults.append(f"{self.index} chunks received, {expected_chunks} sent")
        if final_text is not None and final_text != "".join(self.text):
            faults.append("the final message's text differs from its deltas")
        return faults


class LoadFaux(FauxProvider):
    """The faux provider answering ``load ...`` prompts with paced, self-describing chunks."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pacer = Pacer()
        """Every reply's chunk sleeps on one timer (:mod:`.faux_pacer`)."""

    async def stream(
        self, model: Model, context: LlmContext, options: StreamOptions, send: EventSender
    ) -> None:
        """A load reply for a load prompt, else the plain faux behaviour."""
        request = parse_load_prompt(last_user_text(context))
        if request is None:
            await super().stream(model, context, options, send)
            return
        tool_done = bool(context.messages) and isinstance(context.messages[-1], ToolResultMessage)
        if request.tool and not tool_done:
            await self._tool_turn(model, send)
        else:
            await self._text_turn(model, request, send)

    async def _tool_turn(self, model: Model, send: EventSender) -> None:
        builder = StreamBuilder.for_model(model, usage=make_usage(output=8))
        arguments: dict[str, Any] = {"path": TOOL_FILE}
        await send.send(builder.start())
        await send.send(builder.toolcall_start(self.next_tool_call_id(), "read"))
        await send.send(builder.toolcall_delta('{"path":"' + TOOL_FILE + '"}'))
        await send.send(builder.toolcall_end(arguments=arguments))
        await send.send(builder.done("toolUse"))

    async def _text_turn(self, model: Model, request: LoadRequest, send: EventSender) -> None:
        usage = make_usage(input=16, output=2 * request.chunks)
        builder = StreamBuilder.for_model(model, usage=usage)
        await send.send(builder.start())
        await send.send(builder.text_start())
        interval = 1.0 / request.rate
        start = trio.current_time()
        index = 0
        while index < request.chunks:
            # An absolute schedule: a late wake-up is not added to every later chunk.
            deadline = chunk_deadline(start, interval, index)
            if trio.current_time() < deadline:
                await self.pacer.sleep_until(deadline)
            else:
                await trio.lowlevel.checkpoint()  # abort is still seen between batches
            # Every chunk due by now goes out in this one wake-up, each stamped as it is handed
            # off, without a task switch each (issue 27): a wake-up late by several intervals
            # costs one timed sleep, not one per chunk, and the agent loop takes them together.
            due = max(1, chunks_due(start, interval, index, request.chunks, trio.current_time()))
            for chunk in range(index, index + due):
                event = builder.text_delta(load_chunk(chunk, monotonic_micros()))
                # Into the channel without a task switch (or a coroutine: ~1 % of the daemon,
                # issue 38) when it has room; full (the loop is behind), the provider waits,
                # as a real one would (back-pressure).
                try:
                    send.send_nowait(event)
                except trio.WouldBlock:
                    await send.send(event)
            index += due
        await send.send(builder.text_end())
        await send.send(builder.done("stop"))


__all__ = [
    "STAMP_MODULO",
    "TOOL_FILE",
    "ChunkChecker",
    "LoadFaux",
    "LoadRequest",
    "chunk_deadline",
    "chunk_length",
    "chunks_due",
    "decode_stamp",
    "encode_stamp",
    "load_chunk",
    "load_prompt",
    "monotonic_micros",
    "parse_load_prompt",
]
