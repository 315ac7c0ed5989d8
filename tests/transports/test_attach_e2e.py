"""``pitrio attach`` as a real process against a real ``pitrio serve`` and the shared mock LLM:
dialogs answered from stdin, tool output, retry notices, and the errors that say what to do."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import pytest

from tests.faults.mock_llm import MOCK_LLM
from tests.transports.attach_harness import PERMISSION_GATE, attach, serving
from tests.transports.browser import ONE_PROCESS

pytestmark = pytest.mark.skipif(
    not MOCK_LLM.exists(), reason="../shared/tools/mock_llm.py is missing"
)

# The daemon is one process (ONE_PROCESS) where a check is of attach alone; it keeps its
# default (a worker per core) where its acceptor has a part: a session it does not know, a
# refused token, a window answering another's dialog, the daemon killed.

RM_THEN_DONE = {
    "rules": [
        {
            "if": {"last_role": "user"},
            "then": {
                "kind": "tool_call",
                "name": "bash",
                "arguments": {"command": "rm victim.txt"},
            },
        },
        {"if": {"last_role": "tool"}, "then": {"kind": "text", "text": "All done.", "deltas": 3}},
    ]
}


@pytest.mark.parametrize(("answer", "removed"), [("y", True), ("n", False)])
async def test_permission_gate_answered_from_stdin(
    tmp_path: Path, answer: str, removed: bool
) -> None:
    async with serving(
        tmp_path, RM_THEN_DONE, extensions=(PERMISSION_GATE,), options=ONE_PROCESS
    ) as served:
        victim = served.work / "victim.txt"
        victim.write_text("precious\n")
        async with attach(served.env()) as client:
            await client.err.until(r"^attached to \S+ \(live\)$")
            await client.out.until(r"^> $")
            await client.type("please remove victim.txt")
            await client.out.until(r"^⚙ bash rm victim.txt$")
            await client.out.until(r"^\? Allow rm\?")
            await client.out.until(r"^  The agent wants to run: rm victim.txt$")
            await client.out.until(r"^  \[y/n\] $")
            await client.type(answer)
            if removed:
                await client.out.until(r"^✓ bash rm victim.txt$")
                await client.out.until(r"^  \(no output\)$")
            else:
                await client.out.until(r"^✗ bash rm victim.txt \(error\)$")
                await client.out.until(r"^  The user refused to run this rm command$")
            await client.out.until(r"^All done\.$")
            await client.out.until(r"^> $")
            await client.close_input()
            assert await client.exit_code() == 0
        assert victim.exists() is not removed


async def test_a_tool_call_shows_the_tail_of_its_output(tmp_path: Path) -> None:
    script = {
        "rules": [
            {
                "if": {"last_role": "user"},
                "then": {
                    "kind": "tool_call",
                    "name": "bash",
                    "arguments": {"command": "seq 1 25"},
                },
            },
            {"if": {"last_role": "tool"}, "then": {"kind": "text", "text": "Counted."}},
        ]
    }
    async with (
        serving(tmp_path, script, options=ONE_PROCESS) as served,
        attach(served.env()) as client,
    ):
        await client.out.until(r"^> $")
        await client.type("count")
        await client.out.until(r"^⚙ bash seq 1 25$")
        await client.out.until(r"^✓ bash seq 1 25$")
        await client.out.until(r"^  … 15 more lines$")
        shown = [(await client.out.until(r"^  (\d+)$")).group(1) for _ in range(10)]
        assert shown == [str(n) for n in range(16, 26)]
        await client.out.until(r"^Counted\.$")
        await client.close_input()
        assert await client.exit_code() == 0
    assert "  1" not in client.out.all and "  15" not in client.out.all


async def test_a_retry_after_a_500_is_announced(tmp_path: Path) -> None:
    script = {
        "queue": [
            {"kind": "error", "preset": "server_error"},
            {"kind": "text", "text": "Second time lucky.", "deltas": 2},
        ]
    }
    settings = {"retry": {"baseDelayMs": 100, "provider": {"maxRetries": 0}}}
    async with (
        serving(tmp_path, script, settings=settings, options=ONE_PROCESS) as served,
        attach(served.env()) as client,
    ):
        await client.out.until(r"^> $")
        await client.type("hello")
        # pi 1.6.0's completions error text: "<status>: <the error body as JSON>".
        error = await client.out.until(r"^error: 500: (\{.*\})$")
        assert json.loads(error.group(1))["type"] == "server_error"
        notice = await client.out.until(r"^retrying in (\S+ s) \(attempt 1/3\): 500: (.*)$")
        assert notice.group(1) == "0.1 s"
        assert notice.group(2) == error.group(1)
        await client.out.until(r"^Second time lucky\.$")
        await client.out.until(r"^retry succeeded \(attempt 1\)$")
        await client.out.until(r"^> $")
        await client.close_input()
        assert await client.exit_code() == 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_an_unreachable_daemon_says_to_start_it(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/"
    env = {**os.environ, "PITRIO_AGENT_DIR": str(tmp_path / "agent"), "PITRIO_DAEMON_URL": url}
    async with attach(env) as client:
        await client.close_input()
        message = await client.err.rest()
        assert await client.exit_code() == 1
    assert message == (
        f"Error: cannot reach the daemon at {url}: connection refused"
        " — start it with `pitrio serve`\n"
    )


@pytest.mark.parametrize("where", ["file", "flag"])
async def test_a_bad_token_names_the_token_file(tmp_path: Path, where: str) -> None:
    async with serving(tmp_path, {}) as served:
        token_file = served.agent / "daemon-token"
        env = served.env()
        del env["PITRIO_DAEMON_TOKEN"]
        args: tuple[str, ...] = ()
        if where == "file":
            token_file.rename(token_file.with_name("daemon-token.real"))
            token_file.write_text("not-the-token\n")
        else:
            args = ("--token", "not-the-token")
        async with attach(env, *args) as client:
            await client.close_input()
            message = await client.err.rest()
            assert await client.exit_code() == 1
    if where == "file":
        expected = (
            "Error: the daemon refused the token (HTTP 401); check the token file"
            f" {token_file} or pass --token\n"
        )
    else:
        expected = (
            "Error: the daemon refused the token from --token (HTTP 401); check it, or the"
            f" token file {token_file}\n"
        )
    assert message == expected


async def test_a_daemon_gone_mid_session_ends_with_an_error(tmp_path: Path) -> None:
    async with serving(tmp_path, {}) as served, attach(served.env()) as client:
        await client.out.until(r"^> $")
        await client.type("hi")
        await client.out.until(r"^ok$")
        os.kill(json.loads((served.agent / "daemon.json").read_text())["pid"], signal.SIGKILL)
        await client.err.until(r"^\(connection to the daemon lost: .*; reconnecting, try 1/5\)$")
        await client.err.until(
            rf"^Error: lost the connection to the daemon at {served.url}: connection refused"
            r" — is `pitrio serve` still running\?$"
        )
        assert await client.exit_code() == 1


ASK = """
async def ask(args, ctx):
    colour = await ctx.ui.select("Colour?", ["red", "blue"])
    name = await ctx.ui.input("Name?", "your name")
    notes = await ctx.ui.editor("Notes?", "draft")
    quick = await ctx.ui.confirm("Quick?", "nobody answers this one", time_limit=0.5)
    await ctx.ui.notify(f"colour={colour} name={name} notes={notes!r} quick={quick}")

