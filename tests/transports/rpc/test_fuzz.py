"""Seeded fuzzing of ``pitrio --mode rpc`` with malformed lines (issue 21, the RPC share).

One real process gets well over 1,000 malformed lines in one go: every field of every command
with wrong types, invalid UTF-8, lone surrogates, deep nesting, huge numbers and strings, NUL
bytes, broken JSON. Every line is answered exactly once with ``success: false`` and an error
text (naming the field where the line has one), with the line's id where it can be read; the
process stays under the memory bound, then still answers a prompt, and exits 0 at EOF.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import trio

from tests.transports.rpc.harness import Dirs, rpc_process
from tests.transports.rpc.test_backpressure import RSS_BOUND_MB, peak_rss_mb

SEED = 21
CASES = 1200

# Each command's fields: name -> (valid value, required, kind).
FIELDS: dict[str, dict[str, tuple[Any, bool, str]]] = {
    "prompt": {"message": ("hi", True, "string"), "images": ([], False, "array")},
    "steer": {"message": ("hi", True, "string"), "images": ([], False, "array")},
    "follow_up": {"message": ("hi", True, "string"), "images": ([], False, "array")},
    "new_session": {"parentSession": (None, False, "string")},
    "set_model": {"provider": ("faux", True, "string"), "modelId": ("faux-1", True, "string")},
    "set_thinking_level": {"level": ("off", True, "string")},
    "set_steering_mode": {"mode": ("all", True, "mode")},
    "set_follow_up_mode": {"mode": ("all", True, "mode")},
    "compact": {"customInstructions": (None, False, "string")},
    "set_auto_compaction": {"enabled": (True, True, "boolean")},
    "set_auto_retry": {"enabled": (True, True, "boolean")},
    "bash": {"command": ("true", True, "string")},
    "export_html": {"outputPath": (None, False, "string")},
    "switch_session": {"sessionPath": ("x.jsonl", True, "string")},
    "fork": {"entryId": ("abc", True, "string")},
    "set_session_name": {"name": ("n", True, "string")},
    "set_event_format": {"updates": ("full", True, "format")},
}

HUGE = "x" * 200_000


def wrong_values(kind: str, required: bool, rng: random.Random) -> list[Any]:
    """Values of the wrong type (or out of range) for a field of ``kind``."""
    values: list[Any] = [
        5,
        -1.5,
        1e308,
        123456789012345678901234567890,
        True,
        {},
        {"a": [1, {"b": None}]},
        [rng.random()],
    ]
    if required:
        values.append(None)
    if kind != "string":
        values += ["nonsense", "", HUGE[: rng.randint(1, 5000)], "\ud800", "a\x00b"]
    if kind == "array":
        values += [[5], [{"type": "image"}], [{"type": "image", "data": 5, "mimeType": "x"}]]
    else:
        values.append([])
    if kind == "boolean":
        values.remove(True)
        values.append(0)
    return values


def dumps(value: Any) -> bytes:
    """A record as a JavaScript client would write it (lone surrogates escaped)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False).encode(
        "utf-8", errors="backslashreplace"
    )


def field_cases(rng: random.Random) -> list[tuple[bytes, str | None, str]]:
    """(line, id, what the error must mention) for one wrong field of one command each."""
    cases: list[tuple[bytes, str | None, str]] = []
    for command, fields in FIELDS.items():
        for name, (_, required, kind) in fields.items():
            for value in wrong_values(kind, required, rng):
                body: dict[str, Any] = {"type": command}
                for other, (valid, needed, _kind) in fields.items():
                    if needed or other == name:
                        body[other] = valid
                body[name] = value
                request_id = f"f{len(cases)}"
                if value is None and required:
                    del body[name]  # absent, as well as null, must be refused
                mention = "format" if kind == "format" else name
                cases.append((dumps({"id": request_id, **body}), request_id, mention))
    return cases


