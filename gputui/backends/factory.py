"""Choose and build the backend the settings ask for."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.backends.base import Backend, BackendError
from gputui.base.debug_log import log
from gputui.settings import Settings, protection

if TYPE_CHECKING:
    from gputui.snapshot import ClusterSnapshot
    from gputui.vocabulary.model import NodeDescription


def kubeconfig_paths(settings: Settings) -> list[Path]:
    """The files kubectl would read (kubeconfig.kubeconfig_files decides)."""
    from gputui.backends.kubeconfig import kubeconfig_files  # noqa: PLC0415 (kubeconfig, kube_http and urllib3, ~50 ms: not for the demo or --help)

    return kubeconfig_files(settings.kubeconfig)


def have_cluster_config(settings: Settings) -> bool:
    """True when a cluster was asked for: explicitly (flag, KUBECONFIG, context), in-cluster, or ~/.kube/config."""
    if settings.kubeconfig or settings.context or os.environ.get("KUBECONFIG"):
        return True  # asked for by name: a missing file is an error, never a silent demo
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True  # in-cluster
    return any(p.exists() for p in kubeconfig_paths(settings))


def build_backend(settings: Settings, clock: Callable[[], float] = time.time, per_gpu: bool = False,
                  sessions: bool = True) -> Backend:
    """The demo cluster when asked for or when no cluster is configured; else the real one (sessions False: it
    reads no session series, PromConfig.sessions)."""
    if settings.demo or not have_cluster_config(settings):
        from gputui.backends.demo import demo_backend  # noqa: PLC0415 (the demo, ~30 ms: only when it is the cluster)

        guard = protection(settings, "demo")
        backend = demo_backend(seed=settings.seed, clock=clock, read_only=settings.read_only or bool(guard))
        backend.protected = guard
        log.debug("cluster: the embedded demo cluster (SIMULATED, seed %d): it reads no API and no store", settings.seed)
        return backend
    from gputui.backends.kube_backend import live_backend  # noqa: PLC0415 (the live backend, ~200 ms: only for a real cluster)

    log.debug("cluster: a real cluster (kubeconfig context %s); metrics %s", settings.context or "current",
              "from a store" if settings.prometheus else "not configured")
    return live_backend(settings, per_gpu=per_gpu, sessions=sessions)


class NotConnected:
    """The reader of a backend still connecting (pending_backend): it has nothing to give yet."""

    def snapshot(self) -> ClusterSnapshot:
        raise BackendError("not connected yet")

    def gpu_history(self, node: str, minutes: int = 5) -> dict[int, list[float | None]]:
        return {}

    def node_gpus(self, node: str) -> None:
        return None

    def describe(self, node: str, pods: Sequence[tuple[str, str]]) -> NodeDescription:
        raise BackendError("not connected yet")

    def close(self) -> None:
        pass


CACHED_VIEW = "cached view: wait for the live read"  # what a write answers while a cached snapshot is shown
PARTIAL_VIEW = "partial view: wait for the whole first read"  # … while part of a large cluster is shown


def pending_backend(settings: Settings, waiting: str = "") -> Backend:
    """What the TUI holds while it connects to a real cluster off its UI thread (build_backend runs the
    kubeconfig's credential plugin and asks the apiserver): the context's name, nothing to read and nothing
    to write. Reading the kubeconfig is all it does, so a bad kubeconfig or context is still one line before
    the screen opens."""
    from gputui.backends.kubeconfig import target_context  # noqa: PLC0415 (kubeconfig, kube_http and urllib3, ~50 ms: not for the demo)

    return Backend(reader=NotConnected(), writer=None, context=target_context(settings.kubeconfig, settings.context),
                   waiting=waiting)


def context_names(settings: Settings) -> list[str]:
    """The kubeconfig's contexts, for completion; empty when it cannot be read (connecting says why)."""
    files = os.pathsep.join(str(p) for p in kubeconfig_paths(settings) if p.exists())
    if not files:
        return []
    try:
        from kubernetes import config  # noqa: PLC0415 (the kubernetes client, ~250 ms: only when completing a context)

        contexts, _ = config.list_kube_config_contexts(files)
    except Exception:  # noqa: BLE001 - a bad kubeconfig is reported when it is used, not while typing
        return []
    return sorted(str(c.get("name")) for c in contexts if c.get("name"))


def credential_plugins() -> list[tuple[str, float]]:
    """The kubeconfig exec credential plugins running now, (name, time.monotonic() at start): what a connection
    waits on. None when no cluster was ever connected to (the cluster client is then not even imported)."""
    exec_plugins = sys.modules.get("gputui.backends.exec_plugins")
    return exec_plugins.running_plugins() if exec_plugins is not None else []


def stop_credential_plugins() -> None:
    """Stop the credential plugins running now: whatever waits on one fails at once (the TUI quitting)."""
    exec_plugins = sys.modules.get("gputui.backends.exec_plugins")
    if exec_plugins is not None:
        exec_plugins.stop_plugins()


def release() -> None:
    """What connecting left on the machine, gone: running credential plugins, private key files (where memfd is
    unavailable). For SIGHUP and SIGTERM, which end gputui without its exit handlers."""
    exec_plugins = sys.modules.get("gputui.backends.exec_plugins")  # loaded with kubeconfig, with key_files
    if exec_plugins is not None:
        exec_plugins.release()
