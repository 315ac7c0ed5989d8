"""The least a trio process does to resume a long session over RPC: a lower bound (issue 38).

Not pitrio and not an agent anyone should use: a measuring stick for the resume targets
(first ``get_state``, ``get_messages`` and the first turn after, against pi 1.6.0). It takes
every shortcut a single-purpose program can take and keeps what the harness's resume workload
(``../shared/tools/bench_rpc.py -w resume``) requires of any agent:

- ``get_state`` with the number of messages on the session's branch (the file is parsed and
  the branch walked from its last entry);
- ``get_messages`` with every message of that branch;
- a prompt answered by a Chat Completions request carrying the whole transcript, the user's
  entry appended to the file and fsynced, the streamed reply parsed and every delta written
  as pi 1.6.0's ``message_update`` line (the deltas of each read in one write), then
  ``agent_end``. Without ``--session`` that is the floor of the harness's stream workload.

Its one trick is the best this machine allows: before anything else is imported the process
forks, and the child parses the file, counts, encodes the ``get_messages`` reply and every
message of the request on the second core while the parent imports trio. The parent only
waits for what a command needs. It reads no settings, resolves no model, checks nothing, and
handles only the harness's linear files (no compaction, no branch summaries). So its times
are below what any conforming agent in Python on trio, pitrio included, can reach on this
machine; a target under them is past the floor.

    python3 /work/shared/tools/bench_rpc.py -w resume --resume-turns 20000 \\
        --agent-cmd "{python} /work/main/bench/resume_floor.py" --label floor --out F.json

or beside pi and pitrio in one interleaved run: ``bench/side_by_side.py --extra-label floor
--extra-workload cold_start --extra-workload resume --extra-workload stream`` (its column is
named ``pitrio-floor``).
Without ``--session`` it answers ``get_state`` of a new session: the cold start's floor.

Not part of the test run.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

# Nothing but the standard library's built-ins is imported before the fork: the child must
# start at once, and the parent's imports must not be done twice.


def child(path: str, notes: int, replies: int, chat: int, frame: int, resume: bool) -> None:
    """Parse the session file and hand the parent each result as soon as it exists.

    ``notes`` carries one line per result (``count N``, ``messages SIZE``, ``chat SIZE``,
    ``frame HEAD TAIL``); the results go to the memory files, which the parent reads at
    offset 0. The frame (system prompt and tools) is made by a second child, so its imports do
    not wait for the transcript's encoding.
    """
    if os.fork() == 0:
        # The request's frame, forked while this process is small (a fork of a large Python
        # process copies every page its reference counts touch). Resuming, at the lowest
        # priority so it takes only the time the parser and the parent leave; for a new
        # session there is nothing to parse and the first prompt waits for it.
        if resume:
            os.nice(19)
        from floor_agent import request_frame  # type: ignore[import-not-found]  # bench/

        head, tail = request_frame(os.getcwd(), os.environ.get("ANCHOR_MODEL", "mock-model"))
        head += b","
        os.pwrite(frame, head + tail, 0)
        os.write(notes, b"frame %d %d\n" % (len(head), len(tail)))
        os._exit(0)
    import orjson

    with open(path, "rb") as fh:
        data = fh.read()
    lines = [line for line in data.splitlines()[1:] if line]
    # The count first: each line parsed and only its place in the tree kept (keeping the
    # whole entries would double the parse's time); the messages are parsed again later.
    loads = orjson.loads

    def place(line: bytes) -> tuple[str, str | None, bool]:
        entry = loads(line)
        return entry["id"], entry.get("parentId"), entry["type"] == "message"

    places = [place(line) for line in lines]
    index_of = {entry_id: index for index, (entry_id, _, _) in enumerate(places)}
    branch = []
    cursor = len(places) - 1 if places else None
    while cursor is not None:
        branch.append(cursor)
        cursor = index_of.get(places[cursor][1] or "")  # ids are never empty
    branch = [index for index in reversed(branch) if places[index][2]]
    os.write(notes, b"count %d\n" % len(branch))
    # Each message's JSON cut from its line: the harness's entries end with the message.
    reply = b"[" + b",".join(message_bytes(lines[index]) for index in branch) + b"]"
    os.write(replies, reply)
    os.write(notes, b"messages %d\n" % len(reply))
    from floor_agent import to_chat  # bench/: the turn floor's encoding, imported after the count

    encoded = b",".join(to_chat(loads(lines[index])["message"]) for index in branch)
    os.write(chat, encoded)
    os.write(notes, b"chat %d\n" % len(encoded))


def message_bytes(line: bytes) -> bytes:
    """The ``message`` value of an entry's line, as written (it is the line's last key)."""
    start = line.index(b'"message":{') + len(b'"message":')
    return line[start:-1]


def main(argv: list[str]) -> int:
    """Fork the parser, then serve RPC on stdin/stdout with trio until EOF (without
    ``--session``, a new session: the floor of a cold start)."""
    gc.disable()  # a short-lived program's objects never form cycles worth collecting
    if "--session" in argv:
        path = argv[argv.index("--session") + 1]
    else:  # a new session: its file holds the header alone (the cold-start floor)
        os.makedirs(".floor", exist_ok=True)
        path = os.path.join(".floor", "session.jsonl")
        with open(path, "wb") as fh:
            fh.write(b'{"type":"session","version":3}\n')
    notes_r, notes_w = os.pipe()
    replies, chat = os.memfd_create("replies"), os.memfd_create("chat")
    frame = os.memfd_create("frame")
    if os.fork() == 0:
        os.close(notes_r)
        try:
            child(path, notes_w, replies, chat, frame, "--session" in argv)
        except BaseException:
            import traceback

            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    os.close(notes_w)
    import trio

    trio.run(serve, path, notes_r, replies, chat, frame)
    return 0


class Notes:
    """The child's result lines, read as they come."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.seen: dict[bytes, list[int]] = {}
        self.buffer = b""

    async def get(self, kind: bytes) -> list[int]:
        """The numbers of the result ``kind``, once the child has written it."""
        while kind not in self.seen:
            chunk = await self.stream.receive_some()
            if not chunk:
                raise RuntimeError("the parser ended early")
            self.buffer += chunk
            *lines, self.buffer = self.buffer.split(b"\n")
            for line in lines:
                name, *numbers = line.split()
                self.seen[name] = [int(n) for n in numbers]
        return self.seen[kind]


