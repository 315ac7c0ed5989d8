"""``tool_search``: finds deferred tools by relevance and loads them (pi 1.6.0's).

The tools it may load are the session's ``deferred`` MCP tools (:mod:`.naming`), registered
with the tool executor but not active. A search ranks those not active yet
(:mod:`.ranking`), makes the best ``limit`` (default 8) active, and says which: the agent loop
declares them from the next request of the run on, and the transcript records them like any
change of the tool set (a ``system`` message's ``toolsAdded``), which is how they stay
declared after a resume (:func:`loaded_tools`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pitrio.actors.tool_executor.actor import ToolExecutorHandle
from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn
from pitrio.errors import ToolError
from pitrio.messages.agent import AgentMessage, AgentToolResult
from pitrio.messages.content import TextContent
from pitrio.messages.transcript import current_tools, replay

if TYPE_CHECKING:
    from pitrio.actors.mcp.ranking import SearchDocument

TOOL_SEARCH = "tool_search"
DEFAULT_LIMIT = 8
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What the tools you need should do."},
        "limit": {
            "type": "number",
            "description": f"How many tools to load at most (default {DEFAULT_LIMIT}).",
        },
    },
    "required": ["query"],
}
# pitrio's own words; the name and the parameters are 1.6.0's.
DESCRIPTION = (
    "# Finding tools\n\n"
    "Not every tool is declared to you from the start: the tools of some MCP servers are "
    "loaded on demand. Search their names and descriptions with this tool (`tool_search`); "
    "the best matches are loaded and can be called from your next step. Use it whenever you "
    "need an MCP tool you have not been given."
)
SNIPPET = "Find tools that are not loaded yet, and load the best matches"
DEFERRED_UNREACHABLE = (
    "Warning: MCP tools of deferred exposure are loaded only by tool_search, which is not "
    "active (see --tools); they cannot be called"
)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _limit(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolError("limit must be a positive integer")
    if value != int(value) or value <= 0:
        raise ToolError("limit must be a positive integer")
    return int(value)


class ToolSearch:
    """The tool over ``documents`` (deferred tool name -> what a search reads of it).

    The tool executor is attached once it runs (:meth:`attach`): the tool is one of the tools
    it is built with.
    """

    def __init__(self, documents: Mapping[str, SearchDocument]):
        self._documents = dict(documents)
        self._executor: Callable[[], ToolExecutorHandle] | None = None
        self._servers: Any = None

    @property
    def names(self) -> tuple[str, ...]:
        """The tools it may load."""
        return tuple(self._documents)

    def keep(self, wanted: Callable[[str], bool]) -> None:
        """Search only the tools ``wanted`` accepts (those the tool flags leave registered)."""
        self._documents = {name: doc for name, doc in self._documents.items() if wanted(name)}

    def add(self, documents: Mapping[str, SearchDocument]) -> None:
        """Search these tools too (a server an extension registered after start-up)."""
        self._documents.update(documents)

    def remove(self, names: Iterable[str]) -> None:
        """Stop searching these tools (their server was closed)."""
        for name in names:
            self._documents.pop(name, None)

    def attach(self, executor: Callable[[], ToolExecutorHandle], servers: Any = None) -> None:
        """Give it the session's tool executor, and the session's MCP tool set
        (:class:`~pitrio.actors.mcp.live.McpToolSet`), whose servers a search waits for."""
        self._executor = executor
        self._servers = servers

    async def search(self, query: str, limit: int) -> list[tuple[str, str]]:
        """Load the best matches of ``query`` not active yet; ``(name, description)`` each."""
        if self._executor is None:
            raise ToolError("tool_search is not attached to a tool executor")
        if self._servers is not None:  # 1.6.0 waits for every server's first start
            await self._servers.wait()
        executor = self._executor()
        active = [tool.name for tool in await executor.active_tools()]
        candidates = [doc for name, doc in self._documents.items() if name not in active]
        from pitrio.actors.mcp.ranking import rank  # with the first search (issue 38)

        matches = [name for name, _score in rank(query, candidates, limit)]
        if matches:
            await executor.set_active([*active, *matches])
        described = {doc.name: doc for doc in candidates}
        return [(name, _first_line(described[name].description)) for name in matches]

    def tool(self) -> AgentTool:
        """The agent tool."""

        async def execute(
            tool_call_id: str, args: dict[str, Any], on_update: UpdateFn
        ) -> AgentToolResult:
            query = args.get("query")
            if not isinstance(query, str) or not query.strip():
                raise ToolError("query must not be empty")
            loaded = await self.search(query, _limit(args.get("limit", DEFAULT_LIMIT)))
            if not loaded:
                text = "No tool matched."
            else:
                plural = "" if len(loaded) == 1 else "s"
                lines = "\n".join(f"- {name}: {line}" for name, line in loaded)
                text = f"Loaded {len(loaded)} tool{plural}, callable from your next step:\n{lines}"
            return AgentToolResult(
                content=(TextContent(text=text),), details={"loaded": [n for n, _ in loaded]}
            )

        return AgentTool(
            name=TOOL_SEARCH,
            label=TOOL_SEARCH,
            description=DESCRIPTION,
            parameters=PARAMETERS,
            execute=execute,
            prompt_snippet=SNIPPET,
        )


def loaded_tools(messages: Iterable[AgentMessage], deferred: Sequence[str]) -> list[str]:
    """The ``deferred`` tools the transcript's ``system`` messages declare (loaded by an
    earlier search on this branch), in the transcript's order."""
    wanted = set(deferred)
    return [t.name for t in current_tools(replay(messages)) if t.name in wanted]


def declared_tools(messages: Iterable[AgentMessage]) -> set[str]:
    """The MCP tools the transcript's ``system`` messages declare (those an earlier search on
    this branch loaded among them)."""
    return {t.name for t in current_tools(replay(messages)) if t.name.startswith("mcp__")}


def with_loaded(
    active: Sequence[str], messages: Iterable[AgentMessage], deferred: Sequence[str]
) -> list[str]:
    """``active`` without the ``deferred`` tools, then those the transcript declares (loaded
    by an earlier search on this branch)."""
    excluded = set(deferred)
    kept = [name for name in active if name not in excluded]
    return kept + [n for n in loaded_tools(messages, deferred) if n not in kept]


async def restore_loaded(
    executor: ToolExecutorHandle, deferred: Sequence[str], messages: Iterable[AgentMessage]
) -> None:
    """Make the deferred tools active that ``messages`` (the branch now current) declare, and
    only those (after a move in the session's tree)."""
    active = [tool.name for tool in await executor.active_tools()]
    wanted = with_loaded(active, messages, deferred)
    if wanted != active:
        await executor.set_active(wanted)
