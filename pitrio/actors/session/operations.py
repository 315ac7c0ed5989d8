"""The session's commands beyond prompting: compaction, model and thinking, settings, reads.

:class:`SessionOperations` is a small object the session actor owns (not a mixin: it shares no
fields with the actor, it is handed the handles and ports it uses); its methods run in the
actor's own tasks (the inbox loop, through ``Invoke``). :func:`navigate_tree` is a function the
actor calls with what a navigation needs.
Texts and event orders follow pi (spec §3.8-§3.13, pi-rpc.md §5).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from pitrio import _attrs_cache
from pitrio.actors.agent_loop import AgentLoopHandle
from pitrio.actors.agent_loop.queues import QueueMode
from pitrio.actors.model_router.thinking import (
    DEFAULT_THINKING_LEVEL,
    clamp_thinking_level,
    supported_thinking_levels,
)
from pitrio.actors.session.resources.settings import update_global_settings
from pitrio.actors.session_store.stored import UnknownEntry
from pitrio.actors.supervisor.actor.compactor import known_entries
from pitrio.actors.supervisor.actor.shell import CompactionCancelled, SupervisorHandle
from pitrio.actors.supervisor.branch_summary import (
    BranchSummaryResult,
    collect_entries_for_branch_summary,
    navigation_target,
)
from pitrio.actors.supervisor.compaction import COMPACTION_CANCELLED, context_usage
from pitrio.actors.supervisor.counting import count_session
from pitrio.errors import DecodeError, EntryNotFoundError, PitrioError
from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    ThinkingLevel,
    Usage,
)
from pitrio.messages.codec import from_json
from pitrio.messages.content import TextContent
from pitrio.messages.entries import BranchSummaryEntry, SessionEntry
from pitrio.messages.events import (
    AgentSessionEvent,
    EntryRecorded,
    SessionInfoChanged,
    ThinkingLevelChanged,
)
from pitrio.messages.model import Model

if TYPE_CHECKING:
    from pitrio.actors.model_router import ModelRouterHandle
    from pitrio.actors.session.extensions.events import (
        BeforeTreeResult,
        SessionTreeEvent,
        TreePreparation,
    )
    from pitrio.actors.session_store.actor import SessionStoreHandle

__all__ = ["COMPACTION_CANCELLED", "CompactionCancelled"]  # re-exported: they moved

COMPACTION_RUNNING = "A compaction is running. Wait for it to finish or abort it."
EMPTY_SESSION_NAME = "Session name cannot be empty"


class ModelNotFoundError(PitrioError):
    """``set_model`` named a model that is not available."""


@attrs.frozen(kw_only=True)
class CycleResult:
    """What ``cycle_model`` switched to."""

    model: Model
    thinking_level: ThinkingLevel
    is_scoped: bool


@attrs.frozen(kw_only=True)
class SessionStats:
    """``get_session_stats``: counts and token sums over the session file (pi 1.6.0)."""

    session_file: str | None = None
    session_id: str
    user_messages: int
    assistant_messages: int
    tool_calls: int
    tool_results: int
    total_messages: int
    tokens: dict[str, int]
    cost: float
    context_usage: dict[str, Any] | None = None


def last_assistant_text(messages: Sequence[AgentMessage]) -> str | None:
    """The last assistant reply's text; ``None`` if it has none (pi 1.6.0).

    A reply that did not end normally (aborted, failed, or one that only called tools) is
    skipped unless it has text; one that ended normally counts even without text.
    """
    for message in reversed(messages):
        if not isinstance(message, AssistantMessage):
            continue
        texts = [b.text for b in message.content if isinstance(b, TextContent)]
        if message.stop_reason != "stop" and not any(text.strip() for text in texts):
            continue
        return "".join(texts).strip() or None
    return None


def session_stats(
    entries: Iterable[object],
    *,
    session_id: str,
    session_file: str | None,
    usage: dict[str, Any] | None,
) -> SessionStats:
    """Counts by role, tool calls, and token and cost sums over the whole file's ``entries``
    (pi 1.6.0: every branch, compacted history and failed attempts included)."""
    counts = count_session(entries)
    return SessionStats(
        session_file=session_file,
        session_id=session_id,
        user_messages=counts.user_messages,
        assistant_messages=counts.assistant_messages,
        tool_calls=counts.tool_calls,
        tool_results=counts.tool_results,
        total_messages=counts.total_messages,
        tokens=counts.tokens,
        cost=counts.cost,
        context_usage=usage,
    )


Emit = Callable[[AgentSessionEvent], None]
"""The session's event port (the event gets its ``seq`` in the session's stream)."""

Notify = Callable[[str, Any], None]
"""Queues a notification-only event for the session's extensions (never waits)."""


