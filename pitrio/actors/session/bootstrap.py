"""Starting a session: pick or open its file, restore model and thinking, start its actors.

pi's SDK bootstrap (spec §4.11, §3.16): ``--session`` / ``--continue`` / ``--fork`` choose the
file; the model comes from the command line, else the session's last model, else the settings'
default; the thinking level from the command line or pattern, else the session, else the
settings' default, else ``medium``, clamped to the model. A new session records its model and
level at once; a resumed one whose model cannot be restored says so in :attr:`notices`.
"""

# SessionOptions, StartedSession, DEFAULT_MODEL and StoreOpener live in
# :mod:`pitrio.actors.session.options` and are re-exported here (long imported from here).

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from pitrio import _attrs_cache
from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle, LoopOptions
from pitrio.actors.mcp.search_tool import DEFERRED_UNREACHABLE, TOOL_SEARCH, declared_tools
from pitrio.actors.mcp.session import SessionMcp, start_session_mcp
from pitrio.actors.model_router import ModelRouterHandle
from pitrio.actors.model_router.catalogue import renamed_reference
from pitrio.actors.model_router.router_config import CACHE_RETENTION_ENV, CACHE_RETENTIONS
from pitrio.actors.model_router.thinking import DEFAULT_THINKING_LEVEL, clamp_thinking_level
from pitrio.actors.session.actor import SessionActor
from pitrio.actors.session.commands import SessionSettings
from pitrio.actors.session.extension_start import handler_timeout, load_session_extensions
from pitrio.actors.session.extensions.api import SessionPort
from pitrio.actors.session.extensions.late_mcp import LateMcpServers
from pitrio.actors.session.extensions.loader import ExtensionLoadError
from pitrio.actors.session.extensions.registry import tool_conflicts
from pitrio.actors.session.handle import SessionHandle
from pitrio.actors.session.options import DEFAULT_MODEL as DEFAULT_MODEL
from pitrio.actors.session.options import SessionOptions as SessionOptions
from pitrio.actors.session.options import StartedSession as StartedSession
from pitrio.actors.session.options import StoreOpener as StoreOpener
from pitrio.actors.session.resources.loader import (
    ResourceOptions,
    load_resources,
    system_prompt_sections,
    with_section,
)
from pitrio.actors.session.resources.settings import (
    Settings,
    builtin_tool_settings,
    project_dir_names,
)
from pitrio.actors.session.resources.system_prompt import render_sections
from pitrio.actors.session.resumed_prefix import request_resumed_prefix
from pitrio.actors.session.session_tools import (
    active_tools,
    client_servers,
    codemode_reach,
    codemode_tool,
    extension_mcp_servers,
    mcp_activation,
    mcp_states,
    mcp_wait,
    script_waits,
)
from pitrio.actors.session.shell_env import SessionShellEnvironment
from pitrio.actors.session.trust_gate import project_trust
from pitrio.actors.session_store import (
    SessionStoreHandle,
    create_store,
    open_store,
    start_seeded_store,
)
from pitrio.actors.session_store.actor import FSYNC_POLICIES, StoreOptions
from pitrio.actors.session_store.paths import SESSION_ID, session_dir
from pitrio.actors.session_store.paths import agent_dir as default_agent_dir
from pitrio.actors.supervisor.branch_summary import BranchSummarySettings
from pitrio.actors.supervisor.compaction import CompactionSettings
from pitrio.actors.supervisor.retry import RetrySettings
from pitrio.actors.tool_executor import (
    ToolExecutor,
    ToolExecutorHandle,
)
from pitrio.actors.tool_executor.codemode.describe import CODEMODE
from pitrio.actors.trace.tap import SessionTap, TapStart, ambient_factory
from pitrio.errors import PitrioError
from pitrio.messages.agent import THINKING_LEVELS
from pitrio.messages.model import Model
from pitrio.messages.ostext import check_os_text
from pitrio.telemetry import active as active_telemetry

if TYPE_CHECKING:
    from pitrio.actors.session.extensions.runner import ExtensionRunner


def absolute_cwd(cwd: str | None) -> str:
    """The session's working directory as an absolute path (the process's by default)."""
    return os.path.abspath(cwd or os.getcwd())


