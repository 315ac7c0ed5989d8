"""Carrying out a compaction: the supervisor's plan, the summary calls, the new entry.

The policy (what to summarize, the requests, the result) is the supervisor's pure code; this
module does the I/O around it: reads the branch from the store, streams the summary requests
through the model router (a split turn's two one after the other, as pi 1.6.0), appends
the ``compaction`` entry. Everything runs in the caller's task, so the run's cancel scope (abort)
abandons a compaction before its entry is written and never half-way through it.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol

import attrs
import trio

from pitrio.actors.session_store.stored import UnknownEntry
from pitrio.actors.supervisor.compaction import (
    TURN_PREFIX_FAILURE,
    CompactionPreparation,
    CompactionSettings,
    SummaryRequest,
    combine_usage,
    finish_compaction,
    manual_compaction_refusal,
    plan_summary,
    prepare_compaction,
    response_text,
)
from pitrio.actors.supervisor.retry import RetrySettings, next_summarization_retry
from pitrio.errors import PitrioError, SummarizationError
from pitrio.messages.agent import AgentMessage, AssistantMessage, ThinkingLevel, Usage, now_ms
from pitrio.messages.entries import CompactionEntry, CompactionResult, SessionEntry
from pitrio.messages.events import (
    AgentSessionEvent,
    CompactionReason,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
)
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, EventSender, StreamDone, StreamError

StreamCall = Callable[
    [Model, LlmContext, StreamOptions, EventSender],
    Awaitable[None],
]


BeforeCompact = Callable[
    [CompactionPreparation, Sequence[SessionEntry], str | None],
    Awaitable["CompactionResult | bool | None"],
]
"""Called once a compaction is prepared (extensions' ``session_before_compact``): ``True``
cancels it, a :class:`CompactionResult` replaces the summary request, ``None`` goes on."""


class CompactionCancelledByHook(PitrioError):
    """A ``session_before_compact`` handler cancelled the compaction."""


class CompactionRefused(PitrioError):
    """A manual compaction found nothing to do (``Already compacted``, ``Nothing to compact``)."""


class CompactionStore(Protocol):
    """What compaction needs from the session store."""

    async def branch_entries(self, from_id: str | None = None) -> Sequence[Any]:
        """Entries root -> leaf (entries of unknown types included)."""
        ...

    async def context_messages(self) -> tuple[AgentMessage, ...]:
        """The projected messages at the leaf."""
        ...

    async def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str,
        tokens_before: int,
        details: Any = None,
        from_hook: bool | None = None,
        *,
        lazy: bool = False,
        usage: Usage | None = None,
    ) -> CompactionEntry:
        """Append a ``compaction`` entry (``lazy``: kept in memory until the file exists)."""
        ...


def known_entries(entries: Sequence[Any]) -> list[SessionEntry]:
    """The entries of types pitrio knows (unknown ones never reach the model)."""
    return [entry for entry in entries if not isinstance(entry, UnknownEntry)]


def uuid7() -> str:
    """A fresh UUID version 7 (RFC 9562: 48 bits of Unix milliseconds, then random bits), the
    kind pi 1.6.0 routes a summary call by; Python 3.11's ``uuid`` has no ``uuid7``."""
    millis = time.time_ns() // 1_000_000 & (1 << 48) - 1
    rand = int.from_bytes(os.urandom(10), "big")
    value = millis << 80 | 0x7 << 76 | (rand >> 62 & 0xFFF) << 64 | 0b10 << 62
    value |= rand & (1 << 62) - 1
    return str(uuid.UUID(int=value))


async def complete(
    stream: StreamCall,
    model: Model,
    request: SummaryRequest,
    thinking_level: ThinkingLevel | None,
    session_id: str | None = None,
) -> AssistantMessage:
    """Run one summary request to its final message (failures come back as messages).

    ``session_id`` routes the call (a fresh one when ``None``: pi 1.6.0 gives each summary
    call a routing id of its own, never the session's)."""
    final = await final_message(
        stream,
        model,
        request.context(now_ms()),
        request.stream_options(model, thinking_level, session_id=session_id or uuid7()),
    )
    if final is None:
        raise SummarizationError("Summarization failed: the model stream ended without a result")
    return final


async def final_message(
    stream: StreamCall, model: Model, context: LlmContext, options: StreamOptions
) -> AssistantMessage | None:
    """Run one request to its end; its final message (a failure is a message), ``None``
    when the stream ended without one."""
    send, receive = trio.open_memory_channel[AssistantMessageEvent](64)
    final: AssistantMessage | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stream_into, stream, model, context, options, send)
        async with receive:
            async for event in receive:
                if isinstance(event, StreamDone):
                    final = event.message
                elif isinstance(event, StreamError):
                    final = event.error
    return final


@attrs.frozen(kw_only=True)
class SummaryRetry:
    """How summary requests retry a transient failure (pi 1.6.0: the session's ``retry.*``
    budget and back-off), and where the ``summarization_retry_*`` events go."""

    settings: RetrySettings
    emit: Callable[[AgentSessionEvent], None]
    source: Literal["compaction", "branchSummary"]
    reason: CompactionReason | None = None


