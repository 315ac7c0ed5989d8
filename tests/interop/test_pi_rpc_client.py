"""pi 1.6.0's own ``RpcClient`` drives pi 1.6.0 and pitrio through every method it has.

``rpc_client_steps.mjs`` (run with the node 22 installed beside pi) loads the ``RpcClient`` of the
installed package (``dist/modes/rpc/rpc-client.js``) and takes one agent through ~50 steps:
``promptAndWait``, ``waitForIdle`` (which resolves on ``agent_settled``), tool turns, ``bash``,
``getEntries``/``getTree``, thinking levels and models, steering, follow-ups, ``clearQueue``,
``abort``, compaction, stats, naming, export, fork, clone, new and switched sessions. It runs
once against pi 1.6.0 and once against pitrio (``pitrio --mode rpc``, started through
``pitrio_shim.mjs`` because ``RpcClient`` always starts ``node CLI``), both at once, each in its
own sandbox (``pi_runner.Sandbox``) with its own mock LLM. Each step's result is normalised
(sandbox paths, the mock's port, ids, timestamps, durations) and pitrio's must equal pi's, step
by step: one test per step. pi itself must pass every step (else the script is wrong, not
pitrio).

``python -m tests.interop.test_pi_rpc_client`` prints the step table and the pass count.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_compare import Diff, Normaliser, deep
from tests.interop.pi_install import find_pi, pi_command
from tests.interop.pi_runner import MODEL, MockLLM, Run, Sandbox
from tests.interop.pi_steps import Scenario, text, tool
from tests.shared_dir import ROOT

HERE = Path(__file__).parent
SCRIPT = HERE / "rpc_client_steps.mjs"
SHIM = HERE / "pitrio_shim.mjs"
NODE, PI_CLI, SKIP_REASON = find_pi()
REASONER = {
    "id": "mock-reasoner",
    "name": "Mock Reasoner",
    "reasoning": True,
    "input": ["text"],
    "contextWindow": 128000,
    "maxTokens": 16384,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
}
# Little kept at a compaction, so that the short session has something to summarise.
SCENARIO = Scenario(
    "rpc_client",
    [],
    settings={"compaction": {"keepRecentTokens": 10}},
    extra_models=(REASONER,),
)
# One script for the whole run, chosen by the words of the last message (see the node script).
MOCK_SCRIPT: dict[str, Any] = {
    "default": text("ok"),
    "rules": [
        {"if": {"last_text_contains": "<conversation>"}, "then": text("summary of the session")},
        {
            "if": {"last_role": "user", "last_text_contains": "TOOLCALL"},
            "then": tool("bash", {"command": "echo tool-ran"}),
        },
        {
            "if": {"last_role": "user", "last_text_contains": "SLOWREPLY"},
            "then": text("one two three four", deltas=4, delay=0.4),
        },
        {
            # Aborted after its first delta: the next one is far off, so what was streamed
            # before the abort is always "one ".
            "if": {"last_role": "user", "last_text_contains": "SLOWABORT"},
            "then": text("one two", deltas=2, delay=3.0),
        },
    ],
}


def step_names() -> list[str]:
    """The steps of the node script, in order (read from its ``step("...")`` calls)."""
    return re.findall(r'await step\("([^"]+)"', SCRIPT.read_text())


def _descriptions(v: Any) -> Any:
    """``v`` with every ``description`` string replaced (tool and parameter wording)."""
    if isinstance(v, dict):
        return {
            k: "<wording>" if k == "description" and isinstance(x, str) else _descriptions(x)
            for k, x in v.items()
        }
    if isinstance(v, list):
        return [_descriptions(x) for x in v]
    return v


def wording(v: Any) -> Any:
    """``v`` with the prose of system messages replaced: each prompt section's text and each
    tool's descriptions are each agent's own wording (a documented difference); which sections
    and tools there are, in which order, with which parameters, is still compared."""
    if isinstance(v, dict):
        if v.get("role") == "system" and isinstance(v.get("sections"), dict):
            v = {
                **v,
                "sections": {k: "<wording>" for k in v["sections"]},
                **{k: _descriptions(v[k]) for k in ("toolsAdded",) if k in v},
            }
        return {k: wording(x) for k, x in v.items()}
    if isinstance(v, list):
        return [wording(x) for x in v]
    return v


def _js_length(text: str) -> int:
    """A string's length as JavaScript counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def system_estimate(message: dict[str, Any]) -> int:
    """pi 1.6.0's token estimate of a system message (``estimateTokens``: content, sections
    and the added tools' JSON, a quarter of the characters, rounded up)."""
    content = message.get("content", "")
    chars = _js_length(content) if isinstance(content, str) else 0
    if not isinstance(content, str):
        chars += sum(_js_length(block.get("text", "")) for block in content)
    chars += sum(_js_length(text) for text in (message.get("sections") or {}).values() if text)
    if message.get("toolsAdded"):
        tools = json.dumps(message["toolsAdded"], separators=(",", ":"), ensure_ascii=False)
        chars += _js_length(tools)
    return -(-chars // 4)


def split_estimate(steps: list[dict[str, Any]]) -> None:
    """A compaction's ``estimatedTokensAfter`` counts the context's system message, whose
    prompt is each agent's own wording (and names its sandbox): it becomes the estimate of
    the rest of the context, the system message's part taken out (measured on the context
    the next step lists), which must be the same for both."""
    for step, after in itertools.pairwise(steps):
        value = step.get("value")
        if not isinstance(value, dict) or "estimatedTokensAfter" not in value:
            continue
        listed = after.get("value") if after["name"].startswith("getMessages") else None
        assert isinstance(listed, list) and listed[0]["role"] == "system", step["name"]
        value["estimatedTokensAfter"] = {
            "withoutSystemMessage": value["estimatedTokensAfter"] - system_estimate(listed[0])
        }


def run_client(agent: str, base: Path) -> dict[str, Any]:
    """The node script's record of ``agent`` (``"pi"`` or ``"pitrio"``), normalised."""
    assert NODE is not None and PI_CLI is not None
    mock = MockLLM()
    try:
        mock.configure(MOCK_SCRIPT)
        sandbox = Sandbox(base, SCENARIO, mock)
        env = sandbox.env()
        # RpcClient starts `node`: the node 22 beside pi, first on the PATH.
        env["PATH"] = f"{NODE.parent}:{env['PATH']}"
        env["PITRIO_BIN"] = str(ROOT / ".venv" / "bin" / "pitrio")
        config = {
            "client": str(PI_CLI.parent / "modes" / "rpc" / "rpc-client.js"),
            "cli": pi_command(PI_CLI)[1] if agent == "pi" else str(SHIM),
            "cwd": str(sandbox.work),
            "env": env,
            "exportPath": str(sandbox.work / "export.html"),
            "output": str(sandbox.root / "steps.json"),
        }
        done = subprocess.run(
            [str(NODE), str(SCRIPT), json.dumps(config)],
            cwd=str(sandbox.work),
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        output = sandbox.root / "steps.json"
        if done.returncode != 0 or not output.is_file():
            raise AssertionError(f"{agent}: the node script failed: {done.stderr[-2000:]}")
        record: dict[str, Any] = json.loads(output.read_text())
        split_estimate(record["steps"])
        # Ids are numbered afresh in each step: a step that differs does not shift the next.
        run = Run(agent=agent, root=str(sandbox.root), port=mock.port)
        record["steps"] = [wording(Normaliser(run).value(s)) for s in record["steps"]]
        record["stderr"] = done.stderr
        return record
    finally:
        mock.close()


def run_both(base: Path) -> dict[str, dict[str, Any]]:
    """Both agents at once (two threads, each waiting on its own node process)."""
    results: dict[str, dict[str, Any]] = {}
    errors: list[BaseException] = []

    def one(agent: str) -> None:
        try:
            results[agent] = run_client(agent, base)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(a,)) for a in ("pi", "pitrio")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


BUILTIN_COMMANDS = {"llama", "mcp"}
"""The commands of pi 1.6.0's built-in extensions, which pitrio does not have: README's row
"pitrio has no built-in extension commands"."""


def without_builtin_commands(step: dict[str, Any]) -> dict[str, Any]:
    """pi's ``getCommands`` step without its built-in extensions' commands (checked to be
    exactly :data:`BUILTIN_COMMANDS`, so a new one shows)."""
    builtin = [c for c in step["value"] if c.get("sourceInfo", {}).get("source") == "builtin"]
    assert {c["name"] for c in builtin} == BUILTIN_COMMANDS, builtin
    return {**step, "value": [c for c in step["value"] if c not in builtin]}


def step_diffs(pi: dict[str, Any], pitrio: dict[str, Any]) -> list[Diff]:
    """The differences between pi's and pitrio's record of one step."""
    out: list[Diff] = []
    deep(pi, pitrio, "step", pi["name"], out)
    return out


def table(records: dict[str, dict[str, Any]]) -> tuple[list[str], int]:
    """One line per step (same / differs, and how), and how many steps are the same."""
    lines, same = [], 0
    for i, (a, b) in enumerate(
        zip(records["pi"]["steps"], records["pitrio"]["steps"], strict=True)
    ):
        diffs = step_diffs(a, b)
        same += not diffs
        status = "same   " if not diffs else "DIFFERS"
        lines.append(f"{i + 1:2d} {status} {a['name']}")
        lines.extend(f"      {d.path}  |  {d.detail}" for d in diffs[:6])
        if len(diffs) > 6:
            lines.append(f"      ... {len(diffs) - 6} more")
    return lines, same


@pytest.fixture(scope="module")
def records() -> Iterator[dict[str, dict[str, Any]]]:
    if PI_CLI is None:
        pytest.skip(SKIP_REASON)
    base = Path(tempfile.mkdtemp(prefix="pitrio-rpcclient-"))
    try:
        result = run_both(base)
        lines, same = table(result)
        total = len(result["pi"]["steps"])
        print(f"\npi 1.6.0 RpcClient: pitrio matches pi in {same} of {total} steps")
        print("\n".join(lines))
        yield result
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_script_ran_every_step(records: dict[str, dict[str, Any]]) -> None:
    names = step_names()
    assert len(names) >= 40
    for agent in ("pi", "pitrio"):
        assert [s["name"] for s in records[agent]["steps"]] == names, agent


def test_pi_passes_every_step(records: dict[str, dict[str, Any]]) -> None:
    # The reference run: a step pi 1.6.0 itself fails is a fault of the script.
    failed = [(s["name"], s["error"]) for s in records["pi"]["steps"] if not s["ok"]]
    assert not failed


def test_the_mock_answered_by_the_script(records: dict[str, dict[str, Any]]) -> None:
    # The tool turn really ran the tool and the slow replies really streamed.
    by_name = {s["name"]: s for s in records["pi"]["steps"]}
    tool_events = by_name["promptAndWait(tool call) events"]["value"]
    assert {"type": "tool_execution_end", "toolName": "bash"} in tool_events
    slow = by_name["slow prompt with a follow-up, waitForIdle"]["value"]["events"]
    assert sum(e["type"] == "agent_start" for e in slow) >= 1
    assert by_name["getState (fresh)"]["value"]["model"]["id"] == MODEL


@pytest.mark.parametrize("index", range(len(step_names())), ids=step_names())
def test_step(index: int, records: dict[str, dict[str, Any]]) -> None:
    pi, pitrio = records["pi"]["steps"][index], records["pitrio"]["steps"][index]
    if pi["name"] == "getCommands":
        pi = without_builtin_commands(pi)
    diffs = step_diffs(pi, pitrio)
    assert not diffs, "\n".join(f"{d.path}  |  {d.detail}" for d in diffs)


def main() -> int:
    """Run both agents and print the step table."""
    if PI_CLI is None:
        print(SKIP_REASON)
        return 1
    base = Path(tempfile.mkdtemp(prefix="pitrio-rpcclient-"))
    try:
        result = run_both(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    lines, same = table(result)
    print("\n".join(lines))
    print(f"pitrio matches pi 1.6.0 in {same} of {len(result['pi']['steps'])} RpcClient steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
