"""What a start-up error of the command line adds so the user knows what to do next.

An unknown model gets the nearest model ids of the catalogue (``models.json`` included) and a
pointer to ``pitrio --list-models``; a missing optional extra names its pip command. The
error's own text stays first and unchanged: it is the
one pi-compatible clients and the tests match.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from pitrio.errors import PitrioError, UnknownModelError


def model_suggestions(ref: str, env: Mapping[str, str] | None = None, limit: int = 3) -> list[str]:
    """The model references nearest to ``ref`` (``provider/id``, or a bare id), best first."""
    from pitrio.sdk.models import ModelRouter, RouterConfig

    router = ModelRouter.from_config(RouterConfig.from_environment(env))
    models = router.registry.list()
    head, sep, suffix = ref.rpartition(":")
    wanted = head if sep and suffix.isalpha() and "/" in head else ref
    refs = [model.ref for model in models]
    by_id = {model.id: model.ref for model in models}
    found = difflib.get_close_matches(wanted, refs, n=limit, cutoff=0.6)
    if "/" not in wanted:  # a bare id: compare with the ids
        found += [by_id[i] for i in difflib.get_close_matches(wanted, list(by_id), n=limit)]
    return list(dict.fromkeys(found))[:limit]


def startup_error_text(exc: PitrioError, env: Mapping[str, str] | None = None) -> str:
    """``str(exc)``, plus what to do for the errors that have a way out."""
    text = str(exc)
    if isinstance(exc, UnknownModelError) and text.startswith("Unknown model: "):
        ref = text.removeprefix("Unknown model: ")
        try:
            near = model_suggestions(ref, env)
        except PitrioError:  # a broken models.json: the listing would say why
            near = []
        hint = f"; did you mean {' or '.join(near)}?" if near else ""
        return f"{text}{hint} (pitrio --list-models lists the models you can use)"
    return text


POSTGRES_EXTRA_MISSING = (
    "the PostgreSQL store needs the postgres extra: pip install 'pitrio[postgres]'"
)


def require_postgres() -> None:
    """Raise a :class:`PitrioError` naming the pip command when psycopg cannot be imported
    (the ``postgres`` extra is optional; a bare ``ModuleNotFoundError`` would be a traceback)."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise PitrioError(POSTGRES_EXTRA_MISSING) from exc


__all__ = ["POSTGRES_EXTRA_MISSING", "model_suggestions", "require_postgres", "startup_error_text"]
