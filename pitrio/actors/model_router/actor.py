"""The ModelRouter actor (one per process) and its handle.

The actor owns the :class:`~pitrio.actors.model_router.registry.ModelRegistry`, the provider
adapters, the credentials and the process's HTTP connection pool. It does not run streams:
:meth:`ModelRouterHandle.stream` asks it for the stream function and then runs that function in
the caller's own task, so a stream lives in the run's task tree and an abort (the run's cancel
scope) stops it at its next checkpoint. Actors own registries and configuration; streams and
tool bodies belong to the run.

:func:`start_model_router` builds the registry from a :class:`RouterConfig`: the faux models,
the built-in catalogue, and the user's ``models.json`` (a broken file is reported by
:meth:`ModelRouterHandle.problems` and leaves the built-in models usable, as pi does). The
commands the actor takes are in :mod:`.commands`, the configuration (where it comes from) in
:mod:`.router_config` (both re-exported here).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import orjson
import trio

from pitrio import _attrs_cache
from pitrio.actors._actor import Actor, Address, Handle
from pitrio.actors.latest import Latest, LatestReader
from pitrio.actors.model_router import catalogue
from pitrio.actors.model_router.catalogue import VIRTUAL_API
from pitrio.actors.model_router.commands import (
    Availability,
    GetStreamFn,
    ListAvailable,
    ListModels,
    Problems,
    Register,
    RegisterProvider,
    Resolve,
    ResolvePattern,
    Route,
    RouterCommand,
    UnregisterProvider,
)
from pitrio.actors.model_router.credentials import AUTH_FILE_NAME, Credentials
from pitrio.actors.model_router.lazy_http import LazyHttpProviders
from pitrio.actors.model_router.models_json import (
    UserModels,
    VirtualModelSpec,
    load_models_json,
    merge_models,
    parse_models_json,
)
from pitrio.actors.model_router.providers.base import EventSender, StreamFn
from pitrio.actors.model_router.providers.faux import FauxProvider
from pitrio.actors.model_router.registry import (
    FAUX_MODELS,
    FAUX_PROVIDER,
    ModelRegistry,
    offered,
)
from pitrio.actors.model_router.router_config import (
    CACHE_RETENTION_ENV,
    DIAGNOSTICS_ENV,
    MODELS_FILE_NAME,
    SETTINGS_FILE_NAME,
    RouterConfig,
)
from pitrio.actors.model_router.stream_builder import failure_message
from pitrio.errors import ModelsJsonError, UnknownModelError, unwrap_group
from pitrio.messages.agent import AssistantMessage, ThinkingLevel, ToolResultMessage
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import StreamError

if TYPE_CHECKING:
    # Virtual models' routing (an extension registers them) is imported where a virtual
    # model is resolved or routed, not by a start (cold start, issue 38).
    from pitrio.actors.model_router.providers.http import HttpPool
    from pitrio.actors.model_router.virtual import Candidate, RouteRequest, RouteResult


class ModelRouter(Actor[RouterCommand]):
    """Owns the model registry, provider adapters, credentials and the HTTP pool."""

    def __init__(
        self,
        registry: ModelRegistry | None = None,
        *,
        capacity: int = 64,
        credentials: Credentials | None = None,
        pool: HttpPool | LazyHttpProviders | None = None,
        problems: tuple[str, ...] = (),
    ) -> None:
        super().__init__(name="model-router", capacity=capacity)
        self.registry = registry if registry is not None else ModelRegistry()
        self.credentials = credentials or Credentials(
            auth_path=None, env={}, keyless=(FAUX_PROVIDER,)
        )
        self.pool = pool
        self._problems = problems
        # The stream functions by API, read at every request: handles take the latest
        # snapshot instead of asking (see ``pitrio.actors.latest``); republished whenever a
        # command changed them.
        self._published_revision = self.registry.revision
        self._stream_fns = Latest(self.registry.stream_fns())
        self.address.published = self._stream_fns.reader()

    @classmethod
    def from_config(cls, config: RouterConfig, faux: FauxProvider | None = None) -> ModelRouter:
        """A router whose registry holds the faux models, the catalogue and ``models.json``."""
        registry = ModelRegistry()
        provider = faux if faux is not None else FauxProvider()
        registry.register_all(FAUX_MODELS, provider.stream)
        problems: list[str] = []
        user: UserModels | None = None
        models_path = config.agent_dir / MODELS_FILE_NAME if config.agent_dir else None
        if models_path is not None:
            try:
                user = load_models_json(models_path)
            except ModelsJsonError as exc:
                problems.append(str(exc))
            if user is not None:
                problems += user.notes
        physical: list[Model] = []
        virtual: list[VirtualModelSpec] = []
        builtin_names = catalogue.provider_names() if config.catalogue else ()
        if builtin_names and not {p.name for p in (user.providers if user else ())}.intersection(
            builtin_names
        ):
            # Nothing of the catalogue to merge (no models.json, or one adding providers of
            # its own, as the benchmarks' mock): its models are built when first needed (a
            # start asks for one model at most; issue 38); the user's follow them.
            registry.register_later(
                builtin_names, catalogue.provider_models, catalogue.provider_model_ids
            )
            try:
                physical, virtual = merge_models((), user)
            except ModelsJsonError as exc:
                problems.append(str(exc))
                user = None
        else:
            builtin = catalogue.models() if config.catalogue else ()
            try:
                physical, virtual = merge_models(builtin, user)
            except ModelsJsonError as exc:
                problems.append(str(exc))
                user = None
                physical, virtual = merge_models(builtin, None)
        for model in physical:
            registry.register(model)
        for spec in virtual:
            try:
                _check_virtual(registry, spec, user)
            except ModelsJsonError as exc:
                problems.append(str(exc))
                continue
            registry.register_virtual(_fill_virtual(registry, spec))
        provider_keys = {
            p.name: p.api_key for p in (user.providers if user else ()) if p.api_key is not None
        }
        keyless = {FAUX_PROVIDER} | {
            p.name
            for p in (user.providers if user else ())
            if p.api_key is None and p.name not in catalogue.BUILTIN_PROVIDERS
        }
        credentials = Credentials(
            auth_path=config.agent_dir / AUTH_FILE_NAME if config.agent_dir else None,
            env=config.env,
            provider_keys=provider_keys,
            keyless=keyless,
        )
        # Providers, httpx and the pool are imported and built at their API's first request.
        pool = LazyHttpProviders(credentials, config.settings)
        for api, stream in pool.stream_fns().items():
            registry.register_api(api, stream)
        return cls(registry, credentials=credentials, pool=pool, problems=tuple(problems))

    async def run(
        self, *, task_status: trio.TaskStatus[Address[RouterCommand]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run until the inbox closes; then close the connection pool (even when cancelled)."""
        try:
            await super().run(task_status=task_status)
        finally:
            if self.pool is not None:
                with trio.CancelScope(shield=True), trio.move_on_after(5):
                    await self.pool.aclose()

    def problems(self) -> tuple[str, ...]:
        """Configuration problems (``models.json`` errors, a refused ``auth.json``)."""
        problem = self.credentials.problem
        notes = (*self.registry.notes, *self.credentials.notes)
        return self._problems + notes + ((problem,) if problem else ())

    def _register_provider(self, name: str, config: dict[str, Any], source: str) -> tuple[str, ...]:
        user = parse_models_json(orjson.dumps({"providers": {name: config}}), source, schema=False)
        physical, virtual = merge_models((), user)
        for model in physical:
            self.registry.register(model)
        for spec in virtual:
            _check_virtual(self.registry, spec, user)
            self.registry.register_virtual(_fill_virtual(self.registry, spec))
        provider = user.providers[0]
        if provider.api_key is not None:
            self.credentials.provider_keys[name] = provider.api_key
        elif name not in catalogue.BUILTIN_PROVIDERS:
            self.credentials.keyless.add(name)
        return tuple(model.ref for model in physical)

    def availability(
        self, model: Model, configured: Callable[[str], bool] | None = None
    ) -> str | None:
        """Why ``model`` cannot be used now, or ``None``; ``configured`` (default: the
        credentials') says whether a provider has a key source."""
        if model.api == VIRTUAL_API:
            return None if self.registry.virtual_spec(model) else "not a routable virtual model"
        if not self.registry.has_stream_fn(model.api):
            return f"no adapter for api {model.api}"
        if not (configured or self.credentials.configured)(model.provider):
            if model.api == "google-vertex" and catalogue.adc_configured(self.credentials.env):
                return None  # Vertex without a key: application-default credentials
            return f"no API key for provider {model.provider}"
        return None

    def listed(self, model: Model, configured: Callable[[str], bool] | None = None) -> bool:
        """Whether ``model`` is offered (``get_available_models``, ``--list-models``): usable
        now, or its provider has credentials and only an adapter for its API is missing (pi
        offers it, e.g. radius's ``pi-messages`` models; a request then fails naming the API)."""
        configured = configured or self.credentials.configured
        reason = self.availability(model, configured)
        if reason is None:
            return True
        return reason.startswith("no adapter") and configured(model.provider)

    def available(self) -> tuple[Model, ...]:
        """The models offered now (see :meth:`listed` and :func:`~.registry.offered`)."""
        # One credentials check per provider, not two per model: the catalogue's 1,698
        # models have 43 providers, and the first listing is part of every start (issue 38).
        known: dict[str, bool] = {}

        def configured(provider: str) -> bool:
            found = known.get(provider)
            if found is None:
                found = known[provider] = self.credentials.configured(provider)
            return found

        adc: list[bool] = []

        def may_list(provider: str) -> bool:
            # A model of an unconfigured provider is listed only through Vertex's
            # application-default credentials (see ``availability``): the catalogue's
            # other providers need not be built to be left out.
            if configured(provider):
                return True
            if not adc:
                adc.append(catalogue.adc_configured(self.credentials.env))
            return adc[0]

        models = self.registry.models_but_later(may_list)
        return offered(m for m in models if self.listed(m, configured))

    def _usable(self, model: Model) -> bool:
        return self.availability(model) is None

    def candidate(self, pattern: str) -> Candidate:
        """A routing candidate for ``pattern`` (see :mod:`.virtual`)."""
        from pitrio.actors.model_router.virtual import Candidate  # imported by the route

        try:
            model, level = self.registry.resolve_pattern(pattern)
        except UnknownModelError:
            return Candidate(pattern=pattern, model=None)
        if model.api == VIRTUAL_API:
            return Candidate(pattern=pattern, model=None)  # virtual -> virtual is refused
        return Candidate(
            pattern=pattern, model=model, level=level, unavailable=self.availability(model)
        )

    async def started(self) -> None:
        self._publish()  # registrations made on the registry before the router started

    def _publish(self) -> None:
        if self.registry.revision != self._published_revision:
            self._published_revision = self.registry.revision
            self._stream_fns.publish(self.registry.stream_fns())

    async def handle(self, command: RouterCommand) -> None:
        """Answer one command; registry errors go back to the caller, never crash the actor."""
        try:
            await self._handle(command)
        finally:
            self._publish()  # before the caller, woken by the reply, runs again

    async def _handle(self, command: RouterCommand) -> None:
        registry = self.registry
        try:
            match command:
                case Resolve(ref=ref, reply=reply):
                    reply.set(registry.resolve(ref, self._usable))
                case ResolvePattern(pattern=pattern, reply=reply):
                    reply.set(registry.resolve_pattern(pattern, self._usable))
                case ListModels(reply=reply):
                    reply.set(registry.list())
                case ListAvailable(reply=reply):
                    reply.set(self.available())
                case RegisterProvider(name=name, config=config, source=source, reply=reply):
                    reply.set(self._register_provider(name, config, source))
                case UnregisterProvider(name=name, reply=reply):
                    self.credentials.provider_keys.pop(name, None)
                    reply.set(registry.unregister_provider(name))
                case Register(model=model, stream_fn=stream_fn, reply=reply):
                    registry.register(model, stream_fn)
                    reply.set(None)
                case GetStreamFn(model=model, reply=reply):
                    reply.set(registry.stream_fn(model))
                case Availability(model=model, reply=reply):
                    reply.set(self.availability(model))
                case Route(model=model, request=request, reply=reply):
                    spec = registry.virtual_spec(model)
                    if spec is None:
                        raise UnknownModelError(f"{model.ref} is not a virtual model")
                    with _attrs_cache.caching():  # first use: its classes from the cache
                        from pitrio.actors.model_router.virtual import route
                    reply.set(route(spec, request, self.candidate))
                case Problems(reply=reply):
                    reply.set(self.problems())
        except Exception as exc:
            if isinstance(exc, UnknownModelError) and self._problems:
                exc = UnknownModelError(f"{exc} ({'; '.join(self._problems)})")
            command.reply.fail(exc)


