"""The Chat Completions prefix made by the launcher's parsing child (pitrio/_preparse_prefix.py,
the child's side in pitrio/_preparse_child.py; issue 38): the child's answer is
``prepare_chat_prefix`` run here over the messages the child certified, ending at the first line
it did not; and whatever happens (no request, a closed channel, a release, a child killed
mid-request, the parent gone) the child exits and is reaped, no caller waits for it, and the
memory file is cut back to the records."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from pitrio import _preparse as preparse
from pitrio import _preparse_child as preparse_child
from pitrio import _preparse_prefix as preparse_prefix
from pitrio._prefix_chat import ChatFacts, ChatPrefix, prepare_chat_prefix
from pitrio._preparse_child import check_line
from pitrio.actors.model_router.providers.openai_compat import OpenAICompat
from pitrio.actors.model_router.providers.openai_completions_request import facts_of
from pitrio.actors.session_store.storage import read_session
from tests.prefix_chat_support import PNG, assistant, call, make_model, result, text, thinking, user
from tests.shared_dir import SHARED

HEADER = b'{"type":"session","version":3,"id":"s-1","timestamp":"t","cwd":"/p"}'
ME = facts_of(make_model("mock", "openai-completions", "m"), OpenAICompat())
"""The made messages' own model (:data:`tests.prefix_chat_support.ME`)."""


def entry_line(number: int, message: dict[str, Any], parent: str | None) -> bytes:
    return orjson.dumps(
        {
            "type": "message",
            "id": f"e{number}",
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": message,
        }
    )


def session_file(path: Path, messages: Sequence[dict[str, Any]]) -> Path:
    """A file of ``messages`` as pi writes them, one line each after the header."""
    lines = [HEADER]
    for number, message in enumerate(messages):
        lines.append(entry_line(number, message, f"e{number - 1}" if number else None))
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def conversation(turns: int) -> list[dict[str, Any]]:
    """Turns of a user question, a response calling a tool, its result (an image every
    third) and a closing response with thinking: every kind the conversion takes."""
    out: list[dict[str, Any]] = []
    for turn in range(turns):
        out.append(user(f"question {turn}" if turn % 2 else [text(f"q{turn}")]))
        out.append(assistant(thinking(f"think {turn}"), call(f"c{turn}"), stop="toolUse"))
        blocks = [text(f"out {turn}"), PNG] if turn % 3 == 2 else [text(f"out {turn}")]
        out.append(result(f"c{turn}", *blocks))
        out.append(assistant(text(f"done {turn}")))
    return out


def certified(path: Path, lines: Sequence[int]) -> list[bytes]:
    """The oracle: the messages of ``lines`` as the child finds them, up to the first line
    it does not certify (pi's usual line, its message's key found and ``}`` last) or the
    unterminated last line, from the file's bytes."""
    pieces = path.read_bytes().split(b"\n")  # the last piece is not a terminated line
    out = []
    for number in lines:
        if not 1 <= number < len(pieces):
            break
        raw = pieces[number - 1]
        try:
            found = check_line(orjson.loads(raw))
        except orjson.JSONDecodeError:
            found = None
        at = raw.find(b'"message":{')
        if found is None or at < 0 or not raw.endswith(b"}"):
            break
        out.append(raw[at + len(b'"message":') : -1])
    return out


def message_lines(path: Path) -> list[int]:
    parsed = read_session(path)
    assert parsed is not None
    return [stored.line for stored in parsed.entries if stored.type == "message"]


