"""pi 0.73.1's recorded RPC transcripts re-anchored on pi 1.6.0.

The transcripts in shared/fixtures/transcripts were recorded with pi 0.73.1 (its faux-provider
extension is not kept, so they cannot be recorded again with pi 1.6.0). What pi 1.6.0 writes
for the same input differs from them in known ways, each checked against pi 1.6.0's own
recordings (shared/fixtures/pi16, ``pi160*.rpc.jsonl``) and docs (``docs/rpc.md``,
``docs/rpc-commands.md``, ``docs/json.md``):

* a ``message_update`` is ``{type, usage, assistantMessageEvent}`` (no ``partial``; a
  ``toolcall_start`` names the call's ``id`` and ``toolName``) and a streamed assistant message
  starts with ``stopReason: "pending"`` (:func:`as_pi_16`);
* a session starts with a ``system`` message: the first run of a session emits its
  ``message_start``/``message_end`` right after the first ``turn_start``, that run's
  ``agent_end.messages`` begins with it, and from then on ``get_messages`` lists it first,
  ``get_state.messageCount`` and ``get_session_stats.totalMessages`` count it. A fork or a clone
  keeps it (it is on the copied path), a new session has none until its first run, a switch
  finds the one the other session had;
  A session's bash records made before its first run come before the system message (pi
  1.6.0 appends it when the first run starts);
* ``get_session_stats`` counts every message entry of the session (``getSessionStats`` in
  ``dist/core/agent-session.js``), 0.73.1 the context's messages: ``totalMessages`` is the
  user, assistant and tool-result messages, plus the system message and the bash records;
* ``prompt`` answers ``data: {"disposition": "started"}`` (``"queued"`` with a
  ``streamingBehavior``), ``steer`` and ``follow_up`` answer ``{"disposition": "queued"}``;
* a compaction result carries ``estimatedTokensAfter`` and the summary request's ``usage``
  after ``tokensBefore`` (``compact`` in ``dist/core/agent-session.js``); a manual compaction of
  a session with no messages fails with "Nothing to compact (session too small)" (0.73.1
  summarised nothing), so its ``compaction_end`` has no result and an ``errorMessage``, the
  ``compact`` response is that error, and the summary 0.73.1 added is not counted;
* a model switch keeps the session's thinking level (clamped to the model: ``off`` without
  reasoning, ``xhigh`` becomes ``high``): pi 1.6.0 takes ``defaultThinkingLevel`` only when
  it is set (``_getThinkingLevelForModelSwitch``), 0.73.1 fell back to ``medium``. So the
  ``thinking_level_changed`` events and ``cycle_thinking_level`` answers are pi 1.6.0's
  (``setThinkingLevel``/``cycleThinkingLevel``: the event only on a change, before the answer;
  the cycle goes off, minimal, low, medium, high).

The system message put in is pi 1.6.0's own (its first in ``pi160.rpc.jsonl``); its prose
(prompt sections, tool descriptions) is each agent's own wording, a documented difference, so
the comparison keeps only which sections and tools there are (:func:`without_wording`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import orjson

from tests.shared_dir import FIXTURES

PI16 = FIXTURES / "pi16"


def as_pi_16(line: Mapping[str, Any]) -> Mapping[str, Any]:
    """A pi 0.73.1 transcript line in pi 1.6.0's form where only the form changed: a
    ``message_update`` is ``{type, usage, assistantMessageEvent}`` without the partial (a
    ``toolcall_start`` with the call's ``id`` and ``toolName``), and a streamed assistant
    message starts with ``stopReason: "pending"``."""
    kind = line.get("type")
    if kind == "message_update":
        event = dict(line.get("assistantMessageEvent") or {})
        partial = event.pop("partial", None) or {}
        if event.get("type") == "toolcall_start":
            blocks = partial.get("content") or []
            index = event.get("contentIndex")
            if isinstance(index, int) and 0 <= index < len(blocks):
                event["id"] = blocks[index].get("id")
                event["toolName"] = blocks[index].get("name")
        return {"type": kind, "usage": partial.get("usage"), "assistantMessageEvent": event}
    message = line.get("message")
    if kind == "message_start" and isinstance(message, dict) and message.get("role") == "assistant":
        return {**line, "message": {**message, "stopReason": "pending"}}
    return line


@cache
def pi16_system_message() -> dict[str, Any]:
    """The system message pi 1.6.0 starts a session with (default tools, no project files)."""
    for raw in (PI16 / "pi160.rpc.jsonl").read_bytes().splitlines():
        record = orjson.loads(raw)
        msg = record["msg"]
        started = isinstance(msg, dict) and msg.get("type") == "message_start"
        if record["dir"] == "recv" and started and msg["message"]["role"] == "system":
            return dict(msg["message"])
    raise AssertionError("pi160.rpc.jsonl has no system message")


def _descriptions(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: "<wording>" if k == "description" and isinstance(v, str) else _descriptions(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_descriptions(item) for item in value]
    return value


def without_wording(message: Mapping[str, Any]) -> dict[str, Any]:
    """A system message with its prose replaced: which sections and tools (with which
    parameters) it has is kept."""
    out = dict(message)
    if isinstance(out.get("sections"), dict):
        out["sections"] = {k: "<wording>" for k in out["sections"]}
    for key in ("toolsAdded", "toolsRemoved"):
        if key in out:
            out[key] = _descriptions(out[key])
    return out


def _inputs_by_id(inputs: Sequence[bytes]) -> dict[str, dict[str, Any]]:
    by_id: dict[str, dict[str, Any]] = {}
    for raw in inputs:
        try:
            command = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue  # the malformed lines some transcripts send on purpose
        if isinstance(command, dict) and isinstance(command.get("id"), str):
            by_id[command["id"]] = command
    return by_id


TOO_SMALL = "Nothing to compact (session too small)"
NOTHING_SUMMARISED = (
    "## Goal\nCompaction summary (scripted): 0 user, 0 assistant, 0 tool-call lines."
)
LEVELS = ("off", "minimal", "low", "medium", "high")
"""The thinking levels of a reasoning model without ``xhigh`` (the faux models')."""


class _Thinking:
    """The session's thinking level and whether its model reasons, as pi 1.6.0 keeps them."""

    def __init__(self) -> None:
        self.level = "off"
        self.reasoning = False

    def clamp(self, level: str) -> str:
        if not self.reasoning:
            return "off"
        return level if level in LEVELS else "high"

    def command(self, kind: str, command: Mapping[str, Any], data: Any) -> tuple[list[str], Any]:
        """The levels announced before the answer to ``command``, and the answer's data."""
        before = self.level
        if kind in ("set_model", "cycle_model") and isinstance(data, dict):
            model = data.get("model", data) if kind == "cycle_model" else data
            self.reasoning = bool(model.get("reasoning"))
            self.level = self.clamp(self.level)
            if kind == "cycle_model":
                data = {**data, "thinkingLevel": self.level}
        elif kind == "set_thinking_level":
            self.level = self.clamp(str(command.get("level")))
        elif kind == "cycle_thinking_level":
            if not self.reasoning:
                return [], None
            self.level = LEVELS[(LEVELS.index(self.level) + 1) % len(LEVELS)]
            data = {"level": self.level}
        return ([self.level] if self.level != before else []), data


class _Session:
    """Which sessions hold a system message (and what else), as pi 1.6.0's output goes on."""

    def __init__(self) -> None:
        self.has_system = False
        self.run_began_it = False
        self.by_file: dict[str, bool] = {}
        self.bash_records = 0  # bash records of the session
        self.before_system = 0  # ... of them made before its system message
        self.uncounted = 0  # messages 0.73.1 counted that pi 1.6.0 never made
        self.compacting_nothing = False
        self.thinking = _Thinking()

    def new(self) -> None:
        self.has_system = False
        self.bash_records = self.before_system = self.uncounted = 0


def _with_estimate(result: dict[str, Any]) -> dict[str, Any]:
    """A compaction result with pi 1.6.0's two added fields (figures are placeholders)."""
    out: dict[str, Any] = {}
    for key, value in result.items():
        out[key] = value
        if key == "tokensBefore":
            out["estimatedTokensAfter"] = 0
            out["usage"] = {}
    return out


def _response(line: dict[str, Any], command: Mapping[str, Any], state: _Session) -> dict[str, Any]:
    kind, ok = line.get("command"), line.get("success") is True
    data = line.get("data")
    if ok and kind == "prompt" and data is None:
        queued = "streamingBehavior" in command
        line["data"] = {"disposition": "queued" if queued else "started"}
    elif ok and kind in ("steer", "follow_up") and data is None:
        line["data"] = {"disposition": "queued"}
    elif ok and kind == "new_session" and not (data or {}).get("cancelled"):
        state.new()
    elif ok and kind == "switch_session" and not (data or {}).get("cancelled"):
        state.new()
        state.has_system = state.by_file.get(str(command.get("sessionPath")), True)
    elif ok and kind == "bash":
        state.bash_records += 1
        state.before_system += not state.has_system
    elif kind == "compact" and state.compacting_nothing:
        state.compacting_nothing = False
        return {k: v for k, v in line.items() if k != "data"} | {
            "success": False,
            "error": TOO_SMALL,
        }
    elif ok and kind == "compact" and isinstance(data, dict):
        line["data"] = _with_estimate(data)
    elif ok and kind == "get_session_stats" and isinstance(data, dict):
        counted = data["userMessages"] + data["assistantMessages"] + data["toolResults"]
        total = counted + state.has_system + state.bash_records
        line["data"] = {**data, "totalMessages": total}
    elif ok and isinstance(data, dict):
        system = 1 if state.has_system else 0
        if kind == "get_state":
            count = data["messageCount"] + system - state.uncounted
            line["data"] = {**data, "messageCount": count}
        elif kind == "get_messages" and system:
            messages = list(data["messages"])
            messages.insert(min(state.before_system, len(messages)), pi16_system_message())
            line["data"] = {**data, "messages": messages}
    if ok and kind == "get_state" and isinstance(data, dict):
        state.by_file[str(data.get("sessionFile"))] = state.has_system
        state.thinking.level = data["thinkingLevel"]
        state.thinking.reasoning = bool(data["model"]["reasoning"])
    return line


THINKING_COMMANDS = frozenset(
    {"set_model", "cycle_model", "set_thinking_level", "cycle_thinking_level"}
)


def re_anchor(
    output: Sequence[Mapping[str, Any]], inputs: Sequence[bytes]
) -> tuple[list[dict[str, Any]], list[int]]:
    """pi 0.73.1's ``output`` as pi 1.6.0 writes it for the same ``inputs``, and for each
    0.73.1 line count (0..len) the 1.6.0 line count it became (for the recorder's waits)."""
    commands = _inputs_by_id(inputs)
    state = _Session()
    lines: list[dict[str, Any]] = []
    positions = [0]
    for original in output:
        line = dict(as_pi_16(original))
        kind = line.get("type")
        if kind == "thinking_level_changed":
            positions.append(len(lines))
            continue  # 0.73.1's; pi 1.6.0's are put before the answers below
        if kind == "response" and line.get("command") in THINKING_COMMANDS and line["success"]:
            command = commands.get(str(line.get("id")), {})
            levels, data = state.thinking.command(line["command"], command, line.get("data"))
            lines.extend({"type": "thinking_level_changed", "level": lvl} for lvl in levels)
            if data is not None or "data" in line:
                line["data"] = data
        if kind == "response":
            line = _response(line, commands.get(str(line.get("id")), {}), state)
        elif kind == "agent_end" and state.run_began_it:
            line["messages"] = [pi16_system_message(), *line["messages"]]
            state.run_began_it = False
        elif kind == "compaction_end" and isinstance(line.get("result"), dict):
            # pi 1.6.0 refuses a compaction with nothing to summarise (prepareCompaction: no
            # message before the cut, system messages not counted, no split turn), where
            # 0.73.1 wrote a summary of nothing: its scripted summary counts 0/0/0.
            summary = str(line["result"].get("summary", ""))
            empty = not state.bash_records and summary.startswith(NOTHING_SUMMARISED)
            if line.get("reason") == "manual" and empty:
                state.compacting_nothing = True
                state.uncounted += 1  # the summary message 0.73.1 added
                line = {k: v for k, v in line.items() if k != "result"}
                line["errorMessage"] = f"Compaction failed: {TOO_SMALL}"
            else:
                line["result"] = _with_estimate(line["result"])
        lines.append(line)
        if kind == "turn_start" and not state.has_system:
            system = pi16_system_message()
            lines.append({"type": "message_start", "message": system})
            lines.append({"type": "message_end", "message": system})
            state.has_system = state.run_began_it = True
        positions.append(len(lines))
    return lines, positions
