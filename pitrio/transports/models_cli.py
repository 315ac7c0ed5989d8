"""``pitrio --list-models [search]``: the models usable now, as a table (pi's layout).

Columns ``provider  model  context  max-out  thinking  images``, two spaces apart, sorted by
provider then id. Only models whose provider has credentials (or needs none) are listed, as
pi lists only models with auth. ``search`` keeps the models whose ``provider id`` contains
every whitespace-separated word of it as a subsequence, ignoring case (a fuzzy filter: ``son45``
finds ``claude-sonnet-4-5``). Configuration problems (a bad ``models.json``, a refused
``auth.json``) are printed to stderr first; they never stop the listing.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

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
        for model in sorted(models, key=lambda m: (m.provider, m.id))
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in [header, *rows]
    ]


def list_models_command(
    search: str | None,
    *,
    env: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Print the available models (filtered by ``search``); returns the exit code (0)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    router = ModelRouter.from_config(RouterConfig.from_environment(env))
    for problem in router.problems():
        err.write(f"Warning: {problem}\n")
    models = [m for m in router.registry.list() if router.availability(m) is None]
    if not models:
        out.write("No models available. Set an API key (environment variable or auth.json).\n")
        return 0
    if search:
        models = [m for m in models if fuzzy_match(search, f"{m.provider} {m.id}")]
        if not models:
            out.write(f'No models matching "{search}"\n')
            return 0
    for line in models_table(models):
        out.write(line + "\n")
    return 0
