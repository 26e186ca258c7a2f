"""Evictions on the real apiserver, each claim of README's drain section isolated (issue 34): a pod is gone only
when the API says so (not when a reader's view lacks it, not when its GET fails), each eviction carries the pod's
own grace period unless the operator set one, and deleting pods past the Eviction API needs --force and the node
names typed again, and then deletes only those nodes' pods.

The eviction bodies are read from the apiserver's audit log, which records evictions and pod deletions at Request
level (tests/support/control_plane.py: POD_REMOVAL_BODIES)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from gputui.backends.kube_backend import live_backend
from gputui.ops.audit import AuditLog
from gputui.ops.context import OpContext
from gputui.ops.drain.events import EventKind
from gputui.ops.drain.plan import DrainOptions, Step, plan_drain
from gputui.ops.drain.report import Outcome
from gputui.ops.drain.run import run_drain
from gputui.settings import Settings
from gputui.snapshot import ClusterSnapshot
from gputui.vocabulary.model import DRAIN_PHASE_ANNOTATION
from tests.support.api_faults import Answer, FaultProxy, kubeconfig
from tests.support.drain_safety import (
    POOL_LABEL,
    Driver,
    app_writes,
    batch_pods,
    brief,
    budget,
    node_annotations,
    place,
    scene,
)
from tests.support.gputui_cli import run
from tests.support.procs import wait_until


def pool(*names: str) -> dict[str, dict]:
    """Each node in a pool of its own with a spare (NAME-spare), where its evicted pods can go."""
    return {n: {"gpus": 4, "labels": {POOL_LABEL: name}} for name in names for n in (name, f"{name}-spare")}


def planned(backend, node: str, pods: list, options: DrainOptions = DrainOptions()):
    """The drain's plan once the backend's snapshot holds the pods, each to be evicted at once (no session signal)."""
    names = {p.metadata.name for p in pods}
    snap = wait_until(lambda: (s := backend.reader.snapshot()) and names <= {p.name for p in s.pods_on(node)} and s,
                      30, what="the pods in the snapshot")
    plan = plan_drain(snap, node, options)
    assert sorted((p.pod.name, p.step) for p in plan.to_evict) == sorted((n, Step.EVICT) for n in names)
    return plan


class BlindReader:
    """The live reader, except that the pods view a running drain re-reads each poll leaves one pod out while
    `blind` is set: a watch cache that lags behind, or lost the pod. Everything else is the live reader's."""

    def __init__(self, reader, key: str) -> None:
        self.reader, self.key = reader, key
        self.blind = True
        self.missed = 0

    def __getattr__(self, name: str):
        return getattr(self.reader, name)

    def snapshot(self) -> ClusterSnapshot:
        return self.reader.snapshot()

    def pods_snapshot(self, keys: Collection[str], namespaces: Collection[str] = ()) -> ClusterSnapshot:
        snap = self.reader.pods_snapshot(keys, namespaces)
        if not self.blind:
            return snap
        self.missed += 1
        return dataclasses.replace(snap, pods=tuple(p for p in snap.pods if p.key != self.key), indexes=None)