def forked_kept(path: Path) -> preparse.Offer:
    """A child forked (so what a test patches in ``pitrio._preparse_child`` holds in it) with
    the request channel :func:`preparse.start` gives it, its records taken whole once it says
    (on a pipe of the test's) that it waits for a request: the offer, kept."""
    memory = os.memfd_create("pitrio-preparse")
    request_read, request_write = os.pipe()
    answer_read, answer_write = os.pipe()
    ready_read, ready_write = os.pipe()
    serve, closerange = preparse_child.serve, os.closerange

    def waiting(*args: Any) -> None:
        os.write(ready_write, b"w")
        serve(*args)

    def keeping(low: int, high: int) -> None:  # the child's other descriptors but this one
        if low <= ready_write < high:
            closerange(low, ready_write)
            closerange(ready_write + 1, high)
        else:
            closerange(low, high)

    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # never returns
        for fd in (request_write, answer_read, ready_read):
            os.close(fd)
        preparse_child.serve = waiting  # type: ignore[assignment]  # (in the child alone)
        os.closerange = keeping
        preparse_child._child(str(path), memory, parent, preparse.BLOCK, request_read, answer_write)
    for fd in (request_read, answer_write, ready_write):
        os.close(fd)
    try:
        assert os.read(ready_read, 1) == b"w", "the child did not finish its records"
    finally:
        os.close(ready_read)
    offer = preparse.Offer(pid, memory, request_write, answer_read)
    preparse._OFFERS.append(offer)
    assert read_session(path) is not None
    assert [offer] == preparse._KEPT
    return offer


def spawned_kept(path: Path) -> preparse.Offer:
    """The launcher's own child (spawned), its records taken whole once its header says it
    finished (a wait for that condition: nothing else tells it from outside)."""
    assert preparse.start(str(path))
    offer = preparse._OFFERS[-1]
    for _ in range(6000):
        if offer._progress()[4]:
            break
        select.select([], [], [], 0.01)
    assert offer._progress()[4], "the child did not finish its records"
    assert read_session(path) is not None
    assert [offer] == preparse._KEPT
    return offer


def ask(*args: Any, **kwargs: Any) -> preparse_prefix.PrefixJob | None:
    """:func:`~pitrio._preparse_prefix.request_prefix` of a child at the usual priority
    (under ``SCHED_IDLE`` a busy machine, such as a parallel test run, may starve it for
    longer than the tests wait: see the test of that policy)."""
    return preparse_prefix.request_prefix(*args, idle=False, **kwargs)


def answered(job: preparse_prefix.PrefixJob) -> ChatPrefix | None:
    assert select.select([job], [], [], 60)[0], "no answer and the child alive"
    return job.result()


