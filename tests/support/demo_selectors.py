"""The demo cluster read with Services and Deployments' selectors given by the test (a version label the
Service selects on and the Deployment does not: the switch that takes a pod out of rotation)."""

from __future__ import annotations

from dataclasses import replace

from gputui.vocabulary.model import PodSelector

NAME, VERSION = "app.kubernetes.io/name", "app.kubernetes.io/version"


def busy_node(snap):
    return max((n for n in snap.nodes if n.ready and not n.unschedulable),
               key=lambda n: sum(snap.sessions(p).live or 0 for p in snap.pods_on(n.name)))


def served(snap):
    """Each service's Service selects name and version; its Deployment only the name: version is the switch."""
    selectors = []
    for s in snap.services:
        for v in s.versions:
            selectors.append(PodSelector("Service", s.namespace, f"{s.name}-{v.name}", {NAME: s.name, VERSION: v.name}))
        selectors.append(PodSelector("Deployment", s.namespace, s.name, {NAME: s.name}, frozenset({NAME})))
    return replace(snap, selectors=tuple(selectors))
