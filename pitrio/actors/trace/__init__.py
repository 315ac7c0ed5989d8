"""Trace record/replay for concurrency research (issue 10): see ``docs/research.md``.

``records`` (the format, pure), ``recorder`` (the hooks' sink and the file writer), ``tap``
(what the session bootstrap wires in), ``summary`` (pure), ``compare`` (pure), ``replay``
(the replay driver). Nothing is imported here: the bootstrap imports ``tap`` and ``replay``
imports the bootstrap.
"""
