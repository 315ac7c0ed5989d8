"""pi 1.6.0's ``register_mcp_server`` / ``unregister_mcp_server`` / ``get_mcp_servers`` and
``mcp_servers_change``: the API's rules on hand-made extensions, a server registered during
``setup`` started with the session (a real server process), and registrations after start-up."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing

import pitrio
from pitrio.actors.mcp.config import load_mcp_config
from pitrio.actors.model_router import FauxReply, FauxToolCall
from pitrio.actors.session.extensions.api import (
    EventBus,
    ExtensionAPI,
    ExtensionApiError,
    PortHolder,
)
from pitrio.actors.session.extensions.events import McpServersChangeEvent
from pitrio.actors.session.extensions.registry import Extension, SourceInfo
from pitrio.messages.events import ExtensionError
from tests.actors import extension_probe
from tests.actors.mcp.support import SERVERS, WAIT, edge_server, forked
from tests.actors.test_session_extensions import agent_dir, session_with

__all__ = ["agent_dir"]  # the fixture, used by name


def api_of(name: str, holder: PortHolder) -> ExtensionAPI:
    path = f"/x/{name}.py"
    extension = Extension(
        path=path, source_info=SourceInfo(path=path, source="cli", scope="temporary")
    )
    return ExtensionAPI(extension, EventBus(), holder)


def test_registrations_are_validated_owned_and_listed_in_order() -> None:
    holder = PortHolder()
    one, two = api_of("one", holder), api_of("two", holder)
    one.register_mcp_server("jira", {"url": "https://mcp.example.com/jira"})
    one.register_mcp_server("my-docs", {"command": "docs-server", "exposure": "direct"})
    one.register_mcp_server("jira", {"url": "https://mcp.example.com/v2"})  # replaced in place
    with pytest.raises(ExtensionApiError, match=r'already registered by extension "/x/one\.py"'):
        two.register_mcp_server("jira", {"url": "https://elsewhere.example.com"})
    with pytest.raises(ExtensionApiError, match='conflicts with registered server "my-docs"'):
        two.register_mcp_server("my_docs", {"command": "x"})
    with pytest.raises(ExtensionApiError, match=r'Invalid MCP server .*"/x/two.py"'):
        two.register_mcp_server("bad", {"exposure": "direct"})  # neither command nor url
    two.unregister_mcp_server("jira")  # not its own: left alone
    listed = two.get_mcp_servers()
    assert [(s.name, s.extension_path) for s in listed] == [
        ("jira", "/x/one.py"),
        ("my-docs", "/x/one.py"),
    ]
    assert listed[0].to_json() == {
        "name": "jira",
        "config": {"url": "https://mcp.example.com/v2"},
        "extensionPath": "/x/one.py",
    }
    one.unregister_mcp_server("jira")
    assert [s.name for s in one.get_mcp_servers()] == ["my-docs"]


def test_an_mcp_json_server_of_the_same_name_wins(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "mcp.json").write_text(
        orjson.dumps({"mcpServers": {"shared": {"command": "from-file"}}}).decode()
    )
    registered = {"mcpServers": {"shared": {"command": "from-ext"}, "own": {"command": "own"}}}
    config = load_mcp_config(agent, str(tmp_path), registered=(registered, "extensions"))
    by_name = {server.name: server for server in config.servers}
    assert by_name["shared"].command == "from-file"
    assert by_name["own"].command == "own" and by_name["own"].source == "extensions"


async def test_a_server_registered_in_setup_starts_with_the_session(
    tmp_path: Path, agent_dir: Path
) -> None:
    markers = tmp_path / "markers"

    apis: list[Any] = []

    def setup(api: Any) -> None:
        apis.append(api)
        api.register_mcp_server("edge", edge_server(markers, exposure="direct"))

    extension_probe.setup = setup
    path = extension_probe.write_bridge(tmp_path / "exts")
    with trio.fail_after(WAIT):
        async with pitrio.create_session(
            cwd=str(tmp_path),
            model="faux/echo",
            persist=False,
            extensions=[str(path)],
        ) as session:
            # It connects in the background (pi 1.6.0); its first start ends soon after.
            await session.mcp.wait()
            state = await session.handle.state()
            tools = [tool.name for tool in await apis[0].get_all_tools()]
    (edge,) = [s for s in state.mcp_servers if s.name == "edge"]
    assert edge.status == "running" and edge.tools
    assert any(name.startswith("mcp__edge__") for name in tools)


async def test_later_registrations_reach_mcp_servers_change_or_are_reported(
    tmp_path: Path, agent_dir: Path
) -> None:
    """With the built-in MCP support off (``--no-mcp``) nothing connects the servers: a
    registration is reported until a handler of ``mcp_servers_change`` takes them."""
    changes: list[McpServersChangeEvent] = []
    apis: list[Any] = []

    def setup(api: Any) -> None:
        apis.append(api)

    async with session_with(tmp_path, setup, no_mcp=True) as h:
        apis[0].register_mcp_server("late", {"command": "late-server"})
        error = await h.next_of(ExtensionError)
        assert error.event == "register_mcp_server" and '"late"' in error.error
        apis[0].on("mcp_servers_change", lambda event, ctx: changes.append(event))
        apis[0].register_mcp_server("later", {"url": "https://mcp.example.com"})
        apis[0].unregister_mcp_server("late")
        await trio.testing.wait_all_tasks_blocked()
        events = await h.drain()
    assert [[s.name for s in change.servers] for change in changes] == [
        ["late", "later"],
        ["later"],
    ]
    assert not any(isinstance(e, ExtensionError) for e in events[events.index(error) + 1 :])


async def test_a_server_registered_later_connects_and_unregistering_closes_it(
    tmp_path: Path, agent_dir: Path
) -> None:
    markers = tmp_path / "markers"
    (tmp_path / "proj").mkdir()  # the servers' working directory
    apis: list[Any] = []

    def setup(api: Any) -> None:
        apis.append(api)

    async with session_with(tmp_path, setup) as h:
        api = apis[0]
        with trio.fail_after(WAIT):
            api.register_mcp_server("edge", edge_server(markers, exposure="direct"))
            api.register_mcp_server("quiet", edge_server(markers, exposure="deferred"))
            await _synced(api)
        listed = {s.name: s.status for s in (await h.session.handle.state()).mcp_servers}
        active = list(await api.get_active_tools())
        search = api._holder.late_mcp._search
        searchable = search.names
        known = [tool.name for tool in await api.get_all_tools()]
        pids = [int(line) for line in (markers / "starts").read_text().split()]
        await h.session.prompt("hi")
        prompt_with = h.faux.last_request.context.system_prompt
        with trio.fail_after(WAIT):
            api.unregister_mcp_server("edge")
            api.unregister_mcp_server("quiet")
            await _synced(api)
        alive = _running(pids)
        after = [tool.name for tool in await api.get_all_tools()]
        searchable_after = search.names
        listed_after = [s.name for s in (await h.session.handle.state()).mcp_servers]
        await h.session.prompt("again")
        prompt_without = h.faux.last_request.context.system_prompt
        errors = [e for e in await h.drain() if isinstance(e, ExtensionError)]
    assert "mcp__edge__fail" in active and "mcp__edge__fail" in known
    assert "mcp__quiet__fail" in known and "mcp__quiet__fail" not in active  # deferred
    assert "mcp__quiet" in prompt_with  # the mcp_servers section lists the deferred server
    # The session had no tool_search: it is made for the deferred tools, which it searches.
    assert "tool_search" in active and "mcp__quiet__fail" in searchable
    assert "mcp__edge__fail" not in searchable
    assert not any(name.startswith("mcp__quiet__") for name in searchable_after)
    assert len(pids) == 2 and alive == []  # closing the connections ended both processes
    assert not any(name.startswith(("mcp__edge__", "mcp__quiet__")) for name in after)
    assert "mcp__quiet" not in prompt_without
    assert listed == {"edge": "running", "quiet": "running"}  # get_state's mcpServers
    assert listed_after == []
    assert errors == []


def _running(pids: list[int]) -> list[int]:
    """The processes among ``pids`` that still exist (a zombie too: not yet reaped)."""
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


async def _synced(api: Any) -> None:
    """Bring the late servers to the registrations now (after the syncs the calls started,
    which the lock orders before this one)."""
    holder = api._holder
    await holder.late_mcp.sync(holder.port, holder.mcp_servers)


async def test_unregistering_a_server_registered_in_setup_closes_it(
    tmp_path: Path, agent_dir: Path
) -> None:
    """Issue 35 item 3: a server an extension registered during ``setup`` started with the
    session's other servers; unregistering it closes it like a later one, and registering
    the name again with another entry starts that one."""
    markers = tmp_path / "markers"
    (tmp_path / "proj").mkdir()
    apis: list[Any] = []

    def setup(api: Any) -> None:
        apis.append(api)
        # codemode (1.6.0's default): the mcp_servers section lists it
        api.register_mcp_server("edge", edge_server(markers, exposure="codemode"))

    async with session_with(tmp_path, setup) as h:
        api = apis[0]
        with trio.fail_after(WAIT):  # it connects in the background (pi 1.6.0)
            await h.session.mcp.wait()
        before = [tool.name for tool in await api.get_all_tools()]
        listed = {s.name: s.status for s in (await h.session.handle.state()).mcp_servers}
        pids = [int(line) for line in (markers / "starts").read_text().split()]
        await h.session.prompt("hi")
        prompt_with = h.faux.last_request.context.system_prompt
        with trio.fail_after(WAIT):
            api.unregister_mcp_server("edge")
            await _synced(api)
        alive = _running(pids)
        after = [tool.name for tool in await api.get_all_tools()]
        listed_after = [s.name for s in (await h.session.handle.state()).mcp_servers]
        await h.session.prompt("again")
        prompt_without = h.faux.last_request.context.system_prompt
        with trio.fail_after(WAIT):  # the name again, another entry: a new server
            api.register_mcp_server("edge", edge_server(markers, exposure="direct"))
            await _synced(api)
        again = {s.name: s.status for s in (await h.session.handle.state()).mcp_servers}
        active_again = list(await api.get_active_tools())
        starts = (markers / "starts").read_text().split()
        errors = [e for e in await h.drain() if isinstance(e, ExtensionError)]
    assert listed == {"edge": "running"} and "mcp__edge__fail" in before
    assert "mcp__edge" in prompt_with
    assert len(pids) == 1 and alive == []  # the connection and its process are gone
    assert not any(name.startswith("mcp__edge__") for name in after)
    assert listed_after == []
    assert "mcp__edge" not in prompt_without
    assert again == {"edge": "running"} and len(starts) == 2
    assert "mcp__edge__fail" in active_again  # the new entry's exposure: direct
    assert errors == []


async def test_a_server_registered_later_follows_its_tool_list_changes(
    tmp_path: Path, agent_dir: Path
) -> None:
    (tmp_path / "proj").mkdir()
    apis: list[Any] = []
    changing = {"command": sys.executable, "args": forked(str(SERVERS / "changing.py"))}

    replies = (
        FauxReply(tool_calls=(FauxToolCall("mcp__changing__grow", {"name": "fresh"}),)),
        FauxReply(text="grown"),
        FauxReply(tool_calls=(FauxToolCall("mcp__changing__fresh", {}),)),
        FauxReply(text="called"),
    )
    async with session_with(tmp_path, apis.append, replies=replies) as h:
        api = apis[0]
        with trio.fail_after(WAIT):
            api.register_mcp_server("changing", {**changing, "exposure": "direct"})
            await _synced(api)
        live = api._holder.late_mcp._running["changing"].live
        await h.session.prompt("grow")
        with trio.fail_after(WAIT):
            await live.wait_applied(2)  # listed again after its list_changed
        await h.session.prompt("call it")
        declared = [t.name for t in h.faux.last_request.context.tools]
        results = [m for m in await h.session.handle.messages() if m.role == "toolResult"]
        with trio.fail_after(WAIT):
            api.unregister_mcp_server("changing")
            await _synced(api)
        after = [tool.name for tool in await api.get_all_tools()]
    assert "mcp__changing__fresh" in declared
    assert [part.text for part in results[-1].content] == ["grown fresh"]
    assert not any(name.startswith("mcp__changing__") for name in after)
