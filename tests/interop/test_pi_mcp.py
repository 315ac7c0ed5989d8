"""MCP as pi 1.6.0 has it, against real pi 1.6.0: with the same ``mcp.json`` (two real stdio
servers: ``mcp-server-time`` from PyPI and :mod:`tests.interop.mcp_names_server`), both agents'
first LLM request declares the same tools: 1.6.0's ``mcp__<server>__<tool>`` names (rewritten
characters, hash suffixes on collisions), the servers' descriptions and input schemas, the
resource tools, ``toolExposure`` hiding, ``--tools`` / ``--exclude-tools`` patterns with
``mcp__``, ``--no-mcp``, and a trusted project's override entry (an untrusted project's file is
not read).

Tools of different servers are compared per server: 1.6.0 registers a server's tools when it
connects, so which server comes first is a race; within a server the order is the listing's.
Resource tools are declared with their server in 1.6.0's, and by pitrio after their server's
tools; their descriptions are each agent's own words, so only their names and parameter names
are compared.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.actors.mcp.support import forked
from tests.interop.pi_oneshot import OneShot, cleanup, pi_argv, pi_outcomes, pitrio_argv, run_print
from tests.interop.test_pi_cli_flags import MODELS, SETTINGS
from tests.shared_dir import ROOT

PYTHON = str(ROOT / ".venv" / "bin" / "python")
NAMES_SERVER = str(Path(__file__).with_name("mcp_names_server.py"))
RESOURCE_TOOLS = ("list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource")
BUILTINS = ["read", "bash", "edit", "write"]
NAMES_TOOLS = [
    "mcp__names__get_thing",
    "mcp__names__a_b_3c93d5f5",  # "a-b" and "a.b" both become mcp__names__a_b: both hashed
    "mcp__names__a_b_0b3cd863",
    "mcp__names__titled",
]
TIME_TOOLS = ["mcp__time__get_current_time", "mcp__time__convert_time"]


def names_server(**extra: Any) -> dict[str, Any]:
    """The names server's entry, ``direct`` and with its ``secret_*`` tools hidden."""
    return {
        "command": PYTHON,
        "args": forked(NAMES_SERVER),
        "exposure": "direct",
        "toolExposure": {"secret_*": "hidden", "get-thing": "direct"},
        **extra,
    }


def time_server(**extra: Any) -> dict[str, Any]:
    """``mcp-server-time``'s entry (offline, UTC), ``direct``."""
    args = forked("-m", "mcp_server_time", "--local-timezone", "UTC")
    return {"command": PYTHON, "args": args, "exposure": "direct", **extra}


# mcp-server-time offers resources too (an empty list).
BOTH = {"names": names_server(), "time": time_server(description="Clock and time zones")}


def declared(shot: OneShot) -> dict[str, Any] | None:
    """The first request's tools: the other tools' names in order, each MCP server's tool
    names in order, and the resource tools' names (``None``: no request)."""
    if not shot.requests:
        return None
    names = [tool["name"] for tool in shot.requests[0].get("tools", [])]
    servers: dict[str, list[str]] = {}
    for name in names:
        if name.startswith("mcp__"):
            servers.setdefault(name.split("__")[1], []).append(name)
    return {
        "other": [n for n in names if not n.startswith("mcp__") and n not in RESOURCE_TOOLS],
        "servers": servers,
        "resources": [n for n in names if n in RESOURCE_TOOLS],
    }


def declarations(shot: OneShot) -> dict[str, Any] | None:
    """The MCP tools' declarations as sent (resource tools: their parameter names)."""
    if not shot.requests:
        return None
    found: dict[str, Any] = {}
    for tool in shot.requests[0].get("tools", []):
        if tool["name"].startswith("mcp__"):
            found[tool["name"]] = {k: tool.get(k) for k in ("description", "input_schema")}
        elif tool["name"] in RESOURCE_TOOLS:
            schema = tool.get("input_schema", {})
            found[tool["name"]] = (sorted(schema.get("properties", {})), schema.get("required"))
    return found


