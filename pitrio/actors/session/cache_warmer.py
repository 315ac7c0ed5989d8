"""The session's prompt-cache warmer: trio tasks over the pure :mod:`.cache_warming` policy.

One *run* keeps the cache entry of one request warm. :meth:`CacheWarmer.start` is called with
every request of the session's own conversation (summaries and other one-off calls never
start one) and replaces the previous run; :meth:`CacheWarmer.settled` moves the run to the
idle phase when the agent run ends (or stops it in ``streaming`` mode). Each run is a task
under its own cancel scope in the warmer's nursery, so replacing or cancelling a run is one
``cancel()``; waits are ``trio.sleep_until`` on trio's clock (a ``MockClock`` in tests).

A refresh re-sends the recorded request with a one-token output cap, through ``send`` (the
model router in a session) and, when the answer is neither an error nor aborted, records a
``usage`` entry of kind ``cache_warm`` through ``record`` (the session store). A failure of
either is swallowed: warming is best effort and must never touch the conversation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import attrs
import trio

from pitrio.actors.session import cache_warming as policy
from pitrio.actors.session_store.commands import DRAFT
from pitrio.messages.agent import AssistantMessage
from pitrio.messages.entries import UsageEntry
from pitrio.messages.model import LlmContext, Model, StreamOptions

Send = Callable[[Model, LlmContext, StreamOptions], Awaitable[AssistantMessage]]
"""Sends one request and returns its final message (failures as messages)."""
Record = Callable[[UsageEntry], Awaitable[object]]
"""Appends a ``usage`` entry at the session's leaf."""
Decide = Callable[[policy.Decision], Awaitable[policy.Action]]
"""The extensions' say (``cache_warming_decision``): the action to take."""
IsCurrent = Callable[[], Awaitable[bool]]
"""Whether the conversation still extends the request's prefix on the request's model."""


async def _keep(decision: policy.Decision) -> policy.Action:
    return decision.action


@attrs.frozen(kw_only=True)
class WarmRequest:
    """The request whose cache entry is kept warm, exactly as it was sent."""

    model: Model
    context: LlmContext
    options: StreamOptions


@attrs.define
class _Run:
    request: WarmRequest
    is_current: IsCurrent
    ttl: float
    delay: float
    started_at: float
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    phase: policy.Phase = "streaming"
    next_at: float = 0.0
    deadline: float = 0.0
    refreshing: bool = False
    overridden: bool = False


