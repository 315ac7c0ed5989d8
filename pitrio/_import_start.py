"""Importing this module starts pitrio's bulk imports: :func:`pitrio._attrs_cache.begin`.

:mod:`pitrio.sdk.agent` imports it before anything else and calls
:func:`~pitrio._attrs_cache.uninstall` after its last import, so the classes of every module
it loads come from the attrs method cache with the cyclic collector off (start-up time, issue
38). A module of its own because an import is the one statement that may precede the imports
of a module; importing :mod:`pitrio._attrs_cache` alone (for ``caching()``) starts nothing.
"""

from __future__ import annotations

from pitrio import _attrs_cache

_attrs_cache.begin()
