"""The tool executor's ledger of the process groups its tools start, and the file tools that
go through an editor's buffers.

A daemon records the groups of its bash tools in a directory; at start it kills the groups left
by a daemon that died without reaping them (:func:`reap_orphans`) and then records its own
(:func:`record_groups_in`).
"""

from __future__ import annotations

from pitrio.actors.tool_executor.ledger import reap_orphans, record_groups_in
from pitrio.actors.tool_executor.tools.bash import nul_problem
from pitrio.actors.tool_executor.tools.delegated import ReadText, WriteText, delegated_file_tools

__all__ = [
    "ReadText",
    "WriteText",
    "delegated_file_tools",
    "nul_problem",
    "reap_orphans",
    "record_groups_in",
]
