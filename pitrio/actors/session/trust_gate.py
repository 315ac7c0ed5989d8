"""The project-trust step of starting a session: gather the inputs, ask, decide, save.

:mod:`pitrio.actors.session.resources.trust` holds the rule; this shell reads the cwd,
``trust.json`` and the agent dir's ``defaultProjectTrust``, loads the user's and ``-e``
extensions first when their ``project_trust`` handlers may decide (pi 1.6.0's pre-trust
pass), asks a client when one can answer, and writes what is to be remembered.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from pitrio.actors.session.extensions.loader import LoadedExtensions
from pitrio.actors.session.resources.settings import (
    Settings,
    load_settings,
    project_dir_names,
    read_settings_file,
)
from pitrio.actors.session.resources.trust import (
    TRUST_FILE,
    UNTRUSTED_NOTICE,
    ExtensionAnswer,
    TrustDecision,
    TrustInputs,
    canonical_path,
    decide,
    default_trust,
    has_protected_resources,
    read_trust_file,
    save_decisions,
    trust_options,
    trust_prompt,
)

TrustAsker = Callable[[str, Sequence[str]], Awaitable[str | None]]
"""Shows a dialog (title, option labels) to the client creating the session; returns the
chosen label, or ``None`` when it was dismissed or nobody answered."""

HANDLER_TIMEOUT = 30.0
"""Seconds a ``project_trust`` handler may take (as the other handlers' default)."""


@attrs.frozen(kw_only=True)
class TrustOutcome:
    """The decision and the start-up warnings it brings."""

    trusted: bool
    decision: TrustDecision | None = None
    has_protected: bool = False
    notices: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class TrustProbe:
    """What the files say before any extension is consulted."""

    cwd: str
    has_protected: bool
    saved: dict[str, bool | None]
    default: str


def probe(cwd: str, agent: Path, home: Path) -> TrustProbe:
    """Read the cwd's protected files, ``trust.json`` and ``defaultProjectTrust`` (blocking)."""
    canonical = canonical_path(cwd)
    global_settings, _ = read_settings_file(agent / "settings.json")
    return TrustProbe(
        cwd=canonical,
        has_protected=has_protected_resources(canonical, project_dir_names(agent), home),
        saved=read_trust_file(agent),
        default=default_trust(global_settings.get("defaultProjectTrust")),
    )


def trusted_without_asking(cwd: str, agent: Path, home: Path) -> bool:
    """The decision from the files alone, no extension and no dialog (blocking): what the
    daemon's ``models`` command assumes of a session not yet started."""
    found = probe(cwd, agent, home)
    inputs = TrustInputs(
        cwd=found.cwd,
        has_protected=found.has_protected,
        saved=found.saved,
        default=default_trust(found.default),
    )
    return decide(inputs).trusted


async def ask_extensions(
    loaded: LoadedExtensions, cwd: str, mode: str
) -> tuple[ExtensionAnswer | None, list[str]]:
    """``project_trust`` to each handler in load order; the first yes or no wins. A handler
    that fails is reported (a warning line) and passed over, as in pi 1.6.0."""
    if not loaded.extensions:
        return None, []  # nobody to ask (the event's modules are not even imported)
    from pitrio.actors.session.extensions.events import (  # loaded with the extensions
        ProjectTrustContext,
        ProjectTrustEvent,
        ProjectTrustResult,
    )
    from pitrio.actors.session.extensions.runner import coerce

    event = ProjectTrustEvent(cwd=cwd)
    context = ProjectTrustContext(cwd=cwd, mode=mode)
    problems: list[str] = []
    for extension in loaded.extensions:
        for handler in list(extension.handlers_for("project_trust")):
            try:
                with trio.fail_after(HANDLER_TIMEOUT):
                    raw: Any = handler(event, context)
                    if inspect.isawaitable(raw):
                        raw = await raw
                result = coerce(raw, ProjectTrustResult)
            except trio.TooSlowError:
                problems.append(
                    f'Extension "{extension.path}" project_trust error: handler did not '
                    f"return within {HANDLER_TIMEOUT:g} s"
                )
                continue
            except Exception as exc:
                problems.append(f'Extension "{extension.path}" project_trust error: {exc}')
                continue
            if result is None or result.trusted not in ("yes", "no"):
                continue
            answer = ExtensionAnswer(trusted=result.trusted == "yes", remember=result.remember)
            return answer, [*problems, *context.notes]
    return None, [*problems, *context.notes]


async def settle_trust(
    found: TrustProbe,
    agent: Path,
    *,
    override: bool | None,
    extension: ExtensionAnswer | None,
    asker: TrustAsker | None,
) -> TrustOutcome:
    """Decide, ask the client when the rule says so, save what is to be remembered."""
    decision = decide(
        TrustInputs(
            cwd=found.cwd,
            override=override,
            has_protected=found.has_protected,
            saved=found.saved,
            default=default_trust(found.default),
            can_ask=asker is not None,
            extension=extension,
        )
    )
    trusted = decision.trusted
    updates = list(decision.save)
    if decision.ask and asker is not None:
        options = trust_options(found.cwd)
        label = await asker(trust_prompt(found.cwd), [option.label for option in options])
        chosen = next((option for option in options if option.label == label), None)
        if chosen is not None:
            trusted = chosen.trusted
            updates.extend(chosen.updates)
    if updates:
        await trio.to_thread.run_sync(save_decisions, agent, updates)
    notices: list[str] = []
    if found.has_protected and not trusted and decision.reason != "override":
        notices.append(
            "Warning: " + UNTRUSTED_NOTICE.format(cwd=found.cwd, trust_file=agent / TRUST_FILE)
        )
    return TrustOutcome(
        trusted=trusted,
        decision=decision,
        has_protected=found.has_protected,
        notices=tuple(notices),
    )


async def project_trust(
    cwd: str,
    agent: Path,
    *,
    override: bool | None,
    rules: bool,
    asker: TrustAsker | None,
    mode: str,
    load_user_extensions: Callable[[Settings], Awaitable[LoadedExtensions]],
) -> tuple[TrustOutcome, LoadedExtensions | None]:
    """Whether the project's protected files load, and the extensions loaded to ask them
    (user-level and ``-e`` ones, loaded with the agent dir's settings only; the session's
    final load continues from them).

    Neither ``override`` nor ``rules``: trusted (the SDK's default, as pi's).
    """
    if override is None and not rules:
        return TrustOutcome(trusted=True), None
    found = await trio.to_thread.run_sync(probe, cwd, agent, Path.home())
    preloaded = None
    answer = None
    problems: list[str] = []
    if override is None and found.has_protected:
        user = await trio.to_thread.run_sync(
            lambda: load_settings(agent, cwd, project_trusted=False)
        )
        preloaded = await load_user_extensions(user)
        answer, problems = await ask_extensions(preloaded, found.cwd, mode)
    outcome = await settle_trust(found, agent, override=override, extension=answer, asker=asker)
    notices = (*(f"Warning: {problem}" for problem in problems), *outcome.notices)
    return attrs.evolve(outcome, notices=notices), preloaded
