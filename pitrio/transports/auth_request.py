"""Parsing ``pitrio auth print-api-key | print-bearer-token | check`` as pi 1.6.0 does.

Pure: :func:`parse_auth_request` turns the words after ``auth`` into an :class:`AuthRequest`
or raises :class:`AuthUsageError` with pi 1.6.0's message and exit code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import attrs

from pitrio.errors import PitrioError

Kind = Literal["check", "api_key", "bearer_token"]
KINDS: dict[str, Kind] = {
    "check": "check",
    "print-api-key": "api_key",
    "print-bearer-token": "bearer_token",
}
COMMAND_NAMES: dict[Kind, str] = {
    "check": "auth check",
    "api_key": "auth print-api-key",
    "bearer_token": "auth print-bearer-token",
}
USAGES: dict[Kind, str] = {
    "check": "pitrio auth check --provider <provider> [--json] [--credentials] [--no-refresh]",
    "api_key": "pitrio auth print-api-key --provider <provider> [--model <model>]",
    "bearer_token": (
        "pitrio auth print-bearer-token --provider <provider> [--model <model>] "
        "[--min-expiry <duration>]"
    ),
}
DEFAULT_MIN_EXPIRY_MS = 30 * 60_000
"""``print-bearer-token`` renews a token with less than this left (pi 1.6.0's 30 minutes)."""

_DURATION = re.compile(r"^(\d+)(ms|s|m|h)$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000}


class AuthUsageError(PitrioError):
    """A command line ``pitrio auth`` cannot run; ``lines`` go to stderr as they are (an
    unknown option's two lines) when given, else ``Error: <message>``."""

    def __init__(self, message: str, *, code: int = 1, lines: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.lines = lines


@attrs.frozen(kw_only=True)
class AuthRequest:
    """One credential command: what to resolve and how to print it."""

    kind: Kind
    provider: str | None = None
    model: str | None = None
    json: bool = False
    credentials: bool = False
    no_refresh: bool = False
    min_expiry_ms: int = DEFAULT_MIN_EXPIRY_MS


def parse_auth_request(argv: Sequence[str]) -> AuthRequest:
    """``argv``: the words after ``auth`` (``check --provider x --json``)."""
    kind = KINDS.get(argv[0]) if argv else None
    if kind is None:
        word = argv[0] if argv else ""
        raise AuthUsageError(
            f'Unknown auth command "{word}". Use "pitrio auth login", "pitrio auth logout", '
            '"pitrio auth print-api-key", "pitrio auth print-bearer-token", or '
            '"pitrio auth check".'
        )
    fields: dict[str, object] = {}
    rest: list[str] = []
    words = list(argv[1:])
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word == "--min-expiry":
            if kind != "bearer_token":
                raise AuthUsageError("--min-expiry is only supported by print-bearer-token")
            value = words[index] if index < len(words) else ""
            index += 1
            match = _DURATION.match(value)
            if match is None:
                raise AuthUsageError("--min-expiry must use a duration such as 30m or 1h")
            fields["min_expiry_ms"] = int(match[1]) * _UNIT_MS[match[2].lower()]
        elif word in ("--json", "--credentials", "--no-refresh"):
            if kind != "check":
                raise AuthUsageError(f"{word} is only supported by auth check")
            fields[word[2:].replace("-", "_")] = True
        else:
            rest.append(word)
    provider, model = _provider_and_model(kind, rest)
    if not provider and not model:
        if kind == "check":
            raise AuthUsageError(
                "Auth checks require --provider <provider> or --model <model>", code=2
            )
        raise AuthUsageError(
            "Credential printing requires --provider <provider> or --model <model>"
        )
    return AuthRequest(kind=kind, provider=provider, model=model, **fields)  # type: ignore[arg-type]


def _provider_and_model(kind: Kind, words: Sequence[str]) -> tuple[str | None, str | None]:
    """``--provider`` and ``--model`` (``--name=value`` too); ``--offline`` is accepted and
    means nothing here; any other option is unknown, any other word refused."""
    values: dict[str, str | None] = {"provider": None, "model": None}
    foreign = False
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        name, eq, inline = word.partition("=")
        if name in ("--provider", "--model"):
            if eq:
                value = inline
            elif index < len(words):
                value = words[index]
                index += 1
            else:
                raise AuthUsageError(f"{name} requires a value", code=2 if kind == "check" else 1)
            values[name[2:]] = value.strip() or None
        elif word == "--offline":
            continue
        elif name == "--api-key":
            foreign = True
            index += 0 if eq else 1
        elif word.startswith("-") and word != "-":
            option = name.lstrip("-")
            raise AuthUsageError(
                f"Unknown option --{option}",
                lines=(
                    f'Unknown option --{option} for "{COMMAND_NAMES[kind]}".',
                    f'Use "pitrio --help" or "{USAGES[kind]}".',
                ),
            )
        else:
            foreign = True
    if foreign:
        raise AuthUsageError(
            "Auth commands only accept --provider and --model", code=2 if kind == "check" else 1
        )
    return values["provider"], values["model"]
