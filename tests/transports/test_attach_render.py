"""The renderer of ``pitrio attach`` alone: frames in, text out."""

from __future__ import annotations

from typing import Any

from pitrio.transports.attach_render import (
    Chunk,
    Renderer,
    Style,
    choose_style,
    result_text,
    seconds,
    tail,
    tool_summary,
)

PLAIN = Style(color=False, width=100)
COLOR = Style(color=True, width=100)


def out(renderer: Renderer, *frames: dict[str, Any]) -> str:
    """What the frames write to stdout."""
    return "".join(c.text for f in frames for c in renderer.feed(f) if not c.err)


def delta(kind: str, text: str) -> dict[str, Any]:
    return {"type": "message_update", "assistantMessageEvent": {"type": kind, "delta": text}}


def tool_start(call: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_execution_start", "toolCallId": call, "toolName": name, "args": args}


def tool_end(call: str, name: str, text: str, *, error: bool = False) -> dict[str, Any]:
    result = {"content": [{"type": "text", "text": text}]}
    return {
        "type": "tool_execution_end",
        "toolCallId": call,
        "toolName": name,
        "result": result,
        "isError": error,
    }


def test_text_streams_as_it_comes() -> None:
    renderer = Renderer(PLAIN)
    assert out(renderer, delta("text_delta", "Hel")) == "Hel"
    assert not renderer.at_line_start
    assert out(renderer, delta("text_delta", "lo")) == "lo"
    end = {"type": "message_end", "message": {"role": "assistant", "stopReason": "stop"}}
    assert out(renderer, end) == "\n"


def test_thinking_is_dim_on_a_colour_terminal() -> None:
    renderer = Renderer(COLOR)
    shown = out(
        renderer,
        delta("thinking_delta", "let me see"),
        {"type": "message_update", "assistantMessageEvent": {"type": "thinking_end"}},
        delta("text_delta", "Answer"),
    )
    assert shown == "\x1b[2mlet me see\x1b[22m\nAnswer"


def test_thinking_has_a_prefix_on_each_line_without_colour() -> None:
    renderer = Renderer(PLAIN)
    shown = out(
        renderer,
        delta("text_delta", "before"),
        delta("thinking_delta", "one\ntw"),
        delta("thinking_delta", "o\nthree"),
        delta("text_delta", "Answer"),
    )
    assert shown == "before\nthinking> one\nthinking> two\nthinking> three\nAnswer"
    assert "\x1b" not in shown


def test_no_color_and_dumb_terminals_get_no_attributes() -> None:
    assert choose_style(tty=True, env={}).color
    assert not choose_style(tty=True, env={"NO_COLOR": "1"}).color
    assert choose_style(tty=True, env={"NO_COLOR": ""}).color  # empty: not set (no-color.org)
    assert not choose_style(tty=True, env={"TERM": "dumb"}).color
    assert not choose_style(tty=False, env={}).color


def test_a_tool_call_shows_its_arguments_then_the_tail_of_its_result() -> None:
    renderer = Renderer(PLAIN)
    assert out(renderer, tool_start("c1", "bash", {"command": "seq 1 12"})) == "⚙ bash seq 1 12\n"
    numbers = "\n".join(str(n) for n in range(1, 13)) + "\n"
    shown = out(renderer, tool_end("c1", "bash", numbers))
    lines = shown.splitlines()
    assert lines[0] == "✓ bash seq 1 12"
    assert lines[1] == "  … 2 more lines"
    assert lines[2:] == [f"  {n}" for n in range(3, 13)]
    assert renderer.running == {}


def test_an_error_result_is_marked() -> None:
    renderer = Renderer(PLAIN)
    out(renderer, tool_start("c1", "read", {"path": "missing.txt"}))
    shown = out(renderer, tool_end("c1", "read", "ENOENT: no such file", error=True))
    assert shown == "✗ read missing.txt (error)\n  ENOENT: no such file\n"
    coloured = Renderer(COLOR)
    out(coloured, tool_start("c1", "read", {"path": "x"}))
    assert "\x1b[31m✗\x1b[39m" in out(coloured, tool_end("c1", "read", "boom", error=True))


def test_live_output_is_the_tail_of_the_running_tools() -> None:
    renderer = Renderer(PLAIN)
    out(renderer, tool_start("c1", "bash", {"command": "make"}))
    assert renderer.live() == []
    update = {
        "type": "tool_execution_update",
        "toolCallId": "c1",
        "toolName": "bash",
        "partialResult": {"content": [{"type": "text", "text": "\n".join(map(str, range(14)))}]},
    }
    assert out(renderer, update) == ""  # never in the transcript: a pipe sees the result once
    assert renderer.live() == ["  … 4 more lines", *[f"  {n}" for n in range(4, 14)]]
    out(renderer, tool_start("c2", "bash", {"command": "ls"}))
    assert renderer.live()[0] == "  bash make"  # labelled once two run
    out(renderer, tool_end("c1", "bash", "done"))
    assert renderer.live() == []


def test_retry_and_compaction_notices() -> None:
    renderer = Renderer(PLAIN)
    start = {
        "type": "auto_retry_start",
        "attempt": 1,
        "maxAttempts": 3,
        "delayMs": 2000,
        "errorMessage": "500 server error",
    }
    assert out(renderer, start) == "retrying in 2 s (attempt 1/3): 500 server error\n"
    end = {"type": "auto_retry_end", "success": False, "attempt": 3, "finalError": "500 again"}
    assert out(renderer, end) == "gave up after 3 retries: 500 again\n"
    assert out(renderer, {"type": "compaction_start", "reason": "overflow"}) == (
        "compacting the context (overflow)…\n"
    )
    done = {
        "type": "compaction_end",
        "reason": "overflow",
        "result": {"summary": "s", "tokensBefore": 3400},
        "aborted": False,
        "willRetry": True,
    }
    assert out(renderer, done) == "compacted: 3400 tokens summarised; retrying\n"
    failed = {"type": "compaction_end", "aborted": False, "errorMessage": "no model"}
    assert out(renderer, failed) == "compaction failed: no model\n"
    assert out(renderer, {"type": "compaction_end", "aborted": True}) == "compaction aborted\n"


def test_a_notice_starts_a_line_of_its_own() -> None:
    renderer = Renderer(PLAIN)
    out(renderer, delta("text_delta", "half a line"))
    start = {"type": "auto_retry_start", "attempt": 2, "maxAttempts": 3, "delayMs": 500}
    assert out(renderer, start) == "\nretrying in 0.5 s (attempt 2/3): the request failed\n"


def test_errors_aborts_notify_and_failed_responses() -> None:
    renderer = Renderer(PLAIN)
    error = {"role": "assistant", "stopReason": "error", "errorMessage": "401 bad key"}
    assert out(renderer, {"type": "message_end", "message": error}) == "error: 401 bad key\n"
    aborted = {"role": "assistant", "stopReason": "aborted"}
    assert out(renderer, {"type": "message_end", "message": aborted}) == "(aborted)\n"
    notify = {"type": "extension_ui_request", "method": "notify", "message": "hi"}
    assert out(renderer, {**notify, "notifyType": "warning"}) == "[warning] hi\n"
    dialog = {"type": "extension_ui_request", "method": "confirm", "title": "Sure?"}
    assert out(renderer, dialog) == ""  # dialogs are asked by attach_dialogs
    refused = {"type": "response", "command": "prompt", "success": False, "error": "no model"}
    assert renderer.feed(refused) == [Chunk("Error: prompt: no model\n", err=True)]


def test_summaries_and_helpers() -> None:
    assert tool_summary("bash", {"command": "echo a\necho b"}) == "echo a (+1 lines)"
    assert tool_summary("read", {"path": "a.py", "offset": 10, "limit": 5}) == (
        "a.py offset=10 limit=5"
    )
    assert tool_summary("write", {"path": "b.txt", "content": "x\ny\n"}) == "b.txt (2 lines)"
    assert tool_summary("grep", {"pattern": "TODO"}) == '{"pattern":"TODO"}'
    assert len(tool_summary("grep", {"pattern": "x" * 200})) == 80
    image = {"content": [{"type": "image", "mimeType": "image/png"}]}
    assert result_text(image) == "[image image/png]"
    assert tail("a\nb\n", 1) == ["… 1 more line", "b"]
    assert seconds(8000) == "8 s" and seconds(100) == "0.1 s"


def test_long_lines_are_cut_to_the_width() -> None:
    renderer = Renderer(Style(color=False, width=40))
    shown = out(renderer, tool_start("c", "bash", {"command": "x" * 70}))
    assert len(shown.rstrip("\n")) == 39 and shown.endswith("…\n")


def test_a_coloured_header_is_cut_without_splitting_an_escape() -> None:
    renderer = Renderer(Style(color=True, width=40))
    start = out(renderer, tool_start("c", "bash", {"command": "y" * 60}))
    assert start.startswith("⚙ \x1b[1mbash\x1b[22m yyy") and start.endswith("…\n")
    assert len(start.replace("\x1b[1m", "").replace("\x1b[22m", "").rstrip("\n")) == 39
    end = out(renderer, tool_end("c", "bash", "no", error=True))
    head = end.splitlines()[0]
    assert head.endswith("… \x1b[31m(error)\x1b[39m")
    plain = head.replace("\x1b[31m", "").replace("\x1b[39m", "")
    assert len(plain) == 39
