"""The session's commands and types that concern its extensions, kept apart from the host.

The session's inbox and handle name these whether or not the session has extensions; the
host's own commands (:mod:`.host_commands`), its events and its runner are imported only by a
session that has some (issue 38: a start without extensions builds none of their classes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from pitrio.actors._actor import Reply
from pitrio.errors import PitrioError
from pitrio.messages.model import Model

if TYPE_CHECKING:  # only named: the UI protocol is imported by the first dialog answer
    from pitrio.actors.session.extensions.ui import UiResponse

InputSource = Literal["interactive", "rpc", "extension"]
"""Where a prompt's text came from (pi's ``input`` event ``source``)."""

Disposition = Literal["started", "queued", "handled"]
"""What became of an accepted prompt (pi 1.6.0's ``disposition``): its run started, it was
queued behind the running one, or an extension command or ``input`` handler took it."""


@attrs.frozen
class Accepted:
    """A prompt's acceptance: the ``seq`` of the last event emitted by then (what a transport
    writes before the prompt's response) and its :data:`Disposition`."""

    seq: int
    disposition: Disposition = "started"


@attrs.frozen
class UiAnswer:
    """A client's ``extension_ui_response`` (an unknown id is dropped, as in pi). Sent to the
    session, which hands it to its host."""

    response: UiResponse


@attrs.frozen
class Lifecycle:
    """Ask the extensions about the session's replacement or end: a ``session_before_*``
    event (answered with whether a handler cancelled) or ``session_shutdown`` (answered once
    every handler ran). Sent to the session, which hands it to its host."""

    event: str
    payload: Any
    reply: Reply[bool]


@attrs.frozen
class ScopedModel:
    """One model of the session's scope (pi's ``ScopedModel``): a model and the thinking level
    its pattern named."""

    model: Model
    thinking_level: str | None = None


@attrs.define(eq=False)
class ModelScope:
    """The models ``--models`` (or the ``enabledModels`` setting) scope the sessions to, which
    the transport resolves once a session has started (it needs the settings); shared by
    reference by the sessions started with the same options (replacements too). Empty: no
    scope, every available model can be used."""

    models: tuple[ScopedModel, ...] = ()


@attrs.define(eq=False)
class ShutdownRequest:
    """Where ``ctx.shutdown()`` asks the process to end (pi 1.6.0): the transport that made it
    ends once nothing needs it any more (RPC: no command unanswered and the session idle), as
    at the end of its input. A transport without one ignores the request, as pi's print
    mode does."""

    requested: trio.Event = attrs.field(factory=trio.Event)


class ExtensionApiError(PitrioError):
    """An extension used the API wrongly (unknown event, call before the session started)."""
