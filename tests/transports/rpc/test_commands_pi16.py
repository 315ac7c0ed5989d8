"""The commands and responses pi 1.6.0 added or changed, end to end through the RPC server.

``disposition`` on prompt/steer/follow_up, ``get_entries``, ``get_tree``, ``clear_queue``,
``get_available_thinking_levels``, ``bash`` with ``excludeFromContext`` and its
``bash_execution_update`` ids, ``agent_settled.aborted``, ``abort`` of a manual compaction,
the refusal of a prompt during one, and a model named at start-up staying selectable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from pitrio.actors.model_router import FauxProvider, FixtureRules
from tests.transports.rpc.harness import (
    Dirs,
    RpcClient,
    events_of,
    rpc_process,
    served,
    slow_summaries,
)
from tests.transports.rpc.transcripts import FIXTURE_EXTENSION

PACED = 200.0  # tokens per second, the fixtures' pace: a SLOW reply streams for ~1.3 s


def response_index(client: RpcClient, request_id: str) -> int:
    return next(
        i
        for i, line in enumerate(client.lines)
        if line["type"] == "response" and line.get("id") == request_id
    )


def file_entries(path: str) -> list[dict[str, Any]]:
    """The session file's entries (without the header)."""
    lines = [orjson.loads(line) for line in Path(path).read_bytes().splitlines() if line]
    return [line for line in lines if line["type"] != "session"]


async def test_dispositions_of_prompt_steer_and_follow_up(tmp_path: Path) -> None:
    faux = FauxProvider(default=FixtureRules(), tokens_per_second=PACED)
    async with served(tmp_path, faux) as client:
        started = await client.data({"type": "prompt", "message": "SLOW please"})
        await client.event("message_update")
        queued = await client.data(
            {"type": "prompt", "message": "next", "streamingBehavior": "followUp"}
        )
        steered = await client.data({"type": "steer", "message": "steered"})
        followed = await client.data({"type": "follow_up", "message": "followed"})
        await client.data({"type": "abort"})
    assert started == {"disposition": "started"}
    assert queued == steered == followed == {"disposition": "queued"}


async def test_agent_settled_says_whether_the_run_was_aborted(tmp_path: Path) -> None:
    faux = FauxProvider(default=FixtureRules(), tokens_per_second=PACED)
    async with served(tmp_path, faux) as client:
        await client.data({"type": "prompt", "message": "Hello"})
        first = await client.event("agent_settled")
        await client.data({"type": "prompt", "message": "SLOW please"})
        await client.event("message_update", 2)
        await client.data({"type": "abort"})
        second = await client.event("agent_settled", 2)
        # An abort with nothing running answers at once and settles nothing.
        assert await client.data({"type": "abort"}) is None
    assert first == {"type": "agent_settled", "aborted": False}
    assert second == {"type": "agent_settled", "aborted": True}
    assert len(events_of(client.lines, "agent_settled")) == 2


async def test_clear_queue_reports_what_it_removed_after_its_queue_update(
    tmp_path: Path,
) -> None:
    async with served(tmp_path) as client:
        await client.data({"type": "steer", "message": "s1"})
        await client.data({"type": "follow_up", "message": "f1"})
        await client.data({"type": "follow_up", "message": "f2"})
        cleared = await client.data({"type": "clear_queue"})
        state = await client.data({"type": "get_state"})
        again = await client.data({"type": "clear_queue"})
    assert cleared == {"steering": ["s1"], "followUp": ["f1", "f2"]}
    assert list(cleared) == ["steering", "followUp"]
    assert again == {"steering": [], "followUp": []}
    assert state["pendingMessageCount"] == 0
    answer = response_index(client, "r4")
    assert client.lines[answer - 1] == {"type": "queue_update", "steering": [], "followUp": []}