def test_a_pod_missing_from_the_readers_view_is_not_gone_while_the_api_holds_it(cluster, fake_kubelet, tmp_path):
    """The drain's view lacks the pod for ten polls: each time the API is asked (the pod's own GET) and says it is
    there, so nothing is marked gone or done and nothing is evicted; once the view holds it again, it is evicted
    and confirmed gone.

    Fails on this one-line mutation of gputui/ops/drain/run.py's _poll: `if writer.pod_uid(namespace, name) !=
    prog.uid:` → `if True:` (an empty view trusted: the node "drained" with its pod still running)."""
    ns, node = "t-evict-blind", "evict-blind"
    with scene(cluster, fake_kubelet, ns, pool(node)) as (core, apps, _policy):
        (pod,) = place(core, apps, ns, batch_pods("job", ns, node, 1), node, 1, spare=f"{node}-spare")
        backend = live_backend(Settings(kubeconfig=str(cluster.admin_kubeconfig)))
        try:
            plan = planned(backend, node, [pod])
            blind = BlindReader(backend.reader, f"{ns}/{pod.metadata.name}")
            mark = cluster.audit_mark()
            drain = Driver(run_drain(plan,
                                     OpContext(blind, backend.writer, AuditLog(tmp_path / "a.jsonl", "t", "x"),
                                               poll_s=0.3)))
            drain.wait(lambda d: blind.missed >= 10, 30, "ten polls without the pod in view")
            assert not drain.kinds(EventKind.GONE) and not drain.kinds(EventKind.DONE), drain.said()
            assert not drain.kinds(EventKind.EVICTED), drain.said()
            live = core.read_namespaced_pod(pod.metadata.name, ns)
            assert live.metadata.uid == pod.metadata.uid and live.metadata.deletion_timestamp is None
            assert core.read_node(node).metadata.annotations[DRAIN_PHASE_ANNOTATION] == "waiting"
            asked = [e for e in cluster.audit_events("admin", since=mark, verbs={"get"}, resource="pods")
                     if e["objectRef"].get("name") == pod.metadata.name]
            assert len(asked) >= 9, len(asked)  # the API was asked, poll after poll
            assert not app_writes(cluster, mark, keep=lambda e: e["objectRef"].get("resource") == "pods")
            blind.blind = False
            report = drain.join(60)
            assert report.outcome is Outcome.DRAINED and report.evicted == 1, report
            assert [e.message for e in drain.kinds(EventKind.GONE)] == ["gone (confirmed by the API)"]
        finally:
            backend.close()


FAULTS = (  # the pod's GET answered by the proxy: (status, what the drain's pause must say)
    (401, "rejected the credentials (401 Unauthorized)"),
    (403, "forbidden: injected 403 on the pod's GET"),
    (500, "500: injected 500 on the pod's GET"),
    (503, "503: injected 503 on the pod's GET"),
)


def test_a_failed_get_of_an_evicted_pod_pauses_the_drain_and_never_reads_it_as_gone(cluster, fake_kubelet,
                                                                                    tmp_path):
    """The pod is evicted and terminates slowly (a 120 s grace period); the drain asks the API whether it is gone
    and the proxy answers that GET with 401, then 403, 500 and 503. Each answer pauses the drain with its reason;
    the pod is never gone while the API still holds it. With the GET answered again the drain resumes, still
    waiting; when the pod is really deleted, the next GET's 404 ends it.

    Fails on this one-line mutation of gputui/backends/kube_writer.py's pod_uid: `if exc.status == 404:` →
    `if exc.status >= 400:` (a failed read taken for "gone")."""
    ns, node = "t-evict-get", "evict-get"
    with scene(cluster, fake_kubelet, ns, pool(node)) as (core, apps, _policy):
        (pod,) = place(core, apps, ns, batch_pods("job", ns, node, 1, grace_s=120), node, 1, spare=f"{node}-spare")
        name, uid = pod.metadata.name, pod.metadata.uid
        path = f"/api/v1/namespaces/{ns}/pods/{name}"
        fault: dict[str, Answer | None] = {"answer": Answer(401, "injected 401 on the pod's GET")}
        with FaultProxy(cluster.api_url, cluster.ca_file,
                        lambda method, p: fault["answer"] if method == "GET" and p == path else None) as proxy:
            backend = live_backend(Settings(kubeconfig=str(kubeconfig(tmp_path / "proxied.yaml", proxy.url,
                                                                      cluster.token("admin")))))
            try:
                plan = planned(backend, node, [pod])
                drain = Driver(run_drain(plan,
                                         OpContext(backend.reader, backend.writer,
                                                   AuditLog(tmp_path / "a.jsonl", "t", "x"), poll_s=0.3)))
                drain.wait(lambda d: d.kinds(EventKind.EVICTED), 30, "the eviction")
                for status, said in FAULTS:
                    fault["answer"] = Answer(status, f"injected {status} on the pod's GET")
                    drain.wait(lambda d: [e for e in d.kinds(EventKind.PAUSED) if said in e.message], 30,  # noqa: B023 - called at once, in this iteration
                               f"a pause saying {said!r}")
                    assert ("GET", path, status) in proxy.answered
                    assert not drain.kinds(EventKind.GONE) and not drain.kinds(EventKind.DONE), drain.said()
                    live = core.read_namespaced_pod(name, ns)  # the API holds it all along
                    assert live.metadata.uid == uid and live.metadata.deletion_timestamp is not None
                fault["answer"] = None
                drain.wait(lambda d: d.kinds(EventKind.RESUMED), 30, "the drain resumed")
                resumed = len(drain.events)
                drain.wait(lambda d: len(d.kinds(EventKind.TICK)) >= 3 + sum(e.kind is EventKind.TICK
                                                                              for e in d.events[:resumed]),
                           30, "three polls answered by the API")
                assert not drain.kinds(EventKind.GONE), drain.said()  # terminating is not gone
                core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
                report = drain.join(60)
                assert report.outcome is Outcome.DRAINED and report.evicted == 1 and report.pauses == len(FAULTS)
                assert [e.message for e in drain.kinds(EventKind.GONE)] == ["gone (confirmed by the API)"]
            finally:
                backend.close()