def session_settings(settings: Settings) -> SessionSettings:
    """The session layer's settings from the effective settings files."""
    retry = settings.get("retry")
    compaction = settings.get("compaction")
    return SessionSettings(
        retry=RetrySettings.from_json(retry if isinstance(retry, dict) else None),
        compaction=CompactionSettings.from_json(
            compaction if isinstance(compaction, dict) else None
        ),
        branch_summary=BranchSummarySettings.from_json(
            branch if isinstance(branch := settings.get("branchSummary"), dict) else None
        ),
        default_thinking_level=settings.text("defaultThinkingLevel"),
        shell_path=settings.text("shellPath"),
        shell_command_prefix=settings.text("shellCommandPrefix"),
        auto_resize_images=settings.images_auto_resize,
        block_images=settings.images_block,
        cache_warming=settings.cache_warming,
        cache_retention=next(
            (tier for tier in CACHE_RETENTIONS if os.environ.get(CACHE_RETENTION_ENV) == tier), None
        ),
    )


STORE_NOT_USED = (
    "Warning: the session.store setting is used by pitrio serve only; "
    "this session is kept in a session file"
)


def store_options(settings: Settings, *, sync_inline: bool = False) -> StoreOptions:
    """The session file's write policy: ``session.fsync`` (pitrio's key; default ``always``:
    every append is fsynced before it returns; ``batch``: at most a second later; ``never``)."""
    policy = settings.text("session.fsync")
    for known in FSYNC_POLICIES:
        if policy == known:
            return StoreOptions(fsync=known, sync_inline=sync_inline)
    return StoreOptions(sync_inline=sync_inline)


def _check_paths(options: SessionOptions, cwd: str) -> None:
    """Refuse a path option the file system cannot take (a NUL or a lone surrogate) with an
    error naming it. These come from the command line and the process (clients' paths were
    checked strictly where they arrived), so bytes kept by ``surrogateescape`` pass."""
    check_os_text(cwd, "cwd", from_os=True)
    named = (
        (options.path and str(options.path), "session path"),
        (options.session, "--session"),
        (options.fork, "--fork"),
        (options.session_dir and str(options.session_dir), "--session-dir"),
    )
    for value, field in named:
        if value:
            check_os_text(value, field, from_os=True)


async def _open_store(
    nursery: trio.Nursery,
    options: SessionOptions,
    cwd: str,
    store: StoreOptions | None = None,
) -> SessionStoreHandle:
    if options.store_opener is not None:
        return await options.store_opener(nursery, store)
    if options.seed is not None:
        return await start_seeded_store(nursery, options.seed, options=store)
    if options.path is not None:
        return await open_store(nursery, options.path, cwd=cwd, options=store)
    if sum(bool(x) for x in (options.session, options.continue_recent, options.fork)) > 1:
        raise PitrioError("--session, --continue and --fork cannot be combined")
    directory = session_dir(cwd, override=options.session_dir)
    # --session-id and --name are about the session the process starts with: a replacement
    # (RPC new_session, fork, switch) made from the same options starts its own.
    if options.session_id is not None and options.start_reason == "startup":
        return await _open_by_id(nursery, options, cwd, directory, store)
    # Below: the catalog (resolution, forks, the latest file) is imported by a start that
    # opens a file by name, not by one that creates its session (cold start, issue 38).
    if options.fork:
        with _attrs_cache.caching():  # its classes from the attrs method cache
            from pitrio.actors.session_store.catalog import fork_from, resolve_session_arg
        source = resolve_session_arg(options.fork, cwd=cwd, directory=directory).path
        path = await trio.to_thread.run_sync(lambda: fork_from(source, cwd, directory=directory))
        return await open_store(nursery, path, cwd=cwd, options=store)
    if options.session:
        with _attrs_cache.caching():
            from pitrio.actors.session_store.catalog import resolve_session_arg
        resolved = resolve_session_arg(options.session, cwd=cwd, directory=directory)
        return await open_store(
            nursery, resolved.path, cwd=None if resolved.other_project else cwd, options=store
        )
    if options.continue_recent:
        with _attrs_cache.caching():
            from pitrio.actors.session_store.catalog import most_recent_session
        recent = await trio.to_thread.run_sync(most_recent_session, directory)
        if recent is not None:
            return await open_store(nursery, recent, cwd=cwd, options=store)
    return await create_store(
        nursery,
        cwd,
        session_dir_override=options.session_dir,
        persist=options.persist,
        parent_session=options.parent_session,
        options=store,
    )


def check_session_id(session_id: str) -> None:
    """Raise :class:`PitrioError` unless ``session_id`` is one pi 1.6.0 accepts."""
    if not SESSION_ID.match(session_id):
        raise PitrioError(
            f"invalid session id {session_id!r}: use letters, digits, '.', '_' and '-', "
            "starting and ending with a letter or digit"
        )


