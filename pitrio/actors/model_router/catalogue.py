"""The built-in model catalogue: every provider and chat model of pi 1.6.0, kept as data.

The facts live in ``catalogue.json`` beside this module, regenerated from pi-ai's npm package
by ``scripts/gen_catalogue.py`` (ids, names, API, base URL, context window, output limit,
prices in USD per million tokens and their ``tiers``, reasoning and input support, ``compat``
flags, thinking level maps, headers, ``inputLimits``, ``promptCache``, and the environment
variables of each provider's key). A model field pitrio has no attribute for is kept, in
pi's key order, in the model's ``extra`` (so it reaches RPC clients as pi sends it; see
:mod:`.model_fields` for typed readers). The file is read
and turned into :class:`~pitrio.messages.model.Model` objects on first use only, so importing
this module costs nothing; the tables other modules import by name (``CATALOGUE``,
``PROVIDER_APIS``, ...) are computed then, through the module's ``__getattr__``.

Models whose API has no adapter (``pi-messages``, pi's own format) stay listed; asking one for
a stream is an error naming the API. ``models.json`` overrides any figure (``modelOverrides``)
or adds models.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from pitrio.messages.codec import Extra
from pitrio.messages.model import Model, ModelCost

OPENAI_COMPLETIONS = "openai-completions"
OPENAI_RESPONSES = "openai-responses"
ANTHROPIC_MESSAGES = "anthropic-messages"
AZURE_OPENAI_RESPONSES = "azure-openai-responses"
OPENAI_CODEX_RESPONSES = "openai-codex-responses"
GOOGLE_GENERATIVE_AI = "google-generative-ai"
GOOGLE_VERTEX = "google-vertex"
MISTRAL_CONVERSATIONS = "mistral-conversations"
BEDROCK_CONVERSE_STREAM = "bedrock-converse-stream"
PI_MESSAGES = "pi-messages"
"""pi's own wire format (Radius, pi 1.6.0): not public, so pitrio has no adapter for it."""
VIRTUAL_API = "pi-virtual"
"""The API of a virtual model: resolved to a physical model before every request."""

CATALOGUE_APIS: tuple[str, ...] = (
    ANTHROPIC_MESSAGES,
    OPENAI_COMPLETIONS,
    OPENAI_RESPONSES,
    AZURE_OPENAI_RESPONSES,
    OPENAI_CODEX_RESPONSES,
    GOOGLE_GENERATIVE_AI,
    GOOGLE_VERTEX,
    MISTRAL_CONVERSATIONS,
    BEDROCK_CONVERSE_STREAM,
    PI_MESSAGES,
)
"""Every API a catalogue model may name (the ``faux`` API aside)."""

RENAMED_PROVIDERS: dict[str, str] = {"azure-openai-responses": "azure"}
"""Provider ids pi renamed (old -> new; pi 1.6.0's changelog 1.0.3): pi refuses the old id,
pitrio takes it as the new one and says so."""


def renamed_reference(pattern: str) -> str | None:
    """The note for a model reference (``--model``) naming a renamed provider, else ``None``."""
    old, sep, _ = pattern.partition("/")
    return renamed_note(old, f"model {pattern}") if sep and old in RENAMED_PROVIDERS else None


def renamed_note(old: str, where: str) -> str:
    """The note shown when ``where`` names provider ``old``, which pi renamed."""
    new = RENAMED_PROVIDERS[old]
    return (
        f"{where}: provider {old!r} was renamed {new!r} in pi 1.6.0; "
        f"pitrio reads it as {new!r} (rename it to keep pi reading it)"
    )


CATALOGUE_PATH = Path(__file__).with_name("catalogue.json")
ADC_FILE_VARIABLE = "GOOGLE_APPLICATION_CREDENTIALS"
"""The one ambient variable that names a file; it counts only when the file exists."""


@attrs.frozen(kw_only=True)
class ProviderInfo:
    """A built-in provider: its key variables (first set wins) and ambient credential sets.

    ``ambient``: alternative sets of variables that together authenticate the provider
    without a key (AWS's chain for Bedrock, application-default credentials for Vertex).
    """

    name: str
    env_keys: tuple[str, ...]
    ambient: tuple[tuple[str, ...], ...]
    api: str | None
    base_url: str | None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    # Parsing creates ~100k containers: each allocation burst triggers the cyclic collector,
    # which then walks the whole heap of a started pitrio (measured: 40 ms instead of 4 ms).
    # What is built here is acyclic and long-lived, so there is nothing for it to find.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_MODELS_OPEN = b',"models":['


