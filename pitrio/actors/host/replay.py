"""The replay buffer: the last encoded events of a session, for clients that resume.

Pure. Holds ``(seq, frame)`` pairs with consecutive sequence numbers, bounded by a count and by
bytes; the oldest go first. :meth:`ReplayBuffer.since` answers a resume: every frame after a
sequence number, or ``None`` when some of them are gone (the client must resync). A frame may
be held as pieces (:mod:`pitrio.messages.shared`: a system message's sections and tools held
once for every session); it is counted and handed out as its whole bytes.
"""

from __future__ import annotations

import itertools
from collections import deque

import attrs

from pitrio.messages.shared import Pieces, joined, joined_length


@attrs.frozen
class ReplayStats:
    """A snapshot: how many frames and bytes are held, and the seq range."""

    frames: int
    bytes: int
    first_seq: int | None
    last_seq: int


class ReplayBuffer:
    """The most recent frames of one event stream."""

    def __init__(self, max_frames: int = 4096, max_bytes: int = 4 << 20) -> None:
        if max_frames < 0 or max_bytes < 0:
            raise ValueError("replay limits must not be negative")
        self.max_frames = max_frames
        self.max_bytes = max_bytes
        self._frames: deque[bytes | Pieces] = deque()
        self._bytes = 0
        self._last_seq = 0  # seq of the newest frame ever appended (held or not)

    @property
    def last_seq(self) -> int:
        """The seq of the newest frame appended."""
        return self._last_seq

    @property
    def first_seq(self) -> int | None:
        """The seq of the oldest frame still held."""
        return self._last_seq - len(self._frames) + 1 if self._frames else None

    def stats(self) -> ReplayStats:
        """Counts for metrics."""
        return ReplayStats(len(self._frames), self._bytes, self.first_seq, self._last_seq)

    def append(self, seq: int, frame: bytes | Pieces) -> None:
        """Add the frame of event ``seq`` (its bytes, or pieces of them); a gap in the
        numbering drops what was held."""
        if seq != self._last_seq + 1:
            self.clear()
        self._last_seq = seq
        self._frames.append(frame)
        self._bytes += joined_length(frame)
        while self._frames and (
            len(self._frames) > self.max_frames or self._bytes > self.max_bytes
        ):
            self._bytes -= joined_length(self._frames.popleft())

    def clear(self) -> None:
        """Forget every frame (the numbering goes on)."""
        self._frames.clear()
        self._bytes = 0

    def reset(self, last_seq: int) -> None:
        """Forget every frame and continue the numbering after ``last_seq``."""
        self.clear()
        self._last_seq = last_seq

    def get(self, seq: int) -> bytes | None:
        """The frame of event ``seq`` if it is still held."""
        first = self.first_seq
        if first is None or not first <= seq <= self._last_seq:
            return None
        return joined(self._frames[seq - first])

    def since(self, seq: int) -> list[bytes] | None:
        """Every frame after ``seq``, oldest first; ``None`` when one of them is no longer
        held, or ``seq`` is from the future (another stream)."""
        if seq == self._last_seq:
            return []
        if seq > self._last_seq or seq < 0:
            return None
        first = self.first_seq
        if first is None or seq < first - 1:
            return None
        return [joined(frame) for frame in itertools.islice(self._frames, seq - first + 1, None)]
