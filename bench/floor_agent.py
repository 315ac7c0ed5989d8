"""The least work a conforming RPC agent does in a turn, written straight: a lower bound.

Not pitrio and not an agent anyone should use. It is a measuring stick for the per-turn
targets (issue 7): one thread, blocking I/O, no actors, no trio, no validation, no retries,
no compaction, every shortcut a single-purpose program can take. What it keeps is the work
the protocol and the design require of every turn, done the cheapest way Python offers:

- reading the prompt line and answering it;
- the events pitrio writes, in pitrio's order, with ``message_update`` in the full form
  (the partial message twice, serialised once), ``entry_appended`` and ``agent_settled``;
- a Chat Completions request carrying the whole transcript (each message encoded once and
  kept), over one kept-alive connection, and the streamed reply parsed chunk by chunk;
- each message appended to a session file and fsynced before its ``entry_appended``
  (the user message's sync overlapping the model request, as pitrio's does);
- the ``bash`` and ``read`` tools, for the tool-turn workloads.

The harness (``../shared/tools/bench_rpc.py``) and ``bench/ab_turns.py`` drive it like any
agent: ``--agent-cmd "{python} bench/floor_agent.py"``. Its time against pi's says how far
below pi any Python agent doing this work can go on this machine; pitrio's time against its
says what pitrio's structure (actors, channels, trio) costs on top. Not part of the tests.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import orjson

USAGE_ZERO = {
    "input": 0,
    "output": 0,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 0,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


def now_ms() -> int:
    """Milliseconds since the epoch, as message timestamps are."""
    return int(time.time() * 1000)


def iso_now() -> str:
    """An entry timestamp."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Output:
    """Protocol lines, gathered and written at once before anything that may block."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def event(self, value: Any) -> None:
        """Queue one line."""
        self.lines.append(orjson.dumps(value, option=orjson.OPT_APPEND_NEWLINE))

    def raw(self, line: bytes) -> None:
        """Queue one line already encoded (with its newline)."""
        self.lines.append(line)

    def flush(self) -> None:
        """Write what is queued."""
        if self.lines:
            data = b"".join(self.lines)
            self.lines.clear()
            view = memoryview(data)
            while view:
                view = view[os.write(1, view) :]


class SessionFile:
    """pi's v3 JSONL, appended line by line, each synced on demand."""

    def __init__(self, path: Path, cwd: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not path.exists()
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.parent: str | None = None
        if fresh:
            header = {
                "type": "session",
                "version": 3,
                "id": str(uuid.uuid4()),
                "timestamp": iso_now(),
                "cwd": cwd,
            }
            os.write(self.fd, orjson.dumps(header, option=orjson.OPT_APPEND_NEWLINE))

    def append(self, message: dict[str, Any]) -> dict[str, Any]:
        """Write a message entry (not yet synced); returns the entry."""
        entry_id = uuid.uuid4().hex[:8]
        entry = {
            "type": "message",
            "id": entry_id,
            "parentId": self.parent,
            "timestamp": iso_now(),
            "message": message,
        }
        self.parent = entry_id
        os.write(self.fd, orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE))
        return entry

    def sync(self) -> None:
        """Make what was written durable."""
        os.fsync(self.fd)


def to_chat(message: dict[str, Any]) -> bytes:
    """One transcript message as a Chat Completions message, encoded."""
    role = message["role"]
    if role == "user":
        text = "".join(c["text"] for c in message["content"] if c["type"] == "text")
        return orjson.dumps({"role": "user", "content": text})
    if role == "toolResult":
        text = "".join(c["text"] for c in message["content"] if c["type"] == "text")
        return orjson.dumps(
            {"role": "tool", "tool_call_id": message["toolCallId"], "content": text}
        )
    text = "".join(c["text"] for c in message["content"] if c["type"] == "text")
    item: dict[str, Any] = {"role": "assistant", "content": text or None}
    calls = [c for c in message["content"] if c["type"] == "toolCall"]
    if calls:
        item["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": orjson.dumps(c["arguments"]).decode()},
            }
            for c in calls
        ]
    return orjson.dumps(item)