async def complete_retrying(
    stream: StreamCall,
    model: Model,
    request: SummaryRequest,
    thinking_level: ThinkingLevel | None,
    retry: SummaryRetry | None,
) -> AssistantMessage:
    """:func:`complete`, a transient failure retried after the back-off (pi 1.6.0's
    ``retryAssistantCall``): ``summarization_retry_scheduled`` before each wait,
    ``summarization_retry_attempt_start`` after it, ``summarization_retry_finished`` once
    the sequence ends (answered, failed for good, or cancelled during a wait)."""
    attempt = 0
    session_id = uuid7()  # one routing id for every attempt of the call, as pi
    while True:
        message = await complete(stream, model, request, thinking_level, session_id)
        scheduled = None
        if retry is not None and message.stop_reason == "error":
            scheduled = next_summarization_retry(
                attempt + 1, message.error_message or "", retry.settings
            )
        if scheduled is None:
            if attempt and retry is not None:
                retry.emit(SummarizationRetryFinished())
            return message
        assert retry is not None
        attempt += 1
        retry.emit(scheduled)
        try:
            await trio.sleep(scheduled.delay_ms / 1000)
        except trio.Cancelled:
            retry.emit(SummarizationRetryFinished())
            raise
        retry.emit(SummarizationRetryAttemptStart(source=retry.source, reason=retry.reason))


async def _stream_into(
    stream: StreamCall,
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    send: trio.MemorySendChannel[AssistantMessageEvent],
) -> None:
    async with send:
        await stream(model, context, options, send)


async def summarize(
    stream: StreamCall,
    model: Model,
    preparation: CompactionPreparation,
    thinking_level: ThinkingLevel | None,
    custom_instructions: str | None = None,
    retry: SummaryRetry | None = None,
) -> CompactionResult:
    """Make the plan's summary calls (each retried as ``retry`` says) and assemble the
    result.

    The calls run one after the other, the history's first, as pi 1.6.0 makes them: a
    failed history call is the compaction's error before the turn prefix is asked for, and
    each call's ``summarization_retry_*`` events stay together."""
    plan = plan_summary(preparation, custom_instructions)
    texts: dict[str, str] = {}
    usages: dict[str, Usage] = {}
    if plan.history is not None:
        message = await complete_retrying(stream, model, plan.history, thinking_level, retry)
        texts["history"] = response_text(message)
        usages["history"] = message.usage
    if plan.turn_prefix is not None:
        message = await complete_retrying(stream, model, plan.turn_prefix, thinking_level, retry)
        texts["prefix"] = response_text(message, failure=TURN_PREFIX_FAILURE)
        usages["prefix"] = message.usage
    # pi 1.6.0 adds the history's usage to the turn prefix's, in that order.
    parts = [usages[k] for k in ("history", "prefix") if k in usages]
    usage = combine_usage(*parts) if parts else None
    return finish_compaction(
        preparation, plan, texts.get("history"), texts.get("prefix"), usage=usage
    )


async def compact(
    store: CompactionStore,
    stream: StreamCall,
    model: Model,
    settings: CompactionSettings,
    thinking_level: ThinkingLevel | None,
    *,
    custom_instructions: str | None = None,
    manual: bool,
    before: BeforeCompact | None = None,
    prepared: Callable[[], None] | None = None,
    retry: SummaryRetry | None = None,
) -> tuple[CompactionResult, CompactionEntry, bool] | None:
    """Compact the store's current branch; ``None`` when there is nothing to compact.
    The third value says whether the result came from ``before`` (an extension).

    A manual compaction with nothing to do raises :class:`CompactionRefused` with pi's text;
    one that ``before`` cancels raises :class:`CompactionCancelledByHook`. ``prepared`` is
    called once there is something to compact, before ``before`` and the summary calls.
    """
    settings = settings.for_model(model.ref)  # pi 1.6.0's compaction.modelOverrides
    path = known_entries(await store.branch_entries())
    preparation = prepare_compaction(
        path, settings, context_messages=await store.context_messages()
    )
    if preparation is None:
        if manual:
            raise CompactionRefused(manual_compaction_refusal(path))
        return None
    if prepared is not None:
        prepared()
    supplied = None if before is None else await before(preparation, path, custom_instructions)
    if supplied is True:
        raise CompactionCancelledByHook("Compaction cancelled")
    if isinstance(supplied, CompactionResult):
        result = supplied
    else:
        result = await summarize(
            stream, model, preparation, thinking_level, custom_instructions, retry
        )
    from_extension = isinstance(supplied, CompactionResult)
    with trio.CancelScope(shield=True):
        # The summary is paid for: once it exists, the entry is written whole even on abort.
        # Lazy: no ``entry_appended`` announces it, so a session holding nothing else (pi:
        # "Nothing to export yet") still gets no file for it (issue 21).
        # pi writes fromHook on every compaction entry: whether an extension supplied it.
        entry = await store.append_compaction(
            result.summary,
            result.first_kept_entry_id,
            result.tokens_before,
            result.details,
            lazy=True,
            from_hook=from_extension,
            usage=result.usage,
        )
    return result, entry, from_extension
