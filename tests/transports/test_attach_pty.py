"""``pitrio attach`` on a terminal (a pty from the stdlib): dimmed thinking and the prompt
marker, ``NO_COLOR``, Ctrl-C cancelling a question, and ``$EDITOR`` answering an editor dialog.
The daemon runs in this process with the faux model (thinking needs a scripted reply)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from pitrio.actors.model_router import FauxProvider, FauxReply, FauxToolCall
from pitrio.actors.session.resources.trust import canonical_path, save_decisions
from tests.transports.attach_harness import PITRIO
from tests.transports.daemon_harness import TOKEN, create_session, running_daemon
from tests.transports.pty_harness import Screen, on_a_pty


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    return agent


@asynccontextmanager
async def on_a_terminal(
    port: int, *args: str, **env: str
) -> AsyncIterator[tuple[Screen, trio.Process]]:
    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "VISUAL", "EDITOR")}
    environment.update(
        PITRIO_DAEMON_URL=f"http://127.0.0.1:{port}/",
        PITRIO_DAEMON_TOKEN=TOKEN,
        TERM="xterm",
        **env,
    )
    async with on_a_pty([PITRIO, "attach", *args], environment) as (screen, process):
        yield screen, process


async def test_thinking_is_dimmed_and_the_marker_asks_for_a_prompt(agent: Path) -> None:
    faux = FauxProvider([FauxReply(thinking="pondering deeply", text="The answer.")])
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        async with on_a_terminal(daemon.port, session_id) as (screen, process):
            await screen.until(r"attached to ")
            await screen.until(r"(?m)^> $")
            screen.type("question\n")
            await screen.until(r"\x1b\[2mpondering deeply\x1b\[22m\r?\nThe answer\.")
            await screen.until(r"(?m)^> $")
            screen.type("\x04")  # Ctrl-D: end of input
            with trio.fail_after(10):
                assert await process.wait() == 0
    assert "thinking> " not in screen.text


async def test_no_color_marks_thinking_with_a_prefix(agent: Path) -> None:
    faux = FauxProvider([FauxReply(thinking="pondering", text="Done.")])
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        async with on_a_terminal(daemon.port, session_id, NO_COLOR="1") as (screen, process):
            await screen.until(r"(?m)^> $")
            screen.type("question\n")
            await screen.until(r"thinking> pondering\r?\nDone\.")
            screen.type("\x04")
            with trio.fail_after(10):
                assert await process.wait() == 0
    assert "\x1b[" not in screen.text


DIALOGS = """
async def ask(args, ctx):
    sure = await ctx.ui.confirm("Sure?", "cancel me")
    notes = await ctx.ui.editor("Notes?", "draft")
    await ctx.ui.notify(f"sure={sure} notes={notes!r}")

def setup(api):
    api.register_command("ask", ask, description="Two questions")
"""

EDITOR = """
import sys
path = sys.argv[1]
with open(path) as f:
    seen = f.read()
with open(path, "w") as f:
    f.write("edited after " + seen + "\\n")
