"""The ``pitrio`` command as a real process: print mode and JSON mode (spec pi-rpc §8, §10, R32).

Each test runs ``python -m pitrio.transports.cli`` in a fresh cwd with HOME and the agent dir
pointed at temporary directories.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest

from pitrio.actors.session_store.paths import encode_cwd
from pitrio.messages.codec import from_json, to_json
from pitrio.messages.entries import FileLine, SessionHeader
from pitrio.messages.events import AgentSessionEvent

TIMEOUT = 60


@attrs.frozen
class Dirs:
    cwd: Path
    home: Path
    agent: Path
    root: Path


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    cwd = tmp_path / "proj"
    home = tmp_path / "home"
    agent = tmp_path / "agent"
    for directory in (cwd, home):
        directory.mkdir()
    return Dirs(cwd=Path(os.path.realpath(cwd)), home=home, agent=agent, root=tmp_path)


def pitrio(
    dirs: Dirs, *args: str, stdin: str | bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    environment.update(HOME=str(dirs.home), PITRIO_AGENT_DIR=str(dirs.agent))
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "pitrio.transports.cli", *args],
        cwd=dirs.cwd,
        env=environment,
        stdin=subprocess.DEVNULL if stdin is None else None,
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )


def files_under(directory: Path) -> list[Path]:
    """Session files under ``directory`` (their ``.lock`` lease files aside)."""
    if not directory.exists():
        return []
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix != ".lock")


def json_lines(data: bytes) -> list[dict[str, Any]]:
    assert data.endswith(b"\n")
    return [orjson.loads(line) for line in data.split(b"\n")[:-1]]


def default_session_dir(dirs: Dirs) -> Path:
    return dirs.agent / "sessions" / encode_cwd(str(dirs.cwd))


SESSION_FILE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z_(?P<id>[0-9a-f-]{36})\.jsonl$")


# -- print mode ------------------------------------------------------------------------------


def test_print_mode_prints_the_reply(dirs: Dirs) -> None:
    result = pitrio(dirs, "--model", "faux/echo", "-p", "hello")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"hello\n", b"")


def test_print_mode_says_a_database_setting_is_not_used_here(dirs: Dirs) -> None:
    dirs.agent.mkdir()
    settings = {"session": {"store": "postgresql://nobody@127.0.0.1:9/none"}}
    (dirs.agent / "settings.json").write_bytes(orjson.dumps(settings))
    result = pitrio(dirs, "--model", "faux/echo", "-p", "hello")
    assert (result.returncode, result.stdout) == (0, b"hello\n")
    assert result.stderr == (
        b"Warning: the session.store setting is used by pitrio serve only; "
        b"this session is kept in a session file\n"
    )
    assert len(files_under(default_session_dir(dirs))) == 1
    quiet = pitrio(dirs, "--model", "faux/echo", "--no-session", "-p", "hello")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, b"hello\n", b"")


def test_print_mode_is_the_default_without_a_tty(dirs: Dirs) -> None:
    # pi: print mode "if -p or stdin is not a TTY"; here stdin is /dev/null.
    result = pitrio(dirs, "hello")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"hello\n", b"")


def test_provider_and_bare_model_id(dirs: Dirs) -> None:
    result = pitrio(dirs, "--provider", "faux", "--model", "echo", "-p", "hello")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"hello\n", b"")


def test_unknown_model_exits_1_with_one_stderr_line(dirs: Dirs) -> None:
    result = pitrio(dirs, "--model", "faux/nope", "-p", "hello")
    assert result.returncode == 1
    assert result.stdout == b""
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1, result.stderr
    assert "faux/nope" in lines[0]
    assert files_under(dirs.agent) == []


def test_json_mode_unknown_model_writes_no_json(dirs: Dirs) -> None:
    result = pitrio(dirs, "--mode", "json", "--model", "faux/nope", "hi")
    assert (result.returncode, result.stdout) == (1, b"")
    assert len(result.stderr.decode().splitlines()) == 1
    assert b"faux/nope" in result.stderr


def test_piped_stdin_is_prepended_with_a_blank_line(dirs: Dirs) -> None:
    # pi glues the two with nothing between; pitrio separates them (issue 24, README row).
    result = pitrio(dirs, "-p", "arg", stdin="from stdin\n")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"from stdin\n\narg\n", b"")


def test_piped_stdin_is_trimmed(dirs: Dirs) -> None:
    result = pitrio(dirs, "-p", "arg", stdin="  \n from stdin \n\n")
    assert result.stdout == b"from stdin\n\narg\n"


def test_piped_stdin_alone_is_the_prompt(dirs: Dirs) -> None:
    result = pitrio(dirs, "-p", stdin="only stdin\n")
    assert (result.returncode, result.stdout) == (0, b"only stdin\n")


def test_piped_stdin_goes_only_to_the_first_message(dirs: Dirs) -> None:
    result = pitrio(dirs, "--mode", "json", "one", "two", stdin="in:")
    users = [
        line["message"]["content"][0]["text"]
        for line in json_lines(result.stdout)
        if line["type"] == "message_end" and line["message"]["role"] == "user"
    ]
    assert users == ["in:\n\none", "two"]


def test_piped_stdin_is_read_as_utf8_whatever_the_locale(dirs: Dirs) -> None:
    result = pitrio(dirs, "-p", "✓", stdin="grüße ", env={"LC_ALL": "C", "LANG": "C"})
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout.decode("utf-8") == "grüße\n\n✓\n"


def test_piped_stdin_that_is_not_utf8_is_replaced_not_fatal(dirs: Dirs) -> None:
    result = pitrio(dirs, "-p", "x", stdin=b"caf\xe9")
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout.decode("utf-8") == "caf\ufffd\n\nx\n"


def test_unknown_mode_is_refused(dirs: Dirs) -> None:
    # pi: "rpc if rpc, json if json, else print"; pitrio refuses it (issue 24, README).
    result = pitrio(dirs, "--mode", "fancy", "-p", "hello")
    assert (result.returncode, result.stdout) == (1, b"")
    assert result.stderr == (
        b"Error: argument --mode: invalid value 'fancy' (choose from text, json, rpc)\n"
    )


def test_several_messages_print_only_the_last_reply(dirs: Dirs) -> None:
    result = pitrio(dirs, "-p", "one", "two")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"two\n", b"")
    # Both prompts ran, in one session.
    [path] = files_under(dirs.agent)
    texts = [
        line["message"]["content"][0]["text"]
        for line in json_lines(path.read_bytes())
        if line["type"] == "message" and line["message"]["role"] != "system"
    ]
    assert texts == ["one", "one", "two", "two"]


def test_print_mode_without_messages_is_an_error(dirs: Dirs) -> None:
    # pi exits 0 having done nothing; pitrio says why nothing happens (issue 24, README).
    result = pitrio(dirs, "-p")
    assert (result.returncode, result.stdout) == (1, b"")
    assert result.stderr.startswith(b"Error: no prompt: give one as an argument or pipe it")
    assert files_under(dirs.agent) == []


def test_unicode_round_trip(dirs: Dirs) -> None:
    result = pitrio(dirs, "-p", "grüße ✓ 日本")
    assert result.stdout.decode("utf-8") == "grüße ✓ 日本\n"


# -- JSON mode -------------------------------------------------------------------------------


EXPECTED_HEAD = [
    "agent_start",
    "turn_start",
    "message_start",  # the session's system message (pi 1.6.0)
    "message_end",
    "message_start",
    "message_end",
    "message_start",
]
EXPECTED_TAIL = ["message_end", "turn_end", "agent_end", "agent_settled"]


def test_json_mode_header_then_events(dirs: Dirs) -> None:
    result = pitrio(dirs, "--mode", "json", "hi")
    assert (result.returncode, result.stderr) == (0, b"")
    raw_lines = result.stdout.split(b"\n")
    assert raw_lines[-1] == b""
    raw_lines = raw_lines[:-1]
    lines = [orjson.loads(line) for line in raw_lines]

    # The session header comes first (pi 1.6.0's docs/json.md), in pi's key order.
    header = from_json(lines[0], SessionHeader)
    assert list(lines[0]) == ["type", "version", "id", "timestamp", "cwd"]
    assert (header.type, header.version, header.cwd) == ("session", 3, str(dirs.cwd))

    # Then every event: each decodes as a session event and re-encodes to the same bytes,
    # except message_update, which is pi 1.6.0's JSON form (the usage so far and the stream
    # event without its partial message).
    events = lines[1:]
    types = [event["type"] for event in events]
    for raw, value in zip(raw_lines[1:], events, strict=True):
        if value["type"] == "message_update":
            continue
        decoded = from_json(value, AgentSessionEvent)  # type: ignore[arg-type]
        assert orjson.dumps(to_json(decoded)) == raw

    assert types[:7] == EXPECTED_HEAD
    assert types[-4:] == EXPECTED_TAIL
    updates = types[7:-4]
    assert updates and set(updates) == {"message_update"}
    assert events[2]["message"]["role"] == events[3]["message"]["role"] == "system"
    assert [events[i]["message"]["role"] for i in (4, 5, 6, -4)] == [
        "user",
        "user",
        "assistant",
        "assistant",
    ]
    assert events[6]["message"]["stopReason"] == "pending"  # pi 1.6.0's streaming start

    # message_update: pi 1.6.0's keys, in its order.
    update_kinds = []
    for event in events[7:-4]:
        assert list(event) == ["type", "usage", "assistantMessageEvent"]
        assert "partial" not in event["assistantMessageEvent"]
        update_kinds.append(event["assistantMessageEvent"]["type"])
    assert update_kinds[0] == "text_start"
    assert update_kinds[-1] == "text_end"
    assert set(update_kinds[1:-1]) == {"text_delta"}
    deltas = "".join(e["assistantMessageEvent"]["delta"] for e in events[8:-5])
    assert deltas == "hi"

    system = events[3]["message"]
    user = events[5]["message"]
    assert user["content"] == [{"type": "text", "text": "hi"}]
    final = events[-4]["message"]
    assert final["content"] == [{"type": "text", "text": "hi"}]
    assert (final["provider"], final["model"], final["stopReason"]) == ("faux", "echo", "stop")
    assert events[-3]["message"] == final
    assert events[-3]["toolResults"] == []
    assert events[-2]["messages"] == [system, user, final]
    assert events[-2]["willRetry"] is False
    assert events[-1] == {"type": "agent_settled", "aborted": False}


def test_json_mode_without_messages_writes_only_the_header(dirs: Dirs) -> None:
    result = pitrio(dirs, "--mode", "json")
    assert (result.returncode, result.stderr) == (0, b"")
    [line] = json_lines(result.stdout)
    assert line["type"] == "session"
    from_json(line, SessionHeader)
    assert files_under(dirs.agent) == []


def test_json_mode_header_matches_the_session_file(dirs: Dirs) -> None:
    result = pitrio(dirs, "--mode", "json", "hi")
    [path] = files_under(dirs.agent)
    assert json_lines(path.read_bytes())[0] == json_lines(result.stdout)[0]


def test_json_mode_with_no_session_still_prints_the_header(dirs: Dirs) -> None:
    result = pitrio(dirs, "--mode", "json", "--no-session", "hi")
    assert result.returncode == 0
    assert json_lines(result.stdout)[0]["type"] == "session"
    assert files_under(dirs.agent) == []


# -- session files ---------------------------------------------------------------------------


def check_session_file(path: Path, cwd: Path, prompt: str) -> None:
    match = SESSION_FILE.match(path.name)
    assert match, path.name
    lines = json_lines(path.read_bytes())
    decoded = [from_json(line, FileLine) for line in lines]  # type: ignore[arg-type]
    header = decoded[0]
    assert isinstance(header, SessionHeader)
    assert header.id == match["id"]
    assert path.name.startswith(header.timestamp.replace(":", "-").replace(".", "-") + "_")
    assert (header.version, header.cwd) == (3, str(cwd))
    assert [line["type"] for line in lines] == [
        "session",
        "model_change",
        "thinking_level_change",
        "message",  # the system message (pi 1.6.0)
        "message",
        "message",
    ]
    assert (lines[1]["provider"], lines[1]["modelId"]) == ("faux", "echo")
    assert lines[2]["thinkingLevel"] == "off"
    assert [line["message"]["role"] for line in lines[3:]] == ["system", "user", "assistant"]
    assert lines[4]["message"]["content"] == [{"type": "text", "text": prompt}]
    assert lines[5]["message"]["content"] == [{"type": "text", "text": prompt}]
    entries = lines[1:]
    assert entries[0]["parentId"] is None
    for previous, entry in itertools.pairwise(entries):
        assert entry["parentId"] == previous["id"]
        assert re.fullmatch(r"[0-9a-f]{8}", entry["id"])
    assert len({entry["id"] for entry in entries}) == len(entries)


def test_session_file_in_the_default_dir(dirs: Dirs) -> None:
    result = pitrio(dirs, "-p", "hello")
    assert result.returncode == 0
    [path] = files_under(dirs.agent)
    assert path.parent == default_session_dir(dirs)
    assert path.parent.name == "--" + str(dirs.cwd)[1:].replace("/", "-") + "--"
    check_session_file(path, dirs.cwd, "hello")


def test_each_run_writes_a_new_session(dirs: Dirs) -> None:
    pitrio(dirs, "-p", "one")
    pitrio(dirs, "-p", "two")
    paths = files_under(dirs.agent)
    assert len(paths) == 2
    assert {p.parent for p in paths} == {default_session_dir(dirs)}


def test_no_session_writes_nothing(dirs: Dirs) -> None:
    result = pitrio(dirs, "--no-session", "-p", "hello")
    assert (result.returncode, result.stdout) == (0, b"hello\n")
    assert files_under(dirs.root / "agent") == []
    assert files_under(dirs.home) == []
    assert files_under(dirs.cwd) == []


def test_session_dir_flag(dirs: Dirs) -> None:
    target = dirs.root / "flag-dir"
    result = pitrio(dirs, "--session-dir", str(target), "-p", "hello")
    assert result.returncode == 0
    [path] = files_under(target)
    assert path.parent == target  # directly inside, no encoded-cwd sub-directory
    check_session_file(path, dirs.cwd, "hello")
    assert files_under(dirs.agent) == []


def test_session_dir_env(dirs: Dirs) -> None:
    target = dirs.root / "env-dir"
    result = pitrio(dirs, "-p", "hello", env={"PITRIO_SESSION_DIR": str(target)})
    assert result.returncode == 0
    [path] = files_under(target)
    assert path.parent == target
    check_session_file(path, dirs.cwd, "hello")
    assert files_under(dirs.agent) == []


def test_session_dir_flag_beats_env(dirs: Dirs) -> None:
    flag_dir = dirs.root / "flag-dir"
    env_dir = dirs.root / "env-dir"
    result = pitrio(
        dirs,
        "--session-dir",
        str(flag_dir),
        "-p",
        "hello",
        env={"PITRIO_SESSION_DIR": str(env_dir)},
    )
    assert result.returncode == 0
    assert len(files_under(flag_dir)) == 1
    assert files_under(env_dir) == []
    assert files_under(dirs.agent) == []


# -- models --------------------------------------------------------------------------------


def test_list_models_filters_by_search(dirs: Dirs) -> None:
    result = pitrio(dirs, "--list-models", "faux-th")
    assert result.returncode == 0
    lines = result.stdout.decode().splitlines()
    assert lines[0].split()[:2] == ["provider", "model"]
    assert [line.split()[1] for line in lines[1:]] == ["faux-think"]


def test_a_thinking_suffix_in_the_model_pattern_sets_the_level(dirs: Dirs) -> None:
    result = pitrio(dirs, "--model", "faux/faux-think:low", "-p", "hi")
    assert result.returncode == 0, result.stderr
    (session,) = files_under(default_session_dir(dirs))
    levels = [
        line["thinkingLevel"]
        for line in json_lines(session.read_bytes())
        if line["type"] == "thinking_level_change"
    ]
    assert levels == ["low"]
    # An explicit --thinking wins over the suffix.
    other = dirs.root / "other"
    again = pitrio(
        dirs,
        "--model",
        "faux/faux-think:low",
        "--thinking",
        "high",
        "--session-dir",
        str(other),
        "-p",
        "x",
    )
    assert again.returncode == 0, again.stderr
    (second,) = files_under(other)
    assert [
        line["thinkingLevel"]
        for line in json_lines(second.read_bytes())
        if line["type"] == "thinking_level_change"
    ] == ["high"]


FLAG_EXTENSION = """
def setup(api):
    api.register_flag("shout", type="boolean", default=False, description="Upper-case prompts")
    api.register_flag("suffix", type="string", default="")

    def on_input(event, ctx):
        text = event.text.upper() if api.get_flag("shout") else event.text
        return {"action": "transform", "text": text + api.get_flag("suffix")}

    api.on("input", on_input)
