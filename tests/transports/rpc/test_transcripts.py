"""Replay every RPC transcript pi 0.73.1 recorded against ``pitrio --mode rpc``, compared with
what pi 1.6.0 writes for the same input (:mod:`tests.transports.rpc.transcripts16`).

Each transcript runs in a fresh scratch installation with the recording's settings, project
files and model (``--model faux/<model>``, replies by ``PITRIO_FAUX_SCRIPT=fixture-rules``);
see :mod:`tests.transports.rpc.transcripts` for the waits and what the comparison normalises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.transports.rpc.harness import Dirs, rpc_process
from tests.transports.rpc.transcripts import (
    MissingPiece,
    compare,
    load,
    names,
    replay,
    settle_queue_updates,
)

Attribution = Callable[[Mapping[str, Any]], str | None]


def _response(request_id: str, reason: str) -> Attribution:
    return lambda line: reason if line.get("id") == request_id else None


# Transcripts that show a feature pitrio does not have yet, and the lines where it shows.
MISSING: dict[str, tuple[str, Attribution]] = {}


def _from(
    predicate: Callable[[Mapping[str, Any]], bool],
) -> Callable[[int, Mapping[str, Any]], bool]:
    """Every line from the first one ``predicate`` takes on."""
    first: list[int] = []

    def underivable(index: int, line: Mapping[str, Any]) -> bool:
        if not first and predicate(line):
            first.append(index)
        return bool(first) and index >= first[0]

    return underivable


# Transcripts whose lines from the first one a predicate takes on pi 1.6.0 never writes.
UNWRITTEN_TAIL: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    # no compaction, so no retried run: pi 1.6.0's session ends with the overflow error
    "overflow_compaction": lambda line: line.get("type") == "compaction_start",
}

# 0.73.1 transcripts with lines pi 1.6.0's output cannot be derived from: each made a compaction
# of nothing (its scripted summary counts 0 user, 0 assistant), which 1.6.0 refuses
# (prepareCompaction finds nothing before the cut), so 1.6.0's session keeps messages the
# transcript never shows again. Those lines are compared against real pi 1.6.0 instead, by the
# differential harness's compact_manual, compact_too_small and overflow_too_small scenarios.
UNDERIVABLE: dict[str, Callable[[int, Mapping[str, Any]], bool]] = {
    # the uncompacted context's messages and usage, right after the refused compaction
    "manual_compact": lambda index, line: (
        line.get("type") == "response" and line.get("id") in ("gm", "st")
    ),
    **{name: _from(predicate) for name, predicate in UNWRITTEN_TAIL.items()},
}


def _params() -> list[Any]:
    params: list[Any] = []
    for name in names():
        marks = []
        if name in MISSING:
            reason = MISSING[name][0]
            marks.append(pytest.mark.xfail(strict=True, raises=MissingPiece, reason=reason))
        params.append(pytest.param(name, marks=marks))
    return params or [pytest.param("<none>", marks=pytest.mark.skip("no transcripts"))]


async def _replay(name: str, tmp_path: Path) -> list[dict[str, Any]]:
    transcript = load(name)
    async with rpc_process(Dirs.make(tmp_path), *transcript.args, model="") as rpc:
        return await replay(rpc, transcript, UNWRITTEN_TAIL.get(name))


@pytest.mark.parametrize("name", _params())
def test_transcript_replays(name: str, tmp_path: Path) -> None:
    # A plain trio.run, so the comparison's exception reaches pytest as itself (an xfail
    # expects MissingPiece, not an exception group).
    ours = trio.run(_replay, name, tmp_path)
    attribution = MISSING[name][1] if name in MISSING else (lambda line: None)
    underivable = UNDERIVABLE.get(name, lambda index, line: False)
    compare(load(name).output, ours, attribution, underivable)


def test_a_queue_update_is_compared_after_the_deltas_that_follow_it() -> None:
    delta = {"type": "message_update", "n": 1}
    queue = {"type": "queue_update", "steering": ["x"]}
    answer = {"type": "response", "id": "s"}
    end = {"type": "message_end"}
    lines = [{"type": "message_start"}, queue, delta, answer, delta, end, queue]
    assert settle_queue_updates(lines) == [
        {"type": "message_start"},
        delta,
        answer,
        delta,
        queue,
        end,
        queue,
    ]
    # Only past deltas: a queue update on the other side of a non-delta event is another line.
    assert settle_queue_updates([queue, end, delta]) == [queue, end, delta]