@functools.cache
def _layout() -> tuple[dict[str, Any], tuple[dict[str, Any], ...], dict[str, bytes]]:
    """The file read without parsing a model: its top-level fields, each provider's head (its
    fields but ``models``) and the JSON array of its models, as bytes.

    ``scripts/gen_catalogue.py`` writes one provider head and one model per line, so the
    heads are found by line; a file in another layout is parsed whole instead. A start needs
    the heads (key variables) and one provider's models at most: parsing the 1 MB file took
    6-13 ms of every start (issue 38).
    """
    import orjson  # imported with the data: the catalogue may never be needed

    data = CATALOGUE_PATH.read_bytes()
    try:
        return _split(data.split(b"\n"), orjson.loads)
    except ValueError:  # not the generator's layout (orjson's decode error is one too)
        with _collector_paused():
            document: dict[str, Any] = orjson.loads(data)
        heads = tuple({k: v for k, v in p.items() if k != "models"} for p in document["providers"])
        chunks = {p["name"]: orjson.dumps(p["models"]) for p in document["providers"]}
        top = {k: v for k, v in document.items() if k != "providers"}
        return top, heads, chunks


def _split(
    lines: list[bytes], loads: Callable[[bytes], Any]
) -> tuple[dict[str, Any], tuple[dict[str, Any], ...], dict[str, bytes]]:
    """:func:`_layout` of the generator's lines; ``ValueError`` when they are not in it."""
    first = next((i for i, line in enumerate(lines) if line.endswith(_MODELS_OPEN)), None)
    if first is None:
        raise ValueError("no provider head line")
    prefix = b"\n".join(lines[:first]).rstrip()
    if not prefix.endswith(b"["):
        raise ValueError("no providers list before the first provider")
    top: dict[str, Any] = loads(prefix + b"]}")
    top.pop("providers")
    heads: list[dict[str, Any]] = []
    chunks: dict[str, bytes] = {}
    index, end = first, len(lines)
    while index < end and lines[index].endswith(_MODELS_OPEN):
        head: dict[str, Any] = loads(lines[index][: -len(_MODELS_OPEN)] + b"}")
        start = index = index + 1
        while index < end and lines[index] not in (b"]}", b"]},"):
            index += 1
        if index == end:
            raise ValueError(f"provider {head.get('name')!r} not closed")
        heads.append(head)
        chunks[head["name"]] = b"[" + b"\n".join(lines[start:index]) + b"]"
        index += 1
    if [line.strip() for line in lines[index:] if line.strip()] != [b"]", b"}"]:
        raise ValueError("unexpected lines after the providers")
    return top, tuple(heads), chunks


def _heads() -> tuple[dict[str, Any], ...]:
    return _layout()[1]


def _raw_models(provider: str) -> list[dict[str, Any]]:
    """The models of ``provider`` as pi's JSON objects (parsed again at every call)."""
    import orjson

    chunk = _layout()[2].get(provider)
    if chunk is None:
        return []
    with _collector_paused():
        raw: list[dict[str, Any]] = orjson.loads(chunk)
    return raw


def pi_ai_version() -> str:
    """The pi-ai version the catalogue was generated from."""
    return str(_layout()[0]["piAiVersion"])


_MODEL_KEYS = ("id", "name", "api", "provider", "baseUrl", "reasoning", "input", "cost",
               "contextWindow", "maxTokens", "thinkingLevelMap", "compat", "headers")  # fmt: skip
"""pi's names of :class:`Model`'s attributes, in their order (the codec writes them so)."""
_COST_KEYS = ("input", "output", "cacheRead", "cacheWrite")
_KNOWN_MODEL_KEYS = frozenset(_MODEL_KEYS)
_KNOWN_COST_KEYS = frozenset(_COST_KEYS)


def _extra(raw: Mapping[str, Any], names: tuple[str, ...], known: frozenset[str]) -> Extra | None:
    """The keys of ``raw`` pitrio has no attribute for, remembering pi's order of all keys
    (so a model goes out key for key as pi sends it); ``None`` when the attributes alone
    write ``raw`` back in its order (most models: cheaper to build and to encode)."""
    order = tuple(raw)
    if _in_attribute_order(order, names):
        return None
    return Extra({key: value for key, value in raw.items() if key not in known}, order)