def evictions(cluster, mark, ns: str) -> list[dict]:
    return [e for e in cluster.audit_events("admin", since=mark, verbs={"create"}, resource="pods")
            if e["objectRef"].get("subresource") == "eviction" and e["objectRef"].get("namespace") == ns]


def test_each_eviction_carries_the_pods_own_grace_period_unless_the_operator_set_one(cluster, fake_kubelet, tmp_path):
    """Read from each eviction's body in the apiserver's audit log: without --grace-period, no gracePeriodSeconds
    at all (the pod's own terminationGracePeriodSeconds applies); with --grace-period 1, exactly 1.

    Fails on this one-line mutation of gputui/cli/drain.py's _options: `grace_seconds=None if args.grace_period <
    0 else args.grace_period,` → `grace_seconds=max(args.grace_period, 0),` (0 sent by default: every pod
    killed at once, which the fake kubelet alone could not tell)."""
    ns, own, given = "t-evict-grace", "evict-grace-own", "evict-grace-given"
    with scene(cluster, fake_kubelet, ns, pool(own, given)) as (core, apps, _policy):
        placed = {node: place(core, apps, ns, batch_pods(node, ns, node, 2, grace_s=3), node, 2, spare=f"{node}-spare")
                  for node in (own, given)}
        for node, args, grace in ((own, (), None), (given, ("--grace-period", "1"), 1)):
            pods = placed[node]
            mark = cluster.audit_mark()
            out = run("drain", node, *args, "--kubeconfig", str(cluster.admin_kubeconfig), home=tmp_path)
            assert out.returncode == 0, out.stdout + out.stderr
            sent = wait_until(lambda: len(e := evictions(cluster, mark, ns)) >= 2 and e, 10, what="two evictions")  # noqa: B023 - called at once, in this iteration
            assert sorted(e["objectRef"]["name"] for e in sent) == sorted(p.metadata.name for p in pods)
            for event in sent:
                body = event.get("requestObject")
                assert body and body.get("kind") == "Eviction", event  # the body is logged: its absence means something
                assert (body.get("deleteOptions") or {}).get("gracePeriodSeconds") == grace, (node, body)


