"""``pitrio`` with a terminal on stdin and stdout: the terminal chat (pi's interactive mode),
driven as a user would, in a real pseudo-terminal, against the faux model's fixture rules
(``You said: ...``, ``<<tool {args}>>`` steps, ``SLOW`` replies). Piped stdin and ``-p`` keep
print mode."""

from __future__ import annotations

import json
import os
import pty
import termios
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from pitrio.actors.session.resources.trust import canonical_path
from tests.transports.attach_harness import PITRIO
from tests.transports.pty_harness import Screen, on_a_pty

MARKER = r"(?m)^> $"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The project folder the chat runs in (its agent dir next to it)."""
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def _env(work: Path, **extra: str) -> dict[str, str]:
    environment = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("NO_COLOR", "VISUAL", "EDITOR", "PITRIO_SESSION_DIR", "PYTHONDONTWRITEBYTECODE")
    }
    environment.update(
        PITRIO_AGENT_DIR=str(work.parent / "agent"),
        PITRIO_FAUX_SCRIPT="fixture-rules",
        TERM="xterm",
        NO_COLOR="1",
        **extra,
    )
    return environment


@asynccontextmanager
async def chat(
    work: Path, *args: str, stdin: int | None = None, **extra: str
) -> AsyncIterator[tuple[Screen, trio.Process]]:
    """``pitrio --model faux/faux-1 *args`` on a terminal of its own, in ``work``."""
    command = [PITRIO, "--model", "faux/faux-1", *args]
    async with on_a_pty(command, _env(work, **extra), cwd=work, stdin=stdin) as running:
        yield running


async def _exits(process: trio.Process, code: int = 0) -> None:
    with trio.fail_after(20):
        assert await process.wait() == code


async def exchange(screen: Screen, line: str, *shown: str) -> None:
    """Type ``line`` at the prompt; wait for each of ``shown`` in turn, then the next prompt."""
    screen.type(line + "\n")
    for pattern in shown:
        await screen.until(pattern)
    await screen.until(MARKER)


async def leave(screen: Screen, process: trio.Process) -> None:
    """Ctrl-D at the prompt: the chat exits 0."""
    screen.type("\x04")
    await _exits(process)


def _session_files(work: Path) -> list[Path]:
    return sorted((work.parent / "agent" / "sessions").rglob("*.jsonl"))


def _shape(path: Path) -> list[str]:
    """A session file's entries as ``type`` (``message:role``), in order."""
    shape = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        kind = entry["type"]
        shape.append(f"message:{entry['message']['role']}" if kind == "message" else kind)
    return shape


def _veol(screen: Screen) -> bytes:
    """The terminal's extra end-of-line character (the master's termios are the terminal's)."""
    value: bytes = termios.tcgetattr(screen.master)[6][termios.VEOL]
    return value


def _fresh_veol() -> bytes:
    """A new terminal's extra end-of-line character (none)."""
    master, slave = pty.openpty()
    try:
        value: bytes = termios.tcgetattr(master)[6][termios.VEOL]
    finally:
        os.close(slave)
        os.close(master)
    return value


async def test_a_reply_streams_a_tool_call_shows_and_ctrl_d_exits_0(work: Path) -> None:
    before = _fresh_veol()
    async with chat(work) as (screen, process):
        await screen.until(r"pitrio chat · faux/faux-1 · session ")
        await screen.until(MARKER)
        assert _veol(screen) == b"\x1b"  # Esc ends a line while the chat runs
        await exchange(screen, "hello there", r"You said: hello there\r\n")
        await exchange(
            screen,
            '<<bash {"command": "echo tool-output"}>>',
            r"⚙ bash echo tool-output\r\n",
            r"✓ bash echo tool-output\r\n  tool-output\r\n",
            r"Finished 1 tool step",
        )
        await leave(screen, process)
        assert _veol(screen) == before  # the terminal is given back as found


async def test_the_session_file_is_print_modes_and_reopens_with_continue(
    work: Path, tmp_path: Path
) -> None:
    async with chat(work) as (screen, process):
        await screen.until(MARKER)
        await exchange(screen, "first words", r"You said: first words")
        await leave(screen, process)
    (written,) = _session_files(work)
    # The same prompt in print mode writes a file of the same entries, in the same order.
    printed_dir = tmp_path / "printed"
    print_mode = await trio.run_process(
        [PITRIO, "--model", "faux/faux-1", "--session-dir", str(printed_dir), "-p", "first words"],
        env=_env(work),
        cwd=work,
        capture_stdout=True,
        stdin=b"",
    )
    assert print_mode.stdout == b"You said: first words\n"
    (printed,) = printed_dir.glob("*.jsonl")
    assert _shape(written) == _shape(printed)
    assert _shape(written)[-2:] == ["message:user", "message:assistant"]

    async with chat(work, "--continue") as (screen, process):
        # The conversation so far, then the prompt marker; the model remembers it.
        await screen.until(r"> first words\r\nYou said: first words\r\n")
        await screen.until(rf"session {written}")
        await screen.until(MARKER)
        await exchange(screen, "second words", r"You said: second words")
        await leave(screen, process)
    assert _session_files(work) == [written]
    assert _shape(written)[-4:] == ["message:user", "message:assistant"] * 2