async def lines_of(stream: Any) -> Any:
    """The lines of a byte stream."""
    buffer = b""
    while chunk := await stream.receive_some():
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            yield line


async def serve(path: str, notes_fd: int, replies: int, chat: int, frame: int) -> None:
    """Answer the harness's commands; the first turn's request is the child's bytes."""
    import contextlib
    import fcntl
    import mmap

    import trio

    stdin = trio.lowlevel.FdStream(os.dup(0))
    with contextlib.suppress(OSError):  # a 1 MB pipe: a 16 MB reply in 16 writes, not 256
        fcntl.fcntl(1, fcntl.F_SETPIPE_SZ, 1 << 20)
    stdout = trio.lowlevel.FdStream(os.dup(1))
    notes = Notes(trio.lowlevel.FdStream(notes_fd))
    import orjson

    async def answer(command: dict[str, Any], *data: bytes | memoryview) -> None:
        """The response, its ``data`` given in parts (sent as they are, never joined)."""
        head = b'{"id":%s,"type":"response","command":%s,"success":true' % (
            orjson.dumps(command.get("id")),
            orjson.dumps(command["type"]),
        )
        if not data:
            await stdout.send_all(head + b"}\n")
            return
        await stdout.send_all(head + b',"data":')
        for part in data:
            await stdout.send_all(part)
        await stdout.send_all(b"}\n")

    async for line in lines_of(stdin):
        command = orjson.loads(line)
        match command["type"]:
            case "get_state":
                (count,) = await notes.get(b"count")
                model = os.environ.get("ANCHOR_MODEL", "mock-model")
                state = {"model": {"id": model}, "isStreaming": False, "messageCount": count}
                await answer(command, orjson.dumps(state))
            case "get_messages":
                (size,) = await notes.get(b"messages")
                with mmap.mmap(replies, size, prot=mmap.PROT_READ) as reply:
                    await answer(command, b'{"messages":', memoryview(reply), b"}")
            case "prompt":
                await answer(command)
                await turn(command["message"], path, stdout, notes, (chat, frame))
            case _:
                await answer(command)


