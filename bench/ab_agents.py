"""The agents an interleaved A/B run of the long stream takes turns with.

``bench.stream_ab`` and ``bench.stream_phases`` take the same arguments and run the same three
agents: pi 1.6.0 (with ``--pi-cli``), an older pitrio package (with ``--before``) and this
checkout's pitrio. Each tool says how pi is started; the pitrio commands are made here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from bench.side_by_side import PITRIO, use_node_beside, use_pi_bin

PYTHON = PITRIO.parent / "python"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--pi-cli``, ``--before``, ``--rounds`` and ``--stream``."""
    parser.add_argument("--pi-cli", type=Path)
    parser.add_argument("--before", type=Path, help="an older pitrio package's parent dir")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stream", default="20000x4")


def agents(
    args: argparse.Namespace, pi_command: Callable[[Path], str], pythonpath: str = ""
) -> list[tuple[str, str]]:
    """(label, command) of each agent in turn order; ``pythonpath`` goes before each pitrio
    tree (a directory of ``sitecustomize`` that both trees load)."""
    commands: list[tuple[str, str]] = []
    if args.pi_cli:
        use_node_beside(args.pi_cli)
        commands.append(("pi", pi_command(use_pi_bin(args.pi_cli))))
    prefix = f"{pythonpath}:" if pythonpath else ""
    if args.before:
        # An older package may predate the console script's launcher: its command line's
        # own module, run by this checkout's interpreter.
        before = f"PYTHONPATH={prefix}{args.before} "
        commands.append(("before", _pitrio(before, f"{PYTHON} -m pitrio.transports.cli")))
    after = f"PYTHONPATH={pythonpath} " if pythonpath else ""
    commands.append(("after", _pitrio(after, str(PITRIO))))
    return commands


def _pitrio(environment: str, program: str) -> str:
    """The RPC-mode command of a pitrio tree; ``{agent_dir}`` is filled in per run."""
    return f"env {environment}PITRIO_AGENT_DIR={{agent_dir}} {program} --mode rpc"
