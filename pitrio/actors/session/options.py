"""What a session is started with (:class:`SessionOptions`) and what starting it gives
(:class:`StartedSession`): the plain data of :mod:`~pitrio.actors.session.bootstrap`, apart from
its start-up code so that the module stays short enough to read in one sitting."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from pitrio.actors.agent_loop import AgentLoopHandle
from pitrio.actors.session.extensions.asks import ModelScope, ShutdownRequest
from pitrio.actors.session.handle import SessionHandle
from pitrio.actors.session.trust_gate import TrustAsker
from pitrio.actors.session_store import SessionSeed, SessionStoreHandle
from pitrio.actors.session_store.actor import StoreOptions
from pitrio.actors.tool_executor import AgentTool, ToolExecutorHandle
from pitrio.actors.trace.tap import TapFactory
from pitrio.messages.model import Model

DEFAULT_MODEL = "faux/echo"

StoreOpener = Callable[[trio.Nursery, StoreOptions | None], Awaitable[SessionStoreHandle]]
"""Starts a session's store in a nursery with the session's write options."""


@attrs.frozen(kw_only=True)
class SessionOptions:
    """How to start a session; the command-line flags of pi map onto these fields."""

    cwd: str | None = None
    model: str | None = None
    """``provider/id[:thinking]``; ``None``: the session's model or the settings' default."""
    thinking_level: str | None = None
    session: str | None = None
    """``--session``: a path, or a session id prefix."""
    continue_recent: bool = False
    fork: str | None = None
    persist: bool = True
    session_dir: str | None = None
    agent_dir: Path | None = None
    system_prompt: str | None = None
    """``--system-prompt``: replaces the built prompt (text, or a file's path)."""
    append_system_prompt: tuple[str, ...] = ()
    no_context_files: bool = False
    no_skills: bool = False
    no_prompt_templates: bool = False
    skill_paths: tuple[str, ...] = ()
    """``--skill PATH`` (repeatable; loaded even with ``no_skills``)."""
    prompt_template_paths: tuple[str, ...] = ()
    """``--prompt-template PATH`` (repeatable)."""
    tools: Sequence[AgentTool] = ()
    builtin_tools: bool = True
    active_tools: Sequence[str] | None = None
    tool_patterns: tuple[str, ...] | None = None
    """``--tools`` (pi 1.6.0): names or ``*`` patterns, or only ``+name``/``-name`` edits of
    the default selection (:mod:`.tool_selection`); ``active_tools`` wins when both are set."""
    exclude_tools: tuple[str, ...] = ()
    """``--exclude-tools``: names or patterns disabled after every other choice."""
    no_builtin_tools: bool = False
    """``--no-builtin-tools``: the built-ins stay registered but none is active at start."""
    no_mcp: bool = False
    """``--no-mcp``: no MCP server starts for this session."""
    session_id: str | None = None
    """``--session-id``: open the cwd's session with this id, or create one with it."""
    session_name: str | None = None
    """``--name``: the session's display name (a ``session_info`` entry), as pi."""
    api_key: str | None = None
    """``--api-key``: the key of the start model's provider for this session's requests."""
    project_trust: bool | None = None
    """``--approve`` (``True``) / ``--no-approve`` (``False``): trust the project's files or
    not for this start, whatever else says (:mod:`.resources.trust`)."""
    project_trust_rules: bool = False
    """Decide project trust by pi 1.6.0's rules (``trust.json``, ``defaultProjectTrust``, the
    ``project_trust`` event, ``trust_asker``), as the command line, RPC and the daemon do;
    ``False`` (the SDK's default, as pi's ``createAgentSession``): trusted unless
    ``project_trust`` says otherwise."""
    trust_asker: TrustAsker | None = None
    """Asks the client creating the session when ``defaultProjectTrust`` is ``ask`` and
    nothing else decided; ``None``: nobody can answer, the project is not trusted."""
    path: Path | None = None
    """Open (or start at) exactly this file, as pi's ``switch_session`` does."""
    seed: SessionSeed | None = None
    """Start from a fork or clone (:meth:`SessionStoreHandle.fork`)."""
    parent_session: str | None = None
    """A new session's ``parentSession`` header field (pi's ``new_session``)."""
    store_opener: StoreOpener | None = None
    """Start the session's store this way instead of from a file (a shared database's store,
    ``pitrio serve --store postgresql://...``); the other store fields are then unused."""
    extensions: tuple[str, ...] = ()
    """``-e PATH``: extensions to load after the discovered ones."""
    no_extensions: bool = False
    """Load only the ``-e`` extensions (``--no-extensions``)."""
    extension_flags: dict[str, object] = attrs.field(factory=dict)
    """Values of flags that extensions declare (from the SDK)."""
    extension_args: tuple[str, ...] = ()
    """Command-line arguments left for extensions' flags (``--name``, ``--name=value``); one
    that no extension declared stops start-up."""
    ui_clients: bool = False
    """Clients can answer extension dialogs (RPC, websockets); else dialogs get defaults."""
    mode: str | None = None
    """What extensions see as ``ctx.mode`` (pi 1.6.0: ``tui``, ``rpc``, ``json``, ``print``);
    ``None``: ``rpc`` with :attr:`ui_clients`, else ``print``."""
    save_model_defaults: bool = False
    """A model or thinking level chosen in the session becomes the settings' default
    (``defaultProvider``/``defaultModel``/``defaultThinkingLevel``), as pi's ``persist``
    option does; off by default, as pi 1.6.0 (RPC choices stay in the session)."""
    start_reason: str = "startup"
    """``session_start``'s reason (``new``, ``resume``, ``fork`` when a runtime replaces it)."""
    sync_inline: bool = False
    """Fsync the session file's appends on the event loop's thread (a process hosting one
    session: RPC mode); see :attr:`StoreOptions.sync_inline`."""
    mcp_config: tuple[str, ...] = ()
    """``--mcp-config FILE``s: MCP server files read after the agent dir's and the project's
    ``mcp.json`` (default: the process's command line's; :mod:`pitrio.actors.mcp`)."""
    mcp_servers: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    """MCP servers a client gave the session (ACP's ``mcpServers``), by name, as ``mcp.json``
    entries: added after every file, their values used as given."""
    trace: TapFactory | None = None
    """Trace the session (``--trace``; :mod:`pitrio.actors.trace`); ``None``: as
    :func:`~pitrio.actors.trace.tap.tracing_sessions` says, else not at all."""
    model_scope: ModelScope | None = None
    """Where the transport puts the ``--models`` scope once resolved (extensions'
    ``ctx.scoped_models``); the same object for every session these options start."""
    shutdown: ShutdownRequest | None = None
    """Where extensions' ``ctx.shutdown()`` asks the transport to end (``None``: ignored)."""


@attrs.frozen
class StartedSession:
    """The handles of one started session."""

    session: SessionHandle
    loop: AgentLoopHandle
    store: SessionStoreHandle
    tools: ToolExecutorHandle
    model: Model
    notices: tuple[str, ...]
    project_trusted: bool = True
    """Whether the project's protected files loaded (a restart of the same session passes it
    back as :attr:`SessionOptions.project_trust`: one decision per session, as pi's per cwd)."""
    enabled_models: tuple[str, ...] = ()
    """The ``enabledModels`` setting: the model patterns to cycle through when ``--models``
    gives none (pi 1.6.0)."""
    mcp: Any = None
    """The session's MCP tool set (:class:`~pitrio.actors.mcp.live.McpToolSet`; ``None``
    without servers): its servers connect in the background, and it says when they have."""
    has_extensions: bool = False
    """Whether extensions run in the session (its lifecycle events have someone to ask)."""
