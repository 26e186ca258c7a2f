"""Choose and build the backend the settings ask for."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from gputui.backends.base import Backend
from gputui.debug_log import log
from gputui.settings import Settings, protection


def kubeconfig_paths(settings: Settings) -> list[Path]:
    """The files kubectl would read (kube_http.kubeconfig_files decides)."""
    from gputui.backends.kube_http import kubeconfig_files

    return kubeconfig_files(settings.kubeconfig)


def have_cluster_config(settings: Settings) -> bool:
    """True when a cluster was asked for: explicitly (flag, KUBECONFIG, context), in-cluster, or ~/.kube/config."""
    if settings.kubeconfig or settings.context or os.environ.get("KUBECONFIG"):
        return True  # asked for by name: a missing file is an error, never a silent demo
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True  # in-cluster
    return any(p.exists() for p in kubeconfig_paths(settings))


def build_backend(settings: Settings, clock: Callable[[], float] = time.time, per_gpu: bool = False) -> Backend:
    """The demo cluster when asked for or when no cluster is configured; else the real one."""
    if settings.demo or not have_cluster_config(settings):
        from gputui.backends.demo import demo_backend

        guard = protection(settings, "demo")
        backend = demo_backend(seed=settings.seed, clock=clock, read_only=settings.read_only or bool(guard))
        backend.protected = guard
        log.debug("cluster: the embedded demo cluster (SIMULATED, seed %d): it reads no API and no store", settings.seed)
        return backend
    from gputui.backends.kube_backend import live_backend

    log.debug("cluster: a real cluster (kubeconfig context %s); metrics %s", settings.context or "current",
              "from a store" if settings.prometheus else "not configured")
    return live_backend(settings, per_gpu=per_gpu)


def context_names(settings: Settings) -> list[str]:
    """The kubeconfig's contexts, for completion; empty when it cannot be read (connecting says why)."""
    files = os.pathsep.join(str(p) for p in kubeconfig_paths(settings) if p.exists())
    if not files:
        return []
    try:
        from kubernetes import config

        contexts, _ = config.list_kube_config_contexts(files)
    except Exception:  # a bad kubeconfig is reported when it is used, not while typing
        return []
    return sorted(str(c.get("name")) for c in contexts if c.get("name"))
