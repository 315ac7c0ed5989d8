"""Hostile input against a real ``pitrio serve`` on loopback (issue 21, the daemon's share of
the fuzz suite): seeded, bounded, well under a minute.

Over a thousand malformed messages and frames: wrong types for the commands' fields, JSON that
does not parse, non-objects, deep nesting, huge numbers and strings, NUL bytes, lone
surrogates, binary frames, a flood past the rate limit, messages over the size limit, and
frames that break RFC 6455 (sent through raw sockets). Each is answered with an error response
naming the problem, or by a close frame with the RFC 6455 code and a reason. Meanwhile two
bystanders (a client of the fuzzed session and one of another session, whose reply streams
through it all) see nothing of it; afterwards the daemon's memory has grown by a bounded
amount, the sessions are live and unrestarted and still answer a prompt, the daemon logged no
error and stops cleanly. ``PITRIO_FUZZ_SEED`` picks another seed.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from tests.stray_cancel import no_stray_cancel
from tests.transports.raw_websocket import (
    OPCODE_BINARY,
    OPCODE_CLOSE,
    OPCODE_CONTINUATION,
    OPCODE_PING,
    OPCODE_PONG,
    OPCODE_TEXT,
    frame,
    raw_upgrade,
    read_until_end,
)
from tests.transports.test_serve_process import PITRIO, Lines

SEED = int(os.environ.get("PITRIO_FUZZ_SEED", "20261201"))
MAX_MESSAGE = 256 * 1024
"""The daemon's ``--max-message-size`` here: oversize cases stay cheap."""
RATE, BURST = 1, 160
"""The daemon's rate limit here (``--rate``, ``--burst``): a sequential connection sends fewer
messages than the burst, so each answer is the case's own; the flood can count its refusals
from the bucket's arithmetic whatever the machine's speed."""
PER_CONNECTION = 150
FLOOD = 400
RSS_GROWTH_LIMIT = 96 << 20
"""Bound on the daemon's resident memory growth over the whole run (measured: ~10 MiB)."""

# -- the cases ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """A websocket message (text or binary) and what its error response must say (or one of
    ``also``: another connection's command may win a race for the same resource)."""

    payload: str | bytes
    expect: str
    also: tuple[str, ...] = ()


@dataclass(frozen=True)
class Violation:
    """Bytes after the handshake and the close code they must get."""

    data: bytes
    code: int
    name: str


STRING_FIELDS = [  # (command, field, required): each must be a string
    ("prompt", "message", True),
    ("steer", "message", True),
    ("follow_up", "message", True),
    ("bash", "command", True),
    ("set_session_name", "name", True),
    ("set_model", "provider", True),
    ("fork", "entryId", True),
    ("compact", "customInstructions", False),
    ("export_html", "outputPath", False),
]
SHALLOW_WRONG = ["42", "-7", "3.5", "0", "true", "false", "[]", '[1, "a"]', "{}", '{"a": {"b": 1}}']


def nested(rng: random.Random, depth: int) -> str:
    """A value nested ``depth`` levels, arrays and objects mixed."""
    opens, closes = [], []
    for _ in range(depth):
        if rng.random() < 0.5:
            opens.append("[")
            closes.append("]")
        else:
            opens.append('{"k":')
            closes.append("}")
    return "".join(opens) + "1" + "".join(reversed(closes))


def wrong_value(rng: random.Random, *, allow_null: bool) -> tuple[str, str | None]:
    """JSON text for a wrongly typed value, and the error it earns instead of the field's own
    (``None``: the field's own error)."""
    roll = rng.random()
    if roll < 0.15:
        return nested(rng, rng.randint(65, 1000)), "nested deeper than"
    if roll < 0.25:
        # Too large for a double: read as JavaScript reads it (Infinity), as pi does (issue
        # 21), so it is a number where a string belongs: the field's own error.
        return rng.choice(["1e400", "-1e400", "9" * rng.randint(310, 400)]), None
    if roll < 0.35:
        return str(rng.randint(2**64, 2**200)), None  # read as a float: still not a string
    choices = SHALLOW_WRONG + (["null"] if allow_null else [])
    return rng.choice(choices), None


