"""The ``pitrio`` console script's launcher (pitrio/transports/launch.py): an RPC process that
resumes a session file through it answers as pitrio's own entry point does, and by the time
``get_messages`` is answered has taken its parsing child's records (the child reaped, or kept
for a prefix request and gone once the process exits; issue 38)."""

from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from pitrio.actors.session_store.paths import session_dir
from tests.actors.test_session_store_fuzz import base_lines, join

LAUNCHER = "import sys; from pitrio.transports.launch import main; sys.exit(main())"
DIRECT = "import sys; from pitrio.transports.cli import main; sys.exit(main())"


# The launcher with its child started whatever the load, and the store's read waiting until
# the child has exited: every line the child certified comes from its records.
FORCED = """
import functools, os, select, sys
from pitrio import _preparse as preparse
preparse.idle_core = lambda: True
preparse.start = functools.partial(preparse.start, requests=False)  # it exits when done
take = preparse.take
def finished_take(status):
    watch = os.pidfd_open(preparse._OFFERS[-1].pid)
    assert select.select([watch], [], [], 60)[0], "the child did not finish"
    os.close(watch)
    return take(status)
preparse.take = finished_take
from pitrio.transports.launch import main
sys.exit(main())
"""


def rpc_process(entry: str, agent: Path, argv: tuple[str, ...]) -> subprocess.Popen[bytes]:
    """An RPC process started through ``entry`` in ``agent`` (its agent dir and cwd)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    env["PITRIO_AGENT_DIR"] = str(agent)
    return subprocess.Popen(
        [sys.executable, "-c", entry, "--mode", "rpc", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=agent,
        env=env,
    )


def raw_replies(entry: str, session: Path, agent: Path) -> list[bytes]:
    """The response lines to ``get_state`` then ``get_messages``, as written."""
    process = rpc_process(entry, agent, ("--session", str(session)))
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b'{"id":"1","type":"get_state"}\n')
    process.stdin.flush()
    out = [process.stdout.readline()]
    process.stdin.write(b'{"id":"2","type":"get_messages"}\n')
    process.stdin.flush()
    out.append(process.stdout.readline())
    process.stdin.close()
    assert process.wait(timeout=60) == 0
    return out


def replies(
    entry: str, session: Path, agent: Path, how: tuple[str, ...] = ()
) -> tuple[list[dict[str, Any]], list[int]]:
    """The replies to ``get_state`` and ``get_messages``, and the process's children then
    (checked to have exited once it did)."""
    commands = b'{"id":"1","type":"get_state"}\n{"id":"2","type":"get_messages"}\n'
    process = rpc_process(entry, agent, how or ("--session", str(session)))
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(commands)
    process.stdin.flush()
    out = [json.loads(process.stdout.readline()) for _ in range(2)]
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text()
    watches = [os.pidfd_open(int(pid)) for pid in children.split()]
    process.stdin.close()
    try:
        assert process.wait(timeout=60) == 0
        for watch in watches:  # a child kept for a prefix request ends with the process
            assert select.select([watch], [], [], 30)[0], "the parsing child outlived pitrio"
    finally:
        for watch in watches:
            os.close(watch)
    return out, [int(pid) for pid in children.split()]


def long_session(tmp_path: Path) -> bytes:
    lines = base_lines(random.Random("launch"))
    entries = [orjson.loads(line) for line in lines[1:]]
    out, parent = [lines[0]], None
    for number in range(2000):
        value = dict(entries[number % len(entries)], id=f"n{number:05d}", parentId=parent)
        out.append(orjson.dumps(value))
        parent = value["id"]
    return join(out)


def test_a_resume_through_the_launcher_answers_as_pitrio_does(tmp_path: Path) -> None:
    session = tmp_path / "long.jsonl"
    session.write_bytes(long_session(tmp_path))
    agent = tmp_path / "agent"
    agent.mkdir()
    launched, children = replies(LAUNCHER, session, agent)
    direct, _ = replies(DIRECT, session, agent)
    assert [r["command"] for r in launched] == ["get_state", "get_messages"]
    assert launched[1]["success"] and len(launched[1]["data"]["messages"]) == 2000
    assert launched[1] == direct[1]
    assert launched[0]["data"]["sessionFile"] == direct[0]["data"]["sessionFile"]
    # The parsing child was reaped, or (it finished before its records were taken) is kept
    # for a prefix request: it exited with the process (checked by replies()).
    assert len(children) <= 1


def test_continue_through_the_launcher_answers_as_pitrio_does(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    folder = session_dir(str(agent), env={"PITRIO_AGENT_DIR": str(agent)})
    folder.mkdir(parents=True)
    session = folder / "2026-12-06T00-00-00-000Z_launch.jsonl"
    session.write_bytes(long_session(tmp_path))
    launched, children = replies(LAUNCHER, session, agent, ("--continue",))
    direct, _ = replies(DIRECT, session, agent, ("--continue",))
    assert launched[0]["data"]["sessionFile"] == direct[0]["data"]["sessionFile"] == str(session)
    assert launched[1]["success"] and len(launched[1]["data"]["messages"]) == 2000
    assert launched[1] == direct[1]
    assert len(children) <= 1


def test_get_messages_from_the_childs_memory_is_the_in_process_answer_byte_for_byte(
    tmp_path: Path,
) -> None:
    # Lines the child certifies (their messages cut where it found them), and lines it
    # certifies whose message is not where get_messages cuts it (spaced otherwise, a space
    # or a carriage return after them: parsed out of the line), a role pitrio does not know,
    # a blank line, a line it refuses, over many of its blocks (the file is ~2.5 MB).
    lines = base_lines(random.Random("bytes"))
    entries = [orjson.loads(line) for line in lines[1:]]
    out, parent, unknown = [lines[0]], None, 0
    for number in range(6000):
        value = dict(entries[number % len(entries)], id=f"n{number:05d}", parentId=parent)
        line = orjson.dumps(value)
        if number % 997 == 1:
            line = json.dumps(value, separators=(", ", ": "), ensure_ascii=False).encode()
        elif number % 997 == 2:
            line += b" "
        elif number % 997 == 3:
            line += b"\r"
        elif number % 997 == 4:
            message = dict(value["message"], role="futureRole")
            line = orjson.dumps(dict(value, message=message))
            unknown += 1
        elif number % 997 == 5:
            out.append(b"")
        elif number % 997 == 6:
            line = orjson.dumps(dict(value, extra=1))  # a sixth key: not the quick path
        out.append(line)
        parent = value["id"]
    session = tmp_path / "long.jsonl"
    session.write_bytes(join(out))
    agent = tmp_path / "agent"
    agent.mkdir()
    forced = raw_replies(FORCED, session, agent)
    direct = raw_replies(DIRECT, session, agent)
    assert json.loads(forced[1])["success"]
    assert len(json.loads(forced[1])["data"]["messages"]) == 6000 - unknown == 5993
    assert forced == direct


def test_the_launcher_imports_nothing_of_the_runtime_before_it_starts_its_child() -> None:
    # The child overlaps the runtime's imports only while importing the launcher loads none
    # of them: pitrio/__init__.py must stay a facade that loads the SDK on first use.
    probe = "import json, sys, pitrio.transports.launch; print(json.dumps(sorted(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    ours = [name for name in json.loads(loaded) if name == "pitrio" or name.startswith("pitrio.")]
    assert ours == ["pitrio", "pitrio.transports", "pitrio.transports.launch"]
