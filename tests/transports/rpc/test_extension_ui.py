"""The extension UI sub-protocol over real RPC pipes (pi-rpc.md §9; scenarios R24-R26)."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.transports.rpc.harness import Dirs, rpc_process

ASKING_EXTENSION = """
async def askui(args, ctx):
    picked = await ctx.ui.select("Pick one", ["red", "green"])
    sure = await ctx.ui.confirm("Sure?", "Really " + str(picked), time_limit=30)
    typed = await ctx.ui.input("Name", "your name")
    edited = await ctx.ui.editor("Edit", "prefilled")
    await ctx.ui.notify(f"{picked}|{sure}|{typed}|{edited}", "info")
    await ctx.ui.set_status("mode", "busy")
    await ctx.ui.set_widget("w", ["line 1", "line 2"], "belowEditor")
    await ctx.ui.set_title("Title")
    await ctx.ui.set_editor_text("draft")

def boom(args, ctx):
    raise RuntimeError("boom!")

def setup(api):
    api.register_command("askui", askui, description="Open every dialog")
    api.register_command("boom", boom)
"""


async def test_dialogs_round_trip_and_the_prompt_answers_after_the_handler(
    tmp_path: Path,
) -> None:  # R24, R25
    dirs = Dirs.make(tmp_path)
    extension = tmp_path / "askui.py"
    extension.write_text(ASKING_EXTENSION)
    async with rpc_process(dirs, "-e", str(extension)) as rpc:
        await rpc.send({"id": "p1", "type": "prompt", "message": "/askui"})
        select = await rpc.event("extension_ui_request")
        assert select["method"] == "select" and select["options"] == ["red", "green"]
        assert "timeout" not in select and select["title"] == "Pick one"
        # Other commands are answered while a dialog waits; the prompt is not.
        await rpc.data({"type": "get_state"})
        assert "p1" not in rpc.responses
        await rpc.send({"type": "extension_ui_response", "id": "no-such-id", "value": "x"})
        await rpc.send({"type": "abort"})  # does not cancel the dialog
        await rpc.send({"type": "extension_ui_response", "id": select["id"], "value": "green"})
        confirm = await rpc.event("extension_ui_request", 2)
        assert confirm["method"] == "confirm" and confirm["timeout"] == 30000
        assert confirm["message"] == "Really green"
        # A reply of the wrong shape yields the default (false).
        await rpc.send({"type": "extension_ui_response", "id": confirm["id"], "value": "yes"})
        asked = await rpc.event("extension_ui_request", 3)
        assert (asked["method"], asked["placeholder"]) == ("input", "your name")
        await rpc.send({"type": "extension_ui_response", "id": asked["id"], "cancelled": True})
        editor = await rpc.event("extension_ui_request", 4)
        assert (editor["method"], editor["prefill"]) == ("editor", "prefilled")
        await rpc.send({"type": "extension_ui_response", "id": editor["id"], "value": "text"})
        response = await rpc.response("p1")
        assert response["success"] is True
    requests = rpc.by_type["extension_ui_request"]
    assert [r["method"] for r in requests] == [
        "select",
        "confirm",
        "input",
        "editor",
        "notify",
        "setStatus",
        "setWidget",
        "setTitle",
        "set_editor_text",
    ]
    assert requests[4]["message"] == "green|False|None|text"
    assert requests[4]["notifyType"] == "info"
    assert requests[6]["widgetLines"] == ["line 1", "line 2"]
    assert len({r["id"] for r in requests}) == len(requests)  # a fresh id each
    # The prompt's response follows the last fire-and-forget line (pi's order).
    lines = [orjson.loads(line) for line in bytes(rpc.raw).splitlines()]
    last_request = max(i for i, line in enumerate(lines) if line["type"] == "extension_ui_request")
    answer = next(i for i, line in enumerate(lines) if line.get("id") == "p1")
    assert answer > last_request
    assert not any(
        line.get("type") == "response" and line.get("id") == "no-such-id" for line in lines
    )


async def test_a_failing_command_reports_and_the_prompt_succeeds(tmp_path: Path) -> None:  # R26
    dirs = Dirs.make(tmp_path)
    extension = tmp_path / "askui.py"
    extension.write_text(ASKING_EXTENSION)
    async with rpc_process(dirs, "-e", str(extension)) as rpc:
        response = await rpc.request({"type": "prompt", "message": "/boom"})
        error = await rpc.event("extension_error")
        steer = await rpc.request({"type": "steer", "message": "/boom"})
    assert response["success"] is True
    assert error == {
        "type": "extension_error",
        "extensionPath": "command:boom",
        "event": "command",
        "error": "boom!",
    }
    assert steer["success"] is False
    assert steer["error"].startswith('Extension command "/boom" cannot be queued.')


PLAN_EXTENSION = """
async def plan(args, ctx):
    await ctx.ui.set_plan([
        {"content": "read the code", "status": "completed", "priority": "high"},
        {"content": "write the test"},
    ])
    await ctx.ui.set_plan([])
    try:
        await ctx.ui.set_plan([{"content": "x", "status": "done"}])
    except ValueError as exc:
        await ctx.ui.notify(str(exc))

def setup(api):
    api.register_command("plan", plan, description="Show a plan")
"""


async def test_set_plan_is_a_set_plan_request_and_a_wrong_entry_raises(tmp_path: Path) -> None:
    """pitrio's ``ctx.ui.set_plan``: a fire-and-forget ``setPlan`` request with the whole
    plan (defaults filled in), ``[]`` to clear it; a wrong status raises in the extension."""
    dirs = Dirs.make(tmp_path)
    extension = tmp_path / "plan.py"
    extension.write_text(PLAN_EXTENSION)
    async with rpc_process(dirs, "-e", str(extension)) as rpc:
        response = await rpc.request({"type": "prompt", "message": "/plan"})
        await rpc.event("extension_ui_request", 3)
    assert response["success"] is True
    first, cleared, notice = rpc.by_type["extension_ui_request"]
    assert (first["method"], first["planEntries"]) == (
        "setPlan",
        [
            {"content": "read the code", "priority": "high", "status": "completed"},
            {"content": "write the test", "priority": "medium", "status": "pending"},
        ],
    )
    assert (cleared["method"], cleared["planEntries"]) == ("setPlan", [])
    assert notice["method"] == "notify"
    assert notice["message"].startswith("a plan entry's status must be one of")