@dataclass(frozen=True)
class Case:
    """An ``mcp.json`` (and a project's), flags, and the probe both agents must agree on
    (``expect``: its value; ``None``: whatever pi's is, which must not be empty)."""

    name: str
    servers: dict[str, Any]
    probe: Callable[[OneShot], Any]
    expect: Any = None
    args: list[str] = field(default_factory=list)
    project: dict[str, Any] | None = None


def expected(other: list[str], servers: dict[str, list[str]], resources: bool) -> dict[str, Any]:
    """What :func:`declared` gives for these tools."""
    return {
        "other": other,
        "servers": servers,
        "resources": list(RESOURCE_TOOLS) if resources else [],
    }


CASES = [
    Case(
        "direct servers",
        BOTH,
        declared,
        expected(BUILTINS, {"names": NAMES_TOOLS, "time": TIME_TOOLS}, resources=True),
    ),
    Case("declarations", BOTH, declarations),
    Case(
        "--tools with an mcp__ pattern keeps only its MCP tools",
        BOTH,
        declared,
        expected(["read"], {"names": NAMES_TOOLS}, resources=False),
        args=["--tools", "read,mcp__names__*"],
    ),
    Case(
        "--tools without mcp__ declares no direct MCP tool it does not match",
        BOTH,
        declared,
        expected(["read", "bash"], {"time": ["mcp__time__convert_time"]}, resources=False),
        args=["--tools", "read,*conv*,bash"],
    ),
    Case(
        "--exclude-tools with an mcp__ pattern",
        BOTH,
        declared,
        expected(BUILTINS, {"names": NAMES_TOOLS}, resources=True),
        args=["--exclude-tools", "mcp__time__*"],
    ),
    Case("--no-mcp", BOTH, declared, expected(BUILTINS, {}, resources=False), args=["--no-mcp"]),
    Case(
        "a trusted project's override disables a server",
        BOTH,
        declared,
        expected(BUILTINS, {"time": TIME_TOOLS}, resources=True),
        args=["--approve"],
        project={"names": {"enabled": False}},
    ),
    Case(
        "an untrusted project's mcp.json is not read",
        {"time": time_server()},
        declared,
        expected(BUILTINS, {"time": TIME_TOOLS}, resources=True),
        project={"names": names_server()},
    ),
]


@pytest.fixture(scope="module")
def outcomes() -> Iterator[dict[tuple[str, str], tuple[OneShot, Any]]]:
    yield from pi_outcomes(CASES, run_case, "pitrio-mcp-")


def run_case(case: Case, agent: str, base: Path) -> tuple[OneShot, Any]:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    files = {
        "models.json": MODELS,
        "settings.json": SETTINGS,
        "mcp.json": {"mcpServers": case.servers},
    }
    work = (
        {} if case.project is None else {".pi/mcp.json": json.dumps({"mcpServers": case.project})}
    )
    shot = run_print(
        agent,
        argv,
        files,
        args=[*case.args, "-p", "hi"],
        base=base,
        work_files=work,
        # pi's layout: pitrio then reads the project's .pi dir too.
        agent_dir_name=".pi/agent",
    )
    try:
        return shot, case.probe(shot)
    finally:
        cleanup(shot)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_mcp_tools_are_declared_as_pi_declares_them(
    case: Case, outcomes: dict[tuple[str, str], tuple[OneShot, Any]]
) -> None:
    (pi, pi_value), (pitrio, pitrio_value) = (
        outcomes[(case.name, "pi")],
        outcomes[(case.name, "pitrio")],
    )
    for shot in (pi, pitrio):
        assert shot.exit_code == 0, f"{shot.agent}: exit {shot.exit_code}, {shot.stderr[-400:]!r}"
    if case.expect is not None:
        assert pi_value == case.expect, pi.stderr[-400:]
    else:
        assert pi_value, pi.stderr[-400:]
    assert pitrio_value == pi_value, pitrio.stderr[-400:]
