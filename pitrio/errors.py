"""The one exception tree of pitrio.

Every error pitrio raises through a public API is a :class:`PitrioError`. Each class says whether
the failure is worth retrying (``retryable``): a provider overload is, a malformed session line
is not. Internal ``ExceptionGroup``s are unwrapped before they reach a caller.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class PitrioError(Exception):
    """Root of every error pitrio raises on purpose."""

    retryable: bool = False


class DecodeError(PitrioError, ValueError):
    """A JSON value did not match the type it was decoded as; the message names type and field."""


class UnencodableTextError(PitrioError, ValueError):
    """A string bound for the OS (a command line, a path, an environment value, a pipe or a
    socket) holds what no encoding there can carry: a NUL character or a lone surrogate. The
    message names the field and the offset (see :mod:`pitrio.messages.ostext`)."""


class ActorStoppedError(PitrioError):
    """The actor behind a handle has stopped, so the command cannot be answered."""


class ReplyTimeoutError(PitrioError):
    """An actor did not answer a command before the caller's deadline."""

    retryable = True


class AgentBusyError(PitrioError):
    """A prompt or continue was refused because a run is already active."""


class ContinueError(PitrioError):
    """``continue()`` was called on a transcript it cannot continue from."""


class UnknownModelError(PitrioError):
    """A model reference (``provider/id``) names no registered model."""


class ProviderError(PitrioError):
    """A model provider failed; ``retryable`` says whether asking again may help."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class ToolError(PitrioError):
    """A tool failed; its message becomes the text of an error tool result."""


class ToolNotFoundError(ToolError):
    """The model called a tool that is not registered."""


def unwrap_group(exc: BaseException) -> BaseException:
    """Return the single leaf of nested one-member exception groups, else ``exc`` itself.

    Nurseries wrap errors in ``ExceptionGroup``; a public API re-raises the leaf so callers
    can catch the :class:`PitrioError` they expect.
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@contextmanager
def collapse_groups() -> Iterator[None]:
    """Re-raise a nursery's single-error ``ExceptionGroup`` as that error.

    Public APIs wrap their nurseries in this so callers see ``UnknownModelError``, not a group.
    Groups of several errors are left as they are.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        leaf = unwrap_group(group)
        if leaf is group:
            raise
        raise leaf from None


# -- model router (issue 5) ------------------------------------------------------------------


class ModelsJsonError(PitrioError, ValueError):
    """A ``models.json`` entry is invalid; the message names the file, the entry and the field.

    ``file``, ``entry`` (e.g. ``providers.ollama.models[0]``) and ``field`` (e.g.
    ``contextWindow``, empty when the entry itself is wrong) are kept for programs.
    """

    def __init__(self, file: str, entry: str, field: str, problem: str) -> None:
        where = f"{entry}.{field}" if entry and field else entry or field or "(top level)"
        super().__init__(f"{file}: {where}: {problem}")
        self.file = file
        self.entry = entry
        self.field = field
        self.problem = problem


class CredentialError(PitrioError):
    """No usable credential for a provider; the message never contains a key."""


class AuthFileError(CredentialError):
    """``auth.json`` was refused: unreadable, malformed or readable by group/others."""


# -- session store (issue 3) -----------------------------------------------------------------


class SessionError(PitrioError):
    """A session file or session tree operation failed."""


class SessionFileError(SessionError, ValueError):
    """A session file cannot be used as it is; the message names the file and the line.

    ``path`` and ``line`` (1-based, 0 when the problem is not one line) are kept for programs;
    ``problems`` holds every problem found when the file was read, not only the first.
    """

    def __init__(
        self, path: str, line: int, problem: str, *, problems: tuple[object, ...] = ()
    ) -> None:
        where = f"{path}:{line}" if line else path
        more = len(problems) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""
        super().__init__(f"{where}: {problem}{suffix}")
        self.path = path
        self.line = line
        self.problem = problem
        self.problems = problems


class SessionPathError(SessionFileError):
    """A session path that cannot hold a session file: a device, FIFO, socket, directory, or a
    symbolic link to one of them or to nothing. The message names the path and what it is."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, 0, reason)
        self.reason = reason


class EntryNotFoundError(SessionError, KeyError):
    """An entry id names no entry of the session (pi's ``Entry <id> not found``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        # KeyError would quote the message; keep pi's plain text.
        return self.message


class SessionLockedError(SessionError):
    """Another live writer holds the session's lease; the message names it (pid, host)."""

    retryable = True

    def __init__(self, message: str, *, pid: int | None, host: str | None, fence: int) -> None:
        super().__init__(message)
        self.pid = pid
        self.host = host
        self.fence = fence


class StaleFenceError(SessionError):
    """A write carried a lease fence older than the session's current one; it was refused."""


class SessionFileReplacedError(SessionError, OSError):
    """The session file was removed, or another file put in its place, since the store opened
    it; nothing was appended (an ``OSError``, so the store turns read-only as on a failed
    write). The message names the path and what is there now."""


class ReadOnlySessionError(SessionError):
    """The session store was opened read-only, so it cannot append."""


class SessionNotFoundError(SessionError):
    """A ``--session`` argument matched no session file (by path or id prefix)."""


class SummarizationError(PitrioError):
    """A summary request (compaction or branch summary) failed; the message is pi's text."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class ToolArgumentsError(ToolError):
    """A tool call's arguments do not match the tool's schema; the message is pi's text."""


class ToolRegistryError(ToolError):
    """A tool definition cannot be registered (bad name, bad schema, clashing built-in)."""


class VirtualRoutingError(PitrioError):
    """A virtual model could not be routed to an available physical model."""
