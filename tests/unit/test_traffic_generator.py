"""The live-traffic harness's own bookkeeping, without a cluster: what a stop settles."""

import heapq
import time

from tests.support.traffic import PodTally, Session, TrafficGenerator

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def _generator(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    return TrafficGenerator(path, None)


def _hold(gen, pod, uid, started, planned_end):
    """A session as the generator's loop would have opened it."""
    s = Session(next(gen._ids), "Service ns/chat", "Service ns/chat", pod, uid, started, planned_end)
    gen._sessions.append(s)
    gen._live.setdefault(uid, []).append(s)
    heapq.heappush(gen._ends, (s.planned_end, s.id, s))
    gen._tally.setdefault(pod, PodTally()).started += 1
    gen._pod_of_uid[uid] = pod
    return s


def test_a_stop_just_after_a_pod_went_cuts_its_sessions_not_leaves_them_unfinished(tmp_path):
    # The race a busy machine hits: the pod's DELETED event is in, the test stops the generator before the
    # loop's next tick settles it. Its sessions were cut when it went, whatever the loop's timing.
    gen = _generator(tmp_path)
    now = time.time()
    long = _hold(gen, "ns/victim", "uid-v", now - 5, now + 30)
    short = _hold(gen, "ns/victim", "uid-v", now - 5, now - 2)  # ended before the pod went
    other = _hold(gen, "ns/other", "uid-o", now - 5, now + 30)
    gen._on_pod_event("DELETED", {"metadata": {"uid": "uid-v", "namespace": "ns", "name": "victim"}}, now - 1)
    report = gen.stop()
    by_id = {s.id: s for s in gen.sessions()}
    assert by_id[long.id].outcome == "cut" and by_id[long.id].ended == now - 1
    assert by_id[short.id].outcome == "ended"
    assert by_id[other.id].outcome == "unfinished"
    assert report.cut == 1 and report.pods["ns/victim"].cut == 1 and report.unfinished == 1
