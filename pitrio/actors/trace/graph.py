"""``pitrio trace graph``: the actors and channels of a trace, drawn from its records.

A pure function of records, like the summary. Two kinds of edge:

* a *message*: a ``msg`` record with ``dir`` ``send``, from the actor whose task sent it (its
  ``from``; :data:`OUTSIDE` when no actor's task did, e.g. the RPC transport or a test calling
  the session handle) to the actor whose inbox took it, labelled with the command types and
  their counts;
* a *call*: a ``model`` record (a request through the model router's stream function) or a
  ``tool`` record (a tool body run through the tool executor's handle), from the actor whose
  task made it to :data:`MODEL_ROUTER` or :data:`TOOL_EXECUTOR`. Those run in the caller's
  task, not in an inbox, so they are drawn dashed.

Replies (one-shot answers) and event channels are not inbox traffic and are not drawn. Traces
recorded before senders were noted have no ``from``: their messages all come from
:data:`OUTSIDE`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import attrs

from pitrio.actors.trace.records import Record

OUTSIDE = "outside"
MODEL_ROUTER = "model-router"
TOOL_EXECUTOR = "tool-executor"
FORMATS = ("mermaid", "dot")


@attrs.frozen(kw_only=True)
class Edge:
    """Everything that went from one actor to another, by kind."""

    source: str
    target: str
    call: bool
    """A direct call in the caller's task (model request, tool body), not an inbox message."""
    kinds: tuple[tuple[str, int], ...]
    """Command types (or ``model request`` / ``tool <name>``) and counts, busiest first."""

    @property
    def total(self) -> int:
        """How many messages or calls the edge carried."""
        return sum(count for _, count in self.kinds)


@attrs.frozen(kw_only=True)
class ActorGraph:
    """The actors of a trace and the edges between them."""

    actors: tuple[str, ...]
    edges: tuple[Edge, ...]

    def edge(self, source: str, target: str) -> Edge | None:
        """The edge from ``source`` to ``target``, if anything went that way."""
        for edge in self.edges:
            if edge.source == source and edge.target == target:
                return edge
        return None


def actor_graph(records: Iterable[Record]) -> ActorGraph:
    """The graph of a trace's records (all segments together)."""
    traffic: dict[tuple[str, str, bool], Counter[str]] = {}
    for record in records:
        kind = record.get("k")
        source = str(record.get("from") or OUTSIDE)
        if kind == "msg" and record.get("dir") == "send":
            key = (source, str(record.get("actor")), False)
            label = str(record.get("type"))
        elif kind == "model":
            key, label = (source, MODEL_ROUTER, True), "model request"
        elif kind == "tool":
            key, label = (source, TOOL_EXECUTOR, True), f"tool {record.get('name')}"
        else:
            continue
        traffic.setdefault(key, Counter())[label] += 1
    edges = tuple(
        Edge(source=source, target=target, call=call, kinds=_busiest(counts))
        for (source, target, call), counts in sorted(traffic.items())
    )
    names = {edge.source for edge in edges} | {edge.target for edge in edges}
    # The outside first, then the actors by name: the drawing is the same for the same trace.
    actors = tuple(sorted(names, key=lambda name: (name != OUTSIDE, name)))
    return ActorGraph(actors=actors, edges=edges)


def _busiest(counts: Counter[str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _label(edge: Edge) -> str:
    return ", ".join(f"{name} {count}" for name, count in edge.kinds)


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;")  # a tool's name is the only free text here


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _node_id(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def render_mermaid(graph: ActorGraph) -> str:
    """The graph as a Mermaid flowchart (``flowchart LR``); calls are dashed."""
    lines = ["flowchart LR"]
    for name in graph.actors:
        lines.append(f'    {_node_id(name)}["{_mermaid_text(name)}"]')
    for edge in graph.edges:
        arrow = "-.->" if edge.call else "-->"
        label = _mermaid_text(_label(edge))
        lines.append(f'    {_node_id(edge.source)} {arrow}|"{label}"| {_node_id(edge.target)}')
    return "\n".join(lines) + "\n"


def render_dot(graph: ActorGraph) -> str:
    """The graph in Graphviz's dot language; calls are dashed."""
    lines = ["digraph actors {", "    rankdir=LR;", "    node [shape=box];"]
    for name in graph.actors:
        lines.append(f'    "{_dot_text(name)}";')
    for edge in graph.edges:
        style = ", style=dashed" if edge.call else ""
        source, target, label = (_dot_text(t) for t in (edge.source, edge.target, _label(edge)))
        lines.append(f'    "{source}" -> "{target}" [label="{label}"{style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_graph(graph: ActorGraph, form: str = "mermaid") -> str:
    """The graph in one of :data:`FORMATS`."""
    if form == "dot":
        return render_dot(graph)
    if form == "mermaid":
        return render_mermaid(graph)
    raise ValueError(f"unknown graph format {form!r} (one of: {', '.join(FORMATS)})")


__all__: Sequence[str] = ("ActorGraph", "Edge", "actor_graph", "render_graph")
