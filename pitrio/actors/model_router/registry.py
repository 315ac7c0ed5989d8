"""The model registry: which models exist and which stream function serves each API. Pure.

Models are keyed by ``provider/id`` and kept in registration order (the order pi lists and
cycles them in). Stream functions are keyed by API name (``model.api``), so every model of one
API shares one provider adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from types import MappingProxyType

from pitrio.actors.model_router.catalogue import RENAMED_PROVIDERS, renamed_note
from pitrio.actors.model_router.models_json import VirtualModelSpec
from pitrio.actors.model_router.providers.base import StreamFn
from pitrio.errors import UnknownModelError
from pitrio.messages.agent import THINKING_LEVELS, ThinkingLevel
from pitrio.messages.model import Model, ModelCost

FAUX_PROVIDER = "faux"
FAUX_API = "faux-api"
FAUX_BASE_URL = "http://localhost:0"


def _faux_model(
    id: str,
    name: str,
    *,
    reasoning: bool,
    image: bool,
    context_window: int,
    max_tokens: int,
) -> Model:
    return Model(
        id=id,
        name=name,
        api=FAUX_API,
        provider=FAUX_PROVIDER,
        base_url=FAUX_BASE_URL,
        reasoning=reasoning,
        input=("text", "image") if image else ("text",),
        cost=ModelCost(),
        context_window=context_window,
        max_tokens=max_tokens,
    )


FAUX_MODELS: tuple[Model, ...] = (
    # The three models the fixtures were recorded with, in pi's listing / cycling order.
    _faux_model(
        "faux-1", "Faux One", reasoning=False, image=True, context_window=128000, max_tokens=16384
    ),
    _faux_model(
        "faux-think",
        "Faux Think",
        reasoning=True,
        image=False,
        context_window=200000,
        max_tokens=16384,
    ),
    _faux_model(
        "faux-small",
        "Faux Small",
        reasoning=False,
        image=False,
        context_window=20000,
        max_tokens=4096,
    ),
    # pitrio's offline default; last so the recorded models keep pi's order.
    _faux_model(
        "echo", "Faux Echo", reasoning=False, image=True, context_window=128000, max_tokens=16384
    ),
)
"""The built-in faux models (provider ``faux``, api ``faux-api``, all prices 0)."""


def offered(models: Iterable[Model]) -> tuple[Model, ...]:
    """The usable models a user is offered (``get_available_models``, ``cycle_model``,
    ``set_model``): the faux models only when nothing else is usable. They are offline test
    doubles pi does not have; a session still runs on one named explicitly (``--model``)."""
    usable = tuple(models)
    real = tuple(m for m in usable if m.provider != FAUX_PROVIDER)
    return real or usable


class ModelRegistry:
    """Registered models (by ``provider/id``) and stream functions (by API name)."""

    def __init__(self) -> None:
        self._models: dict[str, Model] = {}
        self._by_id: dict[str, list[Model]] = {}
        self._stream_fns: dict[str, StreamFn] = {}
        self._virtual: dict[str, VirtualModelSpec] = {}
        self.notes: list[str] = []
        """Renamed provider ids a reference used (each said once; see :meth:`resolve`)."""
        self.revision = 0  # bumped when the stream functions change (see ``stream_fns``)
        # Providers whose models count as registered but are built on first need
        # (``register_later``): their order, how to build one's models, how many models were
        # registered before them, and the refs registered (or replaced) after them.
        self._later: tuple[str, ...] = ()
        self._build_later: Callable[[str], tuple[Model, ...]] | None = None
        self._ids_later: Callable[[str], Container[str]] | None = None
        self._before_later = 0
        self._after_later: set[str] = set()

    def register_later(
        self,
        providers: Iterable[str],
        build: Callable[[str], tuple[Model, ...]],
        ids: Callable[[str], Container[str]] | None = None,
    ) -> None:
        """Register the models of ``providers`` (after those already registered, in this
        order) as ``build(provider)`` gives them, building each provider's only when first
        needed: a lookup of one model builds its provider's, a listing all of them, and so
        does registering a model of one of them or removing a provider. The registry answers
        as if they had been registered now (issue 38: a start needs at most its model, not
        the catalogue's 1,698). ``ids(provider)``, if given, holds the ids of a provider's
        models without building them: a lookup of an id none of them has then builds none
        (a resumed session whose model is not configured here). ``providers`` must not have
        models registered already."""
        self._materialize()
        names = tuple(providers)
        if {model.provider for model in self._models.values()}.intersection(names):
            raise ValueError("register_later: some of these providers have models already")
        self._later, self._build_later, self._ids_later = names, build, ids
        self._before_later = len(self._models)
        self._after_later = set()

    def _materialize(self) -> None:
        """Register every provider left for later, in the place and order they would have had
        if registered at :meth:`register_later` (the models by id too: an ambiguous id's
        candidates are named in registration order)."""
        names, build = self._later, self._build_later
        if build is None:
            return
        self._later, self._build_later = (), None
        later = [model for name in names for model in build(name)]
        items = list(self._models.items())
        self._models = dict(items[: self._before_later])
        self._models.update((model.ref, model) for model in later)
        self._models.update(items[self._before_later :])
        after = self._after_later
        by_id: dict[str, list[Model]] = {}
        for model in later:
            by_id.setdefault(model.id, []).append(model)
        for model_id, models in self._by_id.items():
            first = [model for model in models if model.ref not in after]
            then = [model for model in models if model.ref in after]
            self._by_id[model_id] = [*first, *by_id.pop(model_id, ()), *then]
        self._by_id.update(by_id)

    def models_but_later(self, wanted: Callable[[str], bool]) -> Iterator[Model]:
        """Every registered model in order, except those of a provider registered for later
        (:meth:`register_later`) that ``wanted`` refuses: those are not built."""
        models = tuple(self._models.values())
        build = self._build_later
        if build is None:
            yield from models
            return
        yield from models[: self._before_later]
        for name in self._later:
            if wanted(name):
                yield from build(name)
        yield from models[self._before_later :]

    def register(self, model: Model, stream_fn: StreamFn | None = None) -> None:
        """Add or replace ``model``; ``stream_fn``, if given, serves its API from now on.

        A model whose API has no stream function yet can be registered (its provider may come
        later) but not streamed.
        """
        if self._build_later is not None:
            if model.provider in self._later:
                self._materialize()  # it may replace one of them in its place
            else:
                self._after_later.add(model.ref)
        if stream_fn is not None:
            self._stream_fns[model.api] = stream_fn
            self.revision += 1
        previous = self._models.get(model.ref)
        self._models[model.ref] = model
        same_id = self._by_id.setdefault(model.id, [])
        if previous is not None:
            same_id.remove(previous)
        same_id.append(model)

    def unregister_provider(self, provider: str) -> tuple[str, ...]:
        """Remove every model (physical and virtual) of ``provider``; their refs."""
        self._materialize()
        gone = [model for model in self._models.values() if model.provider == provider]
        for model in gone:
            del self._models[model.ref]
            self._by_id[model.id].remove(model)
            if not self._by_id[model.id]:
                del self._by_id[model.id]
            self._virtual.pop(model.ref, None)
        return tuple(model.ref for model in gone)

    def register_api(self, api: str, stream_fn: StreamFn) -> None:
        """Serve every model of ``api`` with ``stream_fn``."""
        self._stream_fns[api] = stream_fn
        self.revision += 1

    def stream_fns(self) -> Mapping[str, StreamFn]:
        """A read-only copy of the stream functions by API (what the router publishes)."""
        return MappingProxyType(dict(self._stream_fns))

    def register_all(self, models: Iterable[Model], stream_fn: StreamFn | None = None) -> None:
        """Register several models sharing one stream function."""
        for model in models:
            self.register(model, stream_fn)

    def register_virtual(self, spec: VirtualModelSpec) -> None:
        """Add a virtual model (api ``pi-virtual``); requests to it are routed first."""
        self.register(spec.model)
        self._virtual[spec.model.ref] = spec

    def virtual_spec(self, model: Model) -> VirtualModelSpec | None:
        """How ``model`` routes, if it is a registered virtual model."""
        return self._virtual.get(model.ref)

    def has_stream_fn(self, api: str) -> bool:
        """Whether a provider serves ``api``."""
        return api in self._stream_fns

    def resolve_pattern(
        self, pattern: str, usable: Callable[[Model], bool] | None = None
    ) -> tuple[Model, ThinkingLevel | None]:
        """The model and thinking level named by ``provider/id[:thinking]``.

        The whole pattern is tried as a model first (ids such as Ollama's ``llama3.1:8b``
        contain colons); only if that fails is a ``:<level>`` suffix split off. Raises
        :class:`~pitrio.errors.UnknownModelError` (the whole pattern in the message).
        ``usable``: see :meth:`resolve`.
        """
        try:
            return self.resolve(pattern, usable), None
        except UnknownModelError as error:
            head, sep, suffix = pattern.rpartition(":")
            if sep and head and suffix in THINKING_LEVELS:
                try:
                    level = THINKING_LEVELS[THINKING_LEVELS.index(suffix)]
                    return self.resolve(head, usable), level
                except UnknownModelError:
                    pass
            raise error from None

    def find(self, provider: str, model_id: str) -> Model | None:
        """The model ``provider/model_id``, or ``None``."""
        return self._models.get(f"{provider}/{model_id}") or self._find_later(provider, model_id)

    def _find_later(self, provider: str, model_id: str) -> Model | None:
        """``provider/model_id`` among the providers registered for later (building only
        ``provider``'s models)."""
        if self._build_later is None or provider not in self._later:
            return None
        for model in self._build_later(provider):
            if model.id == model_id:
                return model
        return None

    def resolve(self, ref: str, usable: Callable[[Model], bool] | None = None) -> Model:
        """The model named ``provider/id``, or by a bare ``id`` that only one provider has.

        Model ids may themselves contain ``/`` (``openrouter/anthropic/claude``), so an exact
        ``provider/id`` match is tried first, then the whole reference as a bare id.
        Raises :class:`~pitrio.errors.UnknownModelError` naming the reference otherwise.
        A bare id several providers have names the one ``usable`` accepts, if only one is
        (pi matches among the models with credentials: ``gpt-5`` with only an OpenAI key).
        """
        model = self._models.get(ref)
        if model is not None:
            return model
        provider, _, model_id = ref.partition("/")  # no catalogue provider's name has a "/"
        model = self._find_later(provider, model_id)
        if model is not None:
            return model
        if self._later_may_answer(ref):
            self._materialize()  # a bare id or a renamed provider: every model is a candidate
        renamed = self._renamed(ref)
        if renamed is not None:
            return renamed
        candidates = self._by_id.get(ref, [])
        if len(candidates) == 1:
            return candidates[0]
        if len(candidates) > 1 and usable is not None:
            kept = [candidate for candidate in candidates if usable(candidate)]
            if len(kept) == 1:
                return kept[0]
        if len(candidates) > 1:
            refs = ", ".join(candidate.ref for candidate in candidates)
            raise UnknownModelError(f"Ambiguous model: {ref} (matches {refs})")
        raise UnknownModelError(f"Unknown model: {ref}")

    def _later_may_answer(self, ref: str) -> bool:
        """Whether building the providers registered for later could change what
        :meth:`resolve` answers for ``ref`` past its ``provider/id`` lookup: one of their
        models has ``ref`` as its id, or ``ref`` names a renamed provider (whose models may
        be theirs). Yes where their ids cannot be read without building them."""
        ids = self._ids_later
        if self._build_later is None or ids is None:
            return True  # (nothing left to build: materializing does nothing)
        old, sep, _ = ref.partition("/")
        if sep and old in RENAMED_PROVIDERS:
            return True
        return any(ref in ids(name) for name in self._later)

    def _renamed(self, ref: str) -> Model | None:
        """The model ``ref`` names under a provider id pi renamed (``azure-openai-responses/x``
        is ``azure/x``), noting the rename once."""
        old, sep, model_id = ref.partition("/")
        if (
            not sep
            or old not in RENAMED_PROVIDERS
            or old in {m.provider for m in self._models.values()}
        ):
            return None
        model = self._models.get(f"{RENAMED_PROVIDERS[old]}/{model_id}")
        if model is not None:
            note = renamed_note(old, f"model {ref}")
            if note not in self.notes:
                self.notes.append(note)
        return model

    def list(self) -> tuple[Model, ...]:
        """Every registered model, in registration order."""
        self._materialize()
        return tuple(self._models.values())

    def stream_fn(self, model: Model) -> StreamFn:
        """The stream function serving ``model``'s API.

        Raises :class:`~pitrio.errors.UnknownModelError` if no provider serves that API.
        """
        stream_fn = self._stream_fns.get(model.api)
        if stream_fn is None:
            raise UnknownModelError(
                f"No provider for model {model.ref} (api {model.api}): pitrio has no adapter "
                f"for the {model.api} API yet"
            )
        return stream_fn
