"""One owner per running drain: a lease written on the node itself.

The lease is one annotation (`gputui.io/drain-lease`: who, host, pid, a token, when renewed), taken
and renewed with the node's resourceVersion as a precondition, so two gputuis racing for a node
cannot both win: the apiserver answers 409 to the slower one, which reads again. Kept on the node
(not a separate Lease object) because every operator already reads nodes and may patch them to
cordon: the holder shows in `kubectl describe node` and needs no extra RBAC.

A holder that stopped renewing for LEASE_S has expired; it is taken over only by an explicit choice
(`--take-over`, or the resume key), except a holder on this very host whose process is gone (a
killed gputui resumed by its operator).
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass

from gputui.backends.base import BackendError, ConflictError, Writer
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import DRAIN_ANNOTATION_PREFIX

LEASE = DRAIN_ANNOTATION_PREFIX + "lease"
LEASE_S = 60.0  # a holder silent this long has expired
RENEW_S = 15.0  # how often a running drain renews
CAS_TRIES = 8  # 409s in a row (kubelet heartbeats also bump the node's resourceVersion)


class LeaseHeld(BackendError):
    """Someone else owns this node's drain."""


@dataclass(frozen=True, slots=True)
class Holder:
    who: str
    host: str
    pid: int
    token: str
    renewed: float = 0.0

    @classmethod
    def me(cls, identity: str) -> Holder:
        return cls(identity, socket.gethostname(), os.getpid(), uuid.uuid4().hex[:12])

    def describe(self, now: float) -> str:
        return f"{self.who} (host {self.host}, pid {self.pid}), renewed {max(0.0, now - self.renewed):.0f}s ago"

    def dead_here(self) -> bool:
        """A holder on this host whose drain no longer runs: its process is gone (killed, SSH closed), or it is
        this very process, whose earlier run was dropped (one process runs one batch at a time)."""
        if self.host != socket.gethostname():
            return False
        if self.pid == os.getpid():
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False


UNREADABLE = "unknown (unreadable lease)"  # who holds a lease gputui cannot read


def holder_of(annotations: dict) -> Holder | None:
    raw = annotations.get(LEASE)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        holder = Holder(str(data["who"]), str(data["host"]), int(data["pid"]), str(data["token"]),
                        float(data["renewed"]))
        if not math.isfinite(holder.renewed):  # NaN never expires (every comparison is false): unreadable
            raise ValueError(holder.renewed)
        return holder
    except (ValueError, KeyError, TypeError):
        # Unreadable: treat as held by "someone" whose lease expired long ago (takeover needs a choice).
        return Holder(UNREADABLE, "?", 0, "?", 0.0)


def foreign_holders(snapshot: ClusterSnapshot, nodes: list[str], now: float) -> list[str]:
    """For each node whose lease is held by another gputui that is not running here: who, in one line."""
    out = []
    for name in nodes:
        node = snapshot.node(name)
        current = holder_of(dict(node.annotations)) if node is not None else None
        if current is not None and not current.dead_here():
            out.append(f"{name}: {current.describe(now)}")
    return out


def draining(snapshot: ClusterSnapshot, now: float) -> list[str]:
    """The nodes a live drain holds: its lease renewed within LEASE_S by a holder that is not known dead, or by
    this process (whose drains run side by side: a fresh renewal of ours is a drain running here). A plan and
    the batch's guard count their pods as moving before their own, whichever gputui runs them. A lease that
    cannot be read may be a drain running: counted (fail closed: its pods may be about to need room)."""
    here = socket.gethostname(), os.getpid()
    out = []
    for node in snapshot.nodes:
        holder = holder_of(dict(node.annotations))
        if holder is not None and (holder.who == UNREADABLE or (now - holder.renewed <= LEASE_S and (
                (holder.host, holder.pid) == here or not holder.dead_here()))):
            out.append(node.name)
    return out


def _cas(writer: Writer, node: str, decide: Callable[[Holder | None], dict[str, str | None] | None]) -> bool:
    """Read the node, let `decide` look at the current holder and return the annotations to write
    (None: write nothing), then write them only if the node has not changed since. True: written."""
    for _ in range(CAS_TRIES):
        annotations, version = writer.node_annotations(node)
        values = decide(holder_of(annotations))
        if values is None:
            return False
        try:
            writer.annotate_node(node, values, resource_version=version)
            return True
        except ConflictError:
            continue  # changed in between (a heartbeat, or another gputui): read again
    raise BackendError(f"node {node}: could not update its drain lease: it kept changing ({CAS_TRIES} tries)")


def acquire(writer: Writer, node: str, me: Holder, *, take_over: bool = False,
            clock: Callable[[], float] = time.time) -> Holder:
    """Take the node's drain lease; LeaseHeld names the holder when someone else has it."""
    now = clock()
    mine = Holder(me.who, me.host, me.pid, me.token, now)

    def decide(current: Holder | None) -> dict[str, str | None]:
        if current is not None and current.token != me.token:
            expired = now - current.renewed > LEASE_S
            if not expired and not current.dead_here():
                raise LeaseHeld(f"node {node} is being drained by {current.describe(now)}")
            if expired and not take_over and not current.dead_here():
                raise LeaseHeld(f"node {node}: a drain by {current.describe(now)} stopped renewing its lease; "
                                f"take it over explicitly (--take-over, or R and confirm)")
        return {LEASE: json.dumps(asdict(mine), sort_keys=True)}

    _cas(writer, node, decide)
    return mine


def renew(writer: Writer, node: str, me: Holder, clock: Callable[[], float] = time.time) -> Holder:
    """Renew a lease we hold; LeaseHeld when it is no longer ours: taken over meanwhile, or taken over and
    dropped (the node given back by its new holder): the drain must stop, never take the node again."""
    now = clock()
    mine = Holder(me.who, me.host, me.pid, me.token, now)

    def decide(current: Holder | None) -> dict[str, str | None]:
        if current is None:
            raise LeaseHeld(f"node {node}: this drain's lease is gone (dropped by whoever took it over): stopped")
        if current.token != me.token:  # taken over: never taken back, however its new holder is doing
            if now - current.renewed > LEASE_S:
                raise LeaseHeld(f"node {node}: a drain by {current.describe(now)} stopped renewing its lease; "
                                f"take it over explicitly (--take-over, or R and confirm)")
            raise LeaseHeld(f"node {node} is being drained by {current.describe(now)}")
        return {LEASE: json.dumps(asdict(mine), sort_keys=True)}

    _cas(writer, node, decide)
    return mine


def release(writer: Writer, node: str, me: Holder) -> bool:
    """Drop the lease if it is still ours (a drain that ended, however it ended). False: it was not."""
    return _cas(writer, node,
                lambda current: {LEASE: None} if current is not None and current.token == me.token else None)
