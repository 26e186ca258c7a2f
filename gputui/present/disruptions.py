"""Every node being disrupted, one row per actor's hold, in the order an operator reads them: stuck ones first,
then the oldest (a hold whose start no actor records after every dated one), then by node. The one home of
these rows: the `:disruptions` view and `gputui disruptions` both show them (issue 40 items 1 and 6).

What the Node objects say, and the NodeMaintenances, Karpenter NodeClaims, NVSentinel requests and NVSentinel janitor
actions (RebootNode, TerminateNode, GPUReset) the snapshot carries, are read (gputui.policy.disruptions).
EvictionRequests and Evictions (the alpha EvictionRequest API) are read too, for the drain plan: they ask for a pod's
eviction, not a node's, so they add no row, but `sources` names their state. `sources` names each
source's state: read, not installed, or unknown (never "none"). When the nodes, or an installed actor's objects that
hold nodes, could not be read, the list is unknown, never empty: `unknown_because` says why. Pure: no Textual, no
I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gputui.base.safe_text import visible
from gputui.policy.disruptions import node_disruptions
from gputui.present.cells import ago
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary import disruptions as d
from gputui.vocabulary.disruptions import Disruption
from gputui.vocabulary.eviction_requests import KINDS as EVICTION_KINDS
from gputui.vocabulary.model import Node
from gputui.vocabulary.nvsentinel_janitor import KINDS as JANITOR_KINDS

# Where each actor's hold is read from in this slice: the Node (labels, annotations, taints, spec.unschedulable).
NODE_SOURCE = "Node objects"
# gputui.backends.kube_actors', .kube_nvsentinel's and .kube_evictions' names
ACTOR_SOURCES = ("NodeMaintenance", "NodeClaim", "ExternalRemediationRequest", "MaintenanceRequest", *JANITOR_KINDS,
                 *EVICTION_KINDS)
NOT_READ = "not read (this backend reads no actor objects)"

# The actor as the dashboard's state column names it: whole beside the state where the column is wide; where it
# is not, the word alone (the cell keeps the state's colour), short where even that does not fit.
ACTOR_WORDS = {
    d.NVSENTINEL: "nvsentinel", d.KARPENTER: "karpenter", d.CLUSTER_AUTOSCALER: "autoscaler",
    d.GPU_OPERATOR: "gpu-operator", d.GPUTUI: "gputui", d.PERSON: "person", d.MAINTENANCE_OPERATOR: "maintenance",
    d.NODE_LIFECYCLE: "lifecycle",
}
ACTOR_SHORT = {d.GPU_OPERATOR: "gpu-op", d.CLUSTER_AUTOSCALER: "autoscale", d.NVSENTINEL: "nvsent",
               d.MAINTENANCE_OPERATOR: "maint", d.NODE_LIFECYCLE: "lifecyc"}
# A state that already names its actor: `upgrading` is the GPU Operator's, `draining` gputui's.
SAID_BY_STATE = {"upgrading": d.GPU_OPERATOR, "draining": d.GPUTUI}  # NodeState values, lower case


@dataclass(frozen=True, slots=True)
class DisruptionRow:
    """One actor's hold on one node, as the view and the CLI show it. Text fields are as the cluster wrote
    them (JSON keeps them raw, escaped by JSON); `cells()` gives them made visible for a terminal."""

    node: str
    actor: str
    phase: str
    since: float | None  # epoch seconds the actor recorded; None: it records none gputui reads
    age_s: float | None  # how long ago that was at the snapshot's time; None with `since`
    why: str
    stuck: str  # why it looks stuck; "" when it does not
    cordons: bool

    @property
    def key(self) -> str:
        """Unique per row: a node may be held by two actors, or by one in two ways (NVSentinel's quarantine
        and its external remediation)."""
        return f"{self.node}\x00{self.actor}\x00{self.phase}"

    def age_text(self) -> str:
        return "–" if self.age_s is None else ago(self.age_s)

    def to_dict(self, simulated: bool) -> dict[str, Any]:
        return {"node": self.node, "actor": self.actor, "phase": self.phase, "since": self.since,
                "age_s": self.age_s, "why": self.why, "stuck": self.stuck or None, "cordons": self.cordons,
                "simulated": simulated}


def order_key(row: DisruptionRow) -> tuple[bool, bool, float, str, str]:
    """Stuck first; then oldest first, undated after every dated one; then node and actor A→Z."""
    return (not row.stuck, row.age_s is None, -(row.age_s or 0.0), row.node, row.actor)


def disruption_rows(snapshot: ClusterSnapshot) -> list[DisruptionRow]:
    """Every hold on every node of `snapshot`, in order_key's order. Worked out once per snapshot."""
    return snapshot.derived("disruption_rows", lambda: _rows(snapshot))


