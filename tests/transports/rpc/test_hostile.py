"""Hostile and mistaken input against a real ``pitrio --mode rpc`` (issue 21, "Trust at the
edges"): every line is answered with an error naming what was wrong, the process keeps serving,
no response carries an ``ExceptionGroup`` or a traceback.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from pitrio.messages.codec import dumps
from tests.transports.rpc.harness import Dirs, RpcProcess, rpc_process

DEEP = "[" * 1000 + "]" * 1000


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    return Dirs.make(tmp_path)


def no_group_text(rpc: RpcProcess) -> None:
    """Nothing written to the client names an exception group or holds a traceback."""
    for line in rpc.lines:
        text = dumps(line).decode()  # lone surrogates (escaped) may be in it
        assert "ExceptionGroup" not in text and "sub-exception" not in text, line
        assert "Traceback" not in text, line


async def still_serving(rpc: RpcProcess) -> None:
    """The process answers a command, then a prompt's whole run, then exits 0 at EOF."""
    assert (await rpc.request({"type": "get_state"}))["success"] is True
    await rpc.data({"type": "prompt", "message": "still there?"})
    settled = len(rpc.by_type["agent_settled"]) + 1
    await rpc.event("agent_settled", settled)
    await rpc.close_stdin()
    assert await rpc.wait_exit() == 0, rpc.stderr.decode()[-3000:]


async def test_deep_nesting_is_refused_with_the_id_where_it_can_be_read(dirs: Dirs) -> None:
    async with rpc_process(dirs) as rpc:
        lines = [
            f'{{"id":{DEEP},"type":"get_state"}}',
            f'{{"id":"t","type":{DEEP}}}',
            f'{{"id":"u","type":"set_event_format","updates":{DEEP}}}',
            f'{{"type":"extension_ui_response","id":{DEEP},"value":"x"}}',
            f'{{"id":"x","type":"extension_ui_response","value":{DEEP}}}',
        ]
        await rpc.send_raw("".join(line + "\n" for line in lines).encode())
        for request_id in ("t", "u", "x"):
            response = await rpc.response(request_id)
            assert response["success"] is False
            assert response["error"] == "Failed to parse command: nested deeper than 64 levels"
        assert (await rpc.response("t"))["command"] == "parse"
        assert (await rpc.response("u"))["command"] == "set_event_format"
        # The lines whose id is the deep value are answered too, without it.
        await rpc.wait_until(lambda lines: len(lines) >= 5)
        anonymous = [line for line in rpc.lines if "id" not in line]
        assert [line["command"] for line in anonymous] == ["get_state", "extension_ui_response"]
        await still_serving(rpc)
        no_group_text(rpc)


async def test_a_nul_in_a_user_command_is_refused(dirs: Dirs) -> None:
    async with rpc_process(dirs) as rpc:
        refused = await rpc.request({"type": "bash", "command": "echo a\u0000b"})
        assert refused["success"] is False
        assert refused["error"] == (
            "The command contains a NUL character (at offset 6): no command line can hold one"
        )
        assert (await rpc.data({"type": "bash", "command": "echo fine"}))["output"] == "fine\n"
        await still_serving(rpc)
        no_group_text(rpc)


async def test_a_nul_in_the_models_bash_call_is_a_tool_error(dirs: Dirs) -> None:
    async with rpc_process(dirs) as rpc:
        await rpc.data({"type": "prompt", "message": 'go <<bash {"command": "echo a\\u0000b"}>>'})
        result = await rpc.event("tool_execution_end")
        assert result["isError"] is True
        assert "NUL character (at offset 6)" in result["result"]["content"][0]["text"]
        await rpc.event("agent_settled")
        await still_serving(rpc)
        no_group_text(rpc)


async def test_lone_surrogates_are_taken_and_written_back(dirs: Dirs) -> None:
    async with rpc_process(dirs) as rpc:
        # As JavaScript's JSON.stringify writes a broken pair: escaped, one half only.
        await rpc.send_raw(b'{"id":"\\ud800","type":"get_state"}\n')
        await rpc.send_raw(b'{"id":"n","type":"set_session_name","name":"half \\udc00 pair"}\n')
        assert (await rpc.response("\ud800"))["success"] is True
        assert b'{"id":"\\ud800","type":"response","command":"get_state","success":true' in (
            bytes(rpc.raw)
        )
        assert (await rpc.response("n"))["success"] is True
        state = await rpc.data({"type": "get_state"})
        assert state["sessionName"] == "half \udc00 pair"
        await rpc.data({"type": "prompt", "message": "one \ud83d of a pair"})
        await rpc.event("agent_settled")
        await still_serving(rpc)
    # The session file holds them as escapes (as pi writes them) and opens again.
    async with rpc_process(dirs, "-c") as again:
        state = await again.data({"type": "get_state"})
        assert state["sessionName"] == "half \udc00 pair"
        messages = (await again.data({"type": "get_messages"}))["messages"]
        # pi 1.6.0 opens a session with its system message; the two turns follow it.
        roles = [message["role"] for message in messages]
        assert roles == ["system", "user", "assistant", "user", "assistant"]
        assert messages[1]["content"][0]["text"] == "one \ud83d of a pair"
        assert messages[2]["content"][0]["text"] == "You said: one \ud83d of a pair"
        await still_serving(again)


