"""The output of an RPC server: the one task writing stdout, and the queue that feeds it.

Lines reach the writer through one bounded channel, so they never interleave and a client that
stops reading slows the producers down instead of growing memory. When the writer is idle on an
empty queue, a producer writes its line itself (no task switch; issue 7).
"""

from __future__ import annotations

import contextlib
import os

import trio

from pitrio.transports.rpc.protocol import OutputLine, StreamedPieces

OUTPUT_LINES = 16
"""Items the writer may have queued before producers wait (back-pressure). An item is a line
or the forwarder's lines joined up to about :data:`WRITE_BATCH` bytes, so at most ~16 MB of
output waits for a slow client (1024 items of whole batches let a 20,000-delta full-form reply
queue gigabytes)."""
WRITE_BATCH = 1 << 20
"""Bytes the writer joins into one write when lines are waiting."""


class RpcOutput:
    """Writes the lines of one RPC server to its output stream, in the order they were sent.

    :meth:`run` is the writer task; :meth:`send` queues a line (or writes it at once when
    nothing is queued before it); :meth:`close` lets the writer end once the queue is written.
    Owned by its server: only the server's tasks call it.
    """

    def __init__(self, output: trio.abc.SendStream) -> None:
        self._output = output
        self._lines, self._lines_out = trio.open_memory_channel[OutputLine](OUTPUT_LINES)
        self.broken = trio.Event()
        """Set when a write failed: nobody reads the output any more."""
        self.done = trio.Event()
        """Set when the writer has stopped."""
        # The writer waits on an empty queue and holds no line: a sender may write itself.
        self._idle = False

    async def send(self, line: OutputLine) -> None:
        """Queue ``line`` (dropped once the output is closed or broken)."""
        # Closed: shutting down, or nobody reads stdout any more.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            # No task switch when the writer's queue has room (issue 7); a full queue blocks.
            await trio.lowlevel.checkpoint_if_cancelled()
            if self._idle and isinstance(line, bytes) and not self.broken.is_set():
                # Nothing is queued before this line and the writer is not writing: write it
                # here, saving the writer's task switch (issue 7: several batches a turn);
                # what the pipe does not take now goes to the writer, still first in line.
                line = self._write_now(line)
                if not line:
                    return
            self._idle = False  # the writer holds a line from here on
            try:
                self._lines.send_nowait(line)
            except trio.WouldBlock:
                await self._lines.send(line)

    def _write_now(self, data: bytes) -> bytes:
        """Write what the output takes without blocking; returns the rest."""
        output = self._output
        if not isinstance(output, trio.lowlevel.FdStream):
            return data
        try:
            written = os.write(output.fileno(), data)
        except BlockingIOError:
            return data
        except OSError:
            self.broken.set()  # as a failed write of the writer's
            return b""
        return data[written:]

    async def close(self) -> None:
        """No more lines: the writer ends once it wrote what is queued."""
        self._idle = False  # from here on, nothing new is written
        await self._lines.aclose()

    async def run(self) -> None:
        """The writer task: write queued lines until :meth:`close` (or the output breaks)."""
        try:
            async with self._lines_out:
                while True:
                    # Idle only on an empty queue: a line in it is older than any new one.
                    self._idle = self._lines_out.statistics().current_buffer_used == 0
                    try:
                        line = await self._lines_out.receive()
                    except trio.EndOfChannel:
                        break
                    self._idle = False
                    # Lines given as pieces are written piece by piece (never joined: they
                    # are the long ones); plain lines are joined into writes of about
                    # WRITE_BATCH. Streamed pieces are made as they are written.
                    writes: list[bytes | StreamedPieces] = []
                    batch: list[bytes] = []
                    size = 0
                    while True:
                        if isinstance(line, bytes):
                            batch.append(line)
                            size += len(line)
                        else:
                            if batch:
                                writes.append(b"".join(batch))
                                batch, size = [], 0
                            if isinstance(line, tuple):
                                writes.extend(line)
                            else:
                                writes.append(line)
                        if size >= WRITE_BATCH:
                            break
                        try:
                            line = self._lines_out.receive_nowait()
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                    if batch:
                        writes.append(b"".join(batch))
                    if self.broken.is_set():
                        continue  # drain, so producers never block on a dead client
                    try:
                        for data in writes:
                            if isinstance(data, bytes):
                                await self._write(data)
                                continue
                            for piece in data:
                                await self._write(piece)
                                # Encoding the next piece takes a while on a long reply:
                                # other tasks go on between pieces.
                                await trio.lowlevel.checkpoint()
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        self.broken.set()
        finally:
            self._idle = False  # stopped: nothing is written any more
            self.done.set()

    async def _write(self, data: bytes) -> None:
        """``send_all`` on the output, trying one plain ``write`` first on a file descriptor:
        while the writer writes it is the output's only user, and a pipe with room takes a
        line at once, without the task switch ``FdStream.send_all`` starts with (issue 7:
        several writes a turn)."""
        output = self._output
        if isinstance(output, trio.lowlevel.FdStream):
            try:
                written = os.write(output.fileno(), data)
            except BlockingIOError:
                written = 0
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc
            if written == len(data):
                return
            await output.send_all(memoryview(data)[written:])  # the rest, not a copy of it
            return
        await output.send_all(data)


__all__ = ["OUTPUT_LINES", "WRITE_BATCH", "RpcOutput"]
