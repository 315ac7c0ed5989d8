"""``pitrio explore SCENARIO [--seeds N | --seed S] [--strategy random|pct]``.

Runs a scenario of the corpus (or ``all`` of them) under seeded schedules, checks the
invariants after each, and for a failing seed prints the seed, the invariant, the shortest
failing schedule prefix, and writes the trace of that run (``pitrio trace timeline`` /
``replay`` read it). See ``docs/research.md``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from pitrio.errors import PitrioError


class _Parser(argparse.ArgumentParser):
    """Unusable input exits 2 with the message (as ``pitrio trace`` does)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"Error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``pitrio explore``."""
    parser = _Parser(
        prog="pitrio explore",
        description="Run a scenario under seeded task schedules and check the invariants.",
    )
    parser.add_argument("scenario", nargs="?", help="a corpus scenario's name, or 'all'")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--seeds", type=int, default=20, metavar="N", help="seeds 0..N-1")
    chosen.add_argument("--seed", type=int, default=None, metavar="S", help="this seed only")
    parser.add_argument("--first-seed", type=int, default=0, metavar="K", help="start at K")
    parser.add_argument("--strategy", choices=("random", "pct"), default="random")
    parser.add_argument(
        "--out", default=".", metavar="DIR", help="where failing traces go (default: here)"
    )
    parser.add_argument("--keep-going", action="store_true", help="do not stop at a failure")
    parser.add_argument("--list", action="store_true", help="list the scenarios and invariants")
    parser.add_argument("--verbose", action="store_true", help="show the sessions' log")
    return parser


def _listing() -> str:
    from pitrio.sdk.explore import CORPUS, INVARIANTS

    lines = ["scenarios:"]
    lines.extend(f"  {s.name:38} {s.description}" for s in CORPUS)
    lines.append("invariants:")
    lines.extend(f"  {i.name:22} {i.summary}" for i in INVARIANTS)
    return "\n".join(lines) + "\n"


def run_explore_command(argv: Sequence[str]) -> int:
    """Entry point of ``pitrio explore``: exit 0 (every schedule kept the invariants),
    1 (a seed failed), 2 (unusable input)."""
    from pitrio.sdk.explore import CORPUS, explore, scenario_named

    args = build_parser().parse_args(list(argv))
    if args.list or args.scenario is None:
        sys.stdout.write(_listing())
        return 0 if args.list else 2
    if args.scenario == "all":
        scenarios = list(CORPUS)
    else:
        found = scenario_named(args.scenario)
        if found is None:
            sys.stderr.write(f"Error: no scenario {args.scenario!r} (pitrio explore --list)\n")
            return 2
        scenarios = [found]
    if args.seeds < 1:
        sys.stderr.write("Error: --seeds must be at least 1\n")
        return 2
    if not args.verbose:
        # A scenario provokes what the log reports (a foreign writer, an aborted request).
        logging.getLogger("pitrio").setLevel(logging.CRITICAL)
    seeds = (
        [args.seed]
        if args.seed is not None
        else range(args.first_seed, args.first_seed + args.seeds)
    )
    out = Path(args.out)
    failed = False
    for scenario in scenarios:
        try:
            found_run = explore(
                scenario, seeds, args.strategy, stop_after=0 if args.keep_going else 1
            )
        except PitrioError as exc:
            sys.stderr.write(f"Error: {exc}\n")
            return 2
        sys.stdout.write(found_run.summary())
        for failure in found_run.failures:
            failed = True
            sys.stdout.write(failure.describe(scenario.name, args.strategy))
            path = out / f"explore-{scenario.name}-{args.strategy}-{failure.seed}.jsonl"
            try:
                out.mkdir(parents=True, exist_ok=True)
                path.write_bytes(failure.trace)
            except OSError as exc:
                sys.stderr.write(f"Error: cannot write {path}: {exc.strerror or exc}\n")
                return 2
            sys.stdout.write(f"  trace: {path} (pitrio trace timeline {path})\n")
        sys.stdout.flush()
    return 1 if failed else 0
