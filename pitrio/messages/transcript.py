"""The system prompt and tool set a transcript carries, replayed from its ``system`` messages.

pi 1.6.0 keeps no separate prompt state: the first ``system`` message of a session declares
every prompt section and tool, later ones patch them (spec: pi's ``docs/session-format.md``,
``SystemMessage``), and a request's system prompt and tools are the replay of all of them, in
order. The rules, as pi-ai applies them:

* ``content`` that is not empty is appended to the prompt text (joined by a blank line);
* ``sections`` are patched by name: a value replaces the section (a new name is added after
  the others), ``None`` removes it;
* ``tools_removed`` drops tools by name, then ``tools_added`` adds or replaces them (a tool
  replaced keeps its place; a removed and added one goes last);
* the rendered prompt is the content followed by every section's text, the non-empty parts
  joined by a blank line.

Tool changes are *declared* (:func:`declare_tool_changes`): before each request the difference
between the tools the transcript declares and the ones the agent can run becomes
``tools_added`` / ``tools_removed`` on a ``system`` message, so the replay always gives the tools
the request carries. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from pitrio.messages.agent import (
    AgentMessage,
    SystemCheckpoint,
    SystemMessage,
    ToolDeclaration,
    ToolReference,
    now_ms,
)
from pitrio.messages.content import TextContent
from pitrio.messages.convert import extends
from pitrio.messages.model import ToolSpec, sampling_strictness
from pitrio.messages.shared import shared
from pitrio.messages.snapshot import Snapshot, immutable


def content_text(content: str | Sequence[TextContent]) -> str:
    """The text of a system message's content (its text blocks joined by newlines)."""
    if isinstance(content, str):
        return content
    return "\n".join(block.text for block in content if isinstance(block, TextContent))


def system_text(message: SystemMessage | SystemCheckpoint) -> str:
    """A system message rendered as a whole prompt: its content, then each section's text."""
    parts = [content_text(message.content)]
    parts += [text for text in (message.sections or {}).values() if text is not None]
    # Kept with the session's last request (cache warming replays it): one copy for the
    # sessions of a daemon that render the same prompt.
    return shared("\n\n".join(part for part in parts if part))


def diff_sections(
    previous: Mapping[str, str | None], current: Mapping[str, str]
) -> dict[str, str | None] | None:
    """The ``sections`` patch turning ``previous`` into ``current``: every section whose text
    differs or is new, in ``current``'s order, then ``None`` for each one that is gone;
    ``None`` when nothing differs."""
    patch: dict[str, str | None] = {
        name: text for name, text in current.items() if previous.get(name) != text
    }
    patch.update({name: None for name in previous if name not in current})
    return patch or None


def _same(a: ToolDeclaration, b: ToolDeclaration) -> bool:
    return (
        a.name == b.name
        and a.description == b.description
        and a.parameters == b.parameters
        and a.constrained_sampling == b.constrained_sampling
    )


@attrs.frozen
class ToolChanges:
    """What turns one tool set into another: a changed tool is removed, then added."""

    added: tuple[ToolDeclaration, ...]
    removed: tuple[ToolReference, ...]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed)


def tool_changes(
    previous: Sequence[ToolDeclaration], current: Sequence[ToolDeclaration]
) -> ToolChanges:
    """The declarations that turn ``previous`` into ``current`` (pi's ``getToolStateChanges``)."""
    before = {tool.name: tool for tool in previous}
    after = {tool.name: tool for tool in current}
    added = tuple(
        tool for tool in current if tool.name not in before or not _same(before[tool.name], tool)
    )
    removed = tuple(
        ToolReference(name=tool.name)
        for tool in previous
        if tool.name not in after or not _same(tool, after[tool.name])
    )
    return ToolChanges(added, removed)


class _Replayed:
    """The replay of some system messages: appended texts, sections, tools, first timestamp."""

    __slots__ = ("contents", "sections", "timestamp", "tools")

    def __init__(self) -> None:
        self.contents: list[str] = []
        self.sections: dict[str, str] = {}
        self.tools: dict[str, ToolDeclaration] = {}
        self.timestamp: int | None = None

    def copy(self) -> _Replayed:
        other = _Replayed()
        other.contents = list(self.contents)
        other.sections = dict(self.sections)
        other.tools = dict(self.tools)
        other.timestamp = self.timestamp
        return other

    def apply(self, message: SystemMessage | SystemCheckpoint) -> None:
        if self.timestamp is None:
            self.timestamp = message.timestamp
        text = content_text(message.content)
        if text:
            self.contents.append(text)
        for name, value in (message.sections or {}).items():
            if value is None:
                self.sections.pop(name, None)
            else:
                self.sections[name] = value
        for ref in message.tools_removed or ():
            self.tools.pop(ref.name, None)
        for tool in message.tools_added or ():
            self.tools[tool.name] = tool

    def message(self) -> SystemMessage | None:
        if self.timestamp is None and not self.tools:
            return None
        return SystemMessage(
            content="\n\n".join(self.contents),
            sections=dict(self.sections) if self.sections else None,
            timestamp=self.timestamp or 0,
            tools_added=tuple(self.tools.values()) if self.tools else None,
        )


def system_messages_from(messages: Sequence[AgentMessage], start: int = 0) -> list[SystemMessage]:
    """The system messages of ``messages[start:]``, in order. A sequence that can find them
    without building its other items (a ``system_messages(start)`` method: a resumed
    session's stored transcript and the views over it) is asked; a :class:`Snapshot` is
    searched chunk by chunk, so a stored head (:meth:`Snapshot.over`) is asked too; anything
    else is walked (issue 38: the first request of a resumed session reads these)."""
    finder = getattr(messages, "system_messages", None)
    if finder is not None:
        return finder(start)  # type: ignore[no-any-return]
    if isinstance(messages, Snapshot):
        out: list[SystemMessage] = []
        for offset, chunk in messages.chunks_from(start):
            out.extend(system_messages_from(chunk, max(start - offset, 0)))
        return out
    return [m for m in messages[start:] if isinstance(m, SystemMessage)]


