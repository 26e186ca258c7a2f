"""gputui: GPU nodes and inference services of a Kubernetes cluster, in a terminal."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """`gputui.__version__`, read from the installed metadata only when asked for: importing
    importlib.metadata costs more than 10 ms on the way to the first frame."""
    if name != "__version__":
        raise AttributeError(f"module 'gputui' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 (importlib.metadata, ~20 ms: only when the version is asked for)

    try:
        return version("gputui")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0+source"
