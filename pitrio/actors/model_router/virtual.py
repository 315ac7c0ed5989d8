"""Virtual models (spec §3.15.1): the routing policy and its persisted state. Pure.

A virtual model (api ``pi-virtual``, declared in ``models.json``) never reaches a provider:
before every request :func:`route` picks a physical model for the request's reason:

* ``user`` (first request of a prompt): the ``user`` route, else the active model of the
  fallback chain;
* ``continuation`` (after tool results): the physical model of the previous valid response
  when it is still one of this virtual model's candidates and available (its prompt cache is
  warm), else as ``user``;
* ``retry`` (after an auto-retry or overflow compaction): the model that failed, again; with
  ``escalate`` (the supervisor's retries are exhausted, or the context overflowed) the next
  available model of the fallback chain (beyond pi). ``compact_first`` tells the supervisor
  that model's context window is smaller than the failed one's, so it compacts before asking;
* ``direct`` (compaction, summaries, extension calls): the ``direct`` route, else the primary;
  it receives no state and its result changes none.

A model that is unknown or has no credentials is skipped, and the result's ``notice`` says so:
a fallback is announced to the client, never silent. Once the chain was escalated, the branch
stays on the fallback (persisted in :class:`VirtualModelState`): going back would meet the same
outage or overflow again.

The state is persisted by the session layer as a ``custom`` entry with ``customType``
:data:`STATE_CUSTOM_TYPE` and ``data`` from :func:`state_entry_data` (whenever :func:`route`
returns a state, i.e. it changed); the latest such entry on the branch is the current state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs

from pitrio.actors.model_router.models_json import VirtualModelSpec
from pitrio.actors.model_router.thinking import clamp_thinking_level
from pitrio.errors import VirtualRoutingError
from pitrio.messages.agent import AssistantMessage, ThinkingLevel
from pitrio.messages.model import Model

RouteReason = Literal["user", "continuation", "retry", "direct"]
STATE_CUSTOM_TYPE = "pi.virtual-model-state"
"""``customType`` of the session entry holding a virtual model's routing state."""