def random_text(rng: random.Random, size: int) -> str:
    alphabet = 'abcxyz019 _-"\\\t\u00e9\u4e2d\U0001f600\u0000\u200b'
    return "".join(rng.choice(alphabet) for _ in range(size))


HOST_FIELDS = [  # (command, field): a string if given (null is "not given")
    ("create", "cwd"),
    ("create", "model"),
    ("create", "thinkingLevel"),
    ("create", "name"),
    ("open", "sessionId"),
    ("get", "sessionId"),
    ("close", "sessionId"),
    ("delete", "sessionId"),
]
BAD_SESSION_IDS = ["../../etc/passwd", "", ".", "a/b", "a b", "x" * 200, "\\u0000", "\\ud800"]


def message_cases(rng: random.Random, count: int, *, host: bool = False) -> list[Message]:
    """``count`` malformed messages, each kind in proportion: for a session's endpoint, or
    for ``/v1/host`` (``host``), which has its own commands and none of the session's."""
    cases: list[Message] = []
    makers: list[Callable[[], Message]] = []

    def wrong_field() -> Message:
        command, name, required = rng.choice(STRING_FIELDS)
        value, other = wrong_value(rng, allow_null=required)
        text = f'{{"id": "w{len(cases)}", "type": "{command}", "{name}": {value}}}'
        return Message(text, other or f"{name} must be a string")

    def wrong_images() -> Message:
        value = rng.choice(["42", '"x"', "true", "{}", '{"type": "image"}'])
        return Message(
            f'{{"id": "i", "type": "prompt", "message": "hi", "images": {value}}}',
            "images must be an array",
        )

    def wrong_format() -> Message:
        value = rng.choice(['"fast"', '"FULL"', "1", "[]", "{}", '"\\u0000"', "null"])
        return Message(
            f'{{"id": "f", "type": "set_event_format", "updates": {value}}}',
            "Unknown event format",
        )

    def wrong_since() -> Message:
        value = rng.choice(["-1", "-99", "1.5", '"7"', "[]", "{}", "true", "null", "1e308"])
        return Message(
            f'{{"id": "r", "type": "resume", "since": {value}}}',
            "since must be a non-negative integer",
        )

    def wrong_type() -> Message:
        odd = json.dumps(random_text(rng, rng.randint(1, 2000)))
        shallow = ["42", "null", "true", "[]", '{"a": 1}', '"no_such_command"', '"a\\u0000b"']
        kind = rng.choice([*shallow, '"\\ud800"', '"\\udfff_x"', odd])
        return Message(f'{{"id": "t", "type": {kind}}}', "Unknown command")

    def no_object() -> Message:
        text = rng.choice(["[1, 2]", "null", "42", '"text"', '"\\ud800 alone"', "true", "[]"])
        return Message(text, "Unknown command: undefined")

    def not_json() -> Message:
        valid = json.dumps({"id": "n", "type": "get_state", "x": random_text(rng, 20)})
        text = rng.choice(
            [
                valid[: rng.randint(0, len(valid) - 1)],
                "{," + random_text(rng, rng.randint(0, 200)),
                valid + rng.choice(["}", ",", " x", "]"]),
                "{'type': 'get_state'}",
                '{"type": "get_state",}',
                '{"type": NaN}',
            ]
        )
        return Message(text, "Failed to parse command")

    def deep_anywhere() -> Message:
        where = rng.choice(["id", "type", "extra", "updates", "message"])
        value = nested(rng, rng.randint(65, 1000))
        text = f'{{"{where}": {value}, "type": "get_state"}}'
        if where == "type":
            text = f'{{"type": {value}}}'
        return Message(text, "nested deeper than")

    def huge_string() -> Message:
        pad = "x" * rng.randint(10_000, MAX_MESSAGE - 1000)
        return Message(
            f'{{"id": "h", "type": "prompt", "message": 7, "pad": "{pad}"}}',
            "message must be a string",
        )

    def nul_command() -> Message:
        at = rng.randint(0, 20)
        command = ("echo " + random_text(rng, 20).replace("\0", ""))[:at] + "\0rm -rf /"
        text = json.dumps({"id": "b", "type": "bash", "command": command})
        return Message(text, "NUL", also=("A bash command is already running",))

    def surrogate_field() -> Message:  # issue 36: bound for the OS, refused and named
        half = f"\\u{rng.randint(0xD800, 0xDFFF):04x}"
        at = rng.randint(0, 10)
        command, name, prefix = rng.choice(
            [("bash", "command", "echo "), ("export_html", "outputPath", "page-")]
        )
        value = (prefix + "x" * 10)[:at]
        text = f'{{"id": "u", "type": "{command}", "{name}": "{value}{half}"}}'
        return Message(
            text,
            f"The {name} contains a lone surrogate ({half} at offset {at})",
            also=("A bash command is already running",),
        )

    def surrogate_cwd() -> Message:
        half = f"\\u{rng.randint(0xD800, 0xDFFF):04x}"
        return Message(
            f'{{"id": "d", "type": "create", "cwd": "/tmp/{half}"}}',
            f"The cwd contains a lone surrogate ({half} at offset 5)",
        )

    def binary() -> Message:
        return Message(rng.randbytes(rng.randint(0, 300)), "binary frames are not supported")

    def host_field() -> Message:
        command, name = rng.choice(HOST_FIELDS)
        value, other = wrong_value(rng, allow_null=name == "sessionId")
        text = f'{{"id": "w{len(cases)}", "type": "{command}", "{name}": {value}}}'
        return Message(text, other or f"{name} must be a string")

    def bad_session_id() -> Message:
        command = rng.choice(["open", "get", "close", "delete"])
        value = rng.choice(BAD_SESSION_IDS)
        return Message(
            f'{{"id": "v", "type": "{command}", "sessionId": "{value}"}}', "Invalid session id"
        )

    def session_command() -> Message:  # a session's command sent to /v1/host
        command = rng.choice(["prompt", "bash", "get_state", "resume", "set_event_format"])
        return Message(f'{{"id": "c", "type": "{command}"}}', f"Unknown command: {command}")

    generic = [no_object, not_json, not_json, deep_anywhere, deep_anywhere, wrong_type, binary]
    if host:
        makers = [host_field] * 4 + [bad_session_id] * 2 + [session_command, surrogate_cwd]
        makers += generic
        while len(cases) < count:
            cases.append(rng.choice(makers)())
        return cases
    makers = [wrong_field] * 6 + [
        wrong_images,
        wrong_format,
        wrong_since,
        wrong_type,
        huge_string,
        nul_command,
        surrogate_field,
        *generic,
    ]
    while len(cases) < count:
        cases.append(rng.choice(makers)())
    return cases