def find_session_by_id(directory: Path, session_id: str) -> Path | None:
    """The session file of ``directory`` whose id is exactly ``session_id``."""
    if not directory.is_dir():
        return None
    import glob  # here: a start with no session id to find does not load it (issue 38)

    found = sorted(directory.glob(f"*_{glob.escape(session_id)}.jsonl"))
    return found[-1] if found else None


async def _open_by_id(
    nursery: trio.Nursery,
    options: SessionOptions,
    cwd: str,
    directory: Path,
    store: StoreOptions | None,
) -> SessionStoreHandle:
    """``--session-id``: pi 1.6.0 opens the cwd's session with that id, else creates one."""
    assert options.session_id is not None
    check_session_id(options.session_id)
    if options.session or options.continue_recent or options.fork:
        raise PitrioError("--session-id cannot be combined with --session, --continue or --fork")
    existing = None
    if options.persist:
        existing = await trio.to_thread.run_sync(find_session_by_id, directory, options.session_id)
    if existing is not None:
        return await open_store(nursery, existing, cwd=cwd, options=store)
    return await create_store(
        nursery,
        cwd,
        session_dir_override=options.session_dir,
        persist=options.persist,
        session_id=options.session_id,
        parent_session=options.parent_session,
        options=store,
    )


def _session_tap(options: SessionOptions, session_id: str) -> SessionTap | None:
    factory = options.trace if options.trace is not None else ambient_factory()
    return None if factory is None else factory(session_id)


def model_thinking_level(configured: object, model: Model) -> str | None:
    """``modelThinkingLevels["provider/id"]`` of the settings (pi 1.6.0), if it names one."""
    if not isinstance(configured, dict):
        return None
    level = configured.get(f"{model.provider}/{model.id}")
    return level if isinstance(level, str) else None


async def default_model(router: ModelRouterHandle, settings: Settings) -> Model:
    """The model of a session that names none and has none saved: the settings'
    ``defaultProvider``/``defaultModel`` when it resolves, else pi's first available model,
    else the offline ``faux/echo``."""
    provider, model_id = settings.text("defaultProvider"), settings.text("defaultModel")
    if provider and model_id:
        try:
            model, _ = await router.resolve_pattern(f"{provider}/{model_id}")
        except PitrioError:
            pass
        else:
            return model
    found = await router.first_configured()
    if found is None:
        found, _ = await router.resolve_pattern(DEFAULT_MODEL)
    return found


def extension_mode(options: SessionOptions) -> str:
    """``ctx.mode`` of the session's extensions (see :attr:`SessionOptions.mode`)."""
    if options.mode is not None:
        return options.mode
    return "rpc" if options.ui_clients else "print"


