"""``pitrio login PROVIDER``: log in to a subscription provider and store its OAuth tokens.

The tokens go to the agent dir's ``auth.json`` (``$PITRIO_AGENT_DIR``; point it at pi's agent
dir to share the login with pi) as pi stores them. Prompts and the URL to open are written to
stdout; the answers are read from stdin, one line each. Exit codes: 0 logged in, 1 the login
failed (the reason on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import trio

from pitrio.errors import PitrioError
from pitrio.sdk.oauth import AUTH_FILE_NAME, PROVIDER_NAMES, agent_dir, login, save_entry


def _show(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _ask(prompt: str) -> str:
    sys.stdout.write(prompt)
    sys.stdout.flush()
    line: str = await trio.to_thread.run_sync(sys.stdin.readline)
    if not line:
        raise PitrioError("no answer: stdin was closed")
    return line.rstrip("\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``pitrio login`` (also read by the completion script)."""
    parser = argparse.ArgumentParser(prog="pitrio login", description=__doc__.splitlines()[0])
    parser.add_argument("provider", choices=sorted(PROVIDER_NAMES))
    return parser


def login_main(argv: Sequence[str]) -> int:
    """Entry point of ``pitrio login``; returns the exit code."""
    args = build_parser().parse_args(list(argv))
    env = dict(os.environ)
    path = agent_dir(env) / AUTH_FILE_NAME
    try:
        credentials = trio.run(login, args.provider, _show, _ask, env)
        save_entry(path, args.provider, {"type": "oauth", **credentials})
    except PitrioError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("Login cancelled\n")
        return 130
    _show(f"Logged in to {PROVIDER_NAMES[args.provider]}; credentials saved to {path}")
    return 0
