from gputui.backends.demo import DemoCluster
from gputui.policy.figures import alerts
from gputui.policy.health import node_alerts
from gputui.present.node_filter import ALERT_KINDS, node_matches
from tests.demo_clock import ManualClock


def test_every_alert_kind_the_demo_raises_is_a_filter_word_and_alerts_are_worked_out_only_when_asked():
    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    kinds = {a.kind.lower() for a in alerts(snap, 85.0)}  # health's and the expired cordon (policy.problems)
    assert kinds == ALERT_KINDS  # the demo plants one of each: a kind added to health needs adding here
    asked = []

    def alerts_of(node):
        asked.append(node.name)
        return node_alerts(node, 85.0)

    matched = [n.name for n in snap.nodes if node_matches(n, ["h100-0"], alerts_of, "550.127.05")]
    assert matched and not asked  # a name word needs no alerts
    xid = [n.name for n in snap.nodes if node_matches(n, ["xid"], alerts_of, "550.127.05")]
    # the demo's XID nodes (application 13, hardware 79 on one GPU, the fallen-off-the-bus node), read off its GPUs
    assert xid == [n.name for n in snap.nodes if any(g.xid for g in n.gpus)] == ["gpu-h100-05", "gpu-h100-07",
                                                                               "gpu-a100-04"]
    assert len(asked) == len(snap.nodes)


def test_each_character_typed_matches_what_a_fresh_filter_would_including_a_word_that_becomes_special():
    """A character typed at the end looks only among the last matches; every step must give exactly what the
    whole fleet gives for those words. `read` is a plain word (NotReady nodes' names do not hold it, but
    `ready` is a state): typing on from `read` to `ready` must not keep narrowing as if it were."""
    from gputui.present.node_filter import matching, narrows, words_of

    snap = DemoCluster(seed=7, clock=ManualClock()).snapshot()
    for typed in ("h100-0", "ready", "gpu drift", "gpu-a xid", "l40s notready"):
        last = None
        for end in range(1, len(typed) + 1):
            words = words_of(typed[:end])
            last = matching(snap, words, 85.0, "550.127.05", last)
            fresh = matching(snap, words, 85.0, "550.127.05", None)
            assert list(last[2]) == list(fresh[2]), typed[:end]
    assert narrows(["h1"], ["h10"]) and narrows(["gpu"], ["gpu", "x"]) and not narrows(["read"], ["ready"])
    assert not narrows(["h100"], ["h10"])  # a character deleted widens
    assert matching(snap, ["ready"], 85.0, "", None)[2].keys() < {n.name for n in snap.nodes}
