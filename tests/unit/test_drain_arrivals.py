"""A pod that stays in rotation: the plan gives its arrival rate and what its deadline finds (Little's law:
sessions held = arrivals per second x mean time held), and says unknown when no counter was read."""

from __future__ import annotations

from dataclasses import replace

from gputui.backends.base import BackendError
from gputui.backends.demo import DemoCluster
from gputui.ops.drain.arrivals import batch_with_arrivals, outcome, with_arrivals
from gputui.ops.drain.batch_plan import plan_batch
from gputui.ops.drain.plan import DrainOptions, plan_drain
from gputui.vocabulary.sessions import Arrivals, PodSessions, SessionState
from tests.demo_clock import ManualClock
from tests.support.demo_selectors import busy_node, served


def _stuck_plan():
    """The busiest node with no switch anywhere: Services select on the Deployment's own key only."""
    snap = served(DemoCluster(seed=7, clock=ManualClock()).snapshot())
    flat = tuple(replace(s, match={k: v for k, v in s.match.items() if k == "app.kubernetes.io/name"})
                 for s in snap.selectors)
    snap = replace(snap, selectors=flat)
    return snap, plan_drain(snap, busy_node(snap).name, DrainOptions(session_deadline_s=600))


def test_the_plan_predicts_the_sessions_a_pod_in_rotation_holds_at_its_deadline():
    _, plan = _stuck_plan()
    stuck = [p for p in plan.to_evict if "new sessions keep arriving" in p.rotation_note]
    assert stuck
    first = stuck[0]
    rates = {first.pod.key: Arrivals(2.5, 8.0)}
    after = with_arrivals(plan, rates)
    note = next(p.rotation_note for p in after.pods if p.pod.key == first.pod.key)
    assert note.endswith("; about 2.5 new sessions/s held 8s on average: it reaches its deadline (600s) with about "
                         "20 sessions, cut then unless moved first"), note
    assert f"{first.pod.key}: {note}" in after.warnings  # the warning says the same, in place of the old one
    assert len(after.warnings) == len(plan.warnings)
    # Another pod, no counter read: unknown, with its present count as the best guess, never zero.
    other = next(p for p in after.pods if p.pod.key == stuck[1].pod.key)
    assert "arrival rate unknown" in other.rotation_note


def test_without_a_mean_or_a_count_the_outcome_says_what_is_known():
    _, plan = _stuck_plan()
    p = next(p for p in plan.to_evict if "new sessions keep arriving" in p.rotation_note)
    assert outcome(p, Arrivals(1.0), 60) == f"about 1 new sessions/s; {p.sessions.live} sessions now, and about " \
                                           "as many at its deadline"
    unknown = replace(p, sessions=PodSessions(SessionState.UNKNOWN))
    assert outcome(unknown, None, 60) == "arrival rate unknown (no request counter read)"
    assert outcome(replace(p, rotation_note="out of rotation"), Arrivals(9.0, 9.0), 60) == ""
    assert outcome(p, Arrivals(0.04, 120.0), 900).startswith("about 0.04 new sessions/s held 120s on average")


class _Failing:
    def __init__(self, cluster):
        self.cluster = cluster

    def arrivals(self, pods, window_s=120.0):
        raise BackendError("Prometheus answered 503")


def test_a_failed_read_leaves_every_rate_unknown_and_says_why_once():
    snap, plan = _stuck_plan()
    batch = plan_batch(snap, [plan.node], DrainOptions(session_deadline_s=600))
    read = batch_with_arrivals(batch, _Failing(None))
    warnings = read.plans[0].warnings
    assert warnings.count("arrival rates unknown: Prometheus answered 503") == 1
    assert all("arrival rate unknown" in p.rotation_note for p in read.plans[0].pods
               if "new sessions keep arriving" in p.rotation_note)
