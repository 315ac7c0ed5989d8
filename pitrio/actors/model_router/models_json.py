"""The user's ``models.json`` (pi's format): parsing, validation, merging with the catalogue. Pure.

Shape (pi's, plus virtual models)::

    {"providers": {
        "<provider>": {
            "baseUrl": "...", "api": "openai-completions", "apiKey": "KEY_VAR | !cmd | literal",
            "headers": {...}, "authHeader": true, "compat": {...},
            "models": [{"id": "...", "name": "...", "api": "...", "reasoning": false,
                        "input": ["text", "image"], "contextWindow": 128000,
                        "maxTokens": 16384, "cost": {...}, "headers": {...}, "compat": {...},
                        "thinkingLevelMap": {...}}],
            "modelOverrides": {"<built-in model id>": {<any model field but id/api>}}}}}

A provider (or model) with ``"api": "pi-virtual"`` declares virtual models: each needs a
``fallback`` list of physical model patterns (``provider/id[:thinking]``, the first is the
primary) and may give ``routes`` (``{"user"|"continuation"|"retry"|"direct": pattern}``;
``continuation`` may be ``"previous"``).

The file is first checked against pi 1.6.0's published schema (``models.schema.json`` beside
this module, copied from pi by ``scripts/gen_catalogue.py``) with ``jsonschema``: as in pi, a
file that breaks it is refused whole (the built-in models stay), and every violation is named
with its key path and what was expected. Every problem raises
:class:`~pitrio.errors.ModelsJsonError` naming the file, the entry (``providers.ollama.models[0]``)
and the field. Unknown keys are never an error, as in pi (its schema's objects are open), so a
file shared with a newer pi keeps loading: an unknown model field is kept in the model's
``extra``, an unknown thinking level or ``compat`` key is kept and ignored, an API pitrio has
no adapter for loads (using its model is the error naming the API). Merging follows pi:
built-in models of a provider stay, ``baseUrl``/``headers``/``compat`` of the provider apply to
them, ``modelOverrides`` patch them (``thinkingLevelMap``, ``promptCache``, ``samplingParams``,
``inputLimits`` merge key by key), custom models are upserted by id.

Notes that do not refuse anything (a renamed provider id, a ``compat`` key pi 1.6.0 dropped)
are collected in :attr:`UserModels.notes` and shown as warnings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, cast

import attrs
import orjson

from pitrio.actors.json_schema import kind_of as _kind
from pitrio.actors.model_router import catalogue, model_fields
from pitrio.actors.model_router.catalogue import (
    ANTHROPIC_MESSAGES,
    CATALOGUE_APIS,
    OPENAI_COMPLETIONS,
    OPENAI_RESPONSES,
    RENAMED_PROVIDERS,
    VIRTUAL_API,
    renamed_note,
)
from pitrio.actors.model_router.models_schema import schema_problems
from pitrio.errors import ModelsJsonError
from pitrio.messages.agent import THINKING_LEVELS
from pitrio.messages.model import Model, ModelCost

KNOWN_APIS: tuple[str, ...] = (
    OPENAI_COMPLETIONS,
    OPENAI_RESPONSES,
    ANTHROPIC_MESSAGES,
    *(
        api
        for api in CATALOGUE_APIS
        if api not in (OPENAI_COMPLETIONS, OPENAI_RESPONSES, ANTHROPIC_MESSAGES)
    ),
    VIRTUAL_API,
)
"""The APIs pitrio knows by name: the catalogue's and virtual models'. A ``models.json`` entry may
name any other (pi 1.6.0 takes any string): its models load and list, and using one is the
error naming the API."""

DROPPED_COMPAT_KEYS: dict[str, str] = {
    "sendSessionIdHeader": 'use "sessionAffinityFormat": "openai-nosession" to leave out the '
    "session-id header",
}
"""``compat`` keys pi 1.6.0 no longer reads (ignored, with a note saying what replaced them)."""

ROUTE_REASONS: tuple[str, ...] = ("user", "continuation", "retry", "direct")

DEFAULT_CONTEXT_WINDOW = 128000
DEFAULT_MAX_TOKENS = 16384

_COMPAT_BOOLS = (
    "supportsStore",
    "supportsDeveloperRole",
    "supportsReasoningEffort",
    "supportsUsageInStreaming",
    "supportsStrictMode",
    "requiresToolResultName",
    "requiresAssistantAfterToolResult",
    "requiresThinkingAsText",
    "requiresMistralToolIds",
)
_COMPAT_OBJECTS = ("openRouterRouting", "vercelGatewayRouting")


@attrs.frozen(kw_only=True)
class ProviderConfig:
    """One provider entry of ``models.json`` (key and header values still unresolved)."""

    name: str
    base_url: str | None = None
    api: str | None = None
    api_key: str | None = None
    headers: dict[str, str] | None = None
    auth_header: bool = False
    compat: dict[str, Any] | None = None
    models: tuple[dict[str, Any], ...] = ()
    model_overrides: dict[str, dict[str, Any]] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class VirtualModelSpec:
    """A virtual model: its descriptor and how it routes (see :mod:`.virtual`)."""

    model: Model
    fallback: tuple[str, ...]
    routes: dict[str, str] = attrs.field(factory=dict)
    entry: str = ""


@attrs.frozen(kw_only=True)
class UserModels:
    """A validated ``models.json``: its providers, in file order."""

    file: str
    providers: tuple[ProviderConfig, ...] = ()
    notes: tuple[str, ...] = ()
    """Warnings that refuse nothing (a renamed provider id, a dropped ``compat`` key)."""

    def provider(self, name: str) -> ProviderConfig | None:
        """The entry of provider ``name``, if the file has one."""
        return next((p for p in self.providers if p.name == name), None)


# -- validation helpers ----------------------------------------------------------------------


class _Checker:
    """Type checks that raise :class:`ModelsJsonError` naming file, entry and field."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, entry: str, field: str, problem: str) -> ModelsJsonError:
        return ModelsJsonError(self.file, entry, field, problem)

    def object(self, value: Any, entry: str, field: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(entry, field, f"expected an object, got {_kind(value)}")
        return value

    def string(self, value: Any, entry: str, field: str, *, empty: bool = False) -> str:
        if not isinstance(value, str):
            raise self.fail(entry, field, f"expected a string, got {_kind(value)}")
        if not empty and not value.strip():
            raise self.fail(entry, field, "must not be empty")
        return value

    def boolean(self, value: Any, entry: str, field: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(entry, field, f"expected true or false, got {_kind(value)}")
        return value

    def positive_int(self, value: Any, entry: str, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise self.fail(entry, field, f"expected a positive integer, got {_kind(value)}")
        if value <= 0:
            raise self.fail(entry, field, f"expected a positive integer, got {value}")
        return int(value)

    def price(self, value: Any, entry: str, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise self.fail(entry, field, f"expected a non-negative number, got {_kind(value)}")
        return float(value)

    def string_map(self, value: Any, entry: str, field: str) -> dict[str, str]:
        mapping = self.object(value, entry, field)
        for key, item in mapping.items():
            self.string(item, entry, f"{field}.{key}", empty=True)
        return dict(mapping)

    def api(self, value: Any, entry: str, field: str) -> str:
        # Any name loads (pi 1.6.0's rule): one without an adapter fails when used, naming it.
        return self.string(value, entry, field)

    def base_url(self, value: Any, entry: str, field: str) -> str:
        url = self.string(value, entry, field)
        if not url.startswith(("http://", "https://")):
            raise self.fail(entry, field, f"expected an http(s) URL, got {url!r}")
        return url

    def compat(self, value: Any, entry: str, field: str) -> dict[str, Any]:
        compat = self.object(value, entry, field)
        for key in _COMPAT_BOOLS:
            if key in compat:
                self.boolean(compat[key], entry, f"{field}.{key}")
        # Enumerations (thinkingFormat, maxTokensField, ...) are the schema's to check: its
        # lists are pi 1.6.0's, and a value pitrio does not act on is pi's default behaviour.
        for key in _COMPAT_OBJECTS:
            if key in compat:
                self.object(compat[key], entry, f"{field}.{key}")
        if "reasoningEffortMap" in compat:
            self.string_map(compat["reasoningEffortMap"], entry, f"{field}.reasoningEffortMap")
        return dict(compat)

    def input(self, value: Any, entry: str, field: str) -> tuple[Literal["text", "image"], ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(entry, field, 'expected ["text"] or ["text", "image"]')
        for item in value:
            if item not in ("text", "image"):
                raise self.fail(entry, field, f"unknown input type {item!r} (text, image)")
        kinds: list[Literal["text", "image"]] = ["text"]
        if "image" in value:
            kinds.append("image")
        return tuple(kinds)

    def cost(self, value: Any, entry: str, field: str, base: ModelCost) -> ModelCost:
        cost = self.object(value, entry, field)
        fields = {"input": "input", "output": "output", "cacheRead": "cache_read",
                  "cacheWrite": "cache_write"}  # fmt: skip
        changes: dict[str, Any] = {
            attr: self.price(cost[key], entry, f"{field}.{key}")
            for key, attr in fields.items()
            if key in cost
        }
        return attrs.evolve(base, **changes)

    def level_map(self, value: Any, entry: str, field: str) -> dict[str, str | None]:
        mapping = self.object(value, entry, field)
        for key, item in mapping.items():
            # A level pi does not know (a newer pi's) is kept and never consulted.
            if key in THINKING_LEVELS and item is not None and not isinstance(item, str):
                raise self.fail(entry, f"{field}.{key}", "expected a string or null")
        return dict(mapping)

    def new_fields(self, raw: Mapping[str, Any], entry: str) -> dict[str, Any]:
        """pi 1.6.0's model fields kept in ``extra`` (each an object; the schema checked
        their insides)."""
        return {
            key: dict(self.object(raw[key], entry, key))
            for key in model_fields.EXTRA_MODEL_FIELDS
            if key in raw
        }

    def pattern_list(self, value: Any, entry: str, field: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(entry, field, "expected a non-empty list of provider/id patterns")
        return tuple(
            self.string(item, entry, f"{field}[{index}]") for index, item in enumerate(value)
        )


def _levels() -> str:
    return ", ".join(THINKING_LEVELS)


# -- parsing ---------------------------------------------------------------------------------


def parse_models_json(
    text: str | bytes, file: str = "models.json", *, schema: bool = True
) -> UserModels:
    """Validate the text of a ``models.json``; raises :class:`ModelsJsonError`.

    ``schema``: check pi 1.6.0's published schema first (off for an extension's
    ``register_provider`` block, which pi checks by its own rules).
    """
    check = _Checker(file)
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise check.fail("", "", f"invalid JSON: {exc}") from None
    root = check.object(document, "", "")
    if schema and (problems := schema_problems(root, file)):
        # pi refuses the whole file too; the first problem is the error, all are named.
        first, *more = problems
        if more:
            also = "; ".join(str(problem).removeprefix(f"{file}: ") for problem in more)
            raise check.fail(first.entry, first.field, f"{first.problem} (also: {also})")
        raise first
    providers_value = root.get("providers", {})
    providers = check.object(providers_value, "", "providers")
    parsed: list[ProviderConfig] = []
    notes: list[str] = []
    for name, value in providers.items():
        entry = f"providers.{name}"
        if not name.strip() or "/" in name:
            raise check.fail(entry, "", "a provider name must be non-empty and have no '/'")
        provider = _parse_provider(check, name, check.object(value, entry, ""))
        notes += _notes(file, entry, check.object(value, entry, ""))
        if name in RENAMED_PROVIDERS:
            notes.append(renamed_note(name, f"{file}: {entry}"))
            provider = attrs.evolve(provider, name=RENAMED_PROVIDERS[name])
        parsed.append(provider)
    return UserModels(file=file, providers=tuple(parsed), notes=tuple(notes))


def _notes(file: str, entry: str, raw: Mapping[str, Any]) -> list[str]:
    """Notes on ``compat`` keys pi 1.6.0 dropped, wherever a ``compat`` object appears."""
    places: list[tuple[str, Any]] = [(entry, raw.get("compat"))]
    models = raw.get("models")
    if isinstance(models, list):
        places += [(f"{entry}.models[{i}]", m.get("compat")) for i, m in enumerate(models)
                   if isinstance(m, dict)]  # fmt: skip
    overrides = raw.get("modelOverrides")
    if isinstance(overrides, dict):
        places += [(f"{entry}.modelOverrides.{k}", v.get("compat")) for k, v in overrides.items()
                   if isinstance(v, dict)]  # fmt: skip
    notes = []
    for place, compat in places:
        if isinstance(compat, dict):
            for key, instead in DROPPED_COMPAT_KEYS.items():
                if key in compat:
                    notes.append(
                        f"{file}: {place}.compat.{key} is ignored since pi 1.6.0: {instead}"
                    )
    return notes


def _parse_provider(check: _Checker, name: str, raw: dict[str, Any]) -> ProviderConfig:
    entry = f"providers.{name}"
    base_url = check.base_url(raw["baseUrl"], entry, "baseUrl") if "baseUrl" in raw else None
    api = check.api(raw["api"], entry, "api") if "api" in raw else None
    api_key = check.string(raw["apiKey"], entry, "apiKey") if "apiKey" in raw else None
    headers = check.string_map(raw["headers"], entry, "headers") if "headers" in raw else None
    auth_header = (
        check.boolean(raw["authHeader"], entry, "authHeader") if ("authHeader" in raw) else False
    )
    compat = check.compat(raw["compat"], entry, "compat") if "compat" in raw else None
    models_value = raw.get("models", [])
    if not isinstance(models_value, list):
        raise check.fail(entry, "models", f"expected a list, got {_kind(models_value)}")
    models: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, model_value in enumerate(models_value):
        model_entry = f"{entry}.models[{index}]"
        model = check.object(model_value, model_entry, "")
        if "id" not in model:
            raise check.fail(model_entry, "id", "required")
        model_id = check.string(model["id"], model_entry, "id")
        if model_id in seen:
            raise check.fail(model_entry, "id", f"duplicate model id {model_id!r}")
        seen.add(model_id)
        models.append(model)
    overrides_value = raw.get("modelOverrides", {})
    overrides = check.object(overrides_value, entry, "modelOverrides")
    for model_id, override in overrides.items():
        check.object(override, f"{entry}.modelOverrides.{model_id}", "")
    return ProviderConfig(
        name=name,
        base_url=base_url,
        api=api,
        api_key=api_key,
        headers=headers,
        auth_header=auth_header,
        compat=compat,
        models=tuple(models),
        model_overrides={key: dict(value) for key, value in overrides.items()},
    )


def load_models_json(path: Path) -> UserModels | None:
    """Read and validate ``path``; ``None`` if it does not exist."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ModelsJsonError(str(path), "", "", f"cannot read: {exc.strerror}") from None
    return parse_models_json(text, str(path))


# -- merging ---------------------------------------------------------------------------------


def _merge_headers(*layers: Mapping[str, str] | None) -> dict[str, str] | None:
    merged: dict[str, str] = {}
    for layer in layers:
        if layer:
            merged.update(layer)
    return merged or None


def _merge_compat(*layers: Mapping[str, Any] | None) -> dict[str, Any] | None:
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer:
            merged.update(layer)
    return merged or None


def _apply_fields(
    check: _Checker, base: Model, raw: Mapping[str, Any], entry: str, *, override: bool
) -> Model:
    """``base`` with the model fields of ``raw`` applied (validated).

    ``override`` (a ``modelOverrides`` entry): maps and pi 1.6.0's object fields merge into
    the model's (pi's rules); otherwise (a custom model) they are the model's own.
    """
    changes: dict[str, Any] = {}
    if "name" in raw:
        changes["name"] = check.string(raw["name"], entry, "name")
    if "api" in raw and not override:
        changes["api"] = check.api(raw["api"], entry, "api")
    if "reasoning" in raw:
        changes["reasoning"] = check.boolean(raw["reasoning"], entry, "reasoning")
    if "input" in raw:
        changes["input"] = check.input(raw["input"], entry, "input")
    if "contextWindow" in raw:
        changes["context_window"] = check.positive_int(raw["contextWindow"], entry, "contextWindow")
    if "maxTokens" in raw:
        changes["max_tokens"] = check.positive_int(raw["maxTokens"], entry, "maxTokens")
    if "cost" in raw:
        changes["cost"] = check.cost(raw["cost"], entry, "cost", base.cost)
        tiers = raw["cost"].get("tiers")
        if isinstance(tiers, list):
            changes["cost"] = model_fields.with_cost_tiers(changes["cost"], tiers)
    if "headers" in raw:
        headers = check.string_map(raw["headers"], entry, "headers")
        changes["headers"] = _merge_headers(base.headers, headers)
    if "compat" in raw:
        compat = check.compat(raw["compat"], entry, "compat")
        changes["compat"] = _merge_compat(base.compat, compat)
    if "thinkingLevelMap" in raw:
        mapping = check.level_map(raw["thinkingLevelMap"], entry, "thinkingLevelMap")
        if override:
            mapping = {**(base.thinking_level_map or {}), **mapping}
        changes["thinking_level_map"] = mapping
    new = check.new_fields(raw, entry)
    model = attrs.evolve(base, **changes) if changes else base
    if override:
        new = model_fields.merge_override(base, new)
    return model_fields.with_extra(model, new)


def merge_models(
    builtin: Iterable[Model], user: UserModels | None
) -> tuple[list[Model], list[VirtualModelSpec]]:
    """The physical models (built-in merged with the user's) and the virtual model specs.

    Built-in models keep their order; a custom model with a built-in id replaces it in place;
    new models follow their provider's built-in ones (or the end, for new providers).
    """
    models = list(builtin)
    if user is None:
        return models, []
    check = _Checker(user.file)
    virtual: list[VirtualModelSpec] = []
    for provider in user.providers:
        entry = f"providers.{provider.name}"
        positions = [i for i, m in enumerate(models) if m.provider == provider.name]
        builtin_ids = {models[i].id: i for i in positions}
        # Provider-level settings apply to the built-in models of that provider.
        for index in positions:
            model = models[index]
            changes: dict[str, Any] = {}
            if provider.base_url is not None:
                changes["base_url"] = provider.base_url
            if provider.headers:
                changes["headers"] = _merge_headers(model.headers, provider.headers)
            if provider.compat or provider.auth_header:
                changes["compat"] = _merge_compat(model.compat, provider.compat, _auth(provider))
            if changes:
                models[index] = attrs.evolve(model, **changes)
        for model_id, override in provider.model_overrides.items():
            if model_id in builtin_ids:  # pi ignores overrides of unknown ids
                index = builtin_ids[model_id]
                models[index] = _apply_fields(
                    check,
                    models[index],
                    override,
                    f"{entry}.modelOverrides.{model_id}",
                    override=True,
                )
        insert_at = (positions[-1] + 1) if positions else len(models)
        for index, raw in enumerate(provider.models):
            model_entry = f"{entry}.models[{index}]"
            api = raw.get("api", provider.api or catalogue.provider_api(provider.name))
            if api is None:
                raise check.fail(model_entry, "api", "required (on the model or its provider)")
            api = check.api(api, model_entry, "api")
            if api == VIRTUAL_API:
                virtual.append(_virtual_spec(check, provider, raw, model_entry))
                continue
            built = _custom_model(check, provider, raw, model_entry, api)
            if built.id in builtin_ids:
                models[builtin_ids[built.id]] = built
            else:
                models.insert(insert_at, built)
                insert_at += 1
    return models, virtual


def _custom_model(
    check: _Checker, provider: ProviderConfig, raw: Mapping[str, Any], entry: str, api: str
) -> Model:
    base_url = provider.base_url or catalogue.provider_base_url(provider.name)
    if "baseUrl" in raw:
        base_url = check.base_url(raw["baseUrl"], entry, "baseUrl")
    if base_url is None:
        raise check.fail(
            f"providers.{provider.name}", "baseUrl", "required for a provider with custom models"
        )
    model_id = cast(str, raw["id"])
    base = Model(
        id=model_id,
        name=model_id,
        api=api,
        provider=provider.name,
        base_url=base_url,
        reasoning=False,
        input=("text",),
        cost=ModelCost(),
        context_window=DEFAULT_CONTEXT_WINDOW,
        max_tokens=DEFAULT_MAX_TOKENS,
        headers=provider.headers,
        compat=_merge_compat(provider.compat, _auth(provider)),
    )
    model = _apply_fields(check, base, raw, entry, override=False)
    return model_fields.with_extra(model, {}, model_fields.CUSTOM_MODEL_ORDER)


def _auth(provider: ProviderConfig) -> dict[str, Any] | None:
    # ``authHeader`` is a provider setting, but requests only see the model: it travels in the
    # model's compat flags (the Anthropic adapter then also sends ``Authorization: Bearer``).
    return {"authHeader": True} if provider.auth_header else None


def _virtual_spec(
    check: _Checker, provider: ProviderConfig, raw: Mapping[str, Any], entry: str
) -> VirtualModelSpec:
    if "fallback" not in raw:
        raise check.fail(entry, "fallback", "required for a pi-virtual model")
    fallback = check.pattern_list(raw["fallback"], entry, "fallback")
    routes: dict[str, str] = {}
    if "routes" in raw:
        raw_routes = check.object(raw["routes"], entry, "routes")
        for reason, target in raw_routes.items():
            if reason not in ROUTE_REASONS:
                raise check.fail(
                    entry, f"routes.{reason}", f"unknown reason (known: {', '.join(ROUTE_REASONS)})"
                )
            routes[reason] = check.string(target, entry, f"routes.{reason}")
            if target == "previous" and reason != "continuation":
                raise check.fail(entry, f"routes.{reason}", '"previous" is only for continuation')
    model_id = cast(str, raw["id"])
    # Limits and abilities are filled from the primary model when the registry is built.
    base = Model(
        id=model_id,
        name=model_id,
        api=VIRTUAL_API,
        provider=provider.name,
        base_url="",
        reasoning=False,
        input=("text",),
        cost=ModelCost(),
        context_window=0,
        max_tokens=0,
    )
    model = _apply_fields(check, base, raw, entry, override=False)
    return VirtualModelSpec(model=model, fallback=fallback, routes=routes, entry=entry)
