"""The node filter's words (`/` on the dashboard): what each matches, in one place.

Words are ANDed. A state word matches that state exactly (`ready` is not NotReady); `alert` (or `problem`)
matches nodes with any alert; `drift` nodes whose driver differs from the fleet's; an alert kind (`xid`,
`temp`, `lost`…) nodes with that alert. Any other word is looked for in the node's name, GPU model and
driver version.
"""

from __future__ import annotations

from gputui.health import Alert, has_driver_drift
from gputui.model import Node, NodeState

STATE_WORDS = {state.value.lower(): state for state in NodeState}
PROBLEM_WORDS = {"alert", "alerts", "problem", "problems"}
DRIFT_WORDS = {"drift", "drifted"}


def words_of(text: str) -> list[str]:
    return text.lower().split()


def node_matches(node: Node, words: list[str], alerts: list[Alert], majority_driver: str) -> bool:
    """Whether the node passes every word. `alerts`: its alerts (health.node_alerts)."""
    kinds = {a.kind.lower() for a in alerts}
    haystack = f"{node.name} {node.gpu_product} {node.driver_version}".lower()
    for word in words:
        if word in STATE_WORDS:
            ok = node.state is STATE_WORDS[word]
        elif word in PROBLEM_WORDS:
            ok = bool(alerts)
        elif word in DRIFT_WORDS:
            ok = has_driver_drift(node, majority_driver)
        elif word in kinds:
            ok = True
        else:
            ok = word in haystack
        if not ok:
            return False
    return True
