"""A worker's ``/v1/host`` endpoint: the same protocol, answered across every worker.

``list`` and ``search`` gather each worker's rows through the acceptor and keep, per session,
the row of the worker that has it loaded (every worker reads the same files, so each lists
every session, but only the owner knows it is running). A command naming one session goes to
the worker owning it (the acceptor says which, giving an unowned session to this worker); a
``create`` makes the session here and claims it before answering, so the client's next
connection reaches this worker.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from pitrio.errors import PitrioError
from pitrio.sdk.host import idempotent_session_id, validate_session_id
from pitrio.transports.daemon.context import DaemonContext
from pitrio.transports.daemon.host_socket import (
    NAMED_COMMANDS,
    HostSocket,
    session_id_of,
)
from pitrio.transports.daemon.workers.channel import ControlChannel
from pitrio.transports.rpc.protocol import MISSING, Request


class WorkerContext(DaemonContext, Protocol):
    """What this endpoint needs of its worker's server (``worker.WorkerServer``), named
    here so that the server can import the endpoint without a circle."""

    slot: int
    link: ControlChannel
    host_clients: set[ClusterHostSocket]
    """The worker's host clients (they add and remove themselves)."""

    async def claim(self, session: str) -> int:
        """The worker owning ``session`` once this worker asked for it."""
        ...

    async def forward(self, owner: int, request: Request) -> Any:
        """Worker ``owner``'s answer to ``request``."""
        ...


def merge_rows(answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One listing from every worker's: a session's row from the worker that has it loaded
    (any other status than ``evicted``, its slot added as ``worker``), else the first; newest
    first."""
    rows: dict[str, dict[str, Any]] = {}
    for answer in answers:
        for row in answer.get("data") or ():
            session = row.get("id")
            known = rows.get(session)
            loaded = row.get("status") != "evicted"
            if loaded:  # which worker has it: for operators (and the tests)
                row = {**row, "worker": answer.get("worker")}
            if known is None or (loaded and known.get("status") == "evicted"):
                rows[session] = row
    merged = list(rows.values())
    merged.sort(key=lambda row: str(row.get("modified", "")), reverse=True)
    return merged


def encode_result(data: Any) -> dict[str, Any]:
    """A host command's result as a control answer (``MISSING``: a response without data)."""
    return {} if data is MISSING else {"data": data}


def decode_result(answer: Any) -> Any:
    """The inverse of :func:`encode_result`."""
    if isinstance(answer, dict) and "data" in answer:
        return answer["data"]
    return MISSING


class ClusterHostSocket(HostSocket):
    """``/v1/host`` for one client of a worker."""

    def __init__(self, server: WorkerContext, ws: Any) -> None:
        super().__init__(server, ws)
        self.worker = server

    async def run(self) -> None:
        """Serve until either side closes; the other workers' host events come too."""
        try:
            await super().run()
        finally:
            self.worker.host_clients.discard(self)

    def attached(self) -> None:
        """From now on, the other workers' host events are this client's too (after its
        ``host_attached``, as the worker's own)."""
        self.worker.host_clients.add(self)

    def relayed(self, event: dict[str, Any]) -> None:
        """Another worker's host event (bounded: a client too slow for them is closed)."""
        self._push(event)

    async def _command(self, request: Request) -> Any:
        if request.type in ("list", "search"):
            fields: dict[str, Any] = {}
            if request.type == "search":
                query = request.get("query")
                if not isinstance(query, str):
                    raise PitrioError("search: query must be a string")
                fields["query"] = query
            answers = await self.worker.link.call("gather", what=request.type, **fields)
            return {"sessions": merge_rows(answers)}
        if request.type in NAMED_COMMANDS:
            owner = await self.worker.claim(validate_session_id(session_id_of(request)))
            if owner != self.worker.slot:
                return await self.worker.forward(owner, request)
        return await super()._command(request)

    async def create(self, request: Request) -> Any:
        """A create with an ``idempotencyKey`` names its session: the worker owning it
        answers (without the trust dialog, which needs this connection). Any other create
        goes to the worker owning fewest sessions (so one client's sessions spread), except
        one asking for the trust dialog, made here where the client can be asked; either
        way the session is claimed before the client learns its id."""
        if request.get("idempotencyKey") is not None:
            session = idempotent_session_id(request.get("idempotencyKey"))
            owner = await self.worker.claim(session)
            if owner != self.worker.slot:
                return await self.worker.forward(owner, request)
        elif request.get("trustDialog") is not True and _passable(request):
            target = int(await self.worker.link.call("place"))
            if target != self.worker.slot:
                return await self.worker.forward(target, request)
        data = await super().create(request)
        await self.worker.claim(data["sessionId"])
        return data


def _passable(request: Request) -> bool:
    """Whether ``request`` can travel to another worker (JSON text: a client's lone surrogate
    cannot); one that cannot is answered here, with the error a one-process daemon gives."""
    try:
        orjson.dumps(request.fields)
    except orjson.JSONEncodeError:
        return False
    return True
