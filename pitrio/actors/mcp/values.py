"""``env`` and ``headers`` values of an MCP server, resolved when the server starts.

The same rule as ``models.json`` keys (:mod:`pitrio.actors.model_router.config_value`): a
``!command`` value is the trimmed output of ``/bin/sh -c command``; anything else is a
template whose ``$NAME`` / ``${NAME}`` read the environment. A value that does not resolve
(an unset variable, a failing command) keeps the server from starting, with an error naming
the server and the field but never a resolved value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pitrio.actors.mcp.state import McpServerError
from pitrio.actors.model_router import config_value
from pitrio.actors.model_router.credentials import command_output
from pitrio.messages.ostext import os_text_problem

COMMAND_TIMEOUT = 10.0
"""Seconds a ``!command`` value may take (pi's limit for configured values)."""


async def _command_output(command: str) -> str | None:
    if os_text_problem(command, "command", from_os=True) is not None:
        return None
    value, _failure = await command_output(command, COMMAND_TIMEOUT)
    return value


async def resolve_value(spec: str, what: str, environ: Mapping[str, str] | None = None) -> str:
    """One value; raises :class:`McpServerError` (``what`` names the field) when it does not
    resolve."""
    environ = os.environ if environ is None else environ
    value = config_value.parse(spec)
    if isinstance(value, config_value.Command):
        resolved = await _command_output(value.command)
    else:
        resolved = config_value.expand(value, [environ])
    if resolved is None:
        raise McpServerError(config_value.unresolved_reason(what, value, [environ]))
    return resolved


async def resolve_values(
    values: Mapping[str, str], what: str, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Every value of ``values`` (``what``: e.g. ``MCP server "x" env``)."""
    return {
        key: await resolve_value(spec, f'{what} "{key}"', environ) for key, spec in values.items()
    }