def append(path: str, message: dict[str, Any]) -> None:
    """Append a message's entry and make it durable; blocking on purpose: a floor program has
    nothing else to run meanwhile."""
    import orjson

    with open(path, "ab") as fh:
        fh.write(orjson.dumps({"type": "message", "message": message}) + b"\n")
        fh.flush()
        os.fsync(fh.fileno())


async def turn(text: str, path: str, stdout: Any, notes: Notes, files: tuple[int, int]) -> None:
    """One turn: the request from the child's bytes, the reply streamed as events."""
    import time
    from urllib.parse import urlparse

    import h11
    import orjson
    import trio
    from floor_agent import USAGE_ZERO, to_chat

    async def event(value: dict[str, Any]) -> None:
        await stdout.send_all(orjson.dumps(value) + b"\n")

    user: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": text}]}
    user["timestamp"] = int(time.time() * 1000)
    await event({"type": "agent_start"})
    await event({"type": "message_start", "message": user})
    await event({"type": "message_end", "message": user})
    chat, frame = files
    (size,) = await notes.get(b"chat")
    head_size, tail_size = await notes.get(b"frame")
    transcript = os.pread(chat, size, 0)
    head, tail = os.pread(frame, head_size, 0), os.pread(frame, tail_size, head_size)
    body = head + transcript + (b"," if transcript else b"") + to_chat(user) + tail
    url = urlparse(os.environ["ANCHOR_BASE_URL"])
    stream = await trio.open_tcp_stream(url.hostname or "127.0.0.1", url.port or 80)
    wire = h11.Connection(h11.CLIENT)
    target = url.path.rstrip("/") + "/chat/completions"
    headers = [
        ("Host", url.netloc),
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer " + os.environ.get("ANCHOR_API_KEY", "x")),
        ("Content-Length", str(len(body))),
    ]
    request = h11.Request(method="POST", target=target, headers=headers)
    await stream.send_all(wire.send(request) + wire.send(h11.Data(data=body)))
    append(path, user)  # synced while the model reads the request
    pieces: list[str] = []
    pending = b""
    # pi 1.6.0's update line: the usage, then the stream event without its partial.
    head = b'{"type":"message_update","usage":' + orjson.dumps(USAGE_ZERO)
    head += b',"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":'
    while True:
        got = wire.next_event()
        if got is h11.NEED_DATA:
            wire.receive_data(await stream.receive_some())
            continue
        if isinstance(got, h11.Data):
            pending += bytes(got.data)
            *frames, pending = pending.split(b"\n\n")
            lines: list[bytes] = []  # every delta of what was read, in one write
            for block in frames:
                payload = block.removeprefix(b"data: ")
                if payload == b"[DONE]":
                    continue
                choices = orjson.loads(payload).get("choices") or [{}]
                delta = (choices[0].get("delta") or {}).get("content")
                if delta:
                    pieces.append(delta)
                    lines.append(head + orjson.dumps(delta) + b"}}\n")
            if lines:
                await stdout.send_all(b"".join(lines))
        elif isinstance(got, h11.EndOfMessage | h11.ConnectionClosed):
            break
    reply = "".join(pieces)
    await stream.aclose()
    answer = {"role": "assistant", "content": [{"type": "text", "text": reply}]}
    answer["stopReason"] = "stop"
    append(path, answer)
    await event({"type": "message_end", "message": answer})
    await event({"type": "agent_end", "messages": [user, answer]})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