def request_frame(cwd: str, model: str) -> tuple[bytes, bytes]:
    """The request body before the transcript (model and system prompt, without the comma
    after it) and after it (the tools). pitrio's builders are imported here, so a floor that
    needs only :func:`to_chat` does not pay for them."""
    from pitrio.actors.session.resources.system_prompt import (
        SystemPromptOptions,
        build_system_prompt,
    )
    from pitrio.actors.tool_executor.tools import create_builtin_tools

    system = build_system_prompt(SystemPromptOptions(cwd=cwd))
    head = orjson.dumps({"model": model})[:-1] + b',"messages":['
    head += orjson.dumps({"role": "system", "content": system})
    specs = [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in create_builtin_tools(cwd)[:4]
    ]
    tail = (
        b'],"stream":true,"stream_options":{"include_usage":true},"max_tokens":16384,"tools":'
        + orjson.dumps(specs)
        + b"}"
    )
    return head, tail


class Agent:
    """The whole agent: a transcript, a connection, a session file."""

    def __init__(self, cwd: str, session: Path | None) -> None:
        url = urlparse(os.environ["ANCHOR_BASE_URL"])
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self.path = url.path.rstrip("/") + "/chat/completions"
        self.model = os.environ.get("ANCHOR_MODEL", "mock-model")
        self.provider = os.environ.get("ANCHOR_PROVIDER", "mock")
        self.headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {os.environ.get('ANCHOR_API_KEY', 'x')}",
        }
        self.cwd = cwd
        self.head, self.tail = request_frame(cwd, self.model)
        self.encoded: list[bytes] = []
        self.count = 0
        if session is not None and session.exists():
            with session.open("rb") as fh:
                for line in fh:
                    entry = orjson.loads(line)
                    if entry.get("type") == "message":
                        self.encoded.append(to_chat(entry["message"]))
                        self.count += 1
        self.file = SessionFile(session or Path(cwd) / ".floor" / "session.jsonl", cwd)
        self.conn: http.client.HTTPConnection | None = None
        self.out = Output()

    # -- one turn ---------------------------------------------------------------------------

    def prompt(self, command_id: Any, text: str) -> None:
        """Answer a prompt and run it to the end."""
        out = self.out
        out.event({"id": command_id, "type": "response", "command": "prompt", "success": True})
        user = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": now_ms()}
        out.event({"type": "agent_start"})
        out.event({"type": "turn_start"})
        out.event({"type": "message_start", "message": user})
        out.event({"type": "message_end", "message": user})
        new = [user]
        self.encoded.append(to_chat(user))
        self.count += 1
        pending: dict[str, Any] | None = self.file.append(user)
        while True:
            reply = self.request(pending)
            pending = None
            answer, calls = self.read_reply(reply)
            new.append(answer)
            results = []
            for call in calls:
                result = self.run_tool(call)
                results.append(result)
                new.append(result)
            if calls:
                out.event({"type": "turn_end", "message": answer, "toolResults": results})
                out.event({"type": "turn_start"})
                continue
            out.event({"type": "turn_end", "message": answer, "toolResults": []})
            out.event({"type": "agent_end", "messages": new, "willRetry": False})
            out.event({"type": "agent_settled"})
            out.flush()
            return

    def request(self, pending: dict[str, Any] | None) -> http.client.HTTPResponse:
        """Send the transcript; sync the prompt's entry while the model works."""
        self.out.flush()
        body = self.head + b"," + b",".join(self.encoded) + self.tail
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
            try:
                self.conn.request("POST", self.path, body, self.headers)
                break
            except (ConnectionError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        if pending is not None:
            self.file.sync()
            self.out.event({"type": "entry_appended", "entry": pending})
            self.out.flush()
        assert self.conn is not None
        return self.conn.getresponse()

    def read_reply(
        self, reply: http.client.HTTPResponse
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Parse the stream into events and the final message."""
        out = self.out
        message: dict[str, Any] = {
            "role": "assistant",
            "content": [],
            "api": "openai-completions",
            "provider": self.provider,
            "model": self.model,
            "usage": USAGE_ZERO,
            "stopReason": "stop",
            "timestamp": now_ms(),
        }
        out.event({"type": "message_start", "message": message})
        text: dict[str, Any] | None = None
        calls: dict[int, dict[str, Any]] = {}
        raw_args: dict[int, str] = {}

        def update(event: dict[str, Any]) -> None:
            partial = orjson.dumps(message)
            head = orjson.dumps({"type": "message_update", "assistantMessageEvent": event})
            out.raw(head[:-2] + b',"partial":' + partial + b'},"message":' + partial + b"}\n")

        while True:
            line = reply.readline()
            if not line:
                break
            if not line.startswith(b"data: "):
                continue
            payload = line[6:].strip()
            if payload == b"[DONE]":
                reply.read()
                break
            chunk = orjson.loads(payload)
            if "responseId" not in message and chunk.get("id"):
                message["responseId"] = chunk["id"]
            if chunk.get("usage"):
                u = chunk["usage"]
                message["usage"] = dict(
                    USAGE_ZERO,
                    input=u.get("prompt_tokens", 0),
                    output=u.get("completion_tokens", 0),
                    totalTokens=u.get("total_tokens", 0),
                )
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    if text is None:
                        text = {"type": "text", "text": ""}
                        message["content"].append(text)
                        update({"type": "text_start", "contentIndex": 0})
                    text["text"] += delta["content"]
                    update({"type": "text_delta", "contentIndex": 0, "delta": delta["content"]})
                for piece in delta.get("tool_calls") or []:
                    index = piece.get("index", 0)
                    function = piece.get("function") or {}
                    if index not in calls:
                        call = {
                            "type": "toolCall",
                            "id": piece.get("id", f"call_{index}"),
                            "name": function.get("name", ""),
                            "arguments": {},
                        }
                        calls[index] = call
                        raw_args[index] = ""
                        message["content"].append(call)
                        update({"type": "toolcall_start", "contentIndex": len(calls) - 1})
                    raw_args[index] += function.get("arguments") or ""
                    update(
                        {
                            "type": "toolcall_delta",
                            "contentIndex": len(calls) - 1,
                            "delta": function.get("arguments") or "",
                        }
                    )
                if choice.get("finish_reason") == "tool_calls":
                    message["stopReason"] = "toolUse"
        if text is not None:
            update({"type": "text_end", "contentIndex": 0, "content": text["text"]})
        for index, call in calls.items():
            call["arguments"] = orjson.loads(raw_args[index] or "{}")
            update({"type": "toolcall_end", "contentIndex": index, "toolCall": call})
        out.event({"type": "message_end", "message": message})
        self.persist(message)
        return message, list(calls.values())

    def run_tool(self, call: dict[str, Any]) -> dict[str, Any]:
        """Run ``bash`` or ``read`` and record the result."""
        out = self.out
        name, args = call["name"], call["arguments"]
        out.event(
            {
                "type": "tool_execution_start",
                "toolCallId": call["id"],
                "toolName": name,
                "args": args,
            }
        )
        out.flush()
        if name == "bash":
            done = subprocess.run(
                ["bash", "-c", args.get("command", "")],
                cwd=self.cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                check=False,
            )
            output = done.stdout.decode(errors="replace")
        else:
            output = (Path(self.cwd) / args.get("path", "")).read_text(errors="replace")
        content = [{"type": "text", "text": output}]
        out.event(
            {
                "type": "tool_execution_end",
                "toolCallId": call["id"],
                "toolName": name,
                "result": {"content": content, "details": {}},
                "isError": False,
            }
        )
        result = {
            "role": "toolResult",
            "toolCallId": call["id"],
            "toolName": name,
            "content": content,
            "isError": False,
            "timestamp": now_ms(),
        }
        out.event({"type": "message_start", "message": result})
        out.event({"type": "message_end", "message": result})
        self.persist(result)
        return result

    def persist(self, message: dict[str, Any]) -> None:
        """Append, sync, then announce (the order pitrio keeps)."""
        self.encoded.append(to_chat(message))
        self.count += 1
        entry = self.file.append(message)
        self.file.sync()
        self.out.event({"type": "entry_appended", "entry": entry})

    def state(self, command_id: Any) -> None:
        """Enough of ``get_state`` for the harness."""
        data = {
            "model": {"id": self.model, "provider": self.provider, "api": "openai-completions"},
            "isStreaming": False,
            "messageCount": self.count,
        }
        self.out.event(
            {
                "id": command_id,
                "type": "response",
                "command": "get_state",
                "success": True,
                "data": data,
            }
        )
        self.out.flush()


def main(argv: list[str]) -> int:
    """Serve RPC on stdin/stdout until EOF."""
    session = Path(argv[argv.index("--session") + 1]) if "--session" in argv else None
    agent = Agent(os.getcwd(), session)
    stdin = sys.stdin.buffer
    while line := stdin.readline():
        command = orjson.loads(line)
        kind = command.get("type")
        if kind == "prompt":
            agent.prompt(command.get("id"), command["message"])
        elif kind == "get_state":
            agent.state(command.get("id"))
        else:
            agent.out.event(
                {"id": command.get("id"), "type": "response", "command": kind, "success": True}
            )
            agent.out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