# esc-typing: Esc with a steering line half typed (the prompt-line editor's Esc): the line
# is dropped and the reply aborted.
@pytest.mark.parametrize(
    "key", ["\x03", "\x1b", "half typed\x1b"], ids=["ctrl-c", "esc", "esc-typing"]
)
async def test_ctrl_c_or_esc_aborts_a_reply_and_the_session_goes_on(work: Path, key: str) -> None:
    async with chat(work, "--faux-chunk-delay", "0.05") as (screen, process):
        await screen.until(MARKER)
        screen.type("SLOW please\n")
        await screen.until(r"Slow answer: word1 ")
        screen.type(key)
        await screen.until(r"\(aborting\)")
        await screen.until(r"\(aborted\)")
        await screen.until(MARKER)
        await exchange(screen, "still there?", r"You said: still there\?")
        await leave(screen, process)
    assert "word150" not in screen.text
    assert "You said: half typed" not in screen.text


@asynccontextmanager
async def greeting_chat(work: Path) -> AsyncIterator[tuple[Screen, trio.Process]]:
    """The chat in a trusted project with a prompt template ``/greet NAME``, at its first
    prompt marker."""
    templates = work / ".pitrio" / "prompts"
    templates.mkdir(parents=True)
    (templates / "greet.md").write_text("Say hello to $1")
    async with chat(work, "--approve") as (screen, process):
        await screen.until(MARKER)
        yield screen, process


async def test_slash_commands_of_the_chat_and_of_the_session(work: Path) -> None:
    async with greeting_chat(work) as (screen, process):
        await exchange(screen, "/model faux/faux-think", r"model: faux/faux-think\r\n")
        await exchange(screen, "/model", r"model: faux/faux-think \(thinking ")
        await exchange(screen, "/name my chat", r"name: my chat\r\n")
        # A prompt template: the session expands it.
        await exchange(screen, "/greet Ada", r"You said: Say hello to Ada")
        await exchange(screen, "/session", r"messages: 1 user, 1 assistant")
        await exchange(screen, "/new", r"\(a new session\)")
        await exchange(screen, "/session", r"messages: 0 user, 0 assistant")
        screen.type("/quit\n")
        await _exits(process)
    written = next(p for p in _session_files(work) if "my chat" in p.read_text())
    entries = [json.loads(line) for line in written.read_text().splitlines()]
    assert {"type": "session_info", "name": "my chat"}.items() <= next(
        e for e in entries if e["type"] == "session_info"
    ).items()
    assert any(e["type"] == "model_change" and e["modelId"] == "faux-think" for e in entries)


async def test_the_prompts_of_the_command_line_run_first(work: Path) -> None:
    async with chat(work, "one", "two") as (screen, process):
        await screen.until(r"> one\r\nYou said: one\r\n")
        await screen.until(r"> two\r\nYou said: two\r\n")
        await screen.until(MARKER)
        await leave(screen, process)


DIALOG_EXTENSION = """
async def ask(args, ctx):
    sure = await ctx.ui.confirm("Sure?", "say y")
    await ctx.ui.notify(f"sure={sure}")

def setup(api):
    api.register_command("ask", ask, description="One question")
"""


async def test_an_extension_dialog_is_asked_in_the_terminal(work: Path, tmp_path: Path) -> None:
    extension = tmp_path / "ask.py"
    extension.write_text(DIALOG_EXTENSION)
    async with chat(work, "-e", str(extension)) as (screen, process):
        await screen.until(MARKER)
        screen.type("/ask\n")
        await screen.until(r"\? Sure\?\r\n  say y\r\n  \[y/n\] ")
        await exchange(screen, "y", r"\[info\] sure=True")
        await leave(screen, process)


MARKER_EXTENSION = """
from pathlib import Path
Path({marker!r}).write_text("imported")

def setup(api):
    pass
"""