"""


async def test_ctrl_c_cancels_a_question_and_editor_answers_in_editor(
    agent: Path, tmp_path: Path
) -> None:
    extensions = agent.parent / "work" / ".pitrio" / "extensions"
    extensions.mkdir(parents=True)
    (extensions / "ask.py").write_text(DIALOGS)
    # a project's extensions load only for a trusted project (pi 1.6.0)
    save_decisions(agent, [(canonical_path(agent.parent / "work"), True)])
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR)
    async with running_daemon(agent) as daemon:
        session_id = await create_session(daemon)
        async with on_a_terminal(daemon.port, session_id, EDITOR=f"{sys.executable} {editor}") as (
            screen,
            process,
        ):
            await screen.until(r"(?m)^> $")
            screen.type("/ask\n")
            await screen.until(r"\[y/n\] ")
            screen.type("\x03")  # Ctrl-C
            await screen.until(r"\(cancelled: Sure\?\)")
            await screen.until(r"opening \$EDITOR")
            await screen.until(r"\[info\] sure=False notes='edited after draft'")
            await screen.until(r"(?m)^> $")
            screen.type("\x04")
            with trio.fail_after(10):
                assert await process.wait() == 0


async def test_a_running_tools_output_is_redrawn_live_then_replaced(
    agent: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    command = f"seq 1 30; read x < {fifo}; echo finished"
    faux = FauxProvider(
        [
            FauxReply(tool_calls=[FauxToolCall("bash", {"command": command})]),
            FauxReply(text="Done."),
        ]
    )
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        async with on_a_terminal(daemon.port, session_id) as (screen, process):
            await screen.until(r"(?m)^> $")
            screen.type("run it\n")
            await screen.until(r"⚙ \x1b\[1mbash\x1b\[22m seq 1 30")
            # The live area: the tail of the output so far, dimmed, while the command waits.
            await screen.until(r"\x1b\[2m  … 20 more lines\x1b\[22m\r\n")
            await screen.until(r"\x1b\[2m  30\x1b\[22m\r\n")

            def release() -> None:
                os.close(os.open(fifo, os.O_WRONLY))

            await trio.to_thread.run_sync(release)
            # Erased (11 lines up, clear) and replaced by the result, once.
            await screen.until(r"\x1b\[11F\x1b\[J\x1b\[32m✓\x1b\[39m bash seq 1 30")
            await screen.until(r"  … 21 more lines\r\n  22\r\n")
            await screen.until(r"  finished\r\n")
            await screen.until(r"Done\.")
            screen.type("\x04")
            with trio.fail_after(10):
                assert await process.wait() == 0
    assert screen.text.count("  finished\r\n") == 1  # not also in a live area


@pytest.mark.parametrize("key", ["\x03", "\x1b"], ids=["ctrl-c", "esc"])
async def test_ctrl_c_aborts_a_reply_then_exits_when_idle(agent: Path, key: str) -> None:
    """Ctrl-C, or Esc (the terminal hands it over at once: VEOL), aborts the reply; Ctrl-C
    when idle exits."""
    faux = FauxProvider([FauxReply(text="word " * 400, chunk_size=5, chunk_delay=0.02)])
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        async with on_a_terminal(daemon.port, session_id) as (screen, process):
            await screen.until(r"(?m)^> $")
            screen.type("talk\n")
            await screen.until(r"word word ")
            screen.type(key)
            await screen.until(r"\(aborting\)")
            await screen.until(r"\(aborted\)")
            await screen.until(r"(?m)^> $")
            screen.type("\x03")
            with trio.fail_after(10):
                assert await process.wait() == 0


MARKER_EXTENSION = """
from pathlib import Path
Path({marker!r}).write_text("imported")

def setup(api):
    pass
"""


@pytest.mark.parametrize(("answer", "trusted"), [("1", True), ("", False)])
async def test_attach_answers_the_project_trust_question(
    agent: Path, tmp_path: Path, answer: str, trusted: bool
) -> None:
    """A new session in an untrusted project: attach on a terminal shows the daemon's
    project-trust question as a numbered choice; 1 (Trust) saves the decision and the project's
    extension loads, an empty line leaves it untrusted and unsaved."""
    marker = tmp_path / "imported"
    extensions = agent.parent / "work" / ".pitrio" / "extensions"
    extensions.mkdir(parents=True)
    (extensions / "marker.py").write_text(MARKER_EXTENSION.format(marker=str(marker)))
    async with running_daemon(agent) as daemon, on_a_terminal(daemon.port) as (screen, process):
        await screen.until(r"Trust project folder\?")
        await screen.until(r"5\. Do not trust \(this session only\)")
        await screen.until(r"Select 1-5")
        screen.type(answer + "\n")
        await screen.until(r"attached to ")
        screen.type("\x04")
        with trio.fail_after(10):
            await process.wait()
    assert marker.exists() == trusted
    saved = agent / "trust.json"
    work = canonical_path(agent.parent / "work")
    assert (saved.read_text() if trusted else None) == (
        f'{{\n  "{work}": true\n}}\n' if trusted else None
    )
    assert saved.exists() == trusted