@attrs.frozen(kw_only=True)
class VirtualModelState:
    """Routing state of one virtual model on one branch.

    ``active`` indexes the fallback chain (0 = primary); ``reason`` says why the chain was
    escalated to it (shown when a resumed session continues on a fallback).
    """

    active: int = 0
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON object stored under ``data.state``."""
        out: dict[str, Any] = {"active": self.active}
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_json(cls, value: Any) -> VirtualModelState:
        """Read a stored state; anything unreadable is the initial state (never an error)."""
        if not isinstance(value, dict):
            return cls()
        active = value.get("active")
        reason = value.get("reason")
        return cls(
            active=active if isinstance(active, int) and not isinstance(active, bool) else 0,
            reason=reason if isinstance(reason, str) else None,
        )


def state_entry_data(virtual: Model, state: VirtualModelState) -> dict[str, Any]:
    """``data`` of the ``custom`` entry persisting ``state`` (pi's shape)."""
    return {"provider": virtual.provider, "modelId": virtual.id, "state": state.to_json()}


def state_from_entry_data(data: Any, virtual: Model) -> VirtualModelState | None:
    """The state in a ``pi.virtual-model-state`` entry's ``data``, if it is ``virtual``'s."""
    if not isinstance(data, dict):
        return None
    if data.get("provider") != virtual.provider or data.get("modelId") != virtual.id:
        return None
    return VirtualModelState.from_json(data.get("state"))


@attrs.frozen(kw_only=True)
class Candidate:
    """A routing target as the registry sees it.

    ``model`` is ``None`` when the pattern names no physical model; ``unavailable`` says why
    a known model cannot be used now (e.g. no API key); ``level`` is the pattern's
    ``:thinking`` suffix.
    """

    pattern: str
    model: Model | None
    level: ThinkingLevel | None = None
    unavailable: str | None = None

    @property
    def usable(self) -> bool:
        """Whether requests can go to this candidate."""
        return self.model is not None and self.unavailable is None

    def why_not(self) -> str:
        """Why the candidate cannot be used."""
        if self.model is None:
            return f"{self.pattern} is not a known model"
        return f"{self.model.ref} is unavailable ({self.unavailable})"


Lookup = Callable[[str], Candidate]
"""Resolves a model pattern (``provider/id[:thinking]``) to a candidate."""


@attrs.frozen(kw_only=True)
class RouteRequest:
    """What a request tells the router (spec §3.15.1's ``request``, minus the messages)."""

    reason: RouteReason
    thinking_level: ThinkingLevel | None = None
    previous: Model | None = None
    """Physical model of the most recent valid (not error/aborted) response."""
    failed: AssistantMessage | None = None
    """``retry``: the failed response."""
    escalate: bool = False
    """``retry``: move down the fallback chain (retries exhausted or context overflow)."""
    state: VirtualModelState | None = None


@attrs.frozen(kw_only=True)
class RouteResult:
    """Where a request goes, and what the session must do about it."""

    model: Model
    thinking_level: ThinkingLevel
    state: VirtualModelState | None = None
    """A changed state to persist; ``None`` when it did not change (or for ``direct``)."""
    notice: str | None = None
    """Announce this to the client (a fallback or a skipped unavailable model)."""
    compact_first: bool = False
    """The new model's context window is smaller than the failed model's: compact first."""


def route(spec: VirtualModelSpec, request: RouteRequest, lookup: Lookup) -> RouteResult:
    """Pick the physical model of one request; raises :class:`VirtualRoutingError`."""
    chain = [lookup(pattern) for pattern in spec.fallback]
    state = request.state or VirtualModelState()
    active = min(max(state.active, 0), len(chain) - 1)
    name = spec.model.ref

    if request.reason == "direct":
        preferred = _route_target(spec, "direct", lookup)
        pick, notes = _first_usable([preferred] if preferred else [], chain, 0, name)
        return _result(pick, request, None, notes)

    if request.reason == "retry" and request.escalate:
        failed_model = _failed_model(request.failed, lookup)
        current = active
        if failed_model is not None:
            for position, candidate in enumerate(chain):
                if candidate.model is not None and candidate.model.ref == failed_model.ref:
                    current = max(current, position)
        if current + 1 >= len(chain):
            raise VirtualRoutingError(
                f"The fallback chain of {name} is exhausted (last: {chain[current].pattern})"
            )
        pick, notes = _first_usable([], chain, current + 1, name)
        new_index = next(i for i in range(current + 1, len(chain)) if chain[i] is pick)
        why = "context overflow" if _looks_overflowed(request.failed) else "retries exhausted"
        from_ref = failed_model.ref if failed_model else chain[current].pattern
        assert pick.model is not None
        notes.insert(0, f"{name}: falling back from {from_ref} to {pick.model.ref} ({why})")
        compact = bool(failed_model and pick.model.context_window < failed_model.context_window)
        result = _result(pick, request, VirtualModelState(active=new_index, reason=why), notes)
        return attrs.evolve(result, compact_first=compact)

    preferred_list: list[Candidate] = []
    if request.reason == "retry":
        failed_model = _failed_model(request.failed, lookup)
        target = _route_target(spec, "retry", lookup)
        if target is not None and active == 0:
            preferred_list.append(target)
        elif failed_model is not None and _is_candidate(failed_model, spec, chain, lookup):
            preferred_list.append(lookup(failed_model.ref))
    elif request.reason == "continuation":
        pattern = spec.routes.get("continuation", "previous")
        previous = request.previous
        if pattern == "previous":
            if previous is not None and _is_candidate(previous, spec, chain, lookup):
                preferred_list.append(lookup(previous.ref))
        elif active == 0:
            preferred_list.append(lookup(pattern))
    if not preferred_list and active == 0:
        user_target = _route_target(spec, "user", lookup)
        if user_target is not None:
            preferred_list.append(user_target)
    pick, notes = _first_usable(preferred_list, chain, active, name)
    return _result(pick, request, None, notes)


def _route_target(spec: VirtualModelSpec, reason: str, lookup: Lookup) -> Candidate | None:
    pattern = spec.routes.get(reason)
    if pattern is None or pattern == "previous":
        return None
    return lookup(pattern)


def _first_usable(
    preferred: list[Candidate], chain: list[Candidate], start: int, name: str
) -> tuple[Candidate, list[str]]:
    """The first usable candidate of ``preferred``, then of ``chain[start:]``, with notes on
    those skipped."""
    notes: list[str] = []
    for candidate in [*preferred, *chain[start:]]:
        if candidate.usable:
            if notes:
                assert candidate.model is not None
                notes.append(f"{name}: using {candidate.model.ref}")
            return candidate, notes
        notes.append(f"{name}: {candidate.why_not()}")
    raise VirtualRoutingError(
        f"No model of {name} is available: "
        + "; ".join(note.removeprefix(f"{name}: ") for note in notes)
    )


def _result(
    pick: Candidate,
    request: RouteRequest,
    state: VirtualModelState | None,
    notes: list[str],
) -> RouteResult:
    assert pick.model is not None
    level = pick.level or request.thinking_level or "off"
    return RouteResult(
        model=pick.model,
        thinking_level=clamp_thinking_level(pick.model, level),
        state=state,
        notice="; ".join(notes) if notes else None,
    )


def _failed_model(failed: AssistantMessage | None, lookup: Lookup) -> Model | None:
    if failed is None:
        return None
    return lookup(f"{failed.provider}/{failed.model}").model


def _is_candidate(
    model: Model, spec: VirtualModelSpec, chain: list[Candidate], lookup: Lookup
) -> bool:
    refs = {c.model.ref for c in chain if c.model is not None}
    for pattern in spec.routes.values():
        if pattern != "previous":
            found = lookup(pattern).model
            if found is not None:
                refs.add(found.ref)
    return model.ref in refs


def _looks_overflowed(failed: AssistantMessage | None) -> bool:
    # Only for the wording of the notice; the supervisor decides with spec §3.8.3's rules.
    text = (failed.error_message or "").lower() if failed else ""
    return any(
        marker in text
        for marker in ("context", "too long", "too many tokens", "token limit", "too large")
    )
