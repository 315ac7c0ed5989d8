"""Session traces, for ``pitrio trace`` and ``--trace``: record, load, replay, summarise.

Only a traced run or the ``trace`` command needs it: import it inside the function that does.
"""

from __future__ import annotations

from pitrio.actors.trace.graph import actor_graph, render_graph
from pitrio.actors.trace.replay import load_trace, replay_records
from pitrio.actors.trace.summary import render_summary, render_timeline, summarise, summary_json
from pitrio.actors.trace.tap import record_to_directory, record_to_file, tracing_sessions

__all__ = [
    "actor_graph",
    "load_trace",
    "record_to_directory",
    "record_to_file",
    "render_graph",
    "render_summary",
    "render_timeline",
    "replay_records",
    "summarise",
    "summary_json",
    "tracing_sessions",
]