def invalid_utf8(rng: random.Random) -> bytes:
    bad = rng.choice([b"\xc3\x28", b"\xff", b"\xed\xa0\x80", b"\xe2\x82", b"\xf0\x28\x8c\x28"])
    text = json.dumps({"type": "get_state", "x": "y" * rng.randint(0, 100)}).encode()
    cut = rng.randint(0, len(text))
    return text[:cut] + bad + text[cut:]


def violation_cases(rng: random.Random, count: int) -> list[Violation]:
    """``count`` frame sequences a websocket server must fail the connection for."""
    body = b'{"type": "get_state"}'

    def utf8() -> Violation:
        return Violation(frame(OPCODE_TEXT, invalid_utf8(rng)), 1007, "invalid UTF-8")

    def utf8_fragments() -> Violation:
        data = invalid_utf8(rng)
        cut = rng.randint(0, len(data))
        return Violation(
            frame(OPCODE_TEXT, data[:cut], fin=False) + frame(OPCODE_CONTINUATION, data[cut:]),
            1007,
            "invalid UTF-8 in fragments",
        )

    def unmasked() -> Violation:
        opcode = rng.choice([OPCODE_TEXT, OPCODE_BINARY, OPCODE_PING])
        return Violation(frame(opcode, body, masked=False), 1002, "unmasked")

    def reserved_opcode() -> Violation:
        opcode = rng.choice([0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF])
        return Violation(frame(opcode, body[: rng.randint(0, len(body))]), 1002, "opcode")

    def rsv() -> Violation:
        opcode = rng.choice([OPCODE_TEXT, OPCODE_BINARY, OPCODE_PING])
        return Violation(frame(opcode, body, rsv=rng.randint(1, 7)), 1002, "RSV bits")

    def big_control() -> Violation:
        opcode = rng.choice([OPCODE_PING, OPCODE_PONG])
        return Violation(frame(opcode, rng.randbytes(rng.randint(126, 4000))), 1002, "big ping")

    def fragmented_control() -> Violation:
        opcode = rng.choice([OPCODE_PING, OPCODE_PONG])
        return Violation(frame(opcode, b"p", fin=False), 1002, "fragmented control")

    def stray_continuation() -> Violation:
        return Violation(
            frame(OPCODE_CONTINUATION, body, fin=rng.random() < 0.5), 1002, "stray continuation"
        )

    def interleaved() -> Violation:
        return Violation(
            frame(OPCODE_TEXT, b'{"type":', fin=False) + frame(OPCODE_TEXT, b"1}"),
            1002,
            "new message inside a fragmented one",
        )

    def bad_close() -> Violation:
        roll = rng.random()
        if roll < 0.3:
            return Violation(frame(OPCODE_CLOSE, b"\x03"), 1002, "one-byte close")
        if roll < 0.7:
            code = rng.choice([0, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999])
            return Violation(frame(OPCODE_CLOSE, code.to_bytes(2, "big")), 1002, "close code")
        return Violation(frame(OPCODE_CLOSE, b"\x03\xe8" + b"\xff\xfe"), 1007, "close reason")

    def bad_length() -> Violation:
        if rng.random() < 0.5:  # the 64-bit length's top bit set
            size = (1 << 63) | rng.getrandbits(63)
            return Violation(bytes([0x81, 0xFF]) + size.to_bytes(8, "big"), 1002, "length MSB")
        size = rng.randint(0, 125)  # a 2-byte length where 1 byte would do
        data = bytes([0x82, 0xFE]) + size.to_bytes(2, "big") + b"mask" + b"z" * size
        return Violation(data, 1002, "long length form")

    def oversize() -> Violation:
        extra = rng.randint(1, 5000)
        if rng.random() < 0.5:
            data = frame(OPCODE_TEXT, b"x" * (MAX_MESSAGE + extra))
        else:  # the same in fragments
            half = (MAX_MESSAGE + extra) // 2
            data = frame(OPCODE_TEXT, b"x" * half, fin=False)
            data += frame(OPCODE_CONTINUATION, b"x" * (MAX_MESSAGE + extra - half))
        return Violation(data, 1009, "oversize")

    makers = [
        utf8,
        utf8_fragments,
        unmasked,
        reserved_opcode,
        rsv,
        big_control,
        fragmented_control,
        stray_continuation,
        interleaved,
        bad_close,
        bad_length,
        oversize,
    ]
    return [rng.choice(makers)() for _ in range(count)]


