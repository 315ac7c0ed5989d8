"""pi 1.6.0's command-line flags: how they parse and what session options they give.

What each flag changes in the first LLM request is checked against real pi 1.6.0 by
``tests/interop/test_pi_cli_flags.py``; this module checks the parsing and the errors
without starting a process, and ``--session-id`` on a real session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pitrio
from pitrio.errors import PitrioError
from pitrio.transports.cli import _flag_options
from pitrio.transports.cli_args import UsageError, parse, session_thinking_level


def options(*argv: str) -> dict[str, object]:
    return _flag_options(parse([*argv, "-p", "hi"]))


def test_each_flag_reaches_its_session_option() -> None:
    got = options(
        "-t", "ls, r*,", "-xt", "f*,mcp__*", "-nbt", "--no-mcp", "--session-id", "a.b-c_1",
        "-n", "  name  ", "--model", "x/y", "--api-key", "k", "--system-prompt", "S",
        "--append-system-prompt", "A1", "--append-system-prompt", "A2", "--skill", "s1",
        "--skill", "s2", "-ns", "--prompt-template", "p1", "-np", "-nc", "-a",
    )  # fmt: skip
    assert got == {
        "tool_patterns": ("ls", "r*"),
        "exclude_tools": ("f*", "mcp__*"),
        "no_builtin_tools": True,
        "no_mcp": True,
        "session_id": "a.b-c_1",
        "session_name": "name",
        "api_key": "k",
        "system_prompt": "S",
        "append_system_prompt": ("A1", "A2"),
        "skill_paths": ("s1", "s2"),
        "no_skills": True,
        "prompt_template_paths": ("p1",),
        "no_prompt_templates": True,
        "no_context_files": True,
        "project_trust": True,
        "project_trust_rules": True,  # the command line decides trust by pi 1.6.0's rules
    }
    assert options("-na")["project_trust"] is False
    assert options()["project_trust"] is None
    assert options("--tools", "+grep,-bash")["tool_patterns"] == ("+grep", "-bash")
    assert parse(["--verbose", "-p", "hi"]).verbose


def test_thinking_max_is_accepted() -> None:
    args = parse(["--thinking", "max", "-p", "hi"])
    assert args.thinking == "max"
    # Until the session knows "max", it asks for the highest level it knows (the model's
    # highest after clamping, which is what max means for a model without a max mapping).
    assert session_thinking_level("max") in ("max", "xhigh")
    assert session_thinking_level("low") == "low"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--provider", "p"], "--provider requires --model"),
        (["--api-key", "k"], "--api-key requires a model"),
        (["--session-id", "-bad"], "argument --session-id: expected one argument"),
        (["--session-id", "bad."], "--session-id: invalid session id 'bad.'"),
        (["--session-id", "a/b"], "--session-id: invalid session id"),
        (["--session-id", "ab", "-c"], "--session-id cannot be combined with --continue"),
        (["--session-id", "ab", "--session", "x"], "cannot be combined with --session"),
        (["-n", "   "], "--name requires a non-empty value"),
        (["-r"], "-r/--resume opens pi's session picker"),
        (["--tools", "read,+ls"], "--tools: plain tool names and +name/-name entries"),
        (["-a", "-na"], "not allowed with argument -a/--approve"),
        (["-x"], "unknown option -x"),  # no abbreviation of -xt
        (["--thinking", "maxx"], "invalid value 'maxx'"),
    ],
)
def test_refused_command_lines(argv: list[str], error: str) -> None:
    with pytest.raises(UsageError) as info:
        parse([*argv, "-p", "hi"])
    assert error in str(info.value)


async def test_session_id_opens_or_creates_that_session(tmp_path: Path) -> None:
    common = {
        "cwd": str(tmp_path),
        "model": "faux/echo",
        "session_dir": str(tmp_path / "sessions"),
    }
    async with pitrio.create_session(session_id="my-id.1", **common) as session:
        assert session.header.id == "my-id.1"
        await session.prompt("first")
    (file,) = (tmp_path / "sessions").glob("*.jsonl")
    assert file.name.endswith("_my-id.1.jsonl")
    async with pitrio.create_session(session_id="my-id.1", session_name="N", **common) as again:
        assert again.header.id == "my-id.1"
        texts = [m.content[0].text for m in await again.messages() if m.role == "user"]  # type: ignore[union-attr]
        assert texts == ["first"]
    assert list((tmp_path / "sessions").glob("*.jsonl")) == [file]  # the same file
    assert '"type":"session_info"' in file.read_text().replace(" ", "")
    with pytest.raises(PitrioError, match="invalid session id"):
        async with pitrio.create_session(session_id="-x", **common):
            pass


def _rpc(tmp_path: Path, commands: list[dict[str, object]], *flags: str) -> tuple[str, str]:
    """``pitrio --mode rpc --no-session FLAGS`` fed ``commands``: its stdout and stderr."""
    import subprocess
    import sys

    env = {
        "HOME": str(tmp_path),
        "PITRIO_AGENT_DIR": str(tmp_path / "agent"),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pitrio.transports.cli", "--mode", "rpc", "--no-session", *flags],
        input="".join(json.dumps(c) + "\n" for c in commands),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    return done.stdout, done.stderr


def test_rpc_new_session_does_not_reuse_the_start_up_id_or_name(tmp_path: Path) -> None:
    commands: list[dict[str, object]] = [
        {"id": "1", "type": "get_state"},
        {"id": "2", "type": "new_session"},
        {"id": "3", "type": "get_state"},
    ]
    stdout, stderr = _rpc(tmp_path, commands, "--session-id", "start-id", "-n", "start name")
    states = [
        json.loads(line)["data"]
        for line in stdout.splitlines()
        if '"command":"get_state"' in line.replace(" ", "")
    ]
    assert len(states) == 2, stdout + stderr
    assert (states[0]["sessionId"], states[0].get("sessionName")) == ("start-id", "start name")
    assert states[1]["sessionId"] != "start-id"
    assert states[1].get("sessionName") is None


def test_pis_terminal_ui_flags_are_taken_and_change_nothing() -> None:
    themes = ["--theme", "a", "--theme", "b", "--use-theme", "dark", "--no-themes"]
    args = parse([*themes, "--tui-mode", "regular", "-p", "hi"])
    assert (args.theme, args.use_theme, args.no_themes, args.tui_mode) == (
        ["a", "b"],
        "dark",
        True,
        "regular",
    )
    assert options() == options("--tui-mode", "fullscreen", "--use-theme", "x")
    with pytest.raises(UsageError, match="tui-mode"):
        parse(["--tui-mode", "window", "-p", "hi"])


def test_export_takes_a_file_and_an_optional_output() -> None:
    assert parse(["--export", "s.jsonl"]).export == ["s.jsonl"]
    assert parse(["--export", "s.jsonl", "o.html"]).export == ["s.jsonl", "o.html"]
    with pytest.raises(UsageError, match="--export"):
        parse(["--export"])


def test_the_command_line_marks_its_child_processes_as_pi_does(tmp_path: Path) -> None:
    """pi 1.6.0's ``AI_AGENT=pi`` and ``PI_CODING_AGENT=true``, inherited by a ``bash``
    command (the differential scenario ``process_markers`` compares with pi itself)."""
    command = {"id": "1", "type": "bash", "command": 'echo "$AI_AGENT $PI_CODING_AGENT"'}
    stdout, stderr = _rpc(tmp_path, [command])
    answer = json.loads(stdout.splitlines()[0])
    assert answer["data"]["output"] == "pi true\n", stdout + stderr