def replay(messages: Iterable[AgentMessage]) -> SystemMessage | None:
    """Every system message of ``messages`` replayed into one holding the current prompt and
    tools (pi's ``getCurrentSystemMessage``); ``None`` when there is none."""
    state = _Replayed()
    for message in messages:
        if isinstance(message, SystemMessage):
            state.apply(message)
    return state.message()


def current_tools(message: SystemMessage | None) -> tuple[ToolDeclaration, ...]:
    """The tools a replayed system message declares."""
    return () if message is None or message.tools_added is None else message.tools_added


def checkpoint_of(message: SystemMessage, timestamp: int) -> SystemCheckpoint:
    """A compaction's ``systemMessage`` from the replay of the context it compacts."""
    return SystemCheckpoint(
        content=message.content,
        sections=message.sections,
        tools_added=message.tools_added,
        timestamp=timestamp,
    )


class SystemReplay:
    """:func:`replay` for a transcript that grows between calls: when the messages extend the
    previous call's, only the new ones are replayed (a long session's request does not walk
    its history). Used by one caller at a time."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_result", "_source", "_specs", "_state",
    )
    # fmt: on

    def __init__(self) -> None:
        self._source: Sequence[AgentMessage] = ()
        self._state = _Replayed()
        self._result: SystemMessage | None = None
        self._specs: tuple[SystemMessage | None, tuple[ToolSpec, ...]] = (None, ())

    def current(self, messages: Sequence[AgentMessage]) -> SystemMessage | None:
        """The replayed system message of ``messages`` (``None`` when they hold none)."""
        if extends(self._source, messages):
            new = system_messages_from(messages, len(self._source))
            if new:
                state = self._state.copy()  # results handed out earlier stay as they were
                for message in new:
                    state.apply(message)
                self._state = state
                self._result = state.message()
        else:
            state = _Replayed()
            for item in system_messages_from(messages):
                state.apply(item)
            self._state = state
            self._result = state.message()
        self._source = messages if isinstance(messages, tuple) else _frozen(messages)
        return self._result

    def tool_specs(self, replayed: SystemMessage | None) -> tuple[ToolSpec, ...]:
        """What a provider is sent for the tools ``replayed`` declares (:func:`spec_of` of
        each), kept for the last message asked about: a replay hands out the same message
        until a system message changes it, and every request asks (issue 38). Messages and
        specs are frozen, so the same message has the same specs."""
        if replayed is None:
            return ()
        known, specs = self._specs
        if replayed is known:
            return specs
        specs = tuple(spec_of(tool) for tool in current_tools(replayed))
        self._specs = (replayed, specs)
        return specs

    def current_then(
        self, messages: Sequence[AgentMessage], more: Iterable[AgentMessage]
    ) -> SystemMessage | None:
        """:meth:`current` of ``messages`` followed by ``more`` (which is not remembered: a
        transcript's part not yet taken as a snapshot)."""
        result = self.current(messages)
        added = [m for m in more if isinstance(m, SystemMessage)]
        if not added:
            return result
        state = self._state.copy()
        for message in added:
            state.apply(message)
        return state.message()


def _frozen(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
    return messages if isinstance(messages, Snapshot) else immutable(messages)


def declare_tool_changes(
    declared: Sequence[ToolDeclaration],
    pending: Sequence[AgentMessage],
    executable: Sequence[ToolDeclaration],
) -> list[AgentMessage]:
    """``pending`` (the messages about to join the transcript) with the tool changes declared
    (pi's ``declareToolChanges``): ``declared`` is what the transcript declares so far,
    ``executable`` what the agent can run. When a pending system message exists, its tool
    fields are replaced by the difference (the last such message carries it); otherwise a new
    system message carrying it goes before the first pending message that is not a system one.
    Returned unchanged (the same list's items) when nothing differs."""
    index = next(
        (i for i in range(len(pending) - 1, -1, -1) if isinstance(pending[i], SystemMessage)),
        -1,
    )
    before = list(declared)
    if index >= 0:
        # Pending system messages count as declared, except the tool fields of the last one.
        state = _Replayed()
        state.tools = {tool.name: tool for tool in declared}
        for i, message in enumerate(pending):
            if isinstance(message, SystemMessage):
                if i == index:
                    message = attrs.evolve(message, tools_added=None, tools_removed=None)
                state.apply(message)
        before = list(state.tools.values())
    changes = tool_changes(before, executable)
    if index >= 0:
        last = pending[index]
        assert isinstance(last, SystemMessage)
        if not changes and not last.tools_added and not last.tools_removed:
            return list(pending)
        out = list(pending)
        out[index] = _with_changes(last, changes)
        return out
    if not changes:
        return list(pending)
    update = _with_changes(SystemMessage(content="", timestamp=now_ms()), changes)
    at = next((i for i, m in enumerate(pending) if not isinstance(m, SystemMessage)), len(pending))
    return [*pending[:at], update, *pending[at:]]


def _with_changes(message: SystemMessage, changes: ToolChanges) -> SystemMessage:
    return attrs.evolve(
        message,
        tools_added=changes.added or None,
        tools_removed=changes.removed or None,
    )


def spec_of(tool: ToolDeclaration) -> ToolSpec:
    """What a provider is sent for a declared tool."""
    return ToolSpec(
        name=tool.name,
        description=tool.description,
        parameters=tool.parameters,
        constrained_sampling=sampling_strictness(tool.constrained_sampling),
    )