def _rows(snapshot: ClusterSnapshot) -> list[DisruptionRow]:
    now = snapshot.taken_at
    rows = [DisruptionRow(n.name, x.actor, x.phase, x.since, None if x.since is None else max(0.0, now - x.since),
                          x.why, x.stuck, x.cordons)
            for n in snapshot.nodes for x in node_disruptions(n, now, snapshot)]
    return sorted(rows, key=order_key)


def unknown_because(snapshot: ClusterSnapshot) -> str:
    """Why the list cannot be trusted to be complete ("" when it can): the node read failed or never happened.
    An empty list is then unknown, not "no node is disrupted"."""
    for source in snapshot.sources:
        if source.name == "API" and (source.error or source.fetched_at is None):
            return f"the nodes could not be read ({source.error or 'not read yet'})"
    reads = snapshot.actors.reads if snapshot.actors is not None else {}
    # EvictionRequests hold pods, not nodes: unread, they leave no node's hold unknown (the drain plan says so).
    unread = [f"{name} objects could not be read ({state.removeprefix(d.UNKNOWN + ': ')})"
              for name, state in reads.items() if state.startswith(d.UNKNOWN) and name not in EVICTION_KINDS]
    return "; ".join(unread)


def sources(snapshot: ClusterSnapshot) -> dict[str, str]:
    """Each source of the holds and its state: "read", "not installed" (the actor's CRD is not served), "unknown:
    why", or not read (a backend that reads no actor objects)."""
    nodes = next((f"unknown: {s.error or 'not read yet'}" for s in snapshot.sources
                  if s.name == "API" and (s.error or s.fetched_at is None)), d.READ)
    reads = snapshot.actors.reads if snapshot.actors is not None else {}
    # A reader of actors leaves the EvictionRequest API out of its reads where it is not served (kube_actors).
    absent = {k: d.NOT_INSTALLED for k in EVICTION_KINDS} if snapshot.actors is not None else {}
    return {NODE_SOURCE: nodes, **{name: reads.get(name, absent.get(name, NOT_READ)) for name in ACTOR_SOURCES}}


def actor_of(node: Node, snapshot: ClusterSnapshot) -> str:
    """The one actor the dashboard names beside a node's state: the first hold (stuck ones first), "" when none."""
    found = node_disruptions(node, snapshot.taken_at, snapshot)
    return found[0].actor if found else ""


def state_with_actor(state: str, actor: str, width: int) -> str:
    """The state column's words: `cordoned·nvsentinel` where it fits; else the actor's word alone (a person's
    cordon: `cordoned` alone, what a cordon with no owner always said); the state alone when no actor holds the
    node or the state already names it (`upgrading`, `draining`)."""
    if not actor or SAID_BY_STATE.get(state.lower()) == actor:
        return state
    word = ACTOR_WORDS.get(actor, actor)
    if len(state) + 1 + len(word) <= width:
        return f"{state}·{word}"
    if actor == d.PERSON:
        return state
    return word if len(word) <= width else ACTOR_SHORT.get(actor, word)[:width]


def cells(row: DisruptionRow, why_width: int) -> tuple[str, str, str, str, str]:
    """node, actor, phase, age, why: made visible (control characters shown, not sent), each one line; why cut
    to `why_width` with an ellipsis (the whole of it is below the table for the selected row)."""
    why = visible(row.why, None)
    if len(why) > why_width:
        why = why[:max(0, why_width - 1)] + "…"
    return (visible(row.node, 63), visible(row.actor, 20), visible(row.phase, 30), row.age_text(), why)


def node_holds(node: Node, snapshot: ClusterSnapshot | None, now: float) -> list[Disruption]:
    """The node's holds for node detail and describe (stuck first), read as the dashboard reads them."""
    return node_disruptions(node, now, snapshot)


def since_text(x: Disruption, now: float) -> str:
    """`3.0h` ago, or `since unknown` when the actor records no time gputui reads (never a made-up 0)."""
    return "since unknown" if x.since is None else f"for {ago(max(0.0, now - x.since))}"


def hold_words(x: Disruption, now: float) -> tuple[str, str, str]:
    """(`nvsentinel quarantined for 3.0h`, why, stuck): made visible, one line each, for node detail and describe."""
    head = f"{visible(x.actor, 40)} {visible(x.phase, 60)} {since_text(x, now)}"
    return head, visible(x.why), visible(x.stuck) if x.stuck else ""