def _project_extension(work: Path, marker: Path) -> None:
    extensions = work / ".pitrio" / "extensions"
    extensions.mkdir(parents=True)
    (extensions / "marker.py").write_text(MARKER_EXTENSION.format(marker=str(marker)))


@pytest.mark.parametrize(("answer", "trusted"), [("1", True), ("", False)])
async def test_the_chat_asks_whether_to_trust_the_project(
    work: Path, tmp_path: Path, answer: str, trusted: bool
) -> None:
    marker = tmp_path / "imported"
    _project_extension(work, marker)
    async with chat(work) as (screen, process):
        await screen.until(r"Trust project folder\?")
        await screen.until(r"Select 1-5")
        await exchange(screen, answer + "")
        await leave(screen, process)
    assert marker.exists() == trusted
    saved = work.parent / "agent" / "trust.json"
    assert saved.exists() == trusted
    if trusted:
        assert json.loads(saved.read_text()) == {canonical_path(work): True}


@pytest.mark.parametrize(("flag", "trusted"), [("--approve", True), ("--no-approve", False)])
async def test_approve_flags_decide_without_asking(
    work: Path, tmp_path: Path, flag: str, trusted: bool
) -> None:
    marker = tmp_path / "imported"
    _project_extension(work, marker)
    async with chat(work, flag) as (screen, process):
        await screen.until(MARKER)
        await leave(screen, process)
    assert "Trust project folder" not in screen.text
    assert marker.exists() == trusted


async def test_piped_stdin_is_print_mode(work: Path) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"from a pipe\n")
    os.close(write_end)
    try:
        async with chat(work, stdin=read_end) as (screen, process):
            await screen.until(r"You said: from a pipe\r\n")
            await _exits(process)
    finally:
        os.close(read_end)
    assert "pitrio chat" not in screen.text
    assert "> " not in screen.text


async def test_print_flag_on_a_terminal_is_print_mode(work: Path) -> None:
    async with chat(work, "-p", "just once") as (screen, process):
        await screen.until(r"You said: just once\r\n")
        await _exits(process)
    assert "pitrio chat" not in screen.text


async def test_json_and_rpc_modes_on_a_terminal_keep_their_meaning(work: Path) -> None:
    async with chat(work, "--mode", "json", "as json") as (screen, process):
        await screen.until(r'\{"type":"session","version":3,')
        await screen.until(r'"type":"agent_end"')
        await _exits(process)
    assert "pitrio chat" not in screen.text
    async with chat(work, "--mode", "rpc") as (screen, process):
        screen.type('{"id":"s","type":"get_state"}\n')
        await screen.until(r'\{"id":"s","type":"response","command":"get_state","success":true')
        screen.type("\x04")
        await _exits(process)
    assert "pitrio chat" not in screen.text


async def _print_mode(work: Path, prompt: str) -> None:
    """A session of ``work`` written by ``pitrio -p``."""
    command = [PITRIO, "--model", "faux/faux-1", "-p", prompt]
    await trio.run_process(command, env=_env(work), cwd=work, capture_stdout=True, stdin=b"")


async def test_resume_picks_a_session_of_this_folder(work: Path) -> None:
    await _print_mode(work, "alpha")
    await _print_mode(work, "beta")
    alpha = next(p for p in _session_files(work) if "alpha" in p.read_text())
    async with chat(work, "-r") as (screen, process):
        await screen.until(r"Sessions of this folder, newest first:\r\n")
        await screen.until(r"  1\. \S+ \S+ +\d+ msgs  beta\r\n  2\. \S+ \S+ +\d+ msgs  alpha\r\n")
        await screen.until(r"Resume 1-2 \(Enter: cancel\): ")
        screen.type("2\n")
        await screen.until(r"> alpha\r\nYou said: alpha\r\n")
        await screen.until(rf"session {alpha}")
        await screen.until(MARKER)
        await exchange(screen, "gamma", r"You said: gamma")
        # /resume in the chat: the same picker, then the other session's conversation.
        screen.type("/resume\n")
        await screen.until(r"  1\. .* alpha\r\n  2\. .* beta\r\n")
        await screen.until(r"Resume 1-2 \(Enter: cancel\): ")
        await exchange(screen, "2", r"> beta\r\nYou said: beta\r\n", r"\(resumed .*\)")
        await exchange(screen, "delta", r"You said: delta")
        await leave(screen, process)
    texts = {p.read_text().count("You said: ") for p in _session_files(work)}
    assert texts == {2}  # alpha + gamma, beta + delta: each went to the session picked
    assert "gamma" in alpha.read_text()


