"""What an ``Invoke`` operation sees of the session actor (``DESIGN.md`` §2).

The session handle's operations are sent as ``Invoke(operation)`` and run in the actor's own
task, so they may touch its state. Typing them against this protocol instead of the actor class
keeps the handle and the commands free of an import of the actor (which imports them): mypy
checks that :class:`~pitrio.actors.session.actor.SessionActor` provides every method here where
the actor runs an operation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from pitrio.actors.session.operations import SessionOperations
    from pitrio.actors.session_store.tree import TreeNode
    from pitrio.messages.agent import CustomMessage


class SessionTarget(Protocol):
    """The session actor as its handle's operations call it."""

    @property
    def operations(self) -> SessionOperations:
        """Settings, model and thinking, name and stats (an object the actor owns)."""
        ...

    @property
    def queries(self) -> QueryTarget:
        """Entries, tree, fork points, last reply, warmer status and exports (read-only)."""
        ...

    async def abort_retry(self) -> None:
        """Cancel a pending retry sleep."""
        ...

    async def abort_bash(self) -> None:
        """Cancel the running user command, if any."""
        ...

    async def send_custom_message(
        self,
        message: CustomMessage,
        *,
        trigger_turn: bool,
        deliver_as: Literal["steer", "followUp", "nextTurn"] | None,
    ) -> None:
        """Queue, run or record an extension's custom message."""
        ...

    async def commands(self) -> list[dict[str, Any]]:
        """``get_commands``: extension commands, prompt templates and skills."""
        ...

    async def emitted_seq(self) -> int:
        """The ``seq`` of the last event emitted."""
        ...

    async def append_custom_entry(self, custom_type: str, data: Any = None) -> str:
        """An extension's ``custom`` entry; its id."""
        ...

    async def set_label(self, entry_id: str, label: str | None) -> None:
        """Label an entry (``None`` clears it)."""
        ...

    async def set_prompt_section(self, name: str, text: str | None) -> None:
        """Replace (``None``: remove) a prompt section the session's parts add."""
        ...

    async def notify(self, message: str, notify_type: str) -> None:
        """Tell the clients ``message`` (an ``extension_ui_request`` ``notify``)."""
        ...


class QueryTarget(Protocol):
    """The session's read-only questions (:class:`~pitrio.actors.session.queries.SessionQueries`),
    typed here so the handle needs no import of the module that answers them."""

    async def entry_lines(self) -> tuple[list[tuple[str, bytes]], str | None]:
        """Every entry as (id, JSON) in append order, and the leaf id."""
        ...

    async def tree(self) -> tuple[list[TreeNode], str | None]:
        """The session tree's roots and the leaf id."""
        ...

    async def fork_messages(self) -> list[tuple[str, str]]:
        """The user messages a fork may start before: (entry id, text)."""
        ...

    async def last_assistant_text(self) -> str | None:
        """The last assistant reply's text."""
        ...

    async def cache_warming(self) -> dict[str, Any]:
        """The prompt-cache warmer's mode and status (``/session``'s block)."""
        ...

    async def export_html(self, output_path: str | None) -> str:
        """Write the session as an HTML page; its path."""
        ...

    async def export_jsonl(self, output_path: str | None) -> str:
        """Write the current branch as a new session file; its path."""
        ...
