"""Crash safety and the single writer, with real processes (issue 3).

* A writer process appending in concurrent groups is killed with SIGKILL at random points,
  again and again on the same file: every append it acknowledged (printed after the append
  returned) must be in the file, and the file must open strictly every time. Each new writer
  takes over the dead one's lease and starts after any torn line.
* Two processes open one session for writing at the same moment: exactly one writes.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.lease import read_lease

KILLS = 20

WRITER = r"""
import random, sys, trio
from pathlib import Path
from pitrio.actors.session_store import StoreOptions, open_store
from pitrio.messages.agent import user_message

async def main(path: Path, seed: int) -> None:
    rng = random.Random(seed)
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, path, options=StoreOptions(lazy_create=False))
        status = await store.status()
        print("OPEN", len(status.problems), flush=True)
        count = 0

        async def append(number: int) -> None:
            # mostly small lines, some large ones so that kills land inside writes
            small = rng.random() < 0.7
            size = rng.randrange(10, 2_000) if small else rng.randrange(200_000, 1_500_000)
            text = f"w{seed}-{number} " + "x" * size
            entry = await store.append_message(user_message(text, timestamp=number))
            print("ACK", entry.id, flush=True)

        while True:
            async with trio.open_nursery() as group:
                for _ in range(rng.randrange(1, 6)):
                    group.start_soon(append, count)
                    count += 1

trio.run(main, Path(sys.argv[1]), int(sys.argv[2]))
"""

CONTENDER = r"""
import sys, trio
from pathlib import Path
from pitrio.actors.session_store import open_store
from pitrio.errors import SessionLockedError
from pitrio.messages.agent import user_message

async def main(path: Path) -> None:
    async with trio.open_nursery() as nursery:
        try:
            store = await open_store(nursery, path)
        except SessionLockedError as exc:
            print("LOCKED", exc.pid, flush=True)
            return
        status = await store.status()
        entry = await store.append_message(user_message("from " + sys.argv[2], timestamp=1))
        print("OPEN", status.fence, entry.id, flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)
        await store.aclose()

trio.run(main, Path(sys.argv[1]))
"""


def spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def acked_ids(lines: list[str]) -> list[str]:
    # A line cut by the kill is not an acknowledgement.
    return [line.split()[1] for line in lines if line.startswith("ACK ") and line.endswith("\n")]


class Lane:
    """One session file and its successive writers; two lanes run side by side."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.acknowledged: list[str] = []
        self.torn_reported = 0
        self.rounds = 0

    def check(self) -> None:
        if not self.path.exists():  # killed before its first append created the file
            assert self.acknowledged == []
            return
        parsed = parse_session_bytes(self.path.read_bytes(), origin=str(self.path))
        assert parsed.errors == [], [p.describe(str(self.path)) for p in parsed.errors]
        present = {stored.id for stored in parsed.entries}
        missing = [entry_id for entry_id in self.acknowledged if entry_id not in present]
        assert missing == [], f"round {self.rounds}: acknowledged but lost: {missing}"
        record = read_lease(self.path)
        assert record is not None and record.fence == self.rounds and not record.released


def test_sigkill_in_the_middle_of_appends_loses_nothing_acknowledged(tmp_path: Path) -> None:
    rng = random.Random(20260101)
    lanes = [Lane(tmp_path / "a.jsonl"), Lane(tmp_path / "b.jsonl")]
    for round_ in range(KILLS // len(lanes)):
        running = [
            (lane, spawn(WRITER, str(lane.path), f"{round_}{n}")) for n, lane in enumerate(lanes)
        ]
        try:
            for lane, process in running:
                assert process.stdout is not None
                opened = process.stdout.readline()
                assert opened.startswith("OPEN"), opened
                lane.torn_reported += int(opened.split()[1]) > 0
                seen = [process.stdout.readline() for _ in range(rng.randrange(0, 12))]
                process.kill()  # SIGKILL: no cleanup, the lock is left unreleased
                seen += process.stdout.readlines()
                process.wait()
                lane.acknowledged += acked_ids(seen)
                lane.rounds += 1
                lane.check()
        finally:
            for _, process in running:
                if process.poll() is None:
                    process.kill()
                process.wait()
    for lane in lanes:
        parsed = parse_session_bytes(lane.path.read_bytes(), origin=str(lane.path))
        assert {p.kind for p in parsed.problems} <= {"torn"}
        # every entry chains to the one before it: each writer continued at the leaf
        ids = [stored.id for stored in parsed.entries]
        assert [stored.parent_id for stored in parsed.entries] == [None, *ids[:-1]]
        assert len(lane.acknowledged) > 5  # appends did happen under the kills
        print(
            f"{lane.path.name}: {len(lane.acknowledged)} acknowledged, "
            f"{len(parsed.problems)} torn lines in the file, {lane.torn_reported} opens saw one"
        )


def test_two_processes_on_one_session_exactly_one_writes(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    header = {"type": "session", "version": 3, "id": "s", "timestamp": "t", "cwd": "/"}
    path.write_bytes(orjson.dumps(header) + b"\n")
    first, second = spawn(CONTENDER, str(path), "first"), spawn(CONTENDER, str(path), "second")
    processes = [first, second]
    try:
        answers = {}
        for process in processes:
            assert process.stdout is not None
            answers[process.pid] = process.stdout.readline().split()
        winners = [pid for pid, words in answers.items() if words[0] == "OPEN"]
        losers = [pid for pid, words in answers.items() if words[0] == "LOCKED"]
        assert len(winners) == 1 and len(losers) == 1, answers
        winner, loser = winners[0], losers[0]
        assert answers[loser][1] == str(winner)  # the refusal names the holder
        assert answers[winner][1] == "1"  # the fence of the first lease
        loser_process = next(p for p in processes if p.pid == loser)
        assert loser_process.wait() == 0
        winner_process = next(p for p in processes if p.pid == winner)
        assert winner_process.stdin is not None
        winner_process.stdin.close()
        assert winner_process.wait() == 0
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [line["type"] for line in lines] == ["session", "message"]
    # The winner closed cleanly: no lock file is left beside the session (issue 21).
    assert read_lease(path) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.jsonl"]
    third = spawn(CONTENDER, str(path), "third")
    try:
        assert third.stdout is not None
        assert third.stdout.readline().split()[:2] == ["OPEN", "1"]
    finally:
        third.kill()
        third.wait()


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The children import pitrio from this checkout, whatever the working directory.
    root = str(Path(__file__).resolve().parents[2])
    monkeypatch.setenv("PYTHONPATH", root + os.pathsep + os.environ.get("PYTHONPATH", ""))