async def test_entries_and_tree_cover_the_whole_file(tmp_path: Path) -> None:
    async with served(tmp_path) as client:
        await client.data({"type": "prompt", "message": "one"})
        await client.event("agent_settled")
        # Past the 60 kept tokens, so "one" is summarized (pi 1.6.0: a branch that fits the
        # kept budget is nothing to compact; the system message is no history).
        await client.data({"type": "prompt", "message": "two " + "padding " * 40})
        await client.event("agent_settled", 2)
        await client.data({"type": "compact"})
        everything = await client.data({"type": "get_entries"})
        state = await client.data({"type": "get_state"})
        tree = await client.data({"type": "get_tree"})
        first_id = everything["entries"][0]["id"]
        since = await client.data({"type": "get_entries", "since": first_id})
        last_id = everything["entries"][-1]["id"]
        none_after = await client.data({"type": "get_entries", "since": last_id})
        unknown = await client.request({"type": "get_entries", "since": "nope"})
    # Append order, the header left out, the history before the compaction kept, each entry
    # as the file has it.
    assert everything["entries"] == file_entries(state["sessionFile"])
    assert list(everything) == ["entries", "leafId"]
    kinds = [e["type"] for e in everything["entries"]]
    assert kinds[-1] == "compaction" and kinds.count("message") >= 4
    assert everything["leafId"] == last_id
    assert since["entries"] == everything["entries"][1:]
    assert none_after == {"entries": [], "leafId": last_id}
    assert unknown["success"] is False and unknown["error"] == "Entry not found: nope"
    # One chain: each node's only child is the next entry.
    assert list(tree) == ["tree", "leafId"] and tree["leafId"] == last_id
    chain = []
    nodes = tree["tree"]
    while nodes:
        [node] = nodes
        assert list(node) == ["entry", "children"]  # no label: the keys are left out
        chain.append(node["entry"])
        nodes = node["children"]
    assert chain == everything["entries"]


async def test_bash_streams_with_its_id_and_keeps_exclude_from_context(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path)
    async with rpc_process(dirs) as rpc:
        await rpc.send(
            {
                "id": "b1",
                "type": "bash",
                "command": "echo hi; echo err >&2",
                "excludeFromContext": True,
            }
        )
        first = await rpc.response("b1")
        await rpc.send({"id": "b2", "type": "bash", "command": "echo kept"})
        second = await rpc.response("b2")
        entries = (await rpc.data({"type": "get_entries"}))["entries"]
        bad = await rpc.request({"type": "bash", "command": "true", "excludeFromContext": "yes"})
        await rpc.close_stdin()
        assert await rpc.wait_exit() == 0
    assert first["data"]["output"] == "hi\nerr\n" and first["data"]["exitCode"] == 0
    updates = events_of(rpc.lines, "bash_execution_update")
    assert {u["id"] for u in updates} == {"b1", "b2"}
    assert "".join(u["delta"] for u in updates if u["id"] == "b1") == "hi\nerr\n"
    assert all(list(u) == ["type", "id", "delta"] for u in updates)
    # Every update of a command is written before its response.
    answer = rpc.lines.index(first)
    assert all(rpc.lines.index(u) < answer for u in updates if u["id"] == "b1")
    assert rpc.lines.index(second) > max(rpc.lines.index(u) for u in updates)
    recorded = [e["message"] for e in entries if e["type"] == "message"]
    assert [m["command"] for m in recorded] == ["echo hi; echo err >&2", "echo kept"]
    assert recorded[0]["excludeFromContext"] is True
    assert "excludeFromContext" not in recorded[1]
    assert bad["error"] == "bash: excludeFromContext must be a boolean"


async def test_abort_stops_a_manual_compaction_and_a_prompt_meanwhile_is_refused(
    tmp_path: Path,
) -> None:
    # Only the summary is paced (10 tokens/s): slow enough for the prompt and the abort to
    # arrive during the compaction; the two prompts before it take no time.
    faux = FauxProvider(default=slow_summaries(), tokens_per_second=PACED / 20)
    async with served(tmp_path, faux) as client:
        await client.data({"type": "prompt", "message": "one"})
        await client.event("agent_settled")
        # Past the 60 kept tokens, so "one" is summarized (pi 1.6.0: a branch that fits the
        # kept budget is nothing to compact; the system message is no history).
        await client.data({"type": "prompt", "message": "two " + "padding " * 40})
        await client.event("agent_settled", 2)
        await client.send({"id": "c", "type": "compact"})
        await client.event("compaction_start")
        refused = await client.request({"type": "prompt", "message": "during"})
        aborted = await client.request({"type": "abort"})
        compacted = await client.response("c")
        state = await client.data({"type": "get_state"})
    assert refused["success"] is False
    assert refused["error"] == (
        "Cannot submit a prompt while compaction is in progress. "
        "Wait for compaction to finish and retry."
    )
    assert aborted["success"] is True and compacted["success"] is False
    # The abort is answered once the compaction has stopped (pi: when the session is idle).
    assert response_index(client, "c") < response_index(client, aborted["id"])
    [end] = events_of(client.lines, "compaction_end")
    assert end["aborted"] is True
    assert state["isCompacting"] is False


