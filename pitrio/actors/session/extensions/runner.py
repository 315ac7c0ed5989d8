"""Calling extension handlers with the return contracts of spec §7.3.

The runner walks extensions in load order and each extension's handlers in registration
order. A handler that raises is reported (``extension_error``: the extension's path, the event,
the message) and treated as having returned nothing; one that does not return within the
handler timeout is reported the same way and abandoned. The exception is ``tool_call``: as in
pi, its failure blocks the call, and it has no timeout (it may be waiting for a user's answer).

The runner is called from the session's tasks and the agent loop's hooks, never from the
session's inbox task: a handler may call back into the session through its handle.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar

import attrs
import trio

from pitrio.actors.session.extensions.events import (
    BeforeAgentStartEvent,
    BeforeAgentStartResult,
    BeforeCompactResult,
    BeforeTreeResult,
    BoundaryResult,
    CacheWarmingDecisionEvent,
    CacheWarmingDecisionResult,
    CancelResult,
    CompactionOverride,
    ContextEvent,
    ContextResult,
    ContextWithSystemEvent,
    DiscoveredPaths,
    InjectedMessage,
    InputEvent,
    InputResult,
    InputSource,
    MessageEndResult,
    ProviderHeadersEvent,
    ProviderRequestEvent,
    ResourcesDiscoverEvent,
    ResourcesDiscoverResult,
    ToolCallEvent,
    ToolCallResult,
    ToolResultEvent,
    ToolResultPatch,
    TreeSummaryOverride,
    UserBashEvent,
    UserBashResult,
)
from pitrio.actors.session.extensions.registry import Command, Extension, invocation_names
from pitrio.actors.session.user_bash import BashResult
from pitrio.errors import PitrioError
from pitrio.messages.agent import AgentMessage, CustomMessage, SystemMessage, now_ms
from pitrio.messages.content import ImageContent
from pitrio.messages.events import ExtensionError
from pitrio.messages.transcript import replay

R = TypeVar("R")

DEFAULT_HANDLER_TIMEOUT = 30.0
"""Seconds a handler may take before it is reported and abandoned
(setting ``extensionHandlerTimeoutMs``)."""

ContextFactory = Callable[[], Any]
ErrorSink = Callable[[ExtensionError], None]


class ToolCallBlockedError(PitrioError):
    """A ``tool_call`` handler failed: the call is blocked with this message."""


class UserBashBlockedError(PitrioError):
    """A ``user_bash`` handler failed or answered wrongly: the command is not run (pi 1.6.0
    fails closed, never falling back to running it locally)."""


INVALID_USER_BASH = (
    "Invalid user_bash handler result: return None for local execution or exactly one valid "
    "operations or result"
)


DROPPED_SYSTEM_MESSAGE = (
    "Handler removed the leading system message; the request has no prompt or initial tool "
    "declarations. Keep it at index 0 or put the replay of the dropped prefix first."
)


class _TimedOut(Exception):
    pass


def _snake(name: str) -> str:
    out = []
    for char in name:
        if char.isupper():
            out.append("_")
            out.append(char.lower())
        else:
            out.append(char)
    return "".join(out)


def coerce(value: Any, cls: type[R]) -> R | None:
    """A handler's return value as ``cls``: ``None``, an instance, or a dict of its fields
    (snake_case or camelCase keys; ``continue`` maps to ``continue_``). Anything else is a
    :class:`TypeError` naming what was expected."""
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, dict):
        names = {field.name for field in attrs.fields(cls)}  # type: ignore[arg-type]
        kwargs: dict[str, Any] = {}
        for key, item in value.items():
            name = _snake(str(key))
            if name == "continue":
                name = "continue_"
            if name in names:
                kwargs[name] = item
        nested: dict[str, type[Any]] = {
            "message": InjectedMessage,
            "compaction": CompactionOverride,
        }
        for name, nested_cls in nested.items():
            if (
                name in kwargs
                and isinstance(kwargs[name], dict)
                and cls in (BeforeAgentStartResult, BeforeCompactResult)
            ):
                kwargs[name] = coerce(kwargs[name], nested_cls)
        if cls is BeforeTreeResult and isinstance(kwargs.get("summary"), dict):
            kwargs["summary"] = coerce(kwargs["summary"], TreeSummaryOverride)
        for name in ("images", "content", "messages", "entries"):
            if isinstance(kwargs.get(name), list):
                kwargs[name] = tuple(kwargs[name])
        return cls(**kwargs)
    raise TypeError(f"expected {cls.__name__}, a dict or None, got {type(value).__name__}")


def valid_user_bash(raw: Any) -> UserBashResult:
    """A ``user_bash`` handler's answer checked as pi 1.6.0 checks it: exactly one of
    ``operations`` (with an ``exec`` method) and ``result`` (``output`` text, ``exit_code``
    an int or absent, ``cancelled`` and ``truncated`` booleans); raises ``ValueError``."""
    result = coerce(raw, UserBashResult)
    if result is None or (result.operations is None) == (result.result is None):
        raise ValueError(INVALID_USER_BASH)
    if result.operations is not None:
        if not callable(getattr(result.operations, "exec", None)):
            raise ValueError(INVALID_USER_BASH)
        return result
    done = result.result
    fields = done if isinstance(done, dict) else attrs.asdict(done) if attrs.has(type(done)) else {}

    def get(*names: str) -> Any:
        return next((fields[name] for name in names if name in fields), None)

    code = get("exitCode", "exit_code")
    output = get("output")
    flags = (get("cancelled"), get("truncated"))
    path = get("fullOutputPath", "full_output_path")
    if (
        not isinstance(output, str)
        or not ("exitCode" in fields or "exit_code" in fields)
        or (code is not None and (isinstance(code, bool) or not isinstance(code, int)))
        or not all(isinstance(flag, bool) for flag in flags)
        or (path is not None and not isinstance(path, str))
    ):
        raise ValueError(INVALID_USER_BASH)
    return UserBashResult(
        result=BashResult(
            output=output,
            exit_code=code,
            cancelled=flags[0],
            truncated=flags[1],
            full_output_path=path,
        )
    )


@attrs.frozen(kw_only=True)
class StartAdditions:
    """What ``before_agent_start`` handlers added: messages and the run's system prompt."""

    messages: tuple[CustomMessage, ...]
    system_prompt: str | None