"""


def test_extension_flags_on_the_command_line(dirs: Dirs) -> None:
    extension = dirs.root / "flags.py"
    extension.write_text(FLAG_EXTENSION)
    base = ("--model", "faux/echo", "--no-session", "-e", str(extension))
    shouted = pitrio(dirs, *base, "--shout", "--suffix=!", "-p", "hello")
    assert (shouted.returncode, shouted.stdout) == (0, b"HELLO!\n"), shouted.stderr
    plain = pitrio(dirs, *base, "-p", "hello")
    assert (plain.returncode, plain.stdout) == (0, b"hello\n"), plain.stderr
    unknown = pitrio(dirs, *base, "--whisper", "-p", "hello")
    assert unknown.returncode == 1 and unknown.stdout == b""
    assert b"Error: unrecognized arguments: --whisper" in unknown.stderr
    missing_value = pitrio(dirs, *base, "--suffix", "-p", "hello")
    assert missing_value.returncode == 1
    assert b"unrecognized arguments: --suffix" in missing_value.stderr


STATS = str(Path(__file__).resolve().parents[2] / "examples" / "extensions" / "stats_command.py")


@pytest.mark.parametrize("mode", [("-p",), ("--mode", "json")])
def test_an_extension_command_finishes_print_and_json_mode(dirs: Dirs, mode: tuple[str]) -> None:
    # issue 21: the command runs no agent, so no agent_settled came and the mode never ended
    # (subprocess.run's timeout is the guard).
    base = ("--model", "faux/echo", "-e", STATS)
    result = pitrio(dirs, *base, *mode, "/stats")
    assert result.returncode == 0, result.stderr
    if mode == ("-p",):
        assert result.stdout == b""  # no reply to print (pi's print mode shows no UI)
    else:
        # The command's appendEntry is announced as pi 1.6.0 announces an extension's entry.
        lines = json_lines(result.stdout)
        assert [line["type"] for line in lines] == ["session", "entry_appended"]
        assert (lines[1]["entry"]["type"], lines[1]["entry"]["customType"]) == ("custom", "stats")
    # A command between prompts: every prompt still runs, in order, and the command ran.
    both = pitrio(dirs, *base, *mode, "one", "/stats", "two")
    assert both.returncode == 0, both.stderr
    if mode == ("-p",):
        assert both.stdout == b"two\n"
    # Two sessions: the first run's command wrote a custom entry, which is acknowledged and so
    # durable (issue 21); the second run's file is the newer name (a timestamp comes first).
    first, session = sorted(files_under(default_session_dir(dirs)), key=lambda path: path.name)
    for path in (first, session):
        kinds = [(line["type"], line.get("customType")) for line in json_lines(path.read_bytes())]
        assert ("custom", "stats") in kinds


def test_sigint_mid_run_kills_it_as_pi_after_flushing(dirs: Dirs) -> None:
    """SIGINT while a reply streams (JSON mode; text mode runs the same code): the process dies
    of the signal (pi's exit), the session file holds the prompt, stderr stays empty (no
    KeyboardInterrupt traceback, no group)."""
    import signal

    environment = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    environment.update(HOME=str(dirs.home), PITRIO_AGENT_DIR=str(dirs.agent))
    process = subprocess.Popen(
        [sys.executable, "-m", "pitrio.transports.cli", "--mode", "json", "SLOW: stop me"],
        cwd=dirs.cwd,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        for line in process.stdout:  # blocks on the pipe; the first delta proves a live run
            if b'"message_update"' in line:
                break
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
    assert (process.returncode, stderr) == (-signal.SIGINT, b"")
    [session] = files_under(default_session_dir(dirs))
    assert b"stop me" in session.read_bytes()
