"""The replaceable session of a process: new, switch, fork, clone; one event stream."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from pitrio.actors.model_router import FauxProvider, RouterConfig, start_model_router
from pitrio.actors.session.bootstrap import SessionOptions
from pitrio.actors.session.runtime import SessionRuntime
from pitrio.errors import PitrioError
from pitrio.messages.agent import UserMessage
from pitrio.messages.content import text_of
from pitrio.messages.entries import MessageEntry


async def test_new_switch_fork_clone(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    options = SessionOptions(
        cwd=str(tmp_path), model="faux/faux-1", session_dir=str(tmp_path / "s"), agent_dir=agent
    )
    async with trio.open_nursery() as nursery:
        router = await start_model_router(
            nursery, FauxProvider(), config=RouterConfig(catalogue=False)
        )
        runtime = SessionRuntime(nursery, router)
        first = await runtime.start(options)
        await first.session.prompt("question one")
        await first.session.prompt("question two")
        first_file = first.store.path
        assert first_file is not None and first_file.exists()

        # fork before the second question: the new session holds the first exchange.
        entries = await first.store.entries()
        second_question = next(
            e
            for e in entries
            if isinstance(e, MessageEntry)
            and isinstance(e.message, UserMessage)
            and text_of(e.message.content) == "question two"
        )
        text = await runtime.fork(second_question.id)
        assert text == "question two"
        forked = runtime.current
        assert forked.store.header.id != first.store.header.id
        # pi 1.6.0: the session's system message, stored first, is part of the copied branch.
        roles = [m.role for m in await forked.store.context_messages()]
        assert roles == ["system", "user", "assistant"]
        with pytest.raises(PitrioError, match="Invalid entry ID for forking"):
            await runtime.fork(entries[0].id)

        # clone duplicates the current branch.
        await forked.session.prompt("question three")
        await runtime.clone()
        cloned = runtime.current
        roles = [m.role for m in await cloned.store.context_messages()]
        assert roles == ["system", "user", "assistant", "user", "assistant"]

        # new session with a parent, then switch back to the first file.
        fresh = await runtime.new_session(parent_session=str(first_file))
        assert fresh.store.header.parent_session == str(first_file)
        assert await fresh.store.context_messages() == ()
        back = await runtime.switch_session(str(first_file))
        roles = [m.role for m in await back.store.context_messages()]
        assert roles == ["system", "user", "assistant", "user", "assistant"]

        # Events of every session come out of the one stream.
        await back.session.prompt("after switching")
        seen: list[str] = []
        while True:
            await trio.testing.wait_all_tasks_blocked()
            try:
                seen.append(runtime.events.receive_nowait().event.type)
            except trio.WouldBlock:
                break
        assert seen.count("agent_settled") >= 1
        await runtime.aclose()
        nursery.cancel_scope.cancel()
