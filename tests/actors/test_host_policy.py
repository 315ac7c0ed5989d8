"""The host's pure policies: session ids, restart intensity, idle eviction; the replay buffer."""

from __future__ import annotations

import pytest

from pitrio.actors.host.policy import (
    EvictionPolicy,
    InvalidSessionIdError,
    RestartHistory,
    RestartPolicy,
    validate_session_id,
)
from pitrio.actors.host.replay import ReplayBuffer


@pytest.mark.parametrize(
    "good", ["01a22911-0398-732e-aaa3-d4fe9792e2a7", "abc", "A_b-9", "x" * 128]
)
def test_valid_session_ids(good: str) -> None:
    assert validate_session_id(good) == good


@pytest.mark.parametrize(
    "bad",
    ["", "..", "../etc", "a/b", "a\\b", ".hidden", "a.jsonl", "-x", "x" * 129, "a\x00b", "a b"],
)
def test_invalid_session_ids(bad: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        validate_session_id(bad)


def test_non_string_session_id() -> None:
    with pytest.raises(InvalidSessionIdError):
        validate_session_id(42)


def test_restart_intensity_three_in_sixty_seconds() -> None:
    policy = RestartPolicy()
    history = RestartHistory()
    for now in (0.0, 10.0, 20.0):
        decision = history.after_crash(now, policy)
        assert decision.allowed
        history = decision.history
    assert decision.recent == 3
    refused = history.after_crash(30.0, policy)
    assert not refused.allowed
    # Crashes older than the window no longer count.
    later = history.after_crash(61.0, policy)
    assert later.allowed and later.recent == 3  # 10, 20 and 61


def test_restart_policy_zero_never_restarts() -> None:
    assert not RestartHistory().after_crash(0.0, RestartPolicy(max_restarts=0)).allowed


def test_restart_policy_validates() -> None:
    with pytest.raises(ValueError):
        RestartPolicy(window=0)


def test_eviction_policy() -> None:
    policy = EvictionPolicy(idle_seconds=60)
    assert not policy.should_evict(now=59, last_active=0, clients=0, busy=False)
    assert policy.should_evict(now=60, last_active=0, clients=0, busy=False)
    assert not policy.should_evict(now=100, last_active=0, clients=1, busy=False)
    assert not policy.should_evict(now=100, last_active=0, clients=0, busy=True)
    assert policy.check_interval() == 15
    never = EvictionPolicy(idle_seconds=None)
    assert not never.should_evict(now=1e9, last_active=0, clients=0, busy=False)
    assert never.check_interval() is None
    assert EvictionPolicy(idle_seconds=0.01).check_interval() == 0.05


def test_replay_since_and_limits() -> None:
    replay = ReplayBuffer(max_frames=3, max_bytes=1000)
    assert replay.since(0) == []
    for seq in range(1, 6):
        replay.append(seq, b"f%d" % seq)
    assert replay.first_seq == 3 and replay.last_seq == 5
    assert replay.since(5) == []
    assert replay.since(2) == [b"f3", b"f4", b"f5"]
    assert replay.since(4) == [b"f5"]
    assert replay.since(1) is None  # frame 2 is gone
    assert replay.since(6) is None  # from the future: another stream
    assert replay.get(4) == b"f4" and replay.get(2) is None and replay.get(9) is None


def test_replay_byte_limit_and_gap() -> None:
    replay = ReplayBuffer(max_frames=100, max_bytes=10)
    for seq in range(1, 5):
        replay.append(seq, b"12345")
    assert replay.stats().frames == 2 and replay.stats().bytes == 10
    replay.append(9, b"x")  # a gap: what was held cannot be replayed across it
    assert replay.first_seq == 9 and replay.since(8) == [b"x"] and replay.since(4) is None


def test_replay_reset_keeps_numbering() -> None:
    replay = ReplayBuffer()
    replay.append(1, b"a")
    replay.reset(7)
    assert replay.since(7) == [] and replay.since(1) is None
    replay.append(8, b"b")
    assert replay.since(7) == [b"b"]
