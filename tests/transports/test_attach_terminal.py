"""The terminal side of ``pitrio attach``: stdin lines from a pipe or a regular file, and the
live area drawn, erased and redrawn on a terminal (never on a pipe)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import trio
import trio.testing

from pitrio.transports.attach_render import Chunk, Renderer, Style
from pitrio.transports.attach_terminal import Keyboard, Terminal


async def test_lines_from_a_pipe_as_they_are_written() -> None:
    read, write = os.pipe()
    try:
        keys = Keyboard(read)
        os.write(write, b"first\nsec")
        assert await keys.readline() == "first"
        async with trio.open_nursery() as nursery:
            got: list[str | None] = []

            async def reader() -> None:
                got.append(await keys.readline())

            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            assert got == []  # half a line: still waiting, nothing lost
            os.write(write, b"ond\r\n")
        assert got == ["second"]
        os.close(write)
        write = -1
        assert await keys.readline() is None
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


async def test_lines_from_a_regular_file_which_epoll_refuses(tmp_path: Path) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes("one\nzwei ü\nlast without newline".encode())
    fd = os.open(path, os.O_RDONLY)
    try:
        keys = Keyboard(fd)
        lines = [await keys.readline() for _ in range(4)]
    finally:
        os.close(fd)
    assert lines == ["one", "zwei ü", "last without newline", None]


def _terminal(tty: bool) -> tuple[Terminal, Renderer, io.StringIO]:
    renderer = Renderer(Style())
    out = io.StringIO()
    return Terminal(out, io.StringIO(), renderer, tty), renderer, out


def _running(renderer: Renderer, output: str) -> None:
    renderer.feed({"type": "tool_execution_start", "toolCallId": "c", "toolName": "bash"})
    content = [{"type": "text", "text": output}]
    update = {
        "type": "tool_execution_update",
        "toolCallId": "c",
        "partialResult": {"content": content},
    }
    renderer.feed(update)


def test_the_live_area_is_redrawn_in_place_on_a_terminal() -> None:
    term, renderer, out = _terminal(tty=True)
    _running(renderer, "a\nb")
    term.show([])
    assert out.getvalue() == "  a\n  b\n"
    _running(renderer, "a\nb\nc")
    term.show([Chunk("more\n")])
    assert out.getvalue() == "  a\n  b\n\x1b[2F\x1b[J" + "more\n  a\n  b\n  c\n"


def test_a_pipe_never_gets_the_live_area() -> None:
    term, renderer, out = _terminal(tty=False)
    _running(renderer, "a\nb")
    term.show([Chunk("text\n")])
    assert out.getvalue() == "text\n"


def test_stderr_ends_a_half_line_on_a_terminal_only() -> None:
    term, renderer, out = _terminal(tty=True)
    term.show(
        renderer.feed(
            {
                "type": "message_update",
                "assistantMessageEvent": {"type": "text_delta", "delta": "half"},
            }
        )
    )
    term.error("(lost)")
    assert out.getvalue() == "half\n" and renderer.at_line_start
    piped, renderer, out = _terminal(tty=False)
    piped.show(
        renderer.feed(
            {
                "type": "message_update",
                "assistantMessageEvent": {"type": "text_delta", "delta": "half"},
            }
        )
    )
    piped.error("(lost)")
    assert out.getvalue() == "half" and not renderer.at_line_start