class SessionOperations:
    """The session actor's non-prompt commands: settings, model and thinking, name, stats."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_agent_dir", "_default_thinking_level", "_emit", "_extra_models",
        "_loop", "_named_models", "_notify_extensions", "_router", "_save_model_defaults",
        "_scoped_models", "_store", "supervisor",
    )
    # fmt: on

    def __init__(
        self,
        *,
        loop: AgentLoopHandle,
        store: SessionStoreHandle,
        supervisor: SupervisorHandle,
        emit: Emit,
        notify: Notify,
        router: ModelRouterHandle | None = None,
        agent_dir: Path | None = None,
        scoped_models: tuple[Model, ...] = (),
        default_thinking_level: str | None = None,
        save_model_defaults: bool = False,
        named_models: tuple[Model, ...] = (),
        extra_models: Callable[[], tuple[Model, ...]] | None = None,
    ) -> None:
        self._loop = loop
        self._store = store
        self.supervisor = supervisor
        self._emit = emit
        self._notify_extensions = notify
        self._router = router
        self._agent_dir = agent_dir
        self._scoped_models = scoped_models
        self._default_thinking_level = default_thinking_level
        # pi 1.6.0 keeps a model or thinking choice in the session (its file's model_change
        # and thinking_level_change): settings change only when a caller asks (pi's
        # ``persist``, which RPC never sets); ``save_model_defaults`` is that request.
        self._save_model_defaults = save_model_defaults
        # The model the session started on (named on the command line, in the settings or
        # by the session file): selectable again even when the listing leaves it out (a
        # faux model beside configured ones).
        self._named_models = named_models
        # Models of this session only, listed after the router's: the virtual models its
        # extensions registered.
        self._extra_models = extra_models or (lambda: ())

    # -- settings ------------------------------------------------------------------------

    async def _persist_settings(self, changes: dict[str, Any]) -> None:
        """Write settings to the global file (pi persists these commands' effects)."""
        agent_dir = self._agent_dir
        if agent_dir is None:
            return
        await trio.to_thread.run_sync(update_global_settings, agent_dir, changes)

    async def set_queue_mode(self, kind: Literal["steering", "followUp"], mode: QueueMode) -> None:
        """``set_steering_mode`` / ``set_follow_up_mode``."""
        options = (await self._loop.state()).options
        if kind == "steering":
            options = attrs.evolve(options, steering_mode=mode)
            await self._persist_settings({"steeringMode": mode})
        else:
            options = attrs.evolve(options, follow_up_mode=mode)
            await self._persist_settings({"followUpMode": mode})
        await self._loop.configure(options=options)

    async def set_auto_compaction(self, enabled: bool) -> None:
        """``set_auto_compaction`` (the supervisor's setting)."""
        await self.supervisor.configure(compaction_enabled=enabled)
        await self._persist_settings({"compaction.enabled": enabled})

    async def set_auto_retry(self, enabled: bool) -> None:
        """``set_auto_retry`` (the supervisor's setting)."""
        await self.supervisor.configure(retry_enabled=enabled)
        await self._persist_settings({"retry.enabled": enabled})

    # -- model and thinking (§3.10) ------------------------------------------------------

    async def _available(self) -> tuple[Model, ...]:
        found = () if self._router is None else await self._router.available_models()
        return (*found, *self._extra_models())

    async def models(self, which: Literal["all", "available"]) -> tuple[Model, ...]:
        """The models of the process's registry (``all``) or those with credentials
        (``available``), then the session's own, for extensions' ``ctx.model_registry``."""
        if which == "available":
            return await self._available()
        found = () if self._router is None else await self._router.list_models()
        return (*found, *self._extra_models())

    async def set_model(
        self, provider: str, model_id: str, *, level: ThinkingLevel | None = None
    ) -> Model:
        """Switch model (among available ones, the session's current one and the one it
        started on); re-clamps the thinking level."""
        current = (await self._loop.state()).model
        model = next(
            (
                m
                for m in (*await self._available(), current, *self._named_models)
                if m.provider == provider and m.id == model_id
            ),
            None,
        )
        if model is None:
            raise ModelNotFoundError(f"Model not found: {provider}/{model_id}")
        await self._switch_model(model, level, "set")
        return model

    async def _switch_model(
        self, model: Model, level: ThinkingLevel | None, source: Literal["set", "cycle"]
    ) -> None:
        state = await self._loop.state()
        # pi 1.6.0: the level asked for, else the settings' default, else the session's own
        # (which stays "off" after a model without reasoning).
        wanted: str = (
            level or self._default_thinking_level or state.thinking_level or DEFAULT_THINKING_LEVEL
        )
        await self._loop.configure(model=model)
        entry = await self._store.append_model_change(model.provider, model.id)
        self._emit(EntryRecorded(entry=entry))
        if self._save_model_defaults:
            await self._persist_settings(
                {"defaultProvider": model.provider, "defaultModel": model.id}
            )
        await self.set_thinking_level(wanted)
        with _attrs_cache.caching():  # the events' classes: first use, from the cache
            from pitrio.actors.session.extensions.events import ModelSelectEvent

        self._notify_extensions(
            "model_select",
            ModelSelectEvent(model=model, previous_model=state.model, source=source),
        )

    async def cycle_model(self) -> CycleResult | None:
        """Next model of the scoped list (or of all available ones); ``None`` if only one."""
        scoped = bool(self._scoped_models)
        candidates = self._scoped_models if scoped else await self._available()
        if len(candidates) <= 1:
            return None
        state = await self._loop.state()
        index = next(
            (
                i
                for i, m in enumerate(candidates)
                if m.provider == state.model.provider and m.id == state.model.id
            ),
            -1,
        )
        model = candidates[(index + 1) % len(candidates)]
        await self._switch_model(model, None, "cycle")
        level = (await self._loop.state()).thinking_level
        return CycleResult(model=model, thinking_level=level, is_scoped=scoped)

    async def set_thinking_level(self, level: str) -> ThinkingLevel:
        """Clamp ``level`` to the model; if it changes, record it and tell subscribers."""
        state = await self._loop.state()
        effective = clamp_thinking_level(state.model, level)
        if effective != state.thinking_level:
            await self._loop.configure(thinking_level=effective)
            entry = await self._store.append_thinking_level_change(effective)
            self._emit(EntryRecorded(entry=entry))
            if self._save_model_defaults and (state.model.reasoning or effective != "off"):
                await self._persist_settings({"defaultThinkingLevel": level})
            self._emit(ThinkingLevelChanged(level=effective))
            with _attrs_cache.caching():  # the events' classes: first use, from the cache
                from pitrio.actors.session.extensions.events import ThinkingLevelSelectEvent

            self._notify_extensions(
                "thinking_level_select",
                ThinkingLevelSelectEvent(level=effective, previous_level=state.thinking_level),
            )
        return effective

    async def available_thinking_levels(self) -> tuple[ThinkingLevel, ...]:
        """``get_available_thinking_levels``: what the current model supports."""
        return supported_thinking_levels((await self._loop.state()).model)

    async def cycle_thinking_level(self) -> ThinkingLevel | None:
        """The next supported level (wrapping); ``None`` for a model without reasoning."""
        state = await self._loop.state()
        if not state.model.reasoning:
            return None
        levels = supported_thinking_levels(state.model)
        current = levels.index(state.thinking_level) if state.thinking_level in levels else -1
        return await self.set_thinking_level(levels[(current + 1) % len(levels)])

    # -- names and reads -----------------------------------------------------------------

    async def set_session_name(self, name: str) -> str:
        """Name the session (trimmed; empty is refused)."""
        trimmed = name.strip()
        if not trimmed:
            raise PitrioError(EMPTY_SESSION_NAME)
        entry = await self._store.append_session_info(trimmed)
        self._emit(EntryRecorded(entry=entry))
        changed = SessionInfoChanged(name=trimmed)
        self._emit(changed)
        self._notify_extensions("session_info_changed", changed)  # pi 1.6.0: the same event
        return trimmed

    async def stats(self) -> SessionStats:
        """``get_session_stats``: counts over the whole file, usage of the context."""
        state = await self._loop.state()
        path = await self._store.branch_entries()
        usage = context_usage(known_entries(path), state.messages, state.model.context_window)
        usage_json = None
        if usage is not None:
            usage_json = {
                "tokens": usage.tokens,
                "contextWindow": usage.context_window,
                "percent": usage.percent,
            }
        store_path = self._store.path
        return session_stats(
            await self._store.entries(),
            session_id=self._store.header.id,
            session_file=str(store_path) if store_path else None,
            usage=usage_json,
        )


@attrs.frozen(kw_only=True)
class NavigationResult:
    """What ``navigate_tree`` did: the text for the editor, the summary entry if one was made."""

    cancelled: bool = False
    aborted: bool = False
    editor_text: str | None = None
    summary_entry: BranchSummaryEntry | None = None


SummarizeBranch = Callable[
    [tuple[SessionEntry, ...], Model, str | None, bool], Awaitable[BranchSummaryResult | None]
]
"""Summarises the branch left (entries, model, custom instructions, replace them): the
supervisor's, in a nursery lent in a scope abort cancels; ``None`` when aborted."""


@attrs.frozen
class TreeHooks:
    """The extensions' part in a navigation: ``session_before_tree`` and ``session_tree``
    (the extension host handle's ``before_tree`` / ``after_tree``)."""

    before: Callable[[TreePreparation], Awaitable[BeforeTreeResult | None]]
    after: Callable[[SessionTreeEvent], Awaitable[None]]


@attrs.frozen
class _Summary:
    """The summary a navigation writes: the model's or an extension's."""

    text: str
    details: Any
    usage: Usage | None
    from_extension: bool


def _supplied_usage(value: Any) -> Usage | None:
    """An extension summary's ``usage``, a :class:`Usage` or pi's JSON shape of one; anything
    else is not recorded (the summary is still written: the usage only feeds the totals)."""
    if value is None or isinstance(value, Usage):
        return value
    try:
        return from_json(value, Usage)
    except DecodeError:
        return None


async def navigate_tree(
    target_id: str,
    *,
    store: SessionStoreHandle,
    loop: AgentLoopHandle,
    emit: Emit,
    summarize: Callable[[], SummarizeBranch] | None = None,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    label: str | None = None,
    restore_tools: Callable[[Sequence[AgentMessage]], Awaitable[None]] | None = None,
    hooks: TreeHooks | None = None,
) -> NavigationResult:
    """Move the session to another point of its tree (the caller made sure it is idle);
    ``summarize`` gives the summary call (it raises when the session cannot summarise);
    ``restore_tools`` sets the tools the new branch's transcript loaded (``tool_search``);
    ``hooks``: the extensions may cancel, summarise or relabel it, and hear of it after."""
    old_leaf = await store.leaf_id()
    if target_id == old_leaf:
        return NavigationResult()
    summary = summarize() if summarize is not None else None
    target = await store.get_entry(target_id)
    if target is None or isinstance(target, UnknownEntry):
        raise EntryNotFoundError(f"Entry {target_id} not found")
    by_id = {e.id: e for e in known_entries(await store.entries())}
    collected = collect_entries_for_branch_summary(by_id, old_leaf, target_id)
    where = navigation_target(target)
    written: _Summary | None = None
    if hooks is not None:
        with _attrs_cache.caching():  # the events' classes: first use, from the cache
            from pitrio.actors.session.extensions.events import TreePreparation

        decision = await hooks.before(
            TreePreparation(
                target_id=target_id,
                old_leaf_id=old_leaf,
                common_ancestor_id=collected.common_ancestor_id,
                entries_to_summarize=tuple(collected.entries),
                user_wants_summary=summary is not None,
                custom_instructions=custom_instructions,
                replace_instructions=replace_instructions,
                label=label,
            )
        )
        if decision is not None:
            if decision.cancel:
                return NavigationResult(cancelled=True)
            # pi 1.6.0: a supplied summary counts only when the user asked for one.
            if decision.summary is not None and summary is not None:
                supplied = decision.summary
                usage = _supplied_usage(supplied.usage)
                written = _Summary(supplied.summary, supplied.details, usage, True)
            if decision.custom_instructions is not None:
                custom_instructions = decision.custom_instructions
            if decision.replace_instructions is not None:
                replace_instructions = decision.replace_instructions
            if decision.label is not None:
                label = decision.label
    if written is None and summary is not None and collected.entries:
        state = await loop.state()
        # The supervisor's: made in a nursery lent in a scope abort cancels.
        result = await summary(
            tuple(collected.entries), state.model, custom_instructions, replace_instructions
        )
        if result is None:
            return NavigationResult(cancelled=True, aborted=True)
        written = _Summary(result.summary, result.details(), None, False)
    summary_entry: BranchSummaryEntry | None = None
    if written is not None:
        summary_entry = await store.branch_with_summary(
            where.new_leaf_id,
            written.text,
            written.details,
            from_hook=True if written.from_extension else None,
            usage=written.usage,
        )
        emit(EntryRecorded(entry=summary_entry))
        if label:
            emit(EntryRecorded(entry=await store.append_label_change(summary_entry.id, label)))
    else:
        if where.new_leaf_id is None:
            await store.reset_leaf()
        else:
            await store.branch(where.new_leaf_id)
        if label:
            emit(EntryRecorded(entry=await store.append_label_change(target_id, label)))
    messages = await store.context_messages()
    await loop.set_messages(messages)
    if restore_tools is not None:
        await restore_tools(messages)
    if hooks is not None:
        with _attrs_cache.caching():  # the events' classes: first use, from the cache
            from pitrio.actors.session.extensions.events import SessionTreeEvent

        await hooks.after(
            SessionTreeEvent(
                new_leaf_id=await store.leaf_id(),
                old_leaf_id=old_leaf,
                summary_entry=summary_entry,
                from_extension=None if written is None else written.from_extension,
            )
        )
    return NavigationResult(editor_text=where.editor_text, summary_entry=summary_entry)
