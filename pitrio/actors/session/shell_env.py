"""The environment of the model's bash commands: the process's, plus pi 1.6.0's description of
the session (``docs/environment-variables.md``): ``PI_SESSION_ID``, ``PI_SESSION_FILE`` (unset
for a session without a file), ``PI_PROVIDER``, ``PI_MODEL`` and ``PI_REASONING_LEVEL``.

The values are read when each command starts (the bash tool copies its environment then), so a
model or thinking level changed mid-session shows in the next command. User ``!`` commands do
not get them, as in pi.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, KeysView, Mapping
from pathlib import Path

from pitrio.actors.agent_loop import AgentLoopHandle

SESSION_VARIABLES = ("PI_SESSION_ID", "PI_SESSION_FILE", "PI_PROVIDER", "PI_MODEL")
REASONING_VARIABLE = "PI_REASONING_LEVEL"


class SessionShellEnvironment(Mapping[str, str]):
    """``os.environ`` with the session's ``PI_*`` variables over it, computed on each read.

    The loop is bound once it exists (:meth:`bind`): the tool executor, which holds this, starts
    before it; until then the model's variables are left out.
    """

    def __init__(self, session_id: str, session_file: Path | None) -> None:
        self._session_id = session_id
        self._session_file = session_file
        self._loop: AgentLoopHandle | None = None
        self._snapshot: dict[str, str] | None = None

    def bind(self, loop: AgentLoopHandle) -> None:
        """Read the model and thinking level from ``loop`` from now on."""
        self._loop = loop

    def current(self) -> dict[str, str]:
        """The whole environment as it is now."""
        env = {k: v for k, v in os.environ.items() if k not in SESSION_VARIABLES}
        env.pop(REASONING_VARIABLE, None)  # a parent pi's values never leak through
        env["PI_SESSION_ID"] = self._session_id
        if self._session_file is not None:
            env["PI_SESSION_FILE"] = str(self._session_file)
        if self._loop is not None:
            facts = self._loop.facts()
            env["PI_PROVIDER"] = facts.model.provider
            env["PI_MODEL"] = facts.model.id
            env[REASONING_VARIABLE] = facts.thinking_level
        return env

    # ``dict(env)``, which is how the bash tool copies it when a command starts, asks for the
    # keys once and then for each value: the keys' read takes the snapshot the values come
    # from (until the next keys' read), so one command sees one consistent environment,
    # built once.

    def keys(self) -> KeysView[str]:
        """The variables' names, from a snapshot taken now."""
        self._snapshot = self.current()
        return self._snapshot.keys()

    def __getitem__(self, key: str) -> str:
        source = self._snapshot if self._snapshot is not None else self.current()
        return source[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.current())