def gone(pid: int) -> bool:
    """Whether the child was reaped (no zombie left)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def reaped(offer: preparse.Offer) -> bool:
    if offer.reaper is not None:
        offer.reaper.join(30)
    return gone(offer.pid)


def exited(pid: int) -> bool:
    """Wait (at most 30 s) for the process ``pid`` to exit; whether it did."""
    watch = os.pidfd_open(pid)
    try:
        return bool(select.select([watch], [], [], 30)[0])
    finally:
        os.close(watch)


@pytest.fixture(autouse=True)
def no_child_left() -> Iterator[None]:
    yield
    preparse.discard()
    preparse.release()


# --- the answer ---------------------------------------------------------------------------


def _facts_variants(provider: str, api: str, model: str) -> list[ChatFacts]:
    return [
        facts_of(make_model(provider, api, model), OpenAICompat()),
        facts_of(
            make_model(provider, api, model, image=False),
            OpenAICompat(requires_tool_result_name=True, requires_thinking_as_text=True),
        ),
        facts_of(
            make_model(provider, api, model),
            OpenAICompat(requires_assistant_after_tool_result=True),
            block_images=True,
        ),
    ]


@pytest.mark.parametrize("variant", range(3))
def test_the_childs_prefix_is_the_one_made_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: int
) -> None:
    path = session_file(tmp_path / "s.jsonl", conversation(40))
    facts = _facts_variants("mock", "openai-completions", "m")[variant]
    lines = message_lines(path)
    offer = forked_kept(path)
    job = ask(tuple(facts), lines)
    assert job is not None
    prefix = answered(job)
    expected = prepare_chat_prefix(certified(path, lines), facts)
    assert expected is not None and prefix == expected
    assert type(prefix) is ChatPrefix and type(prefix.facts) is ChatFacts
    assert all(type(segment) is bytes for segment in prefix.segments)
    # Blocked images stop at the first (turn 2's result); otherwise every message is taken.
    assert prefix.consumed == (10 if facts.block_images else len(lines))
    assert reaped(offer)


def test_a_request_made_idle_puts_the_child_under_sched_idle(tmp_path: Path) -> None:
    # The default request: the child converts only on a core nothing else wants. It sets
    # the policy as it takes the request; seen before its answer (a 3,000-turn conversion,
    # or the child's exit, ends the watch).
    path = session_file(tmp_path / "s.jsonl", conversation(3000))
    facts = _facts_variants("mock", "openai-completions", "m")[0]
    offer = forked_kept(path)
    job = preparse_prefix.request_prefix(tuple(facts), message_lines(path))
    assert job is not None
    policies = []
    while not select.select([job], [], [], 0.001)[0]:
        try:
            policies.append(os.sched_getscheduler(offer.pid))
        except ProcessLookupError:
            break
    assert os.SCHED_IDLE in policies
    assert answered(job) is not None


def _made_session(turns: int, path: Path) -> None:
    tools = SHARED / "tools"
    if not (tools / "make_session.py").exists():
        pytest.skip("no shared tools (PITRIO_SHARED_DIR)")
    subprocess.run(
        [sys.executable, str(tools / "make_session.py"), str(turns), str(path)],
        check=True,
        capture_output=True,
    )


def test_a_long_made_session_from_the_launchers_own_child(tmp_path: Path) -> None:
    # The spawned child, 5,000 turns (12,000 messages: a request of 96 KB, more than a pipe
    # holds; ~10 segments back), under facts that take it all and facts that stop early.
    path = tmp_path / "long.jsonl"
    _made_session(5000, path)
    lines = message_lines(path)
    assert len(lines) == 12_000
    messages = certified(path, lines)
    assert len(messages) == len(lines)  # every line certified
    model = ("mock", "openai-completions", "mock-model")
    for facts, consumed in (
        (_facts_variants(*model)[0], len(lines)),
        (_facts_variants(*model)[2], len(lines)),
        (_facts_variants("other", "openai-completions", "mock-model")[0], 1),
    ):
        offer = spawned_kept(path)
        job = ask(tuple(facts), lines)
        assert job is not None
        prefix = answered(job)
        assert prefix is not None and prefix == prepare_chat_prefix(messages, facts)
        assert prefix.consumed == consumed
        assert reaped(offer)
    assert prefix is not None


def _fixture_sessions() -> list[Path]:
    out = []
    for path in sorted((SHARED / "fixtures").rglob("*.jsonl")):
        if path.read_bytes().startswith(b'{"type":"session"'):
            out.append(path)
    return out


def test_the_shared_fixture_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = _fixture_sessions()
    if not sessions:
        pytest.skip("no shared fixtures (PITRIO_SHARED_DIR)")
    converted = 0
    for source in sessions:
        path = tmp_path / source.name
        path.write_bytes(source.read_bytes())
        lines = message_lines(path)
        who = ("mock", "openai-completions", "m")
        for line in path.read_bytes().splitlines():
            value = orjson.loads(line)
            message = value.get("message") if isinstance(value, dict) else None
            if isinstance(message, dict) and message.get("role") == "assistant":
                who = (str(message["provider"]), str(message["api"]), str(message["model"]))
                break
        for facts in _facts_variants(*who)[:2]:
            offer = forked_kept(path)
            job = ask(tuple(facts), lines)
            assert job is not None
            prefix = answered(job)
            assert prefix == prepare_chat_prefix(certified(path, lines), facts), source.name
            converted += prefix.consumed if prefix else 0
            assert reaped(offer)
    assert converted > 0


def test_a_line_not_certified_ends_the_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = session_file(tmp_path / "s.jsonl", conversation(3))
    data = path.read_bytes().split(b"\n")
    # Line 6 (the fifth message) spaced otherwise: pi's line, but its message's key is not
    # where the child looks, so it is not certified (the parser reads it whole).
    value = orjson.loads(data[5])
    data[5] = json.dumps(value, separators=(", ", ": ")).encode()
    path.write_bytes(b"\n".join(data))
    lines = message_lines(path)
    assert lines[4] == 6
    cases = [
        (lines, 4),
        ([*lines[:3], 10**6], 3),  # a line the file does not have
        ([*lines[:2], 1, *lines[2:]], 2),  # the header
        ([*lines[:1], len(data)], 1),  # after the last newline: no line
    ]
    for requested, consumed in cases:
        offer = forked_kept(path)
        job = ask(tuple(ME), requested)
        assert job is not None
        prefix = answered(job)
        assert prefix is not None and prefix.consumed == consumed
        assert prefix == prepare_chat_prefix(certified(path, requested), ME)
        assert reaped(offer)
    offer = forked_kept(path)  # nothing to convert: no prefix
    job = ask(tuple(ME), [1, *lines])
    assert job is not None and answered(job) is None and reaped(offer)


# --- no request, and the lifetimes ---------------------------------------------------------


def test_no_child_no_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ask(tuple(ME), [2]) is None  # never started
    path = session_file(tmp_path / "s.jsonl", conversation(2))
    offer = forked_kept(path)
    job = ask(tuple(ME), message_lines(path))
    assert job is not None
    assert ask(tuple(ME), [2]) is None  # already asked
    assert answered(job) is not None and reaped(offer)
    # A child whose file changed is not kept (nor one another file's reader would ask).
    offer = forked_kept(path)
    other = (*preparse.identity(os.stat(path))[:4], 0)
    assert ask(tuple(ME), [2], identity=other) is None
    assert reaped(offer) and not preparse._KEPT


def test_released_without_a_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = session_file(tmp_path / "s.jsonl", conversation(2))
    offer = forked_kept(path)
    preparse.discard()  # what ends a session's start: the kept child is not its to end
    with preparse.discarded_after():
        pass
    assert [offer] == preparse._KEPT and not gone(offer.pid)
    preparse.release()
    assert reaped(offer) and not preparse._KEPT
    assert ask(tuple(ME), [2]) is None


def test_the_request_channel_closed_ends_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = session_file(tmp_path / "s.jsonl", conversation(2))
    offer = forked_kept(path)
    os.close(offer.requests)  # as this process's exit does
    offer.requests = -1
    assert exited(offer.pid)  # on its own, not killed
    _, status = os.waitpid(offer.pid, 0)
    assert os.WIFEXITED(status)
    assert ask(tuple(ME), [2]) is None  # found gone
    assert not preparse._KEPT


def test_the_kept_child_ends_with_its_parent(tmp_path: Path) -> None:
    # A parent that takes the records whole, makes no request and exits: its child exits too
    # (reaped by init), and never held the parent back (it holds none of its streams).
    path = session_file(tmp_path / "s.jsonl", conversation(2))
    script = textwrap.dedent(
        f"""
        import os, select, sys
        from pitrio import _preparse as preparse
        from pitrio.actors.session_store.storage import read_session
        from tests.test_preparse_prefix import spawned_kept
        from pathlib import Path
        offer = spawned_kept(Path({str(path)!r}))
        print(offer.pid, flush=True)
        sys.stdin.read()
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert parent.stdin is not None and parent.stdout is not None
    try:
        child = int(parent.stdout.readline())
        watch = os.pidfd_open(child)
    finally:
        parent.stdin.close()
    try:
        assert parent.wait(timeout=60) == 0
        assert parent.stdout.read() == b""  # the child holds none of the parent's streams
        assert select.select([watch], [], [], 30)[0], "the kept child outlived its parent"
    finally:
        os.close(watch)
        parent.stdout.close()


