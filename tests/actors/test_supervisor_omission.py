"""Which entries a retried or overflow-recovered attempt is omitted with (pi 1.6.0's
``_omitRecoveryAttempt``): the failed response and the results of its tool calls."""

from __future__ import annotations

from pitrio.actors.supervisor._entries import recovery_omission_targets
from tests.actors.test_supervisor_support import (
    Chain,
    assistant,
    call,
    failed,
    tool_result,
    user,
)


def test_a_failed_response_without_calls_is_omitted_alone() -> None:
    chain = Chain().msg(user("go")).msg(failed("503 overloaded"))
    attempt = chain.entries[-1]
    assert recovery_omission_targets(attempt.id, failed("503 overloaded"), chain.entries) == (
        attempt.id,
    )


def test_its_tool_results_follow_it_in_order_and_no_one_elses() -> None:
    response = assistant(
        None,
        stop="length",
        calls=(call("read", "c1", path="a"), call("read", "c2", path="b")),
    )
    chain = (
        Chain()
        .msg(user("go"))
        .msg(response)  # e1
        .model_change()  # e2: not a message, passed over
        .msg(tool_result("A", "c1"))  # e3
        .msg(tool_result("stray", "zz"))  # e4: not one of its calls
        .msg(tool_result("B", "c2"))  # e5
        .msg(assistant("next", calls=(call("read", "c9"),)))  # e6: the next response
        .msg(tool_result("C", "c1"))  # e7: after the next response, not this attempt's
    )
    assert recovery_omission_targets("e1", response, chain.entries) == ("e1", "e3", "e5")


def test_an_attempt_not_on_the_path_is_still_omitted() -> None:
    response = assistant(None, stop="error", error="500", calls=(call("read", "c1"),))
    chain = Chain().msg(user("go")).msg(tool_result("A", "c1"))
    assert recovery_omission_targets("elsewhere", response, chain.entries) == ("elsewhere",)
