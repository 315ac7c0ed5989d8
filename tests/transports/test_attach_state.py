"""The run state of ``pitrio attach`` alone: when the session counts as busy."""

from __future__ import annotations

from pitrio.transports.attach_state import RunState


def test_a_prompt_is_busy_until_its_run_settles() -> None:
    state = RunState()
    state.feed({"type": "attached", "seq": 4, "stream": "e1", "isStreaming": False})
    assert not state.busy and state.last_seq == 4 and state.stream == "e1"
    state.sent("a1")
    assert state.busy
    state.feed({"type": "response", "id": "a1", "command": "prompt", "success": True, "seq": 4})
    assert state.probe  # the response came first (as in pi): is there a run?
    state.sent("a2")
    state.feed({"type": "agent_start", "seq": 5})
    state.feed({"type": "response", "id": "a2", "command": "get_state", "data": {}})
    assert state.busy and not state.probe
    state.feed({"type": "agent_end", "seq": 6})
    state.feed({"type": "auto_retry_start", "seq": 7})
    state.feed({"type": "agent_settled", "seq": 9})
    assert not state.busy and state.last_seq == 9


def test_an_accepted_prompt_without_a_run_is_settled_by_get_state() -> None:
    state = RunState()
    state.sent("a1")
    state.feed({"type": "response", "id": "a1", "command": "prompt", "success": True})
    assert state.probe and state.busy  # no "> " before the state says
    state.sent("a2")
    assert not state.probe and state.busy
    state.feed({"type": "response", "id": "a2", "command": "get_state", "data": {}})
    assert not state.busy


def test_get_state_can_say_a_run_is_on() -> None:
    state = RunState()
    state.sent("a1")
    state.feed({"type": "response", "id": "a1", "command": "prompt", "success": True})
    state.sent("a2")
    data = {"isStreaming": True}
    state.feed({"type": "response", "id": "a2", "command": "get_state", "data": data})
    assert state.busy


def test_a_refused_prompt_is_not_busy_and_other_responses_do_not_count() -> None:
    state = RunState()
    state.sent("a1")
    state.feed({"type": "response", "id": "zz", "command": "steer", "success": True})
    assert state.busy
    state.feed({"type": "response", "id": "a1", "command": "prompt", "success": False})
    assert not state.busy and not state.probe


def test_attaching_takes_the_daemons_word_for_a_run_in_flight() -> None:
    state = RunState(running=True)
    state.feed({"type": "attached", "seq": 2, "isStreaming": False})
    assert not state.busy
    state.feed({"type": "attached", "seq": 2, "isStreaming": True})
    assert state.busy


def test_a_prompt_whose_response_was_lost_with_the_connection_is_probed() -> None:
    state = RunState()
    state.feed({"type": "attached", "seq": 1, "stream": "e", "isStreaming": False})
    state.sent("a1")
    state.feed({"type": "attached", "seq": 1, "stream": "e", "isStreaming": False})  # again
    assert state.pending is None and state.probe and state.busy


def test_a_prompt_whose_answer_was_lost_with_the_connection_is_sent_again_with_its_id() -> None:
    # Exactly-once commands: the daemon runs it if it never arrived, else answers it again.
    state = RunState()
    state.feed({"type": "attached", "seq": 1, "stream": "e", "isStreaming": False})
    prompt = {"id": "a7-1", "type": "prompt", "message": "go"}
    state.sent("a7-1", prompt)
    state.feed({"type": "attached", "seq": 1, "stream": "e", "isStreaming": True})  # again
    assert state.resend == prompt and state.pending == "a7-1" and state.busy
    answer = {"type": "response", "id": "a7-1", "command": "prompt", "success": True}
    state.feed({**answer, "duplicate": True})
    assert state.pending is None and state.busy  # its run is on
    # Still being accepted when it came again: the state is asked.
    state.sent("a7-2", {**prompt, "id": "a7-2"})
    state.feed({**answer, "id": "a7-2", "success": False, "inProgress": True})
    assert state.pending is None and state.probe


def test_a_compaction_of_its_own_is_busy_until_its_end() -> None:
    """``/compact`` outside a run: no ``agent_settled`` follows, ``compaction_end`` ends it."""
    state = RunState()
    state.sent("c1")
    state.feed({"type": "compaction_start", "reason": "manual", "seq": 1})
    state.feed({"type": "response", "id": "c1", "command": "compact", "success": False})
    assert state.busy
    state.feed({"type": "compaction_end", "aborted": False, "seq": 2})
    assert not state.busy


def test_a_compaction_inside_a_run_leaves_it_running() -> None:
    state = RunState()
    for kind in ("agent_start", "compaction_start", "compaction_end"):
        state.feed({"type": kind, "seq": 1})
    assert state.busy
    state.feed({"type": "agent_settled", "seq": 2})
    assert not state.busy