async def test_resume_cancelled_leaves_and_is_refused_without_a_terminal(work: Path) -> None:
    await _print_mode(work, "alpha")
    async with chat(work, "--resume") as (screen, process):
        await screen.until(r"Resume 1-1 \(Enter: cancel\): ")
        screen.type("\n")
        await _exits(process)
    assert "pitrio chat" not in screen.text
    refused = await trio.run_process(
        [PITRIO, "-r", "hi"], env=_env(work), cwd=work, capture_stderr=True, stdin=b"", check=False
    )
    assert refused.returncode == 1
    assert b"-r/--resume opens pi's session picker, which only the terminal chat has" in (
        refused.stderr
    )


async def test_ctrl_c_when_idle_leaves_with_0(work: Path) -> None:
    async with chat(work) as (screen, process):
        await screen.until(MARKER)
        await exchange(screen, "hi", r"You said: hi")
        screen.type("\x03")
        await _exits(process)
    assert len(_session_files(work)) == 1


async def test_ctrl_c_at_the_trust_question_ends_the_start_cleanly(
    work: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "imported"
    _project_extension(work, marker)
    before = _fresh_veol()
    async with chat(work) as (screen, process):
        await screen.until(r"Select 1-5")
        screen.type("\x03")
        await _exits(process, -2)  # as pi: the process ends by the signal
        assert _veol(screen) == before
    assert "Traceback" not in screen.text
    assert not marker.exists()
    assert not (work.parent / "agent" / "trust.json").exists()


async def test_model_picks_among_the_models_whose_name_fits(work: Path) -> None:
    async with chat(work) as (screen, process):
        await screen.until(MARKER)
        # One model fits: chosen at once.
        await exchange(screen, "/model think", r"model: faux/faux-think\r\n")
        # Several: numbered, the current one marked; the number typed chooses.
        screen.type("/model faux\n")
        await screen.until(r"2\. faux/faux-think \(current\)")
        await screen.until(r"Model 1-3 \(Enter: keep faux/faux-think\): ")
        await exchange(screen, "3", r"model: faux/faux-small\r\n")
        await exchange(screen, "/model", r"model: faux/faux-small \(thinking ")
        await exchange(screen, "/model llama", r"No model fits 'llama'")
        # /session ends with pi's Cache Warming block (no request yet: nothing to warm).
        await exchange(screen, "/session", r"Mode: idle\r\nStatus: Inactive \(waiting for first")
        await leave(screen, process)


async def test_the_session_flags_reach_the_chat(work: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    args = ("--session-dir", str(elsewhere), "--name", "flagged", "--tools", "read")
    thinking = ("--model", "faux/faux-think", "--thinking", "high")
    async with chat(work, *args, *thinking) as (screen, process):
        await screen.until(rf"session {elsewhere}/\S+\.jsonl")
        await screen.until(MARKER)
        await exchange(screen, "/name", r"name: flagged\r\n")
        await exchange(screen, "/model", r"model: faux/faux-think \(thinking high\)\r\n")
        # bash is not among the tools: the model's call of it fails.
        await exchange(screen, '<<bash {"command": "echo no"}>>', r"✗ bash echo no \(error\)")
        await leave(screen, process)
    assert len(list(elsewhere.glob("*.jsonl"))) == 1
    assert _session_files(work) == []

    async with chat(work, "--no-session") as (screen, process):
        await screen.until(r"session not saved \(--no-session\)")
        await screen.until(MARKER)
        await exchange(screen, "hello", r"You said: hello")
        await leave(screen, process)
    assert _session_files(work) == []


async def test_an_unknown_model_is_one_line_and_exit_1(work: Path) -> None:
    async with chat(work, "--model", "faux/nope") as (screen, process):
        await screen.until(r"Error: .*nope")
        await _exits(process, 1)
    assert "Traceback" not in screen.text


async def test_compact_shows_its_outcome_and_gives_the_prompt_back(work: Path) -> None:
    agent = work.parent / "agent"
    agent.mkdir()
    # Keep only the last turn, so three turns leave something to summarise.
    (agent / "settings.json").write_text('{"compaction": {"keepRecentTokens": 1}}')
    async with chat(work) as (screen, process):
        await screen.until(MARKER)
        # Too small: the failure is told, and the chat is not left waiting for a run's end.
        await exchange(screen, "/compact", r"compaction failed: .*Nothing to compact")
        for word in ("one", "two", "three"):
            await exchange(screen, word, rf"You said: {word}")
        await exchange(screen, "/compact", r"compacting the context \(manual\)", r"compacted")
        await exchange(screen, "after", r"You said: after")
        await leave(screen, process)
    (written,) = _session_files(work)
    assert "compaction" in _shape(written)
