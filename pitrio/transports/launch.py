"""The ``pitrio`` console script's first code, run before the runtime is imported.

Importing the runtime takes ~0.2 s of one core; what can start before it and run beside it on
another core starts here (issue 38: :mod:`pitrio._preparse`, a resumed session file parsed
meanwhile). Importing this module runs only ``pitrio/__init__.py``, which loads the SDK on
first use, and the empty ``pitrio/transports/__init__.py``; the command line itself
(:mod:`pitrio.transports.cli`) is imported once the child is started.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Entry point of the ``pitrio`` console script: see the module; then pitrio's
    :func:`~pitrio.transports.cli.main`."""
    from pitrio._preparse import start_for

    start_for(sys.argv[1:])
    from pitrio.transports.cli import main as cli_main

    return cli_main()
