"""The ``mcp_servers`` prompt section against pi 1.6.0's own renderer (its
``renderServersSection``, run by node on the same servers): the same servers are listed, in the
same order, with the same ``(codemode)`` / ``(tool_search)`` and the same summaries. The first
line is each agent's own words; it names the same ways of reaching the tools.

pitrio's sessions list only servers with ``deferred`` tools (it declares ``codemode`` tools
directly until it has a codemode tool: README), so the renderer is checked here with 1.6.0's
reach, as a later ``codemode`` will use it (test_pi_tool_search compares a session's section).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from pitrio.actors.mcp.naming import Exposure
from pitrio.actors.mcp.prompt import ListedServer, render_servers_section
from tests.interop.pi_install import find_pi

NODE, CLI, WHY = find_pi()
pytestmark = pytest.mark.skipif(CLI is None, reason=WHY)

SCRIPT = """
import {renderServersSection} from "%s";
const input = JSON.parse(process.argv[1]);
process.stdout.write(JSON.stringify(input.map((servers) => renderServersSection(servers) ?? null)));
"""

LONG = "A long description " + "x" * 400
CASES: list[list[dict[str, Any]]] = [
    [{"name": "docs", "config": {"description": "Search the docs\nsecond line"}}],
    [
        {"name": "b-x", "config": {}, "instructions": "  \nFirst line of instructions\nmore"},
        {"name": "A", "config": {"exposure": "deferred"}},
        {"name": "a_b", "config": {"exposure": "direct"}},
        {"name": "_z", "config": {"exposure": "direct", "toolExposure": {"x": "deferred"}}},
        {"name": "9", "config": {"exposure": "hidden"}},
        {"name": "off", "config": {"enabled": False}},
        {"name": "long", "config": {"exposure": "deferred", "description": LONG}},
        {"name": "emoji", "config": {"description": "\U0001f600" * 300}},
    ],
    [{"name": "d", "config": {"exposure": "direct"}}],
]


def pis_sections() -> list[str | None]:
    assert NODE is not None and CLI is not None
    module = CLI.parent / "extensions" / "mcp" / "index.js"
    servers = [
        [
            {
                "entry": {"name": s["name"], "config": s["config"]},
                **(
                    {"connection": {"instructions": s["instructions"]}}
                    if "instructions" in s
                    else {}
                ),
            }
            for s in case
        ]
        for case in CASES
    ]
    done = subprocess.run(
        [str(NODE), "--input-type=module", "-e", SCRIPT % module.as_uri(), json.dumps(servers)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def listed(server: dict[str, Any]) -> ListedServer:
    config = server["config"]
    return ListedServer(
        name=server["name"],
        exposure=config.get("exposure"),
        tool_exposures=tuple(config.get("toolExposure", {}).values()),
        description=config.get("description"),
        instructions=server.get("instructions"),
        enabled=config.get("enabled", True),
    )


def as_pi(exposure: Exposure) -> Exposure:
    return exposure


def test_the_servers_lines_are_pis() -> None:
    for case, pis in zip(CASES, pis_sections(), strict=True):
        ours = render_servers_section([listed(s) for s in case], as_pi)
        if pis is None:
            assert ours is None
            continue
        assert ours is not None
        assert ours.splitlines()[1:] == pis.splitlines()[1:]
        for way in ("codemode", "tool_search"):
            assert (f"`{way}`" in ours.splitlines()[0]) == (f"`{way}`" in pis.splitlines()[0])