async def start_session(
    nursery: trio.Nursery, router: ModelRouterHandle, options: SessionOptions
) -> StartedSession:
    """Start a session's actors in ``nursery`` and return their handles."""
    cwd = absolute_cwd(options.cwd)
    _check_paths(options, cwd)  # before anything reads the cwd's files
    agent = options.agent_dir or default_agent_dir()
    trust, preloaded = await project_trust(
        cwd,
        agent,
        override=options.project_trust,
        rules=options.project_trust_rules,
        asker=options.trust_asker,
        mode=extension_mode(options),
        load_user_extensions=lambda user: load_session_extensions(
            cwd, agent, options, user.get("extensions"), project=False, final=False
        ),
    )
    resource_options = ResourceOptions(
        project_trusted=trust.trusted,
        system_prompt=options.system_prompt,
        append_system_prompt=options.append_system_prompt,
        no_context_files=options.no_context_files,
        no_skills=options.no_skills,
        no_prompt_templates=options.no_prompt_templates,
        skill_paths=options.skill_paths,
        prompt_template_paths=options.prompt_template_paths,
    )
    resources = await trio.to_thread.run_sync(load_resources, cwd, agent, resource_options)
    settings = resources.settings
    notices = [*trust.notices, *(f"Warning: {problem}" for problem in resources.problems())]
    # Extensions load first: the providers they register may serve the model asked for.
    loaded = await load_session_extensions(
        cwd, agent, options, settings.get("extensions"), project=trust.trusted, preloaded=preloaded
    )
    extension_tools, tool_problems = tool_conflicts(list(loaded.extensions))
    notices.extend(f"Warning: {problem}" for problem in loaded.problems)
    for name, config, path in loaded.holder.pending_providers:
        try:
            await router.register_provider(name, config, source=f"extension {path}")
        except PitrioError as exc:
            raise ExtensionLoadError(f"Failed to load extension {path}: {exc}") from None
    loaded.holder.pending_providers.clear()
    if options.persist and options.store_opener is None and settings.text("session.store"):
        # A database there is pitrio serve's: say so rather than keep this one in a file
        # without a word (print and RPC modes, the SDK).
        notices.append(STORE_NOT_USED)
    store = await _open_store(
        nursery,
        attrs.evolve(options, session_dir=settings.session_dir_for(cwd, options.session_dir)),
        cwd,
        store_options(settings, sync_inline=options.sync_inline),
    )
    context = await store.context()
    # Envelope checks only: decoding every entry here made resuming a long session pay for
    # all of its messages before the first command was answered (issue 7, resume).
    status = await store.status()
    empty = status.entries == 0
    if status.backup is not None:
        notices.append(
            f"Warning: {status.path} was migrated to the current session format; "
            f"the original is kept in {status.backup}"
        )
    has_thinking_entry = await store.has_entry_type("thinking_level_change")

    pattern_level = None
    model: Model | None = None
    if options.model:
        model, pattern_level = await router.resolve_pattern(options.model)
        if renamed := renamed_reference(options.model):  # azure-openai-responses/... (1.6.0)
            notices.append(f"Warning: {renamed}")
    elif context.model is not None:
        wanted = f"{context.model.provider}/{context.model.model_id}"
        try:
            model, _ = await router.resolve_pattern(wanted)
        except PitrioError:
            notices.append(f"Could not restore model {wanted}")
    if model is None:
        model = await default_model(router, settings)

    requested = (
        options.thinking_level
        or pattern_level
        or (context.thinking_level if has_thinking_entry else None)
        or (model_thinking_level(settings.get("modelThinkingLevels"), model) if empty else None)
        or settings.text("defaultThinkingLevel")
        or DEFAULT_THINKING_LEVEL
    )
    if requested == "max" and "max" not in THINKING_LEVELS:
        requested = THINKING_LEVELS[-1]  # pi 1.6.0's max: the model's highest, once clamped
    level = clamp_thinking_level(model, requested)
    # Lazy: nobody is told about these, so they need no file of their own; they are written
    # with the session's first acknowledged entry (a session left unused leaves none, as pi).
    if empty:
        await store.append_model_change(model.provider, model.id, lazy=True)
        await store.append_thinking_level_change(level, lazy=True)
    elif not has_thinking_entry or level != context.thinking_level:
        await store.append_thinking_level_change(level, lazy=True)

    tap = _session_tap(options, store.header.id)
    if tap is not None:  # the shared router's inbox is traced per session, sends only
        router = ModelRouterHandle(router.traced_sends(tap.tracer))
    stream = router.stream if tap is None else tap.stream(router.stream)
    if loaded.extensions:  # their virtual models are routed before the router sees them
        stream = loaded.holder.virtual_models.wrap(stream, router.resolve)
    if options.no_mcp:
        mcp = SessionMcp()
    else:
        mcp = await start_session_mcp(
            nursery,
            agent_dir=agent,
            cwd=cwd,
            mcp_settings=settings.get("mcp"),
            files=options.mcp_config,
            project_trusted=trust.trusted,
            project_dirs=project_dir_names(agent),
            client=(
                ({"mcpServers": client_servers(options.mcp_servers)}, "the client's mcpServers")
                if options.mcp_servers
                else None
            ),
            registered=extension_mcp_servers(loaded.holder.mcp_config()),
            activation=mcp_activation(options),
            loaded=lambda: declared_tools(context.messages),
        )
    notices.extend(mcp.notices)
    if options.session_name is not None and options.start_reason == "startup":
        await store.append_session_info(options.session_name)
    # tool_search goes after the extension tools, before the MCP ones (1.6.0 activates it
    # before its servers connect); deferred tools are registered inactive.
    search = () if mcp.search is None else (mcp.search.tool(),)
    codemode = codemode_tool(store, settings.get("codemode"), script_waits(mcp.live, lambda: tools))
    extra = [*options.tools, *extension_tools, *search]
    # codemode is registered in every session and active only when selected (pi 1.6.0's
    # built-in extension registers it inactive); an extension's own codemode replaces it.
    if codemode is not None and all(tool.name != CODEMODE for tool in extra):
        extra.append(codemode)
    active = active_tools(
        options,
        extra,
        (),  # registered as their servers connect (mcp.live)
        settings.get("defaultTools"),
        always=True,
        inactive=(CODEMODE,),
    )
    active, unreachable = codemode_reach(options, mcp, active)
    if unreachable is not None:
        notices.append(unreachable)
    if active is not None and mcp.search is not None and TOOL_SEARCH not in active:
        notices.append(DEFERRED_UNREACHABLE)  # as 1.6.0 warns, once
    shell_env = SessionShellEnvironment(store.header.id, status.path)
    executor = ToolExecutor(
        extra,
        builtin=options.builtin_tools,
        cwd=cwd,
        settings=builtin_tool_settings(settings, env=shell_env),
        active=active,
    )
    tools_address = await nursery.start(executor.run)
    tools = ToolExecutorHandle(tools_address) if tap is None else tap.tool_handle(tools_address)
    if mcp.search is not None:
        mcp.search.attach(lambda: tools, mcp.live)
    if mcp.section is not None:
        resources = with_section(resources, "mcp_servers", mcp.section)
    loop_options = LoopOptions(
        steering_mode="all" if settings.text("steeringMode") == "all" else "one-at-a-time",
        follow_up_mode="all" if settings.text("followUpMode") == "all" else "one-at-a-time",
        session_id=store.header.id,
        api_key=options.api_key,
        api_key_provider=model.provider if options.api_key else None,
    )
    sections = system_prompt_sections(resources, await tools.prompt_entries())
    agent_loop = AgentLoop(
        stream=stream,
        tools=tools,
        model=model,
        system_prompt=render_sections(sections),
        thinking_level=level,
        # The lazy view: a resumed session's messages are decoded when first needed.
        messages=context.messages,
        options=loop_options,
    )
    loop = AgentLoopHandle(await nursery.start(agent_loop.run))
    shell_env.bind(loop)
    runner: ExtensionRunner | None = None
    if loaded.extensions:
        from pitrio.actors.session.extensions.runner import ExtensionRunner  # loaded with them

        runner = ExtensionRunner(loaded.extensions, handler_timeout=handler_timeout(settings))
        loaded.holder.virtual_models.bind(runner.make_context)
        runner.problems.extend(tool_problems)
        if not options.no_mcp:  # connects the servers extensions register later
            registrations = loaded.holder.mcp_servers
            loaded.holder.late_mcp = LateMcpServers(
                started=mcp.server_names,
                listed=mcp.now_listed,
                search=mcp.search,
                startup=mcp.handle,
                startup_tools=mcp.live,
                from_setup={
                    name: registrations[name].config
                    for name in mcp.from_extensions
                    if name in registrations
                },
            )
    chosen = session_settings(settings)
    actor = SessionActor(
        loop=loop,
        store=store,
        router=router,
        stream=stream,
        settings=chosen,
        agent_dir=agent,
        resources=resources,
        extensions=runner,
        ui_clients=options.ui_clients,
        extension_mode=extension_mode(options),
        project_trusted=trust.trusted,
        save_model_defaults=options.save_model_defaults,
        named_models=(model,),
        extra_models=loaded.holder.virtual_models.models,
        model_scope=options.model_scope,
        shutdown=options.shutdown,
        start_reason=options.start_reason,
        tools=tools,
        mcp_servers=mcp_states(mcp.handle, loaded.holder.late_mcp),
        restore_tools=mcp.restorer(tools),
        before_prompt=mcp_wait(mcp.live, lambda: session, nursery),
        resumed=request_resumed_prefix(context.messages, model, block_images=chosen.block_images),
    )
    session = SessionHandle(await nursery.start(actor.run))
    late_mcp = loaded.holder.late_mcp

    async def section() -> None:
        text = mcp.section_now() if late_mcp is None else late_mcp.section()
        await session.set_prompt_section("mcp_servers", text)

    await mcp.start(nursery, tools, section, lambda text: session.notify(text, "warning"))
    telemetry = active_telemetry()
    if telemetry is not None:  # OpenTelemetry, when configured: an observer of the events
        await telemetry.observe(nursery, session, store.header.id)
    if tap is not None:
        await tap.attach(
            nursery,
            TapStart(
                actor=actor,
                session=session,
                loop=loop,
                store=store,
                tools=tools,
                cwd=cwd,
                model=model,
                thinking_level=level,
                settings=settings.values,
            ),
        )
    if runner is not None:
        loaded.holder.port = SessionPort(
            session=session,
            tools=tools,
            runner=runner,
            nursery=nursery,
            cwd=cwd,
            router=router,
            notify=actor.notify_extensions,
        )
    return StartedSession(
        session=session,
        loop=loop,
        store=store,
        tools=tools,
        model=model,
        notices=tuple(notices),
        project_trusted=trust.trusted,
        enabled_models=settings.enabled_models or (),
        mcp=mcp.live,
        has_extensions=runner is not None,
    )
