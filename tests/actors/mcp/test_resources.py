"""The resource tools against a real server offering one text resource."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.actors.mcp.support import forked, mcp_session, text, time_server

NAMES = Path(__file__).parents[2] / "interop" / "mcp_names_server.py"


def names_server() -> dict[str, object]:
    return {"command": sys.executable, "args": forked(str(NAMES)), "exposure": "direct"}


NAMES_TOOLS = [
    "mcp__names__get_thing",
    "mcp__names__a_b_3c93d5f5",
    "mcp__names__a_b_0b3cd863",
    "mcp__names__titled",
    "mcp__names__secret_one",
    "mcp__names__secret_two",
]
RESOURCES = ["list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource"]


async def test_list_and_read_a_resource(tmp_path: Path) -> None:
    servers = {"names": names_server(), "time": time_server()}
    async with mcp_session(tmp_path, servers) as s:
        tools = [tool.name for tool in await s.started.tools.active_tools()]
        # Declared where 1.6.0 registers them: after the first server with resources to
        # connect (both offer them). The servers' tools come in the order they connected (a
        # race, as in 1.6.0).
        clock = ["mcp__time__get_current_time", "mcp__time__convert_time"]
        assert [t for t in tools if t.startswith("mcp__") or "mcp_resource" in t] in (
            [*clock, *RESOURCES, *NAMES_TOOLS],
            [*NAMES_TOOLS, *RESOURCES, *clock],
        )
        await s.started.session.prompt("<<list_mcp_resources {}>>")
        listing = json.loads(text(await s.last_result()))
        assert list(listing) == ["resources"]  # every server answered
        found = [(r["server"], r["uri"], r["name"], r["mimeType"]) for r in listing["resources"]]
        assert found == [("names", "memo://notes", "notes", "text/plain")]
        await s.started.session.prompt('<<list_mcp_resources {"server": "names"}>>')
        assert json.loads(text(await s.last_result()))["server"] == "names"
        await s.started.session.prompt(
            '<<read_mcp_resource {"server": "names", "uri": "memo://notes"}>>'
        )
        result = await s.last_result()
        assert (result.is_error, text(result)) == (False, "remember the milk")
        assert result.details == {"server": "names", "tool": "read_mcp_resource"}
        await s.started.session.prompt('<<read_mcp_resource {"server": "nope", "uri": "x"}>>')
        result = await s.last_result()
        assert result.is_error and "nope" in text(result)
        await s.started.session.prompt('<<list_mcp_resources {"cursor": "c"}>>')
        assert (await s.last_result()).is_error