async def test_export_errors_are_the_commands_errors(dirs: Dirs) -> None:
    cwd = dirs.cwd
    (cwd / "adir").mkdir()
    os.mkfifo(cwd / "fifo")
    os.mknod(cwd / "device", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    (cwd / "link").symlink_to(cwd / "device")
    async with rpc_process(dirs) as rpc:
        await rpc.data({"type": "prompt", "message": "something to export"})
        await rpc.event("agent_settled")
        expected = {
            "nodir/page.html": "Cannot export to nodir/page.html: No such file or directory",
            "adir": "Cannot export to adir: it is a directory",
            "fifo": "Cannot export to fifo: it is a FIFO",
            "device": "Cannot export to device: it is a character device",
            "link": "Cannot export to link: it is a character device",
        }
        for path, error in expected.items():
            response = await rpc.request({"type": "export_html", "outputPath": path})
            assert (response["success"], response.get("error")) == (False, error)
        # Relative paths are answered as given, the default name in pi's form (relative).
        named = await rpc.data({"type": "export_html", "outputPath": "page.html"})
        assert named == {"path": "page.html"}
        absolute = str(cwd / "page2.html")  # an absolute path is answered as given too
        assert await rpc.data({"type": "export_html", "outputPath": absolute}) == {"path": absolute}
        assert (cwd / "page2.html").read_bytes().startswith(b"<!doctype html>")
        default = (await rpc.data({"type": "export_html"}))["path"]
        assert "/" not in default and default.startswith("pitrio-session-")
        assert (cwd / default).read_bytes().startswith(b"<!doctype html>")
        await still_serving(rpc)
        no_group_text(rpc)
    # Nothing was replaced or written into.
    assert stat.S_ISFIFO(os.lstat(cwd / "fifo").st_mode)
    assert stat.S_ISCHR(os.lstat(cwd / "device").st_mode)
    assert stat.S_ISLNK(os.lstat(cwd / "link").st_mode)
    assert list((cwd / "adir").iterdir()) == []


async def test_export_without_a_session_file_gives_pis_text(dirs: Dirs) -> None:
    async with rpc_process(dirs, "--no-session") as rpc:
        await rpc.data({"type": "prompt", "message": "nothing kept"})
        await rpc.event("agent_settled")
        for fields in ({}, {"outputPath": "nodir/x.html"}):
            response = await rpc.request({"type": "export_html", **fields})
            assert response["error"] == "Cannot export in-memory session to HTML"
        await still_serving(rpc)


WRONG_SETTINGS: list[tuple[dict[str, Any], str]] = [
    ({"type": "set_auto_retry"}, "set_auto_retry: enabled must be a boolean"),
    ({"type": "set_auto_retry", "enabled": "yes"}, "set_auto_retry: enabled must be a boolean"),
    ({"type": "set_auto_compaction"}, "set_auto_compaction: enabled must be a boolean"),
    (
        {"type": "set_auto_compaction", "enabled": 1},
        "set_auto_compaction: enabled must be a boolean",
    ),
    (
        {"type": "set_steering_mode", "mode": "bogus"},
        'set_steering_mode: unknown mode "bogus" (use "all" or "one-at-a-time")',
    ),
    (
        {"type": "set_follow_up_mode"},
        'set_follow_up_mode: unknown mode undefined (use "all" or "one-at-a-time")',
    ),
    (
        {"type": "set_follow_up_mode", "mode": ["all"]},
        'set_follow_up_mode: unknown mode ["all"] (use "all" or "one-at-a-time")',
    ),
]


async def test_wrong_settings_are_refused_and_change_nothing(dirs: Dirs) -> None:
    async with rpc_process(dirs) as rpc:
        await rpc.data({"type": "set_steering_mode", "mode": "all"})
        for command, error in WRONG_SETTINGS:
            response = await rpc.request(command)
            assert (response["success"], response["error"]) == (False, error)
        state = await rpc.data({"type": "get_state"})
        assert (state["steeringMode"], state["followUpMode"]) == ("all", "one-at-a-time")
        assert state["autoCompactionEnabled"] is True
        await rpc.data({"type": "set_auto_retry", "enabled": False})
        await still_serving(rpc)
    saved = orjson.loads((dirs.agent / "settings.json").read_bytes())
    assert saved["retry"]["enabled"] is False and saved.get("compaction", {}).get("enabled") is None


SURROGATE_ERROR = "contains a lone surrogate (\\ud800 at offset {}): it cannot be encoded as UTF-8"


async def test_a_lone_surrogate_in_a_user_command_is_refused(dirs: Dirs) -> None:
    """Issue 36: the spawn used to fail with a bare ``UnicodeEncodeError`` that ended the
    session actor, and with it the process; now the command is refused and nothing is lost."""
    async with rpc_process(dirs) as rpc:
        await rpc.data({"type": "prompt", "message": "before"})
        await rpc.event("agent_settled")
        # As a JavaScript client writes it: the lone half escaped.
        await rpc.send_raw(b'{"id":"b","type":"bash","command":"echo \\ud800"}\n')
        refused = await rpc.response("b")
        assert (refused["success"], refused["error"]) == (
            False,
            "The command " + SURROGATE_ERROR.format(5),
        )
        assert (await rpc.data({"type": "bash", "command": "echo fine"}))["output"] == "fine\n"
        messages = (await rpc.data({"type": "get_messages"}))["messages"]
        # pi 1.6.0 opens a session with its system message.
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "bashExecution"]
        await still_serving(rpc)
        no_group_text(rpc)