def setup(api):
    api.register_command("ask", ask, description="Ask four questions")
"""


async def test_select_input_editor_and_a_timeout(tmp_path: Path) -> None:
    extension = tmp_path / "ask.py"
    extension.write_text(ASK)
    async with (
        serving(tmp_path, {}, extensions=(extension,), options=ONE_PROCESS) as served,
        attach(served.env()) as client,
    ):
        await client.out.until(r"^> $")
        await client.type("/ask")
        await client.out.until(r"^\? Colour\?$")
        await client.out.until(r"^  1\) red$")
        await client.out.until(r"^  2\) blue$")
        await client.out.until(r"^  choose 1-2: $")
        await client.type("3")
        await client.out.until(r"^  choose a number from 1 to 2: $")
        await client.type("2")
        await client.out.until(r"^\? Name\?$")
        await client.out.until(r"^  answer \(your name\): $")
        await client.type("Ada")
        await client.out.until(r"^\? Notes\?$")
        await client.out.until(r"^  \| draft$")
        await client.out.until(r'^  type the text, then a line holding only "\."')
        for line in ("line one", "line two", "."):
            await client.type(line)
        await client.out.until(r"^\? Quick\? \(answer within 0\.5 s\)$")
        asked = len(client.out.all)
        # The extension's clock and attach's run apart: the notify sent once the extension
        # gave up may come before or after attach closes the question; "> " after both.
        await client.out.until(r"^> $")
        after = client.out.all[asked:]
        assert "(no answer within 0.5 s: “Quick?” was cancelled)" in after
        assert "[info] colour=blue name=Ada notes='line one\\nline two' quick=False" in after
        await client.close_input()
        assert await client.exit_code() == 0


async def test_an_overflow_compaction_is_announced_start_and_outcome(tmp_path: Path) -> None:
    script = {
        "queue": [
            {"kind": "text", "text": "First answer.", "deltas": 2},
            {"kind": "error", "preset": "context_length"},
            # The history and the split turn's prompt: two summaries.
            {"kind": "text", "text": "A summary of the talk so far.", "deltas": 1},
            {"kind": "text", "text": "A summary of the talk so far.", "deltas": 1},
            {"kind": "text", "text": "Answered after compaction.", "deltas": 2},
        ]
    }
    # Keep one token, so the first exchange is summarized: pi 1.6.0 starts no compaction of a
    # branch that fits the kept budget (its system message is no history).
    keep_little = {"compaction": {"keepRecentTokens": 1}}
    async with (
        serving(tmp_path, script, settings=keep_little, options=ONE_PROCESS) as served,
        attach(served.env()) as client,
    ):
        await client.out.until(r"^> $")
        await client.type("first")
        await client.out.until(r"^First answer\.$")
        await client.out.until(r"^> $")
        await client.type("second")
        await client.out.until(r"^compacting the context \(overflow\)…$")
        await client.out.until(r"^compacted: \d+ tokens summarised; retrying$")
        await client.out.until(r"^Answered after compaction\.$")
        await client.out.until(r"^> $")
        await client.close_input()
        assert await client.exit_code() == 0


async def test_an_unknown_session_is_named(tmp_path: Path) -> None:
    missing = "0190a0a0-0000-7000-8000-000000000000"
    async with serving(tmp_path, {}) as served, attach(served.env(), missing) as client:
        await client.close_input()
        message = await client.err.rest()
        assert await client.exit_code() == 1
    assert message.startswith(f"Error: the daemon has no session {missing} (HTTP 404: ")
    assert message.endswith("); leave the id out to start a new session\n")


async def test_end_of_input_cancels_the_questions_that_follow(tmp_path: Path) -> None:
    extension = tmp_path / "ask.py"
    extension.write_text(ASK)
    async with (
        serving(tmp_path, {}, extensions=(extension,), options=ONE_PROCESS) as served,
        attach(served.env()) as client,
    ):
        await client.out.until(r"^> $")
        await client.type("/ask")
        await client.close_input()
        for title in ("Colour", "Name", "Notes", "Quick"):
            await client.out.until(rf"^\(cancelled: {title}\?\)$")
        await client.out.until(r"^\[info\] colour=None name=None notes=None quick=False$")
        assert await client.exit_code() == 0


async def test_a_dialog_answered_in_another_window_closes_in_attach(tmp_path: Path) -> None:
    from trio_websocket import open_websocket_url

    from pitrio.transports.attach_connect import ws_url

    async with serving(tmp_path, RM_THEN_DONE, extensions=(PERMISSION_GATE,)) as served:
        victim = served.work / "victim.txt"
        victim.write_text("precious\n")
        async with attach(served.env()) as client:
            session = (await client.err.until(r"^attached to (\S+) \(live\)$")).group(1)
            await client.out.until(r"^> $")
            headers = [(b"Authorization", f"Bearer {served.token}".encode())]
            url = ws_url(served.url, f"/v1/sessions/{session}")
            async with open_websocket_url(url, extra_headers=headers) as other:
                await client.type("please remove victim.txt")
                await client.out.until(r"^  \[y/n\] $")
                while True:  # the other window sees the same question
                    frame = json.loads(await other.get_message())
                    if frame.get("type") == "extension_ui_request":
                        break
                answer = {"type": "extension_ui_response", "id": frame["id"], "confirmed": True}
                await other.send_message(json.dumps(answer))
                await client.out.until(r"^\(answered elsewhere: “Allow rm\?”\)$")
                await client.out.until(r"^✓ bash rm victim.txt$")
                await client.out.until(r"^> $")
            await client.close_input()
            assert await client.exit_code() == 0
        assert not victim.exists()