VENDOR = {
    "providers": {
        "vendor": {
            "baseUrl": "http://127.0.0.1:9/v1",
            "api": "openai-completions",
            "apiKey": "k",
            "models": [{"id": "m1"}],
        }
    }
}


async def test_the_model_a_session_started_on_stays_selectable(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path)
    (dirs.agent / "models.json").write_bytes(orjson.dumps(VENDOR))
    async with rpc_process(dirs, model="faux/echo") as rpc:
        listed = (await rpc.data({"type": "get_available_models"}))["models"]
        away = await rpc.data({"type": "set_model", "provider": "vendor", "modelId": "m1"})
        back = await rpc.data({"type": "set_model", "provider": "faux", "modelId": "echo"})
        state = await rpc.data({"type": "get_state"})
        missing = await rpc.request({"type": "set_model", "provider": "faux", "modelId": "faux-1"})
        await rpc.close_stdin()
        assert await rpc.wait_exit() == 0
    assert [(m["provider"], m["id"]) for m in listed] == [("vendor", "m1")]
    assert away["id"] == "m1" and back["id"] == "echo"
    assert (state["model"]["provider"], state["model"]["id"]) == ("faux", "echo")
    assert missing["error"] == "Model not found: faux/faux-1"


async def test_thinking_max_on_the_command_line_and_in_the_settings(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path / "cli")
    async with rpc_process(dirs, "--thinking", "max", model="faux/faux-think") as rpc:
        state = await rpc.data({"type": "get_state"})
        await rpc.close_stdin()
        assert await rpc.wait_exit() == 0
    assert state["thinkingLevel"] == "high"  # faux-think's nearest level below max
    settled = Dirs.make(tmp_path / "settings", settings={"defaultThinkingLevel": "max"})
    async with rpc_process(settled, model="faux/faux-think") as rpc:
        state = await rpc.data({"type": "get_state"})
        await rpc.close_stdin()
        assert await rpc.wait_exit() == 0
    assert state["thinkingLevel"] == "high"
    assert b"defaultThinkingLevel" not in rpc.stderr  # a level the settings may name


async def test_the_tree_holds_every_branch_with_its_labels(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path)
    async with rpc_process(dirs, "-e", str(FIXTURE_EXTENSION)) as rpc:
        for text in ("one", "two"):
            await rpc.data({"type": "prompt", "message": text})
            await rpc.event("agent_settled", 1 if text == "one" else 2)
        # The extension's commands: back to the first reply, a label on it, a new branch.
        handled = await rpc.data({"type": "prompt", "message": "/nav assistant:1"})
        await rpc.data({"type": "prompt", "message": "/label assistant:1 kept"})
        await rpc.data({"type": "prompt", "message": "three"})
        await rpc.event("agent_settled", 3)
        entries = await rpc.data({"type": "get_entries"})
        tree = await rpc.data({"type": "get_tree"})
        await rpc.close_stdin()
        assert await rpc.wait_exit() == 0
    assert handled == {"disposition": "handled"}
    by_id = {e["id"]: e for e in entries["entries"]}
    assert tree["leafId"] == entries["leafId"] == entries["entries"][-1]["id"]

    def walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        stack = list(nodes)
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(node["children"])
        return found

    nodes = walk(tree["tree"])
    assert sorted(n["entry"]["id"] for n in nodes) == sorted(by_id)  # every entry, once
    forks = [n for n in nodes if len(n["children"]) == 2]
    [fork] = forks  # the first reply: the abandoned "two" branch and the new "three" one
    assert fork["label"] == "kept" and "labelTimestamp" in fork
    assert list(fork) == ["entry", "children", "label", "labelTimestamp"]

    def user_texts(node: dict[str, Any]) -> list[str]:
        return [
            n["entry"]["message"]["content"][0]["text"]
            for n in walk([node])
            if n["entry"]["type"] == "message" and n["entry"]["message"]["role"] == "user"
        ]

    old_branch, new_branch = fork["children"]  # by timestamp: the abandoned one first
    assert (user_texts(old_branch), user_texts(new_branch)) == (["two"], ["three"])
    users = [
        e["message"]["content"][0]["text"]
        for e in entries["entries"]
        if e["type"] == "message" and e["message"]["role"] == "user"
    ]
    assert users == ["one", "two", "three"]  # the abandoned branch too