def _check_virtual(
    registry: ModelRegistry, spec: VirtualModelSpec, user: UserModels | None
) -> None:
    """Every pattern of a virtual model must name a known physical model."""
    file = user.file if user else MODELS_FILE_NAME
    targets = [(f"fallback[{i}]", p) for i, p in enumerate(spec.fallback)]
    targets += [(f"routes.{r}", p) for r, p in spec.routes.items() if p != "previous"]
    for field, pattern in targets:
        try:
            model, _ = registry.resolve_pattern(pattern)
        except UnknownModelError:
            raise ModelsJsonError(file, spec.entry, field, f"unknown model {pattern!r}") from None
        if model.api == VIRTUAL_API:
            raise ModelsJsonError(
                file, spec.entry, field, f"{pattern!r} is virtual; routes must name physical models"
            )
        if model.ref == spec.model.ref:
            raise ModelsJsonError(file, spec.entry, field, "a virtual model cannot route to itself")


def _fill_virtual(registry: ModelRegistry, spec: VirtualModelSpec) -> VirtualModelSpec:
    """The spec with limits the file left out taken from the primary model."""
    primary, _ = registry.resolve_pattern(spec.fallback[0])
    model = spec.model
    if model.context_window == 0:
        model = attrs.evolve(model, context_window=primary.context_window)
    if model.max_tokens == 0:
        model = attrs.evolve(model, max_tokens=primary.max_tokens)
    return attrs.evolve(spec, model=model)


