"""The session's side of prompt-cache warming: what the :class:`.CacheWarmer` is given.

pi 1.6.0 starts its warmer from the agent's stream function for every request routed under
the session's own id (summaries and other one-off calls never start one), keeps warming while
the transcript still extends the request's messages on the same model, tells it when the
agent run settles, asks the extensions (``cache_warming_decision``) before each refresh and
announces each refresh's ``usage`` entry with ``entry_appended``. Here the agent loop reports
its requests through :data:`~pitrio.actors.agent_loop.hooks.OnRequest`, the store records the
entries and the session's outlet announces them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from pitrio.actors.agent_loop import AgentLoopHandle
from pitrio.actors.agent_loop.run import StreamCall
from pitrio.actors.session import cache_warming as policy
from pitrio.actors.session.cache_warmer import CacheWarmer, IsCurrent, WarmRequest
from pitrio.actors.supervisor.actor.compactor import final_message
from pitrio.errors import PitrioError
from pitrio.messages.agent import AgentMessage, AssistantMessage
from pitrio.messages.entries import UsageEntry
from pitrio.messages.events import AgentSessionEvent, EntryAppended
from pitrio.messages.model import LlmContext, Model, StreamOptions

if TYPE_CHECKING:
    from pitrio.actors.session.extensions.host_handle import ExtensionHostHandle
    from pitrio.actors.session_store.actor import SessionStoreHandle


UNAVAILABLE_WARMING = "Inactive (cache warming unavailable)"
"""pi's status line for a session without a warmer."""


class SessionWarming:
    """One session's cache warmer and the callbacks it runs on (see the module)."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_emit", "_host", "_loop", "_retention", "_session_id", "_store",
        "_stream", "mode", "warmer",
    )
    # fmt: on

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        session_id: str,
        loop: AgentLoopHandle,
        store: SessionStoreHandle,
        stream: StreamCall,
        emit: Callable[[AgentSessionEvent], None],
        mode: Callable[[], policy.WarmingMode],
        host: ExtensionHostHandle | None = None,
        retention: Literal["none", "short", "long"] | None = None,
    ) -> None:
        self._session_id = session_id
        self._loop = loop
        self._store = store
        self._stream = stream
        self._emit = emit
        self._host = host
        self._retention = retention
        self.mode = mode
        self.warmer = CacheWarmer(
            nursery,
            send=self._send,
            record=self._record,
            mode=mode,
            prompt_tokens=self._prompt_tokens,
            decide=self._decide,
        )

    def on_request(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        transcript: Sequence[AgentMessage],
    ) -> None:
        """The loop sends a request: a request of the session's own conversation replaces
        the cache entry that is kept warm."""
        if options.session_id == self._session_id:
            if options.cache_retention is None and self._retention is not None:
                # The router's own setting, made explicit: the same request, a known tier.
                options = attrs.evolve(options, cache_retention=self._retention)
            request = WarmRequest(model=model, context=context, options=options)
            self.warmer.start(request, self._is_current(model, transcript))

    def settled(self) -> None:
        """The agent run settled (before ``agent_settled`` goes out, as in pi)."""
        self.warmer.settled()

    async def status_line(self) -> tuple[str, policy.Status]:
        """``/session``'s ``Status:`` text and the status it was made from."""
        status = await self.warmer.status()
        return status.line(trio.current_time()), status

    async def info(self) -> dict[str, Any]:
        """pi's ``/session`` "Cache Warming" block as data: ``mode``, ``status`` (the line
        after ``Status:``) and, when the decision's economics are known, ``missCost`` and
        ``warmCost`` (dollars)."""
        line, status = await self.status_line()
        out: dict[str, Any] = {"mode": self.mode(), "status": line}
        decision = status.decision
        if decision is not None and decision.economics_available:
            out["missCost"] = decision.miss_cost
            out["warmCost"] = decision.warm_cost
        return out

    def _is_current(self, model: Model, transcript: Sequence[AgentMessage]) -> IsCurrent:
        """Whether the loop still has the request's model and a transcript that extends the
        request's own, message for message (the same objects: a compaction, a navigation or
        an edit replaces them, and the next request would not reuse the cache entry)."""

        async def check() -> bool:
            selected = self._loop.facts().model
            if (selected.provider, selected.id) != (model.provider, model.id):
                return False
            messages = (await self._loop.state()).messages
            if len(transcript) > len(messages):
                return False
            return all(old is new for old, new in zip(transcript, messages, strict=False))

        return check

    async def _send(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AssistantMessage:
        final = await final_message(self._stream, model, context, options)
        if final is None:
            raise PitrioError("The provider stream ended without a result")
        return final

    async def _record(self, entry: UsageEntry) -> UsageEntry:
        stored = await self._store.append_usage(entry)
        self._emit(EntryAppended(entry=stored))
        return stored

    async def _prompt_tokens(self) -> int:
        return policy.last_prompt_tokens(await self._store.branch_entries())

    async def _decide(self, decision: policy.Decision) -> Literal["warm", "stop"]:
        if self._host is None:
            return decision.action
        from pitrio.actors.session.extensions.events import CacheWarmingDecisionEvent

        event = CacheWarmingDecisionEvent(
            warm_cost=decision.warm_cost,
            miss_cost=decision.miss_cost,
            continuation_probability=decision.continuation_probability,
            action=decision.action,
        )
        return await self._host.cache_warming_decision(event)
