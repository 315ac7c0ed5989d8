"""``pitrio --list-models [search]``: the models usable now, as a table (pi's layout).

Columns ``provider  model  context  max-out  thinking  images``, two spaces apart, sorted by
provider then id as pi sorts them (``localeCompare``: see :func:`collation_key`). Only models
whose provider has credentials (or needs none) are listed, as pi lists only models with auth;
``--all`` lists every one, with a column saying which are usable. ``search`` keeps the models
whose ``provider id`` contains every whitespace-separated word of it as a subsequence, ignoring
case (a fuzzy filter: ``son45`` finds ``claude-sonnet-4-5``). Configuration problems (a bad
``models.json``, a refused ``auth.json``) are printed to stderr first; they never stop the
listing.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from pitrio.messages.collation import collation_key
from pitrio.messages.model import Model
from pitrio.sdk.models import ModelRouter, RouterConfig


def format_token_count(count: int) -> str:
    """``200000`` -> ``200K``, ``1048576`` -> ``1.0M``: whole numbers bare, else one decimal."""
    for size, suffix in ((1_000_000, "M"), (1_000, "K")):
        if count >= size:
            value = count / size
            return f"{value:g}{suffix}" if value == int(value) else f"{value:.1f}{suffix}"
    return str(count)


def fuzzy_match(query: str, text: str) -> bool:
    """Whether every word of ``query`` occurs in ``text`` as a subsequence (case-insensitive)."""
    haystack = text.lower()
    for word in query.lower().split():
        position = 0
        for char in word:
            position = haystack.find(char, position)
            if position < 0:
                return False
            position += 1
    return True


def models_table(models: Sequence[Model]) -> list[str]:
    """The table's lines, header first (every cell padded to its column, as pi prints it)."""
    header = ("provider", "model", "context", "max-out", "thinking", "images")
    rows = [
        (
            model.provider,
            model.id,
            format_token_count(model.context_window),
            format_token_count(model.max_tokens),
            "yes" if model.reasoning else "no",
            "yes" if "image" in model.input else "no",
        )
        for model in sorted(models, key=_listing_order)
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in [header, *rows]
    ]


def _listing_order(model: Model) -> tuple[object, ...]:
    # pi compares the provider, then the id, each with localeCompare.
    return (collation_key(model.provider), collation_key(model.id))


def hidden_providers_note(hidden: Sequence[Model], env_vars: Mapping[str, Sequence[str]]) -> str:
    """Which providers' models are left out for lack of a key, and what to set for each."""
    from pitrio.sdk.models import ambient_credential_sets, oauth_login_providers

    logins = oauth_login_providers()
    parts = []
    for provider in sorted({model.provider for model in hidden}):
        ways = [" or ".join(env_vars.get(provider, ()))]
        # Providers signed in by the environment (AWS, Google Cloud): the first two sets, which
        # say enough; every set is in docs/configuration.md.
        ways += [" and ".join(names) for names in ambient_credential_sets(provider)[:2]]
        said = " or ".join(way for way in ways if way) or "its key in auth.json"
        if provider in logins:
            said += f", or run pitrio login {provider}"
        parts.append(f"{provider} (set {said})")
    return (
        f"Hidden for lack of credentials: {', '.join(parts)}; "
        "pitrio --list-models --all lists every model"
    )


def list_models_command(
    search: str | None,
    *,
    every: bool = False,
    env: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Print the available models (filtered by ``search``); returns the exit code (0).

    ``every``: the whole catalogue, credentials or not (a seventh column says which have a
    key). When nothing is listed, the providers hidden for lack of a key are named with the
    variable to set.
    """
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    router = ModelRouter.from_config(RouterConfig.from_environment(env))
    for problem in router.problems():
        err.write(f"Warning: {problem}\n")
    candidates = list(router.registry.list())
    if search:
        candidates = [m for m in candidates if fuzzy_match(search, f"{m.provider} {m.id}")]
    reasons = {m.ref: router.availability(m) for m in candidates}
    # A provider with credentials is listed even where its API has no adapter yet (pi lists
    # it); asking that model for a reply is the error naming the API.
    models = candidates if every else [m for m in candidates if router.listed(m)]
    if not models:
        hidden = [m for m in candidates if (reasons[m.ref] or "").startswith("no API key")]
        if search:
            out.write(f'No models matching "{search}"\n')
        else:
            out.write("No models available. Set an API key (environment variable or auth.json).\n")
        if hidden:
            out.write(hidden_providers_note(hidden, router.credentials.env_vars) + "\n")
        return 0
    lines = models_table(models)
    if every:
        keyed = {m.ref: "yes" if reasons[m.ref] is None else "no" for m in models}
        ordered = sorted(models, key=_listing_order)
        lines = [lines[0] + "  usable"] + [
            f"{line}  {keyed[m.ref]}" for line, m in zip(lines[1:], ordered, strict=True)
        ]
    for line in lines:
        out.write(line + "\n")
    return 0