def garbage_cases(rng: random.Random, count: int) -> list[tuple[bytes, str | None, str]]:
    """Lines that are not commands at all, or not JSON: random picks from a seeded mix."""
    makers = [
        lambda i: (b'{"id":"g%d","type":"get_state"' % i, None, "Failed to parse command"),
        lambda i: (b'{"id":"g%d","type":"\xff\xfe"}' % i, f"g{i}", "Unknown command"),
        lambda i: (b"\xff\xfe\xfd garbage %d" % i, None, "Failed to parse command"),
        lambda i: (b'{"id":"g%d","type":"\\ud800"}' % i, f"g{i}", "Unknown command"),
        lambda i: (
            b'{"id":"g%d","type":"x","v":' % i + b"[" * 1000 + b"]" * 1000 + b"}",
            f"g{i}",
            "nested deeper than 64 levels",
        ),
        lambda i: (b"[" * 3000, None, "Failed to parse command"),
        lambda i: (
            b'{"id":"g%d","type":"set_auto_retry","enabled":-1e400}' % i,
            f"g{i}",
            "enabled must be a boolean",
        ),
        lambda i: (b'{"id":"g%d","type":"get\\u0000state"}' % i, f"g{i}", "Unknown command"),
        lambda i: (b'{"id":"g%d","type":"a\x00b"}' % i, None, "Failed to parse command"),
        lambda i: (b'{"id":"g%d","type":"%s"}' % (i, HUGE.encode()), f"g{i}", "Unknown command"),
        lambda i: (b'{"id":"g%d","type":5}' % i, f"g{i}", "Unknown command"),
        lambda i: (b'{"id":"g%d"}' % i, f"g{i}", "Unknown command: undefined"),
        lambda i: (b"%d" % rng.randint(-(10**30), 10**30), None, "Unknown command: undefined"),
        lambda i: (b'"just a string %d"' % i, None, "Unknown command: undefined"),
        lambda i: (b"null", None, "Unknown command: undefined"),
        lambda i: (b"", None, "Unexpected end of JSON input"),
        lambda i: (b"   \t ", None, "Failed to parse command"),
        lambda i: (b'{"id":"g%d","type":"bash","command":"echo \\u0000"}' % i, f"g{i}", "NUL"),
        # Issue 36: a lone surrogate where a string reaches the OS, refused with the field named.
        lambda i: (
            b'{"id":"g%d","type":"bash","command":"echo \\ud800"}' % i,
            f"g{i}",
            "The command contains a lone surrogate (\\ud800 at offset 5)",
        ),
        lambda i: (
            b'{"id":"g%d","type":"export_html","outputPath":"a\\udfff.html"}' % i,
            f"g{i}",
            "The outputPath contains a lone surrogate (\\udfff at offset 1)",
        ),
        lambda i: (
            b'{"id":"g%d","type":"switch_session","sessionPath":"s\\udc80.jsonl"}' % i,
            f"g{i}",
            "The sessionPath contains a lone surrogate (\\udc80 at offset 1)",
        ),
        lambda i: (
            b'{"id":"g%d","type":"switch_session","sessionPath":"s\\u0000.jsonl"}' % i,
            f"g{i}",
            "The sessionPath contains a NUL character (at offset 1)",
        ),
        lambda i: (
            b'{"id":"g%d","type":"format_my_disk","command":"rm -rf /"}' % i,
            f"g{i}",
            "Unknown command: format_my_disk",
        ),
    ]
    return [rng.choice(makers)(i) for i in range(count)]


async def test_a_thousand_malformed_lines_are_each_answered(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    cases = field_cases(rng)
    cases += garbage_cases(rng, max(CASES - len(cases), 300))
    rng.shuffle(cases)
    assert len(cases) >= 1000
    dirs = Dirs.make(tmp_path)
    async with rpc_process(dirs) as rpc:
        data = b"".join(line + b"\n" for line, _, _ in cases)

        async def send() -> None:
            await rpc.send_raw(data)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)  # a flood: all of it at once, read back meanwhile
            answered = await rpc.wait_until(lambda lines: len(lines) >= len(cases), 60)
        responses = [line for line in rpc.lines if line.get("type") == "response"]
        assert answered and len(responses) == len(rpc.lines) == len(cases), (
            len(rpc.lines),
            rpc.stderr.decode()[-3000:],
        )
        assert all(r["success"] is False and r["error"] for r in responses)
        for line, request_id, mention in cases:
            if request_id is None:
                continue
            response = rpc.responses.get(request_id)
            assert response is not None, line[:200]
            assert mention in response["error"], (line[:200], response)
        anonymous = [r for r in responses if "id" not in r]
        assert len(anonymous) == sum(1 for _, request_id, _ in cases if request_id is None)
        for marker in (b"ExceptionGroup", b"sub-exception", b"Traceback"):
            assert marker not in rpc.raw
        peak = peak_rss_mb(rpc.process.pid)
        assert peak < RSS_BOUND_MB, f"peak RSS {peak:.0f} MB"
        # Still a working session.
        await rpc.data({"type": "prompt", "message": "after the storm"})
        await rpc.event("agent_settled")
        text = await rpc.data({"type": "get_last_assistant_text"})
        assert text == {"text": "You said: after the storm"}
        await rpc.close_stdin()
        assert await rpc.wait_exit() == 0, rpc.stderr.decode()[-3000:]