REFUSED = (  # (arguments after `drain NODE`, what the refusal says): each exit 2, nothing written
    (("--disable-eviction",), "--disable-eviction deletes pods past their PodDisruptionBudgets: it needs --force too"),
    (("--disable-eviction", "--confirm-delete", "{a}"), "it needs --force too"),
    (("--disable-eviction", "--force"), "--disable-eviction needs --confirm-delete with the same node names"),
    (("--disable-eviction", "--force", "--confirm-delete", "{b}"), "needs --confirm-delete with the same node names"),
    (("{b}", "--disable-eviction", "--force", "--confirm-delete", "{a}"), "needs --confirm-delete with the same node"),
    (("--disable-eviction", "--force", "--confirm-delete", "{a},{b}"), "needs --confirm-delete with the same node"),
)


def test_disable_eviction_needs_force_and_the_node_names_typed_again_then_deletes_only_their_pods(
        cluster, fake_kubelet, tmp_path):
    """Deleting past the Eviction API (and past a PodDisruptionBudget that refuses every eviction) is refused
    without --force, without --confirm-delete, and with a confirmation naming other nodes or fewer or more of
    them: exit 2, no write. With both, exactly the named node's pods are deleted (the apiserver's audit log: one
    DELETE per pod, no eviction), and the other node's pod is untouched.

    Fails on this one-line mutation of gputui/cli/drain.py's run: `if sorted(filter(None,
    args.confirm_delete.split(","))) != sorted(args.nodes):` → `if not args.confirm_delete:` (any confirmation
    taken: `drain A B --confirm-delete A` deletes B's pods too)."""
    ns, a, b = "t-evict-delete", "evict-delete-a", "evict-delete-b"
    with scene(cluster, fake_kubelet, ns, pool(a, b)) as (core, apps, policy):
        on_a = place(core, apps, ns, batch_pods("a-job", ns, a, 2), a, 2, spare=f"{a}-spare")
        (on_b,) = place(core, apps, ns, batch_pods("b-job", ns, b, 1), b, 1, spare=f"{b}-spare")
        policy.create_namespaced_pod_disruption_budget(ns, budget("a-pdb", "a-job", 2))  # no eviction ever allowed
        before = {n: node_annotations(core, n) for n in (a, b)}
        mine = lambda e: e["objectRef"].get("namespace") == ns or e["objectRef"].get("name") in (a, b)  # noqa: E731
        mark = cluster.audit_mark()
        for args, refusal in REFUSED:
            argv = [x.format(a=a, b=b) for x in args]
            out = run("drain", a, *argv, "--kubeconfig", str(cluster.admin_kubeconfig), home=tmp_path)
            assert out.returncode == 2 and refusal in out.stderr, (argv, out.stdout, out.stderr)
        assert app_writes(cluster, mark, keep=mine) == []
        assert {n: node_annotations(core, n) for n in (a, b)} == before

        mark = cluster.audit_mark()
        out = run("drain", a, "--disable-eviction", "--force", "--confirm-delete", a,
                  "--kubeconfig", str(cluster.admin_kubeconfig), home=tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr
        pod_writes = [brief(e) for e in app_writes(cluster, mark, keep=lambda e: e["objectRef"].get("resource") == "pods")]
        assert sorted(pod_writes) == sorted(("delete", "pods", ns, p.metadata.name, 200) for p in on_a), pod_writes
        # Each with the pod's own grace period: none asked, in the query (gputui's) or a body.
        deletes = [e for e in app_writes(cluster, mark) if e.get("verb") == "delete"]
        assert len(deletes) == 2 and not [e for e in deletes if "gracePeriodSeconds" in e["requestURI"]
                                          or "gracePeriodSeconds" in (e.get("requestObject") or {})], deletes
        assert not [e for e in app_writes(cluster, mark) if e["objectRef"].get("name") == b]  # node b untouched
        still = core.read_namespaced_pod(on_b.metadata.name, ns)
        assert still.metadata.uid == on_b.metadata.uid and still.metadata.deletion_timestamp is None
        assert not [p for p in core.list_namespaced_pod(ns).items if p.spec.node_name == a]
