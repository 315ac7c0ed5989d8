"""The differential harness: real pi 0.73.1 and pitrio through the same scenarios.

Every scenario of ``pi_scenarios`` runs against both agents (all of them concurrently, on first
use, a few at a time), each in its own sandbox with its own mock LLM; the test of a scenario
fails when a difference is neither a documented one (``pi_allowances.DOCUMENTED``, each also a
row of the README's table) nor one being fixed elsewhere (``PENDING_FIX``: an expected failure
until its fix is merged). Skipped, with the reason, where node >= 20 or pi 0.73.1 is missing
(``.ci/run`` installs pi into a cache folder outside the repository).

The provider-kind dimension (``pi_kinds``): the same scenarios against a loopback vendor of each
other API kind pi speaks, compared on the requests (``pi_compare_kinds``); which pairs run is
``PITRIO_INTEROP_KINDS``'s choice (unset: every kind with the scenarios that shape bodies; ``all``:
every scenario of every kind). Their results are named ``KIND/SCENARIO``.

``python -m tests.interop.test_pi_differential [NAME ...]`` prints every difference of the named
scenarios (all when none is named; ``KIND/NAME`` for another kind; with the kinds the
environment chooses) and the counts, per kind.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.interop.pi_allowances import (
    DOCUMENTED,
    FOUND_UNFIXED,
    PENDING_FIX,
    TIMING,
    classify,
    unused,
)
from tests.interop.pi_compare import Diff, compare
from tests.interop.pi_compare_kinds import compare_requests
from tests.interop.pi_install import find_pi_cli
from tests.interop.pi_kinds import COMPLETIONS, matrix
from tests.interop.pi_runner import run_both
from tests.interop.pi_scenarios import BY_NAME, SCENARIOS
from tests.interop.pi_steps import Scenario
from tests.shared_dir import ROOT

PI_CLI, SKIP_REASON = find_pi_cli()
WORKERS = int(os.environ.get("PITRIO_INTEROP_WORKERS", "4"))
RESULTS: dict[str, list[Diff]] = {}
TIMES: dict[str, float] = {}
Job = tuple[str, Scenario]
KIND_JOBS: list[Job] = matrix(SCENARIOS)


def job_name(kind: str, scenario: Scenario) -> str:
    """A result's name: the scenario's, ``KIND/`` before it for a kind other than completions."""
    return scenario.name if kind == COMPLETIONS else f"{kind}/{scenario.name}"


def run_all(
    jobs: list[Job], base: Path, pair: tuple[str, str] = ("pi", "pitrio")
) -> dict[str, list[Diff]]:
    """The differences of each (kind, scenario), ``WORKERS`` of them run at a time."""
    assert PI_CLI is not None

    def one(job: Job) -> tuple[str, list[Diff]]:
        kind, sc = job
        t0 = time.monotonic()
        runs = run_both(sc, PI_CLI, base, kind, pair)
        name = job_name(kind, sc)
        TIMES[name] = time.monotonic() - t0
        judge = compare if kind == COMPLETIONS else compare_requests
        return name, judge(runs["pi"], runs["pitrio"])

    # The slow scenarios (preludes, retries) start first so they overlap the rest.
    order = sorted(jobs, key=lambda j: (j[1].prelude is None, "retry" not in j[1].name))
    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(pool.map(one, order))


@pytest.fixture(scope="module")
def differences() -> Iterator[dict[str, list[Diff]]]:
    if PI_CLI is None:
        pytest.skip(SKIP_REASON)
    base = Path(tempfile.mkdtemp(prefix="pitrio-interop-"))
    try:
        t0 = time.monotonic()
        RESULTS.update(run_all([(COMPLETIONS, sc) for sc in SCENARIOS] + KIND_JOBS, base))
        TIMES["<all>"] = time.monotonic() - t0
        yield RESULTS
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize(
    "name", [sc.name for sc in SCENARIOS] + [job_name(k, sc) for k, sc in KIND_JOBS]
)
def test_scenario(name: str, differences: dict[str, list[Diff]]) -> None:
    _, pending, found, unknown = classify(name, differences[name])
    assert not unknown, "\n".join(f"{d.path}  |  {d.detail}" for d in unknown)
    if found:
        pytest.xfail("undocumented, reported: " + "; ".join(sorted({d.path for d in found})))
    if pending:
        pytest.xfail("pending fix: " + "; ".join(sorted({d.path for d in pending})))


def test_documented_differences_are_in_the_readme() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    missing = sorted({text for _, _, text in DOCUMENTED if " ".join(text.split()) not in readme})
    assert not missing, f"allowed differences without a row in README.md's table: {missing}"


def test_allowances_have_reasons() -> None:
    for scenario, path, reason in [*DOCUMENTED, *TIMING, *PENDING_FIX, *FOUND_UNFIXED]:
        assert scenario and path and len(reason) > 10, (scenario, path, reason)


def test_allowance_paths_take_brackets_literally() -> None:
    # "[]" in an entry's path is an array in the diff's path, not a character class.
    documented, _, _, unknown = classify(
        "compact_manual",
        [Diff("request.messages[].content[].text", "x"), Diff("request.messages[]x", "y")],
    )
    assert [d.path for d in documented] == ["request.messages[].content[].text"]
    assert [d.path for d in unknown] == ["request.messages[]x"]


def kind_of(name: str) -> str:
    """The API kind of a result's name."""
    return name.split("/", 1)[0] if "/" in name else COMPLETIONS