# -- the daemon ---------------------------------------------------------------------------


@dataclass
class Served:
    """A running ``pitrio serve``: its process, URL, token and log file."""

    process: trio.Process
    port: int
    token: str
    log: Path
    notes: list[str] = field(default_factory=list)

    def rss(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")


@asynccontextmanager
async def serve(tmp_path: Path) -> AsyncIterator[Served]:
    agent = tmp_path / "agent"
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "serve.log"
    env = {**os.environ, "PITRIO_AGENT_DIR": str(agent)}
    env.pop("PITRIO_SESSION_DIR", None)
    command = [PITRIO, "serve", "--port", "0", "--cwd", str(work)]
    command += ["--max-message-size", str(MAX_MESSAGE), "--faux-chunk-delay", "0.002"]
    command += ["--rate", str(RATE), "--burst", str(BURST)]
    with log.open("wb") as errors:
        process = await trio.lowlevel.open_process(
            command, stdout=subprocess.PIPE, stderr=errors, env=env
        )
    try:
        assert process.stdout is not None
        lines = Lines(process.stdout)
        url = (await lines.until(r"listening on (http://\S+)")).group(1)
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        token = (agent / "daemon-token").read_text().strip()
        yield Served(process, port, token, log)
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            assert await process.wait() == 0, log.read_text()[-3000:]
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@asynccontextmanager
async def client(served: Served, path: str) -> AsyncIterator[WebSocketConnection]:
    url = f"ws://127.0.0.1:{served.port}{path}"
    headers = [(b"Authorization", f"Bearer {served.token}".encode())]
    async with open_websocket_url(url, extra_headers=headers, max_message_size=64 << 20) as ws:
        with no_stray_cancel():
            yield ws


async def next_frame(ws: WebSocketConnection) -> dict[str, Any]:
    with trio.fail_after(10):
        value: dict[str, Any] = json.loads(await ws.get_message())
    return value


async def next_response(ws: WebSocketConnection) -> dict[str, Any]:
    """The next response on ``ws`` (events in between skipped)."""
    while (frame_ := await next_frame(ws)).get("type") != "response":
        pass
    return frame_


async def command(ws: WebSocketConnection, value: dict[str, Any]) -> dict[str, Any]:
    await ws.send_message(json.dumps(value))
    return await next_response(ws)


async def prompt(ws: WebSocketConnection, text: str) -> str:
    """Prompt and wait for the run to settle: the assistant's final text."""
    await ws.send_message(json.dumps({"id": "go", "type": "prompt", "message": text}))
    reply = None
    with trio.fail_after(30):
        while (item := await next_frame(ws)).get("type") != "agent_settled":
            if item.get("type") == "response" and item.get("id") == "go":
                assert item["success"], item
            if item.get("type") == "message_end" and item["message"]["role"] == "assistant":
                reply = "".join(b.get("text", "") for b in item["message"]["content"])
    assert reply is not None
    return reply


def check_error(response: dict[str, Any], case: Message, seed: int) -> None:
    where = f"seed {seed}: {case.payload[:80]!r}"
    assert response.get("success") is False, (where, response)
    error = response.get("error")
    assert isinstance(error, str) and error, (where, response)
    assert any(e in error for e in (case.expect, *case.also)), (where, case.expect, error[:300])
    for leak in ("Traceback", "ExceptionGroup", "<Task", "RecursionError"):
        assert leak not in error, (where, error[:300])


# -- the test -----------------------------------------------------------------------------


async def test_hostile_input_against_a_real_daemon(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    messages = message_cases(rng, 600)
    host_messages = message_cases(rng, 400, host=True)
    violations = violation_cases(rng, 300)
    async with serve(tmp_path) as served:
        async with client(served, "/v1/host") as host:
            assert (await next_frame(host))["type"] == "host_attached"
            fuzzed = (await command(host, {"id": 1, "type": "create"}))["data"]["sessionId"]
            other = (await command(host, {"id": 2, "type": "create"}))["data"]["sessionId"]
        fuzzed_path, other_path = f"/v1/sessions/{fuzzed}", f"/v1/sessions/{other}"
        long_text = "".join(chr(97 + i % 26) for i in range(3000))

        async with client(served, fuzzed_path) as watcher, client(served, other_path) as streamer:
            assert (await next_frame(watcher))["type"] == "attached"
            assert (await next_frame(streamer))["type"] == "attached"
            assert await prompt(watcher, "warm up") == "warm up"
            rss_before = served.rss()
            watched: list[dict[str, Any]] = []
            streamed: list[dict[str, Any]] = []

            async def watch() -> None:  # the fuzzed session's quiet client
                while True:
                    watched.append(json.loads(await watcher.get_message()))

            async def stream() -> None:  # the other session's reply streams meanwhile
                await streamer.send_message(
                    json.dumps({"id": "s", "type": "prompt", "message": long_text})
                )
                while not streamed or streamed[-1].get("type") != "agent_settled":
                    streamed.append(json.loads(await streamer.get_message()))

            with trio.fail_after(50):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(watch)
                    nursery.start_soon(stream)
                    await fuzz(served, fuzzed_path, messages, host_messages, violations)
                    nursery.cancel_scope.cancel()

            # The bystanders: the watcher saw no response (nothing of the garbage), the
            # streamer got its whole reply.
            assert [f for f in watched if f.get("type") == "response"] == []
            with trio.fail_after(30):
                while not streamed or streamed[-1].get("type") != "agent_settled":
                    streamed.append(json.loads(await streamer.get_message()))
            ends = [f for f in streamed if f.get("type") == "message_end"]
            assert ends[-1]["message"]["content"][0]["text"] == long_text
            # The fuzzed session still answers a prompt, on an old and a new connection.
            assert await prompt(watcher, "after the storm") == "after the storm"
            async with client(served, fuzzed_path) as fresh:
                assert (await next_frame(fresh))["type"] == "attached"
                assert await prompt(fresh, "and again") == "and again"
            growth = served.rss() - rss_before
            print(f"fuzz seed {SEED}: RSS {rss_before >> 20} MiB, grew {growth / 2**20:.1f} MiB")
            assert growth < RSS_GROWTH_LIMIT, f"RSS grew by {growth >> 20} MiB"
        async with client(served, "/v1/host") as host:
            await next_frame(host)
            for index, session_id in enumerate((fuzzed, other)):
                row = await command(host, {"id": index, "type": "get", "sessionId": session_id})
                assert row["data"]["status"] == "live", row
                assert row["data"].get("restarts", 0) == 0, row
        assert served.process.returncode is None
    records = [json.loads(line) for line in served.log.read_text().splitlines() if line]
    troubles = [r for r in records if r.get("level") not in ("debug", "info")]
    assert troubles == [], troubles[:5]
    refused = [r for r in records if r["event"] == "frame_refused"]
    assert {r["fields"]["code"] for r in refused} <= {1002, 1007, 1009}
    assert len(refused) == len(violations)


async def fuzz(
    served: Served,
    path: str,
    messages: list[Message],
    host_messages: list[Message],
    violations: list[Violation],
) -> None:
    """Every case, several connections at once; each answer checked."""
    async with trio.open_nursery() as nursery:
        for target, cases in ((path, messages), ("/v1/host", host_messages)):
            for start in range(0, len(cases), PER_CONNECTION):
                chunk = cases[start : start + PER_CONNECTION]
                nursery.start_soon(sequential, served, target, chunk)
        nursery.start_soon(flood, served, path)
        for start in range(0, len(violations), 50):
            nursery.start_soon(protocol, served, path, violations[start : start + 50])


async def sequential(served: Served, path: str, cases: list[Message]) -> None:
    """One connection: each message, then its answer."""
    async with client(served, path) as ws:
        await next_frame(ws)  # attached / host_attached
        for case in cases:
            await ws.send_message(case.payload)
            check_error(await next_response(ws), case, SEED)


async def flood(served: Served, path: str) -> None:
    """Messages far past the burst without reading: each answered, most by the rate limit."""
    async with client(served, path) as ws:
        await next_frame(ws)
        started = trio.current_time()
        for index in range(FLOOD):
            await ws.send_message(json.dumps({"id": index, "type": "no_such_command"}))
        limited = 0
        for _ in range(FLOOD):
            response = await next_response(ws)
            assert response["success"] is False
            if "Rate limit exceeded" in response["error"]:
                limited += 1
            else:
                assert "Unknown command: no_such_command" in response["error"], response
        # The burst passes, then one message per second the bucket refilled meanwhile.
        refilled = math.ceil((trio.current_time() - started) * RATE)
        assert FLOOD - BURST - refilled <= limited <= FLOOD - BURST, (limited, refilled)


async def protocol(served: Served, path: str, cases: list[Violation]) -> None:
    """Raw connections, one per case: a close frame with the code and a reason."""
    for index, case in enumerate(cases):
        target = path if index % 2 else "/v1/host"
        stream, pending = await raw_upgrade(served.port, target, token=served.token)
        try:
            await stream.send_all(case.data)
            with trio.fail_after(10):
                ended = await read_until_end(stream, pending)
        finally:
            await stream.aclose()
        assert ended is not None, f"seed {SEED}: {case.name}: no close frame"
        assert ended[0] == case.code and ended[1], (SEED, case.name, ended)


def test_the_cases_are_many_varied_and_seeded() -> None:
    seed = SEED
    first = message_cases(random.Random(seed), 600)
    assert first == message_cases(random.Random(seed), 600)
    assert len({case.expect for case in first}) >= 10
    host = message_cases(random.Random(seed), 400, host=True)
    assert len({case.expect for case in host}) >= 8
    kinds = {case.code for case in violation_cases(random.Random(seed), 300)}
    assert kinds == {1002, 1007, 1009}
