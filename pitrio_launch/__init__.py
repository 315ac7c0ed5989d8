"""The ``pitrio`` console script's first code, run before the pitrio package is imported.

Importing pitrio takes ~0.2 s of one core; what can start before it and run beside it on
another core starts here (issue 38: :mod:`.preparse`, a resumed session file parsed
meanwhile). It is a package of its own because importing any module of ``pitrio`` first runs
``pitrio/__init__.py``, which imports the SDK and everything under it.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Entry point of the ``pitrio`` console script: see the module; then pitrio's
    :func:`~pitrio.transports.cli.main`."""
    from pitrio_launch.preparse import start_for

    start_for(sys.argv[1:])
    from pitrio.transports.cli import main as cli_main

    return cli_main()
