"""The ``pitrio`` console script's launcher (pitrio/transports/launch.py): an RPC process that
resumes a session file through it answers as pitrio's own entry point does, and has taken
and reaped its parsing child by the time ``get_messages`` is answered (issue 38)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from pitrio.actors.session_store.paths import session_dir
from tests.actors.test_session_store_fuzz import base_lines, join

LAUNCHER = "import sys; from pitrio.transports.launch import main; sys.exit(main())"
DIRECT = "import sys; from pitrio.transports.cli import main; sys.exit(main())"


def replies(
    entry: str, session: Path, agent: Path, how: tuple[str, ...] = ()
) -> tuple[list[dict[str, Any]], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    env["PITRIO_AGENT_DIR"] = str(agent)
    commands = b'{"id":"1","type":"get_state"}\n{"id":"2","type":"get_messages"}\n'
    process = subprocess.Popen(
        [sys.executable, "-c", entry, "--mode", "rpc", *(how or ("--session", str(session)))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=agent,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(commands)
    process.stdin.flush()
    out = [json.loads(process.stdout.readline()) for _ in range(2)]
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text()
    process.stdin.close()
    assert process.wait(timeout=60) == 0
    return out, children


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
    assert children == ""  # the parsing child was reaped


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
    assert children == ""


def test_the_launcher_imports_nothing_of_the_runtime_before_it_forks() -> None:
    # The child overlaps the runtime's imports only while importing the launcher loads none
    # of them: pitrio/__init__.py must stay a facade that loads the SDK on first use.
    probe = "import json, sys, pitrio.transports.launch; print(json.dumps(sorted(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    ours = [name for name in json.loads(loaded) if name == "pitrio" or name.startswith("pitrio.")]
    assert ours == ["pitrio", "pitrio.transports", "pitrio.transports.launch"]
