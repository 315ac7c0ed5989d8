"""What the ACP tests share: the ``pitrio acp`` command line and environment, the official
schema of the installed SDK, and the check of a line against it."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trio

from tests.transports.acp.acp_sdk_install import find_sdk

PITRIO = str(Path(sys.executable).parent / "pitrio")

DIALOG_EXTENSION = """
from collections.abc import AsyncIterator
from pathlib import Path

async def ask(args, ctx):
    sure = await ctx.ui.confirm("Sure?", "say y")
    Path({answer!r}).write_text(str(sure))

def setup(api):
    api.register_command("ask", ask, description="One question")
"""


def sdk_or_skip() -> Path:
    """The installed SDK package folder (the test is skipped, saying why, without npm)."""
    package, why = find_sdk()
    if package is None:
        pytest.skip(why)
    return package


def acp_env(work: Path, **extra: str) -> dict[str, str]:
    """``pitrio acp``'s environment: an agent dir beside ``work``, the fixture-rules model."""
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PITRIO_SESSION_DIR", "PYTHONDONTWRITEBYTECODE")
    }
    environment.update(
        {
            "PITRIO_AGENT_DIR": str(work.parent / "agent"),
            "PITRIO_FAUX_SCRIPT": "fixture-rules",
            **extra,
        }
    )
    return environment


@functools.cache
def _validator(schema_path: str) -> jsonschema.protocols.Validator:
    schema = json.loads(Path(schema_path).read_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def agent_schema_validator(package: Path) -> Any:
    """A validator of the schema's ``Agent`` branch alone (the top level accepts a message of
    either side), with the ``$defs`` of the whole schema."""
    schema_path = package / "schema" / "v1" / "schema.json"
    schema = json.loads(schema_path.read_text())
    agent = next(branch for branch in schema["anyOf"] if branch.get("title") == "Agent")
    return _validator(str(schema_path)).evolve(schema={**agent, "$defs": schema["$defs"]})


def _defs_by_method(schema: dict[str, Any]) -> dict[tuple[str, str], str]:
    """``(side, method)`` to the name of the ``$defs`` entry: the agent's responses
    (``Response``) and the client's requests (``Request``) and notifications."""
    found: dict[tuple[str, str], str] = {}
    for name, definition in schema["$defs"].items():
        method = definition.get("x-method")
        if isinstance(method, str):
            kind = "response" if name.endswith("Response") else "request"
            found[(f"{definition.get('x-side')}-{kind}", method)] = name
    return found


class SchemaCheck:
    """Checks every line pitrio wrote against ACP v1's official schema: the ``Agent``
    message shape, and each result, request and notification against the type its method
    names (a result is checked against the response type of the request with its id)."""

    def __init__(self, package: Path) -> None:
        schema_path = package / "schema" / "v1" / "schema.json"
        self.schema = json.loads(schema_path.read_text())
        self.agent = agent_schema_validator(package)
        self.whole = _validator(str(schema_path))
        self.defs = _defs_by_method(self.schema)

    def _against(self, name: str, value: Any) -> list[str]:
        validator = self.whole.evolve(
            schema={"$ref": f"#/$defs/{name}", "$defs": self.schema["$defs"]}
        )
        return [f"{name}: {error.message[:300]}" for error in validator.iter_errors(value)]

    def errors(self, line: str, methods: dict[Any, str]) -> list[str]:
        """Why ``line`` breaks the schema; ``methods``: the client's request ids and methods."""
        message = json.loads(line)
        problems = [f"Agent: {error.message[:300]}" for error in self.agent.iter_errors(message)]
        if "method" in message:
            side = "client-request"
            name = self.defs.get((side, message["method"]))
            if name is None:
                problems.append(f"unknown method {message['method']}")
            else:
                problems += self._against(name, message.get("params"))
        elif "result" in message:
            method = methods.get(json.dumps(message["id"]))
            name = self.defs.get(("agent-response", method or ""))
            if name is None:
                problems.append(f"a result for no known request: {line[:200]}")
            else:
                problems += self._against(name, message["result"])
        return problems


def sent_methods(lines: list[str]) -> dict[Any, str]:
    """The client's requests: id (as JSON) to method."""
    found: dict[Any, str] = {}
    for line in lines:
        try:
            message = json.loads(line)
        except ValueError:
            continue  # a hostile line: no request
        if isinstance(message, dict) and "id" in message and "method" in message:
            found[json.dumps(message["id"])] = message["method"]
    return found


Line = str | dict[str, Any]


class Agent:
    """A ``pitrio acp`` process (stdin and stdout piped) and the lines it wrote."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self.written: list[str] = []
        self.sent: list[str] = []
        self._buffer = b""

    async def send(self, *lines: Line) -> None:
        assert self.process.stdin is not None
        for line in lines:
            text = line if isinstance(line, str) else json.dumps(line)
            self.sent.append(text)
            await self.process.stdin.send_all(text.encode() + b"\n")

    async def read_line(self) -> None:
        """Read one more line into ``lines`` and ``written``."""
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            data = await self.process.stdout.receive_some()
            assert data, "pitrio acp ended"
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        self.lines.append(line.decode())
        self.written.append(line.decode())

    async def answer(self, request_id: Any) -> dict[str, Any]:
        """Read until the response with ``request_id``, taken out of ``lines`` (the other
        lines stay); every line read is kept in ``written``."""
        with trio.fail_after(30):
            while True:
                for index, line in enumerate(self.lines):
                    message = json.loads(line)
                    if "method" not in message and message.get("id", "?") == request_id:
                        del self.lines[index]
                        message_dict: dict[str, Any] = message
                        return message_dict
                await self.read_line()

    async def until(self, text: str) -> None:
        """Read until a line holding ``text`` has come."""
        with trio.fail_after(30):
            while not any(text in line for line in self.lines):
                await self.read_line()


@contextlib.asynccontextmanager
async def running_acp(work: Path, *flags: str, **env: str) -> AsyncIterator[Agent]:
    """``pitrio acp --model faux/faux-1 *flags`` in ``work``; at the end its stdin is closed
    and it must exit 0."""
    process = await trio.lowlevel.open_process(
        [PITRIO, "acp", "--model", "faux/faux-1", *flags],
        cwd=work,
        env=acp_env(work, **env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        yield Agent(process)
        assert process.stdin is not None
        await process.stdin.aclose()  # (again: closing twice is allowed)
        with trio.fail_after(30):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The project folder ``pitrio acp`` runs in (its agent dir beside it)."""
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def schema_problems(agent: Agent) -> list[tuple[str, list[str]]]:
    """The lines ``agent`` wrote that break ACP v1's schema, with why (the test is skipped
    without the SDK, which ships the schema)."""
    check = SchemaCheck(sdk_or_skip())
    methods = sent_methods(agent.sent)
    found = [(line[:300], check.errors(line, methods)) for line in agent.written]
    return [(line, why) for line, why in found if why]


def replies(agent: Agent) -> str:
    """The text of every ``agent_message_chunk`` ``agent`` wrote, joined."""
    updates = [json.loads(line)["params"]["update"] for line in agent.written if "/update" in line]
    chunks = [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    return "".join(chunk["content"]["text"] for chunk in chunks)
