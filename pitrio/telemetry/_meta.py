"""What the telemetry says about pitrio itself."""

from __future__ import annotations


def version() -> str:
    """pitrio's version, as the spans' instrumentation scope and the resource name it."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("pitrio")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "0+unknown"
