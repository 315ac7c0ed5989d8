"""Schedule exploration for concurrency research (issue 39, ``pitrio explore``): see
``docs/research.md``.

``scenario`` and ``observation`` (data, pure), ``invariants`` (pure), ``schedule`` (the seeded
scheduler standing in for trio's batch shuffle), ``runner`` (one schedule of a real session),
``explorer`` (many seeds, shrinking), ``corpus`` (the shipped scenarios), ``inprocess_mcp``
(MCP servers served over memory streams). Nothing is imported here.
"""