@functools.cache
def _in_attribute_order(order: tuple[str, ...], names: tuple[str, ...]) -> bool:
    # Cached: the catalogue's ~1,700 models share a handful of key orders, and every start
    # builds them all (issue 38, cold start).
    present = frozenset(order)
    return order == tuple(name for name in names if name in present)


def _model(raw: Mapping[str, Any]) -> Model:
    cost = raw["cost"]
    return Model(
        id=raw["id"],
        name=raw["name"],
        api=raw["api"],
        provider=raw["provider"],
        base_url=raw["baseUrl"],
        reasoning=raw["reasoning"],
        input=tuple(raw["input"]),
        cost=ModelCost(
            input=cost["input"],
            output=cost["output"],
            cache_read=cost["cacheRead"],
            cache_write=cost["cacheWrite"],
            extra=_extra(cost, _COST_KEYS, _KNOWN_COST_KEYS),
        ),
        context_window=raw["contextWindow"],
        max_tokens=raw["maxTokens"],
        thinking_level_map=raw.get("thinkingLevelMap"),
        compat=raw.get("compat"),
        headers=raw.get("headers"),
        extra=_extra(raw, _MODEL_KEYS, _KNOWN_MODEL_KEYS),
    )


@functools.cache
def models() -> tuple[Model, ...]:
    """Every built-in model, grouped by provider in pi's order."""
    return tuple(model for name in provider_names() for model in provider_models(name))


@functools.cache
def provider_names() -> tuple[str, ...]:
    """The catalogue's providers in pi's order (read without building any model)."""
    return tuple(head["name"] for head in _heads())


@functools.cache
def provider_model_ids(name: str) -> frozenset[str]:
    """The ids of provider ``name``'s built-in models, read without building them: a lookup
    of an id no provider has (a resumed session's model that is not configured here) reads
    the catalogue's ids, ~4 ms, rather than building its 1,698 models, ~13 ms (issue 38)."""
    return frozenset(raw["id"] for raw in _raw_models(name))


@functools.cache
def provider_models(name: str) -> tuple[Model, ...]:
    """The built-in models of provider ``name`` in pi's order, built on first use: a start
    that needs one model builds its provider's, not all 1,698 (issue 38, cold start). The
    objects are those :func:`models` returns. ``()`` for a provider the catalogue lacks."""
    raw_models = _raw_models(name)
    with _collector_paused():
        return tuple(_model(raw) for raw in raw_models)


def _most_common(values: list[str]) -> str | None:
    # Counter keeps first-seen order among equals: a tie goes to the provider's first model.
    return Counter(values).most_common(1)[0][0] if values else None


@functools.cache
def providers() -> tuple[ProviderInfo, ...]:
    """Every built-in provider; ``api``/``base_url`` are those most of its models use (``None``
    for a provider without chat models: pi 1.6.0's ``typesafe`` has classifiers only)."""
    return tuple(
        ProviderInfo(
            name=head["name"],
            env_keys=tuple(head["envKeys"]),
            ambient=_ambient(head),
            api=provider_api(head["name"]),
            base_url=provider_base_url(head["name"]),
        )
        for head in _heads()
    )


def provider_api(name: str) -> str | None:
    """The API most of built-in provider ``name``'s models speak (``PROVIDER_APIS``), without
    building any model when ``name`` is not a built-in provider."""
    if name not in provider_names():
        return None
    return _most_common([model.api for model in provider_models(name)])


def provider_base_url(name: str) -> str | None:
    """The base URL most of built-in provider ``name``'s models use (``PROVIDER_BASE_URLS``),
    without building any model when ``name`` is not a built-in provider."""
    if name not in provider_names():
        return None
    return _most_common([model.base_url for model in provider_models(name)])


def _ambient(head: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(names) for names in head["ambient"])


BEARER_KEY_VARIABLES: frozenset[str] = frozenset({"ANTHROPIC_AUTH_TOKEN"})
"""pi's key variables whose value is a bearer token, not a key: ``ANTHROPIC_AUTH_TOKEN``
(pi 1.6.0 sends it as ``Authorization: Bearer``, never as ``x-api-key``; it counts towards the
provider being configured). ``ANTHROPIC_OAUTH_TOKEN`` is a key, as pi reads it."""


@functools.cache
def provider_env_vars() -> dict[str, tuple[str, ...]]:
    """The variables holding each provider's credentials, in pi's order (first set wins;
    :data:`BEARER_KEY_VARIABLES` among them)."""
    table = {head["name"]: tuple(head["envKeys"]) for head in _heads() if head["envKeys"]}
    for name, keys in _layout()[0]["keyOnlyProviders"].items():
        table.setdefault(name, tuple(keys))
    return table


