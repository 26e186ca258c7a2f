"""The node filter's words (`/` on the dashboard): what each matches, in one place.

Words are ANDed. A state word matches that state exactly (`ready` is not NotReady); `alert` (or `problem`)
matches nodes with any alert; `drift` nodes whose driver differs from the fleet's; an alert kind (`xid`,
`temp`, `lost`…) nodes with that alert. Any other word is looked for in the node's name, GPU model and
driver version.
"""

from __future__ import annotations

from typing import Callable

from gputui.health import Alert, has_driver_drift
from gputui.model import Node, NodeState

STATE_WORDS = {state.value.lower(): state for state in NodeState}
PROBLEM_WORDS = {"alert", "alerts", "problem", "problems"}
DRIFT_WORDS = {"drift", "drifted"}
# The alert kinds health.node_alerts gives: only these words need a node's alerts worked out.
ALERT_KINDS = {"notready", "lost", "xid", "health", "temp", "condition", "upgrade"}


def words_of(text: str) -> list[str]:
    return text.lower().split()


def node_matches(node: Node, words: list[str], alerts_of: Callable[[Node], list[Alert]], majority_driver: str) -> bool:
    """Whether the node passes every word. `alerts_of`: its alerts (health.node_alerts), worked out only for a
    word that needs them (every keystroke of the filter runs this over the whole fleet)."""
    alerts: list[Alert] | None = None
    haystack = f"{node.name} {node.gpu_product} {node.driver_version}".lower()
    for word in words:
        if word in STATE_WORDS:
            ok = node.state is STATE_WORDS[word]
        elif word in PROBLEM_WORDS or word in ALERT_KINDS:
            alerts = alerts_of(node) if alerts is None else alerts
            ok = bool(alerts) if word in PROBLEM_WORDS else any(a.kind.lower() == word for a in alerts)
            ok = ok or word in haystack
        elif word in DRIFT_WORDS:
            ok = has_driver_drift(node, majority_driver)
        else:
            ok = word in haystack
        if not ok:
            return False
    return True