def test_an_answer_read_gives_its_memory_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = session_file(tmp_path / "s.jsonl", conversation(30))
    offer = forked_kept(path)
    memory = os.dup(offer.memory)  # to look at the file after the job closed its own
    try:
        records = os.fstat(memory).st_size
        job = ask(tuple(ME), message_lines(path))
        assert job is not None
        assert select.select([job], [], [], 60)[0]
        assert os.fstat(memory).st_size > records  # the request and the answer
        assert job.result() is not None
        # Given back at once (the child writes nothing after its answer), not once reaped.
        assert os.fstat(memory).st_size == -(-records // preparse.PAGE) * preparse.PAGE
        assert reaped(offer)
        assert job.fileno() == -1 and job.result() is job.result()
    finally:
        os.close(memory)
    job.close()  # again: nothing


def test_a_stopped_child_does_not_hold_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = session_file(tmp_path / "s.jsonl", conversation(2))
    offer = forked_kept(path)
    os.kill(offer.pid, signal.SIGSTOP)
    os.waitpid(offer.pid, os.WUNTRACED)
    job = ask(tuple(ME), message_lines(path))
    assert job is not None  # the request written without the child
    assert select.select([job], [], [], 0)[0] == []
    job.close()  # given up: killed, reaped by a thread once it exits
    assert reaped(offer) and job.result() is None


def test_a_child_killed_mid_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The child stops itself once it has read the request (as if starved of CPU); killed
    # then, the job reads no answer and does not hang, and no second request is made.
    path = session_file(tmp_path / "s.jsonl", conversation(2))
    answer = preparse_child.prefix_answer

    def stopping(*args: Any) -> Any:
        os.kill(os.getpid(), signal.SIGSTOP)
        return answer(*args)

    monkeypatch.setattr(preparse_child, "prefix_answer", stopping)
    offer = forked_kept(path)
    job = ask(tuple(ME), message_lines(path))
    assert job is not None
    os.waitpid(offer.pid, os.WUNTRACED)  # stopped in the request
    os.kill(offer.pid, signal.SIGKILL)
    assert answered(job) is None
    assert reaped(offer)
    assert ask(tuple(ME), [2]) is None


def test_the_launchers_child_holds_its_ends_alone_and_its_death_is_seen(tmp_path: Path) -> None:
    # The spawned child holds its standard streams (/dev/null), the memory file and its two
    # pipe ends, nothing more (the session file closed once read); this process holds
    # neither of its ends, so a child killed with a request in hand is an end of the pipe.
    path = session_file(tmp_path / "s.jsonl", conversation(2))
    offer = spawned_kept(path)
    held = sorted(
        os.readlink(f"/proc/{offer.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{offer.pid}/fd")
    )
    assert held[:3] == [os.devnull] * 3 and len(held) == 6
    assert "pitrio-preparse" in held[3] and [name[:5] for name in held[4:]] == ["pipe:"] * 2
    os.kill(offer.pid, signal.SIGSTOP)
    os.waitpid(offer.pid, os.WUNTRACED)
    job = ask(tuple(ME), message_lines(path))
    assert job is not None and select.select([job], [], [], 0)[0] == []
    os.kill(offer.pid, signal.SIGKILL)
    assert answered(job) is None and reaped(offer)


def test_a_child_caught_up_with_takes_no_request(tmp_path: Path) -> None:
    path = session_file(tmp_path / "s.jsonl", conversation(2))
    assert preparse.start(str(path))
    offer = preparse._OFFERS[-1]
    os.kill(offer.pid, signal.SIGSTOP)  # may have finished, or not begun
    assert read_session(path) is not None
    if not preparse._KEPT:  # caught up with: killed, reaped, nothing to ask
        assert reaped(offer)
        assert ask(tuple(ME), [2]) is None


# --- what each side imports -----------------------------------------------------------------


def test_the_child_and_the_parents_side_import_only_the_standard_library() -> None:
    code = textwrap.dedent(
        """
        import json, sys
        before = set(sys.modules)
        import pitrio._preparse_prefix
        parent = sorted(set(sys.modules) - before)
        import pitrio._preparse_child, pitrio._prefix_chat
        child = sorted(set(sys.modules) - before)
        print(json.dumps([parent, child]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    parent, child = orjson.loads(out.stdout)

    def outside(names: list[str]) -> list[str]:
        top = {name.partition(".")[0] for name in names}
        return sorted(top - set(sys.stdlib_module_names) - {"pitrio"})

    ours = {"pitrio", "pitrio._preparse", "pitrio._preparse_guess", "pitrio._preparse_prefix"}
    assert outside(parent) == [] and {n for n in parent if n.startswith("pitrio")} == ours
    assert outside(child) == ["orjson"]
    assert {n for n in child if n.startswith("pitrio")} == {
        *ours,
        "pitrio._preparse_child",
        "pitrio._prefix_chat",
    }
