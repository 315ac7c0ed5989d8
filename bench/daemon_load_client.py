"""One load-generator process of ``bench/daemon_load.py``: many websocket clients of a daemon.

Started by ``daemon_load.py`` (never by hand): ``python bench/daemon_load_client.py CONFIG``
where CONFIG is a JSON file naming the daemon's port, the sessions this process drives, the
window and the reply mix. Each session's client attaches, then until the window ends: prompts
``load n=.. rate=.. tool=..`` (``PITRIO_FAUX_SCRIPT=load``), reads every frame of the run until
``agent_settled``, checks it, and thinks for a while. A reply is checked whole: every chunk in
order, none missing, the final message's text equal to its deltas
(:class:`~pitrio.actors.model_router.providers.faux_load.ChunkChecker`), the frames' ``seq``
increasing (a gap is an update coalesced into a later one). Latency is the chunk's embedded
hand-off time to the moment its frame was read, both CLOCK_MONOTONIC.

With ``slow`` set, one more client prompts a long fast reply and then stops reading (a receive
buffer of a few KB, a message queue of one): the daemon must coalesce its updates, then cut it
off, without the others noticing. What it saw at the end (close code, reason) is reported.

The sessions' clients share one ``epoll`` loop (:mod:`bench.daemon_load_poll`: each socket
registered once, read in large pieces, the server's frames cut out by hand), which costs this
machine the least CPU per delta. ``--client wsproto`` in ``daemon_load.py`` gives each session a
trio task speaking wsproto alone (:class:`FrameClient`: one read takes every frame already on
the socket), ``--client trio-websocket`` the library as the project uses it. The slow client
stays on trio-websocket (its small message queue is the point).

Writes a JSON result next to CONFIG (``.out.json``) and the window's latencies in
microseconds as little-endian ``uint32`` (``.lat``).
"""

from __future__ import annotations

import array
import json
import random
import socket
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import orjson
import trio
from trio_websocket import ConnectionClosed, open_websocket_url, wrap_client_stream
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Message,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pitrio.actors.model_router.providers.faux_load import (  # noqa: E402
    ChunkChecker,
    LoadRequest,
    load_prompt,
    monotonic_micros,
)

QUEUE = 256
"""Messages trio-websocket may hold per connection before it stops reading the socket (the
``--client trio-websocket`` variant)."""
READ_SIZE = 256 * 1024
"""Bytes taken from the socket per read: every frame already there is parsed at once."""


class Closed(Exception):
    """The daemon closed the connection (or it was lost): its close code and reason."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"{code} {reason}".strip())
        self.code, self.reason = code, reason


class FrameClient:
    """A websocket client on wsproto alone, for the load generator's own CPU.

    trio-websocket hands every message through a reader task and a memory channel; at tens of
    thousands of frames a second on two cores that is CPU taken from the daemon being
    measured. This reads the socket in big pieces and parses every frame in it in the reading
    task, so a frame costs wsproto's parsing and nothing else. Messages are kept in arrival
    order; ``get_message`` returns the next one (reading only when none is left)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.messages: deque[str] = deque()
        self.parts: list[str] = []
        self.closed: Closed | None = None

    @classmethod
    async def connect(cls, port: int, target: str) -> FrameClient:
        """Open ``ws://127.0.0.1:{port}{target}`` and finish the handshake."""
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        client = cls(stream)
        await stream.send_all(client.ws.send(Request(host=f"127.0.0.1:{port}", target=target)))
        while True:
            data = await stream.receive_some(READ_SIZE)
            if not data:
                raise Closed(None, "closed during the handshake")
            client.ws.receive_data(data)
            for event in client.ws.events():
                if isinstance(event, AcceptConnection):
                    for answer in client._take_events():  # frames sent with the answer
                        await stream.send_all(client.ws.send(answer))
                    return client
                if isinstance(event, RejectConnection):
                    raise Closed(event.status_code, "handshake refused")

    async def send_message(self, text: str) -> None:
        """Send one text message."""
        await self.stream.send_all(self.ws.send(Message(data=text)))

    async def get_message(self) -> str:
        """The next text message; :class:`Closed` once the daemon closed the connection (every
        message before its close frame is returned first) or it was lost."""
        while not self.messages:
            if self.closed is not None:
                raise self.closed
            data = await self.stream.receive_some(READ_SIZE)
            if not data:
                raise Closed(1006, "connection lost")
            self.ws.receive_data(data)
            for answer in self._take_events():
                try:
                    await self.stream.send_all(self.ws.send(answer))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.closed = self.closed or Closed(1006, "connection lost")
        return self.messages.popleft()

    def _take_events(self) -> list[Any]:
        """Queue the messages parsed so far; the pongs and close replies owed."""
        answers: list[Any] = []
        for event in self.ws.events():
            if isinstance(event, TextMessage):
                self.parts.append(event.data)
                if event.message_finished:
                    self.messages.append("".join(self.parts))
                    self.parts.clear()
            elif isinstance(event, Ping):
                answers.append(event.response())
            elif isinstance(event, CloseConnection):
                answers.append(event.response())
                self.closed = Closed(event.code, event.reason or "")
        return answers

    async def aclose(self) -> None:
        """Close the socket (the daemon sees the client leave)."""
        await trio.aclose_forcefully(self.stream)