def counts_by_kind(results: dict[str, list[Diff]]) -> dict[str, dict[str, int]]:
    """:func:`counts` of each kind's results."""
    kinds = sorted({kind_of(n) for n in results}, key=lambda k: (k != COMPLETIONS, k))
    return {k: counts({n: d for n, d in results.items() if kind_of(n) == k}) for k in kinds}


def counts(results: dict[str, list[Diff]]) -> dict[str, int]:
    """Scenarios, identical, documented only, pending-fix, undocumented."""
    c = dict.fromkeys(("scenarios", "identical", "documented", "pending-fix", "undocumented"), 0)
    c["scenarios"] = len(results)
    for name, diffs in results.items():
        documented, pending, found, unknown = classify(name, diffs)
        if unknown or found:
            c["undocumented"] += 1
        elif pending:
            c["pending-fix"] += 1
        elif documented:
            c["documented"] += 1
        else:
            c["identical"] += 1
    return c


def main(argv: list[str]) -> int:
    """Print the differences of the named scenarios (all when none) and the counts.

    ``--self-check`` runs pi against pi instead: what differs then is what two runs of the same
    agent do differently (timing, or a volatile value the normaliser does not know), each
    printed; none should be listed in ``pi_allowances`` as a difference of pitrio's.
    """
    if PI_CLI is None:
        print(SKIP_REASON)
        return 1
    pair = ("pi", "pitrio")
    if "--self-check" in argv:
        argv = [a for a in argv if a != "--self-check"]
        pair = ("pi", "pi")
    jobs: list[Job] = [
        (n.split("/")[0], BY_NAME[n.split("/")[1]]) if "/" in n else (COMPLETIONS, BY_NAME[n])
        for n in argv
    ] or [(COMPLETIONS, sc) for sc in SCENARIOS] + KIND_JOBS
    base = Path(tempfile.mkdtemp(prefix="pitrio-interop-"))
    t0 = time.monotonic()
    results = run_all(jobs, base, pair)
    shutil.rmtree(base, ignore_errors=True)
    if pair == ("pi", "pi"):
        for name in (job_name(k, sc) for k, sc in jobs):
            print(f"== {name} ({TIMES[name]:.1f} s): {len(results[name])} difference(s)")
            for d in results[name]:
                print(f"  {d.path}  |  {d.detail}")
        clean = sum(1 for diffs in results.values() if not diffs)
        print(f"pi against pi: {clean} of {len(results)} scenarios without a difference")
        return 0
    show_all = bool(os.environ.get("SHOW_ALL"))
    for name in (job_name(k, sc) for k, sc in jobs):
        documented, pending, found, undocumented = classify(name, results[name])
        print(
            f"== {name} ({TIMES[name]:.1f} s): {len(documented)} documented, "
            f"{len(pending)} pending, {len(found)} found, {len(undocumented)} undocumented"
        )
        for label, group in (
            ("UNDOC", undocumented),
            ("PEND", pending),
            ("FOUND", found),
            ("DOC", documented if show_all else []),
        ):
            for d in group:
                print(f"  {label} {d.path}  |  {d.detail}")
    for kind, c in counts_by_kind(results).items():
        print(kind, c)
    print(counts(results), f"{time.monotonic() - t0:.1f} s")
    if not argv:  # every job ran: an allowance nothing matched is stale
        for scenario, path, reason in unused(results):
            print(f"UNUSED {scenario}  {path}  ({reason[:60]})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
