"""gputui: GPU nodes and inference services of a Kubernetes cluster, in a terminal."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gputui")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