class Tally:
    """What every client of this process counts, and the window's latencies."""

    def __init__(self, window: tuple[int, int]) -> None:
        self.window = window
        self.latencies = array.array("I")
        self.counts: dict[str, int] = dict.fromkeys(
            (
                "turns",
                "tool_turns",
                "chunks_received",
                "chunks_in_window",
                "delta_frames",
                "seq_gaps",
                "bad_replies",
                "errors",
                "disconnects",
            ),
            0,
        )
        self.faults: list[str] = []
        self.pacing_us: list[int] = []
        """Per reply: mean interval between hand-offs (how well the provider kept its pace)."""

    def fault(self, session: str, what: str) -> None:
        """Count a fault; the first few are kept word for word."""
        if len(self.faults) < 20:
            self.faults.append(f"{session}: {what}")

    def reply(self, checker: ChunkChecker) -> None:
        """Add one checked reply's figures."""
        start, end = self.window
        self.counts["chunks_received"] += checker.index
        for sent, latency in zip(checker.sent_us, checker.latencies_us, strict=True):
            if start <= sent < end:
                self.latencies.append(min(latency, 2**32 - 1))
                self.counts["chunks_in_window"] += 1
        if len(checker.sent_us) > 1:
            span = checker.sent_us[-1] - checker.sent_us[0]
            self.pacing_us.append(span // (len(checker.sent_us) - 1))


def turn_id(config: dict[str, Any], name: str) -> str:
    """A command ``id`` for turn ``name`` of this step: prefixed with the step's tag, since a
    daemon answers an id (and text) it saw in an earlier step as a repeat and runs nothing."""
    return f"{config.get('tag', '')}{name}"


class TurnReader:
    """What a client reads of one turn, frame by frame (every client kind shares it): the
    ``seq`` order, the text deltas into a :class:`ChunkChecker`, the final message, the
    failed responses; the turn ends at ``agent_settled``."""

    def __init__(self, session: str, request: LoadRequest, tally: Tally, last_seq: int) -> None:
        self.session = session
        self.request = request
        self.tally = tally
        self.last_seq = last_seq
        self.checker = ChunkChecker()
        self.final: str | None = None
        self.frames = 0
        self.refused = False
        """The prompt was refused or answered as a repeat: no run, so no ``agent_settled``."""

    def take(self, raw: str | bytes, arrived: int) -> bool:
        """Read one frame that arrived at ``arrived`` (µs); ``True`` once the turn settled."""
        tally = self.tally
        frame = orjson.loads(raw)
        kind = frame.get("type")
        seq = frame.get("seq")
        if seq is not None:
            if seq <= self.last_seq:
                tally.counts["errors"] += 1
                tally.fault(self.session, f"seq {seq} after {self.last_seq}")
            elif seq != self.last_seq + 1:
                tally.counts["seq_gaps"] += 1
            self.last_seq = seq
        if kind == "message_update":
            event = frame["assistantMessageEvent"]
            if event["type"] == "text_delta":
                self.frames += 1
                self.checker.feed(event["delta"], arrived)
        elif kind == "message_end":
            message = frame["message"]
            if message.get("role") == "assistant":
                texts = [b["text"] for b in message["content"] if b.get("type") == "text"]
                if texts:
                    self.final = "".join(texts)
        elif kind == "response" and (not frame.get("success") or frame.get("duplicate")):
            tally.counts["errors"] += 1
            what = frame.get("error") or "answered as a repeat (duplicate)"
            tally.fault(self.session, f"{frame.get('command')} response: {what}")
            if frame.get("command") == "prompt":
                # Nothing was started: waiting for the run's end would wait forever.
                self.refused = True
                return True
        elif kind == "agent_settled":
            return True
        return False

    def finish(self) -> int:
        """Check the whole reply and count it; the last ``seq`` seen (a refused prompt,
        already counted as an error, is no turn)."""
        tally, checker = self.tally, self.checker
        if self.refused:
            return self.last_seq
        faults = checker.finish(self.request.chunks, self.final)
        if self.frames > checker.index:
            faults.append(f"{self.frames} text deltas for {checker.index} chunks")
        tally.counts["delta_frames"] += self.frames
        if faults:
            tally.counts["bad_replies"] += 1
            tally.fault(self.session, "; ".join(faults))
        tally.counts["turns"] += 1
        tally.counts["tool_turns"] += self.request.tool
        tally.reply(checker)
        return self.last_seq


async def one_turn(
    ws: Any, session: str, request: LoadRequest, command_id: str, tally: Tally, last_seq: int
) -> int:
    """Prompt once (``command_id``) and read the run to its end; the last ``seq`` seen."""
    message = {"id": command_id, "type": "prompt", "message": load_prompt(request)}
    await ws.send_message(orjson.dumps(message).decode())
    reader = TurnReader(session, request, tally, last_seq)
    while not reader.take(await ws.get_message(), monotonic_micros()):
        pass
    return reader.finish()


async def client(url: str, session: str, config: dict[str, Any], tally: Tally, seed: int) -> None:
    """One session's client: turns until the window ends."""
    rng = random.Random(seed)
    await trio.sleep(rng.random() * config["stagger_s"])  # not every prompt in the same tick
    end = config["end_us"]
    target = f"/v1/sessions/{session}"

    async def turns(ws: Any) -> None:
        attached = orjson.loads(await ws.get_message())
        last_seq = int(attached.get("seq", 0))
        turn = 0
        while monotonic_micros() < end:
            request = LoadRequest(
                chunks=rng.randint(config["chunks_min"], config["chunks_max"]),
                rate=config["rate"],
                tool=rng.random() < config["tool_share"],
            )
            command_id = turn_id(config, f"t{turn}")
            last_seq = await one_turn(ws, session, request, command_id, tally, last_seq)
            turn += 1
            await trio.sleep(rng.uniform(config["think_min_s"], config["think_max_s"]))

    try:
        if config.get("client") == "trio-websocket":
            async with open_websocket_url(f"{url}{target}", message_queue_size=QUEUE) as ws:
                await turns(ws)
        else:
            frames = await FrameClient.connect(config["port"], target)
            try:
                await turns(frames)
            finally:
                await frames.aclose()
    except ConnectionClosed as exc:
        tally.counts["disconnects"] += 1
        tally.fault(session, f"disconnected: {exc.reason}")
    except Closed as exc:
        tally.counts["disconnects"] += 1
        tally.fault(session, f"disconnected: {exc}")
    except OSError as exc:
        tally.counts["errors"] += 1
        tally.fault(session, f"connection failed: {exc}")


async def slow_client(port: int, session: str, config: dict[str, Any]) -> dict[str, Any]:
    """A client that asks for a long fast reply and stops reading; what it saw at the end."""
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    await sock.connect(("127.0.0.1", port))
    stream = trio.SocketStream(sock)
    seen = 0
    result: dict[str, Any] = {"session": session}
    async with trio.open_nursery() as nursery:
        ws = await wrap_client_stream(
            nursery, stream, "127.0.0.1", f"/v1/sessions/{session}", message_queue_size=1
        )
        await ws.get_message()  # attached
        request = LoadRequest(chunks=config["slow_chunks"], rate=config["slow_rate"])
        await ws.send_message(
            orjson.dumps(
                {"id": turn_id(config, "slow"), "type": "prompt", "message": load_prompt(request)}
            ).decode()
        )
        stopped = time.monotonic()
        await trio.sleep_until(trio.current_time() + (config["end_us"] - monotonic_micros()) / 1e6)
        result["stopped_reading_s"] = round(time.monotonic() - stopped, 1)
        try:
            with trio.fail_after(30):
                while True:
                    await ws.get_message()
                    seen += 1
        except ConnectionClosed as exc:
            result["close_code"] = exc.reason.code
            result["close_reason"] = exc.reason.reason
        except trio.TooSlowError:
            result["close_code"] = None
            result["close_reason"] = "still open 30 s after the window"
        result["frames_read_after"] = seen
        nursery.cancel_scope.cancel()
    return result


async def run_trio(config: dict[str, Any], tally: Tally) -> dict[str, Any] | None:
    """Every client of this process as trio tasks (``--client wsproto|trio-websocket``); what
    the slow client saw."""
    url = f"ws://127.0.0.1:{config['port']}"
    slow: dict[str, Any] | None = None
    async with trio.open_nursery() as nursery:
        for index, session in enumerate(config["sessions"]):
            nursery.start_soon(client, url, session, config, tally, config["seed"] * 100003 + index)
        if config.get("slow_session"):

            async def run_slow() -> None:
                nonlocal slow
                slow = await slow_client(config["port"], config["slow_session"], config)

            nursery.start_soon(run_slow)
    return slow


def run(config: dict[str, Any]) -> dict[str, Any]:
    """Every client of this process; the tally as JSON.

    The default clients share one ``epoll`` loop (:mod:`bench.daemon_load_poll`); the slow
    client, when there is one, keeps trio-websocket (its one-message queue is the point) in a
    thread of its own."""
    tally = Tally((config["window_start_us"], config["end_us"]))
    cpu0 = time.process_time()
    slow: dict[str, Any] | None = None
    if config.get("client") in ("wsproto", "trio-websocket"):
        slow = trio.run(run_trio, config, tally)
    else:
        from bench.daemon_load_poll import run_poll  # it imports this module

        seen: list[dict[str, Any]] = []
        thread = None
        if config.get("slow_session"):

            def run_slow() -> None:
                seen.append(trio.run(slow_client, config["port"], config["slow_session"], config))

            thread = threading.Thread(target=run_slow, name="slow-client")
            thread.start()
        run_poll(config, tally)
        if thread is not None:
            thread.join()
            slow = seen[0] if seen else None
    return {
        "counts": tally.counts,
        "faults": tally.faults,
        "pacing_us": sorted(tally.pacing_us),
        "cpu_s": time.process_time() - cpu0,
        "slow_client": slow,
        "latencies": tally.latencies,
    }


def main(argv: list[str]) -> int:
    """Read the config, run, write the results."""
    path = Path(argv[0])
    config = json.loads(path.read_text())
    result = run(config)
    latencies: array.array[int] = result.pop("latencies")
    if sys.byteorder != "little":
        latencies.byteswap()
    path.with_suffix(".lat").write_bytes(latencies.tobytes())
    path.with_suffix(".out.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
