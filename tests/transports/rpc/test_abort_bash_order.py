"""``abort_bash`` read after ``bash`` cancels it, whichever handler task runs first (issue 21).

Both lines arrive in one read, as on a loaded machine where the process starts after the
client wrote them; the server starts one handler per command and trio runs them in any
order. The test forces the bad order: the ``bash`` handler is held (before it reaches the
session) until every other task is blocked, so the ``abort_bash`` handler runs first.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import trio
import trio.testing

from pitrio.sdk.session import SessionHandle
from pitrio.transports.rpc.server import RpcServer
from tests.transports.rpc.harness import served


class BashComesLast(RpcServer):
    """Holds a ``bash`` handler's first step until nothing else can run."""

    async def session(self) -> SessionHandle:
        frame = trio.lowlevel.current_task().coro.cr_frame
        request = frame.f_locals.get("request") if frame is not None else None
        if getattr(request, "type", None) == "bash":
            await trio.testing.wait_all_tasks_blocked()
        return await super().session()


async def test_abort_bash_handled_first_still_cancels_the_bash_read_before_it(
    tmp_path: Path,
) -> None:
    async with served(tmp_path, server_type=BashComesLast) as client:
        lines = [
            {"id": "b", "type": "bash", "command": "sleep 5"},
            {"id": "a", "type": "abort_bash"},
        ]
        await client.send_raw(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        with trio.fail_after(20):
            answer = await client.response("b")
        assert answer["data"]["cancelled"] is True
        assert "exitCode" not in answer["data"]
        assert (await client.response("a"))["success"] is True