_URL_VARIABLE = re.compile(r"\{([A-Z][A-Z0-9_]*)\}")
_BRACED_URL = re.compile(rb'"baseUrl"\s*:\s*"(?:[^"\\]|\\.)*\{')
"""A model's JSON whose base URL holds a ``{``: a cheap filter before parsing (it may match
more than it should, never less)."""


@functools.cache
def url_variables() -> dict[str, tuple[str, ...]]:
    """The variables each built-in provider's base URLs name (``{CLOUDFLARE_ACCOUNT_ID}``):
    pi 1.6.0 counts such a provider configured only with them set, and fills them in."""
    table: dict[str, tuple[str, ...]] = {}
    for provider, chunk in _layout()[2].items():
        if not _BRACED_URL.search(chunk):
            continue  # no base URL with a "{": nothing to fill (most providers, unparsed)
        for raw in _raw_models(provider):
            for name in _URL_VARIABLE.findall(raw["baseUrl"]):
                names = table.get(raw["provider"], ())
                if name not in names:
                    table[raw["provider"]] = (*names, name)
    return table


def fill_url(url: str, env: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """``url`` with its ``{NAME}`` variables from ``env``, and the names ``env`` lacks."""
    missing = tuple(name for name in _URL_VARIABLE.findall(url) if not env.get(name))
    if missing:
        return url, missing
    return _URL_VARIABLE.sub(lambda found: env[found.group(1)], url), ()


def ambient_credential_sets(provider: str) -> tuple[tuple[str, ...], ...]:
    """The alternative sets of variables that together sign ``provider`` in (none for a
    provider with a plain key)."""
    for head in _heads():
        if head["name"] == provider:
            return _ambient(head)
    return ()


def has_ambient_credentials(provider: str, env: Mapping[str, str]) -> bool:
    """Whether ``env`` holds one of ``provider``'s ambient credential sets (pi's rule)."""
    for head in _heads():
        if head["name"] == provider:
            return any(all(_set(name, env) for name in names) for names in _ambient(head))
    return False


def adc_configured(env: Mapping[str, str]) -> bool:
    """Whether application-default credentials look usable without asking anyone (pi's test
    for listing Vertex models without a key): a credentials file (``GOOGLE_APPLICATION_
    CREDENTIALS`` or gcloud's default one), a project and a location."""
    path = env.get("GOOGLE_APPLICATION_CREDENTIALS")
    if path:
        found = Path(path).is_file()
    else:
        home = Path(env["HOME"]) if env.get("HOME") else Path.home()
        found = (home / ".config" / "gcloud" / "application_default_credentials.json").is_file()
    project = env.get("GOOGLE_CLOUD_PROJECT") or env.get("GCLOUD_PROJECT")
    return found and bool(project) and bool(env.get("GOOGLE_CLOUD_LOCATION"))


def _set(name: str, env: Mapping[str, str]) -> bool:
    if name != ADC_FILE_VARIABLE:
        return bool(env.get(name))
    path = env.get(name)
    if path:
        return os.path.exists(path)
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.exists(
        os.path.join(home, ".config", "gcloud", "application_default_credentials.json")
    )


_LAZY: dict[str, Callable[[], object]] = {
    "CATALOGUE": models,
    "BUILTIN_PROVIDERS": provider_names,
    "PROVIDER_APIS": lambda: {p.name: p.api for p in providers() if p.api is not None},
    "PROVIDER_BASE_URLS": lambda: {
        p.name: p.base_url for p in providers() if p.base_url is not None
    },
    "PROVIDER_ENV_VARS": provider_env_vars,
}


def __getattr__(name: str) -> Any:
    """The catalogue's tables by their historical names, computed on first access."""
    build = _LAZY.get(name)
    if build is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = build()
    globals()[name] = value  # later lookups skip this function
    return value


CATALOGUE: tuple[Model, ...]
"""Every built-in model, grouped by provider (read from ``catalogue.json`` on first use)."""
BUILTIN_PROVIDERS: tuple[str, ...]
"""The providers of the catalogue, in catalogue order."""
PROVIDER_APIS: dict[str, str]
"""The API most of each built-in provider's models speak (a custom model's default)."""
PROVIDER_BASE_URLS: dict[str, str]
"""The base URL most of each built-in provider's models use."""
PROVIDER_ENV_VARS: dict[str, tuple[str, ...]]
"""Environment variables holding each provider's key, first found wins (pi's names)."""
