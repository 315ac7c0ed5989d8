"""Shared test configuration.

Hypothesis runs without a per-example deadline: the codec builds its cattrs hooks lazily on
first use, which would make the first example of a property look slow.
"""

from hypothesis import settings

settings.register_profile("pitrio", deadline=None)
settings.load_profile("pitrio")
