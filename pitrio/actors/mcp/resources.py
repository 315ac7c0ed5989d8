"""The resource tools of pi 1.6.0 (Codex's): ``list_mcp_resources``,
``list_mcp_resource_templates`` and ``read_mcp_resource``.

They reach every enabled server that offers resources and whose exposure is not ``hidden``,
and are made only when there is one. Listings are compact JSON: with ``server``, one page
``{server, resources: [{server, ...}], nextCursor?}`` (``cursor`` continues it); without,
every page of every such server (by name) and ``errors`` for those that failed. MCP App
resources (``ui://`` URIs, ``profile=mcp-app`` HTML) and icons are left out. A read gives the
resource's text and images; several contents are each headed by their URI.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import mcp_types
import orjson
import trio

from pitrio.actors.mcp.actor import Connection, McpHandle
from pitrio.actors.mcp.config import McpServerConfig
from pitrio.actors.mcp.naming import (
    LIST_MCP_RESOURCE_TEMPLATES,
    LIST_MCP_RESOURCES,
    READ_MCP_RESOURCE,
)
from pitrio.actors.mcp.results import block_part, limit_parts, save_output
from pitrio.actors.mcp.tools import McpToolError
from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.content import TextContent

MAX_PAGES = 100
_APP_MIME = re.compile(r';\s*profile\s*=\s*"?mcp-app"?', re.IGNORECASE)


def _string(value: dict[str, Any], key: str) -> str | None:
    found = value.get(key)
    if found is None:
        return None
    if not isinstance(found, str):
        raise McpToolError(f"{key} must be a string")
    return found.strip() or None


def _prop(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


LIST_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server": _prop("The MCP server to list; leave it out for all servers with resources."),
        "cursor": _prop("The nextCursor of an earlier listing of that server, for its next page."),
    },
    "additionalProperties": False,
}
READ_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server": _prop("The MCP server, as named in the 'server' field of a listing."),
        "uri": _prop("The URI of the resource, as a listing gave it."),
    },
    "required": ["server", "uri"],
    "additionalProperties": False,
}
# pitrio's own words; the names and parameters are 1.6.0's (and Codex's).
LIST_DESCRIPTION = (
    "List the resources MCP servers offer: data such as files, schemas or records that a "
    "server shares as context. Look here before searching the web."
)
TEMPLATES_DESCRIPTION = (
    "List the resource templates MCP servers offer: URI patterns with parameters for "
    "resources a server does not list one by one."
)
READ_DESCRIPTION = "Read one resource of an MCP server, given the server's name and the URI."

Page = tuple[list[dict[str, Any]], str | None]


def _visible(item: dict[str, Any]) -> bool:
    uri = str(item.get("uri") or item.get("uriTemplate") or "")
    return not uri.startswith("ui://") and not _APP_MIME.search(str(item.get("mimeType") or ""))


def _listed(server: str, item: Any) -> dict[str, Any]:
    data = item.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data.pop("_meta", None)
    data.pop("icons", None)
    return {"server": server, **data}


async def _resources_page(connection: Connection, cursor: str | None) -> Page:
    params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
    result = await connection.session.list_resources(params=params)
    return [_listed(connection.server, r) for r in result.resources], result.next_cursor


async def _templates_page(connection: Connection, cursor: str | None) -> Page:
    params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
    result = await connection.session.list_resource_templates(params=params)
    return [_listed(connection.server, r) for r in result.resource_templates], result.next_cursor


PageFn = Callable[[Connection, str | None], Awaitable[Page]]


def _limited(tool: str, server: str | None, parts: list[Any], structured: Any) -> AgentToolResult:
    """A result within the text limit (blocking: a cut one's full text is saved)."""
    parts, path = limit_parts(parts, save_output)
    details: dict[str, Any] = {"server": server or "", "tool": tool}
    if path is not None:
        details["fullOutputPath"] = path
    return AgentToolResult(content=tuple(parts), details=details, structured_content=structured)


async def _json_result(tool: str, server: str | None, payload: dict[str, Any]) -> AgentToolResult:
    parts = [TextContent(text=orjson.dumps(payload).decode())]
    return await trio.to_thread.run_sync(lambda: _limited(tool, server, parts, payload))


class ResourceTools:
    """The three tools over the servers of ``configs`` that offer resources."""

    def __init__(self, configs: Sequence[McpServerConfig], mcp: McpHandle):
        self._configs = {config.name: config for config in configs}
        self._mcp = mcp

    async def _connection(self, name: str) -> Connection:
        config = self._configs.get(name)
        connection = None if config is None else await self._mcp.connect(name)
        if connection is None or not connection.has_resources:
            names = ", ".join(sorted(self._configs))
            raise McpToolError(f"MCP server {name} offers no resources (servers that do: {names})")
        return connection

    async def _all(self, connection: Connection, page: PageFn) -> list[dict[str, Any]]:
        items, cursor = await page(connection, None)
        for _ in range(MAX_PAGES):
            if not cursor:
                break
            more, cursor = await page(connection, cursor)
            items += more
        return items

    async def _list(self, args: dict[str, Any], key: str, page: PageFn) -> dict[str, Any]:
        server, cursor = _string(args, "server"), _string(args, "cursor")
        if server is not None:
            connection = await self._connection(server)
            listed, next_cursor = await page(connection, cursor)
            payload: dict[str, Any] = {"server": server, key: [i for i in listed if _visible(i)]}
            if next_cursor is not None:
                payload["nextCursor"] = next_cursor
            return payload
        if cursor is not None:
            raise McpToolError("a cursor needs the server it came from")
        names = sorted(self._configs)
        found: dict[str, list[dict[str, Any]] | str] = {}

        async def one(name: str) -> None:
            try:
                found[name] = await self._all(await self._connection(name), page)
            except Exception as exc:  # one server's failure is reported, not fatal
                found[name] = str(exc) or type(exc).__name__

        async with trio.open_nursery() as nursery:
            for name in names:
                nursery.start_soon(one, name)
        items: list[dict[str, Any]] = []
        errors: list[dict[str, str]] = []
        for name in names:
            outcome = found[name]
            if isinstance(outcome, str):
                errors.append({"server": name, "error": outcome})
            else:
                items += [item for item in outcome if _visible(item)]
        return {key: items, **({"errors": errors} if errors else {})}

    async def _read(self, args: dict[str, Any]) -> AgentToolResult:
        server, uri = _string(args, "server"), _string(args, "uri")
        if server is None:
            raise McpToolError("server must be provided")
        if uri is None:
            raise McpToolError("uri must be provided")
        connection = await self._connection(server)
        result = await connection.session.read_resource(uri)
        contents = [
            c.model_dump(mode="json", by_alias=True, exclude_unset=True) for c in result.contents
        ]
        for item in contents:
            item.pop("_meta", None)

        def convert() -> AgentToolResult:
            parts: list[Any] = []
            for each in result.contents:
                if len(result.contents) > 1:  # several (a directory): each headed by its URI
                    parts.append(TextContent(text=f"{each.uri}:"))
                block = mcp_types.EmbeddedResource(type="resource", resource=each)
                parts.append(block_part(server, block, save_output))
            parts = parts or [TextContent(text=f"Resource {uri} is empty.")]
            structured = {"server": server, "uri": uri, "contents": contents}
            return _limited(READ_MCP_RESOURCE, server, parts, structured)

        return await trio.to_thread.run_sync(convert)

    def tools(self) -> list[AgentTool]:
        """The three agent tools."""

        async def list_resources(
            tool_call_id: str, args: dict[str, Any], on_update: UpdateFn
        ) -> AgentToolResult:
            payload = await self._list(args, "resources", _resources_page)
            return await _json_result(LIST_MCP_RESOURCES, _string(args, "server"), payload)

        async def list_templates(
            tool_call_id: str, args: dict[str, Any], on_update: UpdateFn
        ) -> AgentToolResult:
            payload = await self._list(args, "resourceTemplates", _templates_page)
            return await _json_result(LIST_MCP_RESOURCE_TEMPLATES, _string(args, "server"), payload)

        async def read(
            tool_call_id: str, args: dict[str, Any], on_update: UpdateFn
        ) -> AgentToolResult:
            return await self._read(args)

        return [
            AgentTool(
                name=LIST_MCP_RESOURCES,
                label=LIST_MCP_RESOURCES,
                description=LIST_DESCRIPTION,
                parameters=LIST_PARAMETERS,
                execute=list_resources,
            ),
            AgentTool(
                name=LIST_MCP_RESOURCE_TEMPLATES,
                label=LIST_MCP_RESOURCE_TEMPLATES,
                description=TEMPLATES_DESCRIPTION,
                parameters=LIST_PARAMETERS,
                execute=list_templates,
            ),
            AgentTool(
                name=READ_MCP_RESOURCE,
                label=READ_MCP_RESOURCE,
                description=READ_DESCRIPTION,
                parameters=READ_PARAMETERS,
                execute=read,
            ),
        ]