class CacheWarmer:
    """Keeps the last request's prompt cache warm as pi 1.6.0 does (see the module)."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_decide", "_inactive", "_mode", "_nursery", "_prompt_tokens",
        "_record", "_run", "_send", "_tokens", "refreshes",
    )
    # fmt: on

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        send: Send,
        record: Record,
        mode: Callable[[], policy.WarmingMode],
        prompt_tokens: Callable[[], Awaitable[int]],
        decide: Decide = _keep,
    ) -> None:
        self._nursery = nursery
        self._send = send
        self._record = record
        self._mode = mode
        self._prompt_tokens = prompt_tokens
        self._decide = decide
        self._run: _Run | None = None
        self._inactive = policy.Status(state="inactive", reason="waiting for first request")
        self._tokens = 0
        self.refreshes = 0
        """Refreshes recorded so far (for tests and ``/session``)."""

    # -- the session's calls --------------------------------------------------------------

    def start(self, request: WarmRequest, is_current: IsCurrent) -> None:
        """Keep ``request``'s cache entry warm while ``is_current`` holds (the conversation
        still extends the request's prefix on the same model); replaces any earlier run."""
        self._clear()
        if self._mode() == "off":
            return self._stop("cache warming disabled")
        if not policy.replayable(request.model, request.options):
            return self._stop("request cannot be replayed safely")
        ttl = policy.cache_ttl(request.model, request.options.cache_retention)
        if ttl is None:
            off = request.options.cache_retention == "none"
            return self._stop(
                "request disabled prompt caching" if off else "cache lifetime unavailable"
            )
        delay = policy.warm_delay(ttl)
        if delay is None:
            return self._stop("cache lifetime unavailable")
        run = _Run(request, is_current, ttl, delay, started_at=trio.current_time())
        self._run = run
        if self._plan(run):
            self._nursery.start_soon(self._keep_warm, run)

    def settled(self) -> None:
        """The agent run ended: idle warming continues (``idle``), else warming stops."""
        run = self._run
        if run is None:
            return
        if self._mode() == "streaming":
            return self._stop("agent run settled")
        run.phase = "idle"
        stop = policy.settled_stop(
            now=trio.current_time(), started_at=run.started_at, next_at=run.next_at
        )
        if stop is not None:
            self._stop(stop.reason)

    def mode_changed(self) -> None:
        """Reconcile the running warm-up with a changed ``cacheWarming``."""
        run = self._run
        reason = self._mode_stop(run) if run is not None else None
        if reason is not None:
            self._stop(reason)

    def cancel(self) -> None:
        """Stop warming (the session closes)."""
        self._stop("inactive")

    async def status(self) -> policy.Status:
        """What ``/session`` shows: the pending decision, or why nothing is scheduled."""
        if self._mode() == "off":
            return policy.Status(state="inactive", reason="cache warming disabled")
        run = self._run
        if run is None:
            return self._inactive
        if not await run.is_current():
            return policy.Status(state="inactive", reason="conversation context changed")
        decision = policy.evaluate(run.request.model, await self._prompt_tokens(), run.phase)
        if not decision.economics_available and not run.refreshing:
            return policy.Status(state="inactive", reason="cache economics unavailable")
        return policy.Status(
            state="refreshing" if run.refreshing else "scheduled",
            next_warm_at=run.next_at,
            decision=decision,
            extension_override=run.overridden,
        )

    # -- the run ----------------------------------------------------------------------------

    def _plan(self, run: _Run) -> bool:
        run.overridden = False
        slot = policy.next_slot(
            now=trio.current_time(),
            started_at=run.started_at,
            ttl=run.ttl,
            delay=run.delay,
            phase=run.phase,
        )
        if isinstance(slot, policy.Stop):
            self._stop(slot.reason)
            return False
        run.next_at, run.deadline = slot.at, slot.deadline
        return True

    async def _keep_warm(self, run: _Run) -> None:
        with run.scope:
            while True:
                await trio.sleep_until(run.next_at)
                if not await self._refresh(run) or not self._plan(run):
                    return

    async def _refresh(self, run: _Run) -> bool:
        """One refresh; ``False`` when warming stopped instead."""
        run.refreshing = True
        try:
            if not await self._valid(run):
                return False
            decision = policy.evaluate(run.request.model, await self._prompt_tokens(), run.phase)
            try:
                action = await self._decide(decision)
            except Exception:  # an extension's failure leaves pi's decision
                action = decision.action
            if not await self._valid(run):
                return False
            overridden = action != decision.action
            if action == "stop":
                reason = policy.stop_reason(decision, overridden=overridden)
                self._stop(reason, decision=decision, overridden=overridden)
                return False
            run.overridden = overridden
            await self._send_and_record(run, overridden)
            return self._run is run
        finally:
            run.refreshing = False

    async def _send_and_record(self, run: _Run, overridden: bool) -> None:
        request = run.request
        try:
            options = policy.refresh_options(request.options)
            answer = await self._send(request.model, request.context, options)
            if self._run is not run or answer.stop_reason in ("error", "aborted"):
                return
            entry = UsageEntry(
                id=DRAFT,
                parent_id=None,
                timestamp=DRAFT,
                kind=policy.USAGE_KIND,
                provider=answer.provider,
                model=answer.response_model or answer.model,
                usage=answer.usage,
                note=policy.OVERRIDE_NOTE if overridden else None,
            )
            await self._record(entry)
            self.refreshes += 1
        except Exception:  # best effort: a failed refresh never reaches the conversation
            return

    async def _valid(self, run: _Run) -> bool:
        """The run is still the current one, its mode allows it and its deadline holds."""
        if self._run is not run:
            return False
        reason = self._mode_stop(run)
        if reason is None and not await run.is_current():
            reason = "conversation context changed"
        if self._run is not run:  # replaced while the check awaited: not ours to stop
            return False
        if reason is None and trio.current_time() > run.deadline:
            reason = "cache refresh deadline missed"
        if reason is not None:
            self._stop(reason)
            return False
        return True

    def _mode_stop(self, run: _Run) -> str | None:
        mode = self._mode()
        if mode == "off":
            return "cache warming disabled"
        if mode == "streaming" and run.phase == "idle":
            return "agent run settled"
        return None

    def _clear(self) -> None:
        run, self._run = self._run, None
        if run is not None:
            run.scope.cancel()

    def _stop(
        self, reason: str, *, decision: policy.Decision | None = None, overridden: bool = False
    ) -> None:
        self._clear()
        self._inactive = policy.Status(
            state="inactive", reason=reason, decision=decision, extension_override=overridden
        )


@asynccontextmanager
async def open_cache_warmer(
    *,
    send: Send,
    record: Record,
    mode: Callable[[], policy.WarmingMode],
    prompt_tokens: Callable[[], Awaitable[int]],
    decide: Decide = _keep,
) -> AsyncIterator[CacheWarmer]:
    """A warmer whose runs live in a nursery of their own; leaving cancels any run."""
    async with trio.open_nursery() as nursery:
        warmer = CacheWarmer(
            nursery, send=send, record=record, mode=mode, prompt_tokens=prompt_tokens, decide=decide
        )
        try:
            yield warmer
        finally:
            warmer.cancel()
