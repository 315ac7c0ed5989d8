"""The tool executor's ledger of the process groups its tools start, its image sniffing, and
the file tools that go through an editor's buffers.

A daemon records the groups of its bash tools in a directory; at start it kills the groups left
by a daemon that died without reaping them (:func:`reap_orphans`) and then records its own
(:func:`record_groups_in`).
"""

from __future__ import annotations

from pitrio.actors.tool_executor.ledger import reap_orphans, record_groups_in
from pitrio.actors.tool_executor.tools.bash import nul_problem
from pitrio.actors.tool_executor.tools.delegated import ReadText, WriteText, delegated_file_tools
from pitrio.actors.tool_executor.tools.images import SNIFF_BYTES, detect_image_mime

__all__ = [
    "SNIFF_BYTES",
    "ReadText",
    "WriteText",
    "delegated_file_tools",
    "detect_image_mime",
    "nul_problem",
    "reap_orphans",
    "record_groups_in",
]
