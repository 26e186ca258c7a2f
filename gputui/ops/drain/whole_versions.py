"""Versions a drain would empty: every pod of a version on the nodes drained (issue 33, item 2).

Taking pods out of rotation keeps a pod of each path serving, so the last pods of a version stay in rotation,
taking new sessions, until replacements serve elsewhere: the drain waits longer than their sessions. The plan
says so before anything is written, and proposes moving the version's weight to a version serving elsewhere
first, as the command to run.
"""

from __future__ import annotations

import shlex
from collections import defaultdict

from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import InferencePod


def whole_version_warnings(snapshot: ClusterSnapshot, moving: list[InferencePod], away: set[str]) -> list[str]:
    """What the drain empties: each version of a service whose every live pod is on a node in `away` (with the
    shift that moves its weight to a version serving elsewhere), or the whole service, said once."""
    by_version: dict[tuple[str, str], dict[str, list[InferencePod]]] = defaultdict(lambda: defaultdict(list))
    for p in snapshot.pods:
        if p.service and not p.deleting and not p.terminated:
            by_version[(p.namespace, p.service)][p.version].append(p)
    out: list[str] = []
    for namespace, name in sorted({(p.namespace, p.service) for p in moving if p.service}):
        versions = by_version.get((namespace, name), {})
        emptied = sorted(v for v, pods in versions.items() if all(p.node in away for p in pods))
        if not emptied:
            continue
        key = f"{namespace}/{name}"
        if len(emptied) == len(versions):
            n = sum(len(pods) for pods in versions.values())
            out.append(f"every pod of {key} ({n}) is on the nodes drained and no version serves elsewhere to "
                       f"shift its traffic to: its last pods keep taking new sessions until replacements serve")
            continue
        service = snapshot.service(key)
        others = [v for v in versions if v not in emptied]
        for version in emptied:
            text = f"every pod of {key} version {version} ({len(versions[version])}) is on the nodes drained"
            if service is None or not service.router_kind:
                continue  # one Service over every version: the others' pods take its sessions, no shift needed
            share = service.share_pct(version)
            if share == 0.0:
                continue  # no weight: nothing new is sent to it
            shift = " ".join(f"--to {shlex.quote(o)}={100 if i == 0 else 0}" for i, o in enumerate(others))
            share_text = f"its {share:.0f}% of" if share is not None else "its share of"
            out.append(f"{text}: {share_text} new sessions keep coming until its last pod goes; shift its weight "
                       f"away first: gputui shift {shlex.quote(key)} --to {shlex.quote(version)}=0 {shift}")
    return out