TOOL_CALLS = [
    ("bash", {"command": "echo \ud800"}, "command", 5),
    ("read", {"path": "x\ud800"}, "path", 1),
    ("write", {"path": "x\ud800", "content": "a"}, "path", 1),
    ("edit", {"path": "x\ud800", "edits": [{"oldText": "a", "newText": "b"}]}, "path", 1),
    ("ls", {"path": "x\ud800"}, "path", 1),
    ("find", {"pattern": "x\ud800"}, "pattern", 1),
    ("find", {"pattern": "*", "path": "x\ud800"}, "path", 1),
    ("grep", {"pattern": "x\ud800"}, "pattern", 1),
    ("grep", {"pattern": "x", "path": "x\ud800"}, "path", 1),
    ("grep", {"pattern": "x", "glob": "x\ud800"}, "glob", 1),
]


async def test_a_lone_surrogate_in_the_models_tool_call_is_a_tool_error(dirs: Dirs) -> None:
    """Every tool argument that reaches the OS: an error tool result naming the field; the
    run goes on, nothing is written, the session keeps serving."""
    async with rpc_process(dirs, "--tools", "read,bash,edit,write,ls,find,grep") as rpc:
        for count, (tool, args, field, offset) in enumerate(TOOL_CALLS, 1):
            # The arguments as a model writes them: JSON, the lone half escaped.
            step = dumps(args).decode()
            await rpc.data({"type": "prompt", "message": f"go <<{tool} {step}>>"})
            end = await rpc.event("tool_execution_end", count)
            assert (end["toolName"], end["isError"]) == (tool, True)
            text = end["result"]["content"][0]["text"]
            assert text == f"The {field} " + SURROGATE_ERROR.format(offset), (tool, args)
            await rpc.event("agent_settled", count)
        assert sorted(os.listdir(dirs.cwd)) == ["README.md", "notes.txt", "src"]
        await still_serving(rpc)
        no_group_text(rpc)


HOSTILE_EXTENSION = """
def setup(api):
    async def run(args, ctx):
        words = args.split(" ")
        done = await api.exec(words[0], words[1:])
        api.send_message("ran", done.stdout, display=True)

    async def rename(args, ctx):
        await api.set_session_name(args)

    async def label(args, ctx):
        await api.set_label(await ctx.session_manager.leaf_id(), args)

    api.register_command("run", run, description="exec a program")
    api.register_command("rename", rename, description="name the session")
    api.register_command("label", label, description="label the leaf")
"""


async def test_lone_surrogates_in_extension_arguments(dirs: Dirs) -> None:
    """An extension command's arguments: a name or a label only goes to the JSON file (kept,
    escaped, as pi does); an ``exec`` refuses it with the field named (an ``extension_error``),
    and the session keeps serving."""
    extension = dirs.root / "hostile_extension.py"
    extension.write_text(HOSTILE_EXTENSION)
    async with rpc_process(dirs, "-e", str(extension)) as rpc:
        await rpc.data({"type": "prompt", "message": "first"})
        await rpc.event("agent_settled")
        await rpc.data({"type": "prompt", "message": "/rename half \ud800 name"})
        await rpc.data({"type": "prompt", "message": "/label half \udc00 label"})
        state = await rpc.data({"type": "get_state"})
        assert state["sessionName"] == "half \ud800 name"
        await rpc.data({"type": "prompt", "message": "/run echo x\ud800"})
        error = await rpc.event("extension_error")
        assert error["error"].endswith(
            "The exec argument 0 contains a lone surrogate (\\ud800 at offset 1): "
            "it cannot be encoded as UTF-8"
        ), error
        await rpc.data({"type": "prompt", "message": "/run echo fine"})
        await rpc.wait_until(lambda lines: any("fine" in str(line) for line in lines))
        await still_serving(rpc)
        no_group_text(rpc)
    async with rpc_process(dirs, "-c") as again:  # the file holds them escaped, and reopens
        state = await again.data({"type": "get_state"})
        assert state["sessionName"] == "half \ud800 name"
        await still_serving(again)
    written = await trio.Path(state["sessionFile"]).read_bytes()
    assert b'"label":"half \\udc00 label"' in written
    assert b'"name":"half \\ud800 name"' in written