class ExtensionRunner:
    """Dispatches events to loaded extensions and reports their failures."""

    def __init__(
        self,
        extensions: Sequence[Extension],
        *,
        handler_timeout: float = DEFAULT_HANDLER_TIMEOUT,
    ) -> None:
        self.extensions = list(extensions)
        self.handler_timeout = handler_timeout
        self._report: ErrorSink = lambda error: None
        self._context: ContextFactory = lambda: None
        self.problems: list[str] = []
        self.system_prompt: str | None = None  # the chain's current prompt (``get_system_prompt``)

    def bind(self, *, report: ErrorSink, context: ContextFactory) -> None:
        """Connect the runner to its session: where errors go and how a ``ctx`` is made."""
        self._report = report
        self._context = context

    def make_context(self) -> Any:
        """A fresh ``ctx`` (``None`` before the session bound the runner)."""
        return self._context()

    # -- queries ---------------------------------------------------------------------------

    def has(self, event: str) -> bool:
        """Whether any extension handles ``event``."""
        return any(extension.handlers_for(event) for extension in self.extensions)

    def commands(self) -> list[tuple[str, Command]]:
        """Extension commands by invocation name, in load order."""
        named, _ = invocation_names(self.extensions)
        return named

    def command(self, name: str) -> Command | None:
        """The command invoked as ``/name``, if an extension registered it."""
        return next((command for key, command in self.commands() if key == name), None)

    # -- calling ---------------------------------------------------------------------------

    def report(self, path: str, event: str, error: BaseException | str) -> None:
        """Send an ``extension_error`` for ``path`` / ``event``."""
        text = error if isinstance(error, str) else (str(error) or type(error).__name__)
        self._report(ExtensionError(extension_path=path, event=event, error=text))

    async def _invoke(self, handler: Any, args: tuple[Any, ...], limit: float | None) -> Any:
        with trio.move_on_after(limit if limit is not None else float("inf")) as scope:
            result = handler(*args)
            if inspect.isawaitable(result):
                result = await result
            return result
        if scope.cancelled_caught:
            raise _TimedOut(f"handler did not return within {limit:g} s")
        return None  # pragma: no cover - move_on_after either returns above or caught

    async def _call(self, extension: Extension, event: str, handler: Any, payload: Any) -> Any:
        """One handler, isolated: its failure is reported and yields ``None``."""
        try:
            return await self._invoke(handler, (payload, self._context()), self.handler_timeout)
        except Exception as exc:
            self.report(extension.path, event, exc)
            return None

    async def _result(
        self, extension: Extension, event: str, handler: Any, payload: Any, cls: type[R]
    ) -> R | None:
        """One handler's result as ``cls`` (``None`` when it returned nothing, failed, or
        returned something of the wrong shape, the last two reported)."""
        raw = await self._call(extension, event, handler, payload)
        try:
            return coerce(raw, cls)
        except TypeError as exc:
            self.report(extension.path, event, exc)
            return None

    async def notify(self, event: str, payload: Any) -> None:
        """A notification-only event: every handler, results ignored."""
        for extension in self.extensions:
            for handler in list(extension.handlers_for(event)):
                await self._call(extension, event, handler, payload)

    async def input(
        self, text: str, images: tuple[ImageContent, ...], source: InputSource
    ) -> InputResult:
        """``input``: transforms chain in load order; ``handled`` stops at once (S206-S210)."""
        current = InputResult(action="continue", text=text, images=images)
        for extension in self.extensions:
            for handler in list(extension.handlers_for("input")):
                event = InputEvent(
                    text=current.text or "", images=current.images or (), source=source
                )
                result = await self._result(extension, "input", handler, event, InputResult)
                if result is None or result.action == "continue":
                    continue
                if result.action == "handled":
                    return InputResult(action="handled")
                current = InputResult(
                    action="transform",
                    text=result.text if result.text is not None else current.text,
                    images=result.images if result.images is not None else current.images,
                )
        return current

    async def before_agent_start(
        self,
        prompt: str,
        images: tuple[ImageContent, ...],
        system_prompt: str,
        message: CustomMessage | None = None,
    ) -> StartAdditions:
        """``before_agent_start``: messages collected from every handler; the system prompt
        chained (each handler sees the prompt as changed before it)."""
        messages: list[CustomMessage] = []
        chained: str | None = None
        self.system_prompt = system_prompt
        for extension in self.extensions:
            for handler in list(extension.handlers_for("before_agent_start")):
                event = BeforeAgentStartEvent(
                    prompt=prompt,
                    images=images,
                    system_prompt=chained or system_prompt,
                    message_type="user" if message is None else "custom",
                    message=message,
                )
                result = await self._result(
                    extension, "before_agent_start", handler, event, BeforeAgentStartResult
                )
                if result is None:
                    continue
                if result.message is not None:
                    injected = result.message
                    messages.append(
                        CustomMessage(
                            custom_type=injected.custom_type,
                            content=injected.content,
                            display=injected.display,
                            details=injected.details,
                            timestamp=now_ms(),
                        )
                    )
                if result.system_prompt is not None:
                    chained = result.system_prompt
                    self.system_prompt = chained
        return StartAdditions(messages=tuple(messages), system_prompt=chained)

    async def context(self, messages: list[AgentMessage]) -> list[AgentMessage]:
        """``context`` then ``context_with_system`` (pi 1.6.0), each handler seeing the list
        its predecessors returned.

        ``context`` handlers see the conversation without system messages; a list they change
        is sent after one system message holding the current prompt and tools (the replay of
        those left out), so no filtering can drop them. ``context_with_system`` handlers see
        the whole list and own it: one that drops the leading system message is reported."""
        current = list(messages)
        for extension in self.extensions:
            for handler in list(extension.handlers_for("context")):
                visible = [m for m in current if not isinstance(m, SystemMessage)]
                shown = ContextEvent(messages=tuple(visible))
                result = await self._result(extension, "context", handler, shown, ContextResult)
                if result is None or result.messages is None:
                    continue
                returned = list(result.messages)
                if len(returned) == len(visible) and all(map(operator.is_, returned, visible)):
                    continue  # unchanged: mid-conversation system messages stay where they are
                head = replay(current)
                current = returned if head is None else [head, *returned]
        for extension in self.extensions:
            for handler in list(extension.handlers_for("context_with_system")):
                headed = bool(current) and isinstance(current[0], SystemMessage)
                event = ContextWithSystemEvent(messages=tuple(current))
                result = await self._result(
                    extension, "context_with_system", handler, event, ContextResult
                )
                if result is None or result.messages is None:
                    continue
                current = list(result.messages)
                if headed and not (current and isinstance(current[0], SystemMessage)):
                    self.report(extension.path, "context_with_system", DROPPED_SYSTEM_MESSAGE)
        return current

    async def provider_headers(self, headers: dict[str, str | None]) -> None:
        """``before_provider_headers``: handlers change ``headers`` in place."""
        await self.notify("before_provider_headers", ProviderHeadersEvent(headers=headers))

    async def provider_payload(self, payload: Any) -> Any:
        """``before_provider_request``: a handler's non-``None`` answer replaces the payload
        for the handlers after it and for the request."""
        current = payload
        for extension in self.extensions:
            for handler in list(extension.handlers_for("before_provider_request")):
                event = ProviderRequestEvent(payload=current)
                answer = await self._call(extension, "before_provider_request", handler, event)
                if answer is not None:
                    current = answer
        return current

    async def tool_call(
        self,
        tool_name: str,
        tool_call_id: str,
        args: dict[str, Any],
        parent_tool_call_id: str | None = None,
    ) -> ToolCallResult | None:
        """``tool_call``: the first ``block`` wins; otherwise the last non-empty result.

        A handler's exception is not isolated: it raises :class:`ToolCallBlockedError`,
        which blocks the call (spec §7.3)."""
        event = ToolCallEvent(
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            input=args,
            parent_tool_call_id=parent_tool_call_id,
        )
        last: ToolCallResult | None = None
        for extension in self.extensions:
            for handler in list(extension.handlers_for("tool_call")):
                try:
                    raw = await self._invoke(handler, (event, self._context()), None)
                    result = coerce(raw, ToolCallResult)
                except Exception as exc:
                    self.report(extension.path, "tool_call", exc)
                    raise ToolCallBlockedError(str(exc) or type(exc).__name__) from None
                if result is None:
                    continue
                if result.block:
                    return result
                last = result
        return last

    async def user_bash(self, event: UserBashEvent) -> UserBashResult | None:
        """``user_bash``: the first handler answering ``operations`` or ``result`` decides.

        Fails closed (pi 1.6.0): a handler that raises, times out or answers anything but
        ``None`` or exactly one valid field is reported and raises
        :class:`UserBashBlockedError`, so the command does not run."""
        for extension in self.extensions:
            for handler in list(extension.handlers_for("user_bash")):
                try:
                    limit = self.handler_timeout
                    raw = await self._invoke(handler, (event, self._context()), limit)
                    if raw is None:
                        continue
                    result = valid_user_bash(raw)
                except Exception as exc:
                    self.report(extension.path, "user_bash", exc)
                    raise UserBashBlockedError(str(exc) or type(exc).__name__) from None
                return result
        return None

    async def tool_result(self, event: ToolResultEvent) -> ToolResultEvent:
        """``tool_result``: partial patches chained; each handler sees the latest values."""
        current = event
        for extension in self.extensions:
            for handler in list(extension.handlers_for("tool_result")):
                patch = await self._result(
                    extension, "tool_result", handler, current, ToolResultPatch
                )
                if patch is None:
                    continue
                current = attrs.evolve(
                    current,
                    content=current.content if patch.content is None else tuple(patch.content),
                    details=current.details if patch.details is None else patch.details,
                    is_error=current.is_error if patch.is_error is None else patch.is_error,
                )
        return current

    async def message_end(self, message: AgentMessage, event: Any) -> AgentMessage:
        """``message_end``: a replacement of the same role is taken (chained); any other is
        reported and ignored."""
        current = message
        for extension in self.extensions:
            for handler in list(extension.handlers_for("message_end")):
                payload = event if current is message else attrs.evolve(event, message=current)
                result = await self._result(
                    extension, "message_end", handler, payload, MessageEndResult
                )
                if result is None or result.message is None:
                    continue
                replacement = result.message
                if getattr(replacement, "role", None) != current.role:
                    self.report(
                        extension.path,
                        "message_end",
                        f"replacement message has role {getattr(replacement, 'role', None)!r}, "
                        f"expected {current.role!r}; ignored",
                    )
                    continue
                current = replacement
        return current

    async def before(self, event: str, payload: Any, cls: type[R]) -> R | None:
        """``session_before_*``: the first result with ``cancel`` wins at once; otherwise the
        last non-empty result."""
        last: R | None = None
        for extension in self.extensions:
            for handler in list(extension.handlers_for(event)):
                result = await self._result(extension, event, handler, payload, cls)
                if result is None:
                    continue
                if getattr(result, "cancel", False):
                    return result
                last = result
        return last

    async def resources_discover(self, event: ResourcesDiscoverEvent) -> DiscoveredPaths:
        """``resources_discover``: every handler's paths, in load order, each with its
        extension; a failing handler is reported and adds nothing."""
        skills: list[tuple[str, str]] = []
        prompts: list[tuple[str, str]] = []
        themes: list[tuple[str, str]] = []
        name = "resources_discover"
        for extension in self.extensions:
            for handler in list(extension.handlers_for(name)):
                result = await self._result(
                    extension, name, handler, event, ResourcesDiscoverResult
                )
                if result is None:
                    continue
                skills += [(str(path), extension.path) for path in result.skill_paths]
                prompts += [(str(path), extension.path) for path in result.prompt_paths]
                themes += [(str(path), extension.path) for path in result.theme_paths]
        return DiscoveredPaths(
            skill_paths=tuple(skills), prompt_paths=tuple(prompts), theme_paths=tuple(themes)
        )

    async def cache_warming_decision(
        self, event: CacheWarmingDecisionEvent
    ) -> Literal["warm", "stop"]:
        """``cache_warming_decision``: the last handler that names an action decides; a
        failing handler is reported and leaves the action as it was."""
        action = event.action
        name = event.type
        for extension in self.extensions:
            for handler in list(extension.handlers_for(name)):
                result = await self._result(
                    extension, name, handler, event, CacheWarmingDecisionResult
                )
                if result is not None and result.action in ("warm", "stop"):
                    action = result.action
        return action

    async def boundary(
        self,
        event: str,
        payload: Any,
        preview: Callable[[tuple[Any, ...]], Awaitable[Any]] | None = None,
    ) -> tuple[tuple[Any, ...], bool]:
        """``turn_end`` / ``agent_before_settle``: each handler sees the drafts and the
        ``continue`` decided before it and may replace them; a failing handler is reported and
        its predecessors' values kept. With ``preview``, each handler's ``context`` is the
        context with those drafts applied (pi 1.6.0), built again only when they changed.
        Returns (drafts, continue)."""
        entries: tuple[Any, ...] = ()
        proceed = False
        previewed: tuple[Any, ...] = ()
        context = getattr(payload, "context", None)
        for extension in self.extensions:
            for handler in list(extension.handlers_for(event)):
                if preview is not None and entries != previewed:
                    context, previewed = await preview(entries), entries
                current = attrs.evolve(payload, entries=entries, continue_=proceed)
                if preview is not None:
                    current = attrs.evolve(current, context=context)
                result = await self._result(extension, event, handler, current, BoundaryResult)
                if result is None:
                    continue
                if result.entries is not None:
                    entries = tuple(result.entries)
                if result.continue_ is not None:
                    proceed = bool(result.continue_)
        return entries, proceed

    async def run_command(self, name: str, command: Command, args: str, ctx: Any) -> None:
        """Run a command; its failure is reported as ``command:<name>`` / ``command``."""
        try:
            await self._invoke(command.handler, (args, ctx), None)
        except Exception as exc:
            self.report(f"command:{name}", "command", exc)


__all__ = [
    "DEFAULT_HANDLER_TIMEOUT",
    "BeforeCompactResult",
    "CancelResult",
    "ExtensionRunner",
    "StartAdditions",
    "ToolCallBlockedError",
    "UserBashBlockedError",
    "coerce",
]