# -- the handle ------------------------------------------------------------------------------


def infer_reason(context: LlmContext) -> str:
    """``continuation`` after tool results, else ``user`` (when the caller names no reason)."""
    messages = context.messages
    return "continuation" if messages and isinstance(messages[-1], ToolResultMessage) else "user"


def previous_response(context: LlmContext) -> AssistantMessage | None:
    """The most recent assistant message that is not an error or abort."""
    for message in reversed(context.messages):
        if isinstance(message, AssistantMessage) and message.stop_reason not in (
            "error",
            "aborted",
        ):
            return message
    return None


class ModelRouterHandle(Handle[RouterCommand]):
    """Typed access to the ModelRouter, plus :meth:`stream`, which runs in the caller's task."""

    async def resolve(self, ref: str) -> Model:
        """The model named ``ref``; raises :class:`~pitrio.errors.UnknownModelError`."""
        return await self.ask(lambda reply: Resolve(ref, reply))

    async def resolve_pattern(self, pattern: str) -> tuple[Model, ThinkingLevel | None]:
        """The model and thinking level of ``provider/id[:thinking]``."""
        return await self.ask(lambda reply: ResolvePattern(pattern, reply))

    async def list_models(self) -> tuple[Model, ...]:
        """Every registered model, in registration order."""
        return await self.ask(ListModels)

    async def available_models(self) -> tuple[Model, ...]:
        """The models offered now (credentials configured; see :meth:`ModelRouter.listed`), in
        registration order; the faux models only when no other is
        (:func:`~.registry.offered`)."""
        return await self.ask(ListAvailable)

    async def first_configured(self) -> Model | None:
        """The first usable model that is not a faux one (what a session starts on when no
        model is named or saved, as pi starts on its first available model), or ``None``.
        A model offered without an adapter for its API is passed over: a session started
        without a choice should be able to answer."""
        for model in await self.available_models():
            if model.provider != FAUX_PROVIDER and await self.availability(model) is None:
                return model
        return None

    async def register(self, model: Model, stream_fn: StreamFn | None = None) -> None:
        """Register ``model`` (and, if given, the stream function of its API)."""
        await self.ask(lambda reply: Register(model, stream_fn, reply))

    async def stream_fn(self, model: Model) -> StreamFn:
        """The stream function serving ``model``; raises ``UnknownModelError`` if none does."""
        return await self.ask(lambda reply: GetStreamFn(model, reply))

    async def availability(self, model: Model) -> str | None:
        """Why ``model`` cannot be used now (e.g. ``no API key for provider x``), or ``None``."""
        return await self.ask(lambda reply: Availability(model, reply))

    async def route(self, model: Model, request: RouteRequest) -> RouteResult:
        """Route one request of the virtual ``model``; raises ``VirtualRoutingError``."""
        return await self.ask(lambda reply: Route(model, request, reply))

    async def problems(self) -> tuple[str, ...]:
        """Configuration problems to show the user (never containing a key)."""
        return await self.ask(Problems)

    async def register_provider(
        self, name: str, config: dict[str, Any], *, source: str = "extension"
    ) -> tuple[str, ...]:
        """Add a provider from a ``models.json`` provider block; the refs of its models.
        Raises ``ModelsJsonError`` naming ``source`` and the bad field."""
        refs: tuple[str, ...] = await self.ask(
            lambda reply: RegisterProvider(name, config, source, reply)
        )
        return refs

    async def unregister_provider(self, name: str) -> tuple[str, ...]:
        """Remove a provider's models; their refs."""
        refs: tuple[str, ...] = await self.ask(lambda reply: UnregisterProvider(name, reply))
        return refs

    async def stream(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        send: EventSender,
        *,
        route_request: RouteRequest | None = None,
    ) -> None:
        """Stream one response of ``model`` on ``send``, in the calling task.

        A virtual model is routed first (``route_request``, or one inferred from the context:
        ``continuation`` after tool results, else ``user``); the response then carries the
        physical model. Callers that persist routing state call :meth:`route` themselves and
        stream the physical model.

        The stream contract holds whatever happens: if no provider serves the model, routing
        fails, or the provider raises despite the contract, a final ``error`` event (stop
        reason ``error``, ``error_message`` the exception's text) is sent. Cancellation is not
        converted: it propagates, and nothing more is sent after it (the canceller builds the
        aborted message, see :func:`~pitrio.actors.model_router.stream_builder.aborted_message`).
        A provider must not raise after it has sent its final event.
        """
        try:
            if model.api == VIRTUAL_API:
                model, options = await self._route_for_stream(
                    model, context, options, route_request
                )
            self._check_alive()
            published: LatestReader[Mapping[str, StreamFn]] = self._address.published
            stream_fn = published.get().get(model.api) if published is not None else None
            if stream_fn is None:  # no provider: asking raises the error with its reasons
                stream_fn = await self.stream_fn(model)
            await stream_fn(model, context, options, send)
        except Exception as exc:
            text = str(unwrap_group(exc)) or type(exc).__name__
            await send.send(StreamError(reason="error", error=failure_message(model, text)))

    async def _route_for_stream(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        request: RouteRequest | None,
    ) -> tuple[Model, StreamOptions]:
        if request is None:
            with _attrs_cache.caching():  # first use: its classes from the cache
                from pitrio.actors.model_router.virtual import RouteRequest
            previous = previous_response(context)
            previous_model = None
            if previous is not None:
                try:
                    previous_model = await self.resolve(f"{previous.provider}/{previous.model}")
                except UnknownModelError:
                    previous_model = None
            request = RouteRequest(
                reason="continuation" if infer_reason(context) == "continuation" else "user",
                thinking_level=options.reasoning,
                previous=previous_model,
            )
        result = await self.route(model, request)
        level = None if result.thinking_level == "off" else result.thinking_level
        return result.model, attrs.evolve(options, reasoning=level)


async def start_model_router(
    nursery: trio.Nursery,
    faux: FauxProvider | None = None,
    *,
    config: RouterConfig | None = None,
) -> ModelRouterHandle:
    """Start a ModelRouter in ``nursery``; returns its handle.

    The registry holds the built-in faux models wired to ``faux`` (a fresh echoing
    :class:`FauxProvider` when not given), the catalogue and the user's ``models.json`` from
    ``config`` (default: :meth:`RouterConfig.from_environment`).
    """
    router = ModelRouter.from_config(config or RouterConfig.from_environment(), faux)
    address = await nursery.start(router.run)
    return ModelRouterHandle(address)


__all__ = [
    "CACHE_RETENTION_ENV",
    "DIAGNOSTICS_ENV",
    "MODELS_FILE_NAME",
    "SETTINGS_FILE_NAME",
    "Availability",
    "GetStreamFn",
    "ListAvailable",
    "ListModels",
    "ModelRouter",
    "ModelRouterHandle",
    "Problems",
    "Register",
    "RegisterProvider",
    "Resolve",
    "ResolvePattern",
    "Route",
    "RouterCommand",
    "RouterConfig",
    "UnregisterProvider",
    "infer_reason",
    "previous_response",
    "start_model_router",
]
