"""Which tools and MCP servers a session starts with: the active tool list, codemode and the
MCP tools it reaches, the client's and the extensions' servers (used by
:func:`~pitrio.actors.session.bootstrap.start_session`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import trio

from pitrio.actors.mcp.live import Activation, McpToolSet, script_reach
from pitrio.actors.mcp.search_tool import TOOL_SEARCH
from pitrio.actors.mcp.session import SessionMcp, rank_tools
from pitrio.actors.mcp.state import McpServerState
from pitrio.actors.session.extensions.late_mcp import LateMcpServers
from pitrio.actors.session.options import SessionOptions
from pitrio.actors.session.tool_selection import (
    ToolListError,
    default_selection,
    is_edit_list,
    matches,
    registered,
    select_tools,
)
from pitrio.actors.session_store import SessionStoreHandle
from pitrio.actors.tool_executor import BUILTIN_TOOL_NAMES, AgentTool, ToolExecutorHandle
from pitrio.actors.tool_executor.codemode.describe import CODEMODE, DEFAULT_INLINE_BUDGET
from pitrio.actors.tool_executor.codemode.tool import CodemodeHost, create_codemode_tool
from pitrio.actors.tool_executor.registry import DEFAULT_ACTIVE_TOOLS
from pitrio.errors import PitrioError

if TYPE_CHECKING:
    from pitrio.actors.mcp.actor import McpHandle


def active_tools(
    options: SessionOptions,
    extra: Sequence[AgentTool],
    mcp: Sequence[AgentTool],
    default_tools: object = None,
    *,
    always: bool = False,
    inactive: Sequence[str] = (),
) -> Sequence[str] | None:
    """The tools to activate: ``active_tools`` as given, else pi 1.6.0's selection when a
    selection flag or ``defaultTools`` was used (or ``always``), else ``None`` (the
    executor's defaults, which the selection without flags equals)."""
    if options.active_tools is not None:
        return options.active_tools
    configured = None
    if isinstance(default_tools, list) and all(isinstance(t, str) for t in default_tools):
        configured = default_tools
    flags = options.tool_patterns is not None or options.exclude_tools
    if not flags and not options.no_builtin_tools and configured is None and not always:
        return None
    try:
        return select_tools(
            builtin=BUILTIN_TOOL_NAMES if options.builtin_tools else (),
            defaults=DEFAULT_ACTIVE_TOOLS if configured is None else default_selection(configured),
            extra=[tool.name for tool in extra],
            mcp=[tool.name for tool in mcp],
            tools=options.tool_patterns,
            exclude=options.exclude_tools,
            no_builtin_tools=options.no_builtin_tools,
            inactive=inactive,
        )
    except ToolListError as exc:
        raise PitrioError(f"--tools: {exc}") from None


def client_servers(servers: Any) -> dict[str, Any]:
    """A client's servers (an editor's, over ACP) with ``direct`` exposure unless they say
    otherwise: the client gave them to be called, and shows each call (1.6.0's ``codemode``
    default is for ``mcp.json``, whose users chose it)."""
    return {
        name: {"exposure": "direct", **dict(entry)} if hasattr(entry, "keys") else entry
        for name, entry in dict(servers).items()
    }


def script_waits(
    live: McpToolSet | None, executor: Callable[[], ToolExecutorHandle]
) -> Callable[[str], Awaitable[Sequence[AgentTool]]] | None:
    """What a codemode script waits for before it runs: the MCP servers it may reach
    (:func:`~pitrio.actors.mcp.live.script_reach`), then the session's callable tools
    (``None``: the session has no MCP servers)."""
    if live is None:
        return None

    async def wait(code: str) -> Sequence[AgentTool]:
        await live.wait_for_reach(script_reach(code))
        return await executor().callable_tools()

    return wait


def mcp_wait(
    live: McpToolSet | None, session: Callable[[], Any], nursery: trio.Nursery
) -> Callable[[], Awaitable[None]] | None:
    """What a run waits for before its prompt sections are built: the first one, up to
    10 s, for the servers with ``direct`` tools; when some are still connecting, the
    clients are told (1.6.0's notice), without making the run wait for that."""
    if live is None:
        return None

    async def wait() -> None:
        notice = await live.wait_for_direct()
        if notice is not None:
            nursery.start_soon(session().notify, notice, "info")

    return wait


def codemode_tool(
    store: SessionStoreHandle,
    config: object,
    reach: Callable[[str], Awaitable[Sequence[AgentTool]]] | None = None,
) -> AgentTool | None:
    """The session's ``codemode`` tool, its store on the session's branch (``reach``: see
    :func:`script_waits`)."""
    settings = config if isinstance(config, dict) else {}
    budget = settings.get("inlineBudget")
    host = CodemodeHost(
        branch_entries=store.branch_entries,
        append_entry=store.append_custom_entry,
        search=rank_tools,
        mode="only" if settings.get("mode") == "only" else "on",
        reach=reach,
        inline_budget=(
            int(budget)
            if isinstance(budget, int | float) and not isinstance(budget, bool) and budget >= 0
            else DEFAULT_INLINE_BUDGET
        ),
    )
    return create_codemode_tool(host)


def codemode_reach(
    options: SessionOptions, mcp: SessionMcp, active: Sequence[str] | None
) -> tuple[Sequence[str] | None, str | None]:
    """The active set with ``codemode`` added when a server's configured exposures ask for
    it, as 1.6.0's MCP extension does before its servers connect unless
    ``autoEnableCodemode`` is false; and the warning when nothing reaches those tools."""
    if active is None or not mcp.wants_codemode:
        return active, None
    patterns = options.tool_patterns
    plain = patterns is not None and not is_edit_list(patterns)
    kept = list(active)
    allowed = not any(matches(CODEMODE, p) for p in options.exclude_tools) and (
        not plain or any(matches(CODEMODE, entry) for entry in patterns or ())
    )
    if mcp.auto_enable_codemode and allowed and CODEMODE not in kept:
        kept.append(CODEMODE)
    if CODEMODE in kept or TOOL_SEARCH in kept:
        return kept, None
    reason = " (autoEnableCodemode is false)" if not mcp.auto_enable_codemode else ""
    return kept, (
        "Warning: MCP tools are only reachable from the codemode or tool_search tool, but "
        f"neither is active{reason}; they cannot be called."
    )


def mcp_activation(options: SessionOptions) -> Activation:
    """Whether a server tool is registered active, inactive or not at all, by the tool
    flags (pi 1.6.0): ``--exclude-tools`` and an allowlist with ``mcp__`` entries that does
    not match it leave it out; a ``direct`` tool is declared unless an allowlist does not
    match it or ``-name`` removes it; a ``codemode`` one only when an ``mcp__`` entry of an
    allowlist names it; a ``deferred`` one once ``tool_search`` loads it."""
    patterns, exclude, chosen = options.tool_patterns, options.exclude_tools, options.active_tools
    plain = patterns is not None and not is_edit_list(patterns)

    def activation(name: str, exposure: str) -> bool | None:
        if not registered(name, patterns, exclude):
            return None
        if chosen is not None:
            return name in chosen
        if plain:
            if exposure == "direct":
                return any(matches(name, entry) for entry in patterns or ())
            return exposure == "codemode" and any(
                entry.startswith("mcp__") and matches(name, entry) for entry in patterns or ()
            )
        return exposure == "direct" and f"-{name}" not in (patterns or ())

    return activation


def extension_mcp_servers(config: dict[str, Any] | None) -> tuple[Any, str] | None:
    """The MCP servers extensions registered while loading, for the session's MCP start."""
    return None if config is None else (config, "servers registered by extensions")


def mcp_states(
    handle: McpHandle | None, late: LateMcpServers | None
) -> Callable[[], tuple[McpServerState, ...]] | None:
    """What lists the session's MCP servers for ``get_state``: the start-up actor's, then
    those extensions registered later (``None``: the session has no MCP support at all)."""
    if handle is None and late is None:
        return None

    def states() -> tuple[McpServerState, ...]:
        first = () if handle is None else handle.servers()
        return (*first, *(() if late is None else late.states()))

    return states
