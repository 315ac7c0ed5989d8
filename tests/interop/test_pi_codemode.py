"""``codemode`` against real pi 1.6.0, with ``mcp-server-time`` of the default exposure.

Two sandboxes, each with the same ``mcp.json`` (the time server without ``exposure``: 1.6.0's
``codemode``; a ``direct`` entry for no tool makes 1.6.0's first prompt wait for the server).
In one, pi runs first and pitrio continues its session (``-c``); in the other, pitrio first,
pi continues. The first run's model calls ``codemode`` with a script that awaits the time
server and ``read`` together and stores a value; the second run's script loads it and runs a
failing ``bash`` command, which resolves to bash's structured result (1.6.0's ``outputSchema``)
in both agents. Both
agents must: declare ``codemode`` and no MCP tool, list the server as ``(codemode)``, give
the script the same values (the results' text after the wall time is the same), record the
same nested calls (``nestedCalls`` on the result entry, ``details.calls``), and let the other
agent's session continue with the stored value.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_oneshot import pi_argv, pitrio_argv
from tests.interop.pi_steps import text, tool
from tests.interop.test_pi_cli_flags import SETTINGS
from tests.interop.test_pi_mcp import time_server
from tests.interop.test_pi_mcp_session import run_in
from tests.interop.test_pi_tool_search import names, section_lines

TIME = time_server(toolExposure={"no_such_tool": "direct"})
del TIME["exposure"]
FIRST_SCRIPT = (
    "const [a, b] = await Promise.all([\n"
    '  tools.mcp__time__get_current_time({timezone: "UTC"}),\n'
    '  tools.read({path: "hello.txt"}),\n'
    "]);\n"
    "const zone = JSON.parse(a.content[0].text).timezone;\n"
    'store("zone", zone);\n'
    'console.log("two calls");\n'
    "return {zone, b, failed: a.isError === true}"
)
SECOND_SCRIPT = (
    'text("stored: " + load("zone"));\n'
    # bash resolves to its structured result (1.6.0's outputSchema), a failing command too
    'const sh = await tools.bash({command: "echo hi; exit 2"});\n'
    "text([Object.keys(sh).sort(), sh.output, sh.exit_code, typeof sh.wall_time_seconds]);\n"
    'return ALL_TOOLS.some((t) => t.name === "read")'
)
RESULT_HEAD = re.compile(r"^Script completed\nWall time \d+\.\d seconds\nOutput:\n")


def _run(argv: list[str], root: Path, args: list[str], queue: list[dict[str, Any]]) -> Any:
    done, requests = run_in(root, argv, args, queue)
    return done.returncode, done.stderr, requests


def sandbox(first: str, base: Path) -> dict[str, Any]:
    """``first`` writes the session, the other agent continues it."""
    argvs = {"pi": pi_argv(), "pitrio": pitrio_argv()}
    second = "pitrio" if first == "pi" else "pi"
    root = Path(tempfile.mkdtemp(prefix=f"{first}-first-", dir=base))
    (root / "agent").mkdir()
    (root / "work").mkdir()
    (root / "work" / "hello.txt").write_text("hello there")
    (root / "agent" / "settings.json").write_text(json.dumps(SETTINGS))
    (root / "agent" / "mcp.json").write_text(json.dumps({"mcpServers": {"time": TIME}}))
    one = [tool("codemode", {"code": FIRST_SCRIPT}), text("done")]
    two = [tool("codemode", {"code": SECOND_SCRIPT}, id="call_fixed2"), text("done again")]
    runs = {
        "first": _run(argvs[first] or [], root, ["-p", "what time is it"], one),
        "second": _run(argvs[second] or [], root, ["-c", "-p", "again"], two),
    }
    files = sorted((root / "agent" / "sessions").rglob("*.jsonl"))
    entries = [json.loads(line) for line in files[-1].read_text().splitlines()] if files else []
    return {**runs, "entries": entries}


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, dict[str, Any]]]:
    if pi_argv() is None:
        pytest.skip("pi 1.6.0 is not installed")
    base = Path(tempfile.mkdtemp(prefix="pitrio-codemode-"))
    try:
        with ThreadPoolExecutor(2) as pool:
            done = dict(
                zip(
                    ("pi", "pitrio"),
                    pool.map(lambda first: sandbox(first, base), ("pi", "pitrio")),
                    strict=True,
                )
            )
        yield done
    finally:
        shutil.rmtree(base, ignore_errors=True)


def tool_result_texts(request: dict[str, Any]) -> list[str]:
    """The text of each tool result the request sends (Anthropic Messages)."""
    found: list[str] = []
    for message in request.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") != "tool_result":
                continue
            parts = block.get("content")
            if isinstance(parts, str):
                found.append(parts)
            else:
                found.append("".join(p.get("text", "") for p in parts if p.get("type") == "text"))
    return found


def result_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["message"]
        for e in entries
        if e.get("type") == "message" and e["message"].get("role") == "toolResult"
    ]


def test_every_run_succeeded(runs: dict[str, dict[str, Any]]) -> None:
    for first, found in runs.items():
        for run in ("first", "second"):
            code, stderr, requests = found[run]
            assert code == 0 and len(requests) == 2, f"{first}-first {run}: {stderr[-800:]}"


def test_codemode_is_declared_for_the_server_and_its_tools_are_not(
    runs: dict[str, dict[str, Any]],
) -> None:
    first = {agent: found["first"][2][0] for agent, found in runs.items()}
    declared = {agent: sorted(names(request)) for agent, request in first.items()}
    assert declared["pi"] == declared["pitrio"], declared
    assert "codemode" in declared["pi"]
    assert not any(name.startswith("mcp__") for name in declared["pi"])
    sections = {agent: section_lines(request)[1:] for agent, request in first.items()}
    assert sections["pi"] == sections["pitrio"] == ["- mcp__time (codemode)"]


def test_the_script_gets_the_same_values_and_output(runs: dict[str, dict[str, Any]]) -> None:
    outputs = {}
    for agent, found in runs.items():
        (result,) = tool_result_texts(found["first"][2][1])
        assert RESULT_HEAD.match(result), (agent, result)
        outputs[agent] = RESULT_HEAD.sub("", result)
    assert outputs["pi"] == outputs["pitrio"], outputs
    assert '"zone":"UTC"' in outputs["pi"] and '"b":"hello there"' in outputs["pi"]


def test_the_other_agent_continues_with_the_stored_value(
    runs: dict[str, dict[str, Any]],
) -> None:
    outputs = {}
    for first, found in runs.items():
        texts = tool_result_texts(found["second"][2][1])
        assert len(texts) == 2, (first, texts)  # the first run's result is in the history
        outputs[first] = RESULT_HEAD.sub("", texts[-1])
    assert outputs["pi"] == outputs["pitrio"], outputs
    assert outputs["pi"].endswith(
        "==> text 1/3 <==\nstored: UTC\n==> text 2/3 <==\n"
        '[["exit_code","output","truncated","wall_time_seconds"],"hi\\n",2,"number"]\n'
        "==> text 3/3 <==\ntrue"
    )


def test_the_session_records_the_same_nested_calls(runs: dict[str, dict[str, Any]]) -> None:
    shapes = {}
    for first, found in runs.items():
        results = result_entries(found["entries"])
        assert len(results) == 2, first
        shape = []
        for message in results:
            nested = message.get("nestedCalls") or {"calls": [], "complete": True}
            shape.append(
                {
                    "nested": sorted((c["name"], c["status"]) for c in nested["calls"]),
                    "complete": nested["complete"],
                    "calls": sorted((c["name"], c["status"]) for c in message["details"]["calls"]),
                    "ids": sorted(c["id"] for c in nested["calls"]),
                }
            )
        shapes[first] = shape
    # the first run's by the first agent, the second run's by the other
    assert shapes["pi"][0] == shapes["pitrio"][0], shapes
    assert shapes["pi"][0]["nested"] == [("mcp__time__get_current_time", "ok"), ("read", "ok")]
    assert shapes["pi"][0]["ids"] == ["call_fixed1/1", "call_fixed1/2"]
    assert (
        shapes["pi"][1]
        == shapes["pitrio"][1]
        == {
            "nested": [("bash", "error")],
            "complete": True,
            "calls": [("bash", "error")],
            "ids": ["call_fixed2/1"],
        }
    )
    stores = {
        first: [e["data"] for e in found["entries"] if e.get("customType") == "codemode-store"]
        for first, found in runs.items()
    }
    assert stores["pi"] == stores["pitrio"] == [{"set": {"zone": "UTC"}, "delete": []}]
