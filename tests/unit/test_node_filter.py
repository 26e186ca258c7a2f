from gputui.backends.demo import DemoCluster
from gputui.health import fleet_alerts, node_alerts
from gputui.present.node_filter import ALERT_KINDS, node_matches
from tests.demo_clock import ManualClock


def test_every_alert_kind_the_demo_raises_is_a_filter_word_and_alerts_are_worked_out_only_when_asked():
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    kinds = {a.kind.lower() for a in fleet_alerts(snap, 85.0)}
    assert kinds == ALERT_KINDS  # the demo plants one of each: a kind added to health needs adding here
    asked = []

    def alerts_of(node):
        asked.append(node.name)
        return node_alerts(node, 85.0)

    matched = [n.name for n in snap.nodes if node_matches(n, ["h100-0"], alerts_of, "550.127.05")]
    assert matched and not asked  # a name word needs no alerts
    xid = [n.name for n in snap.nodes if node_matches(n, ["xid"], alerts_of, "550.127.05")]
    assert xid == ["gpu-h100-07"] and len(asked) == len(snap.nodes)
