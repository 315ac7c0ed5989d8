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
